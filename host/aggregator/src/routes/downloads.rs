//! What operators and agents download: plugin components (agents) and the finished bundle
//! (operators), streamed from disk; the bundle resumes from a byte range.

use bytes::Bytes;
use factbuoy_protocol::digest;
use factbuoy_protocol::types::ErrorBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode, header};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::http::{Rejection, full, reject};
use crate::live::shared::{ComponentSource, Shared};
use crate::serving::Body;

/// `GET` of a plugin component by its digest.
pub(crate) async fn component(shared: &Shared, sha256: &str) -> Result<Response<Body>, Rejection> {
    let not_found = || {
        reject(
            StatusCode::NOT_FOUND,
            "not-found",
            format!("no plugin component {sha256} in this run"),
        )
    };
    let storage =
        |e: std::io::Error| reject(StatusCode::INTERNAL_SERVER_ERROR, "storage", e.to_string());
    let (length, body) = match shared.component(sha256).ok_or_else(not_found)? {
        ComponentSource::Bundled(wasm) => (wasm.len() as u64, full(Bytes::from_static(wasm))),
        ComponentSource::Stored(path) => {
            let file = match tokio::fs::File::open(&path).await {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_found()),
                Err(e) => return Err(storage(e)),
            };
            let length = file.metadata().await.map_err(storage)?.len();
            let stream = tokio_util::io::ReaderStream::with_capacity(file, 256 << 10);
            let body = StreamBody::new(futures_util::StreamExt::map(stream, |chunk| {
                chunk.map(Frame::data)
            }))
            .boxed();
            (length, body)
        }
    };
    Ok(Response::builder()
        .header(header::CONTENT_TYPE, "application/wasm")
        .header(header::CONTENT_LENGTH, length)
        .body(body)
        .expect("a valid response"))
}

/// Serves the finished bundle, from an offset when the client asks for a range.
pub(crate) async fn bundle(
    shared: &Shared,
    request: &Request<Incoming>,
) -> Result<Response<Body>, Rejection> {
    let (status, tar_info) = {
        let state = shared.state.lock().unwrap();
        (state.status, state.tar_info.clone())
    };
    // A bundle exists once the run ended complete, or failed after packaging (interrupted).
    let Some(tar_info) = tar_info else {
        let spelled = serde_json::to_value(status).unwrap_or_default();
        return Err(reject(
            StatusCode::CONFLICT,
            "not-ready",
            format!(
                "the bundle is not ready: the run is {}",
                spelled.as_str().unwrap_or_default()
            ),
        ));
    };
    let path = shared.config.bundle_dir.join(&tar_info.name);
    let mut file = tokio::fs::File::open(&path).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            // Pruned (`factbuoy fleet prune`) or removed by hand after the run ended.
            reject(
                StatusCode::GONE,
                "gone",
                format!(
                    "the run's bundle {} was removed from the aggregator's host after the run ended (by `factbuoy fleet prune`, or by hand) and cannot be downloaded any more; a new run makes a new one",
                    tar_info.name
                ),
            )
        } else {
            reject(
                StatusCode::INTERNAL_SERVER_ERROR,
                "storage",
                format!("opening the bundle: {e}"),
            )
        }
    })?;
    let size = tar_info.size;
    let range = request
        .headers()
        .get(header::RANGE)
        .map(|v| v.to_str().unwrap_or_default());
    let (start, end, partial) = match range.map(|text| byte_range(text, size)) {
        None | Some(RangeAnswer::Whole) => (0, size, false),
        Some(RangeAnswer::Part(start, last)) => (start, last + 1, true),
        Some(RangeAnswer::Refused(why)) => {
            shared.metrics.reject("range");
            return Ok(Response::builder()
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::CONTENT_RANGE, format!("bytes */{size}"))
                .body(full(
                    serde_json::to_vec(&ErrorBody {
                        error: format!(
                            "{why}: the bundle has {size} bytes; ask for one range such as `bytes=N-`, `bytes=N-M` or `bytes=-N`"
                        ),
                    })
                    .expect("serialising an error"),
                ))
                .expect("a valid response"));
        }
    };
    file.seek(std::io::SeekFrom::Start(start))
        .await
        .map_err(|e| reject(StatusCode::INTERNAL_SERVER_ERROR, "storage", e.to_string()))?;
    let stream = tokio_util::io::ReaderStream::with_capacity(file.take(end - start), 256 << 10);
    let body = StreamBody::new(futures_util::StreamExt::map(stream, |chunk| {
        chunk.map(Frame::data)
    }))
    .boxed();
    let mut response = Response::builder()
        .header(header::CONTENT_TYPE, "application/gzip")
        .header(header::CONTENT_LENGTH, end - start)
        .header(header::ACCEPT_RANGES, "bytes")
        .header(
            "content-digest",
            digest::header_value(&tar_info.sha256).unwrap_or_default(),
        );
    if partial {
        response = response.status(StatusCode::PARTIAL_CONTENT).header(
            header::CONTENT_RANGE,
            format!("bytes {start}-{}/{size}", end - 1),
        );
    }
    Ok(response.body(body).expect("a valid response"))
}

/// How a `Range` header is answered (RFC 9110, section 14).
#[derive(Debug, PartialEq, Eq)]
enum RangeAnswer {
    /// Serve the whole bundle with 200: a unit other than `bytes`, which must be ignored, or
    /// several ranges, which a server may ignore (no multipart answers are made).
    Whole,
    /// Serve bytes `start..=last` with 206.
    Part(u64, u64),
    /// Answer 416: unsatisfiable, or malformed (which a server may refuse); holds why.
    Refused(String),
}

fn byte_range(text: &str, size: u64) -> RangeAnswer {
    use http_range_header::{RangeInvalid, RangeUnsatisfiableError};
    let ranges =
        http_range_header::parse_range_header(text).and_then(|parsed| parsed.validate(size));
    match ranges.as_deref() {
        Ok([one]) => RangeAnswer::Part(*one.start(), *one.end()),
        Ok(_) => RangeAnswer::Whole,
        Err(RangeUnsatisfiableError::Invalid(RangeInvalid::DoesNotStartWithToken)) => {
            RangeAnswer::Whole
        }
        Err(e) => RangeAnswer::Refused(format!("{e} ({text:?})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_rfc_9110() {
        use RangeAnswer::*;
        assert_eq!(byte_range("bytes=100-", 1000), Part(100, 999));
        assert_eq!(byte_range("bytes=0-0", 1000), Part(0, 0));
        assert_eq!(byte_range("bytes=5-9", 1000), Part(5, 9));
        assert_eq!(byte_range("bytes=990-5000", 1000), Part(990, 999));
        assert_eq!(byte_range("bytes=-5", 1000), Part(995, 999));
        assert_eq!(byte_range("bytes=-5000", 1000), Part(0, 999));
        assert_eq!(byte_range("items=1-", 1000), Whole);
        assert_eq!(byte_range("bytes=0-1,5-6", 1000), Whole);
        assert_eq!(byte_range("bytes=0-5,3-8", 1000), Whole);
        for refused in ["bytes=10-5", "bytes=1000-", "bytes=-0", "bytes=x-"] {
            assert!(matches!(byte_range(refused, 1000), Refused(_)), "{refused}");
        }
    }
}

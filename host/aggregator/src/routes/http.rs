//! What every route shares: a rejection (a JSON error answer, counted by reason), the common
//! answers, and request bodies read under the upload pace rules. The fleet's routes use it too.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode, header};

use crate::model::config::ServerLimits;
use crate::persistence::files::is_disk_full;
use crate::serving::Body;
use crate::upload::{Pace, UploadError};

/// A response that ends a request early: its status, the reason it is counted under in the
/// metrics, and the message of its `{"error": ...}` body.
pub(crate) struct Rejection {
    /// The answer's status.
    pub(crate) status: StatusCode,
    /// The `reason` label of `rejections_total` it is counted under.
    pub(crate) reason: &'static str,
    /// What went wrong and what to do, for the `{"error": ...}` body.
    pub(crate) message: String,
}

/// A rejection with `status`, counted under `reason`, saying `message`.
pub(crate) fn reject(
    status: StatusCode,
    reason: &'static str,
    message: impl Into<String>,
) -> Rejection {
    Rejection {
        status,
        reason,
        message: message.into(),
    }
}

/// A JSON answer.
pub(crate) fn json_response(status: StatusCode, value: &impl serde::Serialize) -> Response<Body> {
    let bytes = serde_json::to_vec(value).expect("serialising a response");
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(full(bytes))
        .expect("a valid response")
}

/// Metrics in the Prometheus text format.
pub(crate) fn metrics_response(text: String) -> Response<Body> {
    Response::builder()
        .header(header::CONTENT_TYPE, "text/plain; version=0.0.4")
        .body(full(text))
        .expect("a valid response")
}

/// A whole body.
pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// An answer without a body.
pub(crate) fn empty(status: StatusCode) -> Response<Body> {
    Response::builder()
        .status(status)
        .body(full(Bytes::new()))
        .expect("a valid response")
}

/// The answer to an upload that could not be stored.
pub(crate) fn upload_rejection(e: UploadError) -> Rejection {
    let (status, reason) = match &e {
        UploadError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "too-large"),
        UploadError::Stalled(_) | UploadError::TooSlow { .. } => {
            (StatusCode::REQUEST_TIMEOUT, "too-slow")
        }
        UploadError::DigestMismatch { .. } => (StatusCode::BAD_REQUEST, "digest-mismatch"),
        UploadError::Interrupted(_) => (StatusCode::BAD_REQUEST, "interrupted"),
        UploadError::Io(e) if is_disk_full(e) => (StatusCode::INSUFFICIENT_STORAGE, "disk-full"),
        UploadError::Io(_) => (StatusCode::INTERNAL_SERVER_ERROR, "storage"),
    };
    reject(status, reason, e.to_string())
}

/// The JSON body of `request`, at most `limits.max_json_bytes` long.
pub(crate) async fn read_json<T: serde::de::DeserializeOwned>(
    limits: &ServerLimits,
    request: Request<Incoming>,
) -> Result<T, Rejection> {
    read_json_within(limits, request, limits.max_json_bytes).await
}

/// The JSON body of `request`, at most `limit` bytes long.
pub(crate) async fn read_json_within<T: serde::de::DeserializeOwned>(
    limits: &ServerLimits,
    request: Request<Incoming>,
    limit: u64,
) -> Result<T, Rejection> {
    let mut body = request.into_body();
    let mut bytes = Vec::new();
    // The same pace rules as file uploads: a slow body must not hold a connection slot.
    let mut pace = Pace::new(limits);
    while let Some(data) = pace.next(&mut body).await.map_err(|e| match e {
        UploadError::Interrupted(_) => {
            reject(StatusCode::BAD_REQUEST, "interrupted", e.to_string())
        }
        _ => reject(StatusCode::REQUEST_TIMEOUT, "too-slow", e.to_string()),
    })? {
        if (bytes.len() + data.len()) as u64 > limit {
            return Err(reject(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too-large",
                format!("the JSON body is larger than {limit} bytes"),
            ));
        }
        bytes.extend_from_slice(&data);
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        reject(
            StatusCode::BAD_REQUEST,
            "bad-json",
            format!("the body is not the expected JSON: {e}"),
        )
    })
}

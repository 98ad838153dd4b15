//! Artifacts printed on a terminal by `plugin run`: JSON indented for people to read, the rest
//! as written. Piped, the artifacts are the plugin's bytes unchanged ([`StdoutSink`]).
//!
//! [`StdoutSink`]: factbuoy_runtime::sink::StdoutSink

use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;

use factbuoy_protocol::names::ArtifactName;
use factbuoy_runtime::sink::{ArtifactSink, ArtifactWriter};

/// The largest JSON artifact held to be indented; a larger one is printed as written, since no
/// one reads that much on a terminal and it is not worth the memory.
const PRETTY_MAX_BYTES: usize = 16 << 20;

/// Prints JSON artifacts indented once whole, and every other artifact as it is written.
pub struct TerminalSink;

impl ArtifactSink for TerminalSink {
    fn create(&self, _name: &ArtifactName, media_type: &str) -> std::io::Result<ArtifactWriter> {
        if is_json(media_type) {
            Ok(Box::pin(PrettyJson::default()))
        } else {
            Ok(Box::pin(tokio::io::stdout()))
        }
    }
}

/// `application/json` and the `+json` types (`application/schema+json`), parameters aside.
fn is_json(media_type: &str) -> bool {
    let essence = media_type.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json") || essence.ends_with("+json")
}

/// One JSON artifact, held until it is finished, then indented.
#[derive(Default)]
struct PrettyJson {
    held: Vec<u8>,
    /// Past [`PRETTY_MAX_BYTES`]: what was held has been printed, the rest goes straight out.
    passing_through: bool,
}

impl AsyncWrite for PrettyJson {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if !self.passing_through && self.held.len() + buf.len() > PRETTY_MAX_BYTES {
            let held = std::mem::take(&mut self.held);
            self.passing_through = true;
            std::io::stdout().lock().write_all(&held)?;
        }
        if self.passing_through {
            std::io::stdout().lock().write_all(buf)?;
        } else {
            self.held.extend_from_slice(buf);
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(std::io::stdout().lock().flush())
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let held = std::mem::take(&mut self.held);
        if !held.is_empty() {
            let mut stdout = std::io::stdout().lock();
            match indented(&held) {
                Some(text) => stdout.write_all(&text)?,
                None => stdout.write_all(&held)?,
            }
            stdout.flush()?;
        }
        Poll::Ready(Ok(()))
    }
}

/// `json` indented, its keys in their order, with a final newline; `None`
/// when it is not one JSON document (then it is printed as the plugin wrote it).
fn indented(json: &[u8]) -> Option<Vec<u8>> {
    let mut text = Vec::with_capacity(json.len() * 2);
    let mut reader = serde_json::Deserializer::from_slice(json);
    let mut writer = serde_json::Serializer::pretty(&mut text);
    serde_transcode::transcode(&mut reader, &mut writer).ok()?;
    reader.end().ok()?;
    text.push(b'\n');
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indents_one_document_in_its_order_and_leaves_anything_else_alone() {
        assert_eq!(
            indented(b"{\"b\":[1,2.5],\"a\":{}}\n").unwrap(),
            b"{\n  \"b\": [\n    1,\n    2.5\n  ],\n  \"a\": {}\n}\n"
        );
        assert_eq!(indented(b"{\"a\":1}\n{\"a\":2}\n"), None);
        assert_eq!(indented(b"{\"a\":"), None);
    }

    #[test]
    fn json_media_types_are_told_by_their_essence() {
        assert!(is_json("application/json"));
        assert!(is_json("application/json; charset=utf-8"));
        assert!(is_json("application/schema+json"));
        assert!(!is_json("application/x-ndjson"));
        assert!(!is_json("text/plain"));
    }
}

//! Bounded capture of a plugin's stdout and stderr.
//!
//! The first `limit` bytes are kept, and so is a short tail, because a Rust panic message is the
//! last thing a crashing plugin prints. Everything past the limit is counted and dropped: a
//! chatty plugin loses its chatter, never its run.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// Bytes of the end of the stream kept even after the limit is reached.
pub const TAIL_BYTES: usize = 4096;
/// How much the guest may write per call; writes never block.
const WRITE_BUDGET: usize = 64 * 1024;

/// What a run captured from one stream, for the report.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Captured {
    /// The first bytes, up to the limit, as lossy UTF-8.
    pub text: String,
    /// Total bytes the plugin wrote, kept or not.
    pub total_bytes: u64,
    /// The stream went past the limit; `tail` holds its last bytes.
    pub truncated: bool,
    /// The last bytes past the limit (at most [`TAIL_BYTES`]), as lossy UTF-8; only when truncated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tail: Option<String>,
}

#[derive(Debug, Default)]
struct Buffer {
    head: Vec<u8>,
    tail: Vec<u8>,
    total: u64,
}

/// A stream a plugin's stdout or stderr is connected to. Cheap to clone; all clones share one
/// buffer.
#[derive(Debug, Clone)]
pub struct CaptureStream {
    limit: usize,
    buffer: Arc<Mutex<Buffer>>,
}

impl CaptureStream {
    /// A stream that keeps the first `limit` bytes, and the last [`TAIL_BYTES`] past them.
    pub fn new(limit: usize) -> Self {
        CaptureStream {
            limit,
            buffer: Arc::default(),
        }
    }

    fn append(&self, bytes: &[u8]) {
        let mut buf = self.buffer.lock().unwrap();
        buf.total += bytes.len() as u64;
        let room = self.limit.saturating_sub(buf.head.len());
        let (kept, rest) = bytes.split_at(bytes.len().min(room));
        buf.head.extend_from_slice(kept);
        if !rest.is_empty() {
            buf.tail.extend_from_slice(rest);
            let excess = buf.tail.len().saturating_sub(TAIL_BYTES);
            buf.tail.drain(..excess);
        }
    }

    /// What was captured so far.
    pub fn snapshot(&self) -> Captured {
        let buf = self.buffer.lock().unwrap();
        let truncated = buf.total > buf.head.len() as u64;
        Captured {
            text: String::from_utf8_lossy(&buf.head).into_owned(),
            total_bytes: buf.total,
            truncated,
            tail: truncated.then(|| String::from_utf8_lossy(&buf.tail).into_owned()),
        }
    }

    /// The last bytes written, whether or not they fell within the limit.
    pub fn last_text(&self, max: usize) -> String {
        let buf = self.buffer.lock().unwrap();
        let source = if buf.tail.is_empty() {
            &buf.head
        } else {
            &buf.tail
        };
        let start = source.len().saturating_sub(max);
        String::from_utf8_lossy(&source[start..]).into_owned()
    }
}

impl IsTerminal for CaptureStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CaptureStream {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for CaptureStream {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(WRITE_BUDGET)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CaptureStream {
    async fn ready(&mut self) {}
}

impl AsyncWrite for CaptureStream {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_head_and_the_tail_and_counts_everything() {
        let stream = CaptureStream::new(8);
        stream.append(b"0123456789");
        stream.append(&[b'x'; TAIL_BYTES]);
        stream.append(b"the end");
        let captured = stream.snapshot();
        assert_eq!(captured.text, "01234567");
        assert_eq!(captured.total_bytes, 10 + TAIL_BYTES as u64 + 7);
        assert!(captured.truncated);
        let tail = captured.tail.unwrap();
        assert_eq!(tail.len(), TAIL_BYTES);
        assert!(tail.ends_with("xthe end"));
        assert_eq!(stream.last_text(7), "the end");
    }

    #[test]
    fn short_output_is_not_truncated() {
        let stream = CaptureStream::new(64);
        stream.append(b"hello\n");
        let captured = stream.snapshot();
        assert_eq!(
            (captured.text.as_str(), captured.truncated),
            ("hello\n", false)
        );
        assert_eq!(captured.tail, None);
        assert_eq!(stream.last_text(3), "lo\n");
    }
}

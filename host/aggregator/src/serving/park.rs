//! Parked long polls (docs/protocol.md, "Parked polls"): a fleet agent's poll that nothing
//! answers yet is answered `101 Switching Protocols`, and its connection leaves hyper until
//! there is something to say. hyper keeps an 8 KiB read buffer and an 8 KiB header buffer for
//! every connection it serves; a parked one is only its TLS stream, a task and the wait.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use factbuoy_protocol::fleet::{IDLE_ACK, Wake};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

/// One period of a parked poll's wait: [`Wake::Changed`], or [`Wake::Idle`] at its end.
pub(crate) type Wait = Pin<Box<dyn Future<Output = Wake> + Send>>;

/// How long an agent has to acknowledge an `idle` line before its connection is closed.
const ACK_TIMEOUT: Duration = Duration::from_secs(30);

/// A poll a route parked: the upgrade its `101` answer starts, and its wait.
pub(crate) struct Park {
    pub(crate) upgrade: OnUpgrade,
    /// Makes the wait of the next period.
    pub(crate) wait: Box<dyn FnMut() -> Wait + Send>,
    /// Told each time the agent acknowledges an `idle` line: it is there.
    pub(crate) alive: Box<dyn Fn() + Send>,
}

/// Where a route leaves its [`Park`] for the connection's task, which takes it once hyper has
/// written the `101` and handed the stream back.
#[derive(Default)]
pub(crate) struct ParkSlot(Mutex<Option<Park>>);

impl ParkSlot {
    pub(crate) fn park(&self, park: Park) {
        *self.0.lock().unwrap() = Some(park);
    }

    pub(crate) fn take(&self) -> Option<Park> {
        self.0.lock().unwrap().take()
    }
}

impl std::fmt::Debug for ParkSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ParkSlot")
    }
}

/// Holds the parked stream `S` (the type the connection was served over), writing a [`Wake`]
/// line at the end of each wait, until one is [`Wake::Changed`] (the stream is handed back for
/// HTTP/1.1) or the connection's lifetime ends at `until` ([`Wake::Close`]). An agent that
/// breaks the protocol is closed: it closed the connection, sent bytes other than an
/// acknowledgement, or did not acknowledge an `idle` line in time.
pub(crate) async fn hold<S>(mut park: Park, until: Instant) -> Option<Box<TokioIo<S>>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let upgraded = park.upgrade.await.ok()?;
    let hyper::upgrade::Parts { io, read_buf, .. } = upgraded.downcast::<TokioIo<S>>().ok()?;
    if !read_buf.is_empty() {
        tracing::debug!("an agent sent bytes after its parked poll's request; closing");
        return None;
    }
    // What is left of hyper's read buffer (8 KiB) would stay as long as the poll is parked.
    drop(read_buf);
    // Boxed: the stream takes no room in the connection's task while hyper serves it.
    let mut stream = Box::new(io);
    loop {
        let wake = {
            let mut probe = [0u8; 1];
            tokio::select! {
                wake = (park.wait)() => wake,
                _ = stream.inner_mut().read(&mut probe) => {
                    tracing::debug!("an agent closed or wrote on its parked poll; closing");
                    return None;
                }
                _ = tokio::time::sleep_until(until) => Wake::Close,
            }
        };
        let io = stream.inner_mut();
        io.write_all(wake.line()).await.ok()?;
        io.flush().await.ok()?;
        match wake {
            Wake::Changed => return Some(stream),
            Wake::Close => {
                let _ = io.shutdown().await;
                return None;
            }
            Wake::Idle => {
                let mut ack = [0u8; 1];
                match tokio::time::timeout(ACK_TIMEOUT, io.read(&mut ack)).await {
                    Ok(Ok(1)) if ack == IDLE_ACK => (park.alive)(),
                    _ => {
                        tracing::debug!("an agent did not acknowledge its parked poll; closing");
                        return None;
                    }
                }
            }
        }
    }
}

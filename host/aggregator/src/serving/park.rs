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

/// Ends once a parked poll has an answer (the agent is told [`Wake::Changed`]).
pub(crate) type Answered = Pin<Box<dyn Future<Output = ()> + Send>>;

/// How long an agent has to acknowledge an `idle` line before its connection is closed.
const ACK_TIMEOUT: Duration = Duration::from_secs(30);

/// A poll a route parked: the upgrade its `101` answer starts, and its wait.
pub(crate) struct Park {
    pub(crate) upgrade: OnUpgrade,
    /// The time between `idle` lines.
    pub(crate) period: Duration,
    /// The wait for an answer: one wait, polled across all the park's periods.
    pub(crate) answered: Answered,
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
/// line at the end of each period, until the poll is answered ([`Wake::Changed`]: the stream is
/// handed back for HTTP/1.1) or the connection's lifetime ends at `until` ([`Wake::Close`]). An
/// agent that breaks the protocol is closed: it closed the connection, sent bytes other than an
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
            let idle = Instant::now() + park.period;
            tokio::select! {
                () = &mut park.answered => Wake::Changed,
                _ = stream.inner_mut().read(&mut probe) => {
                    tracing::debug!("an agent closed or wrote on its parked poll; closing");
                    return None;
                }
                _ = tokio::time::sleep_until(until) => Wake::Close,
                _ = tokio::time::sleep_until(idle) => Wake::Idle,
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

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use hyper::body::Incoming;
    use hyper::{Request, Response, StatusCode};
    use tokio::io::{AsyncBufReadExt, BufReader, DuplexStream};
    use tokio::task::JoinHandle;

    use factbuoy_protocol::fleet::PARKED_POLL;

    use super::*;

    /// The agent's end of a parked poll, and what it is told.
    struct Agent {
        stream: BufReader<DuplexStream>,
        parked_at: Instant,
    }

    impl Agent {
        /// The next line, and when it came (since the park), or `None` at the end of the stream.
        async fn line(&mut self) -> Option<(String, Duration)> {
            let mut line = String::new();
            let read = self.stream.read_line(&mut line).await.unwrap();
            (read > 0).then(|| (line, self.parked_at.elapsed()))
        }

        async fn acknowledge(&mut self) {
            self.stream.get_mut().write_all(IDLE_ACK).await.unwrap();
        }

        /// Expects an `idle` line at each of `seconds` since the park, and acknowledges each.
        async fn acknowledge_idle_at(&mut self, seconds: &[u64]) {
            for &at in seconds {
                let (line, when) = self.line().await.expect("an idle line");
                assert_eq!((line.as_str(), when.as_secs()), ("idle\n", at));
                self.acknowledge().await;
            }
        }
    }

    /// Parks a poll served by hyper over an in-memory stream, idle every `period`, for a
    /// connection that lives `lifetime`, answered when `answered` ends. The task ends with
    /// whether the stream was handed back for HTTP.
    async fn park(
        period: Duration,
        lifetime: Duration,
        answered: Answered,
        alive: Arc<AtomicUsize>,
    ) -> (Agent, JoinHandle<bool>) {
        let (fleet_end, agent_end) = tokio::io::duplex(4096);
        let fleet = tokio::spawn(async move {
            let until = Instant::now() + lifetime;
            let upgrade = Arc::new(std::sync::Mutex::new(None));
            let service = {
                let upgrade = upgrade.clone();
                hyper::service::service_fn(move |mut request: Request<Incoming>| {
                    *upgrade.lock().unwrap() = Some(hyper::upgrade::on(&mut request));
                    let mut switching = Response::new(String::new());
                    *switching.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
                    let headers = switching.headers_mut();
                    headers.insert("connection", "upgrade".parse().unwrap());
                    headers.insert("upgrade", PARKED_POLL.parse().unwrap());
                    async move { Ok::<_, Infallible>(switching) }
                })
            };
            hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(fleet_end), service)
                .with_upgrades()
                .await
                .unwrap();
            let park = Park {
                upgrade: upgrade.lock().unwrap().take().unwrap(),
                period,
                answered,
                alive: Box::new(move || {
                    alive.fetch_add(1, Ordering::SeqCst);
                }),
            };
            hold::<DuplexStream>(park, until).await.is_some()
        });
        let mut stream = BufReader::new(agent_end);
        let request = format!(
            "GET /v1/fleet/next-run HTTP/1.1\r\nhost: fleet\r\n\
             connection: upgrade\r\nupgrade: {PARKED_POLL}\r\n\r\n"
        );
        stream
            .get_mut()
            .write_all(request.as_bytes())
            .await
            .unwrap();
        let mut head = String::new();
        while !head.ends_with("\r\n\r\n") {
            assert!(stream.read_line(&mut head).await.unwrap() > 0, "{head}");
        }
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        let agent = Agent {
            stream,
            parked_at: Instant::now(),
        };
        (agent, fleet)
    }

    fn never() -> Answered {
        Box::pin(std::future::pending())
    }

    const PERIOD: Duration = Duration::from_secs(10);

    #[tokio::test(start_paused = true)]
    async fn a_parked_poll_is_told_idle_each_period_and_close_at_the_connections_lifetime() {
        let alive = Arc::new(AtomicUsize::new(0));
        let (mut agent, fleet) =
            park(PERIOD, Duration::from_secs(25), never(), alive.clone()).await;
        agent.acknowledge_idle_at(&[10, 20]).await;
        let (line, when) = agent.line().await.expect("a close line");
        assert_eq!((line.as_str(), when.as_secs()), ("close\n", 25));
        assert_eq!(
            agent.line().await,
            None,
            "the connection stays open after close"
        );
        assert!(
            !fleet.await.unwrap(),
            "a closed poll was handed back for HTTP"
        );
        assert_eq!(alive.load(Ordering::SeqCst), 2, "acknowledgements counted");
    }

    #[tokio::test(start_paused = true)]
    async fn an_agent_that_does_not_acknowledge_idle_within_thirty_seconds_is_closed() {
        let alive = Arc::new(AtomicUsize::new(0));
        let (mut agent, fleet) =
            park(PERIOD, Duration::from_secs(900), never(), alive.clone()).await;
        let (line, _) = agent.line().await.expect("an idle line");
        assert_eq!(line, "idle\n");
        let closed = tokio::time::timeout(Duration::from_secs(60), agent.line()).await;
        assert_eq!(closed, Ok(None), "an unacknowledged poll was not closed");
        let at = agent.parked_at.elapsed();
        assert!(at >= PERIOD + ACK_TIMEOUT, "closed after {at:?}");
        assert!(!fleet.await.unwrap());
        assert_eq!(alive.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_that_comes_periods_later_wakes_the_poll_and_hands_it_back_for_http() {
        let alive = Arc::new(AtomicUsize::new(0));
        // One wait across the periods: it is not begun again when a period ends.
        let answered = Box::pin(tokio::time::sleep(Duration::from_secs(25)));
        let (mut agent, fleet) =
            park(PERIOD, Duration::from_secs(900), answered, alive.clone()).await;
        agent.acknowledge_idle_at(&[10, 20]).await;
        let (line, when) = agent.line().await.expect("a changed line");
        assert_eq!((line.as_str(), when.as_secs()), ("changed\n", 25));
        assert!(
            fleet.await.unwrap(),
            "an answered poll was not handed back for HTTP"
        );
        assert_eq!(alive.load(Ordering::SeqCst), 2);
    }
}

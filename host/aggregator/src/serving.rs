//! The HTTPS listeners, for a run's two and for a fleet's: binding with a deep accept queue,
//! TLS (the certificate's role handed to every request), and limits on connections, request
//! heads and slow clients. What a request is answered is the routes' business, passed in.
//!
//! Connections are counted in budgets of their own, so that no kind of client can take the
//! slots another needs ([`Budget`]). One that has not finished its TLS handshake holds a
//! handshake slot for at most the head timeout; when every handshake slot is taken, the oldest
//! handshake is dropped to make room, so silent or slow clients cannot keep others from shaking
//! hands. A finished handshake then takes a slot by what its certificate says: clients without
//! one (joining a fleet, enrolling in a run) share the anonymous slots, where the newest drops
//! the oldest as handshakes do; operators have slots of their own; agents take the rest. So
//! anonymous clients never starve agents and operators that have authenticated, and cannot hold
//! their own slots against a newcomer either. Every budget fits under the process's descriptor
//! limit ([`budget`]).
//!
//! Every connection is also bounded in time: a response that makes no progress for the write
//! timeout (a client that stops reading, or pipelines requests and never reads the answers)
//! closes it; a kept connection waits for its next request only as long as the head timeout; a
//! connection without a certificate is cut at its lifetime, and one with a certificate is closed
//! at its own once its request in flight is answered.
//!
//! A fleet agent's long poll may leave HTTP while nothing answers it, and come back to it on the
//! same connection ([`park`]): hyper's buffers are freed in between.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use factbuoy_pki::role_of;
use factbuoy_protocol::identity::Role;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use sha2::Digest;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio::time::Sleep;
use tokio_rustls::TlsAcceptor;

use crate::model::config::ServerLimits;

pub(crate) mod park;

use park::ParkSlot;

/// The body of every response: whole JSON or text, or a file streamed from disk.
pub(crate) type Body = BoxBody<Bytes, std::io::Error>;

/// Connections the kernel holds for the aggregator before it accepts them. Agents arrive in
/// bursts (a whole cluster starts at once); with the default of 128 the queue overflowed under
/// 512 uploads in flight, and each dropped connection cost its agent a one-second SYN retry.
/// Linux caps it at `net.core.somaxconn`.
const LISTEN_BACKLOG: u32 = 4096;

/// A listener on `address` with the aggregator's accept queue ([`LISTEN_BACKLOG`]).
pub(crate) fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // As TcpListener::bind does: a restarted aggregator must get its port back at once.
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Descriptors kept for everything but connections: the run directory, logs, the blocking
/// pool's file-system work, the listeners.
const RESERVED_DESCRIPTORS: u64 = 64;
/// The fewest handshake slots, and the fewest anonymous slots, a listener has.
const MIN_HANDSHAKES: usize = 8;
/// The fewest operator slots a listener has.
const MIN_OPERATORS: usize = 8;

/// How many connections one listener holds at once, by who is at the other end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Connections that finished their handshake with a certificate that is not an operator's:
    /// agents, the runner of global plugins.
    pub(crate) connections: usize,
    /// Connections still in their TLS handshake.
    pub(crate) handshakes: usize,
    /// Connections that finished their handshake without a certificate.
    pub(crate) anonymous: usize,
    /// Connections that finished their handshake with an operator's certificate.
    pub(crate) operators: usize,
}

impl Budget {
    /// The budget with `connections` agent slots, and the others in proportion.
    fn with_connections(connections: usize) -> Budget {
        Budget {
            connections,
            handshakes: (connections / 4).max(MIN_HANDSHAKES),
            anonymous: (connections / 4).max(MIN_HANDSHAKES),
            operators: (connections / 16).max(MIN_OPERATORS),
        }
    }

    /// Descriptors the budget may hold at once, when a served agent connection takes
    /// `per_connection` (its socket, and an upload's file) and every other kind one (operators
    /// two: a bundle download's file).
    fn descriptors(&self, per_connection: u64) -> u64 {
        let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        count(self.connections) * per_connection
            + count(self.handshakes)
            + count(self.anonymous)
            + count(self.operators) * 2
    }
}

/// The budget of each of a run's two listeners for a configured cap of `max_connections`
/// (agent connections), with a warning when the descriptor limit lowers it. Raises the soft
/// descriptor limit to the hard one first (as nginx does), then lowers the cap until both
/// listeners' connections fit: a served agent connection takes two descriptors (its socket and
/// an upload's file). Running out of descriptors would refuse every client at accept instead.
pub(crate) fn budget(max_connections: usize) -> Budget {
    let (budget, lowered) = budget_within(max_connections, max_connections, 2);
    if let Some(warning) = lowered {
        tracing::warn!("{warning}");
    }
    budget
}

/// The budgets of a fleet: of its own listener, which holds an idle long poll per agent, each
/// connection one descriptor (agents upload nothing to it; an operator's rare plugin upload
/// takes one more), and of each of its runs' listeners, as [`budget`] makes them. The fleet's
/// listener holds as many agents as its half of the descriptors does, `max_connections` or
/// more: an idle long poll costs less than an upload, and every machine of the fleet holds one
/// all the time. Warns once, here, when the descriptor limit lowers a budget below
/// `max_connections`, rather than at every run.
pub(crate) fn fleet_budgets(max_connections: usize) -> (Budget, Budget) {
    let (fleet, fleet_lowered) = budget_within(usize::MAX, max_connections, 1);
    let (runs, runs_lowered) = budget_within(max_connections, max_connections, 2);
    if let Some(warning) = fleet_lowered.or(runs_lowered) {
        tracing::warn!(
            "{warning} (the fleet's listener {} connections, each run's listeners {})",
            fleet.connections,
            runs.connections
        );
    }
    (fleet, runs)
}

/// The budget of a listener that may use half the process's descriptors, for at most
/// `max_connections` agent connections that take `per_connection` each once served; with the
/// warning to give when the descriptor limit lowered it below `wanted`.
fn budget_within(
    max_connections: usize,
    wanted: usize,
    per_connection: u64,
) -> (Budget, Option<String>) {
    let limit = raise_descriptor_limit();
    let per_listener = limit.saturating_sub(RESERVED_DESCRIPTORS) / 2;
    let connections = fit(max_connections, per_listener, per_connection);
    let lowered = (connections < wanted).then(|| {
        format!(
            "serving at most {connections} agent connections per listener instead of \
             {wanted}: the process may open {limit} files; raise the hard limit \
             (ulimit -Hn, LimitNOFILE=) to serve more"
        )
    });
    (Budget::with_connections(connections), lowered)
}

/// The most agent connections, at most `max_connections`, whose [`Budget`] holds at most
/// `per_listener` descriptors (at least one connection, whatever it holds).
fn fit(max_connections: usize, per_listener: u64, per_connection: u64) -> usize {
    let fits = |connections: usize| {
        Budget::with_connections(connections).descriptors(per_connection) <= per_listener
    };
    // Each connection takes `per_connection` at least: no more than this can fit.
    let most = usize::try_from(per_listener / per_connection.max(1)).unwrap_or(usize::MAX);
    // A budget's descriptors grow with its connections: the last count that fits, by halves.
    let (mut low, mut high) = (1, max_connections.clamp(1, most.max(1)));
    while low < high {
        let middle = low + (high - low).div_ceil(2);
        if fits(middle) {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    low
}

/// Raises the soft limit on open files to the hard limit; returns the soft limit now in force.
fn raise_descriptor_limit() -> u64 {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limits = getrlimit(Resource::Nofile);
    if limits.current != limits.maximum {
        let raised = Rlimit {
            current: limits.maximum,
            maximum: limits.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!("raising the open-file limit to the hard limit: {e}");
        }
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Slots where the newest drops the oldest when all are taken: handshakes, and anonymous
/// connections. Each holder waits on its receiver, which ends when it is dropped.
struct Evicting {
    capacity: usize,
    next: u64,
    held: BTreeMap<u64, oneshot::Sender<()>>,
}

impl Evicting {
    fn new(capacity: usize) -> Self {
        Evicting {
            capacity: capacity.max(1),
            next: 0,
            held: BTreeMap::new(),
        }
    }

    /// Takes a slot: its id, the receiver that ends when it is dropped, and whether an older
    /// holder was dropped for it.
    fn take(&mut self) -> (u64, oneshot::Receiver<()>, bool) {
        let mut evicted = false;
        if self.held.len() >= self.capacity {
            // Dropping its sender ends the oldest holder.
            self.held.pop_first();
            evicted = true;
        }
        let (sender, receiver) = oneshot::channel();
        let id = self.next;
        self.next += 1;
        self.held.insert(id, sender);
        (id, receiver, evicted)
    }

    fn give_back(&mut self, id: u64) {
        self.held.remove(&id);
    }
}

/// A slot in an [`Evicting`] pool, given back when dropped.
struct EvictingSlot {
    pool: Arc<Mutex<Evicting>>,
    id: u64,
}

impl EvictingSlot {
    /// Takes a slot of `pool`; counts `evicted_reason` when an older holder was dropped for it.
    fn take(
        pool: &Arc<Mutex<Evicting>>,
        reject: &Reject,
        evicted_reason: &'static str,
    ) -> (Self, oneshot::Receiver<()>) {
        let (id, receiver, evicted) = pool.lock().unwrap().take();
        if evicted {
            reject(evicted_reason);
        }
        (
            EvictingSlot {
                pool: pool.clone(),
                id,
            },
            receiver,
        )
    }
}

impl Drop for EvictingSlot {
    fn drop(&mut self) {
        self.pool.lock().unwrap().give_back(self.id);
    }
}

/// The stream a listener serves HTTP over.
type Tls = WriteTimeout<tokio_rustls::server::TlsStream<tokio::net::TcpStream>>;

/// Who is at the other end of a connection, as its TLS handshake showed.
#[derive(Debug)]
pub(crate) struct Peer {
    /// The factbuoy role its certificate carries, if any.
    pub(crate) role: Option<Role>,
    /// Its certificate's sha-256 (lowercase hex), if it presented one: all a route needs of
    /// it, and a copy of the certificate would cost every idle connection its size again.
    pub(crate) certificate_sha256: Option<String>,
    /// Its address.
    pub(crate) address: SocketAddr,
    /// A long poll a route parked on the connection, if any ([`park`]).
    pub(crate) parked: ParkSlot,
}

/// Counts a refused connection under its reason.
pub(crate) type Reject = Arc<dyn Fn(&'static str) + Send + Sync>;

/// The slots of one listener, by kind of client.
struct Slots {
    handshakes: Arc<Mutex<Evicting>>,
    anonymous: Arc<Mutex<Evicting>>,
    agents: Arc<Semaphore>,
    operators: Arc<Semaphore>,
}

/// The slot a served connection holds until it ends.
enum Held {
    /// An agent's or an operator's.
    Counted(OwnedSemaphorePermit),
    /// An anonymous client's, dropped for a newer one when all are taken.
    Anonymous(EvictingSlot, oneshot::Receiver<()>),
}

/// Accepts connections until the task is dropped, under `limits` and `budget`, and answers each
/// request with `handle`: the run's listeners and the fleet's.
pub(crate) async fn serve<H, F>(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    limits: &ServerLimits,
    budget: Budget,
    reject: Reject,
    handle: H,
) where
    H: Fn(Arc<Peer>, Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Result<Response<Body>, Infallible>> + Send + 'static,
{
    let acceptor = TlsAcceptor::from(tls);
    let slots = Arc::new(Slots {
        handshakes: Arc::new(Mutex::new(Evicting::new(budget.handshakes))),
        anonymous: Arc::new(Mutex::new(Evicting::new(budget.anonymous))),
        agents: Arc::new(Semaphore::new(budget.connections)),
        operators: Arc::new(Semaphore::new(budget.operators)),
    });
    let times = Times::of(limits);
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!("accepting a connection: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (handshake, evicted) =
            EvictingSlot::take(&slots.handshakes, &reject, "handshake-evicted");
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let reject = reject.clone();
        let handle = handle.clone();
        let slots = slots.clone();
        let max_header_bytes = limits.max_header_bytes;
        tokio::spawn(async move {
            // In a block: what the handshake leaves (the stream before it moves into the
            // connection) takes no room in the task while the connection is served.
            let (held, who, tls) = {
                // Boxed: the handshake's state is freed once it ends instead of taking room in
                // the task of every connection for as long as it is served.
                let accepted = Box::pin(async {
                    let accepting = tokio::time::timeout(times.head, acceptor.accept(tcp));
                    tokio::select! {
                        accepted = accepting => Some(accepted),
                        _ = evicted => None,
                    }
                })
                .await;
                drop(handshake);
                let tls = match accepted {
                    Some(Ok(Ok(tls))) => tls,
                    Some(Ok(Err(e))) => {
                        reject("tls-handshake");
                        tracing::debug!(%peer, "TLS handshake refused: {e}");
                        return;
                    }
                    Some(Err(_)) => {
                        reject("tls-handshake-timeout");
                        return;
                    }
                    None => {
                        tracing::debug!(%peer, "handshake dropped for a newer one");
                        return;
                    }
                };
                let certificate = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|certs| certs.first());
                let who = Arc::new(Peer {
                    role: certificate.and_then(|cert| role_of(cert)),
                    certificate_sha256: certificate
                        .map(|cert| hex::encode(sha2::Sha256::digest(cert))),
                    address: peer,
                    parked: ParkSlot::default(),
                });
                let held = match &who.role {
                    _ if who.certificate_sha256.is_none() => {
                        let (slot, evicted) =
                            EvictingSlot::take(&slots.anonymous, &reject, "anonymous-evicted");
                        Held::Anonymous(slot, evicted)
                    }
                    Some(Role::Operator { .. }) => {
                        match slots.operators.clone().try_acquire_owned() {
                            Ok(permit) => Held::Counted(permit),
                            Err(_) => {
                                reject("too-many-operators");
                                tracing::warn!(%peer, "refusing an operator's connection: {} already open", budget.operators);
                                return;
                            }
                        }
                    }
                    _ => match slots.agents.clone().try_acquire_owned() {
                        Ok(permit) => Held::Counted(permit),
                        Err(_) => {
                            reject("too-many-connections");
                            tracing::warn!(%peer, "refusing a connection: {} already open", budget.connections);
                            return;
                        }
                    },
                };
                (held, who, tls)
            };
            let serve = |stream: TokioIo<Tls>| {
                let who = who.clone();
                let handle = handle.clone();
                let service = service_fn(move |request| handle(who.clone(), request));
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    // Also how long a kept connection waits for its next request.
                    .header_read_timeout(times.head)
                    .max_buf_size(max_header_bytes)
                    .serve_connection(stream, service)
                    .with_upgrades();
                // Boxed once, here: inline, the task would hold room for a copy in each branch.
                Box::pin(connection)
            };
            let mut stream = Box::new(TokioIo::new(WriteTimeout::new(tls, times.write)));
            let ended = match held {
                Held::Anonymous(_slot, evicted) => {
                    let mut connection = serve(*stream);
                    tokio::select! {
                        ended = connection.as_mut() => ended,
                        _ = evicted => {
                            tracing::debug!(%peer, "anonymous connection dropped for a newer one");
                            return;
                        }
                        _ = tokio::time::sleep(times.anonymous_lifetime) => {
                            reject("anonymous-lifetime");
                            tracing::debug!(%peer, "anonymous connection cut at its lifetime");
                            return;
                        }
                    }
                }
                Held::Counted(_permit) => {
                    let until = tokio::time::Instant::now() + times.lifetime;
                    loop {
                        let mut connection = serve(*stream);
                        let ended = tokio::select! {
                            ended = connection.as_mut() => ended,
                            _ = tokio::time::sleep_until(until) => {
                                // Answers the request in flight, then closes.
                                connection.as_mut().graceful_shutdown();
                                connection.as_mut().await
                            }
                        };
                        // hyper's buffers go now, before a parked poll waits.
                        drop(connection);
                        let Some(park) = who.parked.take().filter(|_| ended.is_ok()) else {
                            break ended;
                        };
                        match park::hold::<Tls>(park, until).await {
                            Some(parked) => stream = parked,
                            None => return,
                        }
                    }
                }
            };
            if let Err(e) = ended {
                tracing::debug!(%peer, "connection ended: {e}");
            }
        });
        // One connection per turn of the scheduler, as nginx takes one per pass of its event
        // loop: a burst waits in the kernel's queue while the connections taken make progress,
        // instead of every one of them sharing the cores and finishing late.
        tokio::task::yield_now().await;
    }
}

/// The time limits of a listener's connections.
#[derive(Debug, Clone, Copy)]
struct Times {
    head: Duration,
    write: Duration,
    lifetime: Duration,
    anonymous_lifetime: Duration,
}

impl Times {
    fn of(limits: &ServerLimits) -> Self {
        let seconds = |s: u64| Duration::from_secs(s.max(1));
        Times {
            head: seconds(limits.header_timeout_seconds),
            write: seconds(limits.write_timeout_seconds),
            lifetime: seconds(limits.lifetime_seconds),
            anonymous_lifetime: seconds(limits.anonymous_lifetime_seconds),
        }
    }
}

/// A connection's stream whose writes fail when they make no progress for `timeout`: a client
/// that reads nothing cannot keep a response (and its connection) waiting.
struct WriteTimeout<S> {
    inner: S,
    timeout: Duration,
    /// Armed when a write waits; disarmed by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteTimeout<S> {
    fn new(inner: S, timeout: Duration) -> Self {
        WriteTimeout {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// What a write that returned `poll` means: progress disarms the timer; waiting arms it,
    /// and an error once it has run out.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let timeout = self.timeout;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if stalled.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the client read nothing for {}s", timeout.as_secs()),
            )));
        }
        Poll::Pending
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteTimeout<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, poll)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use factbuoy_pki::{ClientTrust, RunCa};
    use factbuoy_protocol::names::NodeName;
    use factbuoy_protocol::tls::Identity;
    use http_body_util::{BodyExt, Full};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::task::JoinHandle;
    use tokio_rustls::TlsConnector;
    use tokio_rustls::client::TlsStream;

    /// Every answer: 4 KiB, so that a client that reads nothing fills the buffers fast.
    const ANSWER_BYTES: usize = 4096;

    /// A listener serving `budget` and `limits` on loopback, answering every request with
    /// [`ANSWER_BYTES`]; and the identities of its clients.
    struct Served {
        address: SocketAddr,
        ca_pem: String,
        agent: Identity,
        operator: Identity,
        task: JoinHandle<()>,
    }

    impl Drop for Served {
        fn drop(&mut self) {
            self.task.abort();
        }
    }

    async fn served(budget: Budget, limits: ServerLimits) -> Served {
        served_with(budget, limits, Arc::new(|_| {})).await
    }

    /// The same, counting refusals with `reject`.
    async fn served_with(budget: Budget, limits: ServerLimits, reject: Reject) -> Served {
        let ca = RunCa::create("serving-test").unwrap();
        let server = ca.issue_server(&["127.0.0.1".to_owned()]).unwrap();
        let tls = ca
            .server_config_with(
                &server,
                ClientTrust {
                    anonymous: true,
                    ..ClientTrust::default()
                },
            )
            .unwrap();
        let agent = ca.identity(
            &ca.issue_client(&Role::Agent {
                node: NodeName::parse("a").unwrap(),
            })
            .unwrap(),
        );
        let operator = ca.identity(
            &ca.issue_client(&Role::Operator { name: "o".into() })
                .unwrap(),
        );
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let address = listener.local_addr().unwrap();
        let handle = |_peer: Arc<Peer>, _request: Request<Incoming>| async {
            let body: Body = Full::new(Bytes::from(vec![b'x'; ANSWER_BYTES]))
                .map_err(|never| match never {})
                .boxed();
            Ok::<_, Infallible>(Response::new(body))
        };
        let task =
            tokio::spawn(
                async move { serve(listener, tls, &limits, budget, reject, handle).await },
            );
        Served {
            address,
            ca_pem: ca.cert_pem().to_owned(),
            agent,
            operator,
            task,
        }
    }

    /// A TLS connection to `served`, with a small receive buffer; with a certificate unless
    /// `identity` is `None`.
    async fn connect(
        served: &Served,
        identity: Option<&Identity>,
    ) -> TlsStream<tokio::net::TcpStream> {
        let config = match identity {
            Some(identity) => factbuoy_protocol::tls::client_config(identity).unwrap(),
            None => factbuoy_protocol::tls::anonymous_client_config(&served.ca_pem).unwrap(),
        };
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let tcp = socket.connect(served.address).await.unwrap();
        TlsConnector::from(config)
            .connect("127.0.0.1".try_into().unwrap(), tcp)
            .await
            .unwrap()
    }

    const REQUEST: &[u8] = b"GET /x HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n";

    /// One request on `stream`, and its answer read whole: whether it was answered.
    async fn answered(stream: &mut TlsStream<tokio::net::TcpStream>) -> bool {
        if stream.write_all(REQUEST).await.is_err() {
            return false;
        }
        let mut answer = Vec::new();
        let mut chunk = [0; 8192];
        while answer.len() < ANSWER_BYTES {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => answer.extend_from_slice(&chunk[..n]),
            }
        }
        true
    }

    /// A client that pipelines requests and never reads an answer; the task ends when the
    /// server drops the connection (its writes then fail).
    fn slow_reader(mut stream: TlsStream<tokio::net::TcpStream>) -> JoinHandle<()> {
        tokio::spawn(async move {
            let burst = REQUEST.repeat(64);
            while stream.write_all(&burst).await.is_ok() && stream.flush().await.is_ok() {}
        })
    }

    fn limits(write: u64, head: u64, lifetime: u64, anonymous_lifetime: u64) -> ServerLimits {
        ServerLimits {
            write_timeout_seconds: write,
            header_timeout_seconds: head,
            lifetime_seconds: lifetime,
            anonymous_lifetime_seconds: anonymous_lifetime,
            ..ServerLimits::default()
        }
    }

    async fn ends_within(task: &mut JoinHandle<()>, within: Duration) -> bool {
        tokio::time::timeout(within, task).await.is_ok()
    }

    #[tokio::test]
    async fn anonymous_slow_readers_take_no_slot_of_agents_or_operators_and_yield_to_a_newcomer() {
        let budget = Budget {
            connections: 2,
            handshakes: 8,
            anonymous: 3,
            operators: 1,
        };
        let served = served(budget, limits(600, 600, 600, 600)).await;
        let mut readers = Vec::new();
        for _ in 0..budget.anonymous {
            readers.push(slow_reader(connect(&served, None).await));
        }
        // Every anonymous slot is held by a client that reads nothing.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(readers.iter().all(|r| !r.is_finished()));

        // Agents and the operator are served all the same, up to their own budgets.
        let mut agents = Vec::new();
        for _ in 0..budget.connections {
            let mut agent = connect(&served, Some(&served.agent)).await;
            assert!(answered(&mut agent).await, "an agent was not served");
            agents.push(agent);
        }
        let mut operator = connect(&served, Some(&served.operator)).await;
        assert!(answered(&mut operator).await, "the operator was not served");

        // A newcomer without a certificate (a machine joining) drops the oldest of them.
        let mut joining = connect(&served, None).await;
        assert!(
            answered(&mut joining).await,
            "a joining client was not served"
        );
        assert!(ends_within(&mut readers[0], Duration::from_secs(5)).await);
        assert!(readers[1..].iter().all(|r| !r.is_finished()));
    }

    #[tokio::test]
    async fn a_client_that_reads_nothing_is_cut_at_the_write_timeout() {
        let budget = Budget::with_connections(4);
        let served = served(budget, limits(1, 600, 600, 600)).await;
        // With a certificate: no newer client drops it, only the timeout.
        let mut reader = slow_reader(connect(&served, Some(&served.agent)).await);
        assert!(!ends_within(&mut reader, Duration::from_millis(300)).await);
        assert!(
            ends_within(&mut reader, Duration::from_secs(10)).await,
            "a client that read nothing kept its connection"
        );
    }

    #[tokio::test]
    async fn an_idle_kept_connection_is_closed_at_the_head_timeout() {
        let served = served(Budget::with_connections(4), limits(600, 1, 600, 600)).await;
        let mut agent = connect(&served, Some(&served.agent)).await;
        assert!(answered(&mut agent).await);
        let closed = tokio::time::timeout(Duration::from_secs(10), async {
            let mut rest = [0; 64];
            matches!(agent.read(&mut rest).await, Ok(0) | Err(_))
        })
        .await;
        assert_eq!(closed, Ok(true), "an idle connection stayed open");
    }

    #[tokio::test]
    async fn connections_end_at_their_lifetime_an_anonymous_one_whatever_it_does() {
        let served = served(Budget::with_connections(4), limits(600, 600, 2, 2)).await;
        for identity in [None, Some(&served.agent)] {
            let mut client = connect(&served, identity).await;
            let started = std::time::Instant::now();
            // A request every 100 ms, each answered: never idle, never slow.
            while answered(&mut client).await {
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "a connection outlived its lifetime"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert!(started.elapsed() >= Duration::from_secs(1));
        }
    }

    #[test]
    fn every_budget_fits_its_share_of_descriptors_and_the_configured_cap() {
        for per_listener in [50u64, 118, 1000, 100_000] {
            for per_connection in [1, 2] {
                let connections = fit(10_000, per_listener, per_connection);
                let budget = Budget::with_connections(connections);
                assert!(
                    budget.descriptors(per_connection) <= per_listener,
                    "{budget:?}"
                );
                // Not much less than fits either.
                let more = Budget::with_connections(connections + 1);
                assert!(more.descriptors(per_connection) > per_listener || connections == 10_000);
            }
        }
        assert_eq!(fit(10, 100_000, 2), 10);
        // However few descriptors: one connection, the fewest of each kind beside it.
        assert_eq!(fit(10_000, 3, 2), 1);
    }

    #[test]
    fn a_fleet_listener_holds_twenty_thousand_long_polls_at_the_systemd_units_descriptor_limit() {
        // deploy/systemd/factbuoy-fleet.service: LimitNOFILE=65536; docs/fleet.md, "Scale".
        let per_listener = (65_536 - RESERVED_DESCRIPTORS) / 2;
        let agents = fit(usize::MAX, per_listener, 1);
        assert_eq!(agents, 20_146);
        assert!(Budget::with_connections(agents).descriptors(1) <= per_listener);
    }

    #[tokio::test]
    async fn a_queued_burst_is_taken_a_connection_per_turn_not_all_at_once() {
        // One handshake slot: each connection taken evicts the one before and counts it.
        let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = taken.clone();
        let reject: Reject = Arc::new(move |_| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        let budget = Budget {
            handshakes: 1,
            ..Budget::with_connections(8)
        };
        let served = served_with(budget, limits(10, 10, 60, 60), reject).await;
        // Queued before the loop runs: nothing has sent a byte yet.
        let burst = 20;
        let _queued: Vec<_> = (0..burst)
            .map(|_| std::net::TcpStream::connect(served.address).unwrap())
            .collect();
        // This test and the accept loop take turns on the one thread of the runtime: what the
        // loop takes between two turns of the test is what it takes per turn (two when the
        // turns interleave the other way; the whole burst if it took all it could).
        let (mut last, mut most) = (0, 0);
        for _ in 0..1000 {
            tokio::task::yield_now().await;
            let now = taken.load(std::sync::atomic::Ordering::SeqCst);
            most = most.max(now - last);
            last = now;
            if now == burst - 1 {
                break;
            }
        }
        assert_eq!(last, burst - 1, "the burst was not taken");
        assert!(most <= 2, "{most} connections were taken in one turn");
    }

    #[tokio::test]
    async fn a_burst_of_connections_waits_in_the_queue_instead_of_being_dropped() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let address = listener.local_addr().unwrap();
        // Nothing accepts: every connection must fit in the kernel's queue. With the default
        // backlog of 128 the rest would wait for a SYN retry and time out here.
        let burst = 300;
        // A kernel whose somaxconn is below the burst caps any backlog, and the test could not
        // tell 4096 from 128: say so rather than pass.
        let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .expect("reading /proc/sys/net/core/somaxconn")
            .trim()
            .parse()
            .expect("net.core.somaxconn is a number");
        assert!(
            somaxconn >= burst,
            "this kernel caps listen backlogs at {somaxconn} (net.core.somaxconn), below the \
             {burst} connections this test needs: raise it (sysctl -w net.core.somaxconn=4096, \
             the default since Linux 5.4) to run it"
        );
        let connections: Vec<_> = (0..burst)
            .map(|i| {
                std::net::TcpStream::connect_timeout(&address, Duration::from_millis(500))
                    .unwrap_or_else(|e| panic!("connection {i} was not queued: {e}"))
            })
            .collect();
        assert_eq!(connections.len(), burst);
    }
}

//! The HTTPS listeners: TLS with a required client certificate from the run's CA, the
//! certificate's role handed to every request, and limits on connections, request heads and
//! slow clients.
//!
//! Connections have two budgets per listener. One that has not finished its TLS handshake holds
//! a handshake slot (a quarter of the connection cap, at least 8) for at most the head timeout;
//! when every handshake slot is taken, the oldest handshake is dropped to make room, so silent
//! or slow clients cannot keep others from shaking hands. Only a finished handshake takes one of
//! the connection slots, so unauthenticated connections never starve agents that have
//! authenticated. Both budgets fit under the process's descriptor limit ([`budget`]).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use factbuoy_protocol::identity::Role;
use hyper::body::Incoming;
use hyper::{Request, Response};
use rustls::pki_types::CertificateDer;

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot};
use tokio_rustls::TlsAcceptor;

use super::handler::{self, Body, Listener};
use crate::config::ServerLimits;
use crate::shared::Shared;
use factbuoy_pki::role_of;

/// Descriptors kept for everything but connections: the run directory, logs, the blocking
/// pool's file-system work, the listeners.
const RESERVED_DESCRIPTORS: u64 = 64;
/// The fewest handshake slots a listener has.
const MIN_HANDSHAKES: usize = 8;

/// How many connections one listener holds at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Connections that finished their handshake.
    pub connections: usize,
    /// Connections still in their TLS handshake.
    pub handshakes: usize,
}

/// The budget of each of the two listeners for a configured cap of `max_connections`. Raises the
/// soft descriptor limit to the hard one first (as nginx does), then lowers the cap, with a
/// warning, until both listeners' connections fit: a handshake takes one descriptor, a served
/// connection two (its socket and an upload's file). Running out of descriptors would refuse
/// every client at accept instead.
pub fn budget(max_connections: usize) -> Budget {
    budget_within(max_connections, 2)
}

/// The budget of a fleet's listener: it holds an idle long poll per agent, each connection one
/// descriptor (agents upload nothing to it; an operator's rare plugin upload takes one more, from
/// the reserve). It takes half the descriptors, as a run's listener does, leaving the rest to
/// the runs it serves.
pub fn fleet_budget(max_connections: usize) -> Budget {
    budget_within(max_connections, 1)
}

/// The budget of a listener that may use half the process's descriptors, for connections that
/// take `per_connection` each once served (and one while in their handshake).
fn budget_within(max_connections: usize, per_connection: u64) -> Budget {
    let limit = raise_descriptor_limit();
    let per_listener = limit.saturating_sub(RESERVED_DESCRIPTORS) / 2;
    // connections * per_connection + connections / 4 handshakes <= per_listener
    let most = usize::try_from(per_listener * 4 / (4 * per_connection + 1))
        .unwrap_or(usize::MAX)
        .max(1);
    let connections = max_connections.clamp(1, most);
    if connections < max_connections {
        tracing::warn!(
            "serving at most {connections} connections per listener instead of {max_connections}: \
             the process may open {limit} files; raise the hard limit (ulimit -Hn, LimitNOFILE=) \
             to serve more"
        );
    }
    Budget {
        connections,
        handshakes: (connections / 4).max(MIN_HANDSHAKES),
    }
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

/// Handshakes in progress, oldest first, each with the means to drop it.
#[derive(Default)]
struct Handshakes {
    next: u64,
    pending: BTreeMap<u64, oneshot::Sender<()>>,
}

/// Accepts connections until the task is dropped, answering each request with the run's handler.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    kind: Listener,
    shared: Arc<Shared>,
    budget: Budget,
) {
    let limits = shared.config.limits.clone();
    let reject = {
        let shared = shared.clone();
        Arc::new(move |reason: &'static str| shared.metrics.reject(reason))
    };
    serve_with(
        listener,
        tls,
        &limits,
        budget,
        reject,
        move |peer, request| handler::handle(shared.clone(), kind, peer.role.clone(), request),
    )
    .await
}

/// Who is at the other end of a connection, as its TLS handshake showed.
#[derive(Debug, Clone)]
pub struct Peer {
    /// The factbuoy role its certificate carries, if any.
    pub role: Option<Role>,
    /// Its certificate, if it presented one.
    pub certificate: Option<CertificateDer<'static>>,
    /// Its address.
    pub address: SocketAddr,
}

/// Counts a refused connection under its reason.
pub type Reject = Arc<dyn Fn(&'static str) + Send + Sync>;

/// Accepts connections until the task is dropped, under `limits` and `budget`, and answers each
/// request with `handle`: the run's listeners and the fleet's share this.
pub async fn serve_with<H, F>(
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
    let slots = Arc::new(Semaphore::new(budget.connections));
    let handshakes = Arc::new(Mutex::new(Handshakes::default()));
    let handshake_timeout = Duration::from_secs(limits.header_timeout_seconds);
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
        let (id, evicted) = {
            let mut handshakes = handshakes.lock().unwrap();
            if handshakes.pending.len() >= budget.handshakes {
                // Dropping its sender ends the oldest handshake.
                handshakes.pending.pop_first();
                reject("handshake-evicted");
            }
            let (sender, receiver) = oneshot::channel();
            let id = handshakes.next;
            handshakes.next += 1;
            handshakes.pending.insert(id, sender);
            (id, receiver)
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let reject = reject.clone();
        let handle = handle.clone();
        let slots = slots.clone();
        let handshakes = handshakes.clone();
        let max_header_bytes = limits.max_header_bytes;
        let max_connections = budget.connections;
        tokio::spawn(async move {
            let accepted = tokio::select! {
                accepted = tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)) => Some(accepted),
                _ = evicted => None,
            };
            handshakes.lock().unwrap().pending.remove(&id);
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
            let Ok(_slot) = slots.try_acquire_owned() else {
                reject("too-many-connections");
                tracing::warn!(%peer, "refusing a connection: {max_connections} already open");
                return;
            };
            let certificate = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|certs| certs.first())
                .map(|cert| cert.clone().into_owned());
            let who = Arc::new(Peer {
                role: certificate.as_ref().and_then(|cert| role_of(cert)),
                certificate,
                address: peer,
            });
            let service = service_fn(move |request| handle(who.clone(), request));
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(handshake_timeout)
                .max_buf_size(max_header_bytes)
                .serve_connection(TokioIo::new(tls), service);
            if let Err(e) = connection.await {
                tracing::debug!(%peer, "connection ended: {e}");
            }
        });
    }
}

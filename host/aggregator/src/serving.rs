//! The HTTPS listeners, for a run's two and for a fleet's: binding with a deep accept queue,
//! TLS (the certificate's role handed to every request), and limits on connections, request
//! heads and slow clients. What a request is answered is the routes' business, passed in.
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

use bytes::Bytes;
use factbuoy_pki::role_of;
use factbuoy_protocol::identity::Role;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::pki_types::CertificateDer;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{Semaphore, oneshot};
use tokio_rustls::TlsAcceptor;

use crate::model::config::ServerLimits;

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
/// The fewest handshake slots a listener has.
const MIN_HANDSHAKES: usize = 8;

/// How many connections one listener holds at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    /// Connections that finished their handshake.
    pub(crate) connections: usize,
    /// Connections still in their TLS handshake.
    pub(crate) handshakes: usize,
}

/// The budget of each of the two listeners for a configured cap of `max_connections`. Raises the
/// soft descriptor limit to the hard one first (as nginx does), then lowers the cap, with a
/// warning, until both listeners' connections fit: a handshake takes one descriptor, a served
/// connection two (its socket and an upload's file). Running out of descriptors would refuse
/// every client at accept instead.
pub(crate) fn budget(max_connections: usize) -> Budget {
    budget_within(max_connections, 2)
}

/// The budget of a fleet's listener: it holds an idle long poll per agent, each connection one
/// descriptor (agents upload nothing to it; an operator's rare plugin upload takes one more, from
/// the reserve). It takes half the descriptors, as a run's listener does, leaving the rest to
/// the runs it serves.
pub(crate) fn fleet_budget(max_connections: usize) -> Budget {
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

/// Who is at the other end of a connection, as its TLS handshake showed.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    /// The factbuoy role its certificate carries, if any.
    pub(crate) role: Option<Role>,
    /// Its certificate, if it presented one.
    pub(crate) certificate: Option<CertificateDer<'static>>,
    /// Its address.
    pub(crate) address: SocketAddr,
}

/// Counts a refused connection under its reason.
pub(crate) type Reject = Arc<dyn Fn(&'static str) + Send + Sync>;

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

#[cfg(test)]
mod tests {
    use super::*;

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

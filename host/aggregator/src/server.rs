//! The HTTPS listeners: TLS with a required client certificate from the run's CA, the
//! certificate's role handed to every request, and limits on connections, request heads and
//! slow clients.

use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use super::handler::{self, Listener};
use crate::shared::Shared;
use factbuoy_pki::role_of;

/// Accepts connections until the task is dropped.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    kind: Listener,
    shared: Arc<Shared>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let limits = shared.config.limits.clone();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
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
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            shared.metrics.reject("too-many-connections");
            tracing::warn!(%peer, "refusing a connection: {} already open", limits.max_connections);
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let shared = shared.clone();
        let max_header_bytes = limits.max_header_bytes;
        tokio::spawn(async move {
            let _slot = slot;
            let tls = match tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    shared.metrics.reject("tls-handshake");
                    tracing::debug!(%peer, "TLS handshake refused: {e}");
                    return;
                }
                Err(_) => {
                    shared.metrics.reject("tls-handshake-timeout");
                    return;
                }
            };
            let role = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|certs| certs.first())
                .and_then(|cert| role_of(cert));
            let service = {
                let shared = shared.clone();
                service_fn(move |request| {
                    handler::handle(shared.clone(), kind, role.clone(), request)
                })
            };
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

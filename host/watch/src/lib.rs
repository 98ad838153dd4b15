//! `factbuoy status --web`: a local server that shows this operator's runs live in a browser,
//! and the versioned status API (docs/status.md) other UIs read.
//!
//! The browser reaches only this server, on loopback, with the token the server prints; the
//! server reaches each run's aggregator with the operator's own credentials, as `factbuoy
//! status` does, and pushes what changes to the page as server-sent events. It never holds a
//! run's state of its own: every document it serves is the aggregator's, polled.
//!
//! On another address than loopback it serves HTTPS only, with a certificate the operator
//! gives. Not here: downloading bundles and writing reports, which the page asks of the
//! operator library and of factbuoy-inspect.

mod access;
pub mod api;
mod bundles;
mod page;
mod polling;
mod server;

pub use server::{PageOptions, PageServer, TlsIdentity, serve};

/// Why the page server did not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The address is not a loopback one, and no certificate was given.
    #[error(
        "{0} is not a loopback address: serving there needs TLS (--tls-cert and --tls-key), or listen on 127.0.0.1 and reach it through `ssh -L`"
    )]
    NotLoopback(std::net::SocketAddr),
    /// The address is 0.0.0.0 or `::`: the page answers one `Host` only, so it needs one.
    #[error(
        "{0} is every address: name the one browsers will dial (the certificate's), as the page answers that Host only"
    )]
    Unspecified(std::net::SocketAddr),
    /// The certificate or key could not be used.
    #[error("the status page's certificate: {0}")]
    Tls(String),
    /// The address could not be bound.
    #[error("listening on {address}: {source}")]
    Bind {
        /// The address.
        address: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

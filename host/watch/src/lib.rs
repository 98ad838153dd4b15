//! `factbuoy status --web`: a local server that shows this operator's runs live in a browser,
//! and the versioned status API (docs/status.md) other UIs read.
//!
//! The browser reaches only this server, on loopback, with the token the server prints; the
//! server reaches each run's aggregator with the operator's own credentials, as `factbuoy
//! status` does, and pushes what changes to the page as server-sent events. It never holds a
//! run's state of its own: every document it serves is the aggregator's, polled.
//!
//! Not here: TLS serving (another address than loopback is refused), writing or retrieving
//! bundles (the operator library's).

mod access;
pub mod api;
mod page;
mod polling;
mod server;

pub use server::{PageOptions, PageServer, serve};

/// Why the page server did not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The address is not a loopback one, and the page has no TLS.
    #[error(
        "{0} is not a loopback address: the status page serves plain HTTP, so it listens on 127.0.0.1 or ::1 only (reach it from elsewhere through `ssh -L`)"
    )]
    NotLoopback(std::net::SocketAddr),
    /// The address could not be bound.
    #[error("listening on {address}: {source}")]
    Bind {
        /// The address.
        address: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

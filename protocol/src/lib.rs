//! factbuoy's aggregator protocol, usable without wasmtime or kube.
//!
//! Agents fetch their [`types::AgentPlan`] and plugin components, upload each artifact of a result as
//! a file with a `Content-Digest`, complete the result with a [`types::ResultManifest`], and send
//! progress and heartbeats. Operators read the [`types::StatusDocument`], metrics and the bundle.
//! Every request is HTTPS with a client certificate from the run's CA; the certificate decides
//! which node (or role) the request may speak for. The routes are listed in [`routes::Route`];
//! docs/protocol.md describes the whole protocol.

pub mod artifacts;
pub mod client;
pub mod digest;
pub mod fleet;
pub mod identity;
pub mod names;
pub mod routes;
pub mod text;
pub mod tls;
pub mod types;

pub use client::{Client, ClientError};
pub use routes::{Route, Scope};

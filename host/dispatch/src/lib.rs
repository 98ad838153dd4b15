//! Kubernetes dispatch: what `factbuoy run --kubernetes` needs from a cluster. It reaches the
//! API server, builds the run's manifests, watches the nodes and the agent pods, admits agents by
//! their pods' ServiceAccount tokens, and tunnels the operator's requests through port-forward.
//!
//! The aggregator never imports this crate, nor this crate the aggregator: factbuoy-kubernetes
//! connects the two, through the aggregator's node-set and admission interfaces.

pub mod admission;
pub mod apply;
pub mod connect;
pub mod delete;
pub mod forward;
pub mod hub;
pub mod manifest;
pub mod names;
pub mod nodes;
pub mod pods;
pub mod resources;
pub mod status_annotation;

pub use connect::{Cluster, ClusterRef, ConnectError, connect, in_cluster};

//! Kubernetes runs, from both ends, over the dispatch crate's cluster mechanics (manifests,
//! watches, admission, port-forward streams), the aggregator and the agent.
//!
//! - [`launch`]: the operator's side. A planned run becomes its manifests (exactly what
//!   `factbuoy gen` prints) and the operator's credentials, and is applied.
//! - [`reach`]: the operator's client of the run's aggregator, through the API server's
//!   port-forward, with mutual TLS inside the tunnel.
//! - [`pod`]: the aggregator as a pod of its own run (`factbuoy aggregator serve-kubernetes`):
//!   it makes the run's CA inside the pod, publishes it, saves the cluster's resources, follows
//!   the nodes and the agent pods, and ends the run's DaemonSet once every result is in.
//! - [`secrets`]: secret parameters, in a Secret only the aggregator reads, from both ends.
//!
//! Not here: planning (the operator crate decides what runs), and anything local or fleet runs
//! need. The aggregator knows nothing of Kubernetes; [`pod`] connects it to the cluster through
//! its `Admission` and `NodeSet` ports.

pub mod launch;
pub mod pod;
pub mod reach;
pub mod secrets;

pub use factbuoy_dispatch::delete::{
    DEFAULT_WAIT as DEFAULT_DELETE_WAIT, DeleteOptions, Selection, delete,
};
pub use factbuoy_dispatch::hub;
pub use factbuoy_dispatch::manifest::components::COMPONENTS_DIR;
pub use factbuoy_dispatch::manifest::scheduling::{parse_node_selector, parse_toleration};
pub use factbuoy_dispatch::manifest::volumes::check_cache_dir;
pub use factbuoy_dispatch::manifest::{DEFAULT_AGENT_CACHE_DIR, DEFAULT_AGENT_CACHE_SIZE};
pub use factbuoy_dispatch::names::AGGREGATOR as AGGREGATOR_POD;
pub use factbuoy_dispatch::resources::{ResourceKind, kind as resource_kind};
pub use factbuoy_dispatch::{Cluster, ClusterRef, connect};
pub use k8s_openapi::api::core::v1::Toleration;
pub use launch::{AgentAccess, ClusterRun, DEFAULT_IMAGE, Prepared, RegistryReach};
pub use pod::PodServeOptions;

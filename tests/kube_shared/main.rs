//! The Kubernetes tests that leave every node as they found it, on the real test cluster
//! (tests/kube/: v1.20.2, real kubelets, containerd and runc), which they share: one cluster,
//! started by the first test that asks and removed when the binary exits, instead of one per
//! area (starting one costs about 30 s). A module per area; the tests run in parallel, so each
//! names its runs, namespaces and objects apart from the others', tolerates the taints another
//! may add for a while (run's skipped node), and looks only at what it made.
//!
//! The tests that change nodes, or need them to themselves, are tests/kube_nodes/.
//!
//! `cargo test -p factbuoy --test kube_shared` runs these (as root, with tests/kube/build.sh's
//! binaries); `cargo test -p factbuoy --test kube_shared run::` one area.

#[path = "../support/mod.rs"]
mod support;

mod dispatch;
mod hub;
mod manifests;
mod registry;
mod run;
mod status_web;

use support::kube::Cluster;

/// How many nodes the shared cluster has: node-1 to node-3.
const NODES: u32 = 3;

/// The cluster every test of this binary shares.
fn cluster() -> &'static Cluster {
    Cluster::shared("shared", NODES)
}

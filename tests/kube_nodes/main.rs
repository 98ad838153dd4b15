//! The Kubernetes tests that change the nodes of the real test cluster (tests/kube/: v1.20.2,
//! real kubelets), or need them to themselves, so that they cannot share a cluster with the
//! tests that assume healthy nodes (tests/kube_shared/) or with each other: each module starts
//! a cluster of its own.
//!
//! - `conformance` taints node-1 and node-2 so that only its agents run there, and compares
//!   what three ways of running factbuoy see on them: no other test's pods may come or go.
//! - `nodes` stops a node's kubelet during a run and adds node-4.
//! - `watch` taints node-1, adds node-4, stops and deletes node-3 while it counts every node
//!   request the API server serves; its pod and token tests share that cluster, on node-1 and
//!   node-2, tolerating every taint.
//!
//! `cargo test -p factbuoy --test kube_nodes` runs these (as root, with tests/kube/build.sh's
//! binaries); `cargo test -p factbuoy --test kube_nodes watch::` one module.

#[path = "../support/mod.rs"]
mod support;

mod conformance;
mod nodes;
mod watch;

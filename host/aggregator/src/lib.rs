//! The aggregator: expects results from (plugin, node) pairs, receives them from agents over
//! mutual TLS, reports status and progress to operators, and packages one bundle per run.
//!
//! A run lives in a [`RunDir`]. [`Run::create`] makes one and [`Run::open`] reads one back;
//! [`start`] serves it, new or after a restart, continuing where it stopped, and returns a
//! [`RunningAggregator`]: the run's status, its [`NodeSet`], its end. A run always ends: nodes
//! that stop sending heartbeats are marked lost, and the run timeout turns whatever is missing
//! into error results. A [`fleet`] serves runs over machines that enrolled with it. Not here:
//! what runs the plugins (the agent crate) and how agents are dispatched; a dispatcher plugs in
//! through the [`enroll::Admission`] and [`NodeSet`] ports.
//!
//! Inside, layers, each using only those below it:
//!
//! - `model`: the run in memory: configuration, expected pairs, nodes, state, status document;
//! - `persistence`: the run directory, its records and atomic writes;
//! - `upload`: result files streamed into the staging area;
//! - `commit`: staged files made a result, all or nothing;
//! - `live`: a run while it is served: the node set, stand-in results, the watchdog, packaging;
//! - `serving`: the HTTPS listeners and their connection limits;
//! - `routes`: the HTTP routes of a run's listeners;
//! - `run` and `start`: a run created or opened, and served;
//! - [`fleet`]: a long-lived aggregator that starts runs, on top of all of them.
//!
//! `enroll` (the admission port) and `metrics` sit beside them.

mod commit;
pub mod enroll;
pub mod fleet;
mod live;
mod metrics;
mod model;
mod persistence;
mod routes;
mod run;
mod serving;
mod start;
mod upload;

pub use live::node_set::{NodeSet, NodeSetError};
pub use live::shared::BundledComponents;
pub use model::config;
pub use model::nodes::Disposition;
pub use persistence::run_dir::RunDir;
pub use run::Run;
pub use start::{RunningAggregator, StatusReader, start, start_with};

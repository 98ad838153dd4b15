//! What the request handlers and the watchdog of a serving aggregator share.

use std::sync::Mutex;
use std::time::SystemTime;

use factbuoy_protocol::routes::Scope;
use factbuoy_protocol::types::{PairStatus, RunStatus, StatusDocument};

use crate::BundledComponents;
use crate::config::RunConfig;
use crate::metrics::{Metrics, StateLabel};
use crate::run_dir::RunDir;
use crate::state::RunState;
use crate::storage::Storage;

/// What the request handlers share.
pub struct Shared {
    /// The run's configuration, with the listen addresses actually bound.
    pub config: RunConfig,
    /// The run's directory.
    pub run_dir: RunDir,
    /// What the aggregator knows about the run; never held across an await.
    pub state: Mutex<RunState>,
    /// Uploaded and committed results on disk.
    pub storage: Storage,
    /// The counters served at `/metrics`.
    pub metrics: Metrics,
    /// Held (shared) by each commit while it runs, and (exclusive) by the watchdog when it
    /// closes the run for packaging: a commit in flight finishes before the bundle is written.
    pub open: tokio::sync::RwLock<()>,
    /// Wakes the watchdog when a result arrives.
    pub changed: tokio::sync::Notify,
    /// Taken by each change of the node set ([`crate::nodes::NodeSet`]), so they take turns.
    pub(crate) node_changes: tokio::sync::Mutex<()>,
    pub(crate) status: tokio::sync::watch::Sender<RunStatus>,
    /// When this aggregator process started serving: silence is counted from here at least.
    pub(crate) started_at: SystemTime,
    pub(crate) bundled: BundledComponents,
    /// How agents without a certificate get one, if the run enrolls agents.
    pub(crate) enrollment: Option<crate::enroll::Enrollment>,
}

/// Where a plugin component's bytes are served from.
pub enum ComponentSource {
    /// Compiled into this binary.
    Bundled(&'static [u8]),
    /// A file in the run directory (a plugin from a file; 19 MB for a Python one, so it is
    /// streamed, never read whole per request).
    Stored(std::path::PathBuf),
}

impl Shared {
    /// Where the plugin component of this run with digest `sha256` is: bundled in this binary,
    /// or stored with the run. `None` if the run has no such plugin.
    pub fn component(&self, sha256: &str) -> Option<ComponentSource> {
        if !self.config.plugins.iter().any(|p| p.sha256 == sha256) {
            return None;
        }
        Some(match (self.bundled)(sha256) {
            Some(wasm) => ComponentSource::Bundled(wasm),
            None => ComponentSource::Stored(self.run_dir.component(sha256)),
        })
    }
    /// Sets the `nodes` gauges: how many nodes are pending, running, done, lost or skipped.
    pub fn update_node_gauges(&self) {
        let state = self.state.lock().unwrap();
        let mut counts = std::collections::BTreeMap::from([
            ("pending", 0),
            ("running", 0),
            ("done", 0),
            ("lost", 0),
            ("skipped", 0),
        ]);
        for node in state.nodes.keys() {
            let statuses: Vec<PairStatus> = state
                .pairs
                .values()
                .filter_map(|scopes| scopes.get(&Scope::Node(node.clone())).map(|p| p.status))
                .collect();
            let label = if statuses.contains(&PairStatus::Lost) {
                "lost"
            } else if statuses.contains(&PairStatus::Skipped) {
                "skipped"
            } else if statuses.iter().all(|s| {
                matches!(
                    s,
                    PairStatus::Complete
                        | PairStatus::TimedOut
                        | PairStatus::Interrupted
                        | PairStatus::AgentFailed
                )
            }) {
                "done"
            } else if statuses.iter().any(|s| *s != PairStatus::Pending)
                || state.heartbeats.contains_key(node)
            {
                "running"
            } else {
                "pending"
            };
            *counts.get_mut(label).expect("every label is counted") += 1;
        }
        for (label, count) in counts {
            self.metrics
                .nodes
                .get_or_create(&StateLabel {
                    state: label.to_owned(),
                })
                .set(count);
        }
    }

    /// The status document operators see, as of now.
    pub fn status_document(&self) -> StatusDocument {
        self.state.lock().unwrap().document(&self.config.run_id)
    }
}

//! What the request handlers, the node set and the watchdog of a serving run share.

use std::sync::Mutex;
use std::time::SystemTime;

use factbuoy_protocol::routes::Scope;
use factbuoy_protocol::types::{PairStatus, RunStatus, StatusDocument, now_rfc3339};

use crate::commit::ResultStore;
use crate::enroll::Enrollment;
use crate::metrics::{Metrics, StateLabel};
use crate::model::config::RunConfig;
use crate::model::state::RunState;
use crate::persistence::run_dir::RunDir;

/// Finds a plugin component compiled into the serving binary by its sha-256, so a run need not
/// store copies of bundled plugins for agents that lack them.
pub type BundledComponents = fn(&str) -> Option<&'static [u8]>;

/// What the request handlers, the node set and the watchdog share.
pub(crate) struct Shared {
    /// The run's configuration, with the listen addresses actually bound.
    pub(crate) config: RunConfig,
    /// The run's directory.
    pub(crate) run_dir: RunDir,
    /// What the aggregator knows about the run; never held across an await.
    pub(crate) state: Mutex<RunState>,
    /// Uploaded and committed results on disk.
    pub(crate) results: ResultStore,
    /// The counters served at `/metrics`.
    pub(crate) metrics: Metrics,
    /// Held (shared) by each commit while it runs, and (exclusive) by the watchdog when it
    /// closes the run for packaging: a commit in flight finishes before the bundle is written.
    pub(crate) open: tokio::sync::RwLock<()>,
    /// Wakes the watchdog when a result arrives.
    pub(crate) changed: tokio::sync::Notify,
    /// Taken by each change of the node set ([`super::node_set::NodeSet`]), so they take turns.
    pub(crate) node_changes: tokio::sync::Mutex<()>,
    /// The run's status as the watchdog last published it.
    pub(crate) status: tokio::sync::watch::Sender<RunStatus>,
    /// When this aggregator process started serving: silence is counted from here at least.
    pub(crate) started_at: SystemTime,
    /// Components bundled in the serving binary.
    pub(crate) bundled: BundledComponents,
    /// How agents without a certificate get one, if the run enrolls agents.
    pub(crate) enrollment: Option<Enrollment>,
}

/// Where a plugin component's bytes are served from.
pub(crate) enum ComponentSource {
    /// Compiled into this binary.
    Bundled(&'static [u8]),
    /// A file in the run directory (a plugin from a file; 19 MB for a Python one, so it is
    /// streamed, never read whole per request).
    Stored(std::path::PathBuf),
}

impl Shared {
    /// Where the plugin component of this run with digest `sha256` is: bundled in this binary,
    /// or stored with the run. `None` if the run has no such plugin.
    pub(crate) fn component(&self, sha256: &str) -> Option<ComponentSource> {
        if !self.config.plugins.iter().any(|p| p.sha256 == sha256) {
            return None;
        }
        Some(match (self.bundled)(sha256) {
            Some(wasm) => ComponentSource::Bundled(wasm),
            None => ComponentSource::Stored(self.run_dir.component(sha256)),
        })
    }

    /// Sets the `nodes` gauges: how many nodes are pending, running, done, lost or skipped.
    pub(crate) fn update_node_gauges(&self) {
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
    pub(crate) fn status_document(&self) -> StatusDocument {
        self.state.lock().unwrap().document(&self.config.run_id)
    }

    /// Saves the run-level state; a failure is logged (the state in memory goes on, and the
    /// next save or the records of each change carry it).
    pub(crate) fn save_state(&self, state: &RunState) {
        if let Err(e) = self.run_dir.save_state(state) {
            tracing::error!("saving the run state: {e:#}");
        }
    }

    /// Removes the run's secret parameters from disk.
    pub(crate) fn forget_secrets(&self) {
        if let Err(e) = self.run_dir.forget_secrets() {
            tracing::error!("removing the run's secret parameters: {e}");
        }
    }

    /// Ends the run as failed, with `message` in its status document.
    pub(crate) fn fail_run(&self, message: String) {
        tracing::error!("the run failed: {message}");
        self.forget_secrets();
        let mut state = self.state.lock().unwrap();
        state.status = RunStatus::Failed;
        state.error = Some(message);
        state.finished = Some(now_rfc3339());
        self.save_state(&state);
        self.status.send_replace(RunStatus::Failed);
    }

    /// What to do about a full disk, for error messages.
    pub(crate) fn disk_full_hint(&self, full: bool) -> String {
        if full {
            format!(
                "; the disk holding {} is full. Every result committed so far is intact there",
                self.run_dir.root().display()
            )
        } else {
            String::new()
        }
    }
}

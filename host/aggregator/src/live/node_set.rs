//! The run's nodes as its dispatcher learns them: [`NodeSet`], a handle the serving binary
//! calls while the aggregator serves (a Kubernetes dispatcher watching Node objects, say; this
//! crate knows nothing of Kubernetes). What each [`Disposition`] means is the model's.
//!
//! Each change is durable before it takes effect: `nodes/<node>.json` is written atomically,
//! then the state changes, then the stand-ins are committed like any result (a result
//! committed before is never replaced). A restarted aggregator reads the records back and
//! commits whatever stand-in a stop cut short. A dynamic run
//! ([`crate::model::config::RunConfig::dynamic_nodes`]) cannot end before
//! [`NodeSet::settled`]: otherwise a run whose dispatcher has not listed any node yet would be
//! complete at once.

use std::sync::Arc;

use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::types::RunStatus;

use super::shared::Shared;
use super::stand_in::stand_in;
use crate::model::nodes::{Disposition, note};
use crate::persistence::records::DispositionRecord;

/// Why the node set refused a change.
#[derive(Debug, thiserror::Error)]
pub enum NodeSetError {
    /// The run was created with a fixed list of nodes and this is not one of them.
    #[error(
        "node {0} is not one of this run's nodes; the run's nodes are fixed (given to `aggregator create --node`)"
    )]
    NotInRun(NodeName),
    /// The node was skipped or is gone, for good; holds why.
    #[error("{0}")]
    Final(String),
    /// The run is no longer running; its nodes do not change.
    #[error("the run is {0:?}; its nodes no longer change")]
    Ended(RunStatus),
    /// The record could not be written: nothing changed.
    #[error("recording the node set in the run directory: {0}")]
    Io(#[from] std::io::Error),
    /// The change is recorded, but a stand-in result could not be written; the watchdog tries
    /// again (and ends the run failed if it cannot).
    #[error("{0}")]
    StandIn(String),
}

/// Changes the set of nodes a serving run expects. Cheap to clone; every method is durable
/// when it returns.
#[derive(Clone)]
pub struct NodeSet {
    shared: Arc<Shared>,
}

impl NodeSet {
    /// The node set of the run `shared` serves.
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        NodeSet { shared }
    }

    /// The node's per-node pairs become expected (pending), its lost window counting from now.
    /// Idempotent; a node whose agent failed stays so (a result it sends still replaces the
    /// error). A skipped or gone node is refused ([`NodeSetError::Final`]), as is, in a run
    /// with fixed nodes, a node not among them.
    pub async fn expect(&self, node: &NodeName) -> Result<(), NodeSetError> {
        self.change(node, Disposition::Expected).await
    }

    /// The node is not waited for: each of its per-node pairs without a result gets an error
    /// result (status `skipped`) saying `reason`. A node never expected can be skipped: it then
    /// shows as skipped in the status and the bundle. Final.
    pub async fn skip(&self, node: &NodeName, reason: &str) -> Result<(), NodeSetError> {
        let reason = note(reason);
        self.change(node, Disposition::Skipped { reason }).await
    }

    /// The node's agent cannot deliver (say, its pod cannot be scheduled, its image cannot be
    /// pulled, it crash-loops): each missing pair gets an error result (status `agent-failed`)
    /// with `message`, which should say what to do. A result the agent still sends replaces it
    /// while the run runs.
    pub async fn fail(&self, node: &NodeName, message: &str) -> Result<(), NodeSetError> {
        let message = note(message);
        self.change(node, Disposition::AgentFailed { message })
            .await
    }

    /// The node left the cluster: each missing pair gets a lost result (status `lost`) with
    /// `reason` at once, without waiting for the heartbeat window. Final.
    pub async fn gone(&self, node: &NodeName, reason: &str) -> Result<(), NodeSetError> {
        let reason = note(reason);
        self.change(node, Disposition::Gone { reason }).await
    }

    /// The dispatcher's first listing is complete: from now on a dynamic run completes when
    /// every expected pair has a result. Idempotent.
    pub async fn settled(&self) -> Result<(), NodeSetError> {
        let shared = &self.shared;
        let _open = shared.open.read().await;
        let _turn = shared.node_changes.lock().await;
        let mut state = shared.state.lock().unwrap();
        if state.status != RunStatus::Running {
            return Err(NodeSetError::Ended(state.status));
        }
        if !state.settled {
            state.settled = true;
            shared
                .run_dir
                .save_state(&state)
                .map_err(|e| NodeSetError::Io(std::io::Error::other(format!("{e:#}"))))?;
            tracing::info!("the node set is settled");
        }
        drop(state);
        shared.changed.notify_one();
        Ok(())
    }

    /// What the dispatcher said about `node`, if it is one of the run's nodes.
    pub fn disposition(&self, node: &NodeName) -> Option<Disposition> {
        self.shared.state.lock().unwrap().nodes.get(node).cloned()
    }

    async fn change(&self, node: &NodeName, wanted: Disposition) -> Result<(), NodeSetError> {
        let shared = &self.shared;
        // The run stays open while the node changes: packaging waits, and never sees a node
        // half-added.
        let _open = shared.open.read().await;
        // Changes take turns, so that a record on disk is never older than the state.
        let _turn = shared.node_changes.lock().await;
        let current = {
            let state = shared.state.lock().unwrap();
            if state.status != RunStatus::Running {
                return Err(NodeSetError::Ended(state.status));
            }
            state.nodes.get(node).cloned()
        };
        let changes = match (&current, &wanted) {
            (None, _) if !shared.config.dynamic_nodes => {
                return Err(NodeSetError::NotInRun(node.clone()));
            }
            (None, _) | (Some(Disposition::Expected), _) => current.as_ref() != Some(&wanted),
            (Some(was), Disposition::Expected) if was.is_final() => {
                return Err(NodeSetError::Final(
                    was.why_closed(node).expect("final dispositions close"),
                ));
            }
            // The first word stands: a final node stays as it is, and a failed agent's
            // error results are already there.
            (Some(was), Disposition::Skipped { .. } | Disposition::Gone { .. }) => !was.is_final(),
            (Some(_), _) => false,
        };
        if changes {
            let record = DispositionRecord {
                node: node.clone(),
                disposition: wanted.clone(),
            };
            let run_dir = shared.run_dir.clone();
            tokio::task::spawn_blocking(move || run_dir.write_node_record(&record))
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))??;
            let mut state = shared.state.lock().unwrap();
            state.set_node(&shared.config, node, wanted, std::time::SystemTime::now());
            tracing::info!(%node, "{}", describe(state.nodes.get(node)));
        }
        let stand_ins = shared.state.lock().unwrap().stand_ins_for(node);
        for (plugin, scope, status, message) in stand_ins {
            stand_in(shared, &plugin, &scope, status, &message)
                .await
                .map_err(|e| {
                    NodeSetError::StandIn(format!(
                        "recording the error result of {plugin} for {node} failed: {e}; the watchdog tries again"
                    ))
                })?;
        }
        shared.changed.notify_one();
        Ok(())
    }
}

fn describe(disposition: Option<&Disposition>) -> String {
    match disposition {
        Some(Disposition::Expected) | None => "node expected".to_owned(),
        Some(Disposition::Skipped { reason }) => format!("node skipped: {reason}"),
        Some(Disposition::AgentFailed { message }) => format!("node's agent failed: {message}"),
        Some(Disposition::Gone { reason }) => format!("node gone: {reason}"),
    }
}

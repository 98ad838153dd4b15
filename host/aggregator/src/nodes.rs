//! The run's nodes as its dispatcher learns them: [`NodeSet`], a handle the serving binary
//! calls while the aggregator serves (a Kubernetes dispatcher watching Node objects, say; this
//! crate knows nothing of Kubernetes).
//!
//! A node is *expected* (its per-node pairs wait for results), *skipped* (not waited for: an
//! error result saying why stands in), its *agent failed* (an error result with the
//! dispatcher's message stands in; a result the agent still sends replaces it), or *gone* (it
//! left the cluster: a lost result stands in at once, without waiting for the heartbeat
//! window). Skipped and gone are final: the node's late uploads and commits are answered 409
//! and discarded, and it is refused enrollment.
//!
//! Each change is durable before it takes effect: `nodes/<node>.json` is written atomically,
//! then the state changes, then the stand-ins are committed like any result (a result
//! committed before is never replaced). A restarted aggregator reads the records back and
//! commits whatever stand-in a stop cut short. A dynamic run ([`RunConfig::dynamic_nodes`])
//! cannot end before [`NodeSet::settled`]: otherwise a run whose dispatcher has not listed any
//! node yet would be complete at once.

use std::sync::Arc;

use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::routes::Scope;
use factbuoy_protocol::types::{PairStatus, RunStatus};
use serde::{Deserialize, Serialize};

use crate::config::{PlanScope, RunConfig};
use crate::run_dir::{RunDir, write_atomically};
use crate::shared::Shared;

/// Longest reason or message a dispatcher's note keeps, in bytes; longer ones are cut and end
/// in `…`.
pub const MAX_NOTE_BYTES: usize = 1024;

/// What the dispatcher said about a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "disposition", rename_all = "kebab-case")]
pub enum Disposition {
    /// Its per-node pairs wait for results.
    Expected,
    /// Not waited for; holds why (escaped and bounded).
    Skipped {
        /// Why, as the dispatcher said.
        reason: String,
    },
    /// Its agent cannot deliver; holds what the dispatcher saw and what to do.
    AgentFailed {
        /// The dispatcher's message.
        message: String,
    },
    /// It left the cluster; holds why.
    Gone {
        /// Why, as the dispatcher said.
        reason: String,
    },
}

impl Disposition {
    /// Why results of the node are no longer accepted, for a skipped or gone node.
    pub fn refusal(&self, node: &NodeName) -> Option<String> {
        match self {
            Disposition::Skipped { reason } => Some(format!(
                "node {node} was skipped by the run's dispatcher ({reason}); its results are not accepted"
            )),
            Disposition::Gone { reason } => Some(format!(
                "node {node} left the run ({reason}); its results are not accepted"
            )),
            Disposition::Expected | Disposition::AgentFailed { .. } => None,
        }
    }

    /// The status and error message of the result that stands in for a missing one.
    pub fn stand_in(&self, node: &NodeName) -> Option<(PairStatus, String)> {
        match self {
            Disposition::Expected => None,
            Disposition::Skipped { reason } => Some((
                PairStatus::Skipped,
                format!("node {node} was skipped and not waited for: {reason}"),
            )),
            Disposition::AgentFailed { message } => Some((
                PairStatus::AgentFailed,
                format!("the agent of node {node} cannot deliver: {message}"),
            )),
            Disposition::Gone { reason } => Some((
                PairStatus::Lost,
                format!("node {node} left the run before sending its result: {reason}"),
            )),
        }
    }

    /// Whether nothing changes it any more.
    fn is_final(&self) -> bool {
        matches!(self, Disposition::Skipped { .. } | Disposition::Gone { .. })
    }
}

/// A node's record, `nodes/<node>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// The node.
    pub node: NodeName,
    /// What the dispatcher said last.
    #[serde(flatten)]
    pub disposition: Disposition,
}

/// Writes a node's record atomically.
pub fn write_record(run_dir: &RunDir, record: &NodeRecord) -> std::io::Result<()> {
    std::fs::create_dir_all(run_dir.nodes())?;
    let bytes = serde_json::to_vec(record).map_err(std::io::Error::other)?;
    write_atomically(&run_dir.node_record(record.node.as_str()), &bytes)
}

/// Every node record of the run, in no particular order.
pub fn read_records(run_dir: &RunDir) -> anyhow::Result<Vec<NodeRecord>> {
    let dir = run_dir.nodes();
    let entries = match std::fs::read_dir(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        other => other?,
    };
    let mut records = Vec::new();
    for entry in entries {
        let path = entry?.path();
        // A temporary a stop left behind: the record it was replacing still stands.
        if path.extension().is_some_and(|e| e == "tmp") {
            continue;
        }
        let bytes = std::fs::read(&path)?;
        let record: NodeRecord = serde_json::from_slice(&bytes)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        records.push(record);
    }
    Ok(records)
}

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
    pub(crate) shared: Arc<Shared>,
}

impl NodeSet {
    /// The node's per-node pairs become expected (pending), its lost window counting from now.
    /// Idempotent; a node whose agent failed stays so (a result it sends still replaces the
    /// error). A skipped or gone node is refused ([`NodeSetError::Final`]), as is, in a run
    /// with fixed nodes, a node not among them.
    pub async fn expect(&self, node: &NodeName) -> Result<(), NodeSetError> {
        self.change(node, Disposition::Expected).await
    }

    /// The node is not waited for: each of its per-node pairs without a result gets an error
    /// result ([`PairStatus::Skipped`]) saying `reason`. A node never expected can be skipped:
    /// it then shows as skipped in the status and the bundle. Final.
    pub async fn skip(&self, node: &NodeName, reason: &str) -> Result<(), NodeSetError> {
        let reason = note(reason);
        self.change(node, Disposition::Skipped { reason }).await
    }

    /// The node's agent cannot deliver (say, its pod cannot be scheduled, its image cannot be
    /// pulled, it crash-loops): each missing pair gets an error result
    /// ([`PairStatus::AgentFailed`]) with `message`, which should say what to do. A result the
    /// agent still sends replaces it while the run runs.
    pub async fn fail(&self, node: &NodeName, message: &str) -> Result<(), NodeSetError> {
        let message = note(message);
        self.change(node, Disposition::AgentFailed { message })
            .await
    }

    /// The node left the cluster: each missing pair gets a lost result ([`PairStatus::Lost`])
    /// with `reason` at once, without waiting for the heartbeat window. Final.
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
            state
                .save(&shared.run_dir)
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
                    was.refusal(node).expect("final dispositions refuse"),
                ));
            }
            // The first word stands: a final node stays as it is, and a failed agent's
            // error results are already there.
            (Some(was), Disposition::Skipped { .. } | Disposition::Gone { .. }) => !was.is_final(),
            (Some(_), _) => false,
        };
        if changes {
            let record = NodeRecord {
                node: node.clone(),
                disposition: wanted.clone(),
            };
            let run_dir = shared.run_dir.clone();
            tokio::task::spawn_blocking(move || write_record(&run_dir, &record))
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))??;
            let mut state = shared.state.lock().unwrap();
            state.set_node(&shared.config, node, wanted, std::time::SystemTime::now());
            tracing::info!(%node, "{}", describe(state.nodes.get(node)));
        }
        let stand_ins = shared.state.lock().unwrap().stand_ins_for(node);
        for (plugin, scope, status, message) in stand_ins {
            crate::stand_in(shared, &plugin, &scope, status, &message)
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

/// A dispatcher's text made safe to print and store: control characters escaped, at most
/// [`MAX_NOTE_BYTES`] bytes.
pub fn note(text: &str) -> String {
    let text = factbuoy_protocol::text::printable(text);
    if text.len() <= MAX_NOTE_BYTES {
        return text.into_owned();
    }
    let mut end = MAX_NOTE_BYTES - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The per-node pairs `node` has in a run of `config`.
pub(crate) fn scopes_of(config: &RunConfig, node: &NodeName) -> Vec<(String, Scope)> {
    config
        .plugins
        .iter()
        .filter(|p| p.scope == PlanScope::PerNode)
        .map(|p| (p.name.clone(), Scope::Node(node.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_escaped_and_bounded() {
        assert_eq!(note("taint\u{1b}[2J x"), "taint\\u{1b}[2J x");
        let long = "é".repeat(MAX_NOTE_BYTES);
        let cut = note(&long);
        assert!(cut.len() <= MAX_NOTE_BYTES, "{}", cut.len());
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn records_read_back() {
        let temporary = tempfile::tempdir().unwrap();
        let dir = RunDir::new(temporary.path());
        let record = NodeRecord {
            node: NodeName::parse("a").unwrap(),
            disposition: Disposition::Skipped {
                reason: "taint x".into(),
            },
        };
        write_record(&dir, &record).unwrap();
        assert_eq!(read_records(&dir).unwrap(), [record]);
        let text = std::fs::read_to_string(dir.node_record("a")).unwrap();
        assert!(text.contains("\"disposition\":\"skipped\""), "{text}");
    }
}

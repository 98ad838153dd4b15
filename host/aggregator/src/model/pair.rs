//! One (plugin, node) pair the run expects a result of, and the result committed for it.

use std::collections::BTreeMap;

use factbuoy_protocol::types::{Outcome, PairStatus, ProgressUpdate};
use serde::{Deserialize, Serialize};

/// A committed result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Committed {
    /// How the plugin run ended; always failed for a made-up result.
    pub(crate) outcome: Outcome,
    /// Files with their size and sha-256, as verified at commit.
    pub(crate) files: BTreeMap<String, (u64, String)>,
    /// Made by the aggregator itself (lost node, timeout) rather than sent by an agent.
    pub(crate) synthetic: bool,
    /// Names the tree this commit assembled in staging (`commit-<id>`): while that tree is still
    /// there, a restarted aggregator knows the commit took effect and finishes moving it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) commit_id: String,
    /// Whether the commit brought the agent's run report (else an older report is removed).
    #[serde(default)]
    pub(crate) report: bool,
    /// Why the result failed, cut for the status document (see
    /// [`factbuoy_protocol::types::PluginStatus::error`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// The result's warnings, capped for the status document (see
    /// [`factbuoy_protocol::types::PluginStatus::warnings`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) warnings: Vec<String>,
}

impl Committed {
    /// Whether the result passed without a byte of artifacts.
    pub(crate) fn is_empty_pass(&self) -> bool {
        self.outcome == Outcome::Succeeded && self.files.values().all(|(size, _)| *size == 0)
    }
}

/// One (plugin, node) pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Pair {
    /// Where the pair is.
    pub(crate) status: PairStatus,
    /// Its result, once one is committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) committed: Option<Committed>,
    /// The latest progress report; not saved.
    #[serde(skip)]
    pub(crate) progress: Option<ProgressUpdate>,
}

impl Pair {
    /// A pair still waiting for its result.
    pub(crate) fn pending() -> Self {
        Pair {
            status: PairStatus::Pending,
            committed: None,
            progress: None,
        }
    }
}

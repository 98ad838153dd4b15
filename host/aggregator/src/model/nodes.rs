//! The run's nodes as its dispatcher describes them: each node is *expected* (its per-node pairs
//! wait for results), *skipped* (not waited for: an error result saying why stands in), its
//! *agent failed* (an error result with the dispatcher's message stands in; a result the agent
//! still sends replaces it), or *gone* (it left the cluster: a lost result stands in at once,
//! without waiting for the heartbeat window). Skipped and gone are final: the node's late uploads
//! and commits are answered 409 and discarded, and it is refused enrollment.
//!
//! What a disposition means, only: the serving run changes them through its `NodeSet`, and the
//! run directory keeps one record per node (`persistence::records`).

use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::routes::Scope;
use factbuoy_protocol::types::PairStatus;
use serde::{Deserialize, Serialize};

use super::config::{PlanScope, RunConfig};

/// Longest reason or message a dispatcher's note keeps, in bytes; longer ones are cut and end
/// in `…`.
pub(crate) const MAX_NOTE_BYTES: usize = 1024;

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
    pub(crate) fn why_closed(&self, node: &NodeName) -> Option<String> {
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
    pub(crate) fn stand_in(&self, node: &NodeName) -> Option<(PairStatus, String)> {
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
    pub(crate) fn is_final(&self) -> bool {
        matches!(self, Disposition::Skipped { .. } | Disposition::Gone { .. })
    }
}

/// A dispatcher's text made safe to print and store: control characters escaped, at most
/// [`MAX_NOTE_BYTES`] bytes.
pub(crate) fn note(text: &str) -> String {
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
}

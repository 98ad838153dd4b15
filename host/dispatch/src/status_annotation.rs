//! The run's status as an annotation on the aggregator's own pod, for `kubectl describe` and
//! for tools that read the API rather than the operator listener.
//!
//! Its size is bounded whatever the node count: the API server refuses an object whose
//! annotations total more than 256 KiB, and a status that grows with the cluster (Sonobuoy's)
//! stops updating on large clusters. The summary holds counts per state and only the first few
//! problems; the operator listener has the whole document.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use factbuoy_protocol::types::{PairStatus, ResultStatus, RunStatus, StatusDocument};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::Serialize;

/// The annotation's key.
pub const STATUS_ANNOTATION: &str = "factbuoy.dev/status";
/// Largest summary, in bytes of JSON.
pub const MAX_SUMMARY_BYTES: usize = 16 << 10;
/// Problems listed by name; the rest are counted.
pub const MAX_PROBLEMS: usize = 20;
/// Longest problem message kept, in bytes.
pub const MAX_PROBLEM_MESSAGE_BYTES: usize = 256;
/// Shortest time between two patches of the annotation.
pub const MIN_INTERVAL: Duration = Duration::from_secs(5);

/// What the annotation holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnnotatedStatus {
    /// The run's id.
    pub run: String,
    /// Where the whole run is.
    pub status: RunStatus,
    /// Nodes with at least one (plugin, node) pair.
    pub nodes: usize,
    /// (plugin, node) pairs by state (`pending`, `complete`, `lost`, ...).
    pub pairs: BTreeMap<String, usize>,
    /// Committed results that failed, stand-ins included.
    pub failed: usize,
    /// The first pairs whose result failed or stands in for a missing one.
    pub problems: Vec<AnnotatedProblem>,
    /// Problems beyond those listed.
    #[serde(skip_serializing_if = "is_zero")]
    pub more_problems: usize,
    /// The bundle's file name, once written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
    /// Why the run failed, when it did (cut to the message cap).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A pair that needs a person's attention.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnnotatedProblem {
    /// The plugin.
    pub plugin: String,
    /// The node, or `global`.
    pub node: String,
    /// The pair's state.
    pub status: String,
}

/// Summarises `document` within [`MAX_SUMMARY_BYTES`].
pub fn summarize(document: &StatusDocument) -> AnnotatedStatus {
    let mut pairs = BTreeMap::new();
    let mut nodes = std::collections::BTreeSet::new();
    let mut failed = 0;
    let mut problems = Vec::new();
    let mut more_problems = 0;
    for pair in &document.plugins {
        let status = state_name(pair.status);
        *pairs.entry(status.clone()).or_insert(0) += 1;
        nodes.insert(pair.node.as_str());
        let failing = pair.result_status == Some(ResultStatus::Failed);
        if failing {
            failed += 1;
        }
        if failing
            || matches!(
                pair.status,
                PairStatus::Lost | PairStatus::TimedOut | PairStatus::Interrupted
            )
        {
            if problems.len() < MAX_PROBLEMS {
                problems.push(AnnotatedProblem {
                    plugin: cut(&pair.plugin, MAX_PROBLEM_MESSAGE_BYTES),
                    node: cut(&pair.node, MAX_PROBLEM_MESSAGE_BYTES),
                    status,
                });
            } else {
                more_problems += 1;
            }
        }
    }
    let mut summary = AnnotatedStatus {
        run: document.run_id.clone(),
        status: document.status,
        nodes: nodes.len(),
        pairs,
        failed,
        problems,
        more_problems,
        bundle: document.tar_info.as_ref().map(|t| t.name.clone()),
        error: document
            .error
            .as_deref()
            .map(|e| cut(e, MAX_PROBLEM_MESSAGE_BYTES)),
    };
    // Names are bounded, so this rarely drops any; it makes the bound hold whatever they are.
    while !summary.problems.is_empty() && json_len(&summary) > MAX_SUMMARY_BYTES {
        summary.problems.pop();
        summary.more_problems += 1;
    }
    summary
}

fn json_len(summary: &AnnotatedStatus) -> usize {
    serde_json::to_vec(summary).map_or(usize::MAX, |json| json.len())
}

/// The state's name as the status document writes it.
fn state_name(status: PairStatus) -> String {
    match serde_json::to_value(status) {
        Ok(serde_json::Value::String(name)) => name,
        _ => format!("{status:?}"),
    }
}

/// `text` cut to at most `max` bytes on a character boundary, marked with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Keeps the annotation on one pod up to date: at most one patch per [`MIN_INTERVAL`], none
/// when nothing changed.
pub struct Publisher {
    pods: Api<Pod>,
    pod: String,
    last: Option<String>,
    last_patch: Option<Instant>,
}

impl Publisher {
    /// Publishes on `pod` in the namespace `pods` was made for.
    pub fn new(pods: Api<Pod>, pod: String) -> Publisher {
        Publisher {
            pods,
            pod,
            last: None,
            last_patch: None,
        }
    }

    /// Patches the annotation with `document`'s summary, unless it is unchanged or the last
    /// patch was under [`MIN_INTERVAL`] ago and `force` is not set (the final status is
    /// always published). Returns whether it patched.
    pub async fn publish(
        &mut self,
        document: &StatusDocument,
        force: bool,
    ) -> Result<bool, kube::Error> {
        let summary =
            serde_json::to_string(&summarize(document)).expect("a summary always serialises");
        if self.last.as_deref() == Some(summary.as_str()) {
            return Ok(false);
        }
        if !force
            && self
                .last_patch
                .is_some_and(|at| at.elapsed() < MIN_INTERVAL)
        {
            return Ok(false);
        }
        let patch = serde_json::json!({
            "metadata": { "annotations": { STATUS_ANNOTATION: summary } }
        });
        self.pods
            .patch(&self.pod, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        self.last = Some(summary);
        self.last_patch = Some(Instant::now());
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use factbuoy_protocol::types::PluginStatus;

    fn document(nodes: usize, plugins: &[&str], node_name_bytes: usize) -> StatusDocument {
        let mut pairs = Vec::new();
        for plugin in plugins {
            for n in 0..nodes {
                let status = match n % 4 {
                    0 => PairStatus::Complete,
                    1 => PairStatus::Lost,
                    2 => PairStatus::Running,
                    _ => PairStatus::Pending,
                };
                pairs.push(PluginStatus {
                    plugin: plugin.to_string(),
                    node: format!("{n:0>width$}", width = node_name_bytes),
                    status,
                    result_status: (status == PairStatus::Lost).then_some(ResultStatus::Failed),
                    progress: None,
                    last_heartbeat: None,
                    error: None,
                    warnings: Vec::new(),
                    empty: false,
                });
            }
        }
        StatusDocument {
            run_id: "r1".into(),
            status: RunStatus::Running,
            plugins: pairs,
            tar_info: None,
            error: Some("e".repeat(10_000)),
        }
    }

    #[test]
    fn the_summary_stays_small_whatever_the_node_count() {
        // 5,000 nodes with the longest names a node may have, three plugins each.
        let summary = summarize(&document(
            5_000,
            &["host-facts", "setup", "systemd-logs"],
            250,
        ));
        let json = serde_json::to_string(&summary).unwrap();
        assert!(json.len() <= MAX_SUMMARY_BYTES, "{} bytes", json.len());
        assert_eq!(summary.nodes, 5_000);
        assert_eq!(summary.pairs["lost"], 3 * 1_250);
        assert_eq!(summary.problems.len(), MAX_PROBLEMS);
        assert_eq!(summary.more_problems, 3 * 1_250 - MAX_PROBLEMS);
        assert!(summary.error.unwrap().ends_with('…'));
    }

    #[test]
    fn counts_name_each_state_as_the_status_document_does() {
        let summary = summarize(&document(4, &["setup"], 3));
        let states: Vec<&str> = summary.pairs.keys().map(String::as_str).collect();
        assert_eq!(states, ["complete", "lost", "pending", "running"]);
        assert_eq!(summary.failed, 1);
    }
}

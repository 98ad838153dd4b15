//! What the aggregator knows about a run: which (plugin, node) pairs it expects, what arrived,
//! heartbeats, the nodes and what the dispatcher said of each, and the run's status; and what
//! follows from it: whether a result may be accepted, which pairs are lost or missing, the
//! status document.
//!
//! In memory only. It is durable in parts, so that a restarted aggregator continues the run and
//! loses nothing (`persistence`): each committed result's record and each node's record,
//! written before they take effect, and `state.json` for the run-level fields; loading replays
//! the records onto a fresh state. Progress and heartbeats change often and are not saved: after
//! a restart every node gets a fresh heartbeat window.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::routes::Scope;
use factbuoy_protocol::types::{
    Outcome, PairStatus, PluginStatus, ResultStatus, RunStatus, StatusDocument, TarInfo,
    now_rfc3339, rfc3339,
};
use serde::{Deserialize, Serialize};

use super::config::{PlanScope, RunConfig};
use super::nodes::{self, Disposition};
use super::pair::{Committed, Pair};

/// Who speaks for a node never heard from (see [`RunState::lost_pairs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unheard {
    /// Nobody: its silence past the lost window makes it lost.
    Silent,
    /// The run's dispatcher, which watches the node and its agent.
    Dispatcher,
}

/// The whole run's state. Only the run-level fields are saved in `state.json`; pairs come back
/// from their commit records, and heartbeats start afresh.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunState {
    /// Where the run is.
    pub(crate) status: RunStatus,
    /// plugin -> scope (a node, or global) -> pair; rebuilt from commit records.
    #[serde(skip)]
    pub(crate) pairs: BTreeMap<String, BTreeMap<Scope, Pair>>,
    /// The bundle, once it is written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tar_info: Option<TarInfo>,
    /// When the run was created, RFC 3339 UTC.
    pub(crate) started: String,
    /// When the run ended, complete or failed, RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) finished: Option<String>,
    /// node -> last heartbeat.
    #[serde(skip)]
    pub(crate) heartbeats: BTreeMap<NodeName, SystemTime>,
    /// Why a failed run failed (a full disk, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// The run's nodes and what its dispatcher said about each; rebuilt from the configured
    /// nodes and the node records.
    #[serde(skip)]
    pub(crate) nodes: BTreeMap<NodeName, Disposition>,
    /// node -> when it became expected in this process: its lost window counts from here at
    /// least. Not saved.
    #[serde(skip)]
    pub(crate) expected_at: BTreeMap<NodeName, SystemTime>,
    /// Why the run was interrupted, when its operator stopped it: the missing results become
    /// error results, the bundle holds what was collected, and the run ends failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) interrupted: Option<String>,
    /// Until when an interrupted run still takes the results its agents are delivering (the
    /// partial artifacts of stopped plugins) before the missing ones become error results. Not
    /// saved: a restarted run stands them in at once.
    #[serde(skip)]
    pub(crate) interrupt_grace_until: Option<SystemTime>,
    /// Whether the dispatcher said its first listing of nodes is complete (dynamic runs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) settled: bool,
}

/// What a commit attempt meets.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CommitCheck {
    /// Nothing committed yet, or a failed result that a new attempt may replace.
    Open,
    /// A successful result is already there: a true duplicate.
    Duplicate,
    /// The run has ended; nothing more is accepted.
    Closed,
    /// No such pair in this run.
    Unexpected,
    /// The node was skipped or left the run; holds why.
    NodeClosed(String),
}

impl RunState {
    /// A fresh state with every expected pair pending.
    pub(crate) fn new(config: &RunConfig) -> Self {
        let mut pairs = BTreeMap::new();
        for plugin in &config.plugins {
            let entry: &mut BTreeMap<Scope, Pair> = pairs.entry(plugin.name.clone()).or_default();
            if plugin.scope == PlanScope::Global {
                entry.insert(Scope::Global, Pair::pending());
            }
        }
        let mut state = RunState {
            status: RunStatus::Running,
            pairs,
            tar_info: None,
            started: now_rfc3339(),
            finished: None,
            heartbeats: BTreeMap::new(),
            error: None,
            nodes: BTreeMap::new(),
            expected_at: BTreeMap::new(),
            settled: false,
            interrupted: None,
            interrupt_grace_until: None,
        };
        for node in &config.nodes {
            state.set_node(config, node, Disposition::Expected, SystemTime::UNIX_EPOCH);
        }
        state
    }

    /// Makes `node` one of the run's nodes with `disposition`, adding its per-node pairs
    /// (pending) if it had none; `now` starts its lost window. In memory: the caller writes the
    /// node record first.
    pub(crate) fn set_node(
        &mut self,
        config: &RunConfig,
        node: &NodeName,
        disposition: Disposition,
        now: SystemTime,
    ) {
        for (plugin, scope) in nodes::scopes_of(config, node) {
            self.pairs
                .entry(plugin)
                .or_default()
                .entry(scope)
                .or_insert_with(Pair::pending);
        }
        if !self.nodes.contains_key(node) {
            self.expected_at.insert(node.clone(), now);
        }
        self.nodes.insert(node.clone(), disposition);
    }

    /// Whether `node`'s agent gets a plan: it is one of the run's nodes, neither skipped nor
    /// gone.
    pub(crate) fn plans_for(&self, node: &NodeName) -> bool {
        self.nodes
            .get(node)
            .is_some_and(|d| d.why_closed(node).is_none())
    }

    /// The error results that stand in for `node`'s missing ones, as its disposition says:
    /// (plugin, scope, status, message).
    pub(crate) fn stand_ins_for(
        &self,
        node: &NodeName,
    ) -> Vec<(String, Scope, PairStatus, String)> {
        let Some((status, message)) = self.nodes.get(node).and_then(|d| d.stand_in(node)) else {
            return Vec::new();
        };
        let scope = Scope::Node(node.clone());
        self.pairs
            .iter()
            .filter(|(_, scopes)| scopes.get(&scope).is_some_and(|p| p.committed.is_none()))
            .map(|(plugin, _)| (plugin.clone(), scope.clone(), status, message.clone()))
            .collect()
    }

    /// Every stand-in the dispositions call for and a stop may have cut short.
    pub(crate) fn disposition_stand_ins(&self) -> Vec<(String, Scope, PairStatus, String)> {
        self.nodes
            .iter()
            .filter(|(_, d)| **d != Disposition::Expected)
            .flat_map(|(node, _)| self.stand_ins_for(node))
            .collect()
    }

    /// Applies a result whose commit record is written, in memory.
    pub(crate) fn apply_commit(
        &mut self,
        plugin: &str,
        scope: &Scope,
        status: PairStatus,
        committed: Committed,
    ) {
        if let Some(pair) = self.pair_mut(plugin, scope) {
            pair.status = status;
            pair.committed = Some(committed);
        }
    }

    /// The pair of `plugin` and `scope`, if the run expects it.
    pub(crate) fn pair(&self, plugin: &str, scope: &Scope) -> Option<&Pair> {
        self.pairs.get(plugin)?.get(scope)
    }

    /// The pair, to change in memory only (progress, say); a result is applied with
    /// [`RunState::apply_commit`] once its record is written.
    pub(crate) fn pair_mut(&mut self, plugin: &str, scope: &Scope) -> Option<&mut Pair> {
        self.pairs.get_mut(plugin)?.get_mut(scope)
    }

    /// Notes that something arrived for a pair that had nothing yet.
    pub(crate) fn mark_running(&mut self, plugin: &str, scope: &Scope) {
        if let Some(pair) = self.pair_mut(plugin, scope)
            && pair.status == PairStatus::Pending
        {
            pair.status = PairStatus::Running;
        }
    }

    /// Whether a result (an upload or a commit) for the pair may be accepted now.
    pub(crate) fn check_commit(&self, plugin: &str, scope: &Scope) -> CommitCheck {
        if self.status != RunStatus::Running {
            return CommitCheck::Closed;
        }
        if let Scope::Node(node) = scope
            && let Some(why) = self.nodes.get(node).and_then(|d| d.why_closed(node))
        {
            return CommitCheck::NodeClosed(why);
        }
        match self.pair(plugin, scope) {
            None => CommitCheck::Unexpected,
            Some(Pair {
                committed: Some(c), ..
            }) if c.outcome == Outcome::Succeeded => CommitCheck::Duplicate,
            Some(_) => CommitCheck::Open,
        }
    }

    /// Whether every pair has a result (sent or made up): the run can be packaged.
    pub(crate) fn all_done(&self) -> bool {
        self.pairs
            .values()
            .flat_map(|nodes| nodes.values())
            .all(|pair| pair.committed.is_some())
    }

    /// Pairs of nodes silent for longer than `window`, still waiting for a result. A node never
    /// heard from is counted from `since` (or from when it became expected), unless `unheard`
    /// is [`Unheard::Dispatcher`]: a dispatcher then watches the node and its agent (a pod
    /// pulling its image, a node whose kubelet stopped) and says what became of it, so silence
    /// before the first word is no loss; the run timeout still bounds the wait.
    pub(crate) fn lost_pairs(
        &self,
        now: SystemTime,
        since: SystemTime,
        window: Duration,
        unheard: Unheard,
    ) -> Vec<(String, Scope)> {
        let mut lost = Vec::new();
        for (plugin, scopes) in &self.pairs {
            for (scope, pair) in scopes {
                // A global result has no node whose heartbeats could stop.
                let Scope::Node(node) = scope else { continue };
                if pair.committed.is_some()
                    || self
                        .nodes
                        .get(node)
                        .is_some_and(|d| d.why_closed(node).is_some())
                {
                    continue;
                }
                // A node added mid-run gets its whole window.
                let since = self
                    .expected_at
                    .get(node)
                    .map_or(since, |at| since.max(*at));
                let last = match (self.heartbeats.get(node), unheard) {
                    (Some(beat), _) => (*beat).max(since),
                    (None, Unheard::Silent) => since,
                    (None, Unheard::Dispatcher) => continue,
                };
                if now.duration_since(last).unwrap_or_default() > window {
                    lost.push((plugin.clone(), scope.clone()));
                }
            }
        }
        lost
    }

    /// Pairs still waiting for a result.
    pub(crate) fn missing_pairs(&self) -> Vec<(String, Scope)> {
        self.pairs
            .iter()
            .flat_map(|(plugin, scopes)| {
                scopes
                    .iter()
                    .filter(|(_, pair)| pair.committed.is_none())
                    .map(|(scope, _)| (plugin.clone(), scope.clone()))
            })
            .collect()
    }

    /// The status document operators see.
    pub(crate) fn document(&self, run_id: &str) -> StatusDocument {
        let mut plugins = Vec::new();
        for (plugin, scopes) in &self.pairs {
            for (scope, pair) in scopes {
                let last_heartbeat = match scope {
                    Scope::Node(node) => self.heartbeats.get(node).map(|at| rfc3339(*at)),
                    Scope::Global => None,
                };
                plugins.push(PluginStatus {
                    plugin: plugin.clone(),
                    node: scope.label().to_owned(),
                    status: pair.status,
                    result_status: pair.committed.as_ref().map(|c| match c.outcome {
                        Outcome::Succeeded => ResultStatus::Passed,
                        Outcome::Failed => ResultStatus::Failed,
                    }),
                    progress: pair.progress.clone(),
                    last_heartbeat,
                    error: pair.committed.as_ref().and_then(|c| c.error.clone()),
                    warnings: pair
                        .committed
                        .as_ref()
                        .map(|c| c.warnings.clone())
                        .unwrap_or_default(),
                    empty: pair
                        .committed
                        .as_ref()
                        .is_some_and(Committed::is_empty_pass),
                });
            }
        }
        StatusDocument {
            run_id: run_id.to_owned(),
            status: self.status,
            plugins,
            tar_info: self.tar_info.clone(),
            error: self.error.clone(),
        }
    }

    /// How the run ends once its bundle is written: `failed` when it was interrupted or an
    /// error was recorded before packaging (what was collected is still packaged), else
    /// `complete`.
    pub(crate) fn final_status(&self) -> RunStatus {
        if self.final_error().is_some() {
            RunStatus::Failed
        } else {
            RunStatus::Complete
        }
    }

    /// Why the run ends failed once its bundle is written (see [`RunState::final_status`]).
    pub(crate) fn final_error(&self) -> Option<String> {
        self.error.clone().or_else(|| {
            self.interrupted.as_ref().map(|reason| {
                format!("interrupted ({reason}); the bundle holds the results collected before")
            })
        })
    }

    /// The status document the bundle keeps as `meta/status.json`: the run's final status, not
    /// the `post-processing` it is packaged in. It has no `tar_info`: no file inside the bundle
    /// can hold the bundle's own digest; `/status` has it once the bundle is written.
    pub(crate) fn bundle_document(&self, run_id: &str) -> StatusDocument {
        StatusDocument {
            status: self.final_status(),
            error: self.final_error(),
            tar_info: None,
            ..self.document(run_id)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> RunConfig {
        crate::model::config::sample()
    }

    fn name(node: &str) -> NodeName {
        NodeName::parse(node).unwrap()
    }

    fn node(node: &str) -> Scope {
        Scope::Node(name(node))
    }

    fn commit(state: &mut RunState, plugin: &str, node: &str, outcome: Outcome) {
        let pair = state.pair_mut(plugin, &self::node(node)).unwrap();
        pair.status = PairStatus::Complete;
        pair.committed = Some(Committed {
            outcome,
            files: BTreeMap::new(),
            synthetic: false,
            commit_id: String::new(),
            report: false,
            error: None,
            warnings: Vec::new(),
        });
    }

    #[test]
    fn expects_one_pair_per_node_and_one_per_global_plugin() {
        let state = RunState::new(&config());
        assert_eq!(state.missing_pairs().len(), 3);
        // The global pair belongs to no node: it is never lost for want of heartbeats.
        let later = SystemTime::now() + Duration::from_secs(3600);
        let lost = state.lost_pairs(
            later,
            SystemTime::now(),
            Duration::from_secs(1),
            Unheard::Silent,
        );
        assert_eq!(lost.len(), 2);
        assert!(
            lost.iter()
                .all(|(_, scope)| matches!(scope, Scope::Node(_)))
        );
        assert_eq!(state.check_commit("setup", &node("a")), CommitCheck::Open);
        assert_eq!(
            state.check_commit("setup", &node("zzz")),
            CommitCheck::Unexpected
        );
        assert_eq!(
            state.check_commit("nope", &node("a")),
            CommitCheck::Unexpected
        );
        assert_eq!(
            state.check_commit("cluster", &Scope::Global),
            CommitCheck::Open
        );
    }

    #[test]
    fn only_a_successful_result_makes_a_duplicate() {
        let mut state = RunState::new(&config());
        commit(&mut state, "setup", "a", Outcome::Failed);
        assert_eq!(state.check_commit("setup", &node("a")), CommitCheck::Open);
        commit(&mut state, "setup", "a", Outcome::Succeeded);
        assert_eq!(
            state.check_commit("setup", &node("a")),
            CommitCheck::Duplicate
        );
        state.status = RunStatus::Complete;
        assert_eq!(state.check_commit("setup", &node("b")), CommitCheck::Closed);
    }

    /// A moment `secs` after the start of the runs these tests look at.
    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1000 + secs)
    }

    /// The pairs lost `secs` after the start, with a 60 s window.
    fn lost_at(state: &RunState, secs: u64, unheard: Unheard) -> Vec<(String, Scope)> {
        state.lost_pairs(at(secs), at(0), Duration::from_secs(60), unheard)
    }

    #[test]
    fn silent_nodes_are_lost_after_the_window() {
        let mut state = RunState::new(&config());
        state.heartbeats.insert(name("a"), at(50));
        assert!(lost_at(&state, 59, Unheard::Silent).is_empty());
        // b never spoke: lost 60 s after the start; a spoke at 50 s: lost after 110 s.
        assert_eq!(
            lost_at(&state, 61, Unheard::Silent),
            [("setup".to_owned(), node("b"))]
        );
        commit(&mut state, "setup", "b", Outcome::Succeeded);
        assert_eq!(
            lost_at(&state, 111, Unheard::Silent),
            [("setup".to_owned(), node("a"))]
        );
    }

    #[test]
    fn a_dispatcher_speaks_for_nodes_never_heard_from_and_silence_after_a_word_is_loss() {
        let mut state = RunState::new(&config());
        state.heartbeats.insert(name("a"), at(50));
        // b's agent may still be pulling its image: only the run timeout bounds that wait.
        assert!(lost_at(&state, 109, Unheard::Dispatcher).is_empty());
        assert_eq!(
            lost_at(&state, 500, Unheard::Dispatcher),
            [("setup".to_owned(), node("a"))]
        );
    }

    #[test]
    fn a_node_added_mid_run_gets_its_whole_lost_window() {
        let mut config = config();
        config.dynamic_nodes = true;
        let mut state = RunState::new(&config);
        state.set_node(&config, &name("c"), Disposition::Expected, at(100));
        let lost = lost_at(&state, 150, Unheard::Silent);
        assert!(!lost.contains(&("setup".to_owned(), node("c"))), "{lost:?}");
        let lost = lost_at(&state, 161, Unheard::Silent);
        assert!(lost.contains(&("setup".to_owned(), node("c"))), "{lost:?}");
        // Skipped: never lost, never waited for.
        state.set_node(
            &config,
            &name("c"),
            Disposition::Skipped { reason: "x".into() },
            at(0),
        );
        let lost = lost_at(&state, 500, Unheard::Silent);
        assert!(!lost.contains(&("setup".to_owned(), node("c"))), "{lost:?}");
        assert_eq!(state.stand_ins_for(&name("c")).len(), 1);
    }

    #[test]
    fn the_bundle_keeps_the_final_status_without_its_own_digest() {
        let mut state = RunState::new(&config());
        state.status = RunStatus::PostProcessing;
        state.tar_info = Some(TarInfo {
            name: "earlier.tar.gz".into(),
            created: String::new(),
            sha256: String::new(),
            size: 0,
        });
        let document = state.bundle_document("r");
        assert_eq!(document.status, RunStatus::Complete);
        assert_eq!(document.tar_info, None);
        assert_eq!(document.plugins, state.document("r").plugins);
        state.error = Some("interrupted".into());
        let document = state.bundle_document("r");
        assert_eq!(document.status, RunStatus::Failed);
        assert_eq!(document.error.as_deref(), Some("interrupted"));
    }
}

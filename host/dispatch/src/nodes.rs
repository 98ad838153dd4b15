//! Following the cluster's nodes: which ones the run's agents should reach (the DaemonSet
//! controller's own rule: node selector and taints), which are skipped and why, which left, and
//! which stopped answering. One watch on all nodes, never a poll.

use std::collections::BTreeMap;
use std::time::Duration;

use factbuoy_protocol::names::NodeName;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Node, Taint, Toleration};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Taints the DaemonSet controller tolerates on every daemon pod by itself (kubernetes.io
/// DaemonSet docs, "Taints and tolerations"; `network-unavailable` only for host-network pods,
/// which agents are not). A cordoned node, or one under memory pressure, still gets its agent.
pub const DAEMONSET_TOLERATIONS: &[(&str, &str)] = &[
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
];

/// Taints the node lifecycle controller sets while a node is not Ready. They say what the Ready
/// condition says, which the watch follows itself: such a node is lost after the window (and
/// found again when Ready), not skipped, so a node still booting is waited for.
const READINESS_TAINTS: &[&str] = &[
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// Default for how long an expected node may stay not Ready before it is reported lost: the node
/// controller already waits its grace period (40 s by default) before it marks a silent kubelet
/// `Unknown`.
pub const DEFAULT_LOST_AFTER: Duration = Duration::from_secs(60);

/// Which nodes the run's DaemonSet places agents on: its pod template's node selector and
/// tolerations, exactly as written in the manifest (the DaemonSet controller's automatic
/// tolerations are added here, as the controller adds them).
#[derive(Debug, Clone, Default)]
pub struct NodeFilter {
    /// `spec.template.spec.nodeSelector`: every label must be on the node with this value.
    pub node_selector: BTreeMap<String, String>,
    /// `spec.template.spec.tolerations`.
    pub tolerations: Vec<Toleration>,
}

/// A node's Ready condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// `Ready=True`.
    Ready,
    /// `Ready=False` or `Unknown`, or no Ready condition yet; holds the condition's status,
    /// reason and message as the node controller or kubelet wrote them.
    NotReady(String),
}

/// What the watch keeps of a node: a few hundred bytes, whatever the node's status holds.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`: another uid under the same name is another node.
    pub uid: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.taints`, without `timeAdded`.
    pub taints: Vec<Taint>,
    /// The Ready condition.
    pub readiness: Readiness,
}

impl NodeView {
    /// The parts of `node` the watch keeps.
    pub fn of(node: &Node) -> NodeView {
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .map(|taints| {
                taints
                    .iter()
                    .map(|t| Taint {
                        time_added: None,
                        ..t.clone()
                    })
                    .collect()
            })
            .unwrap_or_default();
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
        let readiness = match ready {
            Some(c) if c.status == "True" => Readiness::Ready,
            Some(c) => Readiness::NotReady(format!(
                "Ready={}{}{}",
                c.status,
                c.reason
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default(),
                c.message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            )),
            None => Readiness::NotReady("no Ready condition yet".into()),
        };
        NodeView {
            name: node.name_any(),
            uid: node.uid().unwrap_or_default(),
            labels: node.labels().clone(),
            taints,
            readiness,
        }
    }
}

/// What the watch learned about a node; the dispatcher maps each onto the run's node set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeChange {
    /// The run's DaemonSet places an agent on this node: wait for its results. Also sent when a
    /// lost node is Ready again, and when a skipped node becomes eligible.
    Expected(NodeName),
    /// The DaemonSet places no agent here; `reason` names the taint or label and the flag that
    /// would include the node.
    Skipped {
        /// The node.
        node: NodeName,
        /// Why, and what to do.
        reason: String,
    },
    /// An expected node has not been Ready for longer than the window: its kubelet stopped or
    /// it lost the network. The Node object is still there.
    Lost {
        /// The node.
        node: NodeName,
        /// Its Ready condition, how long, and what to check.
        reason: String,
    },
    /// The node left the cluster: its Node object was deleted, or replaced by another one of
    /// the same name (a `Gone` then comes before the new node's own event).
    Gone {
        /// The node.
        node: NodeName,
        /// What happened.
        reason: String,
    },
    /// A node whose name factbuoy cannot store results under; it is neither waited for nor
    /// reported under its name.
    Unusable {
        /// The node's name as Kubernetes has it.
        name: String,
        /// Why the name is refused.
        reason: String,
    },
    /// The first full listing is in: every node that existed when the watch started has had
    /// its event. Sent once.
    Settled,
}

/// Whether `toleration` tolerates `taint` (Kubernetes' `ToleratesTaint`): an empty effect
/// matches every effect, an empty key (with `Exists`) every key; `Exists` ignores the value,
/// `Equal` (the default) compares it.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let nonempty = |s: &Option<String>| s.as_deref().filter(|s| !s.is_empty()).map(str::to_owned);
    if let Some(effect) = nonempty(&toleration.effect)
        && effect != taint.effect
    {
        return false;
    }
    if let Some(key) = nonempty(&toleration.key)
        && key != taint.key
    {
        return false;
    }
    match toleration.operator.as_deref() {
        Some("Exists") => true,
        Some("Equal") | Some("") | None => {
            toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        Some(_) => false,
    }
}

fn taint_text(taint: &Taint) -> String {
    match taint.value.as_deref().filter(|v| !v.is_empty()) {
        Some(value) => format!("{}={value}:{}", taint.key, taint.effect),
        None => format!("{}:{}", taint.key, taint.effect),
    }
}

impl NodeFilter {
    fn tolerated(&self, taint: &Taint) -> bool {
        DAEMONSET_TOLERATIONS
            .iter()
            .any(|(key, effect)| taint.key == *key && taint.effect == *effect)
            || self.tolerations.iter().any(|t| tolerates(t, taint))
    }

    /// Why the DaemonSet does not place an agent on `node`, or `None` when it does. With
    /// `running`, the rule for a node whose agent is already placed: only `NoExecute` taints
    /// evict it (a `NoSchedule` taint added later leaves it running).
    pub fn refusal(&self, node: &NodeView, running: bool) -> Option<String> {
        for (key, want) in &self.node_selector {
            match node.labels.get(key) {
                Some(have) if have == want => {}
                Some(have) => {
                    return Some(format!(
                        "its label {key}={have} does not match --node-selector {key}={want}"
                    ));
                }
                None => {
                    return Some(format!(
                        "it has no label {key}, which --node-selector {key}={want} requires"
                    ));
                }
            }
        }
        let blocking = |t: &&Taint| {
            (t.effect == "NoExecute" || (t.effect == "NoSchedule" && !running))
                && !READINESS_TAINTS.contains(&t.key.as_str())
        };
        let taint = node
            .taints
            .iter()
            .filter(blocking)
            .find(|t| !self.tolerated(t))?;
        let text = taint_text(taint);
        Some(format!(
            "its taint {text} is not tolerated; add --tolerate {text} to include it (or leave out --no-tolerate-all)"
        ))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Class {
    Expected,
    Skipped(String),
    Lost,
    Unusable,
}

struct Tracked {
    view: NodeView,
    /// What the node was last reported as; `None` before its first report.
    class: Option<Class>,
    /// When this watch first saw the node not Ready, while expected.
    not_ready_since: Option<Instant>,
}

/// The watch's state, apart from the watch: the live nodes, what each was last reported as, and
/// a relist being gathered. Feed it the watcher's events; it returns what to report.
pub struct NodeTracker {
    filter: NodeFilter,
    lost_after: Duration,
    live: BTreeMap<String, Tracked>,
    relist: Option<BTreeMap<String, NodeView>>,
    settled: bool,
}

impl NodeTracker {
    /// A tracker that places agents as `filter` says and reports an expected node lost after
    /// `lost_after` without Ready.
    pub fn new(filter: NodeFilter, lost_after: Duration) -> NodeTracker {
        NodeTracker {
            filter,
            lost_after,
            live: BTreeMap::new(),
            relist: None,
            settled: false,
        }
    }

    /// A (re)list starts.
    pub fn init(&mut self) {
        self.relist = Some(BTreeMap::new());
    }

    /// A node of the listing.
    pub fn init_apply(&mut self, view: NodeView) {
        self.relist
            .get_or_insert_default()
            .insert(view.name.clone(), view);
    }

    /// The listing is complete: nodes it lacks were deleted while the watch was down. The first
    /// listing ends with [`NodeChange::Settled`].
    pub fn init_done(&mut self, now: Instant) -> Vec<NodeChange> {
        let listed = self.relist.take().unwrap_or_default();
        let missing: Vec<String> = self
            .live
            .keys()
            .filter(|name| !listed.contains_key(*name))
            .cloned()
            .collect();
        let mut changes: Vec<NodeChange> = missing
            .iter()
            .filter_map(|name| self.delete(name, "its Node object was deleted"))
            .collect();
        for view in listed.into_values() {
            changes.extend(self.apply(view, now));
        }
        if !self.settled {
            self.settled = true;
            changes.push(NodeChange::Settled);
        }
        changes
    }

    /// A node was added or changed.
    pub fn apply(&mut self, view: NodeView, now: Instant) -> Vec<NodeChange> {
        let mut changes = Vec::new();
        if self
            .live
            .get(&view.name)
            .is_some_and(|old| old.view.uid != view.uid)
        {
            changes.extend(self.delete(
                &view.name,
                "its Node object was replaced by a new one of the same name",
            ));
        }
        let name = view.name.clone();
        match self.live.get_mut(&name) {
            Some(tracked) => tracked.view = view,
            None => {
                if let Err(e) = NodeName::parse(&name) {
                    changes.push(NodeChange::Unusable {
                        name: name.clone(),
                        reason: e.to_string(),
                    });
                }
                self.live.insert(
                    name.clone(),
                    Tracked {
                        view,
                        class: None,
                        not_ready_since: None,
                    },
                );
            }
        }
        changes.extend(self.classify(&name, now));
        changes
    }

    /// A node was deleted; `reason` says how it went.
    pub fn delete(&mut self, name: &str, reason: &str) -> Option<NodeChange> {
        self.live.remove(name)?;
        Some(NodeChange::Gone {
            node: NodeName::parse(name).ok()?,
            reason: reason.to_owned(),
        })
    }

    /// Time passed: expected nodes not Ready for the whole window are lost.
    pub fn tick(&mut self, now: Instant) -> Vec<NodeChange> {
        let waiting: Vec<String> = self
            .live
            .iter()
            .filter(|(_, t)| t.class == Some(Class::Expected) && t.not_ready_since.is_some())
            .map(|(name, _)| name.clone())
            .collect();
        waiting
            .iter()
            .filter_map(|n| self.classify(n, now))
            .collect()
    }

    /// When the next expected node becomes lost, if one is not Ready.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.live
            .values()
            .filter(|t| t.class == Some(Class::Expected))
            .filter_map(|t| t.not_ready_since)
            .min()
            .map(|since| since + self.lost_after)
    }

    fn classify(&mut self, name: &str, now: Instant) -> Option<NodeChange> {
        let tracked = self.live.get_mut(name)?;
        let Ok(node) = NodeName::parse(name) else {
            tracked.class = Some(Class::Unusable);
            return None;
        };
        let running = matches!(tracked.class, Some(Class::Expected | Class::Lost));
        let class = match self.filter.refusal(&tracked.view, running) {
            Some(reason) => {
                tracked.not_ready_since = None;
                Class::Skipped(reason)
            }
            None => match &tracked.view.readiness {
                Readiness::Ready => {
                    tracked.not_ready_since = None;
                    Class::Expected
                }
                Readiness::NotReady(_) => {
                    let since = *tracked.not_ready_since.get_or_insert(now);
                    if tracked.class == Some(Class::Lost)
                        || now.duration_since(since) >= self.lost_after
                    {
                        Class::Lost
                    } else {
                        Class::Expected
                    }
                }
            },
        };
        if tracked.class.as_ref() == Some(&class) {
            return None;
        }
        tracked.class = Some(class.clone());
        Some(match class {
            Class::Expected => NodeChange::Expected(node),
            Class::Skipped(reason) => NodeChange::Skipped { node, reason },
            Class::Lost => {
                let condition = match &tracked.view.readiness {
                    Readiness::NotReady(c) => c.as_str(),
                    Readiness::Ready => "",
                };
                NodeChange::Lost {
                    node,
                    reason: format!(
                        "not Ready for over {} s ({condition}): its kubelet stopped or the node lost the network; check the node, or delete its Node object if it is gone for good",
                        self.lost_after.as_secs()
                    ),
                }
            }
            Class::Unusable => return None,
        })
    }
}

/// Watches every node and sends what changes to `changes`, until the receiver is dropped. Watch
/// errors are logged and retried with kube's default backoff; after each relist, nodes missing
/// from it are reported gone. Before the first listing completes, nothing is sent; then each
/// node's event, then [`NodeChange::Settled`].
pub async fn follow_nodes(
    client: Client,
    filter: NodeFilter,
    lost_after: Duration,
    changes: mpsc::Sender<NodeChange>,
) {
    let stream = watcher(Api::<Node>::all(client), watcher::Config::default())
        .default_backoff()
        .modify(|node| {
            // A node's images list alone can be tens of kilobytes; at 1,000 nodes the watch
            // must not hold them, even for a moment per event.
            node.managed_fields_mut().clear();
            node.annotations_mut().clear();
            if let Some(status) = node.status.as_mut() {
                status.images = None;
            }
        });
    let mut stream = std::pin::pin!(stream);
    let mut tracker = NodeTracker::new(filter, lost_after);
    // Looks at every node: found again only when the nodes in force may have changed, not for
    // each node of a listing (thousands of them, which change nothing until the listing ends).
    let mut deadline = tracker.next_deadline();
    loop {
        let batch = tokio::select! {
            _ = changes.closed() => return,
            _ = sleep_until(deadline) => tracker.tick(Instant::now()),
            event = stream.next() => match event {
                None => return,
                Some(Ok(watcher::Event::Init)) => {
                    tracker.init();
                    continue;
                }
                Some(Ok(watcher::Event::InitApply(node))) => {
                    tracker.init_apply(NodeView::of(&node));
                    continue;
                }
                Some(Ok(watcher::Event::InitDone)) => tracker.init_done(Instant::now()),
                Some(Ok(watcher::Event::Apply(node))) => {
                    tracker.apply(NodeView::of(&node), Instant::now())
                }
                Some(Ok(watcher::Event::Delete(node))) => tracker
                    .delete(&node.name_any(), "its Node object was deleted")
                    .into_iter()
                    .collect(),
                Some(Err(e)) => {
                    tracing::warn!("watching nodes: {e}; retrying");
                    continue;
                }
            },
        };
        deadline = tracker.next_deadline();
        for change in batch {
            tracing::debug!(?change, "node");
            if changes.send(change).await.is_err() {
                return;
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn toleration(key: &str, operator: &str, value: &str, effect: &str) -> Toleration {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Toleration {
            key: some(key),
            operator: some(operator),
            value: some(value),
            effect: some(effect),
            toleration_seconds: None,
        }
    }

    fn node(labels: &[(&str, &str)], taints: Vec<Taint>, readiness: Readiness) -> NodeView {
        NodeView {
            name: "node-1".into(),
            uid: "uid-1".into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            taints,
            readiness,
        }
    }

    #[test]
    fn exists_with_an_empty_key_tolerates_every_taint() {
        let all = toleration("", "Exists", "", "");
        assert!(tolerates(&all, &taint("a", Some("b"), "NoSchedule")));
        assert!(tolerates(&all, &taint("x", None, "NoExecute")));
        let all_no_execute = toleration("", "Exists", "", "NoExecute");
        assert!(tolerates(&all_no_execute, &taint("x", None, "NoExecute")));
        assert!(!tolerates(&all_no_execute, &taint("x", None, "NoSchedule")));
    }

    #[test]
    fn an_empty_effect_matches_every_effect_of_its_key() {
        let t = toleration("gpu", "Exists", "", "");
        assert!(tolerates(&t, &taint("gpu", Some("a100"), "NoSchedule")));
        assert!(tolerates(&t, &taint("gpu", None, "NoExecute")));
        assert!(!tolerates(&t, &taint("other", None, "NoExecute")));
    }

    #[test]
    fn equal_compares_the_value_and_is_the_default_operator() {
        let equal = toleration("gpu", "Equal", "a100", "NoSchedule");
        assert!(tolerates(&equal, &taint("gpu", Some("a100"), "NoSchedule")));
        assert!(!tolerates(
            &equal,
            &taint("gpu", Some("h100"), "NoSchedule")
        ));
        assert!(!tolerates(&equal, &taint("gpu", None, "NoSchedule")));
        let default = toleration("gpu", "", "a100", "NoSchedule");
        assert!(tolerates(
            &default,
            &taint("gpu", Some("a100"), "NoSchedule")
        ));
        assert!(!tolerates(
            &default,
            &taint("gpu", Some("h100"), "NoSchedule")
        ));
        // No value on either side is equal.
        let bare = toleration("gpu", "Equal", "", "NoSchedule");
        assert!(tolerates(&bare, &taint("gpu", None, "NoSchedule")));
        let wrong_effect = toleration("gpu", "Equal", "a100", "NoExecute");
        assert!(!tolerates(
            &wrong_effect,
            &taint("gpu", Some("a100"), "NoSchedule")
        ));
    }

    #[test]
    fn an_untolerated_taint_is_named_with_the_flag_that_includes_the_node() {
        let filter = NodeFilter::default();
        let n = node(
            &[],
            vec![taint("gpu", Some("a100"), "NoSchedule")],
            Readiness::Ready,
        );
        let reason = filter
            .refusal(&n, false)
            .expect("an untolerated taint refuses");
        assert!(reason.contains("gpu=a100:NoSchedule"), "{reason}");
        assert!(
            reason.contains("--tolerate gpu=a100:NoSchedule"),
            "{reason}"
        );
        let tolerated = NodeFilter {
            tolerations: vec![toleration("gpu", "Equal", "a100", "NoSchedule")],
            ..NodeFilter::default()
        };
        assert_eq!(tolerated.refusal(&n, false), None);
    }

    #[test]
    fn prefer_no_schedule_never_blocks() {
        let n = node(
            &[],
            vec![taint("soft", None, "PreferNoSchedule")],
            Readiness::Ready,
        );
        assert_eq!(NodeFilter::default().refusal(&n, false), None);
    }

    #[test]
    fn the_daemonset_controllers_own_tolerations_apply() {
        let filter = NodeFilter::default();
        let cordoned = node(
            &[],
            vec![
                taint("node.kubernetes.io/unschedulable", None, "NoSchedule"),
                taint("node.kubernetes.io/memory-pressure", None, "NoSchedule"),
            ],
            Readiness::Ready,
        );
        assert_eq!(filter.refusal(&cordoned, false), None);
        // Not the network-unavailable one: agents do not use the host network.
        let no_network = node(
            &[],
            vec![taint(
                "node.kubernetes.io/network-unavailable",
                None,
                "NoSchedule",
            )],
            Readiness::Ready,
        );
        assert!(filter.refusal(&no_network, false).is_some());
    }

    #[test]
    fn a_no_schedule_taint_added_to_a_running_node_leaves_it_but_no_execute_evicts() {
        let filter = NodeFilter::default();
        let soft = node(&[], vec![taint("k", None, "NoSchedule")], Readiness::Ready);
        assert!(filter.refusal(&soft, false).is_some());
        assert_eq!(filter.refusal(&soft, true), None);
        let hard = node(&[], vec![taint("k", None, "NoExecute")], Readiness::Ready);
        assert!(filter.refusal(&hard, true).is_some());
    }

    #[test]
    fn the_node_selector_must_match_every_label() {
        let filter = NodeFilter {
            node_selector: [("disk".to_string(), "ssd".to_string())].into(),
            ..NodeFilter::default()
        };
        assert_eq!(
            filter.refusal(&node(&[("disk", "ssd")], vec![], Readiness::Ready), false),
            None
        );
        let other = filter
            .refusal(&node(&[("disk", "hdd")], vec![], Readiness::Ready), false)
            .unwrap();
        assert!(
            other.contains("disk=hdd") && other.contains("--node-selector disk=ssd"),
            "{other}"
        );
        let none = filter
            .refusal(&node(&[], vec![], Readiness::Ready), false)
            .unwrap();
        assert!(none.contains("no label disk"), "{none}");
    }

    fn expected(name: &str) -> NodeChange {
        NodeChange::Expected(NodeName::parse(name).unwrap())
    }

    #[test]
    fn a_relist_finds_the_deletes_the_watch_missed() {
        let now = Instant::now();
        let mut tracker = NodeTracker::new(NodeFilter::default(), Duration::from_secs(30));
        let a = NodeView {
            name: "a".into(),
            ..node(&[], vec![], Readiness::Ready)
        };
        let b = NodeView {
            name: "b".into(),
            ..node(&[], vec![], Readiness::Ready)
        };
        tracker.init();
        tracker.init_apply(a.clone());
        tracker.init_apply(b.clone());
        assert_eq!(
            tracker.init_done(now),
            vec![expected("a"), expected("b"), NodeChange::Settled]
        );
        // The watch broke; b was deleted meanwhile, and a re-created under a new uid.
        tracker.init();
        tracker.init_apply(NodeView {
            uid: "uid-2".into(),
            ..a
        });
        let changes = tracker.init_done(now);
        assert!(
            matches!(&changes[..], [
                NodeChange::Gone { node: b, .. },
                NodeChange::Gone { node: a, reason },
                NodeChange::Expected(a2),
            ] if b.as_str() == "b" && a.as_str() == "a" && a2.as_str() == "a" && reason.contains("replaced")),
            "{changes:?}"
        );
    }

    #[test]
    fn an_expected_node_not_ready_for_the_window_is_lost_and_found_again() {
        let t0 = Instant::now();
        let window = Duration::from_secs(30);
        let mut tracker = NodeTracker::new(NodeFilter::default(), window);
        tracker.init();
        tracker.init_apply(node(&[], vec![], Readiness::Ready));
        tracker.init_done(t0);
        let down = node(&[], vec![], Readiness::NotReady("Ready=Unknown".into()));
        assert_eq!(tracker.apply(down.clone(), t0), vec![]);
        assert_eq!(tracker.next_deadline(), Some(t0 + window));
        assert_eq!(tracker.tick(t0 + window / 2), vec![]);
        let lost = tracker.tick(t0 + window);
        assert!(
            matches!(&lost[..], [NodeChange::Lost { reason, .. }] if reason.contains("Ready=Unknown")),
            "{lost:?}"
        );
        assert_eq!(tracker.next_deadline(), None);
        assert_eq!(tracker.apply(down, t0 + window * 2), vec![]);
        assert_eq!(
            tracker.apply(node(&[], vec![], Readiness::Ready), t0 + window * 3),
            vec![expected("node-1")]
        );
    }

    #[test]
    fn a_name_factbuoy_cannot_store_is_reported_unusable_once() {
        let mut tracker = NodeTracker::new(NodeFilter::default(), Duration::from_secs(30));
        tracker.init();
        tracker.init_apply(NodeView {
            name: "global".into(),
            ..node(&[], vec![], Readiness::Ready)
        });
        let changes = tracker.init_done(Instant::now());
        assert!(
            matches!(&changes[..], [NodeChange::Unusable { name, .. }, NodeChange::Settled] if name == "global"),
            "{changes:?}"
        );
        let again = tracker.apply(
            NodeView {
                name: "global".into(),
                ..node(&[("x", "y")], vec![], Readiness::Ready)
            },
            Instant::now(),
        );
        assert_eq!(again, vec![]);
    }
}

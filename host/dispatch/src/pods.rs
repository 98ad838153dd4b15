//! Following the run's agent pods: what keeps an agent from delivering (it cannot be scheduled,
//! its image cannot be had, it crash-loops, its container cannot be created, it ended), each
//! reported once with a message that says what to do, and reported recovered when the pod runs
//! again. One watch on the run's agent pods, never a poll.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;

use factbuoy_protocol::names::NodeName;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, Pod};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use tokio::sync::mpsc;

use crate::admission::SeenPods;
use crate::names::agent_selector;

/// Restarts after which a container that is not running counts as crash-looping, as Sonobuoy's
/// `IsPodFailing` counts them.
pub const DEFAULT_RESTART_LIMIT: i32 = 2;

/// Longest piece of text quoted from the cluster (a scheduler or kubelet message, a termination
/// message) in a problem's message, in bytes.
pub const MAX_QUOTED_BYTES: usize = 512;

/// What keeps an agent pod from delivering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProblemKind {
    /// The scheduler finds no node for it (`PodScheduled=False`, reason `Unschedulable`).
    Unschedulable,
    /// Its image cannot be had: `ErrImagePull`, `ImagePullBackOff`, `ErrImageNeverPull`,
    /// `InvalidImageName`.
    Image,
    /// Its container keeps exiting: `CrashLoopBackOff`, or more restarts than the limit while
    /// not running.
    CrashLoop,
    /// Its container cannot be created: `CreateContainerConfigError`, `CreateContainerError`.
    ContainerConfig,
    /// Its container ended, or the pod failed (evicted, say). Agents never exit by themselves
    /// (`--stay-alive`), so it crashed or was killed.
    Terminated,
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProblemKind::Unschedulable => "unschedulable",
            ProblemKind::Image => "image",
            ProblemKind::CrashLoop => "crash loop",
            ProblemKind::ContainerConfig => "container config",
            ProblemKind::Terminated => "terminated",
        })
    }
}

/// Which pod an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    /// The pod's name.
    pub name: String,
    /// The pod's uid: a re-created pod is another pod.
    pub uid: String,
    /// The node it is bound to (`spec.nodeName`) or, for a DaemonSet pod not yet scheduled, the
    /// node its affinity names; `None` for neither, or a name factbuoy cannot store.
    pub node: Option<NodeName>,
}

/// What the pod watch reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodEvent {
    /// A problem appeared: reported once per pod and kind until it clears.
    Problem {
        /// The pod.
        pod: PodRef,
        /// Which problem.
        kind: ProblemKind,
        /// What the cluster says and what to do.
        message: String,
    },
    /// A problem reported earlier cleared: the pod is Running, every container running.
    Recovered {
        /// The pod.
        pod: PodRef,
        /// The problem that cleared.
        kind: ProblemKind,
    },
    /// The pod was deleted (its problems go with it; a DaemonSet makes a new pod).
    Deleted {
        /// The pod.
        pod: PodRef,
    },
}

fn quote(text: &str) -> String {
    let text = text.trim();
    if text.len() <= MAX_QUOTED_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_QUOTED_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The node a pod is on or meant for.
pub fn pod_node(pod: &Pod) -> Option<NodeName> {
    let spec = pod.spec.as_ref()?;
    if let Some(node) = &spec.node_name {
        return NodeName::parse(node).ok();
    }
    // The DaemonSet controller pins each pod to its node by a required node affinity on the
    // field `metadata.name`, which the scheduler turns into `spec.nodeName`.
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    let mut names = terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .filter(|f| f.key == "metadata.name" && f.operator == "In")
        .flat_map(|f| f.values.iter().flatten());
    let name = names.next()?;
    NodeName::parse(name).ok()
}

fn termination(t: &ContainerStateTerminated) -> String {
    let mut text = format!("exit code {}", t.exit_code);
    if let Some(reason) = t.reason.as_deref().filter(|r| !r.is_empty()) {
        text += &format!(", {reason}");
    }
    match t.signal.filter(|s| *s != 0) {
        Some(signal) => text += &format!(", signal {signal}"),
        // The runtime reports a process killed by signal N as exit code 128 + N.
        None if (129..160).contains(&t.exit_code) => {
            text += &format!(", killed by signal {}", t.exit_code - 128)
        }
        None => {}
    }
    if let Some(message) = t.message.as_deref().filter(|m| !m.trim().is_empty()) {
        text += &format!(": {}", quote(message));
    }
    text
}

fn advice_after_exit(t: Option<&ContainerStateTerminated>, pod: &str) -> String {
    match t.and_then(|t| t.reason.as_deref()) {
        Some("OOMKilled") => {
            "it ran out of memory: raise the agent's memory limit in the run's plan".into()
        }
        _ => format!("see why with `kubectl logs --previous {pod}`"),
    }
}

/// The problems `pod`'s status shows now. `restarts_seen` holds each container's restart count
/// when the pod was seen before: a higher count means a container ended in between, even if it
/// runs again already.
pub fn diagnose(
    pod: &Pod,
    restart_limit: i32,
    restarts_seen: &BTreeMap<String, i32>,
) -> Vec<(ProblemKind, String)> {
    let name = pod.name_any();
    let mut found: Vec<(ProblemKind, String)> = Vec::new();
    let Some(status) = pod.status.as_ref() else {
        return found;
    };
    for c in status.conditions.iter().flatten() {
        if c.type_ == "PodScheduled"
            && c.status == "False"
            && c.reason.as_deref() == Some("Unschedulable")
        {
            found.push((
                ProblemKind::Unschedulable,
                format!(
                    "the agent pod cannot be scheduled: {}; free what it asks for on the node (or lower the agent's requests), or narrow the run with --node-selector and the taints it tolerates",
                    quote(c.message.as_deref().unwrap_or("no reason given"))
                ),
            ));
        }
    }
    if status.phase.as_deref() == Some("Failed") {
        found.push((
            ProblemKind::Terminated,
            format!(
                "the agent pod failed ({}{}); the DaemonSet makes a new one, and `kubectl describe pod {name}` tells why",
                status.reason.as_deref().unwrap_or("no reason given"),
                status
                    .message
                    .as_deref()
                    .map(|m| format!(": {}", quote(m)))
                    .unwrap_or_default()
            ),
        ));
    }
    let images: BTreeMap<&str, &str> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
        .filter_map(|c| Some((c.name.as_str(), c.image.as_deref()?)))
        .collect();
    let containers = (status
        .init_container_statuses
        .iter()
        .flatten()
        .map(|c| (c, true)))
    .chain(
        status
            .container_statuses
            .iter()
            .flatten()
            .map(|c| (c, false)),
    );
    for (c, init) in containers {
        let image = images.get(c.name.as_str()).copied().unwrap_or(&c.image);
        found.extend(diagnose_container(
            c,
            init,
            &name,
            image,
            restart_limit,
            restarts_seen,
        ));
    }
    found
}

/// What is wrong with container `c` (an init container when `init`) of pod `pod`.
fn diagnose_container(
    c: &ContainerStatus,
    init: bool,
    pod: &str,
    image: &str,
    restart_limit: i32,
    restarts_seen: &BTreeMap<String, i32>,
) -> Vec<(ProblemKind, String)> {
    let mut found = Vec::new();
    let state = c.state.as_ref();
    let last_exit = c.last_state.as_ref().and_then(|s| s.terminated.as_ref());
    let waiting = state.and_then(|s| s.waiting.as_ref());
    let reason = waiting.and_then(|w| w.reason.as_deref()).unwrap_or("");
    let said = waiting
        .and_then(|w| w.message.as_deref())
        .map(|m| format!(": {}", quote(m)))
        .unwrap_or_default();
    let running = state.is_some_and(|s| s.running.is_some());
    match reason {
        "ErrImagePull" | "ImagePullBackOff" | "ErrImageNeverPull" | "InvalidImageName" => {
            found.push((
                ProblemKind::Image,
                format!(
                    "container {} cannot get its image {image} ({reason}{said}); import the image into the node's container runtime (deploy/ builds an archive for `ctr -n k8s.io images import`), or name one the nodes have with --image",
                    c.name
                ),
            ));
        }
        "CreateContainerConfigError" | "CreateContainerError" => found.push((
            ProblemKind::ContainerConfig,
            format!(
                "container {} cannot be created ({reason}{said}); check the ConfigMaps, Secrets and volumes the pod names with `kubectl describe pod {pod}`",
                c.name
            ),
        )),
        _ => {}
    }
    if reason == "CrashLoopBackOff" || (c.restart_count > restart_limit && !running) {
        found.push((
            ProblemKind::CrashLoop,
            format!(
                "container {} keeps exiting ({} restarts{}); {}",
                c.name,
                c.restart_count,
                last_exit
                    .map(|t| format!(", last {}", termination(t)))
                    .unwrap_or_default(),
                advice_after_exit(last_exit, pod)
            ),
        ));
    }
    let ended_now = state.and_then(|s| s.terminated.as_ref());
    let restarted = restarts_seen
        .get(&c.name)
        .is_some_and(|seen| c.restart_count > *seen);
    // An init container that ended well (the cache directory's owner) did its job.
    let finished_init = |t: &&ContainerStateTerminated| init && t.exit_code == 0;
    if let Some(t) = ended_now
        .or(last_exit.filter(|_| restarted))
        .filter(|t| !finished_init(t))
    {
        found.push((
            ProblemKind::Terminated,
            format!(
                "container {} ended ({}); agents stay alive until the run ends, so it crashed or was killed: {}",
                c.name,
                termination(t),
                advice_after_exit(Some(t), pod)
            ),
        ));
    }
    found
}

/// Whether `pod` is Running with every container running.
pub fn is_running(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    status.phase.as_deref() == Some("Running")
        && status
            .container_statuses
            .iter()
            .flatten()
            .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
}

struct Tracked {
    pod: PodRef,
    active: BTreeSet<ProblemKind>,
    restarts: BTreeMap<String, i32>,
}

/// The watch's state, apart from the watch: each live pod's active problems and restart
/// counts. Feed it the watcher's events; it returns what to report.
pub struct PodTracker {
    restart_limit: i32,
    live: BTreeMap<String, Tracked>,
    relist: Option<BTreeMap<String, Pod>>,
}

impl PodTracker {
    /// A tracker that counts more than `restart_limit` restarts as a crash loop.
    pub fn new(restart_limit: i32) -> PodTracker {
        PodTracker {
            restart_limit,
            live: BTreeMap::new(),
            relist: None,
        }
    }

    /// A (re)list starts.
    pub fn init(&mut self) {
        self.relist = Some(BTreeMap::new());
    }

    /// A pod of the listing.
    pub fn init_apply(&mut self, pod: Pod) {
        let uid = pod.uid().unwrap_or_default();
        self.relist.get_or_insert_default().insert(uid, pod);
    }

    /// The names of the pods the listing in progress holds so far.
    pub fn listed_names(&self) -> HashSet<String> {
        self.relist
            .iter()
            .flat_map(|listed| listed.values())
            .map(|pod| pod.name_any())
            .collect()
    }

    /// The listing is complete: pods it lacks were deleted while the watch was down.
    pub fn init_done(&mut self) -> Vec<PodEvent> {
        let listed = self.relist.take().unwrap_or_default();
        let missing: Vec<String> = self
            .live
            .keys()
            .filter(|uid| !listed.contains_key(*uid))
            .cloned()
            .collect();
        let mut events: Vec<PodEvent> = missing.iter().filter_map(|uid| self.delete(uid)).collect();
        for pod in listed.into_values() {
            events.extend(self.apply(&pod));
        }
        events
    }

    /// A pod was added or changed.
    pub fn apply(&mut self, pod: &Pod) -> Vec<PodEvent> {
        let uid = pod.uid().unwrap_or_default();
        let tracked = self.live.entry(uid.clone()).or_insert_with(|| Tracked {
            pod: PodRef {
                name: pod.name_any(),
                uid,
                node: None,
            },
            active: BTreeSet::new(),
            restarts: BTreeMap::new(),
        });
        if tracked.pod.node.is_none() {
            tracked.pod.node = pod_node(pod);
        }
        let mut seen = BTreeSet::new();
        let mut events = Vec::new();
        for (kind, message) in diagnose(pod, self.restart_limit, &tracked.restarts) {
            if seen.insert(kind) && tracked.active.insert(kind) {
                events.push(PodEvent::Problem {
                    pod: tracked.pod.clone(),
                    kind,
                    message,
                });
            }
        }
        if is_running(pod) {
            for kind in std::mem::take(&mut tracked.active) {
                if seen.contains(&kind) && kind != ProblemKind::Terminated {
                    tracked.active.insert(kind);
                } else {
                    events.push(PodEvent::Recovered {
                        pod: tracked.pod.clone(),
                        kind,
                    });
                }
            }
        }
        let statuses = pod.status.iter().flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        });
        tracked.restarts = statuses
            .map(|c| (c.name.clone(), c.restart_count))
            .collect();
        events
    }

    /// A pod was deleted.
    pub fn delete(&mut self, uid: &str) -> Option<PodEvent> {
        let tracked = self.live.remove(uid)?;
        Some(PodEvent::Deleted { pod: tracked.pod })
    }
}

/// Watches the run's agent pods (label [`agent_selector`]) through `pods` (the run's namespace)
/// and sends their problems to `events`, until the receiver is dropped. Watch errors are logged
/// and retried with kube's default backoff; after a relist, pods missing from it are reported
/// deleted. Keeps `seen` up to date for admission.
pub async fn follow_pods(
    pods: Api<Pod>,
    run_id: &str,
    restart_limit: i32,
    seen: SeenPods,
    events: mpsc::Sender<PodEvent>,
) {
    let config = watcher::Config::default().labels(&agent_selector(run_id));
    let stream = watcher(pods, config).default_backoff().modify(|pod| {
        pod.managed_fields_mut().clear();
    });
    let mut stream = std::pin::pin!(stream);
    let mut tracker = PodTracker::new(restart_limit);
    loop {
        let batch = tokio::select! {
            _ = events.closed() => return,
            event = stream.next() => match event {
                None => return,
                Some(Ok(watcher::Event::Init)) => {
                    tracker.init();
                    Vec::new()
                }
                Some(Ok(watcher::Event::InitApply(pod))) => {
                    seen.record(&pod);
                    tracker.init_apply(pod);
                    Vec::new()
                }
                Some(Ok(watcher::Event::InitDone)) => {
                    seen.keep_only(&tracker.listed_names());
                    tracker.init_done()
                }
                Some(Ok(watcher::Event::Apply(pod))) => {
                    seen.record(&pod);
                    tracker.apply(&pod)
                }
                Some(Ok(watcher::Event::Delete(pod))) => {
                    let uid = pod.uid().unwrap_or_default();
                    seen.forget(&pod.name_any(), &uid);
                    tracker.delete(&uid).into_iter().collect()
                }
                Some(Err(e)) => {
                    tracing::warn!("watching agent pods: {e}; retrying");
                    Vec::new()
                }
            },
        };
        for event in batch {
            tracing::debug!(?event, "agent pod");
            if events.send(event).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real pod statuses from a v1.20.2 cluster, captured by tests/kube/capture-pods.sh.
    fn fixture(name: &str) -> Pod {
        let text = match name {
            "running" => include_str!("../../../tests/fixtures/pods/running.json"),
            "killed-restarted" => {
                include_str!("../../../tests/fixtures/pods/killed-restarted.json")
            }
            "missing-image" => include_str!("../../../tests/fixtures/pods/missing-image.json"),
            "crash-loop" => include_str!("../../../tests/fixtures/pods/crash-loop.json"),
            "oom" => include_str!("../../../tests/fixtures/pods/oom.json"),
            "no-configmap" => include_str!("../../../tests/fixtures/pods/no-configmap.json"),
            "no-node" => include_str!("../../../tests/fixtures/pods/no-node.json"),
            "too-big" => include_str!("../../../tests/fixtures/pods/too-big.json"),
            other => panic!("no fixture {other}"),
        };
        serde_json::from_str(text).unwrap()
    }

    fn problems(name: &str) -> Vec<(ProblemKind, String)> {
        diagnose(&fixture(name), DEFAULT_RESTART_LIMIT, &BTreeMap::new())
    }

    fn only(name: &str, kind: ProblemKind) -> String {
        match &problems(name)[..] {
            [(k, message)] if *k == kind => message.clone(),
            other => panic!("{name}: want one {kind} problem, got {other:?}"),
        }
    }

    /// The running fixture with an init container that ended with `exit_code`.
    fn with_init_container(exit_code: i32) -> Pod {
        let mut pod = fixture("running");
        let status: ContainerStatus = serde_json::from_value(serde_json::json!({
            "name": "cache-owner",
            "image": "factbuoy.local/factbuoy:1",
            "imageID": "",
            "ready": exit_code == 0,
            "restartCount": 0,
            "state": {"terminated": {"exitCode": exit_code, "reason": "Completed"}}
        }))
        .unwrap();
        pod.status.as_mut().unwrap().init_container_statuses = Some(vec![status]);
        pod
    }

    #[test]
    fn an_init_container_that_finished_is_no_problem_and_one_that_failed_is() {
        let fine = with_init_container(0);
        assert_eq!(
            diagnose(&fine, DEFAULT_RESTART_LIMIT, &BTreeMap::new()),
            vec![]
        );
        let failed = diagnose(
            &with_init_container(2),
            DEFAULT_RESTART_LIMIT,
            &BTreeMap::new(),
        );
        assert!(
            matches!(&failed[..], [(ProblemKind::Terminated, m)] if m.contains("cache-owner")),
            "{failed:?}"
        );
    }

    #[test]
    fn a_running_pod_has_no_problem() {
        assert_eq!(problems("running"), vec![]);
        assert!(is_running(&fixture("running")));
    }

    #[test]
    fn an_image_the_node_lacks_is_named_with_what_to_do() {
        let message = only("missing-image", ProblemKind::Image);
        for want in [
            "factbuoy.local/not-imported:1",
            "ErrImageNeverPull",
            "import",
            "--image",
        ] {
            assert!(message.contains(want), "{want:?} not in {message}");
        }
    }

    #[test]
    fn a_crash_loop_gives_the_last_exit_code() {
        let message = only("crash-loop", ProblemKind::CrashLoop);
        assert!(
            message.contains("exit code 3")
                && message.contains("kubectl logs --previous crash-loop"),
            "{message}"
        );
    }

    #[test]
    fn an_out_of_memory_crash_loop_says_to_raise_the_memory_limit() {
        let message = only("oom", ProblemKind::CrashLoop);
        assert!(
            message.contains("OOMKilled") && message.contains("memory limit"),
            "{message}"
        );
    }

    #[test]
    fn a_missing_configmap_is_a_container_config_problem() {
        let message = only("no-configmap", ProblemKind::ContainerConfig);
        assert!(
            message.contains("configmap \"no-such-configmap\" not found"),
            "{message}"
        );
    }

    #[test]
    fn an_unschedulable_pod_quotes_the_scheduler() {
        let message = only("too-big", ProblemKind::Unschedulable);
        assert!(message.contains("Insufficient memory"), "{message}");
        let message = only("no-node", ProblemKind::Unschedulable);
        assert!(message.contains("node affinity"), "{message}");
    }

    #[test]
    fn a_container_killed_and_restarted_is_reported_then_recovered() {
        let mut tracker = PodTracker::new(DEFAULT_RESTART_LIMIT);
        assert_eq!(tracker.apply(&fixture("running")), vec![]);
        let events = tracker.apply(&fixture("killed-restarted"));
        match &events[..] {
            [
                PodEvent::Problem {
                    kind: ProblemKind::Terminated,
                    message,
                    pod,
                },
                PodEvent::Recovered {
                    kind: ProblemKind::Terminated,
                    ..
                },
            ] => {
                assert!(
                    message.contains("exit code 137") && message.contains("signal 9"),
                    "{message}"
                );
                assert_eq!(pod.node.as_ref().map(NodeName::as_str), Some("node-1"));
            }
            other => panic!("{other:?}"),
        }
        // The same status again reports nothing new.
        assert_eq!(tracker.apply(&fixture("killed-restarted")), vec![]);
    }

    #[test]
    fn a_problem_is_reported_once_and_recovers_when_the_pod_runs() {
        let mut tracker = PodTracker::new(DEFAULT_RESTART_LIMIT);
        let crashing = fixture("crash-loop");
        let events = tracker.apply(&crashing);
        assert!(
            matches!(
                &events[..],
                [PodEvent::Problem {
                    kind: ProblemKind::CrashLoop,
                    ..
                }]
            ),
            "{events:?}"
        );
        assert_eq!(tracker.apply(&crashing), vec![]);
        // The same pod, running again.
        let mut running = fixture("running");
        running.metadata = crashing.metadata.clone();
        let events = tracker.apply(&running);
        assert!(
            matches!(
                &events[..],
                [PodEvent::Recovered {
                    kind: ProblemKind::CrashLoop,
                    ..
                }]
            ),
            "{events:?}"
        );
    }

    #[test]
    fn a_relist_reports_the_pods_deleted_while_the_watch_was_down() {
        let mut tracker = PodTracker::new(DEFAULT_RESTART_LIMIT);
        tracker.init();
        tracker.init_apply(fixture("running"));
        tracker.init_apply(fixture("missing-image"));
        assert_eq!(tracker.init_done().len(), 1);
        tracker.init();
        tracker.init_apply(fixture("running"));
        // What admission keeps of the pods it saw: the listing's, by name.
        let running = fixture("running").name_any();
        assert_eq!(tracker.listed_names(), HashSet::from([running]));
        let events = tracker.init_done();
        assert!(
            matches!(&events[..], [PodEvent::Deleted { pod }] if pod.name == "missing-image"),
            "{events:?}"
        );
    }

    #[test]
    fn an_evicted_pod_is_terminated_with_the_kubelets_reason() {
        let mut pod = fixture("running");
        let status = pod.status.as_mut().unwrap();
        status.phase = Some("Failed".into());
        status.reason = Some("Evicted".into());
        status.message = Some("The node was low on resource: memory.".into());
        status.container_statuses = None;
        let message = match &diagnose(&pod, DEFAULT_RESTART_LIMIT, &BTreeMap::new())[..] {
            [(ProblemKind::Terminated, message)] => message.clone(),
            other => panic!("{other:?}"),
        };
        assert!(
            message.contains("Evicted: The node was low on resource: memory."),
            "{message}"
        );
    }

    #[test]
    fn a_daemonset_pod_not_yet_scheduled_names_its_node_from_its_affinity() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "agent-x", "uid": "u"},
            "spec": {"containers": [], "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-7"]}]}
                ]}}}}
        }))
        .unwrap();
        assert_eq!(
            pod_node(&pod).as_ref().map(NodeName::as_str),
            Some("node-7")
        );
    }
}

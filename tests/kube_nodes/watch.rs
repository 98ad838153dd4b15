//! The dispatcher's watches and agent admission on a real cluster (tests/kube/: v1.20.2, real
//! kubelets): nodes expected, skipped, lost and gone as the cluster changes; agent pods'
//! problems classified from their real statuses; agents' ServiceAccount tokens naming their
//! node and nothing else.
//!
//! The tests share one cluster and run in parallel: only the node test changes nodes (it taints
//! node-1 with a key of its own, stops and deletes node-3, adds node-4); the others place their
//! pods on node-1 and node-2 and tolerate every taint.

use crate::support;

use std::time::Duration;

use crate::support::kube::Cluster;
use factbuoy_dispatch::ClusterRef;
use factbuoy_dispatch::nodes::{NodeChange, NodeFilter, follow_nodes};
use k8s_openapi::api::core::v1::Toleration;
use tokio::sync::mpsc;

fn cluster() -> &'static Cluster {
    Cluster::shared("watch", 3)
}

async fn client(cluster: &Cluster) -> kube::Client {
    let target = ClusterRef {
        kubeconfig: Some(cluster.kubeconfig()),
        context: None,
    };
    factbuoy_dispatch::connect(&target).await.unwrap().client
}

/// Receives from `rx` until `want` matches an event, within `secs`; returns it and the events
/// before it. Panics with everything seen otherwise.
async fn wait_for<T: std::fmt::Debug>(
    rx: &mut mpsc::Receiver<T>,
    secs: u64,
    what: &str,
    want: impl Fn(&T) -> bool,
) -> (T, Vec<T>) {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(event)) if want(&event) => return (event, seen),
            Ok(Some(event)) => seen.push(event),
            Ok(None) => panic!("the watch ended before {what}; seen: {seen:#?}"),
            Err(_) => panic!("no {what} within {secs} s; seen: {seen:#?}"),
        }
    }
}

fn is_expected(change: &NodeChange, name: &str) -> bool {
    matches!(change, NodeChange::Expected(n) if n.as_str() == name)
}

const TAINT_KEY: &str = "factbuoy.test/watch";

#[test]
fn nodes_are_expected_skipped_lost_and_gone_as_the_cluster_changes() {
    let cluster = cluster();
    cluster.kubectl([
        "taint",
        "node",
        "node-1",
        &format!("{TAINT_KEY}=x:NoSchedule"),
    ]);
    let counted = NodeRequests::default();
    cluster.block_on(|| async {
        let client = counted.client(cluster).await;
        // Without a toleration for the test's taint: node-1 is skipped, naming the taint.
        let (tx, mut strict) = mpsc::channel(64);
        let lost_after = Duration::from_secs(15);
        tokio::spawn(follow_nodes(
            client.clone(),
            NodeFilter::default(),
            lost_after,
            tx,
        ));
        let (_, first) = wait_for(&mut strict, 60, "settled", |c| *c == NodeChange::Settled).await;
        assert_eq!(first.len(), 3, "{first:#?}");
        assert!(
            is_expected(&first[1], "node-2") && is_expected(&first[2], "node-3"),
            "{first:#?}"
        );
        match &first[0] {
            NodeChange::Skipped { node, reason } if node.as_str() == "node-1" => assert!(
                reason.contains(&format!("{TAINT_KEY}=x:NoSchedule"))
                    && reason.contains("--tolerate"),
                "{reason}"
            ),
            other => panic!("node-1 should be skipped: {other:?}"),
        }

        // With a toleration for it, node-1 is expected.
        let (tx, mut tolerant) = mpsc::channel(64);
        let filter = NodeFilter {
            tolerations: vec![Toleration {
                key: Some(TAINT_KEY.into()),
                operator: Some("Exists".into()),
                ..Toleration::default()
            }],
            ..NodeFilter::default()
        };
        tokio::spawn(follow_nodes(client.clone(), filter, lost_after, tx));
        let (_, first) =
            wait_for(&mut tolerant, 60, "settled", |c| *c == NodeChange::Settled).await;
        assert!(
            ["node-1", "node-2", "node-3"]
                .iter()
                .all(|n| first.iter().any(|c| is_expected(c, n))),
            "{first:#?}"
        );
        drop(tolerant);

        // A node that joins mid-watch is expected.
        let add = cluster.script(["node-add", "4"]);
        assert!(
            add.status.success(),
            "{}",
            String::from_utf8_lossy(&add.stderr)
        );
        wait_for(&mut strict, 60, "node-4 expected", |c| {
            is_expected(c, "node-4")
        })
        .await;

        // A node whose kubelet stops is lost once it has been not Ready for the window.
        let stopped = std::time::Instant::now();
        let stop = cluster.script(["node-stop", "3"]);
        assert!(
            stop.status.success(),
            "{}",
            String::from_utf8_lossy(&stop.stderr)
        );
        let (lost, _) = wait_for(
            &mut strict,
            120,
            "node-3 lost",
            |c| matches!(c, NodeChange::Lost { node, .. } if node.as_str() == "node-3"),
        )
        .await;
        eprintln!(
            "node-3 lost {:?} after node-stop: {lost:?}",
            stopped.elapsed()
        );

        // A deleted node is gone.
        cluster.kubectl(["delete", "node", "node-3", "--wait=false"]);
        let (gone, _) = wait_for(
            &mut strict,
            30,
            "node-3 gone",
            |c| matches!(c, NodeChange::Gone { node, .. } if node.as_str() == "node-3"),
        )
        .await;
        eprintln!("{gone:?}");
    });
    // A list and a watch for each of the two follows, however many nodes joined, changed or
    // left (the server may end a watch, which is then renewed from where it was: no list).
    let (list, watch) = counted.get();
    eprintln!("the watches' node requests: {list} LIST, {watch} WATCH");
    assert!(list == 2 && watch <= 4, "{list} LIST, {watch} WATCH");
}

/// The node requests of this test's own client, counted as it sends them: the API server's
/// metrics count every client's, the controllers' renewals among them.
#[derive(Clone, Default)]
struct NodeRequests(std::sync::Arc<std::sync::Mutex<(u64, u64)>>);

impl NodeRequests {
    /// (lists, watches) so far.
    fn get(&self) -> (u64, u64) {
        *self.0.lock().unwrap()
    }

    /// A client of `cluster` whose requests for nodes this counts.
    async fn client(&self, cluster: &Cluster) -> kube::Client {
        // The crypto provider factbuoy installs when it connects.
        client(cluster).await;
        let kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig()).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        let counts = self.0.clone();
        let count = tower::util::MapRequestLayer::new(
            move |request: hyper::Request<kube::client::Body>| {
                if request.uri().path() == "/api/v1/nodes" {
                    let watch = request
                        .uri()
                        .query()
                        .is_some_and(|q| q.split('&').any(|p| p == "watch=true"));
                    let mut counts = counts.lock().unwrap();
                    if watch { counts.1 += 1 } else { counts.0 += 1 }
                }
                request
            },
        );
        kube::client::ClientBuilder::try_from(config)
            .unwrap()
            .with_layer(&count)
            .build()
    }
}

/// busybox as an image every node has (tests/kube/mkimage.sh, cluster.sh import), as
/// tests/kube/smoke.sh makes it.
fn busybox(cluster: &Cluster) -> &'static str {
    static IMAGE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    const NAME: &str = "factbuoy.local/watch-busybox:1";
    IMAGE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("rootfs");
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::create_dir_all(root.join("tmp")).unwrap();
        std::fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
        let list = std::process::Command::new("/bin/busybox")
            .arg("--list")
            .output()
            .unwrap();
        for applet in String::from_utf8(list.stdout).unwrap().lines() {
            if applet != "busybox" {
                std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
            }
        }
        let archive = dir.path().join("busybox.tar");
        let made = std::process::Command::new(support::workspace().join("tests/kube/mkimage.sh"))
            .arg(&root)
            .arg(NAME)
            .arg(&archive)
            .arg("/bin/sh")
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
        let import = cluster.script([std::ffi::OsStr::new("import"), archive.as_os_str()]);
        assert!(
            import.status.success(),
            "{}",
            String::from_utf8_lossy(&import.stderr)
        );
    });
    NAME
}

/// Creates `object` (any namespaced kind, as JSON) in `namespace`.
async fn create<K>(client: &kube::Client, namespace: &str, object: serde_json::Value) -> K
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let object: K = serde_json::from_value(object).unwrap();
    kube::Api::<K>::namespaced(client.clone(), namespace)
        .create(&Default::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating {object:?}: {e}"))
}

async fn namespace(client: &kube::Client, name: &str) {
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    kube::Api::all(client.clone())
        .create(&Default::default(), &ns)
        .await
        .unwrap();
}

/// A pod spec on `node` (or wherever `placement` says) running `command` in busybox, tolerating
/// every taint (the node test taints node-1).
fn pod_spec(image: &str, placement: serde_json::Value, command: &str) -> serde_json::Value {
    let mut spec = serde_json::json!({
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": false,
        "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "agent", "image": image, "imagePullPolicy": "Never",
                        "command": ["/bin/sh", "-c", command]}],
    });
    for (k, v) in placement.as_object().unwrap() {
        spec[k] = v.clone();
    }
    spec
}

use factbuoy_dispatch::pods::{PodEvent, ProblemKind, follow_pods};
use k8s_openapi::api::core::v1::Pod;

/// What a test waits for: a description and a test on events.
type Want<'a, T> = (&'a str, &'a dyn Fn(&T) -> bool);

/// Receives from `rx` until every one of `wants` has matched an event, within `secs`; returns
/// the matching events in the order of `wants`, and adds every event received to `seen`.
async fn wait_all<T: std::fmt::Debug + Clone>(
    rx: &mut mpsc::Receiver<T>,
    secs: u64,
    seen: &mut Vec<T>,
    wants: &[Want<'_, T>],
) -> Vec<T> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let found: Vec<Option<&T>> = wants
            .iter()
            .map(|(_, want)| seen.iter().find(|e| want(e)))
            .collect();
        if found.iter().all(Option::is_some) {
            return found.into_iter().map(|e| e.unwrap().clone()).collect();
        }
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(event)) => seen.push(event),
            Ok(None) => panic!("the watch ended; seen: {seen:#?}"),
            Err(_) => {
                let missing: Vec<&str> = wants
                    .iter()
                    .zip(&found)
                    .filter(|(_, f)| f.is_none())
                    .map(|((what, _), _)| *what)
                    .collect();
                panic!("no {missing:?} within {secs} s; seen: {seen:#?}")
            }
        }
    }
}

fn problem(event: &PodEvent, name: &str, want: ProblemKind) -> Option<String> {
    match event {
        PodEvent::Problem { pod, kind, message } if pod.name == name && *kind == want => {
            Some(message.clone())
        }
        _ => None,
    }
}

#[test]
fn agent_pods_problems_are_classified_with_what_to_do() {
    let cluster = cluster();
    let image = busybox(cluster);
    cluster.block_on(|| async {
        let client = client(cluster).await;
        let ns = "watch-pods";
        namespace(&client, ns).await;
        let (tx, mut rx) = mpsc::channel(64);
        tokio::spawn(follow_pods(
            kube::Api::namespaced(client.clone(), ns),
            "pods-test",
            factbuoy_dispatch::pods::DEFAULT_RESTART_LIMIT,
            factbuoy_dispatch::admission::SeenPods::default(),
            tx,
        ));
        let pod = |name: &str, spec: serde_json::Value| {
            serde_json::json!({
                "metadata": {"name": name, "labels": {
                    "factbuoy/run": "pods-test", "app.kubernetes.io/component": "agent"}},
                "spec": spec,
            })
        };
        let on = |n: u32| serde_json::json!({"nodeName": format!("node-{n}")});
        // Not an agent of this run: never reported.
        let mut stranger = pod("stranger", pod_spec(image, on(1), "exit 1"));
        stranger["metadata"]["labels"]["factbuoy/run"] = "another-run".into();
        create::<Pod>(&client, ns, stranger).await;
        create::<Pod>(&client, ns, pod("missing-image", pod_spec("factbuoy.local/not-imported:1", on(1), "true"))).await;
        create::<Pod>(&client, ns, pod("crash", pod_spec(image, on(2), "echo bye; exit 3"))).await;
        create::<Pod>(&client, ns, pod("killed", pod_spec(image, on(1), "sleep 3600"))).await;
        create::<Pod>(
            &client,
            ns,
            pod("nowhere", pod_spec(image, serde_json::json!({"nodeSelector": {"factbuoy.test/none": "x"}}), "sleep 3600")),
        )
        .await;
        let mut big = pod_spec(image, serde_json::json!({}), "sleep 3600");
        big["containers"][0]["resources"] = serde_json::json!({"requests": {"memory": "1Ti"}});
        create::<Pod>(&client, ns, pod("too-big", big)).await;

        let mut seen = Vec::new();
        let found = wait_all(
            &mut rx,
            120,
            &mut seen,
            &[
                ("image problem", &|e| problem(e, "missing-image", ProblemKind::Image).is_some()),
                ("crash loop", &|e| problem(e, "crash", ProblemKind::CrashLoop).is_some()),
                ("unschedulable (selector)", &|e| problem(e, "nowhere", ProblemKind::Unschedulable).is_some()),
                ("unschedulable (memory)", &|e| problem(e, "too-big", ProblemKind::Unschedulable).is_some()),
            ],
        )
        .await;
        let image_message = problem(&found[0], "missing-image", ProblemKind::Image).unwrap();
        assert!(
            image_message.contains("factbuoy.local/not-imported:1") && image_message.contains("--image"),
            "{image_message}"
        );
        match &found[0] {
            PodEvent::Problem { pod, .. } => {
                assert_eq!(pod.node.as_ref().map(|n| n.as_str()), Some("node-1"))
            }
            _ => unreachable!(),
        }
        let crash = problem(&found[1], "crash", ProblemKind::CrashLoop).unwrap();
        assert!(crash.contains("exit code 3"), "{crash}");
        let big = problem(&found[3], "too-big", ProblemKind::Unschedulable).unwrap();
        assert!(big.contains("Insufficient memory"), "{big}");

        // A container killed behind the kubelet's back, which restarts it.
        cluster.kubectl(["-n", ns, "wait", "--for=condition=Ready", "pod/killed", "--timeout=60s"]);
        let pod: Pod = kube::Api::namespaced(client.clone(), ns).get("killed").await.unwrap();
        let id = pod.status.unwrap().container_statuses.unwrap()[0]
            .container_id
            .clone()
            .unwrap();
        let kill = cluster.script(["ctr", "1", "tasks", "kill", "-s", "SIGKILL", id.trim_start_matches("containerd://")]);
        assert!(kill.status.success(), "{}", String::from_utf8_lossy(&kill.stderr));
        let found = wait_all(
            &mut rx,
            60,
            &mut seen,
            &[
                ("killed container", &|e| problem(e, "killed", ProblemKind::Terminated).is_some()),
                ("recovered", &|e| {
                    matches!(e, PodEvent::Recovered { pod, kind: ProblemKind::Terminated } if pod.name == "killed")
                }),
            ],
        )
        .await;
        let killed = problem(&found[0], "killed", ProblemKind::Terminated).unwrap();
        assert!(killed.contains("exit code 137"), "{killed}");

        // Nothing was reported twice, and nothing about the other run's pod.
        while let Ok(event) = rx.try_recv() {
            seen.push(event);
        }
        let mut reported = std::collections::BTreeSet::new();
        for event in &seen {
            if let PodEvent::Problem { pod, kind, .. } = event {
                assert!(pod.name != "stranger", "{event:?}");
                if *kind != ProblemKind::Terminated && *kind != ProblemKind::CrashLoop {
                    assert!(reported.insert((pod.uid.clone(), *kind)), "reported twice: {seen:#?}");
                }
            }
        }
    });
}

use factbuoy_dispatch::admission::{AdmissionError, PodTokenAdmission, PodTokenRefusal, SeenPods};
use factbuoy_dispatch::names::token_audience;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;

const RUN: &str = "adm-test";

/// A token of ServiceAccount `sa` in `ns`, for `audience`, bound to pod `pod` (what a projected
/// serviceAccountToken volume holds).
async fn bound_token(
    client: &kube::Client,
    ns: &str,
    sa: &str,
    pod: &Pod,
    audience: &str,
) -> String {
    let request: TokenRequest = serde_json::from_value(serde_json::json!({
        "spec": {"audiences": [audience], "expirationSeconds": 600,
                 "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                    "name": pod.metadata.name, "uid": pod.metadata.uid}}
    }))
    .unwrap();
    kube::Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_token_request(sa, &Default::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token
}

/// Waits until pod `name` in `ns` runs, and returns it.
async fn running_pod(client: &kube::Client, ns: &str, name: &str) -> Pod {
    let pods = kube::Api::<Pod>::namespaced(client.clone(), ns);
    for _ in 0..120 {
        let pod = pods.get(name).await.unwrap();
        if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
            return pod;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("pod {ns}/{name} never ran");
}

/// How many `verb` requests on `resource` (no subresource) the API server has served.
fn requests(cluster: &Cluster, resource: &str, verb: &str) -> u64 {
    let metrics = cluster.kubectl(["get", "--raw", "/metrics"]);
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains(&format!("resource=\"{resource}\""))
                && l.contains("subresource=\"\"")
                && l.contains(&format!("verb=\"{verb}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The refusal `result` must be; its message never holds `token`.
fn refused(
    result: Result<factbuoy_protocol::names::NodeName, AdmissionError>,
    token: &str,
) -> PodTokenRefusal {
    match result {
        Err(AdmissionError::Refused(refusal)) => {
            let message = refusal.to_string();
            assert!(
                !message.contains(token),
                "the message echoes the token: {message}"
            );
            eprintln!("refused: {message}");
            refusal
        }
        other => panic!("should be refused: {other:?}"),
    }
}

#[test]
fn an_agent_token_names_its_pods_node_and_nothing_else() {
    let cluster = cluster();
    let image = busybox(cluster);
    cluster.block_on(|| async {
        let client = client(cluster).await;
        let ns = "watch-adm";
        let audience = token_audience(RUN);
        namespace(&client, ns).await;
        namespace(&client, "watch-adm-other").await;
        for (namespace, sa) in [(ns, "factbuoy-agent"), (ns, "other"), ("watch-adm-other", "factbuoy-agent")] {
            create::<ServiceAccount>(&client, namespace, serde_json::json!({"metadata": {"name": sa}})).await;
        }
        let labels = serde_json::json!({"factbuoy/run": RUN, "app.kubernetes.io/component": "agent"});
        // The run's agents, on node-1 and node-2 (the node test stops node-3).
        let mut template = pod_spec(
            image,
            serde_json::json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "factbuoy-kube/node", "operator": "In", "values": ["1", "2"]}]}]}}}}),
            "sleep 3600",
        );
        template["serviceAccountName"] = "factbuoy-agent".into();
        create::<DaemonSet>(
            &client,
            ns,
            serde_json::json!({
                "metadata": {"name": "factbuoy-agent", "labels": labels},
                "spec": {"selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": template}},
            }),
        )
        .await;
        let bare = |name: &str, sa: &str, node: u32, command: &str| {
            let mut spec = pod_spec(image, serde_json::json!({"nodeName": format!("node-{node}")}), command);
            spec["serviceAccountName"] = sa.into();
            // The run's label, but not the DaemonSet's selector, which would adopt the pod.
            serde_json::json!({"metadata": {"name": name, "labels": {"factbuoy/run": RUN}}, "spec": spec})
        };
        create::<Pod>(&client, ns, bare("other-sa", "other", 1, "sleep 3600")).await;
        create::<Pod>(&client, ns, bare("no-daemonset", "factbuoy-agent", 1, "sleep 3600")).await;
        create::<Pod>(&client, "watch-adm-other", bare("elsewhere", "factbuoy-agent", 1, "sleep 3600")).await;
        // Ignores SIGTERM, so it stays terminating for its grace period.
        let mut slow = bare("terminating", "factbuoy-agent", 2, "trap '' TERM; sleep 3600 & wait; sleep 3600");
        slow["spec"]["terminationGracePeriodSeconds"] = 120.into();
        create::<Pod>(&client, ns, slow).await;

        let pods = kube::Api::<Pod>::namespaced(client.clone(), ns);
        let agent_on = |node: &'static str| {
            let pods = pods.clone();
            async move {
                for _ in 0..120 {
                    let list = pods
                        .list(&kube::api::ListParams::default().labels("app.kubernetes.io/component=agent").fields(&format!("spec.nodeName={node}")))
                        .await
                        .unwrap();
                    if let Some(pod) = list.items.into_iter().find(|p| {
                        p.metadata.owner_references.is_some()
                            && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    }) {
                        return pod;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                panic!("no agent pod runs on {node}");
            }
        };
        let (a, b) = (agent_on("node-1").await, agent_on("node-2").await);
        let admission = PodTokenAdmission::new(client.clone(), ns, RUN);

        // Each agent gets its own node, and only it: nothing in the request can name another.
        let token_a = bound_token(&client, ns, "factbuoy-agent", &a, &audience).await;
        let token_b = bound_token(&client, ns, "factbuoy-agent", &b, &audience).await;
        assert_eq!(admission.admit(&token_a).await.unwrap().as_str(), "node-1");
        assert_eq!(admission.admit(&token_b).await.unwrap().as_str(), "node-2");
        // The token as read from a projected volume ends in a newline.
        assert_eq!(admission.admit(&format!("{token_a}\n")).await.unwrap().as_str(), "node-1");

        // What an admission costs the API server (its own request counters): one TokenReview
        // and one pod read.
        let before = (requests(cluster, "tokenreviews", "POST"), requests(cluster, "pods", "GET"));
        for _ in 0..10 {
            admission.admit(&token_a).await.unwrap();
        }
        let after = (requests(cluster, "tokenreviews", "POST"), requests(cluster, "pods", "GET"));
        eprintln!("10 admissions: {} TokenReviews, {} pod reads", after.0 - before.0, after.1 - before.1);
        assert_eq!(after.0 - before.0, 10);
        // Other tests read pods meanwhile: a second read per admission would make 20.
        assert!((10..20).contains(&(after.1 - before.1)), "{before:?} {after:?}");

        // With the run's pod watch, as the aggregator runs it, the pod is read from the watch:
        // one request per admission.
        let seen = SeenPods::default();
        let (tx, mut rx) = mpsc::channel(64);
        tokio::spawn(follow_pods(pods.clone(), RUN, factbuoy_dispatch::pods::DEFAULT_RESTART_LIMIT, seen.clone(), tx));
        tokio::spawn(async move { while rx.recv().await.is_some() {} });
        let name_of = |pod: &Pod| pod.metadata.name.clone().unwrap();
        for _ in 0..100 {
            if seen.get(&name_of(&a)).is_some() && seen.get(&name_of(&b)).is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let watched = PodTokenAdmission::new(client.clone(), ns, RUN).with_seen_pods(seen.clone());
        let before = (requests(cluster, "tokenreviews", "POST"), requests(cluster, "pods", "GET"));
        for _ in 0..10 {
            assert_eq!(watched.admit(&token_a).await.unwrap().as_str(), "node-1");
        }
        let after = (requests(cluster, "tokenreviews", "POST"), requests(cluster, "pods", "GET"));
        eprintln!("10 admissions with the pod watch: {} TokenReviews, {} pod reads", after.0 - before.0, after.1 - before.1);
        assert_eq!(after.0 - before.0, 10);
        // Other tests' reads are fewer than ten (above); a read per admission would make ten more.
        assert!(after.1 - before.1 < 10, "{before:?} {after:?}");
        // A watch running behind (it holds an older pod of b's name) refuses no one: the API
        // server is asked.
        let mut older = b.clone();
        older.metadata.uid = Some("an-older-pod".to_owned());
        let behind = SeenPods::default();
        behind.record(&older);
        let lagging = PodTokenAdmission::new(client.clone(), ns, RUN).with_seen_pods(behind);
        assert_eq!(lagging.admit(&token_b).await.unwrap().as_str(), "node-2");

        // Refusals, each naming the check that failed.
        let wrong_audience = bound_token(&client, ns, "factbuoy-agent", &a, "factbuoy:another-run").await;
        assert!(matches!(
            refused(admission.admit(&wrong_audience).await, &wrong_audience),
            PodTokenRefusal::NotAuthenticated { .. }
        ));
        let other_sa = running_pod(&client, ns, "other-sa").await;
        let token = bound_token(&client, ns, "other", &other_sa, &audience).await;
        assert!(matches!(
            refused(admission.admit(&token).await, &token),
            PodTokenRefusal::WrongServiceAccount { username, .. } if username == "system:serviceaccount:watch-adm:other"
        ));
        let elsewhere = running_pod(&client, "watch-adm-other", "elsewhere").await;
        let token = bound_token(&client, "watch-adm-other", "factbuoy-agent", &elsewhere, &audience).await;
        assert!(matches!(
            refused(admission.admit(&token).await, &token),
            PodTokenRefusal::WrongServiceAccount { username, .. } if username.contains(":watch-adm-other:")
        ));
        let no_daemonset = running_pod(&client, ns, "no-daemonset").await;
        let token = bound_token(&client, ns, "factbuoy-agent", &no_daemonset, &audience).await;
        assert!(matches!(
            refused(admission.admit(&token).await, &token),
            PodTokenRefusal::NotDaemonSetPod { pod, .. } if pod == "no-daemonset"
        ));
        // Owned by the DaemonSet, but not as its controller (the DaemonSet did not make it).
        let daemonset = kube::Api::<DaemonSet>::namespaced(client.clone(), ns)
            .get("factbuoy-agent")
            .await
            .unwrap();
        let mut adopted = bare("not-controlled", "factbuoy-agent", 1, "sleep 3600");
        adopted["metadata"]["ownerReferences"] = serde_json::json!([{
            "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "factbuoy-agent",
            "uid": daemonset.metadata.uid, "controller": false}]);
        create::<Pod>(&client, ns, adopted).await;
        let not_controlled = running_pod(&client, ns, "not-controlled").await;
        let token = bound_token(&client, ns, "factbuoy-agent", &not_controlled, &audience).await;
        assert!(matches!(
            refused(admission.admit(&token).await, &token),
            PodTokenRefusal::NotDaemonSetPod { pod, .. } if pod == "not-controlled"
        ));
        let terminating = running_pod(&client, ns, "terminating").await;
        let token = bound_token(&client, ns, "factbuoy-agent", &terminating, &audience).await;
        assert_eq!(admission.admit(&token).await.err().map(|e| e.to_string()).as_deref().map(|e| e.contains("DaemonSet")), Some(true));
        cluster.kubectl(["-n", ns, "delete", "pod", "terminating", "--wait=false"]);
        assert!(matches!(
            refused(admission.admit(&token).await, &token),
            PodTokenRefusal::PodTerminating { pod } if pod == "terminating"
        ));
        // A deleted agent pod's token: the DaemonSet's next pod has another name and uid.
        pods.delete(&a.metadata.name.clone().unwrap(), &kube::api::DeleteParams::default().grace_period(0))
            .await
            .unwrap();
        let mut gone = None;
        for _ in 0..60 {
            match admission.admit(&token_a).await {
                Ok(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                other => {
                    gone = Some(refused(other, &token_a));
                    break;
                }
            }
        }
        assert!(
            matches!(gone, Some(PodTokenRefusal::NotAuthenticated { .. } | PodTokenRefusal::PodGone { .. } | PodTokenRefusal::PodTerminating { .. })),
            "{gone:?}"
        );
        // The watch's admission refuses it too: the TokenReview comes first.
        assert!(matches!(
            refused(watched.admit(&token_a).await, &token_a),
            PodTokenRefusal::NotAuthenticated { .. } | PodTokenRefusal::PodGone { .. } | PodTokenRefusal::PodTerminating { .. }
        ));
        // A pod re-created under the same name is another pod: its predecessor's token is refused.
        create::<Pod>(&client, ns, bare("fixed", "factbuoy-agent", 2, "sleep 3600")).await;
        let fixed = running_pod(&client, ns, "fixed").await;
        let token = bound_token(&client, ns, "factbuoy-agent", &fixed, &audience).await;
        pods.delete("fixed", &kube::api::DeleteParams::default().grace_period(0))
            .await
            .unwrap();
        for _ in 0..60 {
            if pods.get_opt("fixed").await.unwrap().is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        create::<Pod>(&client, ns, bare("fixed", "factbuoy-agent", 2, "sleep 3600")).await;
        let replaced = refused(admission.admit(&token).await, &token);
        assert!(
            matches!(&replaced, PodTokenRefusal::PodReplaced { pod, .. } if pod == "fixed")
                || matches!(&replaced, PodTokenRefusal::NotAuthenticated { .. }),
            "{replaced:?}"
        );
        for garbage in ["garbage", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"] {
            assert!(matches!(refused(admission.admit(garbage).await, garbage), PodTokenRefusal::NotAuthenticated { .. }));
        }
        assert!(matches!(refused(admission.admit(" \n").await, "\u{0}"), PodTokenRefusal::NoToken));
        // token_b still works: refusals changed nothing.
        assert_eq!(admission.admit(&token_b).await.unwrap().as_str(), "node-2");

        // An API server that cannot be reached: unavailable, not refused, within the timeout.
        for (address, timeout) in [("https://127.0.0.1:1", 5), ("https://10.200.0.250:6443", 2)] {
            let mut config = kube::Config::new(address.parse().unwrap());
            config.accept_invalid_certs = true;
            let dead = kube::Client::try_from(config).unwrap();
            let admission = PodTokenAdmission::new(dead, ns, RUN).with_timeout(Duration::from_secs(timeout));
            let started = std::time::Instant::now();
            let result = admission.admit(&token_b).await;
            assert!(matches!(result, Err(AdmissionError::Unavailable(_))), "{address}: {result:?}");
            assert!(started.elapsed() < Duration::from_secs(timeout + 2), "{address}: {:?}", started.elapsed());
            let message = result.unwrap_err().to_string();
            assert!(!message.contains(&token_b) && message.contains("retry"), "{message}");
            eprintln!("{address}: {message}");
        }
    });
}

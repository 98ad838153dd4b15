//! The manifests of a Kubernetes run on a real cluster (tests/kube/: v1.20.2, real kubelets):
//! `gen`'s output is what `run` applies and the API server accepts it, `delete` leaves nothing,
//! the garbage collector follows the Namespace → ClusterRole owner reference, and the agents'
//! pods run on every node as the manifests promise (non-root, RuntimeDefault seccomp, their
//! projected token readable), with the image deploy/build-image.sh builds.

use crate::support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::support::kube::Cluster;
use crate::support::{factbuoy, workspace};
use crate::{NODES, cluster};
use factbuoy_dispatch::apply::{self, Mode};
use factbuoy_dispatch::delete::{self, Selection};
use factbuoy_dispatch::manifest::{RunManifests, RunSpec, scheduling};
use factbuoy_dispatch::{ClusterRef, connect};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::Value;

/// The image deploy/build-image.sh builds in these tests.
const IMAGE: &str = support::kube::FACTBUOY_IMAGE;
/// A busybox image with a shell, for looking inside a pod built from the same spec.
const BUSYBOX: &str = "factbuoy.local/manifests-busybox:1";

fn target(cluster: &Cluster) -> ClusterRef {
    ClusterRef {
        kubeconfig: Some(cluster.kubeconfig()),
        context: None,
    }
}

/// Builds both images once and imports them into every node.
fn images(cluster: &Cluster) {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        cluster.factbuoy_image();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("busybox");
        for sub in ["bin", "etc", "tmp"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
        for applet in [
            "sh", "cat", "id", "grep", "wc", "ls", "sleep", "touch", "echo", "hostname", "stat",
        ] {
            std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
        }
        let busybox = dir.path().join("busybox.tar");
        run(Command::new(workspace().join("deploy/mkimage.sh"))
            .arg(&root)
            .arg(BUSYBOX)
            .arg(&busybox)
            .arg("/bin/sh"));
        import(cluster, &busybox);
    });
}

fn import(cluster: &Cluster, tar: &Path) {
    let out = cluster.script([Path::new("import").as_os_str(), tar.as_os_str()]);
    assert!(
        out.status.success(),
        "import: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn run(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `factbuoy gen` with `args`, its state in `state`: stdout.
fn gen_output(state: &Path, args: &[&str]) -> String {
    run(factbuoy()
        .env("FACTBUOY_STATE_DIR", state)
        .arg("gen")
        .args(args))
}

/// The manifests of run `run_id` with image `image`, built in process.
fn manifests(run_id: &str, image: &str) -> RunManifests {
    RunManifests::build(&spec(run_id, image)).unwrap()
}

fn spec(run_id: &str, image: &str) -> RunSpec {
    RunSpec {
        run_id: run_id.into(),
        namespace: None,
        image: image.into(),
        image_pull_policy: "Never".into(),
        node_selector: Default::default(),
        tolerations: scheduling::tolerations(&[], true),
        read_paths: vec!["/etc".into(), "/proc".into(), "/sys".into()],
        host_info: true,
        agent_memory_limit: "768Mi".into(),
        agent_cache: Some(support::agent_cache_dir().to_str().unwrap().into()),
        agent_cache_size: factbuoy_dispatch::manifest::DEFAULT_AGENT_CACHE_SIZE.into(),
        journal_groups: Vec::new(),
        host_network: true,
        global_plugins: false,
        resources: factbuoy_dispatch::resources::default_kinds(),
        operator_ca_pem: "not used".into(),
        plan_json: "{}".into(),
        components: vec![],
        registry_auth: None,
        registry_ca_pem: None,
        secrets: false,
    }
}

/// Every object labelled with run `run_id`, as "Kind namespace/name".
fn left(cluster: &Cluster, run_id: &str) -> BTreeSet<String> {
    let target = target(cluster);
    cluster.block_on(|| async {
        let c = connect(&target).await.unwrap();
        delete::find(&c.client, &Selection::Run(run_id.into()))
            .await
            .unwrap()
            .into_iter()
            .map(|f| format!("{} {}/{}", f.kind, f.namespace.unwrap_or_default(), f.name))
            .collect()
    })
}

/// Polls `check` every half second for at most `limit`.
fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    check()
}

#[test]
fn gen_prints_what_run_applies_and_the_api_server_accepts_it() {
    let cluster = cluster();
    let state = tempfile::tempdir().unwrap();
    let run_id = "gen0000000a1";
    let agent_cache = support::agent_cache_dir();
    let args = [
        "--run-id",
        run_id,
        "--image",
        IMAGE,
        "--image-pull-policy",
        "Never",
        "--agent-cache",
        agent_cache.to_str().unwrap(),
    ];
    let started = Instant::now();
    let json = gen_output(state.path(), &[&["-o", "json"][..], &args].concat());
    eprintln!("gen -o json: {:.2} s", started.elapsed().as_secs_f64());
    let list: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(list["kind"], "List");
    let items = list["items"].as_array().unwrap();

    // What run applies: the builders, with the same flags and the same default plugins'
    // grants (host-info, and paths below these directories), and gen's plan and operator CA.
    let config = items.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
    let operator_ca = config["data"]["operator-ca.pem"].as_str().unwrap();
    let saved =
        std::fs::read_to_string(state.path().join("kube").join(run_id).join("ca.pem")).unwrap();
    assert_eq!(
        operator_ca, saved,
        "the operator CA in the ConfigMap is the one gen kept"
    );
    let key = state.path().join("kube").join(run_id).join("ca.key");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions())
            & 0o777,
        0o600
    );
    let expected = RunManifests::build(&RunSpec {
        image_pull_policy: "Never".into(),
        read_paths: [
            "/bin",
            "/dev/disk",
            "/etc",
            "/proc",
            "/run",
            "/sbin",
            "/sys",
            "/usr",
            "/var",
        ]
        .map(String::from)
        .to_vec(),
        host_info: true,
        operator_ca_pem: operator_ca.into(),
        plan_json: config["data"]["run.json"].as_str().unwrap().into(),
        ..spec(run_id, IMAGE)
    })
    .unwrap();
    assert_eq!(items, &expected.objects());

    // The YAML output, server-side applied by kubectl as a dry run. Admission needs what the
    // objects refer to: the namespace and the aggregator pod's ServiceAccount are applied for
    // real first (from the same output), as docs/kubernetes.md says.
    let yaml = gen_output(state.path(), &args);
    let documents: Vec<&str> = yaml.split("\n---\n").collect();
    assert_eq!(documents.len(), items.len(), "{yaml}");
    let kubectl_apply = |file: &Path, dry_run: bool| {
        let out = cluster
            .command(cluster.kube_bin().join("kubectl"))
            .args([
                "apply",
                "--server-side",
                "--field-manager",
                "factbuoy",
                "--force-conflicts",
            ])
            .args(dry_run.then_some("--dry-run=server"))
            .arg("-f")
            .arg(file)
            .output()
            .unwrap();
        let printed = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{printed}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        printed
    };
    let prerequisites = state.path().join("prerequisites.yaml");
    std::fs::write(&prerequisites, documents[..3].join("\n---\n")).unwrap();
    kubectl_apply(&prerequisites, false);
    let file = state.path().join("gen.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let printed = kubectl_apply(&file, true);
    assert_eq!(
        printed.matches("(server dry run)").count(),
        items.len(),
        "{printed}"
    );
    // Nothing was stored but what was applied for real.
    let namespace = format!("factbuoy-{run_id}");
    let stored = [
        format!("Namespace /{namespace}"),
        format!("ServiceAccount {namespace}/factbuoy-aggregator"),
        format!("ServiceAccount {namespace}/factbuoy-agent"),
    ];
    assert_eq!(left(cluster, run_id), stored.into_iter().collect());
    run_and_wait_delete(cluster, run_id);
}

/// The agents' cache of compiled plugins, offline: by default a hostPath on each node that an
/// init container (root with CAP_CHOWN and CAP_FOWNER only) gives to the agents' user before
/// they start; `--agent-cache` and `--agent-cache-size` move and bound it, `--no-agent-cache`
/// keeps it in the pod's scratch space with no init container.
#[test]
fn gen_keeps_compiled_plugins_on_each_node_unless_told_not_to() {
    let state = tempfile::tempdir().unwrap();
    let agents = |args: &[&str]| -> Value {
        let list: Value = serde_json::from_str(&gen_output(
            state.path(),
            &[&["-o", "json"][..], args].concat(),
        ))
        .unwrap();
        let items = list["items"].as_array().unwrap();
        let ds = items.iter().find(|o| o["kind"] == "DaemonSet").unwrap();
        ds["spec"]["template"]["spec"].clone()
    };
    let env = |pod: &Value, name: &str| -> Value {
        let env = pod["containers"][0]["env"].as_array().unwrap();
        env.iter()
            .find(|e| e["name"] == name)
            .map_or(Value::Null, |e| e["value"].clone())
    };
    let cache_volume = |pod: &Value| -> Value {
        let volumes = pod["volumes"].as_array().unwrap();
        volumes
            .iter()
            .find(|v| v["name"] == "cache")
            .cloned()
            .unwrap_or(Value::Null)
    };

    let default = agents(&[]);
    assert_eq!(
        cache_volume(&default)["hostPath"],
        serde_json::json!({"path": "/var/cache/factbuoy", "type": "DirectoryOrCreate"})
    );
    assert_eq!(env(&default, "FACTBUOY_CACHE_DIR"), "/var/cache/factbuoy");
    assert_eq!(env(&default, "FACTBUOY_CACHE_MAX_SIZE"), "1GiB");
    let init = &default["initContainers"][0];
    assert_eq!(init["name"], "cache-owner");
    assert_eq!(
        init["command"],
        serde_json::json!([
            "/bin/factbuoy",
            "agent",
            "prepare-cache",
            "/var/cache/factbuoy",
            "--owner",
            "65532:65532"
        ])
    );
    let context = &init["securityContext"];
    assert_eq!(
        context["capabilities"],
        serde_json::json!({"add": ["CHOWN", "FOWNER"], "drop": ["ALL"]})
    );
    assert_eq!(context["allowPrivilegeEscalation"], false);
    assert_eq!(context["readOnlyRootFilesystem"], true);
    // It mounts the cache directory and nothing else; the agent stays without capabilities.
    assert_eq!(init["volumeMounts"].as_array().unwrap().len(), 1);
    assert_eq!(
        default["containers"][0]["securityContext"]["capabilities"],
        serde_json::json!({"drop": ["ALL"]})
    );

    let moved = agents(&[
        "--agent-cache",
        "/data/fb-cache",
        "--agent-cache-size",
        "2GiB",
    ]);
    assert_eq!(cache_volume(&moved)["hostPath"]["path"], "/data/fb-cache");
    assert_eq!(env(&moved, "FACTBUOY_CACHE_MAX_SIZE"), "2GiB");

    let opted_out = agents(&["--no-agent-cache"]);
    assert_eq!(cache_volume(&opted_out), Value::Null);
    assert_eq!(opted_out["initContainers"], Value::Null);
    assert_eq!(env(&opted_out, "FACTBUOY_CACHE_DIR"), "/tmp/cache");

    for bad in [
        &["--agent-cache", "relative"][..],
        &["--agent-cache", "/"],
        &["--agent-cache", "/var/../etc"],
        &["--agent-cache-size", "lots"],
        &["--agent-cache", "/x", "--no-agent-cache"],
    ] {
        let refused = factbuoy()
            .env("FACTBUOY_STATE_DIR", state.path())
            .arg("gen")
            .args(bad)
            .output()
            .unwrap();
        assert!(!refused.status.success(), "{bad:?} was accepted");
    }
}

/// `gen --global` and `--journal-group`, offline: what they change in the objects.
#[test]
fn gen_runs_global_plugins_in_the_aggregator_and_gives_agents_the_journal_group() {
    let state = tempfile::tempdir().unwrap();
    let args = [
        "-o",
        "json",
        "--plugin",
        "hello",
        "--plugin",
        "systemd-logs",
        "--global",
        "systemd-logs",
        "--journal-group",
        "999",
    ];
    let list: Value = serde_json::from_str(&gen_output(state.path(), &args)).unwrap();
    let items = list["items"].as_array().unwrap();
    let kind = |k: &str| items.iter().find(|o| o["kind"] == k).unwrap();
    let plan: Value =
        serde_json::from_str(kind("ConfigMap")["data"]["run.json"].as_str().unwrap()).unwrap();
    let plugin = |name: &str| {
        let plugins = plan["plugins"].as_array().unwrap();
        plugins.iter().find(|p| p["name"] == name).unwrap().clone()
    };
    assert_eq!(plugin("hello")["scope"], "per-node");
    assert_eq!(plugin("systemd-logs")["scope"], "global");
    assert_eq!(
        plugin("systemd-logs")["denies"],
        serde_json::json!(["host-info"])
    );
    let aggregator = &kind("Pod")["spec"];
    assert_eq!(
        aggregator["containers"][0]["resources"]["limits"]["memory"],
        "1Gi"
    );
    // The agents mount what hello needs, not the journal the global plugin is granted.
    let agents = &kind("DaemonSet")["spec"]["template"]["spec"];
    let mounted: Vec<&str> = agents["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["name"].as_str().unwrap().starts_with("host-"))
        .filter_map(|v| v["hostPath"]["path"].as_str())
        .collect();
    assert_eq!(mounted, ["/etc", "/proc", "/usr"]);
    assert_eq!(
        agents["securityContext"]["supplementalGroups"],
        serde_json::json!([999])
    );

    // A global plugin that requires host-info is refused before anything is made.
    let refused = factbuoy()
        .env("FACTBUOY_STATE_DIR", state.path())
        .args(["gen", "--plugin", "hello", "--global", "hello"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("\"hello\" requires host-info") && stderr.contains("run it per node"),
        "{stderr}"
    );
}

#[test]
fn a_dry_run_into_a_namespace_not_there_yet_checks_what_it_can_and_says_what_it_could_not() {
    let cluster = cluster();
    let mut m = manifests("dryrun00000b", IMAGE);
    let target = target(cluster);
    let report = cluster.block_on(|| async {
        let c = connect(&target).await.unwrap();
        apply::apply(&c.client, &mut m, Mode::ServerDryRun)
            .await
            .unwrap()
    });
    let kinds = |list: &[apply::Applied]| list.iter().map(|a| a.kind.clone()).collect::<Vec<_>>();
    assert_eq!(
        kinds(&report.applied),
        ["Namespace", "ClusterRole", "ClusterRoleBinding"]
    );
    assert_eq!(report.not_checked.len(), 8, "{:?}", report.not_checked);
    assert_eq!(
        left(cluster, "dryrun00000b"),
        BTreeSet::new(),
        "a dry run stores nothing"
    );

    // Once the namespace and the ServiceAccounts exist, every object is checked.
    let report = cluster.block_on(|| async {
        let c = connect(&target).await.unwrap();
        let pp = PatchParams::apply("factbuoy").force();
        let ns: Api<Namespace> = Api::all(c.client.clone());
        let name = m.namespace_name.clone();
        ns.patch(&name, &pp, &Patch::Apply(m.namespace.as_ref().unwrap()))
            .await
            .unwrap();
        let accounts: Api<ServiceAccount> = Api::namespaced(c.client.clone(), &name);
        for sa in &m.service_accounts {
            let sa_name = sa.metadata.name.clone().unwrap();
            accounts
                .patch(&sa_name, &pp, &Patch::Apply(sa))
                .await
                .unwrap();
        }
        apply::apply(&c.client, &mut m, Mode::ServerDryRun)
            .await
            .unwrap()
    });
    assert_eq!(report.applied.len(), 11, "{:?}", report.applied);
    assert_eq!(report.not_checked, []);
    assert_eq!(
        left(cluster, "dryrun00000b").len(),
        3,
        "only what was applied for real"
    );
    run_and_wait_delete(cluster, "dryrun00000b");
}

#[test]
fn delete_leaves_nothing_and_its_dry_run_deletes_nothing() {
    let cluster = cluster();
    images(cluster);
    let run_id = "delete00000c";
    let mut m = manifests(run_id, IMAGE);
    let target = target(cluster);
    cluster.block_on(|| async {
        let c = connect(&target).await.unwrap();
        apply::apply(&c.client, &mut m, Mode::Apply).await.unwrap()
    });
    let before = left(cluster, run_id);
    for object in [
        "Namespace /factbuoy-delete00000c",
        "ClusterRole /factbuoy-delete00000c",
        "ClusterRoleBinding /factbuoy-delete00000c",
        "DaemonSet factbuoy-delete00000c/factbuoy-agent",
        "Pod factbuoy-delete00000c/factbuoy-aggregator",
        "ConfigMap factbuoy-delete00000c/factbuoy-run",
    ] {
        assert!(before.contains(object), "{object} missing from {before:?}");
    }

    let delete = |extra: &[&str]| {
        let started = Instant::now();
        let out = cluster
            .command(env!("CARGO_BIN_EXE_factbuoy"))
            .arg("delete")
            .arg(run_id)
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig())
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!(
            "factbuoy delete {extra:?}: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let listed: Vec<Value> = serde_json::from_str(&delete(&["--dry-run", "-o", "json"])).unwrap();
    assert!(listed.len() >= before.len(), "{listed:?}");
    // (The DaemonSet's pods may have come since `before` was listed.)
    let after = left(cluster, run_id);
    assert!(
        after.is_superset(&before),
        "--dry-run deleted {:?}",
        before.difference(&after)
    );
    delete(&[]);
    assert_eq!(left(cluster, run_id), BTreeSet::new());
}

#[test]
fn deleting_the_namespace_deletes_the_cluster_role_and_binding() {
    let cluster = cluster();
    let run_id = "gc000000000d";
    let mut m = manifests(run_id, IMAGE);
    let target = target(cluster);
    let name = format!("factbuoy-{run_id}");
    cluster.block_on(|| async {
        let c = connect(&target).await.unwrap();
        // Only the root and the cluster-scoped objects matter here.
        let ns: Api<Namespace> = Api::all(c.client.clone());
        let pp = PatchParams::apply("factbuoy").force();
        let applied = ns
            .patch(&name, &pp, &Patch::Apply(m.namespace.as_ref().unwrap()))
            .await
            .unwrap();
        m.set_namespace_uid(applied.metadata.uid.as_deref().unwrap());
        let roles: Api<ClusterRole> = Api::all(c.client.clone());
        roles
            .patch(&name, &pp, &Patch::Apply(&m.cluster_role))
            .await
            .unwrap();
        let bindings: Api<ClusterRoleBinding> = Api::all(c.client.clone());
        bindings
            .patch(&name, &pp, &Patch::Apply(&m.cluster_role_binding))
            .await
            .unwrap();
        ns.delete(&name, &DeleteParams::default()).await.unwrap();
    });
    let started = Instant::now();
    let gone = eventually(Duration::from_secs(90), || left(cluster, run_id).is_empty());
    eprintln!(
        "GC after the namespace: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(gone, "left: {:?}", left(cluster, run_id));
}

/// The pods' phase and container states, by node, as kubectl prints them.
fn agent_pods(cluster: &Cluster, namespace: &str) -> Vec<Value> {
    let out = cluster.kubectl([
        "-n",
        namespace,
        "get",
        "pods",
        "-l",
        "app.kubernetes.io/component=agent",
        "-o",
        "json",
    ]);
    serde_json::from_str::<Value>(&out).unwrap()["items"]
        .as_array()
        .unwrap()
        .clone()
}

/// Applies `m` and adds ConfigMap `factbuoy-ca`, which the aggregator would publish at start
/// and the agents mount.
fn apply_with_ca(cluster: &Cluster, m: &mut RunManifests) {
    let target = target(cluster);
    let namespace = m.namespace_name.clone();
    cluster.block_on(|| async {
        let c = connect(&target).await.unwrap();
        apply::apply(&c.client, m, Mode::Apply).await.unwrap();
        let mut ca = ConfigMap::default();
        ca.metadata.name = Some("factbuoy-ca".into());
        ca.metadata.labels = Some([("factbuoy/run".to_owned(), m.run_id.clone())].into());
        ca.data = Some([("ca.pem".to_owned(), "x".to_owned())].into());
        let api: Api<ConfigMap> = Api::namespaced(c.client.clone(), &namespace);
        let pp = PatchParams::apply("factbuoy");
        api.patch("factbuoy-ca", &pp, &Patch::Apply(&ca))
            .await
            .unwrap();
    });
}

#[test]
fn agents_run_on_every_node_as_non_root_under_runtime_default_seccomp_and_read_their_token() {
    let cluster = cluster();
    images(cluster);
    // The busybox twin of the agent pod: the same securityContext, volumes and mounts, and a
    // shell in which `kubectl exec` (same user, capabilities and seccomp filter as the
    // container) looks at what the agent would see.
    let run_id = "podcheck000e";
    let namespace = format!("factbuoy-{run_id}");
    let mut m = manifests(run_id, BUSYBOX);
    let sleep = ["/bin/sleep", "3600"].map(String::from).to_vec();
    let pod = m
        .agents
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap();
    // The agent's --aggregator argument, as the kubelet expands it, kept for a look.
    let address = pod.containers[0].command.as_ref().unwrap()[3].clone();
    assert!(
        address.starts_with("$(FACTBUOY_AGGREGATOR_SERVICE_HOST)"),
        "{address}"
    );
    pod.containers[0].command = Some(
        [
            "/bin/sh",
            "-c",
            "echo \"$1\" > /tmp/aggregator; exec sleep 3600",
            "sh",
            &address,
        ]
        .map(String::from)
        .to_vec(),
    );
    // The init container is the real one: it gives the node's cache directory to the agent.
    pod.init_containers.as_mut().unwrap()[0].image = Some(IMAGE.into());
    m.aggregator.spec.as_mut().unwrap().containers[0].command = Some(sleep);
    apply_with_ca(cluster, &mut m);
    let running = eventually(Duration::from_secs(120), || {
        let pods = agent_pods(cluster, &namespace);
        pods.len() == NODES as usize && pods.iter().all(|p| p["status"]["phase"] == "Running")
    });
    assert!(running, "{:#?}", agent_pods(cluster, &namespace));
    let pods = agent_pods(cluster, &namespace);
    let cluster_ip = cluster.kubectl([
        "-n",
        &namespace,
        "get",
        "service",
        "factbuoy-aggregator",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    let mut on = BTreeSet::new();
    for pod in &pods {
        on.insert(pod["spec"]["nodeName"].as_str().unwrap().to_owned());
        let name = pod["metadata"]["name"].as_str().unwrap();
        let seen = cluster.kubectl([
            "-n",
            &namespace,
            "exec",
            name,
            "--",
            "sh",
            "-c",
            "echo uid=$(id -u) gid=$(id -g) host=$(hostname); grep Seccomp: /proc/self/status; \
             echo token=$(wc -c < /var/run/secrets/factbuoy/token); ls /host; \
             touch /host/etc/x 2>/dev/null && echo host-writable; \
             touch /x 2>/dev/null && echo root-writable; \
             stat -c 'cache=%u:%g %a' /var/cache/factbuoy; \
             touch /var/cache/factbuoy/probe-$(hostname) && echo cache-written; echo done",
        ]);
        // In the node's network and UTS namespaces (hostNetwork): the node's host name.
        let node = pod["spec"]["nodeName"].as_str().unwrap();
        assert!(
            seen.contains(&format!("uid=65532 gid=65532 host={node}\n")),
            "{seen}"
        );
        assert!(seen.contains("Seccomp:\t2"), "seccomp filter mode: {seen}");
        let token = seen
            .lines()
            .find_map(|l| l.strip_prefix("token="))
            .unwrap_or("0");
        assert!(
            token.trim().parse::<usize>().unwrap() > 100,
            "the token is readable: {seen}"
        );
        assert!(seen.contains("etc\nproc\nsys\nusr\n"), "{seen}");
        assert!(!seen.contains("writable"), "{seen}");
        // The node's cache directory is the agent's alone, and the agent writes it.
        assert!(seen.contains("cache=65532:65532 700\n"), "{seen}");
        assert!(seen.contains("cache-written"), "{seen}");
        assert!(seen.contains("done"), "{seen}");
        // $(VAR) in the argv expands to the Service's address (no DNS needed).
        let address = cluster.kubectl([
            "-n",
            &namespace,
            "exec",
            name,
            "--",
            "cat",
            "/tmp/aggregator",
        ]);
        assert_eq!(address.trim(), format!("{cluster_ip}:8443"));
    }
    assert_eq!(on.len(), NODES as usize, "a pod on every node");

    // The real image under the real pod spec: the binary starts as the non-root user on a
    // read-only root and runs a bundled plugin on the host's directories under /host.
    let run_id = "podimage000f";
    let namespace = format!("factbuoy-{run_id}");
    let mut m = manifests(run_id, IMAGE);
    let pod = m
        .agents
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap();
    pod.containers[0].command = Some(
        [
            "/bin/factbuoy",
            "plugin",
            "run",
            "host-facts",
            "--root",
            "/host",
            "-o",
            "json",
        ]
        .map(String::from)
        .to_vec(),
    );
    apply_with_ca(cluster, &mut m);
    let exited_zero = |p: &Value| {
        let status = &p["status"]["containerStatuses"][0];
        [
            &status["state"]["terminated"],
            &status["lastState"]["terminated"],
        ]
        .iter()
        .any(|t| t["exitCode"] == 0)
    };
    let ran = eventually(Duration::from_secs(180), || {
        let pods = agent_pods(cluster, &namespace);
        pods.len() == NODES as usize && pods.iter().all(exited_zero)
    });
    assert!(ran, "{:#?}", agent_pods(cluster, &namespace));
    for run in ["podcheck000e", "podimage000f"] {
        run_and_wait_delete(cluster, run);
    }
}

fn run_and_wait_delete(cluster: &Cluster, run_id: &str) {
    let target = target(cluster);
    cluster.block_on(|| async {
        let c = connect(&target).await.unwrap();
        let options = delete::DeleteOptions {
            dry_run: false,
            wait: Some(delete::DEFAULT_WAIT),
        };
        delete::delete(&c.client, &Selection::Run(run_id.into()), options)
            .await
            .unwrap();
    });
}

#[test]
fn in_an_existing_namespace_the_aggregator_pod_is_the_root() {
    let cluster = cluster();
    images(cluster);
    let run_id = "existing000g";
    let namespace = "tools-existing";
    cluster.kubectl(["create", "namespace", namespace]);
    let mut m = RunManifests::build(&RunSpec {
        namespace: Some(namespace.into()),
        // The init container runs factbuoy, which busybox's image lacks.
        agent_cache: None,
        ..spec(run_id, BUSYBOX)
    })
    .unwrap();
    let sleep = ["/bin/sleep", "3600"].map(String::from).to_vec();
    m.aggregator.spec.as_mut().unwrap().containers[0].command = Some(sleep);
    let target = target(cluster);
    cluster.block_on(|| async {
        let c = connect(&target).await.unwrap();
        apply::apply(&c.client, &mut m, Mode::Apply).await.unwrap();
    });
    let pod_uid = cluster.kubectl([
        "-n",
        namespace,
        "get",
        "pod",
        "factbuoy-aggregator",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    for kind in [
        "serviceaccount/factbuoy-agent",
        "daemonset/factbuoy-agent",
        "configmap/factbuoy-run",
        "role/factbuoy-aggregator",
    ] {
        let owner = cluster.kubectl([
            "-n",
            namespace,
            "get",
            kind,
            "-o",
            "jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].uid}",
        ]);
        assert_eq!(owner, format!("Pod/{pod_uid}"), "{kind}");
    }
    // Deleting the root removes every namespaced object; nothing can own the cluster-scoped ones.
    // (Forced: the point is the garbage collector, not how fast a kubelet confirms a kill.)
    cluster.kubectl([
        "-n",
        namespace,
        "delete",
        "pod",
        "factbuoy-aggregator",
        "--grace-period=0",
        "--force",
    ]);
    let only_cluster_scoped: BTreeSet<String> = [
        format!("ClusterRole /factbuoy-{run_id}"),
        format!("ClusterRoleBinding /factbuoy-{run_id}"),
    ]
    .into();
    let collected = eventually(Duration::from_secs(90), || {
        left(cluster, run_id) == only_cluster_scoped
    });
    assert!(collected, "left: {:?}", left(cluster, run_id));
    run_and_wait_delete(cluster, run_id);
    assert_eq!(left(cluster, run_id), BTreeSet::new());
    // The namespace was not the run's: it stays.
    cluster.kubectl(["get", "namespace", namespace]);
}

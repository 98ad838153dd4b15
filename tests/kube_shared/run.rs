//! `factbuoy run --kubernetes` end to end on a real cluster (tests/kube/: v1.20.2, three real
//! kubelets), with the image deploy/build-image.sh builds: the real binary applies the run,
//! follows it through port-forward and downloads the bundle; `status`, `retrieve` and `delete`
//! reach it afterwards. Runs here never change the nodes for good (tests/kube_nodes/ does; a
//! taint here is removed when its test ends, and the others' runs tolerate it), so they share
//! the binary's cluster.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::cluster;
use crate::support::kube::Cluster;
use crate::support::kube_runs::{self, factbuoy_json, pair};

/// The operator library drives a Kubernetes run without the binary (tests/all/operator.rs does
/// a local and a fleet run): `start` applies it, `finish` follows it through port-forward and
/// downloads its bundle. And `run --kubernetes --detach -o json` answers with a document that
/// `retrieve --wait` then follows to the bundle.
#[test]
fn the_operator_library_runs_a_kubernetes_run_and_a_detached_run_answers_in_json() {
    use factbuoy_kubernetes::ClusterRun;
    use factbuoy_operator::{
        Interrupts, KubernetesTarget, PluginSelection, RunRequest, StateDir, Target,
    };
    let cluster = cluster();
    let image = cluster.factbuoy_image_in_registry();
    let registry = cluster.registry();
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let request = RunRequest {
        target: Target::Kubernetes(Box::new(KubernetesTarget {
            cluster: factbuoy_kubernetes::ClusterRef {
                kubeconfig: Some(cluster.kubeconfig()),
                context: None,
            },
            placement: ClusterRun {
                image: image.to_owned(),
                image_pull_policy: "IfNotPresent".to_owned(),
                agent_cache: Some(support::agent_cache_dir().to_str().unwrap().to_owned()),
                ..ClusterRun::default()
            },
            run_id: None,
        })),
        plugins: PluginSelection {
            plugins: vec!["hello".to_owned()],
            // The image's registry: the run gives the nodes its pull Secret.
            registry: factbuoy_registry::RegistryAccess {
                auth_file: Some(registry.auth_file()),
                cert_dir: Some(registry.cert_dir()),
                ..Default::default()
            },
            ..PluginSelection::default()
        },
        timeout: Duration::from_secs(300),
        out: out.path().to_owned(),
    };
    let state_dir = StateDir::at(state.path());
    let finished = cluster.block_on(|| async {
        let started = factbuoy_operator::start(&state_dir, request).await.unwrap();
        started
            .finish(&mut Interrupts::none(), &mut |_| {})
            .await
            .unwrap()
    });
    assert!(finished.all_passed(), "{:#?}", finished.status);
    let nodes: Vec<&str> = finished
        .status
        .plugins
        .iter()
        .map(|p| p.node.as_str())
        .collect();
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    let bundle = finished.bundle.expect("the bundle, downloaded");
    assert_eq!(bundle.parent(), Some(out.path()));

    // Detached: a document for machines, and the run found again from it.
    let detached_state = tempfile::tempdir().unwrap();
    let detached = kube_runs::factbuoy(cluster, detached_state.path())
        .args([
            "run",
            "--kubernetes",
            "--detach",
            "-o",
            "json",
            "--image",
            image,
        ])
        .args(["--image-pull-policy", "Never", "--plugin", "hello"])
        .arg("--agent-cache")
        .arg(support::agent_cache_dir())
        .output()
        .unwrap();
    assert!(
        detached.status.success(),
        "{}",
        String::from_utf8_lossy(&detached.stderr)
    );
    let document: serde_json::Value = serde_json::from_slice(&detached.stdout).unwrap();
    let run_id = document["run_id"].as_str().unwrap().to_owned();
    assert_eq!(document["kind"], "kubernetes");
    assert_eq!(document["namespace"], format!("factbuoy-{run_id}"));
    let fetched = tempfile::tempdir().unwrap();
    let retrieved = factbuoy_json(
        cluster,
        detached_state.path(),
        &[
            "retrieve",
            &run_id,
            "--wait",
            "--out",
            fetched.path().to_str().unwrap(),
        ],
    );
    assert!(
        retrieved["path"].as_str().unwrap().ends_with(".tar.gz"),
        "{retrieved}"
    );
}

#[test]
fn a_kubernetes_run_ends_in_a_bundle_with_every_nodes_results_and_the_clusters_resources() {
    let cluster = cluster();
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let bundle = kube_runs::run(
        cluster,
        state.path(),
        out.path(),
        &[
            "--plugin",
            "host-facts",
            "--plugin",
            "setup",
            "--resources",
            "nodes,namespaces,pods,storageclasses",
        ],
    );
    for node in ["node-1", "node-2", "node-3"] {
        // The agents share their node's network and host name: the facts are the node's
        // (tests/kube_nodes/conformance.rs compares them with the node's own view).
        let facts = bundle.json(&format!("plugins/setup/results/{node}/ansible_facts.json"));
        assert_eq!(facts["ansible_nodename"], node, "{facts}");
        let host = bundle.json(&format!(
            "plugins/host-facts/results/{node}/host-facts.json"
        ));
        assert_eq!(host["host"]["hostname"], node, "{host}");
    }
    let status = bundle.status();
    // The bundle holds the run's final status, not the `post-processing` it was packed in.
    assert_eq!(status["status"], "complete");
    assert!(
        status["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["status"] == "complete"),
        "{status:#}"
    );
    let nodes = bundle.json("resources/nodes.json");
    assert_eq!(nodes["items"].as_array().unwrap().len(), 3);
    // The cluster's identity, which keeps clusters apart in a history of bundles.
    let uid = cluster.kubectl([
        "get",
        "namespace",
        "kube-system",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    assert_eq!(
        bundle.json("meta/run.json")["origin"],
        serde_json::json!({"kind": "kubernetes", "id": uid.trim()})
    );
    assert_eq!(
        bundle.json("resources/version.json")["gitVersion"],
        "v1.20.2"
    );
    // --resources: each kind named is saved (the RBAC rules follow the flag), nothing else.
    let pods = bundle.json("resources/pods.json");
    assert!(
        pods["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["metadata"]["name"] == "factbuoy-aggregator"),
        "{pods:#}"
    );
    assert!(bundle.json("resources/storageclasses.json")["items"].is_array());
    let saved: Vec<_> = bundle
        .files
        .keys()
        .filter(|name| name.starts_with("resources/"))
        .collect();
    assert_eq!(
        saved,
        [
            "resources/namespaces.json",
            "resources/nodes.json",
            "resources/pods.json",
            "resources/storageclasses.json",
            "resources/version.json",
        ],
        "no resources/errors.json, nothing unasked"
    );

    // The run ended its DaemonSet: no agent lingers or restarts.
    let run_id = status["run_id"].as_str().unwrap().to_owned();
    let namespace = format!("factbuoy-{run_id}");
    let daemonsets = cluster.kubectl(["-n", &namespace, "get", "daemonsets", "-o", "name"]);
    assert_eq!(
        daemonsets.trim(),
        "",
        "the agents' DaemonSet outlived the run"
    );

    // `status` and `retrieve` reach the finished run through port-forward, as the current run
    // or by its id; a cut download resumes where it stopped.
    let current = factbuoy_json(cluster, state.path(), &["status"]);
    assert_eq!(current["run_id"], run_id.as_str());
    assert_eq!(current["status"], "complete", "{current:#}");
    let named = factbuoy_json(cluster, state.path(), &["status", &run_id]);
    assert_eq!(named["status"], "complete");
    let retrieved = tempfile::tempdir().unwrap();
    let retrieve = [
        "retrieve",
        &run_id,
        "--out",
        retrieved.path().to_str().unwrap(),
    ];
    let first = factbuoy_json(cluster, state.path(), &retrieve);
    assert_eq!(first["resumed_from"], 0);
    let path = first["path"].as_str().unwrap();
    let whole = std::fs::read(&bundle.path).unwrap();
    assert_eq!(std::fs::read(path).unwrap(), whole);
    std::fs::write(path, &whole[..whole.len() / 2]).unwrap();
    let resumed = factbuoy_json(cluster, state.path(), &retrieve);
    assert_eq!(resumed["resumed_from"], whole.len() / 2, "{resumed}");
    assert_eq!(std::fs::read(path).unwrap(), whole);

    factbuoy_json(cluster, state.path(), &["delete", &run_id]);
}

/// Where policy forbids `hostNetwork`, `--no-host-network` keeps the agents in pods of their own:
/// the host name and addresses are then the pods', and `run` and every result's warnings say
/// which facts those are.
#[test]
fn without_host_network_the_pods_own_facts_are_named_in_the_runs_warnings() {
    let cluster = cluster();
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = kube_runs::start_run(
        cluster,
        state.path(),
        out.path(),
        &[
            "--plugin",
            "setup",
            "--plugin",
            "host-facts",
            "--no-host-network",
        ],
    );
    let ran = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(
        stderr.contains("--no-host-network: the host name")
            && stderr.contains("are the agent pod's, not the node's"),
        "{stderr}"
    );
    let path = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .unwrap_or_else(|| panic!("no bundle: {stderr}"));
    let bundle = kube_runs::Bundle::read(path);
    let status = bundle.status();
    for node in ["node-1", "node-2", "node-3"] {
        let facts = bundle.json(&format!("plugins/setup/results/{node}/ansible_facts.json"));
        let nodename = facts["ansible_nodename"].as_str().unwrap();
        assert!(nodename.starts_with("factbuoy-agent-"), "{nodename}");
        // The node's eth0 (from its /sys) is not the pod's eth0: it gets no ethtool facts,
        // rather than the pod's.
        assert!(
            facts["ansible_eth0"]["macaddress"].is_string()
                && facts["ansible_eth0"].get("features").is_none(),
            "{node}: {}",
            facts["ansible_eth0"]
        );
        let setup = pair(&status, "setup", node)["warnings"].to_string();
        for fact in [
            "ansible_nodename",
            "ansible_default_ipv4",
            "ansible_all_ipv4_addresses",
        ] {
            assert!(setup.contains(fact), "{node}: {setup}");
        }
        assert!(
            setup.contains("without hostNetwork") && setup.contains("ethtool features"),
            "{node}: {setup}"
        );
        let host_facts = pair(&status, "host-facts", node)["warnings"].to_string();
        assert!(
            host_facts.contains("network.default_ipv4") && host_facts.contains("host.hostname"),
            "{node}: {host_facts}"
        );
        // The user is not the node's: by design, no warning about it.
        assert!(!setup.contains("passwd"), "{node}: {setup}");
    }
    let run_id = status["run_id"].as_str().unwrap().to_owned();
    factbuoy_json(cluster, state.path(), &["delete", &run_id]);
}

/// Removes a taint from a node when dropped, so a failing test leaves the cluster as it was.
struct Taint<'a> {
    cluster: &'a Cluster,
    node: &'a str,
    key: &'a str,
}

impl<'a> Taint<'a> {
    /// Taints `node` with `key=yes:NoSchedule`.
    fn add(cluster: &'a Cluster, node: &'a str, key: &'a str) -> Taint<'a> {
        cluster.kubectl(["taint", "nodes", node, &format!("{key}=yes:NoSchedule")]);
        Taint { cluster, node, key }
    }
}

impl Drop for Taint<'_> {
    fn drop(&mut self) {
        self.cluster
            .kubectl(["taint", "nodes", self.node, &format!("{}-", self.key)]);
    }
}

#[test]
fn a_node_with_a_taint_the_run_does_not_tolerate_is_skipped_and_not_waited_for() {
    let cluster = cluster();
    let _taint = Taint::add(cluster, "node-2", "factbuoy-test/keep-out");
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let bundle = kube_runs::run(
        cluster,
        state.path(),
        out.path(),
        &["--plugin", "host-facts", "--no-tolerate-all"],
    );
    let status = bundle.status();
    // Waiting for it would have ended in the run's timeout: timed-out, not skipped.
    assert_eq!(
        pair(&status, "host-facts", "node-2")["status"],
        "skipped",
        "{status:#}"
    );
    let error = bundle.json("plugins/host-facts/errors/node-2/error.json");
    assert!(
        error.to_string().contains("factbuoy-test/keep-out"),
        "{error}"
    );
    for node in ["node-1", "node-3"] {
        assert_eq!(pair(&status, "host-facts", node)["status"], "complete");
    }
    let run_id = status["run_id"].as_str().unwrap();
    factbuoy_json(cluster, state.path(), &["delete", run_id]);
}

#[test]
fn an_agent_pod_killed_mid_run_is_replaced_and_the_run_completes() {
    let cluster = cluster();
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    // Without the nodes' cache, whose compiled plugins make an agent deliver everything within
    // a second of starting: this test needs one killed before it has.
    let run = kube_runs::start_run(
        cluster,
        state.path(),
        out.path(),
        &[
            "--plugin",
            "host-facts",
            "--plugin",
            "setup",
            "--no-agent-cache",
        ],
    );
    let run_id = kube_runs::run_id_in(state.path());
    let namespace = format!("factbuoy-{run_id}");
    let selector = format!("factbuoy/run={run_id},app.kubernetes.io/component=agent");
    // The first agent whose container runs is killed, before it can have delivered everything.
    let (pod, node) = kube_runs::poll(Duration::from_secs(120), "an agent pod running", || {
        let running = cluster.kubectl([
            "-n",
            &namespace,
            "get",
            "pods",
            "-l",
            &selector,
            "--field-selector",
            "status.phase=Running",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{\"\\n\"}{end}",
        ]);
        let (pod, node) = running.lines().next()?.split_once(' ')?;
        Some((pod.to_owned(), node.to_owned()))
    });
    cluster.kubectl([
        "-n",
        &namespace,
        "delete",
        "pod",
        &pod,
        "--grace-period=0",
        "--force",
    ]);
    // What the killed agent had delivered: not everything, or this test proves nothing.
    let at_kill = factbuoy_json(cluster, state.path(), &["status", &run_id]);
    assert!(
        ["host-facts", "setup"]
            .iter()
            .any(|plugin| pair(&at_kill, plugin, &node)["status"] != "complete"),
        "agent pod {pod} was killed after it had delivered everything: {at_kill:#}"
    );
    let bundle = kube_runs::finish_run(run, out.path());
    let status = bundle.status();
    // The DaemonSet's replacement pod enrolled and delivered for the same node.
    for plugin in ["host-facts", "setup"] {
        for node in ["node-1", "node-2", "node-3"] {
            assert_eq!(
                pair(&status, plugin, node)["status"],
                "complete",
                "{plugin} on {node} (agent pod {pod} on {node} was killed): {status:#}"
            );
        }
    }
    factbuoy_json(cluster, state.path(), &["delete", &run_id]);
}

/// A journal file systemd-journal-remote writes for one test, kept as journald keeps its files
/// (directory `2750` and file `0640`, owner root, group [`JOURNAL_GID`]) in a machine
/// directory of its own under /run/log/journal: the test nodes are this machine. Removed when
/// dropped, with the directories it had to create.
struct TestJournal {
    machine_dir: PathBuf,
    created: Vec<PathBuf>,
    /// The MESSAGE of its one entry.
    marker: String,
}

/// The group the test journals belong to: no account needs it, only the number matters.
const JOURNAL_GID: u32 = 4242;

impl TestJournal {
    fn write() -> TestJournal {
        use std::os::unix::fs::PermissionsExt;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let id = format!(
            "{:032x}",
            now.as_nanos() ^ (u128::from(std::process::id()) << 96)
        );
        let marker = format!("factbuoy test journal {id}");
        let mut created = Vec::new();
        for dir in ["/run/log", "/run/log/journal"] {
            if std::fs::create_dir(dir).is_ok() {
                created.push(PathBuf::from(dir));
            }
        }
        let machine_dir = Path::new("/run/log/journal").join(&id);
        std::fs::create_dir(&machine_dir).unwrap();
        let file = machine_dir.join("system.journal");
        let entry = format!(
            "__REALTIME_TIMESTAMP={}\n__MONOTONIC_TIMESTAMP=1\n_BOOT_ID={id}\nPRIORITY=6\nMESSAGE={marker}\n\n",
            now.as_micros()
        );
        support::write_journal(&file, entry.as_bytes(), &[]);
        for (path, mode) in [(&machine_dir, 0o2750), (&file, 0o640)] {
            std::os::unix::fs::chown(path, Some(0), Some(JOURNAL_GID)).unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        TestJournal {
            machine_dir,
            created,
            marker,
        }
    }
}

impl Drop for TestJournal {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.machine_dir);
        // Another test's journal may still be there: then these stay.
        for dir in self.created.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[test]
fn agents_given_the_journals_group_read_it_as_non_root() {
    let cluster = cluster();
    let journal = TestJournal::write();
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let gid = JOURNAL_GID.to_string();
    let bundle = kube_runs::run(
        cluster,
        state.path(),
        out.path(),
        &["--plugin", "systemd-logs", "--journal-group", &gid],
    );
    for node in ["node-1", "node-2", "node-3"] {
        let name = format!("plugins/systemd-logs/results/{node}/journal.jsonl");
        let lines = String::from_utf8_lossy(&bundle.files[&name]).into_owned();
        assert!(lines.contains(&journal.marker), "{node}: {lines}");
    }
    let run_id = bundle.status()["run_id"].as_str().unwrap().to_owned();
    factbuoy_json(cluster, state.path(), &["delete", &run_id]);
}

/// One run checks two things: the global plugin's run in the aggregator, and that agents
/// without --journal-group are refused the journal (and say so).
#[test]
fn global_plugins_run_once_in_the_aggregator_on_the_resources_and_agents_without_the_group_miss_the_journal()
 {
    let cluster = cluster();
    let journal = TestJournal::write();
    let hostile = support::fixture("hostile");
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let bundle = kube_runs::run(
        cluster,
        state.path(),
        out.path(),
        &[
            "--plugin",
            "systemd-logs",
            "--plugin",
            hostile.to_str().unwrap(),
            "--global",
            "hostile",
            "--grant",
            "hostile:read:/",
            "--param",
            "hostile:mode=fs-read",
            "--param",
            "hostile:path=/version.json,/etc/hostname",
        ],
    );
    let status = bundle.status();
    let hostile_pairs: Vec<&serde_json::Value> = status["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["plugin"] == "hostile")
        .collect();
    assert_eq!(hostile_pairs.len(), 1, "{status:#}");
    assert_eq!(hostile_pairs[0]["node"], "global");
    assert_eq!(hostile_pairs[0]["status"], "complete");
    let probe = bundle.json("plugins/hostile/results/global/probe.json");
    // Its root is resources/: the cluster's version is there, the aggregator's node is not.
    let version = probe["/version.json"]["read"].as_str().unwrap_or_default();
    assert!(version.contains("v1.20.2"), "{probe:#}");
    assert!(probe["/etc/hostname"]["error"].is_string(), "{probe:#}");

    for node in ["node-1", "node-2", "node-3"] {
        let name = format!("plugins/systemd-logs/results/{node}/journal.jsonl");
        let lines = bundle
            .files
            .get(&name)
            .map(|b| String::from_utf8_lossy(b).into_owned());
        assert!(
            !lines.unwrap_or_default().contains(&journal.marker),
            "{node} read a journal only its group may read"
        );
        let report = String::from_utf8_lossy(
            &bundle.files[&format!("meta/reports/systemd-logs/{node}.json")],
        )
        .into_owned();
        assert!(
            report.contains(journal.machine_dir.to_str().unwrap())
                && report.to_lowercase().contains("permission denied"),
            "{node}: {report}"
        );
    }
    let run_id = status["run_id"].as_str().unwrap().to_owned();
    factbuoy_json(cluster, state.path(), &["delete", &run_id]);
}

/// A Python plugin is 19 MB, far more than one ConfigMap holds: it travels in parts to the
/// aggregator, which joins them, and every agent fetches it by digest with nothing installed.
#[test]
fn a_python_plugin_from_a_file_travels_in_parts_and_runs_on_every_node() {
    let cluster = cluster();
    let python =
        support::python::component(&support::workspace().join("tests/plugins-python/hostile"));
    assert!(
        std::fs::metadata(&python).unwrap().len() > 4 << 20,
        "the Python component is meant to need several ConfigMaps"
    );
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let bundle = kube_runs::run(
        cluster,
        state.path(),
        out.path(),
        &[
            "--plugin",
            python.to_str().unwrap(),
            "--param",
            "hostile:mode=well-behaved",
        ],
    );
    kube_runs::assert_well_behaved_everywhere(&bundle, "hostile");
    let run_id = bundle.status()["run_id"].as_str().unwrap().to_owned();
    factbuoy_json(cluster, state.path(), &["delete", &run_id]);
}

/// The agents keep compiled plugins in a directory on their node that outlives the run: a
/// Python plugin (19 MB of wasm, seconds to compile) that one run compiled is loaded from there
/// by the next run's agents, on every node in at most a second. Each node's figures (from the
/// bundles' reports, `load`) are printed: `cargo test -p factbuoy --test kube_shared --
/// a_python_plugin_compiled_in_one_run --nocapture`.
#[test]
fn a_python_plugin_compiled_in_one_run_is_loaded_from_the_nodes_cache_in_the_next() {
    let cluster = cluster();
    let python =
        support::python::component(&support::workspace().join("tests/plugins-python/hostile"));
    // A cache of this test's own, empty: the first run compiles.
    let cache = support::binary_dir("agent-cache-python");
    let run = || {
        let state = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let bundle = kube_runs::run(
            cluster,
            state.path(),
            out.path(),
            &[
                "--agent-cache",
                cache.to_str().unwrap(),
                "--plugin",
                python.to_str().unwrap(),
                "--param",
                "hostile:mode=well-behaved",
            ],
        );
        kube_runs::assert_well_behaved_everywhere(&bundle, "hostile");
        let status = bundle.status();
        let loads: Vec<(bool, f64)> = ["node-1", "node-2", "node-3"]
            .iter()
            .map(|node| {
                let load = &bundle.json(&format!("meta/reports/hostile/{node}.json"))["load"];
                (
                    load["cached"].as_bool().expect("load.cached"),
                    load["duration_ms"].as_f64().expect("load.duration_ms"),
                )
            })
            .collect();
        let run_id = status["run_id"].as_str().unwrap().to_owned();
        factbuoy_json(cluster, state.path(), &["delete", &run_id]);
        loads
    };
    let started = std::time::Instant::now();
    let first = run();
    let between = std::time::Instant::now();
    let second = run();
    eprintln!(
        "run --kubernetes took {:.0} s the first time, {:.0} s the second",
        (between - started).as_secs_f64(),
        between.elapsed().as_secs_f64()
    );
    for (n, (first, second)) in first.iter().zip(&second).enumerate() {
        eprintln!(
            "node-{}: first run {} in {:.0} ms, second run {} in {:.0} ms",
            n + 1,
            if first.0 {
                "loaded from the cache"
            } else {
                "compiled"
            },
            first.1,
            if second.0 {
                "loaded from the cache"
            } else {
                "compiled"
            },
            second.1,
        );
    }
    // The nodes of the test cluster share this machine's file system, so an agent that starts
    // late in the first run may already find another node's entry: at least one compiled.
    assert!(first.iter().any(|(cached, _)| !cached), "{first:?}");
    for (n, (cached, ms)) in second.iter().enumerate() {
        assert!(cached, "node-{}: the second run compiled again", n + 1);
        assert!(
            *ms <= 1000.0,
            "node-{}: the cached load took {ms:.0} ms",
            n + 1
        );
    }
    // The init container gave the directory to the agents' user, and no one else may write it.
    let meta = std::fs::metadata(&cache).unwrap();
    assert_eq!(
        (
            std::os::unix::fs::MetadataExt::uid(&meta),
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777
        ),
        (65532, 0o700)
    );
}

/// A secret parameter travels in the run's Secret, which only the aggregator reads and which it
/// deletes when the run ends: the plugin gets it on every node, and it is nowhere else: not in
/// what `gen` prints, the bundle, the state directory, what `run` printed, the aggregator's log,
/// or any object left in the cluster (ConfigMaps, pods and their annotations, events, Secrets).
#[test]
fn a_secret_parameter_reaches_the_plugin_on_every_node_and_nothing_else() {
    const SECRET: &str = "kube-s3cr3t-Q9x";
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(SECRET);
    let cluster = cluster();
    let hostile = support::fixture("hostile");
    let hostile = hostile.to_str().unwrap();
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let token = state.path().join("token-file");
    std::fs::write(&token, format!("{SECRET}\n")).unwrap();
    let from_file = format!("hostile:token=@{}", token.display());
    let plugin = ["--plugin", hostile, "-p", "hostile:mode=budget-secret"];

    // `gen` prints manifests without it, and how to create the Secret they name.
    let generated = kube_runs::factbuoy(cluster, state.path())
        .args(["gen", "--run-id", "5ec4e7000001"])
        .args(plugin)
        .args(["-p", &from_file])
        .output()
        .unwrap();
    assert!(generated.status.success(), "{generated:?}");
    let printed = [&generated.stdout[..], &generated.stderr[..]].concat();
    let printed = String::from_utf8_lossy(&printed);
    assert!(!printed.contains(SECRET) && !printed.contains(&encoded));
    assert!(
        printed.contains("create secret generic factbuoy-secrets --from-file=hostile.token=FILE"),
        "{printed}"
    );

    // `run --kubernetes` creates the Secret itself.
    let run = kube_runs::factbuoy(cluster, state.path())
        .args(["run", "--kubernetes", "--image"])
        .arg(cluster.factbuoy_image_in_registry())
        .args([
            "--image-pull-policy",
            "IfNotPresent",
            "--timeout",
            "5m",
            "--out",
        ])
        .arg(out.path())
        .args(cluster.registry().flags())
        .arg("--agent-cache")
        .arg(support::agent_cache_dir())
        .args(plugin)
        .args(["-p", "hostile:token=env:FACTBUOY_TEST_TOKEN"])
        .env("FACTBUOY_TEST_TOKEN", SECRET)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ran = run.wait_with_output().unwrap();
    assert!(ran.status.success(), "{ran:?}");
    let bundle = kube_runs::bundle_in(out.path()).expect("a bundle");
    let status = bundle.status();
    let run_id = status["run_id"].as_str().unwrap().to_owned();
    let namespace = format!("factbuoy-{run_id}");
    let reversed: String = SECRET.chars().rev().collect();
    for node in ["node-1", "node-2", "node-3"] {
        assert_eq!(
            pair(&status, "hostile", node)["status"],
            "complete",
            "{status:#}"
        );
        let probe = bundle.json(&format!("plugins/hostile/results/{node}/probe.json"));
        assert_eq!(
            probe["token_reversed"],
            reversed.as_str(),
            "{node}: {probe}"
        );
        assert_eq!(probe["token_len"], SECRET.len(), "{node}: {probe}");
    }

    // The aggregator deleted its Secret when the run ended.
    let secrets = cluster.kubectl(["-n", &namespace, "get", "secrets", "-o", "name"]);
    assert!(!secrets.contains("factbuoy-secrets"), "{secrets}");
    let holders = |text: &str| text.contains(SECRET) || text.contains(&encoded);
    for (name, file) in &bundle.files {
        assert!(
            !holders(&String::from_utf8_lossy(file)),
            "the bundle's {name}"
        );
    }
    for what in [&ran.stdout, &ran.stderr] {
        assert!(!holders(&String::from_utf8_lossy(what)), "run printed it");
    }
    std::fs::remove_file(&token).unwrap();
    for needle in [SECRET, encoded.as_str()] {
        let written = support::search::files_holding(state.path(), needle);
        assert!(written.is_empty(), "the state directory: {written:?}");
    }
    let log = cluster.kubectl(["-n", &namespace, "logs", "factbuoy-aggregator"]);
    assert!(!holders(&log), "the aggregator's log: {log}");
    let objects = cluster.kubectl([
        "get",
        "configmaps,pods,events,secrets,daemonsets,services",
        "--all-namespaces",
        "-o",
        "json",
    ]);
    assert!(!holders(&objects), "an object in the cluster holds it");
    factbuoy_json(cluster, state.path(), &["delete", &run_id]);
}

//! The same plugin gives the same facts everywhere (docs/kubernetes.md, "The same facts
//! everywhere"): on the real test cluster (tests/kube/: v1.20.2, each node with its own network,
//! UTS, mount and PID namespaces), `setup` and `host-facts` describe a node four ways, from an
//! agent pod of `factbuoy run --kubernetes`, from `factbuoy plugin run` started on the node
//! (`cluster.sh node-exec`), from a fleet agent on the node, and from a fleet agent in a Podman
//! container on the node (deploy/podman/), and every deterministic fact is identical but for
//! [`BY_DESIGN`](crate::support::conformance::BY_DESIGN). The hostile fixture plugin is stopped
//! the same way in all four: the same failure kind and limit.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use crate::support::conformance::{by_design_lines, deterministic, differences};
use crate::support::kube::Cluster;
use crate::support::kube_runs::{self, Bundle, factbuoy_json};
use crate::support::podman::{self, Podman};
use serde_json::Value;

/// The nodes compared. Both are tainted with [`AGENTS_ONLY`], which agents tolerate and no other
/// pod does, so the aggregator's pod runs on node-3 and no pod's interface or mount comes or goes
/// on these two between the three ways (on a node that runs pods, theirs do).
const COMPARED: [u32; 2] = [1, 2];
const AGENTS_ONLY: &str = "factbuoy-test/agents-only";

/// What the hostile fixture does in every way: allocate until the sandbox's memory cap stops it,
/// well inside the agent pod's own memory limit (768Mi).
const HOSTILE_MODE: &str = "hostile:mode=alloc";

/// What one way saw of one node.
struct Seen {
    setup: Value,
    host_facts: Value,
    /// The hostile plugin's run report (its `failure`).
    hostile: Value,
    /// The `setup` and `host-facts` run reports' warnings.
    warnings: String,
}

impl Seen {
    /// From a bundle's results and reports for `node`.
    fn from_bundle(bundle: &Bundle, node: &str) -> Seen {
        let report = |plugin: &str| bundle.json(&format!("meta/reports/{plugin}/{node}.json"));
        Seen {
            setup: bundle.json(&format!("plugins/setup/results/{node}/ansible_facts.json")),
            host_facts: bundle.json(&format!(
                "plugins/host-facts/results/{node}/host-facts.json"
            )),
            hostile: report("hostile"),
            warnings: format!(
                "{} {}",
                report("setup")["warnings"],
                report("host-facts")["warnings"]
            ),
        }
    }
}

fn json_of(output: &Output, what: &str) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{what} printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// An artifact embedded in a `plugin run -o json` report, parsed.
fn artifact(report: &Value, name: &str) -> Value {
    let found = report["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["name"] == name))
        .unwrap_or_else(|| panic!("no {name} in {report}"));
    match &found["content"] {
        Value::String(text) => serde_json::from_str(text).unwrap(),
        other => other.clone(),
    }
}

/// `factbuoy` on node `n`, as started there by hand: root, in the node's namespaces, with the
/// test's component cache and no `TZ` (as the agent pod has none).
fn on_node(cluster: &Cluster, n: u32) -> Command {
    let mut command = cluster.node_command(n, env!("CARGO_BIN_EXE_factbuoy"));
    command
        .env("FACTBUOY_CACHE_DIR", support::cache_dir())
        .env_remove("TZ");
    command
}

/// `factbuoy plugin run` of each plugin on node `n`.
fn locally(cluster: &Cluster, n: u32, hostile: &Path) -> Seen {
    let run = |plugin: &str, extra: &[&str]| {
        let output = on_node(cluster, n)
            .args(["plugin", "run", plugin, "-o", "json"])
            .args(extra)
            .output()
            .unwrap();
        json_of(&output, &format!("plugin run {plugin} on node-{n}"))
    };
    let setup = run("setup", &[]);
    let host_facts = run("host-facts", &[]);
    Seen {
        warnings: format!("{} {}", setup["warnings"], host_facts["warnings"]),
        setup: artifact(&setup, "ansible_facts.json"),
        host_facts: artifact(&host_facts, "host-facts.json"),
        hostile: run(hostile.to_str().unwrap(), &["-p", HOSTILE_MODE]),
    }
}

/// Processes killed when dropped (a fleet aggregator, fleet agents).
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Containers removed when dropped (the fleet agents in Podman).
struct Containers<'a>(&'a Podman, Vec<String>);

impl Drop for Containers<'_> {
    fn drop(&mut self) {
        for name in &self.1 {
            self.0.remove(name);
        }
    }
}

/// A fleet aggregator in the cluster's network namespace, on each compared node an agent
/// started by hand (`node-N`) and one in a Podman container as
/// deploy/podman/factbuoy-agent-container.service runs it (`container-N`), and one `run --fleet`
/// of the plugins: its bundle.
fn as_fleet(cluster: &Cluster, hostile: &Path) -> Bundle {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("fleet");
    let mut children = Children(Vec::new());
    let fleet_log = std::fs::File::create(work.path().join("fleet.log")).unwrap();
    // The cluster's bridge address, which every node reaches through its eth0.
    let mut fleet = kube_runs::factbuoy(cluster, work.path())
        .args(["fleet", "serve", "-o", "json", "--name", "10.200.0.1"])
        .args(["--listen", "10.200.0.1:0", "--dir"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(fleet_log)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(fleet.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    children.0.push(fleet);
    let started: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
        panic!(
            "fleet serve printed {line:?} ({e}): {}",
            std::fs::read_to_string(work.path().join("fleet.log")).unwrap_or_default()
        )
    });
    let address = started["advertised"].as_str().unwrap().to_owned();
    let token = factbuoy_json(
        cluster,
        work.path(),
        &[
            "fleet",
            "token",
            "create",
            "--uses",
            "4",
            "--dir",
            dir.to_str().unwrap(),
        ],
    );
    for n in COMPARED {
        let state = work.path().join(format!("agent-{n}"));
        let joined = on_node(cluster, n)
            .args(["agent", "join", &address, "--token"])
            .arg(token["token"].as_str().unwrap())
            .arg("--ca-pin")
            .arg(token["ca_pin"].as_str().unwrap())
            .args(["--node", &format!("node-{n}"), "--state-dir"])
            .arg(&state)
            .output()
            .unwrap();
        assert!(
            joined.status.success(),
            "agent join on node-{n}: {}",
            String::from_utf8_lossy(&joined.stderr)
        );
        let log = std::fs::File::create(work.path().join(format!("agent-{n}.log"))).unwrap();
        children.0.push(
            on_node(cluster, n)
                .args(["agent", "serve", "--state-dir"])
                .arg(&state)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
    }
    let podman = Podman::new();
    let image = podman.load_factbuoy_image();
    let mut containers = Containers(&podman, Vec::new());
    for n in COMPARED {
        let on_node = |args: Vec<String>| {
            podman
                .configure(&mut cluster.node_command(n, "podman"))
                .args(args)
                .output()
                .unwrap()
        };
        let (state, cache) = (
            work.path().join(format!("container-{n}")),
            work.path().join(format!("container-{n}-cache")),
        );
        std::fs::create_dir_all(&state).unwrap();
        std::fs::create_dir_all(&cache).unwrap();
        let node = format!("container-{n}");
        let joined = on_node(podman::join_args(image, &state, &address, &node, &token));
        assert!(
            joined.status.success(),
            "agent join in a container on node-{n}: {}",
            String::from_utf8_lossy(&joined.stderr)
        );
        let name = format!("factbuoy-conformance-{}-{n}", std::process::id());
        let started = on_node(podman::serve_args(image, &name, &state, &cache));
        containers.1.push(name);
        assert!(
            started.status.success(),
            "agent serve in a container on node-{n}: {}",
            String::from_utf8_lossy(&started.stderr)
        );
    }
    let out = work.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let ran = kube_runs::factbuoy(cluster, work.path())
        .args([
            "run",
            "-o",
            "json",
            "--fleet",
            &address,
            "--fleet-credentials",
        ])
        .arg(dir.join("operator"))
        .args(["--plugin", "setup", "--plugin", "host-facts", "--plugin"])
        .arg(hostile)
        .args(["-p", HOSTILE_MODE, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let status = json_of(&ran, "run --fleet");
    let name = status["tar_info"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("run --fleet wrote no bundle: {status:#}"));
    Bundle::read(out.join(name))
}

#[test]
fn setup_and_host_facts_describe_a_node_the_same_from_its_agent_pod_by_hand_as_a_fleet_agent_and_in_podman()
 {
    let cluster = &Cluster::start("conformance", 3);
    for n in COMPARED {
        cluster.kubectl([
            "taint",
            "nodes",
            &format!("node-{n}"),
            &format!("{AGENTS_ONLY}=yes:NoSchedule"),
            "--overwrite",
        ]);
    }
    let hostile = support::fixture("hostile");

    // 1. Agent pods of a Kubernetes run.
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let bundle = kube_runs::run(
        cluster,
        state.path(),
        out.path(),
        &[
            "--plugin",
            "setup",
            "--plugin",
            "host-facts",
            "--plugin",
            hostile.to_str().unwrap(),
            "-p",
            HOSTILE_MODE,
            "--resources",
            "nodes,pods",
        ],
    );
    let pods = bundle.json("resources/pods.json");
    let aggregator = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["metadata"]["name"] == "factbuoy-aggregator")
        .unwrap();
    assert_eq!(
        aggregator["spec"]["nodeName"], "node-3",
        "the aggregator must run off the compared nodes"
    );
    let run_id = bundle.status()["run_id"].as_str().unwrap().to_owned();
    // Its agents and aggregator are gone before the other ways look.
    factbuoy_json(cluster, state.path(), &["delete", &run_id]);

    // 3. A fleet agent on each node (before 2., which then also shows that nothing the fleet
    //    agent left behind changed a fact).
    let fleet = as_fleet(cluster, &hostile);

    for n in COMPARED {
        let node = format!("node-{n}");
        let ways = [
            ("agent pod", Seen::from_bundle(&bundle, &node)),
            // 2. By hand, on the node.
            ("plugin run on the node", locally(cluster, n, &hostile)),
            ("fleet agent", Seen::from_bundle(&fleet, &node)),
            // 4. A fleet agent in a Podman container on the node.
            (
                "fleet agent in a Podman container",
                Seen::from_bundle(&fleet, &format!("container-{n}")),
            ),
        ];

        // Each way describes the node, not the pod: its name, its address, its eth0 with the
        // MAC address the harness gives it and that interface's ethtool features.
        let address = format!("10.200.0.{}", 10 + n);
        let mac = format!("02:fb:00:00:00:{n:02x}");
        for (way, seen) in &ways {
            let setup = &seen.setup;
            assert_eq!(setup["ansible_nodename"], node.as_str(), "{way} on {node}");
            assert_eq!(
                setup["ansible_default_ipv4"]["address"],
                address.as_str(),
                "{way} on {node}"
            );
            assert_eq!(setup["ansible_eth0"]["macaddress"], mac.as_str(), "{way}");
            assert!(
                setup["ansible_eth0"]["features"]["tx_checksumming"].is_string(),
                "{way} on {node}: eth0's ethtool features: {}",
                setup["ansible_eth0"]
            );
            let host = &seen.host_facts;
            assert_eq!(host["host"]["hostname"], node.as_str(), "{way} on {node}");
            assert_eq!(
                host["network"]["default_ipv4"]["source_address"],
                address.as_str(),
                "{way} on {node}"
            );
            // Nothing about namespaces or users to warn of: the node is the node.
            assert!(
                !seen.warnings.contains("namespace") && !seen.warnings.contains("passwd"),
                "{way} on {node}: {}",
                seen.warnings
            );
        }

        // Every deterministic fact is identical.
        let (first, reference) = &ways[0];
        for (way, seen) in &ways[1..] {
            for (plugin, a, b) in [
                ("setup", &reference.setup, &seen.setup),
                ("host-facts", &reference.host_facts, &seen.host_facts),
            ] {
                let mut found = Vec::new();
                differences(&deterministic(a), &deterministic(b), "", &mut found);
                assert!(
                    found.is_empty(),
                    "{plugin} on {node}: {first} vs {way} differ in {} facts:\n{}\n\
                     (not compared, as they differ by design:\n{})",
                    found.len(),
                    found.join("\n"),
                    by_design_lines()
                );
            }
        }

        // What differs by design differs for the reason given: the agent pod's user and
        // capabilities are its own; the container's user is root, its capabilities Podman's.
        let ids = |seen: &Seen| {
            (
                seen.setup["ansible_real_user_id"].clone(),
                seen.setup["ansible_system_capabilities_enforced"].clone(),
            )
        };
        assert_eq!(ids(&ways[0].1).0, 65532, "{node}");
        assert_eq!(ids(&ways[1].1), ids(&ways[2].1), "{node}");
        assert_eq!(ids(&ways[1].1).0, 0, "{node}");
        assert_eq!(ids(&ways[3].1).0, 0, "{node}");
        let capabilities = |seen: &Seen| seen.setup["ansible_system_capabilities"].clone();
        assert_ne!(
            capabilities(&ways[3].1),
            capabilities(&ways[1].1),
            "{node}: the container's capabilities"
        );
        assert!(
            ways[0].1.setup.get("ansible_user_id").is_none(),
            "uid 65532 has no name on the node: {}",
            ways[0].1.setup
        );

        // The hostile plugin is contained the same way: the same failure kind and limit.
        let failure = |seen: &Seen| {
            let f = &seen.hostile["failure"];
            (f["kind"].clone(), f["limit"].clone())
        };
        for (way, seen) in &ways {
            assert_eq!(
                failure(seen),
                ("limit-exceeded".into(), "memory".into()),
                "{way} on {node}: {}",
                seen.hostile
            );
            assert_eq!(
                seen.hostile["failure"]["message"], ways[0].1.hostile["failure"]["message"],
                "{way} on {node}"
            );
        }
    }
}

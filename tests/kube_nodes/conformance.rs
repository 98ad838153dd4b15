//! The same plugin gives the same facts everywhere (docs/kubernetes.md, "The same facts
//! everywhere"): on the real test cluster (tests/kube/: v1.20.2, each node with its own network,
//! UTS, mount and PID namespaces), `setup` and `host-facts` describe a node three ways, from an
//! agent pod of `factbuoy run --kubernetes`, from `factbuoy plugin run` started on the node
//! (`cluster.sh node-exec`), and from a fleet agent on the node, and every deterministic fact is
//! identical but for [`BY_DESIGN`]. The hostile fixture plugin is stopped the same way in all
//! three: the same failure kind and limit.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use crate::support::kube::Cluster;
use crate::support::kube_runs::{self, Bundle, factbuoy_json};
use serde_json::Value;

/// The nodes compared. Both are tainted with [`AGENTS_ONLY`], which agents tolerate and no other
/// pod does, so the aggregator's pod runs on node-3 and no pod's interface or mount comes or goes
/// on these two between the three ways (on a node that runs pods, theirs do).
const COMPARED: [u32; 2] = [1, 2];
const AGENTS_ONLY: &str = "factbuoy-test/agents-only";

/// What the hostile fixture does in every way: allocate until the sandbox's memory cap stops it,
/// well inside the agent pod's own memory limit (768Mi).
const HOSTILE_MODE: &str = "hostile:mode=alloc";

/// Facts that differ between the three ways by design, each with the reason (the list
/// docs/kubernetes.md gives): JSON pointers into `setup`'s and `host-facts`' documents. The
/// agent pod's own mounts ([`is_pod_mount`]) and the sizes of file systems it cannot reach
/// ([`agent_reaches`]) are the rest of that list. The test harness's own mounts
/// ([`is_harness_mount`]) are no node's facts, and are left out too.
const BY_DESIGN: &[(&[&str], &str)] = &[
    (
        &[
            "/ansible_user_id",
            "/ansible_user_uid",
            "/ansible_user_gid",
            "/ansible_user_gecos",
            "/ansible_user_dir",
            "/ansible_user_shell",
            "/ansible_real_user_id",
            "/ansible_effective_user_id",
            "/ansible_real_group_id",
            "/ansible_effective_group_id",
        ],
        "who factbuoy runs as: the agent pod's user 65532, root on the node and in the fleet agent",
    ),
    (
        &["/ansible_env"],
        "the factbuoy process's environment, which a pod, a shell and a service each set their own way",
    ),
    (
        &[
            "/ansible_system_capabilities",
            "/ansible_system_capabilities_enforced",
        ],
        "the factbuoy process's capabilities: none in the agent pod, root's elsewhere",
    ),
    (
        &["/ansible_lvm"],
        "Ansible reports LVM only when its module runs as root, which the agent does not",
    ),
    (
        &[
            "/ansible_mounts/*/uuid",
            "/ansible_device_links",
            "/ansible_devices/*/links",
        ],
        "found in /dev/disk, which agents never mount (equal where a node has no /dev/disk)",
    ),
    (
        &[
            "/ansible_virtualization_type",
            "/ansible_virtualization_role",
            "/ansible_virtualization_tech_guest",
            "/ansible_virtualization_tech_host",
            "/virtualization",
        ],
        "told in part by files at the node's root (/.dockerenv, /.containerenv) and /dev/kvm, \
         which agents cannot see: they mount whole top-level directories, never / or /dev",
    ),
];

/// Mount points the kubelet and the container runtime make for pods: the agent pod's own root
/// file system and volumes are in the node's mount table only while it runs (the mounts of
/// [`BY_DESIGN`]'s kind, for both plugins).
fn is_pod_mount(mount_point: &str) -> bool {
    mount_point.contains("/kubelet/pods/") || mount_point.contains("/io.containerd.")
}

/// Mount points of the test harness itself: the network namespaces of the test clusters
/// (`/run/netns/factbuoy-t-<name>-node-N`, tests/support/kube.rs), which the other test modules'
/// clusters add and remove while this test samples a node three times; the nodes see them
/// because they share the machine's `/run`.
fn is_harness_mount(mount_point: &str) -> bool {
    mount_point.starts_with("/run/netns/factbuoy-t-")
}

/// The host directories the agents of this test's run mount (docs/kubernetes.md, "Host
/// directories"): those setup's and host-facts' grants reach.
const AGENT_DIRS: &[&str] = &[
    "/bin", "/etc", "/proc", "/run", "/sbin", "/sys", "/usr", "/var",
];

/// Whether an agent reaches `mount_point` to ask its size (statvfs): `/`, or below a directory
/// it mounts. Not `/dev` and its submounts, nor what is mounted elsewhere (`/mnt/...`).
fn agent_reaches(mount_point: &str) -> bool {
    mount_point == "/"
        || AGENT_DIRS
            .iter()
            .any(|dir| mount_point == *dir || mount_point.starts_with(&format!("{dir}/")))
}

/// Size facts of a mount, which only statvfs of its mount point tells (setup's, host-facts').
const SIZE_FACTS: &[&str] = &[
    "size_total",
    "size_available",
    "block_size",
    "block_total",
    "block_available",
    "block_used",
    "inode_total",
    "inode_available",
    "inode_used",
    "usage",
];

/// Facts that change from one second to the next wherever factbuoy runs: not deterministic, so
/// never compared (JSON pointers; `*` stands for every element).
const VOLATILE: &[&str] = &[
    "/ansible_date_time/date",
    "/ansible_date_time/day",
    "/ansible_date_time/epoch",
    "/ansible_date_time/epoch_int",
    "/ansible_date_time/hour",
    "/ansible_date_time/iso8601",
    "/ansible_date_time/iso8601_basic",
    "/ansible_date_time/iso8601_basic_short",
    "/ansible_date_time/iso8601_micro",
    "/ansible_date_time/minute",
    "/ansible_date_time/month",
    "/ansible_date_time/second",
    "/ansible_date_time/time",
    "/ansible_date_time/weekday",
    "/ansible_date_time/weekday_number",
    "/ansible_date_time/weeknumber",
    "/ansible_date_time/year",
    "/ansible_date_time/monotonic",
    "/ansible_uptime_seconds",
    "/ansible_loadavg",
    "/ansible_memfree_mb",
    "/ansible_memory_mb/real/free",
    "/ansible_memory_mb/real/used",
    "/ansible_memory_mb/nocache",
    "/ansible_memory_mb/swap/free",
    "/ansible_memory_mb/swap/used",
    "/ansible_memory_mb/swap/cached",
    "/ansible_mounts/*/size_available",
    "/ansible_mounts/*/block_available",
    "/ansible_mounts/*/block_used",
    "/ansible_mounts/*/inode_available",
    "/ansible_mounts/*/inode_used",
    "/collected_at",
    "/cpu/frequency_mhz",
    "/memory/available_bytes",
    "/memory/free_bytes",
    "/memory/used_bytes",
    "/memory/buffers_bytes",
    "/memory/cached_bytes",
    "/memory/shared_bytes",
    "/memory/swap/free_bytes",
    "/memory/swap/used_bytes",
    "/mounts/*/usage/free_bytes",
    "/mounts/*/usage/available_bytes",
    "/mounts/*/usage/used_bytes",
    "/mounts/*/usage/inodes_free",
    "/mounts/*/usage/inodes_used",
    "/network/interfaces/*/rx_bytes",
    "/network/interfaces/*/tx_bytes",
    "/system/uptime_seconds",
    "/system/load_average",
    "/system/processes",
];

/// Removes what `pointer` names from `value`; `*` steps into every element of an array or
/// every value of an object.
fn remove(value: &mut Value, pointer: &str) {
    let steps: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    remove_steps(value, &steps);
}

fn remove_steps(value: &mut Value, steps: &[&str]) {
    match (steps, value) {
        ([last], Value::Object(map)) => {
            map.remove(*last);
        }
        (["*", rest @ ..], Value::Array(items)) => {
            for item in items {
                remove_steps(item, rest);
            }
        }
        (["*", rest @ ..], Value::Object(map)) => {
            for item in map.values_mut() {
                remove_steps(item, rest);
            }
        }
        ([first, rest @ ..], Value::Object(map)) => {
            if let Some(inner) = map.get_mut(*first) {
                remove_steps(inner, rest);
            }
        }
        _ => {}
    }
}

/// A document without its volatile facts and those that differ by design: what must be
/// identical across the three ways.
fn deterministic(document: &Value) -> Value {
    let mut document = document.clone();
    for pointer in VOLATILE
        .iter()
        .chain(BY_DESIGN.iter().flat_map(|(pointers, _)| pointers.iter()))
    {
        remove(&mut document, pointer);
    }
    // Lists of mounts become objects keyed by mount point (and how many times it was mounted
    // over), so that a difference names it.
    for (list, key) in [("ansible_mounts", "mount"), ("mounts", "mount_point")] {
        let Some(Value::Array(mounts)) = document.get(list) else {
            continue;
        };
        let mut keyed = serde_json::Map::new();
        for mount in mounts {
            let point = mount[key].as_str().unwrap_or_default();
            if is_pod_mount(point) || is_harness_mount(point) {
                continue;
            }
            let mut mount = mount.clone();
            if !agent_reaches(point) {
                for fact in SIZE_FACTS {
                    remove(&mut mount, fact);
                }
            }
            let mut name = point.to_owned();
            while keyed.contains_key(&name) {
                name.push_str(" (mounted over)");
            }
            keyed.insert(name, mount);
        }
        document[list] = Value::Object(keyed);
    }
    document
}

/// Where `a` and `b` differ, as JSON pointers with both values.
fn differences(a: &Value, b: &Value, at: &str, found: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let null = Value::Null;
                let (left, right) = (x.get(key).unwrap_or(&null), y.get(key).unwrap_or(&null));
                differences(left, right, &format!("{at}/{key}"), found);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (left, right)) in x.iter().zip(y).enumerate() {
                differences(left, right, &format!("{at}/{i}"), found);
            }
        }
        _ if a != b => {
            let cut = |v: &Value| v.to_string().chars().take(300).collect::<String>();
            found.push(format!("{at}: {} vs {}", cut(a), cut(b)));
        }
        _ => {}
    }
}

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

/// A fleet aggregator in the cluster's network namespace, an agent joined on each compared node,
/// and one `run --fleet` of the plugins: its bundle.
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
            "2",
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
fn setup_and_host_facts_describe_a_node_the_same_from_its_agent_pod_by_hand_and_as_a_fleet_agent() {
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
                let by_design: Vec<String> = BY_DESIGN
                    .iter()
                    .map(|(pointers, why)| format!("{}: {why}", pointers.join(", ")))
                    .collect();
                assert!(
                    found.is_empty(),
                    "{plugin} on {node}: {first} vs {way} differ in {} facts:\n{}\n\
                     (not compared, as they differ by design:\n{})",
                    found.len(),
                    found.join("\n"),
                    by_design.join("\n")
                );
            }
        }

        // What differs by design differs for the reason given: the agent pod's user and
        // capabilities are its own.
        let ids = |seen: &Seen| {
            (
                seen.setup["ansible_real_user_id"].clone(),
                seen.setup["ansible_system_capabilities_enforced"].clone(),
            )
        };
        assert_eq!(ids(&ways[0].1).0, 65532, "{node}");
        assert_eq!(ids(&ways[1].1), ids(&ways[2].1), "{node}");
        assert_eq!(ids(&ways[1].1).0, 0, "{node}");
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

//! Remote nodes (docs/fleet.md): machines outside any cluster join a fleet with a token and take
//! part in its runs, connecting out only. Each machine is a network namespace with its own
//! address on a bridge, whose firewall drops every inbound connection; the fleet aggregator, the
//! agents and the operator are the real binary.
//!
//! Needs root and `ip`/`iptables` (iproute2, iptables). Where namespaces cannot be made the test
//! says so and is skipped, except under CI (`CI` set), where that is a failure.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::bridge::{Bridge, must, namespaces_refused, slot};
use crate::support::factbuoy;
use serde_json::Value;

/// The bridge in the test's own namespace, where the fleet listens.
fn bridge() -> String {
    format!("fbfleet{}", slot())
}

fn fleet_ip() -> String {
    format!("10.77.{}.1", slot())
}
const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];

fn sh(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"))
}

/// The network: a bridge with the fleet's address, and a namespace per node behind it that
/// drops inbound connections. `None` (after saying why) where this machine cannot make
/// namespaces.
fn network() -> Option<Bridge> {
    if let Some(why) = namespaces_refused(&format!("fbfleet{}-probe", slot())) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must be able to make network namespaces: {why}"
        );
        eprintln!("SKIPPED: this machine cannot make network namespaces ({why})");
        return None;
    }
    let mut network = Bridge::up(&bridge(), &format!("{}/24", fleet_ip()));
    for (i, node) in NODES.iter().enumerate() {
        let ns = namespace(node);
        let address = format!("{}/24", node_ip(i));
        network.plug(&ns, &format!("fbv{}-{i}", slot()), &address);
        // Nothing may connect in: only replies to the node's own connections pass.
        for rule in [
            "-A INPUT -i lo -j ACCEPT",
            "-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
            "-P INPUT DROP",
        ] {
            let mut full = vec!["netns", "exec", &ns, "iptables"];
            full.extend(rule.split(' '));
            must("ip", &full);
        }
    }
    Some(network)
}

fn namespace(node: &str) -> String {
    format!("fbfleet{}-{node}", slot())
}

fn node_ip(index: usize) -> String {
    format!("10.77.{}.{}", slot(), 10 + index)
}

/// `factbuoy ARGS` inside `node`'s namespace.
fn on_node(node: &str, args: &[&str]) -> Command {
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", &namespace(node)])
        .arg(env!("CARGO_BIN_EXE_factbuoy"))
        .args(args)
        .env("FACTBUOY_CACHE_DIR", support::cache_dir());
    command
}

/// A fleet aggregator serving `dir`, as a child process; killed when dropped.
struct Fleet {
    child: Child,
    address: String,
    dir: PathBuf,
    log: PathBuf,
}

impl Fleet {
    fn start(dir: &Path) -> Fleet {
        let log = dir.with_extension("log");
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let mut child = factbuoy()
            // Certificates of 15 s: agents renew them every 10 s during the test, and a renewal
            // that did not work would leave them expired long before its end.
            .args([
                "-v",
                "fleet",
                "serve",
                "-o",
                "json",
                "--certificate-validity",
                "15s",
            ])
            .args(["--name", &fleet_ip(), "--dir"])
            .arg(dir)
            .args(["--listen", &format!("{}:0", fleet_ip())])
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let started: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!(
                "fleet serve printed {line:?} ({e}); its log: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
        // How many agents it holds, for scripts that size a fleet: the descriptors' share.
        assert!(
            started["max_agents"].as_u64().is_some_and(|n| n > 0),
            "{started}"
        );
        Fleet {
            child,
            address: started["advertised"].as_str().unwrap().to_owned(),
            dir: dir.to_owned(),
            log,
        }
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// `factbuoy fleet ARGS --dir DIR`.
    fn command(&self, args: &[&str]) -> Output {
        factbuoy()
            .arg("fleet")
            .args(args)
            .arg("--dir")
            .arg(&self.dir)
            .output()
            .unwrap()
    }

    fn token(&self, extra: &[&str]) -> (String, String) {
        let mut args = vec!["token", "create", "-o", "json"];
        args.extend(extra);
        let output = self.command(&args);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let made: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(made["address"], self.address.as_str());
        // The token reaches the agent on its standard input, never on its command line.
        assert!(made["command"].as_str().unwrap().starts_with(&format!(
            "echo {} | factbuoy agent join ",
            made["token"].as_str().unwrap()
        )));
        (
            made["token"].as_str().unwrap().to_owned(),
            made["ca_pin"].as_str().unwrap().to_owned(),
        )
    }

    fn nodes(&self) -> Vec<Value> {
        let output = self.command(&["nodes", "-o", "json"]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice::<Value>(&output.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Agents {
    children: Vec<(String, Child)>,
    root: PathBuf,
}

impl Agents {
    fn state(&self, node: &str) -> PathBuf {
        self.root.join(node)
    }

    fn join(&self, fleet: &Fleet, node: &str, token: &str, pin: &str) -> Output {
        on_node(
            node,
            &[
                "agent",
                "join",
                &fleet.address,
                "--token",
                token,
                "--ca-pin",
                pin,
                "--node",
                node,
                "--state-dir",
            ],
        )
        .arg(self.state(node))
        .output()
        .unwrap()
    }

    fn serve(&mut self, node: &str) {
        let log = self.root.join(format!("{node}.log"));
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = on_node(node, &["-v", "agent", "serve", "--state-dir"])
            .arg(self.state(node))
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        self.children.push((node.to_owned(), child));
    }

    /// Stops `node`'s agent at once, as a machine switched off would.
    fn power_off(&mut self, node: &str) {
        let at = self.children.iter().position(|(n, _)| n == node).unwrap();
        let (_, mut child) = self.children.remove(at);
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Waits for `node`'s agent to end by itself.
    fn wait_exit(&mut self, node: &str, within: Duration) -> std::process::ExitStatus {
        let at = self.children.iter().position(|(n, _)| n == node).unwrap();
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.children[at].1.try_wait().unwrap() {
                self.children.remove(at);
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{node}'s agent still runs after {within:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn log(&self, node: &str) -> String {
        std::fs::read_to_string(self.root.join(format!("{node}.log"))).unwrap_or_default()
    }
}

impl Drop for Agents {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `factbuoy run --fleet` as a child process, its status document on stdout.
fn start_run(fleet: &Fleet, out: &Path, state: &Path, extra: &[&str]) -> Child {
    factbuoy()
        .env("FACTBUOY_STATE_DIR", state)
        .args([
            "run",
            "-o",
            "json",
            "--plugin",
            "host-facts",
            "--fleet",
            &fleet.address,
            "--fleet-credentials",
        ])
        .arg(fleet.dir.join("operator"))
        .arg("--out")
        .arg(out)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish_run(run: Child) -> Value {
    let output = run.wait_with_output().unwrap();
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "run --fleet printed no status ({e}); exit {:?}, stderr: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Each node's status of host-facts in a run's status document.
fn outcomes(status: &Value) -> Vec<(String, String)> {
    outcomes_of(status, "host-facts")
}

/// Each node's status of `plugin` in a run's status document.
fn outcomes_of(status: &Value, plugin: &str) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = status["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["plugin"] == plugin)
        .map(|p| {
            (
                p["node"].as_str().unwrap().to_owned(),
                p["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    found.sort();
    found
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// The nodes whose host-facts result a bundle holds.
fn bundle_nodes(out: &Path, status: &Value) -> Vec<String> {
    let name = status["tar_info"]["name"]
        .as_str()
        .expect("the run wrote a bundle");
    let listing = sh("tar", &["-tzf", out.join(name).to_str().unwrap()]);
    let text = String::from_utf8_lossy(&listing.stdout);
    let mut nodes: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("plugins/host-facts/results/"))
        .filter_map(|rest| rest.split('/').next())
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

#[test]
fn remote_nodes_join_with_tokens_connect_out_only_and_take_part_in_every_run() {
    let Some(_network) = network() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let fleet_dir = work.path().join("fleet");
    let cli_state = work.path().join("cli");
    let mut fleet = Fleet::start(&fleet_dir);
    let mut agents = Agents {
        children: Vec::new(),
        root: work.path().join("agents"),
    };
    std::fs::create_dir_all(&agents.root).unwrap();

    // The firewall works: a listener on a node cannot be reached from the fleet's side.
    let mut listener = Command::new("ip")
        .args([
            "netns",
            "exec",
            &namespace("node-a"),
            "socat",
            "TCP-LISTEN:9999,reuseaddr,fork",
            "EXEC:/bin/true",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let probe = |from_inside: bool| {
        let script = format!("exec 3<>/dev/tcp/{}/9999", node_ip(0));
        let ns = namespace("node-a");
        let mut args = vec!["3"];
        if from_inside {
            args.extend(["ip", "netns", "exec", &ns]);
        }
        args.extend(["bash", "-c", &script]);
        sh("timeout", &args).status.success()
    };
    // The listener is up: the node reaches it itself.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !probe(true) {
        assert!(Instant::now() < deadline, "socat never listened in node-a");
        std::thread::sleep(Duration::from_millis(100));
    }
    let reached = probe(false);
    let _ = listener.kill();
    let _ = listener.wait();
    assert!(!reached, "an inbound connection reached node-a");

    // Refusals, each with a clear error and nothing enrolled.
    let (_, pin) = fleet.token(&[]);
    let refused = |output: &Output, words: &str| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && stderr.contains(words),
            "expected {words:?}: {stderr}"
        );
    };
    let (expired, _) = fleet.token(&["--ttl", "1s"]);
    std::thread::sleep(Duration::from_millis(1500));
    refused(&agents.join(&fleet, "node-a", &expired, &pin), "expired");
    let (good, _) = fleet.token(&[]);
    let wrong = format!("{}.{}", good.split_once('.').unwrap().0, "0".repeat(32));
    refused(&agents.join(&fleet, "node-a", &wrong, &pin), "secret");
    refused(
        &agents.join(&fleet, "node-a", "123456789abc.nothing", &pin),
        "not known",
    );
    let wrong_pin = format!("sha256:{}", "ab".repeat(32));
    refused(
        &agents.join(&fleet, "node-a", &good, &wrong_pin),
        "does not match the pin",
    );
    assert!(fleet.nodes().is_empty(), "a refused join enrolled a node");
    assert!(!agents.state("node-a").join("agent.json").exists());

    // Three machines join: node-a with the single-use token, b and c with one for two.
    let joined = agents.join(&fleet, "node-a", &good, &pin);
    assert!(
        joined.status.success(),
        "{}",
        String::from_utf8_lossy(&joined.stderr)
    );
    // Recorded with the agent that joined, before it ever asks for work.
    let listed = fleet.nodes();
    assert!(
        listed[0]["agent_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("factbuoy/")),
        "{listed:?}"
    );
    refused(&agents.join(&fleet, "node-b", &good, &pin), "already used");
    let (pair_token, _) = fleet.token(&["--uses", "2"]);
    for node in ["node-b", "node-c"] {
        let joined = agents.join(&fleet, node, &pair_token, &pin);
        assert!(
            joined.status.success(),
            "{}",
            String::from_utf8_lossy(&joined.stderr)
        );
    }
    // A second machine (node-c's namespace, another state directory) claims node-a's name.
    let (another, _) = fleet.token(&[]);
    let claim = on_node(
        "node-c",
        &[
            "agent",
            "join",
            &fleet.address,
            "--token",
            &another,
            "--ca-pin",
            &pin,
            "--node",
            "node-a",
            "--state-dir",
        ],
    )
    .arg(work.path().join("impostor"))
    .output()
    .unwrap();
    refused(&claim, "already enrolled");
    let key_mode = std::fs::metadata(agents.state("node-a").join("client.key")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(key_mode.permissions().mode() & 0o777, 0o600);
    let names: Vec<Value> = fleet.nodes().iter().map(|n| n["name"].clone()).collect();
    assert_eq!(names, ["node-a", "node-b", "node-c"]);
    let first_certificate = fleet.nodes()[0]["certificate_expires"].clone();

    // Two runs: every node takes part in both. The second also runs a plugin from a file,
    // which the CLI stores in the fleet and agents fetch by digest: nothing is installed on them.
    for node in NODES {
        agents.serve(node);
    }
    let uptime = support::fixture("uptime");
    let from_file = [
        "--plugin",
        uptime.to_str().unwrap(),
        "--grant",
        "uptime:host-info",
    ];
    for round in 1..=2 {
        let out = work.path().join(format!("run{round}"));
        let extra: &[&str] = if round == 2 { &from_file } else { &[] };
        let status = finish_run(start_run(&fleet, &out, &cli_state, extra));
        assert_eq!(status["status"], "complete", "{status:#}");
        if round == 2 {
            assert_eq!(
                outcomes_of(&status, "uptime"),
                pairs(&[
                    ("node-a", "complete"),
                    ("node-b", "complete"),
                    ("node-c", "complete")
                ]),
                "{status:#}"
            );
        }
        assert_eq!(
            outcomes(&status),
            pairs(&[
                ("node-a", "complete"),
                ("node-b", "complete"),
                ("node-c", "complete")
            ]),
            "run {round}: {status:#}\nfleet log: {}\nnode-a: {}",
            fleet.log(),
            agents.log("node-a")
        );
        assert_eq!(bundle_nodes(&out, &status), NODES);
    }
    let listed = fleet.nodes();
    for node in &listed {
        assert!(node["last_seen"].is_string(), "{node}");
        assert!(
            node["agent_version"]
                .as_str()
                .unwrap()
                .starts_with("factbuoy/"),
            "{node}"
        );
        assert!(node["certificate_expires"].is_string(), "{node}");
    }

    // node-c's machine is off during a run: it is reported lost and the run completes; it takes
    // part in the next run.
    agents.power_off("node-c");
    let out = work.path().join("run3");
    let status = finish_run(start_run(&fleet, &out, &cli_state, &["--lost-after", "5s"]));
    assert_eq!(status["status"], "complete", "{status:#}");
    assert_eq!(
        outcomes(&status),
        pairs(&[
            ("node-a", "complete"),
            ("node-b", "complete"),
            ("node-c", "lost")
        ])
    );
    agents.serve("node-c");
    let out = work.path().join("run4");
    let status = finish_run(start_run(&fleet, &out, &cli_state, &[]));
    assert_eq!(
        outcomes(&status),
        pairs(&[
            ("node-a", "complete"),
            ("node-b", "complete"),
            ("node-c", "complete")
        ]),
        "{status:#}"
    );

    // A revoked node is refused at its next request: its agent ends, saying why.
    let revoked = fleet.command(&["revoke", "node-b"]);
    assert!(
        revoked.status.success(),
        "{}",
        String::from_utf8_lossy(&revoked.stderr)
    );
    let exit = agents.wait_exit("node-b", Duration::from_secs(75));
    assert!(!exit.success());
    assert!(
        agents.log("node-b").contains("revoked"),
        "{}",
        agents.log("node-b")
    );

    // The fleet is killed mid-run and restarted: the enrolled nodes and the running run survive.
    agents.power_off("node-c");
    let out = work.path().join("run5");
    let run = start_run(&fleet, &out, &cli_state, &["--lost-after", "300s"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let runs_dir = fleet_dir.join("runs");
    // node-a has delivered once the run directory holds its committed result.
    while !std::fs::read_dir(&runs_dir).unwrap().any(|run| {
        let run = run.unwrap().path();
        run.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("000005")
            && run
                .join("results/plugins/host-facts/results/node-a")
                .exists()
    }) {
        assert!(
            Instant::now() < deadline,
            "node-a never delivered in run 5: {}",
            fleet.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    fleet.kill();
    fleet = Fleet::start(&fleet_dir);
    agents.serve("node-c");
    let status = finish_run(run);
    assert_eq!(status["status"], "complete", "{status:#}\n{}", fleet.log());
    assert_eq!(
        outcomes(&status),
        pairs(&[("node-a", "complete"), ("node-c", "complete")]),
        "a revoked node is not expected; the others are: {status:#}"
    );
    let nodes = fleet.nodes();
    let names: Vec<Value> = nodes.iter().map(|n| n["name"].clone()).collect();
    assert_eq!(names, ["node-a", "node-b", "node-c"]);
    assert_eq!(nodes[1]["revoked"], true);
    // A schedule: a run every 2 s, each with its own bundle, until stopped.
    let out = work.path().join("scheduled");
    let mut schedule = start_run(&fleet, &out, &cli_state, &["--every", "2s"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let bundles = || {
        std::fs::read_dir(&out)
            .map(|entries| {
                entries
                    .filter(|e| {
                        e.as_ref()
                            .unwrap()
                            .path()
                            .extension()
                            .is_some_and(|x| x == "gz")
                    })
                    .count()
            })
            .unwrap_or(0)
    };
    while bundles() < 2 {
        assert!(
            Instant::now() < deadline,
            "fewer than 2 scheduled runs in 60 s: {}",
            fleet.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = schedule.kill();
    let _ = schedule.wait();

    // node-a renewed its enrollment certificate (and kept working with the new one).
    assert_ne!(nodes[0]["certificate_expires"], first_certificate);
    assert!(
        agents
            .log("node-a")
            .contains("renewed the enrollment certificate")
    );
}

//! The fleet hub inside the cluster (`factbuoy fleet gen --apply`): a machine outside the
//! cluster, in a network namespace of its own plugged into the cluster's network, joins it
//! through the NodePort Service and takes part in runs an operator starts from another machine;
//! the hub's pod deleted in the middle of a run, the run completes once the new pod serves,
//! with nothing lost.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::cluster;
use crate::support;
use crate::support::kube::Cluster;
use crate::support::kube_runs::{self, factbuoy, pair, poll};

const NAMESPACE: &str = "factbuoy-fleet";
/// node-1's address and the hub's node port: where the machine outside dials.
const ADDRESS: &str = "10.200.0.11:30443";
/// The machine outside the cluster, on the cluster's network.
const OUTSIDE_IP: &str = "10.200.0.200";
const STORAGE_CLASS: &str = "factbuoy-hub-test";

fn json_of(output: &Output, what: &str) -> Value {
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{what} printed no JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// A machine of its own outside the cluster: a network namespace with `eth0` plugged into the
/// cluster's bridge, removed (with the processes started in it) when dropped.
struct Outside {
    netns: String,
    veth: String,
    cluster_netns: String,
    children: Vec<Child>,
}

impl Outside {
    fn new(cluster: &Cluster) -> Outside {
        let netns = format!("fbhub-{}", std::process::id());
        let veth = format!("vhub{}", std::process::id() % 100_000);
        let outside = Outside {
            netns,
            veth,
            cluster_netns: cluster.netns().to_owned(),
            children: Vec::new(),
        };
        let (ns, veth, cluster_ns) = (&outside.netns, &outside.veth, &outside.cluster_netns);
        for args in [
            vec!["netns", "add", ns],
            vec![
                "-n", cluster_ns, "link", "add", veth, "type", "veth", "peer", "name", "eth0",
                "netns", ns,
            ],
            vec![
                "-n", cluster_ns, "link", "set", veth, "master", "nodes0", "up",
            ],
            vec!["-n", ns, "link", "set", "lo", "up"],
            vec![
                "-n",
                ns,
                "addr",
                "add",
                &format!("{OUTSIDE_IP}/24"),
                "dev",
                "eth0",
            ],
            vec!["-n", ns, "link", "set", "eth0", "up"],
            vec!["-n", ns, "route", "add", "default", "via", "10.200.0.1"],
        ] {
            let output = Command::new("ip").args(&args).output().unwrap();
            assert!(
                output.status.success(),
                "ip {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        outside
    }

    /// `factbuoy` on this machine.
    fn factbuoy(&self, state: &Path) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.netns, env!("CARGO_BIN_EXE_factbuoy")])
            .env("FACTBUOY_STATE_DIR", state)
            .env("FACTBUOY_CACHE_DIR", support::cache_dir());
        command
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("ip")
            .args(["-n", &self.cluster_netns, "link", "del", &self.veth])
            .output();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .output();
    }
}

/// What the test made in the cluster, removed when dropped: the hub's namespace and volume.
struct Hub<'a> {
    cluster: &'a Cluster,
    volume: std::path::PathBuf,
}

impl Drop for Hub<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let logs = self
                .cluster
                .command(self.cluster.kube_bin().join("kubectl"))
                .args([
                    "-n",
                    NAMESPACE,
                    "logs",
                    "deploy/factbuoy-fleet",
                    "--all-containers",
                ])
                .output();
            if let Ok(logs) = logs {
                eprintln!("the hub's log:\n{}", String::from_utf8_lossy(&logs.stdout));
            }
        }
        let _ = self
            .cluster
            .command(self.cluster.kube_bin().join("kubectl"))
            .args([
                "delete",
                "namespace",
                NAMESPACE,
                "--wait=true",
                "--timeout=60s",
            ])
            .output();
        let _ = self
            .cluster
            .command(self.cluster.kube_bin().join("kubectl"))
            .args(["delete", "persistentvolume", STORAGE_CLASS])
            .output();
        let _ = std::fs::remove_dir_all(&self.volume);
    }
}

/// A volume for the hub's claim: a directory every node sees (the nodes share the host's file
/// systems), owned by the hub's user, as a storage provisioner would make one.
fn volume<'a>(cluster: &'a Cluster, work: &Path) -> Hub<'a> {
    let volume = cluster.dir().join("hub-volume");
    let _ = std::fs::remove_dir_all(&volume);
    std::fs::create_dir_all(&volume).unwrap();
    std::os::unix::fs::chown(&volume, Some(65532), Some(65532)).unwrap();
    let manifest = work.join("volume.json");
    std::fs::write(
        &manifest,
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": STORAGE_CLASS},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": STORAGE_CLASS,
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": volume, "type": "Directory"},
            },
        })
        .to_string(),
    )
    .unwrap();
    cluster.kubectl(["apply", "-f", manifest.to_str().unwrap()]);
    Hub { cluster, volume }
}

/// `kubectl exec` of `factbuoy ARGS` in the hub's pod: its output.
fn in_the_hub(cluster: &Cluster, args: &[&str]) -> Output {
    cluster
        .command(cluster.kube_bin().join("kubectl"))
        .args([
            "-n",
            NAMESPACE,
            "exec",
            "deploy/factbuoy-fleet",
            "--",
            "factbuoy",
        ])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_machine_outside_the_cluster_joins_the_hub_through_its_node_port_and_a_run_survives_the_hub_pod_deleted_mid_run()
 {
    let cluster = cluster();
    let image = cluster.factbuoy_image();
    let work = tempfile::tempdir().unwrap();
    let operator = work.path().join("operator");
    let _hub = volume(cluster, work.path());

    // The operator's machine (the cluster's network namespace) applies the hub.
    let applied = factbuoy(cluster, &operator)
        .args([
            "fleet",
            "gen",
            "--apply",
            "-o",
            "json",
            "--name",
            "10.200.0.11",
        ])
        .args(["--image", image, "--image-pull-policy", "Never"])
        .args(["--storage-class", STORAGE_CLASS, "--wait", "3m"])
        .output()
        .unwrap();
    let applied = json_of(&applied, "fleet gen --apply");
    assert_eq!(applied["address"], ADDRESS, "{applied:#}");
    // What it prints for GitOps is what it applied: the API server takes it as it stands.
    let printed = factbuoy(cluster, &operator)
        .args(["fleet", "gen", "--name", "10.200.0.11"])
        .args(["--image", image, "--image-pull-policy", "Never"])
        .args(["--storage-class", STORAGE_CLASS])
        .output()
        .unwrap();
    assert!(
        printed.status.success(),
        "{}",
        String::from_utf8_lossy(&printed.stderr)
    );
    let yaml = work.path().join("hub.yaml");
    std::fs::write(&yaml, &printed.stdout).unwrap();
    let dry_run = cluster.kubectl(["apply", "--dry-run=server", "-f", yaml.to_str().unwrap()]);
    for object in [
        "namespace/",
        "serviceaccount/",
        "persistentvolumeclaim/",
        "deployment.apps/",
        "service/",
    ] {
        assert!(
            dry_run.contains(&format!("{object}factbuoy-fleet")),
            "{dry_run}"
        );
    }

    // Its credentials and a join token, from the pod, as the printed next steps say.
    let exported = in_the_hub(cluster, &["fleet", "credentials", "export"]);
    assert!(
        exported.status.success(),
        "{}",
        String::from_utf8_lossy(&exported.stderr)
    );
    let credentials = work.path().join("fleet-operator");
    let import = factbuoy(cluster, &operator)
        .args(["fleet", "credentials", "import"])
        .arg(&credentials)
        .output_with_stdin(&exported.stdout);
    assert!(
        import.status.success(),
        "{}",
        String::from_utf8_lossy(&import.stderr)
    );
    let token = json_of(
        &in_the_hub(
            cluster,
            &["fleet", "token", "create", "--uses", "1", "-o", "json"],
        ),
        "fleet token create in the pod",
    );

    // The machine outside joins through the node port, and serves.
    let mut outside = Outside::new(cluster);
    let agent_state = work.path().join("agent");
    let joined = outside
        .factbuoy(&agent_state)
        .args([
            "agent",
            "join",
            ADDRESS,
            "--token-file",
            "-",
            "--node",
            "outside-1",
        ])
        .args(["--ca-pin", token["ca_pin"].as_str().unwrap(), "--state-dir"])
        .arg(&agent_state)
        .output_with_stdin(token["token"].as_str().unwrap().as_bytes());
    assert!(
        joined.status.success(),
        "agent join through the node port: {}",
        String::from_utf8_lossy(&joined.stderr)
    );
    let agent_log = std::fs::File::create(work.path().join("agent.log")).unwrap();
    outside.children.push(
        outside
            .factbuoy(&agent_state)
            .args(["agent", "serve", "--state-dir"])
            .arg(&agent_state)
            .stdout(Stdio::null())
            .stderr(agent_log)
            .spawn()
            .unwrap(),
    );

    // A run from the operator's machine: host facts of the machine outside.
    let fleet_run = |out: &Path, plugins: &[&str]| {
        factbuoy(cluster, &operator)
            .args([
                "run",
                "-o",
                "json",
                "--fleet",
                ADDRESS,
                "--fleet-credentials",
            ])
            .arg(&credentials)
            .args(plugins)
            .arg("--out")
            .arg(out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let out = work.path().join("out-1");
    let first = fleet_run(&out, &["--plugin", "host-facts"])
        .wait_with_output()
        .unwrap();
    let status = json_of(&first, "run --fleet through the hub");
    let facts = pair(&status, "host-facts", "outside-1");
    assert_eq!(facts["status"], "complete", "{status:#}");
    assert_eq!(facts["result_status"], "passed", "{status:#}");
    assert!(
        kube_runs::bundle_in(&out).is_some(),
        "no bundle in {}",
        out.display()
    );

    // A slow run (a plugin from a file, stored by the hub on its volume); the hub's pod is
    // deleted while the plugin reports progress.
    let hostile = support::fixture("hostile");
    let out = work.path().join("out-2");
    let second = fleet_run(
        &out,
        &[
            "--plugin",
            hostile.to_str().unwrap(),
            "-p",
            "hostile:mode=progress",
            "-p",
            "hostile:count=60",
            "--plugin",
            "host-facts",
        ],
    );
    poll(
        Duration::from_secs(120),
        "the slow plugin reporting progress",
        || {
            let status = factbuoy(cluster, &operator)
                .args(["status", "-o", "json"])
                .output()
                .ok()?;
            let status: Value = serde_json::from_slice(&status.stdout).ok()?;
            (status["plugins"].as_array()?.iter())
                .any(|p| p["plugin"] == "hostile" && p["status"] == "running")
                .then_some(())
        },
    );
    let hub_pod = || {
        cluster.kubectl([
            "-n",
            NAMESPACE,
            "get",
            "pods",
            "-o",
            "jsonpath={.items[0].metadata.name}",
        ])
    };
    let old_pod = hub_pod();
    cluster.kubectl(["-n", NAMESPACE, "delete", "pod", &old_pod, "--wait=false"]);
    let second = second.wait_with_output().unwrap();
    let status = json_of(&second, "run --fleet across the hub pod's deletion");
    let new_pod = hub_pod();
    assert_ne!(new_pod, old_pod, "the hub's pod was not replaced");
    // The new pod took the run over from the volume, rather than the old one finishing it.
    let new_log = cluster.kubectl(["-n", NAMESPACE, "logs", &new_pod]);
    assert!(
        new_log.contains("serving an unfinished run again"),
        "the new pod did not serve the run again:\n{new_log}"
    );
    for plugin in ["hostile", "host-facts"] {
        let result = pair(&status, plugin, "outside-1");
        assert_eq!(result["status"], "complete", "{plugin}: {status:#}");
        assert_eq!(result["result_status"], "passed", "{plugin}: {status:#}");
    }
    let bundle = kube_runs::bundle_in(&out).expect("the second run's bundle");
    assert!(
        bundle
            .files
            .keys()
            .any(|f| f.contains("outside-1") && f.contains("hostile")),
        "the hostile plugin's result is not in the bundle: {:?}",
        bundle.files.keys()
    );
}

/// Writes stdin, then waits for the output.
trait OutputWithStdin {
    fn output_with_stdin(&mut self, input: &[u8]) -> Output;
}

impl OutputWithStdin for Command {
    fn output_with_stdin(&mut self, input: &[u8]) -> Output {
        let mut child = self
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    }
}

//! The fleet hub inside the cluster (`factbuoy fleet gen --apply`): a machine outside the
//! cluster, in a network namespace of its own plugged into the cluster's network, joins it
//! through the NodePort Service and takes part in runs an operator starts from another machine;
//! the hub's pod deleted in the middle of a run, the run completes once the new pod serves,
//! with nothing lost. A second hub, behind a LoadBalancer Service, is joined and run through
//! its load balancer's address.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use factbuoy_dispatch::ClusterRef;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

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

/// The hub behind a load balancer: its namespace and volume.
const LB_NAMESPACE: &str = "factbuoy-fleet-lb";
const LB_STORAGE_CLASS: &str = "factbuoy-hub-lb-test";
/// The address the test, as the cloud's load balancer, gives the Service, and the node it
/// routes that address to.
const LB_IP: &str = "10.200.0.250";
const LB_NODE_IP: &str = "10.200.0.12";
/// Where machines dial it: the fleet's port with --service load-balancer.
const LB_ADDRESS: &str = "10.200.0.250:7443";
/// The machine outside that joins it.
const LB_OUTSIDE_IP: &str = "10.200.0.201";

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
    /// Routes the test added in the cluster's namespace for this machine (their addresses).
    cluster_routes: Vec<String>,
    children: Vec<Child>,
}

impl Outside {
    /// A machine at `ip` on the cluster's network; `tag` names its links apart from another's.
    fn new(cluster: &Cluster, ip: &str, tag: char) -> Outside {
        let netns = format!("fbhub{tag}-{}", std::process::id());
        let veth = format!("vhub{tag}{}", std::process::id() % 100_000);
        let outside = Outside {
            netns,
            veth,
            cluster_netns: cluster.netns().to_owned(),
            cluster_routes: Vec::new(),
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
            vec!["-n", ns, "addr", "add", &format!("{ip}/24"), "dev", "eth0"],
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
        for route in &self.cluster_routes {
            let _ = Command::new("ip")
                .args(["-n", &self.cluster_netns, "route", "del", route])
                .output();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .output();
    }
}

/// What a test made in the cluster, removed when dropped: a hub's namespace and volume (a
/// PersistentVolume named as its storage class).
struct Hub<'a> {
    cluster: &'a Cluster,
    namespace: &'static str,
    class: &'static str,
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
                    self.namespace,
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
                self.namespace,
                "--wait=true",
                "--timeout=60s",
            ])
            .output();
        let _ = self
            .cluster
            .command(self.cluster.kube_bin().join("kubectl"))
            .args(["delete", "persistentvolume", self.class])
            .output();
        let _ = std::fs::remove_dir_all(&self.volume);
    }
}

/// A volume for the claim of a hub in `namespace`, of storage class `class`: a directory every
/// node sees (the nodes share the host's file systems), owned by the hub's user, as a storage
/// provisioner would make one.
fn volume<'a>(
    cluster: &'a Cluster,
    work: &Path,
    namespace: &'static str,
    class: &'static str,
) -> Hub<'a> {
    let volume = cluster.dir().join(class);
    let _ = std::fs::remove_dir_all(&volume);
    std::fs::create_dir_all(&volume).unwrap();
    std::os::unix::fs::chown(&volume, Some(65532), Some(65532)).unwrap();
    let manifest = work.join(format!("{class}.json"));
    std::fs::write(
        &manifest,
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": class},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": class,
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": volume, "type": "Directory"},
            },
        })
        .to_string(),
    )
    .unwrap();
    cluster.kubectl(["apply", "-f", manifest.to_str().unwrap()]);
    Hub {
        cluster,
        namespace,
        class,
        volume,
    }
}

/// `kubectl exec` of `factbuoy ARGS` in the pod of the hub in `namespace`: its output.
fn in_the_hub(cluster: &Cluster, namespace: &str, args: &[&str]) -> Output {
    cluster
        .command(cluster.kube_bin().join("kubectl"))
        .args([
            "-n",
            namespace,
            "exec",
            "deploy/factbuoy-fleet",
            "--",
            "factbuoy",
        ])
        .args(args)
        .output()
        .unwrap()
}

/// `fleet gen --apply` of a hub with `args` (its name, Service and namespace) and the test
/// cluster's image: what it printed, and what it said on its standard error.
fn apply_hub(cluster: &Cluster, operator: &Path, args: &[&str]) -> (Value, String) {
    let applied = factbuoy(cluster, operator)
        .args(["fleet", "gen", "--apply", "-o", "json"])
        .args(args)
        .args([
            "--image",
            cluster.factbuoy_image(),
            "--image-pull-policy",
            "Never",
        ])
        .args(["--wait", "3m"])
        .output()
        .unwrap();
    (
        json_of(&applied, "fleet gen --apply"),
        String::from_utf8_lossy(&applied.stderr).into_owned(),
    )
}

/// A hub's operator and a machine outside joined to it, its agent serving.
struct Enrolled {
    /// Kept for the test's length: dropping it removes the machine.
    _outside: Outside,
    operator: std::path::PathBuf,
    credentials: std::path::PathBuf,
    address: &'static str,
}

impl Enrolled {
    /// Fetches the hub's credentials and a join token from its pod in `namespace`, as the
    /// printed next steps say, imports the credentials on the operator's machine, and joins
    /// the machine `outside` through `address` as node `outside-1`.
    fn new(
        cluster: &Cluster,
        work: &Path,
        namespace: &str,
        address: &'static str,
        outside: Outside,
    ) -> Enrolled {
        let operator = work.join("operator");
        let exported = in_the_hub(cluster, namespace, &["fleet", "credentials", "export"]);
        assert!(
            exported.status.success(),
            "{}",
            String::from_utf8_lossy(&exported.stderr)
        );
        let credentials = work.join("fleet-operator");
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
                namespace,
                &["fleet", "token", "create", "--uses", "1", "-o", "json"],
            ),
            "fleet token create in the pod",
        );

        let mut outside = outside;
        let agent_state = work.join("agent");
        let joined = outside
            .factbuoy(&agent_state)
            .args([
                "agent",
                "join",
                address,
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
            "agent join through {address}: {}",
            String::from_utf8_lossy(&joined.stderr)
        );
        let agent_log = std::fs::File::create(work.join("agent.log")).unwrap();
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
        Enrolled {
            _outside: outside,
            operator,
            credentials,
            address,
        }
    }

    /// `run --fleet` of `plugins` from the operator's machine, its bundle in `out`: started.
    fn run(&self, cluster: &Cluster, out: &Path, plugins: &[&str]) -> Child {
        factbuoy(cluster, &self.operator)
            .args(["run", "-o", "json", "--fleet", self.address])
            .arg("--fleet-credentials")
            .arg(&self.credentials)
            .args(plugins)
            .arg("--out")
            .arg(out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// A `run --fleet` of host facts, which must give the machine outside's, complete.
    fn run_host_facts(&self, cluster: &Cluster, out: &Path) {
        let ran = self
            .run(cluster, out, &["--plugin", "host-facts"])
            .wait_with_output()
            .unwrap();
        let status = json_of(&ran, "run --fleet through the hub");
        let facts = pair(&status, "host-facts", "outside-1");
        assert_eq!(facts["status"], "complete", "{status:#}");
        assert_eq!(facts["result_status"], "passed", "{status:#}");
        let bundle = kube_runs::bundle_in(out).expect("the run's bundle");
        assert!(
            bundle
                .files
                .keys()
                .any(|f| f.contains("outside-1") && f.contains("host-facts")),
            "the machine outside's facts are not in the bundle: {:?}",
            bundle.files.keys()
        );
    }
}

#[test]
fn a_machine_outside_the_cluster_joins_the_hub_through_its_node_port_and_a_run_survives_the_hub_pod_deleted_mid_run()
 {
    let cluster = cluster();
    let work = tempfile::tempdir().unwrap();
    let _hub = volume(cluster, work.path(), NAMESPACE, STORAGE_CLASS);

    // The operator's machine (the cluster's network namespace) applies the hub.
    let operator = work.path().join("operator");
    let (applied, _) = apply_hub(
        cluster,
        &operator,
        &["--name", "10.200.0.11", "--storage-class", STORAGE_CLASS],
    );
    assert_eq!(applied["address"], ADDRESS, "{applied:#}");
    // What it prints for GitOps is what it applied: the API server takes it as it stands.
    let printed = factbuoy(cluster, &operator)
        .args(["fleet", "gen", "--name", "10.200.0.11"])
        .args([
            "--image",
            cluster.factbuoy_image(),
            "--image-pull-policy",
            "Never",
        ])
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

    // The machine outside joins through the node port, and serves; a run from the operator's
    // machine gets its host facts.
    let outside = Outside::new(cluster, OUTSIDE_IP, 'n');
    let enrolled = Enrolled::new(cluster, work.path(), NAMESPACE, ADDRESS, outside);
    enrolled.run_host_facts(cluster, &work.path().join("out-1"));

    // A slow run (a plugin from a file, stored by the hub on its volume); the hub's pod is
    // deleted while the plugin reports progress.
    let hostile = support::fixture("hostile");
    let out = work.path().join("out-2");
    let second = enrolled.run(
        cluster,
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
            let status = factbuoy(cluster, &enrolled.operator)
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

/// The cluster has no load balancer controller, so the test is one: it writes the address it
/// gives the Service into the Service's status, as a cloud's controller or MetalLB does, and
/// routes that address to a node from the machines that dial it, as MetalLB's BGP mode
/// announces it. kube-proxy on that node then forwards the address's ports to the hub's pod,
/// as it does behind any load balancer.
fn load_balance(cluster: &Cluster, namespace: &str, outside: &mut Outside) {
    cluster.block_on(|| async {
        let target = ClusterRef {
            kubeconfig: Some(cluster.kubeconfig()),
            context: None,
        };
        let client = factbuoy_dispatch::connect(&target).await.unwrap().client;
        let services: Api<Service> = Api::namespaced(client, namespace);
        let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": LB_IP}]}}});
        services
            .patch_status(
                "factbuoy-fleet",
                &PatchParams::default(),
                &Patch::Merge(&status),
            )
            .await
            .expect("setting the load balancer's address");
    });
    outside.cluster_routes.push(LB_IP.to_owned());
    for netns in [outside.cluster_netns.as_str(), outside.netns.as_str()] {
        let routed = Command::new("ip")
            .args(["-n", netns, "route", "replace", LB_IP, "via", LB_NODE_IP])
            .output()
            .unwrap();
        assert!(
            routed.status.success(),
            "routing {LB_IP} in {netns}: {}",
            String::from_utf8_lossy(&routed.stderr)
        );
    }
}

#[test]
fn a_machine_outside_the_cluster_joins_the_hub_through_its_load_balancer_and_takes_part_in_a_run() {
    let cluster = cluster();
    let work = tempfile::tempdir().unwrap();
    let _hub = volume(cluster, work.path(), LB_NAMESPACE, LB_STORAGE_CLASS);
    // This time in a namespace of the operator's own.
    cluster.kubectl(["create", "namespace", LB_NAMESPACE]);
    let operator = work.path().join("operator");
    let args = [
        "-n",
        LB_NAMESPACE,
        "--service",
        "load-balancer",
        "--name",
        LB_IP,
        "--storage-class",
        LB_STORAGE_CLASS,
    ];
    let (applied, said) = apply_hub(cluster, &operator, &args);
    assert_eq!(applied["address"], LB_ADDRESS, "{applied:#}");
    // No load balancer has given it an address yet, and it says so.
    assert_eq!(applied["load_balancer"], json!([]), "{applied:#}");
    assert!(said.contains("no address yet"), "{said}");
    let ports = cluster.kubectl([
        "-n",
        LB_NAMESPACE,
        "get",
        "service",
        "factbuoy-fleet",
        "-o",
        "jsonpath={.spec.type} {.spec.ports[*].port}",
    ]);
    let want: Vec<String> = (7443..=7459).map(|port: u16| port.to_string()).collect();
    assert_eq!(ports, format!("LoadBalancer {}", want.join(" ")));

    let mut outside = Outside::new(cluster, LB_OUTSIDE_IP, 'l');
    load_balance(cluster, LB_NAMESPACE, &mut outside);
    // Applied again, it names the address the load balancer gave, which is among --name.
    let (applied, said) = apply_hub(cluster, &operator, &args);
    assert_eq!(applied["load_balancer"], json!([LB_IP]), "{applied:#}");
    assert!(!said.contains("load balancer"), "{said}");
    let enrolled = Enrolled::new(cluster, work.path(), LB_NAMESPACE, LB_ADDRESS, outside);
    // The run's own ports (7444 on) are the load balancer's too.
    enrolled.run_host_facts(cluster, &work.path().join("out"));
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

//! Nodes that come and go during a `factbuoy run --kubernetes`, on a real cluster of its own
//! (tests/kube/: v1.20.2, real kubelets): a node whose kubelet stops is reported lost and the
//! run completes without it; a node that joins mid-run is collected too.

use std::time::Duration;

use crate::support::kube::Cluster;
use crate::support::kube_runs::{self, pair};

#[test]
fn a_node_that_stops_is_reported_lost_and_one_that_joins_is_collected() {
    let cluster = &Cluster::start("nodes", 3);
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = kube_runs::start_run(
        cluster,
        state.path(),
        out.path(),
        &["--plugin", "host-facts"],
    );
    let run_id = kube_runs::run_id_in(state.path());
    let namespace = format!("factbuoy-{run_id}");

    // Stop a node the aggregator does not run on, as soon as it is placed: before the agents
    // can start (they wait for the CA the aggregator publishes once it runs).
    let aggregator_node = kube_runs::poll(
        Duration::from_secs(60),
        "scheduling the aggregator pod",
        || {
            cluster
                .command("kubectl")
                .args(["-n", &namespace, "get", "pod", "factbuoy-aggregator"])
                .args(["-o", "jsonpath={.spec.nodeName}"])
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
                .filter(|n| !n.is_empty())
        },
    );
    let stopped = ["node-1", "node-2", "node-3"]
        .into_iter()
        .find(|n| *n != aggregator_node)
        .unwrap();
    let number = stopped.strip_prefix("node-").unwrap();
    let stop = cluster.script(["node-stop", number]);
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    // While the run waits for the stopped node, a fourth joins.
    let add = cluster.script(["node-add", "4"]);
    assert!(
        add.status.success(),
        "{}",
        String::from_utf8_lossy(&add.stderr)
    );

    let bundle = kube_runs::finish_run(run, out.path());
    let status = bundle.status();
    let lost = pair(&status, "host-facts", stopped);
    assert_eq!(lost["status"], "lost", "{status:#}");
    let error = bundle.json(&format!("plugins/host-facts/errors/{stopped}/error.json"));
    assert!(error.to_string().contains("not Ready"), "{error}");
    for node in ["node-1", "node-2", "node-3", "node-4"] {
        if node != stopped {
            assert_eq!(
                pair(&status, "host-facts", node)["status"],
                "complete",
                "{node}: {status:#}"
            );
            bundle.json(&format!(
                "plugins/host-facts/results/{node}/host-facts.json"
            ));
        }
    }
}

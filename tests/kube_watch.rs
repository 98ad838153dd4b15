//! The dispatcher's watches and agent admission on a real cluster (tests/kube/: v1.20.2, real
//! kubelets): nodes expected, skipped, lost and gone as the cluster changes; agent pods'
//! problems classified from their real statuses; agents' ServiceAccount tokens naming their
//! node and nothing else.
//!
//! The tests share one cluster and run in parallel: only the node test changes nodes (it taints
//! node-1 with a key of its own, stops and deletes node-3, adds node-4); the others place their
//! pods on node-1 and node-2 and tolerate every taint.

mod support;

use std::time::Duration;

use factbuoy_dispatch::Target;
use factbuoy_dispatch::nodes::{NodeChange, NodeFilter, follow_nodes};
use k8s_openapi::api::core::v1::Toleration;
use support::kube::Cluster;
use tokio::sync::mpsc;

fn cluster() -> &'static Cluster {
    Cluster::shared("watch", 3)
}

async fn client(cluster: &Cluster) -> kube::Client {
    let target = Target {
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
    cluster.block_on(|| async {
        let client = client(cluster).await;
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
}

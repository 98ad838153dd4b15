//! A run whose nodes change while it serves (docs/protocol.md, Lifecycle): the aggregator in
//! this process, changed through its `NodeSet` as a dispatcher would; real loopback TLS, the
//! real agent binary.

use crate::support;

use std::time::{Duration, Instant};

use crate::support::aggregator::{curl, manifest};
use crate::support::served::{
    agent, assert_success, bundle_files, create, error_of, issue, node, pair_status, serve,
    wait_for,
};
use factbuoy_aggregator::NodeSetError;
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::types::RunStatus;

const WITHIN: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread")]
async fn a_node_added_mid_run_is_waited_for_and_its_result_lands() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &[], true, &[]);
    let running = serve(&run_dir).await;
    let nodes = running.nodes();
    nodes.expect(&node("a")).await.unwrap();
    nodes.expect(&node("a")).await.unwrap(); // idempotent
    nodes.settled().await.unwrap();
    let a = issue(&run_dir, &Role::Agent { node: node("a") });
    assert_success(&agent(&running, "a", &a).await);
    wait_for(&running, RunStatus::Complete, WITHIN).await;

    // Same again, with b joining after a delivered but before the run could end.
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &["a"], true, &[]);
    let running = serve(&run_dir).await;
    let nodes = running.nodes();
    let a = issue(&run_dir, &Role::Agent { node: node("a") });
    let b = issue(&run_dir, &Role::Agent { node: node("b") });
    nodes.expect(&node("b")).await.unwrap();
    nodes.settled().await.unwrap();
    assert_success(&agent(&running, "a", &a).await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let document = running.status_document();
    assert_eq!(document.status, RunStatus::Running, "{document:?}");
    assert_eq!(
        pair_status(&document, "hello", "b").as_deref(),
        Some("pending")
    );
    assert_success(&agent(&running, "b", &b).await);
    wait_for(&running, RunStatus::Complete, WITHIN).await;
    let files = bundle_files(&running);
    for expected in [
        "plugins/hello/results/a/greeting.json",
        "plugins/hello/results/b/greeting.json",
    ] {
        assert!(files.contains_key(expected), "{:?}", files.keys());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_skipped_node_is_not_waited_for_and_the_bundle_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &[], true, &[]);
    let running = serve(&run_dir).await;
    let nodes = running.nodes();
    nodes.expect(&node("a")).await.unwrap();
    nodes.expect(&node("b")).await.unwrap();
    nodes
        .skip(
            &node("b"),
            "taint dedicated=gpu:NoSchedule is not tolerated",
        )
        .await
        .unwrap();
    // Never expected: it shows as skipped all the same.
    nodes
        .skip(&node("c"), "does not match the node selector")
        .await
        .unwrap();
    // Final: neither expected again nor turned into another stand-in.
    assert!(matches!(
        nodes.expect(&node("b")).await,
        Err(NodeSetError::Final(why)) if why.contains("dedicated=gpu")
    ));
    nodes.gone(&node("b"), "deleted").await.unwrap();

    // b's late result is refused and its file not kept.
    let b = issue(&run_dir, &Role::Agent { node: node("b") });
    let upload = curl(
        &b,
        "PUT",
        &format!(
            "https://{}/api/v1/results/by-node/b/hello/files/greeting.json",
            running.agent_address
        ),
        Some(b"{}"),
        &[format!(
            "content-digest: {}",
            support::aggregator::content_digest(b"{}")
        )],
    );
    assert_eq!(upload.status, 409, "{}", upload.text());
    assert!(upload.text().contains("skipped"), "{}", upload.text());
    let commit = curl(
        &b,
        "PUT",
        &format!(
            "https://{}/api/v1/results/by-node/b/hello",
            running.agent_address
        ),
        Some(&manifest("succeeded", &[])),
        &[],
    );
    assert_eq!(commit.status, 409, "{}", commit.text());
    assert!(!run_dir.staging().join("hello/b").exists());
    // Its agent gets an empty plan and runs nothing.
    let output = agent(&running, "b", &b).await;
    assert_success(&output);

    nodes.settled().await.unwrap();
    let a = issue(&run_dir, &Role::Agent { node: node("a") });
    assert_success(&agent(&running, "a", &a).await);
    let document = wait_for(&running, RunStatus::Complete, WITHIN).await;
    assert_eq!(
        pair_status(&document, "hello", "a").as_deref(),
        Some("complete")
    );
    assert_eq!(
        pair_status(&document, "hello", "b").as_deref(),
        Some("skipped")
    );
    assert_eq!(
        pair_status(&document, "hello", "c").as_deref(),
        Some("skipped")
    );
    let files = bundle_files(&running);
    let why = error_of(&files, "plugins/hello/errors/b/error.json");
    assert!(
        why.contains("skipped") && why.contains("dedicated=gpu:NoSchedule"),
        "{why}"
    );
    let why = error_of(&files, "plugins/hello/errors/c/error.json");
    assert!(why.contains("node selector"), "{why}");
    let metrics = running.metrics_text();
    assert!(
        metrics.contains("factbuoy_aggregator_nodes{state=\"skipped\"} 2\n"),
        "{metrics}"
    );
    assert!(files.contains_key("plugins/hello/results/a/greeting.json"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_gone_node_gets_a_lost_result_with_the_reason_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // The heartbeat window is long: only gone() can end this run in time.
    let run_dir = create(dir.path(), &["a", "b"], true, &["--lost-after", "1h"]);
    let running = serve(&run_dir).await;
    let nodes = running.nodes();
    nodes.settled().await.unwrap();
    let a = issue(&run_dir, &Role::Agent { node: node("a") });
    assert_success(&agent(&running, "a", &a).await);
    let started = Instant::now();
    nodes
        .gone(&node("b"), "the Node object was deleted")
        .await
        .unwrap();
    let document = wait_for(&running, RunStatus::Complete, Duration::from_secs(10)).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        pair_status(&document, "hello", "b").as_deref(),
        Some("lost")
    );
    let why = error_of(&bundle_files(&running), "plugins/hello/errors/b/error.json");
    assert!(why.contains("the Node object was deleted"), "{why}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_agent_gets_an_error_result_with_the_message() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &["a"], true, &[]);
    let running = serve(&run_dir).await;
    let nodes = running.nodes();
    nodes.settled().await.unwrap();
    let hostile = format!(
        "image factbuoy:1 could not be pulled\u{1b}[2J; import it on the node{}",
        "x".repeat(5000)
    );
    nodes.fail(&node("a"), &hostile).await.unwrap();
    let document = wait_for(&running, RunStatus::Complete, Duration::from_secs(10)).await;
    assert_eq!(
        pair_status(&document, "hello", "a").as_deref(),
        Some("agent-failed")
    );
    let why = error_of(&bundle_files(&running), "plugins/hello/errors/a/error.json");
    assert!(
        why.contains("could not be pulled\\u{1b}[2J; import it"),
        "{why}"
    );
    assert!(!why.contains('\u{1b}'));
    assert!(why.len() < 1200 && why.ends_with('…'), "{}", why.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dynamic_run_does_not_complete_before_its_nodes_are_settled() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &[], true, &[]);
    let running = serve(&run_dir).await;
    // Nothing expected yet: without the rule, this run would be complete at once.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(running.status_document().status, RunStatus::Running);
    running.nodes().expect(&node("a")).await.unwrap();
    let a = issue(&run_dir, &Role::Agent { node: node("a") });
    assert_success(&agent(&running, "a", &a).await);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(running.status_document().status, RunStatus::Running);
    running.nodes().settled().await.unwrap();
    wait_for(&running, RunStatus::Complete, Duration::from_secs(10)).await;
    assert!(matches!(
        running.nodes().expect(&node("b")).await,
        Err(NodeSetError::Ended(_))
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_aggregator_keeps_the_dynamic_node_set() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &[], true, &[]);
    let running = serve(&run_dir).await;
    let nodes = running.nodes();
    nodes.expect(&node("a")).await.unwrap();
    nodes.expect(&node("b")).await.unwrap();
    nodes.skip(&node("c"), "untolerated taint").await.unwrap();
    nodes.settled().await.unwrap();
    let a = issue(&run_dir, &Role::Agent { node: node("a") });
    assert_success(&agent(&running, "a", &a).await);
    drop(running);

    let running = serve(&run_dir).await;
    let document = running.status_document();
    assert_eq!(document.status, RunStatus::Running, "{document:?}");
    assert_eq!(
        pair_status(&document, "hello", "a").as_deref(),
        Some("complete")
    );
    assert_eq!(
        pair_status(&document, "hello", "b").as_deref(),
        Some("pending")
    );
    assert_eq!(
        pair_status(&document, "hello", "c").as_deref(),
        Some("skipped")
    );
    assert!(matches!(
        running.nodes().expect(&node("c")).await,
        Err(NodeSetError::Final(_))
    ));
    // Settled survived too: b's result alone ends the run.
    let b = issue(&run_dir, &Role::Agent { node: node("b") });
    assert_success(&agent(&running, "b", &b).await);
    wait_for(&running, RunStatus::Complete, WITHIN).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_committed_result_survives_a_later_gone() {
    let dir = tempfile::tempdir().unwrap();
    // A fixed run: the node set can still say a node is gone, never add one.
    let run_dir = create(dir.path(), &["a", "b"], false, &[]);
    let running = serve(&run_dir).await;
    let nodes = running.nodes();
    assert!(matches!(
        nodes.expect(&node("z")).await,
        Err(NodeSetError::NotInRun(_))
    ));
    let a = issue(&run_dir, &Role::Agent { node: node("a") });
    assert_success(&agent(&running, "a", &a).await);
    nodes
        .gone(&node("a"), "deleted after delivering")
        .await
        .unwrap();
    nodes.skip(&node("b"), "cordoned").await.unwrap();
    let document = wait_for(&running, RunStatus::Complete, WITHIN).await;
    assert_eq!(
        pair_status(&document, "hello", "a").as_deref(),
        Some("complete")
    );
    let files = bundle_files(&running);
    assert!(files.contains_key("plugins/hello/results/a/greeting.json"));
    assert!(
        !files
            .keys()
            .any(|f| f.starts_with("plugins/hello/errors/a/"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_result_the_failed_agent_still_sends_replaces_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &["a", "b"], true, &[]);
    let running = serve(&run_dir).await;
    let nodes = running.nodes();
    nodes.settled().await.unwrap();
    nodes
        .fail(&node("a"), "the pod crash-loops; see its logs")
        .await
        .unwrap();
    let document = running.status_document();
    assert_eq!(
        pair_status(&document, "hello", "a").as_deref(),
        Some("agent-failed")
    );
    // The pod recovered after all.
    let a = issue(&run_dir, &Role::Agent { node: node("a") });
    assert_success(&agent(&running, "a", &a).await);
    let b = issue(&run_dir, &Role::Agent { node: node("b") });
    assert_success(&agent(&running, "b", &b).await);
    let document = wait_for(&running, RunStatus::Complete, WITHIN).await;
    assert_eq!(
        pair_status(&document, "hello", "a").as_deref(),
        Some("complete")
    );
    let files = bundle_files(&running);
    assert!(files.contains_key("plugins/hello/results/a/greeting.json"));
    assert!(
        !files
            .keys()
            .any(|f| f.starts_with("plugins/hello/errors/a/"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unsettled_dynamic_run_still_ends_at_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &[], true, &["--timeout", "4s"]);
    let running = serve(&run_dir).await;
    running.nodes().expect(&node("a")).await.unwrap();
    let document = wait_for(&running, RunStatus::Complete, Duration::from_secs(20)).await;
    assert_eq!(
        pair_status(&document, "hello", "a").as_deref(),
        Some("timed-out")
    );
}

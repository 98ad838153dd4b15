//! `factbuoy status --web` watching a Kubernetes run on the test cluster: the page, in headless
//! Chromium on the operator's machine (the cluster's network namespace, where the page server
//! reaches the run through the API server's port-forward), fills in as every node's slow plugin
//! reports progress, shows setup's failure at the top while the run goes on, then retrieves the
//! bundle with one click and opens its report, without a script error. tests/all/status_web.rs
//! does the same for a local run, and reads a fleet run's event stream.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

use serde_json::Value;

use crate::cluster;
use crate::support;
use crate::support::kube_runs;

/// A child process killed when the test ends, passed or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_kubernetes_run_shows_live_in_the_page_then_its_bundle_is_retrieved_and_reported() {
    let cluster = cluster();
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let retrieved = tempfile::tempdir().unwrap();
    let hostile = support::fixture("hostile");
    let run = kube_runs::start_run(
        cluster,
        state.path(),
        out.path(),
        &[
            "--plugin",
            hostile.to_str().unwrap(),
            "-p",
            "hostile:mode=progress",
            "-p",
            "hostile:count=40",
            "--plugin",
            "setup",
            "-p",
            "setup:gather_subset=bogus",
        ],
    );
    let run_id = kube_runs::run_id_in(state.path());

    let mut server = kube_runs::factbuoy(cluster, state.path())
        .args(["status", "--web", &run_id, "--out"])
        .arg(retrieved.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let _server = Killed(server);

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/all/status-browser.mjs");
    let shot = state.path().join("kubernetes-live.png");
    let browsed = cluster
        .command("node")
        .arg("--experimental-websocket")
        .arg(&script)
        .arg(url.trim())
        .arg(&shot)
        .output()
        .unwrap();
    assert!(
        browsed.status.success(),
        "{}",
        String::from_utf8_lossy(&browsed.stderr)
    );
    let seen: Value = serde_json::from_slice(&browsed.stdout).unwrap();

    assert_eq!(seen["errors"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["path"], format!("/runs/{run_id}"), "{seen}");
    // Live, in the one document it loaded.
    assert_eq!(seen["same_document"], true, "{seen}");
    let percents: Vec<u64> = seen["percents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert!(
        percents.len() >= 2 && percents[0] < *percents.last().unwrap(),
        "{seen}"
    );
    assert!(
        seen["progress_texts"].as_array().unwrap().len() >= 2,
        "{seen}"
    );
    // setup's failure on a node, at the top, while the run still ran.
    assert_eq!(seen["failure_while_running"]["status"], "running", "{seen}");
    let failure = seen["failure_while_running"]["text"].as_str().unwrap();
    assert!(
        failure.contains("Bad subset 'bogus'") && failure.contains("setup on node-"),
        "{seen}"
    );
    assert_eq!(seen["first_section"], "failures", "{seen}");
    // At its end: retrieved through the port-forward with one click, and its report opened.
    assert_eq!(seen["final_status"], "complete", "{seen}");
    let said = seen["retrieved"]["text"].as_str().unwrap_or_default();
    assert!(said.starts_with("retrieved to "), "{seen}");
    assert_eq!(
        seen["report"]["title"],
        format!("factbuoy report: run {run_id}"),
        "{seen}"
    );
    let report = seen["report"]["text"].as_str().unwrap();
    assert!(
        ["node-1", "node-2", "node-3"]
            .iter()
            .all(|n| report.contains(n)),
        "{seen}"
    );
    let bundles: Vec<_> = std::fs::read_dir(retrieved.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        bundles.len() == 1 && bundles[0].ends_with(&format!("_factbuoy_{run_id}.tar.gz")),
        "{bundles:?}"
    );
    kube_runs::finish_run(run, out.path());
}

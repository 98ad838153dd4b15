//! What headless Chromium saw of `factbuoy status --web`'s page (tests/all/status-browser.mjs),
//! checked alike for a local, a fleet and a Kubernetes run.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs status-browser.mjs with `node` (a command, so that a test may start it in a network
/// namespace) on `url`, in `mode` if any, saving its screenshot to `shot`: what it saw.
pub fn browse(mut node: Command, url: &str, shot: &Path, mode: Option<&str>) -> Value {
    let script = super::workspace().join("tests/all/status-browser.mjs");
    let output = node
        .arg("--experimental-websocket")
        .arg(&script)
        .arg(url)
        .arg(shot)
        .args(mode)
        .output()
        .expect("running node");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Asserts that the page showed run `run_id` live and then ended it: no script error, one
/// document whose percent grew and whose progress changed, setup's failure on `node` as the first
/// section while the run ran, the run complete, the bundle retrieved with one click, and the
/// report of the run opened from the page.
pub fn assert_live_then_retrieved(seen: &Value, run_id: &str, node: &str) {
    assert_eq!(seen["errors"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["path"], format!("/runs/{run_id}"), "{seen}");
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
    assert_eq!(seen["failure_while_running"]["status"], "running", "{seen}");
    let failure = seen["failure_while_running"]["text"].as_str().unwrap();
    assert!(
        failure.contains("Bad subset 'bogus'") && failure.contains(&format!("setup on {node}")),
        "{seen}"
    );
    assert_eq!(seen["first_section"], "failures", "{seen}");
    assert_eq!(seen["final_status"], "complete", "{seen}");
    let said = seen["retrieved"]["text"].as_str().unwrap_or_default();
    assert!(said.starts_with("retrieved to "), "{seen}");
    assert_eq!(seen["retrieved"]["report_shown"], true, "{seen}");
    assert_eq!(
        seen["report"]["title"],
        format!("factbuoy report: run {run_id}"),
        "{seen}"
    );
    assert_eq!(
        seen["report"]["path"],
        format!("/runs/{run_id}/report"),
        "{seen}"
    );
}

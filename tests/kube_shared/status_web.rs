//! `factbuoy status --web` watching a Kubernetes run on the test cluster: the page, in headless
//! Chromium on the operator's machine (the cluster's network namespace, where the page server
//! reaches the run through the API server's port-forward), fills in as every node's slow plugin
//! reports progress, shows setup's failure at the top while the run goes on, then retrieves the
//! bundle with one click and opens its report, without a script error. tests/all/status_web.rs
//! does the same for a local run, and reads a fleet run's event stream.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use crate::cluster;
use crate::support;
use crate::support::kube_runs;
use crate::support::status_page;

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

    let shot = state.path().join("kubernetes-live.png");
    let seen = status_page::browse(cluster.command("node"), url.trim(), &shot, None);
    status_page::assert_live_then_retrieved(&seen, &run_id, "node-");
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

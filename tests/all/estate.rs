//! A cluster's run and a fleet's run of the same day read together: `inspect report A B`, and
//! `inspect report DIR` and `inspect history DIR` over a directory holding both. Each origin is
//! a group of its own under its name (which cluster, which fleet), and a node named alike in
//! both is shown once per group, never as one machine.
//!
//! The fleet's bundle is a real fleet run's (a loopback fleet of one member, `member-1`). The
//! cluster's is written by the bundle writer from a real run's facts, its `origin` as a
//! Kubernetes run's aggregator records it (the uid of `kube-system`), since these tests run
//! without a cluster; its nodes are `member-1`, named as the fleet's member is, and `worker-2`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

use crate::history::{day, on};
use crate::inspect::{json_of, rendered, text};
use crate::support;
use crate::support::kube_runs::Bundle;
use crate::support::loopback_fleet::LoopbackFleet;

/// The cluster: the uid of its `kube-system` namespace.
const CLUSTER_UID: &str = "3f2b7c1e-9d8a-4b6c-8e0f-1a2b3c4d5e6f";

/// A real fleet run's bundle, made once (the fleet stopped once it is copied out).
fn fleet_bundle() -> &'static Path {
    static BUNDLE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, bundle) = BUNDLE.get_or_init(|| {
        let fleet = LoopbackFleet::start();
        fleet.run(&["--plugin", "hello"]);
        let bundles = fleet.dir().join("bundles");
        let ran = std::fs::read_dir(&bundles)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
            .expect("the fleet run's bundle");
        let kept = tempfile::tempdir().unwrap();
        let bundle = kept.path().join("fleet.tar.gz");
        std::fs::copy(ran, &bundle).unwrap();
        (kept, bundle)
    });
    bundle
}

/// A work folder whose `both/` holds the fleet's bundle and the cluster's of the same day; the
/// paths of both bundles, the cluster's first, and the fleet run's `run.json`.
fn both() -> (tempfile::TempDir, PathBuf, [PathBuf; 2], Value) {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("both");
    std::fs::create_dir(&dir).unwrap();
    let fleet = dir.join("fleet.tar.gz");
    std::fs::copy(fleet_bundle(), &fleet).unwrap();
    let fleet_run = Bundle::read(fleet.clone()).json("meta/run.json");
    let cluster = day(
        &dir,
        fleet_run["created"].as_str().unwrap(),
        "cluster-run",
        &format!("kubernetes:{CLUSTER_UID}"),
        &[
            on("member-1", "6.1.0-18", "3.0.1"),
            on("worker-2", "6.1.0-18", "3.0.1"),
        ],
    );
    (work, dir, [cluster, fleet], fleet_run)
}

/// `factbuoy inspect ARGS` with the history index in `work`, which must succeed.
fn inspect(work: &Path, args: &[&str]) -> std::process::Output {
    let output = support::factbuoy()
        .env("XDG_CACHE_HOME", work.join("cache"))
        .arg("inspect")
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {}",
        text(&output.stderr)
    );
    output
}

/// The labels each origin has: the cluster's, and the fleet's of `fleet_run`.
fn labels(fleet_run: &Value) -> (String, String) {
    let ca = fleet_run["origin"]["id"].as_str().unwrap();
    (
        format!("Kubernetes cluster whose kube-system namespace has uid {CLUSTER_UID}"),
        format!("fleet 127.0.0.1 (CA sha-256 {}…)", &ca[..12]),
    )
}

#[test]
fn report_of_a_clusters_bundle_and_a_fleets_shows_each_as_a_group_under_its_name() {
    let (work, _, [cluster, fleet], fleet_run) = both();
    let (cluster_label, fleet_label) = labels(&fleet_run);
    let page = work.path().join("estate.html");
    let output = inspect(
        work.path(),
        &[
            "report",
            cluster.to_str().unwrap(),
            fleet.to_str().unwrap(),
            "--out",
            page.to_str().unwrap(),
            "-o",
            "json",
        ],
    );
    let answer = json_of(&output);
    let groups: Vec<(&str, &str, u64)> = answer["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["origin"].as_str().unwrap(),
                g["label"].as_str().unwrap(),
                g["nodes"].as_u64().unwrap(),
            )
        })
        .collect();
    let fleet_origin = format!("fleet:{}", fleet_run["origin"]["id"].as_str().unwrap());
    assert_eq!(
        groups,
        [
            (
                format!("kubernetes:{CLUSTER_UID}").as_str(),
                cluster_label.as_str(),
                2
            ),
            (fleet_origin.as_str(), fleet_label.as_str(), 1)
        ],
        "a group per bundle, in the order given"
    );

    let dom = rendered(&[], &format!("file://{}", page.display()));
    let fleet_run_id = fleet_run["run_id"].as_str().unwrap();
    let cluster_part = group(&dom, 0);
    let fleet_part = group(&dom, 1);
    assert!(
        cluster_part.contains(&format!(
            "<h2 id=\"origin-label-g0\">{cluster_label}: run cluster-run</h2>"
        )),
        "{cluster_part:.3000}"
    );
    assert!(
        fleet_part.contains(&format!(
            "<h2 id=\"origin-label-g1\">{fleet_label}: run {fleet_run_id}</h2>"
        )),
        "{fleet_part:.3000}"
    );
    // member-1 of the cluster and member-1 of the fleet: a row each, in its own group.
    let row = |node: &str| format!("<tr class=\"node-row\" data-node=\"{node}\"");
    assert_eq!(cluster_part.matches(&row("member-1")).count(), 1);
    assert_eq!(fleet_part.matches(&row("member-1")).count(), 1);
    assert_eq!(cluster_part.matches(&row("worker-2")).count(), 1);
    assert_eq!(
        fleet_part.matches(&row("worker-2")).count(),
        0,
        "the cluster's nodes are not the fleet's"
    );
    // Above the groups, each is listed by its name.
    let estate = &dom[dom.find("id=\"estate\"").unwrap()..dom.find("id=\"origin-g0\"").unwrap()];
    assert!(
        estate.contains(&format!("{cluster_label} (2 nodes, run cluster-run)"))
            && estate.contains(&format!("{fleet_label} (1 node, run {fleet_run_id})")),
        "{estate}"
    );
}

/// The part of `dom` that is group `g` of the page: from its section to the next's.
fn group(dom: &str, g: usize) -> &str {
    let start = dom
        .find(&format!("<section class=\"origin\" id=\"origin-g{g}\">"))
        .unwrap_or_else(|| panic!("no group {g}"));
    let end = dom[start..]
        .find(&format!("id=\"origin-g{}\"", g + 1))
        .map_or(dom.len(), |at| start + at);
    &dom[start..end]
}

#[test]
fn a_directory_with_a_clusters_runs_and_a_fleets_is_a_history_and_a_report_group_per_origin() {
    let (work, dir, _, fleet_run) = both();
    let (cluster_label, fleet_label) = labels(&fleet_run);
    let d = dir.to_str().unwrap();

    let history = json_of(&inspect(work.path(), &["history", d, "-o", "json"]));
    let origins: Vec<(&str, Vec<&str>, Vec<&str>)> = history["origins"]
        .as_array()
        .expect("a history per origin")
        .iter()
        .map(|o| {
            fn file(bundle: &Value) -> &str {
                let path = bundle["bundle"].as_str().unwrap();
                path.rsplit('/').next().unwrap()
            }
            let bundles = o["bundles"].as_array().unwrap().iter();
            let nodes = o["nodes"].as_array().unwrap().iter();
            (
                o["label"].as_str().unwrap(),
                bundles.map(file).collect(),
                nodes.map(|n| n["node"].as_str().unwrap()).collect(),
            )
        })
        .collect();
    // In the order of their origins (`fleet:` before `kubernetes:`), each of its own run.
    assert_eq!(
        origins,
        [
            (fleet_label.as_str(), vec!["fleet.tar.gz"], vec!["member-1"]),
            (
                cluster_label.as_str(),
                vec!["cluster-run.tar.gz"],
                vec!["member-1", "worker-2"]
            )
        ]
    );
    let table = text(&inspect(work.path(), &["history", d]).stdout);
    assert!(
        table.contains(&format!("== {fleet_label} =="))
            && table.contains(&format!("== {cluster_label} ==")),
        "{table}"
    );
    assert_eq!(table.matches("\nmember-1: in 1 run").count(), 2, "{table}");
    // --origin narrows to one, as before.
    let cluster_only = json_of(&inspect(
        work.path(),
        &["history", d, "--origin", "kubernetes:", "-o", "json"],
    ));
    assert_eq!(cluster_only["label"], cluster_label.as_str());
    assert_eq!(cluster_only["nodes"].as_array().unwrap().len(), 2);

    let page = work.path().join("estate.html");
    let report = json_of(&inspect(
        work.path(),
        &["report", d, "--out", page.to_str().unwrap(), "-o", "json"],
    ));
    let labels: Vec<&str> = report["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, [fleet_label.as_str(), cluster_label.as_str()]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        html.matches("<section class=\"origin\"").count(),
        2,
        "a part of the page per origin"
    );
}

//! A fleet run from its start to what it leaves on disk, with the real binary on loopback
//! (docs/fleet.md): a member revoked in the middle of a run stops, a finished run is retired to
//! its configuration and status beside its bundle, `fleet prune` removes both, and a secret
//! parameter reaches the plugin and nothing else of the fleet, the member or the operator.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::factbuoy;
use crate::support::loopback_fleet::{LoopbackFleet, listing, text};
use crate::support::search::{contains, files_holding};

#[test]
fn a_finished_fleet_run_keeps_only_its_configuration_status_and_bundle_until_pruned() {
    let fleet = LoopbackFleet::start();
    fleet.run(&["--plugin", "hello"]);

    // Retired: no key, commit record or results copy; the bundle in the fleet's bundles/.
    let run = fleet.retired_run();
    assert_eq!(
        listing(&run),
        ["final-status.json", "run.json", "state.json"],
        "the retired run keeps more than its configuration and status"
    );
    let bundles = listing(&fleet.dir().join("bundles"));
    assert_eq!(bundles.len(), 1, "{bundles:?}");
    assert!(bundles[0].ends_with(".tar.gz"), "{bundles:?}");

    // Not old enough: nothing goes.
    let young = fleet.succeed(&["fleet", "prune", "--older-than", "1h", "-o", "json"]);
    let young: Value = serde_json::from_slice(&young.stdout).unwrap();
    assert_eq!(young["removed"], serde_json::json!([]), "{young}");

    // A dry run names the run and its bundle, and removes nothing.
    let dry = fleet.succeed(&[
        "fleet",
        "prune",
        "--older-than",
        "0s",
        "--dry-run",
        "-o",
        "json",
    ]);
    let dry: Value = serde_json::from_slice(&dry.stdout).unwrap();
    let removed = &dry["removed"][0];
    assert_eq!(removed["status"], "complete", "{dry}");
    assert_eq!(removed["run_dir"], run.display().to_string(), "{dry}");
    let bundle = fleet.dir().join("bundles").join(&bundles[0]);
    assert_eq!(removed["bundle"], bundle.display().to_string(), "{dry}");
    assert!(run.exists() && bundle.exists());

    // Pruned: the run's directory and its bundle are gone, and the fleet's own state stays.
    let pruned = fleet.succeed(&["fleet", "prune", "--older-than", "0s"]);
    assert!(
        text(&pruned.stdout).contains(&format!(
            "removed run {}",
            removed["run_id"].as_str().unwrap()
        )),
        "{}",
        text(&pruned.stdout)
    );
    assert_eq!(listing(&fleet.dir().join("runs")), Vec::<String>::new());
    assert_eq!(listing(&fleet.dir().join("bundles")), Vec::<String>::new());
    // The fleet still serves the run for a while: retrieving its bundle says it was pruned.
    let retrieved = fleet
        .operator()
        .args(["retrieve", "--out"])
        .arg(fleet.path("again"))
        .output()
        .unwrap();
    assert!(!retrieved.status.success());
    let said = text(&retrieved.stderr);
    assert!(
        said.contains("`factbuoy fleet prune`") && !said.contains("500"),
        "{said}"
    );
    let nodes = fleet.succeed(&["fleet", "nodes", "-o", "json"]);
    assert!(
        text(&nodes.stdout).contains("member-1"),
        "{}",
        text(&nodes.stdout)
    );
}

#[test]
fn a_finished_run_answers_for_its_period_then_its_listeners_close() {
    let fleet = LoopbackFleet::start_with(&["--serve-finished-for", "3s"]);
    fleet.run(&["--plugin", "hello"]);
    let status = || {
        fleet
            .operator()
            .args(["status", "-o", "json"])
            .output()
            .unwrap()
    };
    let answered = status();
    assert!(answered.status.success(), "{}", text(&answered.stderr));
    // A fleet that starts a run every day must not keep every run it served.
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let asked = status();
        if !asked.status.success() {
            break asked;
        }
        assert!(
            Instant::now() < deadline,
            "the finished run is still served"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    // The operator is told why, and where the bundle is (-o json: an error document on stdout).
    let said = text(&refused.stdout);
    assert!(
        said.contains("--serve-finished-for") && said.contains("bundles/"),
        "{said}"
    );
    let log = std::fs::read_to_string(fleet.path("fleet.log")).unwrap();
    assert!(
        log.contains("stopped serving the finished run"),
        "the fleet's log does not say why"
    );
    // Its bundle stays.
    assert_eq!(listing(&fleet.dir().join("bundles")).len(), 1);
}

#[test]
fn a_secret_parameter_of_a_fleet_run_reaches_the_plugin_and_nothing_else() {
    const SECRET: &str = "fl33t-s3cr3t-Qv8";
    let fleet = LoopbackFleet::start();
    let secret_file = fleet.path("token");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let hostile = crate::support::fixture("hostile");
    let ran = fleet.run(&[
        "--plugin",
        hostile.to_str().unwrap(),
        "-p",
        "hostile:mode=budget-secret",
        "-p",
        &format!("hostile:token=@{}", secret_file.display()),
    ]);
    fleet.retired_run();
    std::fs::remove_file(&secret_file).unwrap();

    // The plugin got it: its artifact holds it reversed, in both copies of the bundle.
    let reversed: String = SECRET.chars().rev().collect();
    for dir in [fleet.path("out"), fleet.dir().join("bundles")] {
        assert!(
            !files_holding(&dir, &reversed).is_empty(),
            "the plugin never saw the secret ({})",
            dir.display()
        );
    }
    // Nowhere else: the fleet's directory (its runs, bundles and stored plugins), the member's
    // state, the operator's state and the bundle it downloaded, the logs at debug level, and
    // what the run printed.
    let written = files_holding(fleet.work.path(), SECRET);
    assert!(written.is_empty(), "the secret is written in {written:?}");
    for output in [&ran.stdout, &ran.stderr] {
        assert!(
            !contains(output, SECRET),
            "the run printed it: {}",
            text(output)
        );
    }
}

/// A plugin from a registry reaches the members as a plugin from a file does: the operator
/// resolves its tag to a digest, pulls it and stores the component in the fleet, so members
/// need no registry credentials; the bundle says which digest ran and where it came from.
#[test]
fn a_fleet_run_of_a_registry_plugin_runs_the_digest_the_operator_resolved() {
    let registry = crate::support::registry::TestRegistry::start();
    let tag = registry.reference("plugins/hello:stable");
    let pushed = factbuoy()
        .args(["plugin", "push", "hello", &tag, "-o", "json"])
        .args(registry.flags())
        .output()
        .unwrap();
    assert!(pushed.status.success(), "{}", text(&pushed.stderr));
    let pushed: Value = serde_json::from_slice(&pushed.stdout).unwrap();
    let fleet = LoopbackFleet::start();
    let flags = registry.flags();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    // Not bundled, so granted nothing unless granted here.
    let plugin = ["--plugin", tag.as_str(), "--grant", "hello:host-info"];
    fleet.run(&[plugin.as_slice(), flags.as_slice()].concat());
    fleet.retired_run();

    let bundle = crate::support::kube_runs::bundle_in(&fleet.path("out")).expect("a bundle");
    let plugin = &bundle.json("meta/run.json")["plugins"][0];
    assert_eq!(plugin["source"], pushed["reference"], "{plugin}");
    assert_eq!(plugin["sha256"], pushed["component_sha256"], "{plugin}");
    let stored = fleet.dir().join("plugins").join(format!(
        "{}.wasm",
        pushed["component_sha256"].as_str().unwrap()
    ));
    assert!(stored.exists(), "{:?}", listing(&fleet.dir()));
    assert!(
        bundle
            .files
            .contains_key("plugins/hello/results/member-1/greeting.json"),
        "{:?}",
        bundle.files.keys().collect::<Vec<_>>()
    );
}

#[test]
fn a_member_revoked_in_the_middle_of_a_run_stops_its_plugins_and_exits() {
    let mut fleet = LoopbackFleet::start();
    fleet.start_endless_run();
    let member_log = fleet.path("member.log");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&member_log)
        .unwrap()
        .contains("agent starting")
    {
        assert!(
            Instant::now() < deadline,
            "the member never started the run"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(1));

    fleet.succeed(&["fleet", "revoke", "member-1"]);
    // Its next heartbeat (every 5 s) is refused: it stops the plugin, and its next poll is
    // refused too, so it exits 1, long before the plugin's deadline.
    let revoked = Instant::now();
    let exited = loop {
        if let Some(status) = fleet.member().try_wait().unwrap() {
            break status;
        }
        assert!(
            revoked.elapsed() < Duration::from_secs(20),
            "the revoked member still runs its plugin: {}",
            std::fs::read_to_string(&member_log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(exited.code(), Some(1));
    let log = std::fs::read_to_string(&member_log).unwrap();
    assert!(
        log.contains("the aggregator refused this node, so its plugins were stopped")
            && log.contains("node member-1 was revoked"),
        "{log}"
    );
}

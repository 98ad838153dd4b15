//! The operator library drives runs without the binary: a local run and a fleet run here, in
//! this process, from planning to a bundle found again, fetched and pruned; the planning rules
//! every kind of run shares. (A Kubernetes run through the library needs the test cluster: see
//! tests/kube_shared/run.rs.)

use std::path::Path;
use std::time::Duration;

use crate::support::kube_runs::Bundle;
use crate::support::served::serve_fleet;

use factbuoy_aggregator::fleet::{self, FleetDir, tokens};
use factbuoy_kubernetes::ClusterRef;
use factbuoy_operator::follow::Source;
use factbuoy_operator::plan::{Nodes, Plan};
use factbuoy_operator::prune::{PruneOptions, prune};
use factbuoy_operator::{
    Error, FleetTarget, Interrupts, LocalTarget, PluginSelection, RunRecord, RunRequest, StateDir,
    Target, WhichRun,
};
use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::types::{ResultStatus, RunStatus};
use factbuoy_runtime::{Runtime, RuntimeOptions};

fn hello() -> PluginSelection {
    PluginSelection {
        plugins: vec!["hello".to_owned()],
        ..PluginSelection::default()
    }
}

fn runtime(work: &Path) -> Runtime {
    Runtime::new(RuntimeOptions {
        cache_dir: Some(work.join("cache")),
        ..RuntimeOptions::default()
    })
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_run_is_started_followed_found_again_fetched_and_pruned_through_the_library() {
    let work = tempfile::tempdir().unwrap();
    let state = StateDir::at(work.path().join("state"));
    let out = work.path().join("out");
    let request = RunRequest {
        target: Target::Local(LocalTarget {
            node: Some(NodeName::parse("this-host").unwrap()),
            ..LocalTarget::default()
        }),
        plugins: hello(),
        timeout: Duration::from_secs(120),
        out: out.clone(),
    };
    let started = factbuoy_operator::start(&state, request).await.unwrap();
    let RunRecord::Local(record) = started.record().clone() else {
        panic!("a local run's record: {:?}", started.record());
    };
    assert!(record.run_dir.starts_with(state.local_runs()));
    let mut shown = 0;
    let finished = started
        .finish(&mut Interrupts::none(), &mut |_| shown += 1)
        .await
        .unwrap();
    assert!(finished.all_passed(), "{:#?}", finished.status);
    assert!(shown > 0, "no progress was shown");
    let bundle = finished.bundle.clone().expect("a bundle");
    assert_eq!(bundle.parent(), Some(out.as_path()));
    assert!(bundle.is_file());
    // A history of this host's bundles matches them as one machine's.
    assert_eq!(
        origin_of(&bundle),
        serde_json::json!({"kind": "local", "id": "this-host"})
    );

    // Found again as the current run and by its id; its saved status, its bundle fetched.
    for which in [WhichRun::Current, WhichRun::Id(record.run_id.clone())] {
        let found = state.locate(&which).unwrap();
        assert_eq!(found.run_id(), record.run_id);
    }
    let found = state.locate(&WhichRun::Current).unwrap();
    let source = Source::of(&found, &state, &ClusterRef::default())
        .await
        .unwrap();
    let status = source.status().await.unwrap();
    assert_eq!(status.status, RunStatus::Complete);
    assert_eq!(status.plugins[0].result_status, Some(ResultStatus::Passed));
    let fetched = source
        .fetch_bundle(&status, &work.path().join("fetched"))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read(&fetched.path).unwrap(),
        std::fs::read(&bundle).unwrap()
    );

    // Pruned: its directory goes, and it is no longer the current run.
    let pruning = prune(&state, &PruneOptions::default()).unwrap();
    assert_eq!(pruning.removed.len(), 1, "{pruning:?}");
    assert!(!record.run_dir.exists());
    assert!(matches!(
        state.locate(&WhichRun::Current),
        Err(Error::NoSuchRun(_))
    ));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_run_is_requested_followed_and_fetched_through_the_library() {
    let work = tempfile::tempdir().unwrap();
    let state = StateDir::at(work.path().join("state"));
    // The fleet in the state directory's default place, so that the run finds its operator
    // credentials without being told.
    let dir = FleetDir::new(state.fleet());
    let running = serve_fleet(&dir).await;
    let address = running.address.to_string();
    let token = tokens::create(&dir, Duration::from_secs(600), Some(1)).unwrap();
    let member = factbuoy_agent::fleet::MemberDir::new(work.path().join("member"));
    factbuoy_agent::fleet::join(
        &address,
        &token,
        &fleet::ca_pin(&dir).unwrap(),
        NodeName::parse("member-1").unwrap(),
        &member,
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let options = factbuoy_agent::fleet::MemberOptions {
        host_root: "/".into(),
        retry_for: Duration::from_secs(30),
    };
    let serving =
        tokio::spawn(async move { factbuoy_agent::fleet::serve(&member, &options).await });

    let out = work.path().join("out");
    let request = RunRequest {
        target: Target::Fleet(FleetTarget {
            address: address.clone(),
            credentials: None,
            lost_after: Duration::from_secs(60),
        }),
        plugins: hello(),
        timeout: Duration::from_secs(120),
        out: out.clone(),
    };
    let started = factbuoy_operator::start(&state, request).await.unwrap();
    let fleet_start = started
        .fleet()
        .expect("a fleet run says what the fleet started");
    assert_eq!(
        fleet_start.started.nodes,
        [NodeName::parse("member-1").unwrap()]
    );
    assert!(matches!(started.record(), RunRecord::Fleet(_)));
    let finished = started
        .finish(&mut Interrupts::none(), &mut |_| {})
        .await
        .unwrap();
    assert!(finished.all_passed(), "{:#?}", finished.status);
    let bundle = finished.bundle.expect("the bundle, downloaded");
    assert_eq!(bundle.parent(), Some(out.as_path()));
    let sha256 = factbuoy_protocol::digest::sha256_file(&bundle).unwrap();
    assert_eq!(
        Some(sha256),
        finished.status.tar_info.map(|t| t.sha256),
        "the downloaded bundle is the fleet's"
    );
    // The fleet's identity, the same for all its runs: its CA's fingerprint.
    let ca = std::fs::read_to_string(dir.root().join("pki/ca.pem")).unwrap();
    assert_eq!(
        origin_of(&bundle),
        serde_json::json!({
            "kind": "fleet",
            "id": factbuoy_pki::fingerprint_pem(&ca).unwrap().sha256,
        })
    );
    serving.abort();
}

/// The `origin` recorded in a bundle's `meta/run.json`.
fn origin_of(bundle: &Path) -> serde_json::Value {
    let run = &Bundle::read(bundle.to_owned()).files["meta/run.json"];
    serde_json::from_slice::<serde_json::Value>(run).unwrap()["origin"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn planning_has_one_rule_for_defaults_grants_and_global_plugins() {
    let work = tempfile::tempdir().unwrap();
    let runtime = runtime(work.path());
    // The defaults: the journal plugin where the nodes may have a journal.
    let empty_root = work.path().join("root");
    std::fs::create_dir_all(&empty_root).unwrap();
    let names = |plan: &Plan| -> Vec<String> {
        plan.entries.iter().map(|e| e.plugin.name.clone()).collect()
    };
    let here = Plan::build(
        &runtime,
        &PluginSelection::default(),
        Nodes::ThisHost { root: &empty_root },
    )
    .await
    .unwrap();
    assert_eq!(names(&here), ["host-facts", "setup"]);
    let elsewhere = Plan::build(&runtime, &PluginSelection::default(), Nodes::Elsewhere)
        .await
        .unwrap();
    assert_eq!(names(&elsewhere), ["host-facts", "setup", "systemd-logs"]);
    // What agents need of their nodes follows the per-node plugins' grants.
    let access = elsewhere.agent_access().unwrap();
    assert!(access.host_info);
    assert!(access.read_paths.iter().any(|p| p == "/proc"), "{access:?}");

    // A global plugin is denied host-info, and one that requires it is refused.
    let global = |plugin: &str, also: &str| PluginSelection {
        plugins: vec![also.to_owned(), plugin.to_owned()],
        global: vec![plugin.to_owned()],
        ..PluginSelection::default()
    };
    let plan = Plan::build(&runtime, &global("systemd-logs", "hello"), Nodes::Elsewhere)
        .await
        .unwrap();
    let logs = &plan.entries[1].plugin;
    assert_eq!(logs.denies, ["host-info"]);
    assert_eq!(
        serde_json::to_value(logs.scope).unwrap(),
        serde_json::json!("global")
    );
    let refused = Plan::build(&runtime, &global("hello", "systemd-logs"), Nodes::Elsewhere)
        .await
        .err()
        .expect("a global plugin that requires host-info is refused");
    assert!(
        refused.to_string().contains("\"hello\" requires host-info"),
        "{refused:#}"
    );
    // Names the run does not include are refused, whichever flag names them.
    let stray = PluginSelection {
        params: vec![("setup".into(), "gather_subset=network".into())],
        ..hello()
    };
    let refused = Plan::build(&runtime, &stray, Nodes::Elsewhere)
        .await
        .err()
        .expect("a parameter for a plugin not in the run is refused");
    assert!(refused.to_string().contains("\"setup\""), "{refused:#}");
}

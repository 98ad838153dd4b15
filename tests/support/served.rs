//! An aggregator served in the test's own process, for what only a library caller can do:
//! change the node set while it serves, or admit agents; and a fleet served the same way. Listeners are real loopback TLS; agents
//! are the real binary. Used by `tests/all/aggregator_nodes.rs` and `tests/all/aggregator_enroll.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use factbuoy_aggregator::fleet::{self, FleetDir, FleetSettings, RunningFleet};
use factbuoy_aggregator::{Run, RunDir, RunningAggregator};
use factbuoy_protocol::fleet::DEFAULT_IDLE_SECONDS;
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::types::{RunStatus, StatusDocument};

use super::aggregator::{create_command, run};
use super::factbuoy;

/// A fleet in `dir` served in this process on loopback (127.0.0.1, any port), its
/// certificates valid for an hour, with the bundled plugins.
pub async fn serve_fleet(dir: &FleetDir) -> RunningFleet {
    serve_fleet_with(dir, loopback_fleet()).await
}

/// A fleet in `dir` served in this process with `settings` and the bundled plugins.
pub async fn serve_fleet_with(dir: &FleetDir, settings: FleetSettings) -> RunningFleet {
    fleet::serve(dir.clone(), settings, factbuoy_catalog::bundled_component)
        .await
        .unwrap()
}

/// The settings of [`serve_fleet`].
pub fn loopback_fleet() -> FleetSettings {
    FleetSettings {
        listen: "127.0.0.1:0".parse().unwrap(),
        server_names: vec!["127.0.0.1".into()],
        certificate_validity_seconds: 3600,
        finished_run_seconds: 3600,
        idle_seconds: DEFAULT_IDLE_SECONDS,
        run_ports: None,
    }
}

/// A node name.
pub fn node(name: &str) -> NodeName {
    NodeName::parse(name).unwrap()
}

/// Creates a run of `hello` in `dir/run` (bundle into `dir/out`) with `aggregator create`,
/// expecting `nodes`; with `dynamic`, its node set is then named while it serves, as a
/// dispatcher's run is (the run's file says so; `nodes` are the first expected ones).
pub fn create(dir: &Path, nodes: &[&str], dynamic: bool, extra: &[&str]) -> RunDir {
    // `aggregator create` wants a node; a dynamic run may start with none.
    let seed: &[&str] = if nodes.is_empty() { &["seed"] } else { nodes };
    run(&mut create_command(dir, seed, extra));
    let run_dir = RunDir::new(dir.join("run"));
    if dynamic {
        let mut config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run_dir.config()).unwrap()).unwrap();
        config["dynamic_nodes"] = true.into();
        config["nodes"] = serde_json::json!(nodes);
        std::fs::write(run_dir.config(), serde_json::to_vec(&config).unwrap()).unwrap();
    }
    run_dir
}

/// Serves the run in `run_dir` (new or stopped), retrying while a stopped aggregator's ports
/// are being released.
pub async fn serve(run_dir: &RunDir) -> RunningAggregator {
    serve_with(run_dir, None).await
}

/// Serves as [`serve`] does, enrolling agents through `admission` if there is one.
pub async fn serve_with(
    run_dir: &RunDir,
    admission: Option<std::sync::Arc<dyn factbuoy_aggregator::enroll::Admission>>,
) -> RunningAggregator {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let run = Run::open(run_dir.clone()).unwrap();
        let started = factbuoy_aggregator::start_with(
            run,
            factbuoy_catalog::bundled_component,
            admission.clone(),
        )
        .await;
        match started {
            Ok(running) => return running,
            Err(e) if Instant::now() < deadline => {
                eprintln!("serving again: {e:#}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("serving {}: {e:#}", run_dir.root().display()),
        }
    }
}

/// Credentials of `role` from the run's CA, in a fresh directory under the run's parent.
pub fn issue(run_dir: &RunDir, role: &Role) -> PathBuf {
    let out = run_dir
        .root()
        .parent()
        .unwrap()
        .join(format!("creds-{:016x}", rand::random::<u64>()));
    Run::open(run_dir.clone())
        .unwrap()
        .issue_to_files(role, &out)
        .unwrap();
    out
}

/// Runs the real agent for `node` with certificates in `credentials` to its end.
pub async fn agent(running: &RunningAggregator, node: &str, credentials: &Path) -> Output {
    let mut command = factbuoy();
    command
        .args(["agent", "--aggregator"])
        .arg(running.agent_address.to_string())
        .args(["--node", node, "--retry-for", "30s", "--credentials"])
        .arg(credentials);
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

/// Asserts that an agent ended well.
pub fn assert_success(output: &Output) {
    assert!(
        output.status.success(),
        "the agent failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Waits up to `within` for the run to reach `status`.
pub async fn wait_for(
    running: &RunningAggregator,
    status: RunStatus,
    within: Duration,
) -> StatusDocument {
    let deadline = Instant::now() + within;
    loop {
        let document = running.status_document();
        if document.status == status {
            return document;
        }
        assert!(
            Instant::now() < deadline,
            "the run never became {status:?}: {document:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The status of the (plugin, node) pair in `document`, as its JSON says it (`"skipped"`).
pub fn pair_status(document: &StatusDocument, plugin: &str, node: &str) -> Option<String> {
    document
        .plugins
        .iter()
        .find(|p| p.plugin == plugin && p.node == node)
        .map(|p| {
            serde_json::to_value(p.status)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
}

/// Every file of the finished bundle, by path.
pub fn bundle_files(running: &RunningAggregator) -> BTreeMap<String, Vec<u8>> {
    let document = running.status_document();
    let tar = document.tar_info.expect("a finished bundle");
    let path = running.config().bundle_dir.join(&tar.name);
    super::tar_gz_files(&std::fs::read(path).unwrap())
}

/// The `error` of an `error.json` in the bundle.
pub fn error_of(files: &BTreeMap<String, Vec<u8>>, path: &str) -> String {
    let bytes = files
        .get(path)
        .unwrap_or_else(|| panic!("{path} missing from {:?}", files.keys()));
    let value: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    value["error"].as_str().unwrap().to_owned()
}

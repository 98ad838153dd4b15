//! `factbuoy run --kubernetes` on a test cluster ([`super::kube::Cluster`]), and the bundle it
//! downloads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::kube::Cluster;

/// `factbuoy` inside the cluster's network namespace, with its state in `state`.
pub fn factbuoy(cluster: &Cluster, state: &Path) -> Command {
    let mut command = cluster.command(env!("CARGO_BIN_EXE_factbuoy"));
    command
        .env("FACTBUOY_STATE_DIR", state)
        .env("FACTBUOY_CACHE_DIR", super::cache_dir());
    command
}

/// `factbuoy ARGS -o json` in the cluster: its output. Panics unless it succeeds.
pub fn factbuoy_json(cluster: &Cluster, state: &Path, args: &[&str]) -> serde_json::Value {
    let output = factbuoy(cluster, state)
        .args(args)
        .args(["-o", "json"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "factbuoy {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// `factbuoy run --kubernetes` with the test image and `args` (a 5-minute run timeout), started;
/// the bundle goes into `out`. The agents' cache is [`super::agent_cache_dir`] unless `args`
/// name one. The image comes by digest from the cluster's registry
/// ([`Cluster::factbuoy_image_in_registry`]), with the registry's credentials and CA, so that
/// every run takes containerd's pull path with a pull Secret, as on a real cluster.
pub fn start_run(cluster: &Cluster, state: &Path, out: &Path, args: &[&str]) -> Child {
    let image = cluster.factbuoy_image_in_registry();
    let registry = cluster.registry().flags();
    let registry = registry.iter().map(String::as_str);
    let args: Vec<&str> = registry.chain(args.iter().copied()).collect();
    start_run_with_image(cluster, state, out, (image, "IfNotPresent"), &args)
}

/// [`start_run`] with another image and its pull policy.
pub fn start_run_with_image(
    cluster: &Cluster,
    state: &Path,
    out: &Path,
    (image, pull_policy): (&str, &str),
    args: &[&str],
) -> Child {
    let mut command = factbuoy(cluster, state);
    command
        .args(["run", "--kubernetes", "--image", image])
        .args([
            "--image-pull-policy",
            pull_policy,
            "--timeout",
            "5m",
            "--out",
        ])
        .arg(out);
    if !args
        .iter()
        .any(|a| *a == "--agent-cache" || *a == "--no-agent-cache")
    {
        command.arg("--agent-cache").arg(super::agent_cache_dir());
    }
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a run [`start_run`] started and reads its bundle. Panics unless the run ended with
/// its bundle downloaded: exit 0, or 1 when a result failed (a skipped node, a plugin's error),
/// which the test then looks at in the bundle.
pub fn finish_run(run: Child, out: &Path) -> Bundle {
    let ran = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr);
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(
        matches!(ran.status.code(), Some(0 | 1)) && stdout.contains("bundle: "),
        "run --kubernetes ended without its bundle ({:?}): {stdout}{stderr}",
        ran.status.code()
    );
    bundle_in(out).unwrap_or_else(|| panic!("no bundle in --out; {stderr}"))
}

/// The bundle a run downloaded into `out`, if there is one.
pub fn bundle_in(out: &Path) -> Option<Bundle> {
    let path = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".tar.gz"))?;
    Some(Bundle::read(path))
}

/// [`start_run`], then [`finish_run`].
pub fn run(cluster: &Cluster, state: &Path, out: &Path, args: &[&str]) -> Bundle {
    finish_run(start_run(cluster, state, out, args), out)
}

/// Calls `check` every 100 ms until it finds something, for at most `timeout`; panics saying
/// what never happened.
pub fn poll<T>(timeout: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not happen within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The id of the run being started with state directory `state`, once it is planned.
pub fn run_id_in(state: &Path) -> String {
    let kube = state.join("kube");
    poll(Duration::from_secs(60), "planning the run", || {
        let entry = std::fs::read_dir(&kube).ok()?.next()?;
        Some(entry.unwrap().file_name().into_string().unwrap())
    })
}

/// A downloaded bundle: its path and its files' contents.
pub struct Bundle {
    pub path: PathBuf,
    pub files: BTreeMap<String, Vec<u8>>,
}

impl Bundle {
    /// Reads the bundle at `path`.
    pub fn read(path: PathBuf) -> Bundle {
        let files = super::tar_gz_files(&std::fs::read(&path).unwrap());
        Bundle { path, files }
    }

    /// The file `name`, parsed as JSON; panics naming the files there are if it is missing.
    pub fn json(&self, name: &str) -> serde_json::Value {
        let bytes = self
            .files
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing: {:?}", self.files.keys()));
        serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// The run's status document (`meta/status.json`).
    pub fn status(&self) -> serde_json::Value {
        self.json("meta/status.json")
    }
}

/// Asserts that tests/plugins-python/hostile, run with `mode=well-behaved` as `plugin`,
/// completed on node-1 to node-3 with its probe.
pub fn assert_well_behaved_everywhere(bundle: &Bundle, plugin: &str) {
    let status = bundle.status();
    for node in ["node-1", "node-2", "node-3"] {
        assert_eq!(
            pair(&status, plugin, node)["status"],
            "complete",
            "{status:#}"
        );
        let probe = bundle.json(&format!("plugins/{plugin}/results/{node}/probe.json"));
        assert_eq!(probe, serde_json::json!({"ok": true}), "{node}");
    }
}

/// The entry of `plugin` on `node` in a status document.
pub fn pair<'a>(status: &'a serde_json::Value, plugin: &str, node: &str) -> &'a serde_json::Value {
    status["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["plugin"] == plugin && p["node"] == node)
        .unwrap_or_else(|| panic!("no {plugin} on {node} in {status:#}"))
}

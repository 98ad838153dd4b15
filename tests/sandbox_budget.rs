//! The budgets on what a plugin hands the host (issue 10, classes 3, 4, 6 and 7): metadata,
//! relays to the operator's terminal, the host's own output path and secret parameters. Each
//! misbehaviour is tried by the hostile fixture's `budget-…` modes through the runtime API (the
//! same runtime then runs a well-behaved plugin) and through the real binary, whose peak RSS,
//! run time and stderr are measured.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use factbuoy_runtime::failure::{LimitKind, PluginFailure};
use factbuoy_runtime::limits::{
    DEFAULT_METADATA_BYTES, DEFAULT_OPEN_ARTIFACTS, DEFAULT_RECORDED_LOG_BYTES,
    RECORD_OVERHEAD_BYTES,
};
use factbuoy_runtime::sink::MemorySink;
use factbuoy_runtime::{InvocationReport, Limits};
use factbuoy_runtime::{Level, PluginProgress, ProgressObserver};

use support::factbuoy;
use support::measure::{Measured, measure, measure_into};
use support::sandbox::{Hostile, limit_of};
use support::search::{contains, files_holding};

const DEADLINE: Duration = Duration::from_secs(5);
/// How far past its deadline a run may end: epoch ticks, scheduling, and loading the plugin.
const MARGIN: Duration = Duration::from_secs(3);
/// The plugin's memory limit in every run here.
const PLUGIN_MEMORY: u64 = 64 << 20;
/// What the host may use beyond the plugin's own memory: the engine, the compiled plugin, the
/// budgets' worth of metadata and buffers. A debug build; measured at 39 to 56 MiB in all.
const HOST_OVERHEAD: u64 = 128 << 20;

fn limits() -> Limits {
    Limits {
        deadline: DEADLINE,
        memory_bytes: PLUGIN_MEMORY,
        ..Limits::default()
    }
}

struct Sandbox {
    hostile: Hostile,
}

impl Sandbox {
    async fn new() -> Self {
        Sandbox {
            hostile: Hostile::load(limits()).await,
        }
    }

    async fn run(&self, args: &[&str]) -> (InvocationReport, MemorySink) {
        self.run_observed(args, None).await
    }

    async fn run_observed(
        &self,
        args: &[&str],
        observer: Option<Arc<dyn ProgressObserver>>,
    ) -> (InvocationReport, MemorySink) {
        self.hostile.run(Path::new("/"), args, &[], observer).await
    }

    /// Runs a misbehaving mode within its deadline, then checks the same runtime still runs a
    /// well-behaved plugin correctly.
    async fn contain(&self, args: &[&str]) -> InvocationReport {
        let started = Instant::now();
        let (report, _) = self.run(args).await;
        assert!(started.elapsed() < DEADLINE + MARGIN, "{args:?} ran late");
        assert!(!report.succeeded, "{args:?} should fail: {report:#?}");
        let (after, sink) = self.run(&["mode=well-behaved"]).await;
        assert!(after.succeeded, "after {args:?}: {after:#?}");
        assert_eq!(sink.contents()[0].1, b"{\"ok\":true}\n");
        report
    }
}

/// Bytes of plugin-controlled text a report holds.
fn report_text_bytes(report: &InvocationReport) -> usize {
    let artifacts: usize = report
        .artifacts
        .iter()
        .map(|a| a.name.as_str().len() + a.media_type.len())
        .sum();
    let records: usize = report
        .warnings
        .iter()
        .chain(&report.errors)
        .map(String::len)
        .chain(report.logs.iter().map(|l| l.message.len()))
        .sum();
    artifacts + records
}

/// Fails unless a measured run stayed within the plugin's memory plus the host's overhead, and
/// ended by its deadline.
fn assert_contained(measured: &Measured, what: &str) {
    eprintln!(
        "{what}: peak RSS {} MiB, {:?}, {} bytes on stderr",
        measured.peak_rss >> 20,
        measured.elapsed,
        measured.stderr.len()
    );
    assert!(
        measured.peak_rss < PLUGIN_MEMORY + HOST_OVERHEAD,
        "{what}: the host peaked at {} MiB",
        measured.peak_rss >> 20
    );
    assert!(
        measured.elapsed < DEADLINE + MARGIN,
        "{what}: ran {:?}",
        measured.elapsed
    );
}

/// The hostile fixture, compiled into the test binary's cache once, so that no measured run
/// includes compiling it.
fn hostile_wasm() -> std::path::PathBuf {
    static WARM: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    WARM.get_or_init(|| {
        let path = support::fixture("hostile");
        // The engine's settings (the memory limit among them) are part of the cache's key.
        let status = factbuoy()
            .args(["plugin", "run"])
            .arg(&path)
            .args(["--memory", "64MiB", "-p", "mode=well-behaved"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        path
    })
    .clone()
}

/// `factbuoy plugin run` of the hostile fixture with the test's deadline and memory limit.
fn plugin_run(args: &[&str]) -> Command {
    plugin_run_within("5s", args)
}

/// As [`plugin_run`], with another deadline.
fn plugin_run_within(deadline: &str, args: &[&str]) -> Command {
    let mut command = factbuoy();
    command.args(["plugin", "run"]).arg(hostile_wasm()).args([
        "--deadline",
        deadline,
        "--memory",
        "64MiB",
    ]);
    for arg in args {
        command.args(["-p", arg]);
    }
    command
}

// Class 3: metadata the plugin controls.

#[tokio::test(flavor = "multi_thread")]
async fn artifact_metadata_counts_against_the_metadata_budget() {
    let sandbox = Sandbox::new().await;
    let report = sandbox
        .contain(&["mode=budget-media-types", "count=1536"])
        .await;
    assert_eq!(limit_of(&report), Some(LimitKind::Metadata), "{report:#?}");
    assert!(
        report
            .failure_line()
            .unwrap()
            .contains("metadata limit of 16777216 bytes")
    );
    // Only what fitted was kept: 16 of the 1,536 artifacts.
    assert_eq!(report.artifacts.len(), 16);
    assert!(report_text_bytes(&report) <= DEFAULT_METADATA_BYTES);
}

#[tokio::test(flavor = "multi_thread")]
async fn open_artifacts_are_capped_and_still_finished() {
    let sandbox = Sandbox::new().await;
    let report = sandbox
        .contain(&["mode=budget-open-artifacts", "count=10000"])
        .await;
    assert_eq!(
        limit_of(&report),
        Some(LimitKind::OpenArtifacts),
        "{report:#?}"
    );
    assert!(
        report
            .failure_line()
            .unwrap()
            .contains("more than 64 artifacts open at once")
    );
    assert_eq!(report.artifacts.len(), DEFAULT_OPEN_ARTIFACTS);
    assert!(report.artifacts.iter().all(|a| a.sha256.is_some()));
}

#[tokio::test(flavor = "multi_thread")]
async fn log_and_progress_floods_end_at_the_metadata_budget() {
    let sandbox = Sandbox::new().await;
    let report = sandbox
        .contain(&["mode=budget-log-flood", "count=10000"])
        .await;
    assert_eq!(limit_of(&report), Some(LimitKind::Metadata), "{report:#?}");
    // What the report keeps stays within the recording budget.
    assert!(report_text_bytes(&report) <= DEFAULT_RECORDED_LOG_BYTES);
    assert!(report.dropped_records > 0);
    // Empty records count too: each is worth its overhead.
    let report = sandbox
        .contain(&["mode=budget-empty-records", "count=1000000"])
        .await;
    assert_eq!(limit_of(&report), Some(LimitKind::Metadata), "{report:#?}");
    assert!(report.logs.len() <= DEFAULT_RECORDED_LOG_BYTES / RECORD_OVERHEAD_BYTES);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_error_message_is_cut_at_the_call_limit() {
    let sandbox = Sandbox::new().await;
    let report = sandbox
        .contain(&["mode=budget-long-error", "count=32"])
        .await;
    match &report.failure {
        Some(PluginFailure::Failed { message }) => {
            assert!(message.len() < (1 << 20) + 64, "{} bytes", message.len());
            assert!(
                message.ends_with("more bytes cut)"),
                "{}",
                &message[1 << 20..]
            );
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn metadata_floods_keep_the_host_small() {
    for (mode, count, limit) in [
        ("budget-media-types", "1536", "metadata"),
        ("budget-open-artifacts", "100000", "open-artifacts"),
        ("budget-log-flood", "10000", "metadata"),
    ] {
        let out = tempfile::tempdir().unwrap();
        let run = measure(
            plugin_run(&[&format!("mode={mode}"), &format!("count={count}")])
                .arg("--out")
                .arg(out.path())
                .args(["-o", "json"]),
        );
        assert_eq!(run.code, 1, "{mode}: {}", run.stderr());
        assert_eq!(run.json()["failure"]["limit"], limit, "{mode}");
        assert_contained(&run, mode);
    }
}

// Class 4: relays to the operator's terminal.

/// Counts what a relay is handed.
#[derive(Default)]
struct CountingObserver {
    records: std::sync::Mutex<(usize, usize)>,
}

impl ProgressObserver for CountingObserver {
    fn progress(&self, _: &str, update: &PluginProgress) {
        let mut records = self.records.lock().unwrap();
        for text in update.warnings.iter().chain(&update.errors) {
            records.0 += 1;
            records.1 += text.len();
        }
    }

    fn log(&self, _: &str, _: Level, message: &str) {
        let mut records = self.records.lock().unwrap();
        records.0 += 1;
        records.1 += message.len();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn relays_carry_no_more_than_the_report_keeps() {
    let sandbox = Sandbox::new().await;
    let observer = Arc::new(CountingObserver::default());
    let (report, _) = sandbox
        .run_observed(
            &["mode=budget-log-flood", "count=10000"],
            Some(observer.clone()),
        )
        .await;
    assert!(!report.succeeded);
    let (records, bytes) = *observer.records.lock().unwrap();
    assert_eq!(
        records,
        report.logs.len() + report.warnings.len() + report.errors.len()
    );
    assert_eq!(bytes, report_text_bytes(&report));
    assert!(bytes <= DEFAULT_RECORDED_LOG_BYTES, "{bytes} bytes relayed");
    sandbox
        .contain(&["mode=budget-empty-records", "count=1000000"])
        .await;
}

/// Bytes a terminal acts on: ESC, BEL, CSI (C1, as UTF-8), CR, and the right-to-left override.
fn terminal_controls(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    text.char_indices()
        .filter(|(_, c)| matches!(c, '\u{1b}' | '\u{7}' | '\u{9b}' | '\r' | '\u{202e}'))
        .map(|(i, c)| format!("{c:?} at {i}"))
        .collect()
}

#[test]
fn plugin_text_reaches_the_terminal_escaped() {
    let out = tempfile::tempdir().unwrap();
    let run = measure(
        plugin_run(&["mode=budget-terminal"])
            .arg("--out")
            .arg(out.path()),
    );
    assert_eq!(run.code, 1, "{}", run.stderr());
    for (stream, bytes) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        let found = terminal_controls(bytes);
        assert!(found.is_empty(), "{stream} carries {found:?}");
    }
    // The operator still sees what the plugin said, escaped: the log record, the warning, the
    // error, the media type, its stderr and its own error message.
    let shown = "\\u{1b}]52;c;aGFja2Vk\\u{7}";
    assert!(run.stderr().matches(shown).count() >= 6, "{}", run.stderr());
    assert_contained(&run, "budget-terminal");
}

#[test]
fn relays_to_stderr_stay_within_the_recording_cap() {
    // What the runtime logs as it comes and the summary's warnings and errors: twice the
    // recording limit, and each line's prefix.
    let cap = 2 * DEFAULT_RECORDED_LOG_BYTES + (1 << 20);
    for (mode, count) in [
        ("budget-log-flood", "10000"),
        ("budget-empty-records", "1000000"),
    ] {
        let out = tempfile::tempdir().unwrap();
        let run = measure(
            plugin_run(&[&format!("mode={mode}"), &format!("count={count}")])
                .arg("--out")
                .arg(out.path()),
        );
        assert_eq!(run.code, 1, "{mode}");
        assert!(
            run.stderr.len() < cap,
            "{mode}: {} bytes on stderr",
            run.stderr.len()
        );
        assert!(run.stderr().contains("further ones are dropped"), "{mode}");
        assert_contained(&run, mode);
    }
}

// Class 6: the host's own output path.

#[test]
fn a_large_json_artifact_is_streamed_into_the_json_report() {
    // 16 MiB of small JSON values: parsed into a tree and pretty-printed, as before, the host
    // peaked at over 20 times that.
    let dir = tempfile::tempdir().unwrap();
    let report_path = dir.path().join("report.json");
    let run = measure_into(
        // Writing 16 MiB is not what is measured: a deadline that a busy machine meets.
        plugin_run_within("60s", &["mode=budget-big-json", "count=16"]).args(["-o", "json"]),
        std::fs::File::create(&report_path).unwrap().into(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr());
    eprintln!(
        "big-json: peak RSS {} MiB, {:?}, report {} MiB",
        run.peak_rss >> 20,
        run.elapsed,
        std::fs::metadata(&report_path).unwrap().len() >> 20
    );
    assert!(
        run.peak_rss < PLUGIN_MEMORY + HOST_OVERHEAD,
        "the host peaked at {} MiB",
        run.peak_rss >> 20
    );
    // The report is whole, its content the artifact's values, counted without keeping them.
    #[derive(serde::Deserialize)]
    struct Report {
        succeeded: bool,
        duration_ms: f64,
        artifacts: Vec<Artifact>,
    }
    #[derive(serde::Deserialize)]
    struct Artifact {
        size_bytes: u64,
        content: Vec<serde::de::IgnoredAny>,
    }
    let file = std::io::BufReader::new(std::fs::File::open(&report_path).unwrap());
    let report: Report = serde_json::from_reader(file).unwrap();
    assert!(report.succeeded && report.duration_ms > 0.0);
    let row = "{\"k\":[1,2,3],\"v\":\"x\"},".len();
    assert_eq!(report.artifacts[0].content.len(), (16 << 20) / row + 1);
    assert!(report.artifacts[0].size_bytes > 15 << 20);
}

// Class 7: secret parameters.

const SECRET: &str = "s3cr3t-Tok3n-XYZZY-42";

/// `aggregator serve` in the background, logging at debug level into `log`.
fn serve(run_dir: &Path, log: &Path) -> (std::process::Child, String) {
    let mut child = factbuoy()
        .args([
            "-vv",
            "aggregator",
            "serve",
            "--exit-when-complete",
            "--run-dir",
        ])
        .arg(run_dir)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let addresses: serde_json::Value = serde_json::from_str(&line).expect("the serve line");
    let agent = addresses["agent_address"].as_str().unwrap().to_owned();
    (child, agent)
}

#[test]
fn a_secret_parameter_reaches_the_plugin_and_nothing_else() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (run_dir, out) = (dir.path().join("run"), dir.path().join("out"));
    let mut said = Vec::new();
    // Given from a file, as an operator keeps it out of shell history and /proc/*/cmdline.
    let secret_file = dir.path().join("token");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let create = factbuoy()
        .args(["-vv", "aggregator", "create", "--node", "n1", "--plugin"])
        .arg(hostile_wasm())
        .args(["-p", "hostile:mode=budget-secret"])
        .arg("-p")
        .arg(format!("hostile:token=@{}", secret_file.display()))
        .arg("--run-dir")
        .arg(&run_dir)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(create.status.success(), "{create:?}");
    said.extend([create.stdout, create.stderr]);

    // Until the run ends, a restarted aggregator needs the secret: on disk, for the owner only.
    let secrets = run_dir.join("secrets.json");
    let mode = std::fs::metadata(&secrets).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let others: Vec<String> = files_holding(&run_dir, SECRET)
        .into_iter()
        .filter(|f| *f != secrets.display().to_string())
        .collect();
    assert!(others.is_empty(), "the secret is written in {others:?}");

    // Stopped and restarted before any agent came: the plan still carries the secret.
    let (mut first, _) = serve(&run_dir, &dir.path().join("serve-1.log"));
    first.kill().unwrap();
    first.wait().unwrap();
    let (mut aggregator, address) = serve(&run_dir, &dir.path().join("serve-2.log"));
    let credentials = dir.path().join("agent-n1");
    let issue = factbuoy()
        .args(["aggregator", "issue", "--role", "agent:n1", "--run-dir"])
        .arg(&run_dir)
        .arg("--out")
        .arg(&credentials)
        .output()
        .unwrap();
    assert!(issue.status.success(), "{issue:?}");
    let agent = factbuoy()
        .args(["-vv", "agent", "--aggregator", &address, "--node", "n1"])
        .args(["--retry-for", "30s", "--credentials"])
        .arg(&credentials)
        .output()
        .unwrap();
    assert!(agent.status.success(), "{agent:?}");
    said.extend([agent.stdout, agent.stderr]);
    let served = aggregator.wait().unwrap();
    assert!(served.success());
    for log in ["serve-1.log", "serve-2.log"] {
        said.push(std::fs::read(dir.path().join(log)).unwrap());
    }

    // The plugin got it, without the file's newline: its artifact holds it reversed.
    let reversed: String = SECRET.chars().rev().collect();
    assert!(
        !files_holding(&out, &reversed).is_empty(),
        "the plugin never saw the secret"
    );
    let length = format!("\"token_len\":{}", SECRET.len());
    assert!(
        !files_holding(&out, &length).is_empty(),
        "the plugin saw the secret with something more"
    );
    // Nowhere else: not in the run directory, the bundle, or anything a process printed.
    assert!(!secrets.exists(), "the secret outlived the run");
    std::fs::remove_file(&secret_file).unwrap();
    let written = [files_holding(&run_dir, SECRET), files_holding(&out, SECRET)].concat();
    assert!(written.is_empty(), "the secret is written in {written:?}");
    for (i, output) in said.iter().enumerate() {
        assert!(
            !contains(output, SECRET),
            "output {i} carries the secret: {}",
            String::from_utf8_lossy(output)
        );
    }
}

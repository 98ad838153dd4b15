//! The real `factbuoy` binary running local collections as a person does: what the summary and
//! `status` say of failed, warning and empty results, the exit codes, `retrieve` during and
//! after a run, Ctrl-C, a killed run, and the state a finished run leaves behind.

use crate::support;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A private state directory and output directory for local runs.
struct Host {
    dir: tempfile::TempDir,
}

impl Host {
    fn new() -> Self {
        Host {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// The directory of the run a document (`run -o json`, `status -o json`) names.
    fn run_dir(&self, document: &serde_json::Value) -> PathBuf {
        let run_id = document["run_id"].as_str().expect("a run_id");
        self.state().join("runs").join(run_id)
    }

    fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }

    /// `factbuoy` with this host's state directory.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = support::factbuoy();
        command.env("FACTBUOY_STATE_DIR", self.state()).args(args);
        command
    }

    fn output(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// `factbuoy run ARGS --node this-host --out <out>`.
    fn run(&self, args: &[&str]) -> Output {
        self.command(&["run", "--node", "this-host"])
            .args(args)
            .arg("--out")
            .arg(self.out())
            .output()
            .unwrap()
    }

    /// Starts `factbuoy run ARGS` in the background.
    fn start(&self, args: &[&str]) -> Child {
        self.command(&["run", "--node", "this-host"])
            .args(args)
            .arg("--out")
            .arg(self.out())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// `status -o json`, once the current run is known.
    fn status(&self) -> serde_json::Value {
        let output = self.output(&["status", "-o", "json"]);
        assert!(output.status.success(), "{}", text(&output.stderr));
        serde_json::from_slice(&output.stdout).unwrap()
    }

    /// Waits until `status` says `done` of the current run.
    fn wait_for(&self, what: &str, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
        let give_up = Instant::now() + Duration::from_secs(60);
        loop {
            if self.state().join("current-run.json").exists() {
                let status = self.status();
                if done(&status) {
                    return status;
                }
            }
            assert!(Instant::now() < give_up, "waited a minute for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn bundles(&self) -> Vec<PathBuf> {
        match std::fs::read_dir(self.out()) {
            Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
            Err(_) => Vec::new(),
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn hostile() -> String {
    support::fixture("hostile").to_str().unwrap().to_owned()
}

/// The pair of `plugin` in a status document's results.
fn pair<'a>(results: &'a serde_json::Value, plugin: &str) -> &'a serde_json::Value {
    results
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["plugin"] == plugin)
        .unwrap_or_else(|| panic!("no {plugin} in {results}"))
}

#[test]
fn a_failed_plugins_reason_is_on_screen_after_the_run_and_in_status() {
    let host = Host::new();
    let output = host.run(&[
        "--plugin",
        "host-facts",
        "--plugin",
        "setup",
        "-p",
        "setup:gather_subset=bogus",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let summary = text(&output.stdout);
    // A finished plugin's row shows its final progress (`9/9 collected`).
    let row = summary
        .lines()
        .find(|l| l.starts_with("host-facts"))
        .unwrap_or_else(|| panic!("no host-facts row: {summary}"));
    assert!(
        row.contains("passed") && row.contains(" collected"),
        "{row}"
    );
    assert!(summary.contains("Failed:"), "{summary}");
    assert!(
        summary.contains("setup on this-host: plugin \"setup\" 0.1.0: rejected its parameters: Bad subset 'bogus' given to Ansible"),
        "{summary}"
    );
    // Piped: no colour or cursor codes anywhere, and no log timestamps.
    for stream in [&output.stdout, &output.stderr] {
        assert!(!stream.contains(&0x1b), "escape codes: {}", text(stream));
    }

    let status = host.output(&["status"]);
    assert!(status.status.success());
    assert!(
        text(&status.stdout).contains("setup on this-host: plugin \"setup\" 0.1.0: rejected its parameters: Bad subset 'bogus'"),
        "{}",
        text(&status.stdout)
    );
    let document = host.status();
    assert!(
        pair(&document["plugins"], "setup")["error"]
            .as_str()
            .unwrap()
            .contains("Bad subset 'bogus'")
    );
}

#[test]
fn warnings_and_empty_results_are_said_not_passed_silently() {
    let host = Host::new();
    let hostile = hostile();
    let output = host.run(&[
        "--plugin",
        &hostile,
        "-p",
        "hostile:mode=log-flood",
        "-p",
        "hostile:count=40",
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let summary = text(&output.stdout);
    assert!(summary.contains("Warnings:"), "{summary}");
    assert!(
        summary.contains("hostile on this-host: warning 0"),
        "{summary}"
    );
    // An agent's warnings are capped in the status document; the bundle's report has them all.
    let warnings = pair(&host.status()["plugins"], "hostile")["warnings"].clone();
    assert_eq!(warnings.as_array().unwrap().len(), 16, "{warnings}");
    assert!(
        warnings[15].as_str().unwrap().contains("and 25 more"),
        "{warnings}"
    );

    let output = host.run(&["--plugin", &hostile, "-p", "hostile:mode=nothing"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let summary = text(&output.stdout);
    assert!(
        summary.contains("passed (empty: nothing to collect)"),
        "{summary}"
    );
    assert_eq!(pair(&host.status()["plugins"], "hostile")["empty"], true);
}

#[test]
fn a_finished_run_keeps_its_bundle_and_drops_its_working_files_and_ca_key() {
    let host = Host::new();
    let output = host.run(&["--plugin", "hello", "-o", "json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let run_id = summary["run_id"].as_str().unwrap();
    let run_dir = host.run_dir(&summary);
    let mut left: Vec<String> = std::fs::read_dir(&run_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["final-status.json", "run.json", "state.json"]);
    assert_eq!(host.bundles().len(), 1);

    // status still answers from what is left; retrieve copies the bundle it names.
    assert_eq!(host.status()["status"], "complete");
    let copy = host.dir.path().join("copy");
    let output = host
        .command(&["retrieve", "--out"])
        .arg(&copy)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let copied = PathBuf::from(text(&output.stdout).trim());
    assert_eq!(
        std::fs::read(&copied).unwrap(),
        std::fs::read(&host.bundles()[0]).unwrap()
    );

    // prune lists, then removes, the finished run; then it is no run at all (exit 4).
    let dry = host.output(&["prune", "--dry-run"]);
    assert!(text(&dry.stdout).contains(&format!("would remove run {run_id} (complete)")));
    assert!(run_dir.exists());
    let pruned = host.output(&["prune"]);
    assert!(text(&pruned.stdout).contains(&format!("removed run {run_id}")));
    assert!(!run_dir.exists());
    assert_eq!(host.bundles().len(), 1, "prune removed a bundle");
    let status = host.output(&["status"]);
    assert_eq!(status.status.code(), Some(4), "{}", text(&status.stderr));
    assert!(text(&status.stderr).contains("no current run"));
    let status = host.output(&["status", "0123456789ab"]);
    assert_eq!(status.status.code(), Some(4), "{}", text(&status.stderr));
}

#[test]
fn a_run_ends_at_its_run_timeout_with_what_it_has_and_stops_the_plugins_still_running() {
    let host = Host::new();
    let hostile = hostile();
    // The looping plugin's own deadline is two minutes; the run's is three seconds.
    let started = Instant::now();
    let output = host.run(&[
        "--plugin",
        "hello",
        "--plugin",
        &hostile,
        "-p",
        "hostile:mode=loop",
        "--plugin-timeout",
        "120s",
        "--timeout",
        "3s",
        "-o",
        "json",
    ]);
    let took = started.elapsed();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    // Not held up by the plugin: it ends at the run's timeout, not at the plugin's.
    assert!(took < Duration::from_secs(60), "the run took {took:?}");
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(document["status"], "complete", "{document}");
    let results = &document["results"];
    assert_eq!(pair(results, "hello")["result_status"], "passed");
    let stopped = pair(results, "hostile");
    assert_eq!(stopped["status"], "timed-out", "{document}");
    assert!(
        stopped["error"]
            .as_str()
            .is_some_and(|e| e.contains("within the run timeout of 3s")),
        "{document}"
    );
    let bundle = support::kube_runs::Bundle::read(PathBuf::from(
        document["bundle"]["path"].as_str().unwrap(),
    ));
    assert!(
        bundle
            .files
            .contains_key("plugins/hello/results/this-host/greeting.json")
    );
    assert!(
        bundle
            .files
            .contains_key("plugins/hostile/errors/this-host/error.json")
    );
}

#[test]
fn retrieve_says_not_ready_during_a_run_and_waits_for_its_bundle_with_wait() {
    let host = Host::new();
    let hostile = hostile();
    // A plugin that spins until its deadline keeps the run going for two seconds.
    let mut run = host.start(&[
        "--plugin",
        "hello",
        "--plugin",
        &hostile,
        "-p",
        "hostile:mode=loop",
        "--plugin-timeout",
        "2s",
    ]);
    let running = host.wait_for("the run to start", |s| s["status"] == "running");
    // While it runs, its CA's and operator's keys are private to their owner.
    use std::os::unix::fs::PermissionsExt;
    let pki = host.run_dir(&running).join("pki");
    for key in ["ca.key", "operator.key"] {
        let mode = std::fs::metadata(pki.join(key))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{key}");
    }
    let early = host.output(&["retrieve", "--out", "/nonexistent/never"]);
    assert_eq!(early.status.code(), Some(3), "{}", text(&early.stderr));
    assert!(text(&early.stderr).contains("`factbuoy retrieve --wait` waits for it"));

    let fetched = host.dir.path().join("fetched");
    let waited = host
        .command(&["retrieve", "--wait", "-o", "json", "--out"])
        .arg(&fetched)
        .output()
        .unwrap();
    assert!(waited.status.success(), "{}", text(&waited.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&waited.stdout).unwrap();
    let path = PathBuf::from(answer["path"].as_str().unwrap());
    assert!(path.starts_with(&fetched), "{answer}");
    assert_eq!(
        run.wait().unwrap().code(),
        Some(1),
        "the looping plugin failed"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        std::fs::read(&host.bundles()[0]).unwrap()
    );
}

/// Ctrl-C stops the plugins and keeps what they wrote: a plugin streaming an artifact is
/// delivered with its lines so far, as a failed result that says it was stopped and is partial;
/// the run ends failed, interrupted, with its bundle.
#[test]
fn ctrl_c_ends_a_local_run_failed_with_a_bundle_of_what_was_collected() {
    let host = Host::new();
    let hostile = hostile();
    let run = host.start(&[
        "--plugin",
        "hello",
        "--plugin",
        &hostile,
        "-p",
        "hostile:mode=stream",
        "--plugin-timeout",
        "5m",
    ]);
    let status = host.wait_for("hello's result", |s| {
        pair(&s["plugins"], "hello")["result_status"] == "passed"
    });
    assert_eq!(status["status"], "running");
    // Some lines streamed.
    std::thread::sleep(Duration::from_millis(500));
    let interrupted = Instant::now();
    send_signal(run.id(), libc::SIGINT);
    let output = run.wait_with_output().unwrap();
    assert!(
        interrupted.elapsed() < Duration::from_secs(20),
        "the run took {:?} to end after Ctrl-C",
        interrupted.elapsed()
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let summary = text(&output.stdout);
    assert!(
        summary.contains("interrupted (Ctrl-C from the operator)"),
        "{summary}"
    );

    // The run is over for every later look at it, and its bundle holds what was collected.
    let document = host.status();
    assert_eq!(document["status"], "failed");
    let stopped = pair(&document["plugins"], "hostile");
    assert_eq!(stopped["result_status"], "failed", "{stopped}");
    assert!(
        stopped["error"]
            .as_str()
            .unwrap()
            .contains("was stopped before it finished"),
        "{stopped}"
    );
    let bundles = host.bundles();
    assert_eq!(bundles.len(), 1, "{bundles:?}");
    let files = support::kube_runs::Bundle::read(bundles[0].clone()).files;
    assert!(
        files.contains_key("plugins/hello/results/this-host/greeting.json"),
        "{:?}",
        files.keys()
    );
    let kept = String::from_utf8_lossy(&files["plugins/hostile/errors/this-host/stream.txt"]);
    assert!(
        kept.starts_with("line 0\nline 1\n") && kept.lines().count() >= 10,
        "{kept}"
    );
    assert!(
        String::from_utf8_lossy(&files["plugins/hostile/errors/this-host/error.json"])
            .contains("(partial)"),
        "{:?}",
        files.keys()
    );
}

#[test]
fn a_killed_run_is_never_reported_running() {
    let host = Host::new();
    let hostile = hostile();
    let mut run = host.start(&[
        "--plugin",
        &hostile,
        "-p",
        "hostile:mode=loop",
        "--plugin-timeout",
        "5m",
    ]);
    host.wait_for("the run to start", |s| s["status"] == "running");
    run.kill().unwrap();
    run.wait().unwrap();
    let document = host.status();
    assert_eq!(document["status"], "failed", "{document}");
    assert!(
        document["error"]
            .as_str()
            .unwrap()
            .contains("the run's process ended before the run did"),
        "{document}"
    );
    let run_id = document["run_id"].as_str().unwrap();
    // `runs` tells the same state as `status`.
    let listed = host.output(&["runs", "-o", "json"]);
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed[0]["run_id"], run_id, "{listed}");
    assert_eq!(listed[0]["status"], "failed", "{listed}");
    assert!(
        listed[0]["note"].as_str().unwrap().starts_with("abandoned"),
        "{listed}"
    );
    // `delete` is for Kubernetes runs: it says so once, and names what removes a local run.
    let deleted = host.output(&["delete", run_id]);
    assert!(!deleted.status.success());
    let said = text(&deleted.stderr);
    assert_eq!(said.matches("is a local run").count(), 1, "{said}");
    assert!(
        said.contains("`factbuoy prune`") && !said.contains("kubeconfig"),
        "{said}"
    );
    // prune takes a run whose aggregator is gone for abandoned, and keeps it: its directory
    // holds the only copy of what it collected.
    let run_dir = host.run_dir(&document);
    let kept = host.output(&["prune"]);
    assert!(
        text(&kept.stdout).contains("(abandoned, no bundle): its results are only in"),
        "{}",
        text(&kept.stdout)
    );
    assert!(run_dir.exists());
    // What status suggests ends the run at once with what was collected: its agent died with
    // its process, so the 60 s a silent node is given would only delay the bundle.
    assert!(host.bundles().is_empty());
    let started = std::time::Instant::now();
    let mut serve = host
        .command(&["aggregator", "serve", "--exit-when-complete", "--run-dir"])
        .arg(&run_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = serve.stderr.take().unwrap();
    let said = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let ended = loop {
        if let Some(status) = serve.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(30) {
            serve.kill().unwrap();
            serve.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let said = said.join().unwrap();
    let ended =
        ended.unwrap_or_else(|| panic!("`aggregator serve` still waited after 30 s:\n{said}"));
    assert!(ended.success(), "{said}");
    assert!(
        said.contains("the run's process ended before the run did, and its agent with it"),
        "{said}"
    );
    assert_eq!(host.bundles().len(), 1, "{said}");
    let ended = host.status();
    assert_eq!(ended["status"], "failed", "{ended}");
    // Now it has its bundle: prune --all removes its directory.
    let all = host.output(&["prune", "--all", "-o", "json"]);
    let pruning: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
    assert_eq!(pruning["removed"][0]["run_id"], run_id, "{pruning}");
    assert!(!run_dir.exists());
}

#[test]
fn runs_lists_every_local_run_with_its_state_and_status_says_which_run_it_shows() {
    let host = Host::new();
    let hostile = hostile();
    let finished = host.run(&[
        "--plugin",
        "hello",
        "--plugin",
        &hostile,
        "-p",
        "hostile:mode=fail",
    ]);
    assert_eq!(
        finished.status.code(),
        Some(1),
        "{}",
        text(&finished.stderr)
    );
    let finished_id = host.status()["run_id"].as_str().unwrap().to_owned();
    // Two runs going at once, each held up by a plugin that spins until it is stopped.
    let looping = [
        "--plugin",
        hostile.as_str(),
        "-p",
        "hostile:mode=loop",
        "--plugin-timeout",
        "5m",
    ];
    let first = host.start(&looping);
    let first_id = host.wait_for("the first run to start", |s| {
        s["status"] == "running" && s["run_id"] != finished_id.as_str()
    })["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let second = host.start(&looping);
    let second_id = host.wait_for("the second run to start", |s| {
        s["status"] == "running" && s["run_id"] != first_id.as_str()
    })["run_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let listed = host.output(&["runs", "-o", "json"]);
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let run = |id: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["run_id"] == id)
            .unwrap_or_else(|| panic!("no {id} in {listed}"))
            .clone()
    };
    assert_eq!(listed.as_array().unwrap().len(), 3, "{listed}");
    assert_eq!(run(&finished_id)["status"], "complete");
    assert_eq!(run(&finished_id)["failed_results"], 1);
    for id in [&first_id, &second_id] {
        assert_eq!(run(id)["status"], "running", "{listed}");
        assert_eq!(run(id)["kind"], "local");
    }
    assert_eq!(run(&second_id)["current"], true);
    assert_eq!(run(&first_id)["current"], false);
    // The newest first, the current one marked, a failed result counted.
    let table = text(&host.output(&["runs"]).stdout);
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert!(
        rows[0].starts_with('*') && rows[0].contains(&second_id),
        "{table}"
    );
    assert!(
        rows[1].contains(&first_id) && rows[1].contains("running"),
        "{table}"
    );
    assert!(
        rows[2].contains(&finished_id) && rows[2].contains("complete, 1 failed"),
        "{table}"
    );

    // `status` without a run id says which of the runs going it shows.
    let status = host.output(&["status"]);
    assert!(status.status.success(), "{}", text(&status.stderr));
    assert!(
        text(&status.stderr).contains(&format!(
            "2 runs are going on this host; this is the current one, {second_id}"
        )),
        "{}",
        text(&status.stderr)
    );
    for run in [first, second] {
        send_signal(run.id(), libc::SIGINT);
        run.wait_with_output().unwrap();
    }
    let after = text(&host.output(&["status"]).stderr);
    assert!(!after.contains("runs are going"), "{after}");
}

/// Sends `signal` to process `pid`.
fn send_signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) with a child's pid; no memory is shared.
    let sent = unsafe { libc::kill(pid as i32, signal) };
    assert_eq!(sent, 0, "kill({pid}, {signal})");
}

#[test]
fn a_run_that_cannot_write_its_bundle_keeps_its_results_in_the_run_directory() {
    let host = Host::new();
    // --out below a file: the bundle cannot be written, whoever runs the test.
    let output = host
        .command(&[
            "run",
            "--node",
            "this-host",
            "--plugin",
            "hello",
            "-o",
            "json",
        ])
        .args(["--out", "/dev/null/bundles"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["status"], "failed");
    assert!(
        summary["error"]
            .as_str()
            .unwrap()
            .contains("writing the bundle failed"),
        "{summary}"
    );
    // Not retired: the run directory keeps the only copy of the committed result.
    let run_dir = host.run_dir(&summary);
    assert!(run_dir.join("commits").is_dir(), "the commit records went");
    assert!(
        run_dir
            .join("results/plugins/hello/results/this-host/greeting.json")
            .is_file(),
        "the result went"
    );
    assert!(!run_dir.join("final-status.json").exists());
}

/// A local run's secret parameter reaches the plugin and nothing else: not the state directory
/// (the run directory, retired), the bundle, or what `run -vv` printed.
#[test]
fn a_local_runs_secret_parameter_reaches_the_plugin_and_nothing_else() {
    const SECRET: &str = "l0cal-s3cr3t-Wz";
    let host = Host::new();
    let token = host.dir.path().join("token");
    std::fs::write(&token, format!("{SECRET}\n")).unwrap();
    let output = host.run(&[
        "-vv",
        "--plugin",
        &hostile(),
        "-p",
        "hostile:mode=budget-secret",
        "-p",
        &format!("hostile:token=@{}", token.display()),
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    std::fs::remove_file(&token).unwrap();
    // The plugin got it: its artifact holds it reversed.
    let reversed: String = SECRET.chars().rev().collect();
    assert!(
        !support::search::files_holding(&host.out(), &reversed).is_empty(),
        "the plugin never saw the secret"
    );
    let written = support::search::files_holding(host.dir.path(), SECRET);
    assert!(written.is_empty(), "the secret is written in {written:?}");
    for said in [&output.stdout, &output.stderr] {
        assert!(!support::search::contains(said, SECRET), "{}", text(said));
    }
}

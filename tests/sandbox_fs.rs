//! Every path a plugin can open: the /proc rule, special files, and `filesystem-usage`, tried
//! by the hostile fixture's `fs-…` modes through the real binary and through the runtime API
//! (after which the same runtime runs a well-behaved plugin correctly). See docs/sandbox.md.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use factbuoy_runtime::failure::{LimitKind, PluginFailure};
use factbuoy_runtime::{InvocationReport, Limits};
use serde_json::Value;
use support::sandbox::Hostile;

const DEADLINE: Duration = Duration::from_secs(2);
/// How far past its deadline a run may end: a few epoch ticks, scheduling, process start.
const MARGIN: Duration = Duration::from_millis(1500);
/// Planted in the environment of factbuoy and of its parent; no plugin may see it.
const SECRET: &str = "fsguard-secret-7f3a9c1e";

fn hostile() -> PathBuf {
    support::fixture("hostile")
}

/// Runs the hostile plugin with the real binary, below a parent shell, both with [`SECRET`] in
/// their environment; kills it if it outlives the deadline by far. Returns the output, the
/// wall time, the child's peak RSS in KiB (`VmHWM`, polled) and the probe, if written.
fn run_binary(args: &[&str]) -> (Output, Duration, u64, Option<Value>) {
    warm_cache();
    let out = tempfile::tempdir().unwrap();
    let mut command = Command::new("sh");
    // The shell stays the parent: it has more to do after factbuoy ends.
    command
        .arg("-c")
        .arg("\"$@\"; status=$?; exit $status")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_factbuoy"))
        .args(["plugin", "run"])
        .arg(hostile())
        .args(["--deadline", "2s", "--out"])
        .arg(out.path())
        .args(args)
        .env("FACTBUOY_CACHE_DIR", support::cache_dir())
        .env("FACTBUOY_FSGUARD_SECRET", SECRET)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut shell = command.spawn().unwrap();
    let mut peak_kib = 0;
    let factbuoy = loop {
        if let Some(pid) = child_of(shell.id()) {
            break Some(pid);
        }
        if shell.try_wait().unwrap().is_some() {
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    while shell.try_wait().unwrap().is_none() {
        if let Some(kib) = factbuoy.and_then(support::measure::peak_rss_kib) {
            peak_kib = peak_kib.max(kib);
        }
        if started.elapsed() > DEADLINE + Duration::from_secs(30) {
            let _ = Command::new("kill")
                .args(["-9", &factbuoy.unwrap_or(shell.id()).to_string()])
                .status();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = shell.wait_with_output().unwrap();
    let elapsed = started.elapsed();
    let probe = std::fs::read(out.path().join("probe.json"))
        .ok()
        .map(|bytes| serde_json::from_slice(&bytes).unwrap());
    (output, elapsed, peak_kib, probe)
}

/// Compiles the plugin into the test's cache once, so that no timed run includes compiling.
fn warm_cache() {
    static WARM: std::sync::Once = std::sync::Once::new();
    WARM.call_once(|| {
        let output = support::factbuoy()
            .args(["plugin", "run"])
            .arg(hostile())
            .args(["-p", "mode=well-behaved"])
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
    });
}

/// The process whose parent is `pid`, found by its `stat` line.
fn child_of(pid: u32) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let child: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let parent: u32 = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            (parent == pid).then_some(child)
        })
}

/// Fails if [`SECRET`] is anywhere the plugin could have written to.
fn assert_no_secret(output: &Output, probe: &Option<Value>) {
    let mut seen = String::from_utf8_lossy(&output.stdout).into_owned();
    seen += &String::from_utf8_lossy(&output.stderr);
    if let Some(probe) = probe {
        seen += &probe.to_string();
    }
    assert!(!seen.contains(SECRET), "the secret leaked: {seen}");
}

/// A probe's error text; empty when it has none.
fn error_of(value: &Value) -> &str {
    value["error"].as_str().unwrap_or_default()
}

fn is_error(value: &Value) -> bool {
    value.get("error").is_some_and(Value::is_string) && value.get("read").is_none()
}

/// What the runtime API tests share: one runtime, the hostile plugin, a host root with `/data`.
struct Sandbox {
    hostile: Hostile,
    root: tempfile::TempDir,
}

impl Sandbox {
    async fn new() -> Self {
        let hostile = Hostile::load(Limits {
            deadline: DEADLINE,
            memory_bytes: 256 << 20,
            host_call_bytes: 1 << 20,
            ..Limits::default()
        })
        .await;
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("data")).unwrap();
        std::fs::write(root.path().join("data/file.txt"), "inside").unwrap();
        Sandbox { hostile, root }
    }

    /// Runs the plugin on a thread of its own and fails if the run is not back by its deadline
    /// plus [`MARGIN`]. A run that blocked its thread would never come back: that thread is
    /// left behind rather than joined, so the test fails instead of hanging.
    async fn run(
        self: &Arc<Self>,
        root: &Path,
        args: &[&str],
        grants: &[&str],
    ) -> (InvocationReport, Option<Value>, Duration) {
        let (request, sink) = self.hostile.request(root, args, grants, None);
        let sandbox = self.clone();
        let started = Instant::now();
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let executor = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let report = executor.block_on(
                sandbox
                    .hostile
                    .runtime
                    .invoke(&sandbox.hostile.plugin, request),
            );
            let _ = sender.send(report);
        });
        let report = tokio::task::block_in_place(|| receiver.recv_timeout(DEADLINE + MARGIN))
            .unwrap_or_else(|_| panic!("{args:?} still running after {:?}", DEADLINE + MARGIN));
        let probe = sink
            .contents()
            .first()
            .map(|(_, bytes)| serde_json::from_slice(bytes).unwrap());
        (report, probe, started.elapsed())
    }

    /// A well-behaved run in the same runtime succeeds and writes what it should.
    async fn still_works(self: &Arc<Self>) {
        let root = self.root.path().to_owned();
        let (report, probe, _) = self.run(&root, &["mode=well-behaved"], &[]).await;
        assert!(report.succeeded, "{report:#?}");
        assert_eq!(probe, Some(serde_json::json!({"ok": true})));
    }
}

#[test]
fn proc_memory_environment_and_magic_links_stay_unreadable_through_the_binary() {
    for grant in ["read:/", "read:/proc"] {
        let (output, elapsed, _, probe) = run_binary(&["-p", "mode=fs-proc", "--grant", grant]);
        assert!(
            output.status.success(),
            "{grant}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(elapsed < DEADLINE + MARGIN, "{grant}: took {elapsed:?}");
        assert_no_secret(&output, &probe);
        let probe = probe.unwrap();
        for pid in ["self", "thread-self", "1"] {
            for file in [
                "mem",
                "environ",
                "auxv",
                "maps",
                "smaps",
                "pagemap",
                "stack",
                "syscall",
                "io",
                "fd/0",
                "fdinfo/0",
                "cwd/.",
                "root/etc/hostname",
                "exe",
            ] {
                let path = format!("/proc/{pid}/{file}");
                assert!(is_error(&probe[&path]), "{grant}: {path}: {}", probe[&path]);
            }
            for link in ["cwd", "root", "exe", "fd/0", "fd/1", "fd/2"] {
                let seen = &probe[format!("readlink /proc/{pid}/{link}")];
                assert!(
                    is_error(&seen["wasi"]) && is_error(&seen["host-fs"]),
                    "{grant}: {pid}/{link}: {seen}"
                );
            }
            for listed in ["fd", "map_files"] {
                let seen = &probe[format!("list /proc/{pid}/{listed}")];
                assert!(is_error(seen), "{grant}: {pid}/{listed}: {seen}");
            }
        }
        for file in [
            "kcore",
            "kmsg",
            "kallsyms",
            "keys",
            "sysrq-trigger",
            "kpageflags",
        ] {
            let path = format!("/proc/{file}");
            assert!(is_error(&probe[&path]), "{grant}: {path}: {}", probe[&path]);
        }
        // The rule lets through what fact plugins need, of any process.
        let status = probe["/proc/self/status"]["read"]
            .as_str()
            .unwrap_or_default();
        assert!(status.contains("Name:\tfactbuoy"), "{grant}: {status}");
        assert!(probe["/proc/self/cmdline"]["read"].is_string());
        let namespace = &probe["readlink /proc/self/ns/mnt"];
        for way in ["wasi", "host-fs"] {
            let target = namespace[way]["target"].as_str().unwrap_or_default();
            assert!(target.starts_with("mnt:["), "{grant}: {way}: {namespace}");
        }
        let listed = probe["list /proc/self/"]["entries"].as_array().unwrap();
        assert!(
            listed.iter().any(|e| e == "environ"),
            "listing a pid dir names its files"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn proc_rule_holds_through_the_runtime_and_a_good_plugin_runs_after() {
    let sandbox = Arc::new(Sandbox::new().await);
    // The test process's own environment, which cargo fills, stands in for the secret here.
    let marker = format!("CARGO_MANIFEST_DIR={}", env!("CARGO_MANIFEST_DIR"));
    for grant in ["read:/", "read:/proc"] {
        let (report, probe, elapsed) = sandbox
            .run(Path::new("/"), &["mode=fs-proc"], &[grant])
            .await;
        assert!(report.succeeded, "{report:#?}");
        assert!(elapsed < DEADLINE + MARGIN, "{elapsed:?}");
        let probe = probe.unwrap();
        assert!(
            !probe.to_string().contains(&marker),
            "{grant}: environment leaked"
        );
        assert!(is_error(&probe["/proc/self/environ"]), "{grant}");
        assert!(is_error(&probe["/proc/self/mem"]), "{grant}");
        sandbox.still_works().await;
    }
    // A grant of a forbidden directory maps nothing.
    let (report, _, _) = sandbox
        .run(
            Path::new("/"),
            &["mode=well-behaved"],
            &["read:/proc/self/fd"],
        )
        .await;
    assert!(report.succeeded, "{report:#?}");
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("did not map /proc/self/fd")),
        "{:?}",
        report.warnings
    );
}

#[test]
fn a_fifo_and_devices_are_refused_without_blocking_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // A plugin's request narrows to one grant, so each directory is granted in its own run.
    for (paths, grant) in [
        (fifo.display().to_string(), dir.path().display().to_string()),
        (
            "/dev/zero,/dev/tty,/dev/kmsg,/dev/null".to_owned(),
            "/dev".to_owned(),
        ),
    ] {
        let (output, elapsed, _, probe) = run_binary(&[
            "-p",
            "mode=fs-read",
            "-p",
            &format!("path={paths}"),
            "--grant",
            &format!("read:{grant}"),
        ]);
        assert!(elapsed < DEADLINE + MARGIN, "{paths}: took {elapsed:?}");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let probe = probe.unwrap();
        for path in paths.split(',') {
            let seen = &probe[path];
            assert!(
                is_error(seen) && error_of(seen).contains("Not supported"),
                "{path}: {seen}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn special_files_below_a_grant_are_refused_and_a_good_plugin_runs_after() {
    let sandbox = Arc::new(Sandbox::new().await);
    let data = sandbox.root.path().join("data");
    assert!(
        Command::new("mkfifo")
            .arg(data.join("fifo"))
            .status()
            .unwrap()
            .success()
    );
    let _listener = std::os::unix::net::UnixListener::bind(data.join("socket")).unwrap();
    let root = sandbox.root.path().to_owned();
    let (report, probe, elapsed) = sandbox
        .run(
            &root,
            &[
                "mode=fs-read",
                "path=/data/fifo,/data/socket,/data/file.txt",
            ],
            &["read:/data"],
        )
        .await;
    assert!(report.succeeded, "{report:#?}");
    assert!(elapsed < DEADLINE, "{elapsed:?}");
    let probe = probe.unwrap();
    for path in ["/data/fifo", "/data/socket"] {
        assert!(is_error(&probe[path]), "{path}: {}", probe[path]);
    }
    assert_eq!(probe["/data/file.txt"]["read"], "inside");
    sandbox.still_works().await;
}

#[test]
fn a_flood_of_filesystem_usage_paths_ends_by_the_deadline_through_the_binary() {
    // Above the per-call limit: refused at once.
    let (output, elapsed, peak_kib, _) = run_binary(&[
        "-p",
        "mode=fs-usage",
        "-p",
        "path=/",
        "-p",
        "count=200000",
        "--grant",
        "host-info",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("bytes to `host-info.filesystem-usage`, above the per-call limit"),
        "{stderr}"
    );
    assert!(elapsed < DEADLINE + MARGIN, "took {elapsed:?}");
    assert!(peak_kib < 256 << 10, "peak RSS {peak_kib} KiB");
    // Within it, but more than the deadline allows: it ends at the deadline.
    let (output, elapsed, peak_kib, _) = run_binary(&[
        "-p",
        "mode=fs-usage",
        "-p",
        "path=/",
        "-p",
        "count=110000",
        "--grant",
        "host-info",
    ]);
    assert!(elapsed < DEADLINE + MARGIN, "took {elapsed:?}");
    assert!(peak_kib < 256 << 10, "peak RSS {peak_kib} KiB");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() || stderr.contains("ran past its deadline"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn filesystem_usage_answers_only_for_mount_points_and_grants() {
    let sandbox = Arc::new(Sandbox::new().await);
    let root = sandbox.root.path().to_owned();
    std::fs::create_dir_all(root.join("proc/1")).unwrap();
    std::fs::write(root.join("proc/1/mounts"), "/dev/fake0 / ext4 rw 0 0\n").unwrap();
    std::fs::write(root.join("secret.txt"), "exists").unwrap();
    let usage = |path: &'static str, grants: &'static [&'static str]| {
        let (sandbox, root) = (sandbox.clone(), root.clone());
        async move {
            let (report, probe, _) = sandbox
                .run(
                    &root,
                    &["mode=fs-usage", &format!("path={path}"), "count=2"],
                    grants,
                )
                .await;
            assert!(report.succeeded, "{report:#?}");
            probe.unwrap()["answered"].as_u64().unwrap()
        }
    };
    // A mount point of the root's table, and a path below a grant, are answered...
    assert_eq!(usage("/", &["host-info"]).await, 2);
    assert_eq!(
        usage("/data/file.txt", &["host-info", "read:/data"]).await,
        2
    );
    // ...an existing ungranted path gets what a missing one gets.
    assert_eq!(usage("/secret.txt", &["host-info"]).await, 0);
    assert_eq!(usage("/missing", &["host-info"]).await, 0);
    assert_eq!(usage("/data", &["host-info"]).await, 0);
    assert_eq!(
        usage("/data/../secret.txt", &["host-info", "read:/data"]).await,
        0
    );
    // Too many paths for one call: refused by the per-call limit, and the runtime carries on.
    let (report, _, elapsed) = sandbox
        .run(
            &root,
            &["mode=fs-usage", "path=/", "count=200000"],
            &["host-info"],
        )
        .await;
    assert!(elapsed < DEADLINE + MARGIN, "{elapsed:?}");
    match report.failure {
        Some(PluginFailure::LimitExceeded { limit, .. }) => assert_eq!(limit, LimitKind::HostCall),
        other => panic!("unexpected {other:?}"),
    }
    sandbox.still_works().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ungranted_path_is_denied_and_the_report_names_the_grant_that_allows_it() {
    let sandbox = Arc::new(Sandbox::new().await);
    let root = sandbox.root.path().to_owned();
    std::fs::write(root.join("secret.txt"), SECRET).unwrap();
    let read = |path: &'static str, grants: &'static [&'static str]| {
        let (sandbox, root) = (sandbox.clone(), root.clone());
        async move {
            let (report, probe, _) = sandbox
                .run(&root, &["mode=read", &format!("path={path}")], grants)
                .await;
            let probe = probe.expect("the read mode always writes its probe");
            (report, probe)
        }
    };
    // Outside every grant: denied, the same whether or not the file exists (nothing about the
    // host is revealed), and the report says which of the plugin's requests to grant.
    for path in ["/secret.txt", "/missing"] {
        let (report, probe) = read(path, &["read:/data"]).await;
        assert!(is_error(&probe), "{path}: {probe}");
        assert!(
            error_of(&probe).contains("Permission denied"),
            "{path}: {probe}"
        );
        assert_eq!(report.ungranted_paths, [path]);
        let warning = format!("opened {path}, which is not granted: add --grant hostile:read:/");
        assert!(report.warnings.contains(&warning), "{:?}", report.warnings);
    }
    // `/` itself is as ungranted as what lies below it.
    let (report, probe, _) = sandbox
        .run(&root, &["mode=list", "path=/"], &["read:/data"])
        .await;
    assert!(is_error(&probe.unwrap()), "{report:#?}");
    assert_eq!(report.ungranted_paths, ["/"]);

    // Inside a grant a missing file is only missing, and nothing is reported.
    let (report, probe) = read("/data/absent", &["read:/data"]).await;
    assert!(
        error_of(&probe).contains("No such file or directory"),
        "{probe}"
    );
    assert!(report.ungranted_paths.is_empty(), "{report:#?}");
    // So is a file below a granted path that does not exist on this host.
    let (report, probe) = read("/nowhere/file", &["read:/nowhere"]).await;
    assert_eq!(report.absent_paths, ["/nowhere"]);
    assert!(
        error_of(&probe).contains("No such file or directory"),
        "{probe}"
    );
    assert!(report.ungranted_paths.is_empty(), "{report:#?}");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);

    // Granted `/`, nothing is in between: the file is read.
    let (report, probe) = read("/secret.txt", &["read:/"]).await;
    assert_eq!(probe["read"], SECRET, "{report:#?}");
    sandbox.still_works().await;
}

/// A development build (`plugin run DIR` of a Python project) sees its project folder read-only
/// at `/factbuoy-sources`, in `describe` and in its runs; nothing can be written there, a link
/// cannot lead out of it, and a plugin loaded otherwise has no such folder.
#[tokio::test(flavor = "multi_thread")]
async fn a_development_builds_sources_are_read_only_and_no_other_plugins() {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("app.py"), "print('the project')\n").unwrap();
    let sandbox = Arc::new(Sandbox::new().await);
    std::fs::write(sandbox.root.path().join("secret.txt"), SECRET).unwrap();
    std::os::unix::fs::symlink(
        sandbox.root.path().join("secret.txt"),
        project.path().join("escape"),
    )
    .unwrap();
    let mut development = Sandbox::new().await;
    development.hostile.plugin = development
        .hostile
        .runtime
        .load_development(&hostile(), project.path())
        .await
        .unwrap();
    let development = Arc::new(development);
    let root = sandbox.root.path().to_owned();
    let app = format!("path={}/app.py", factbuoy_runtime::SOURCES_GUEST_PATH);

    let (report, probe, _) = development.run(&root, &["mode=read", &app], &[]).await;
    assert_eq!(
        probe.unwrap()["read"],
        "print('the project')\n",
        "{report:#?}"
    );

    let new = format!("path={}/new.txt", factbuoy_runtime::SOURCES_GUEST_PATH);
    let (report, probe, _) = development.run(&root, &["mode=write", &new], &[]).await;
    let outcomes = probe.unwrap()["outcomes"].clone();
    assert!(
        outcomes
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o.as_str().unwrap().starts_with("error: ")),
        "{outcomes} {report:#?}"
    );
    assert!(!project.path().join("new.txt").exists());
    assert!(!project.path().join("new.txt.d").exists());

    let escape = format!("path={}/escape", factbuoy_runtime::SOURCES_GUEST_PATH);
    let (report, probe, _) = development.run(&root, &["mode=read", &escape], &[]).await;
    let probe = probe.unwrap();
    assert!(is_error(&probe), "{probe} {report:#?}");

    // The same component loaded as any plugin is: no sources.
    let (report, probe, _) = sandbox.run(&root, &["mode=read", &app], &[]).await;
    let probe = probe.unwrap();
    assert!(is_error(&probe), "{probe} {report:#?}");
    development.still_works().await;
    sandbox.still_works().await;
}

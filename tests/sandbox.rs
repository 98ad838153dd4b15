//! The sandbox contains every misbehaviour of a real plugin component, and the same runtime
//! (the same host process) then runs a well-behaved plugin correctly.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use factbuoy_runtime::failure::{LimitKind, PluginFailure};
use factbuoy_runtime::sink::MemorySink;
use factbuoy_runtime::{InvocationReport, Limits};
use support::sandbox::{Hostile, limit_of};

const DEADLINE: Duration = Duration::from_millis(1500);
/// How far past its deadline a looping plugin may run: a few epoch ticks and scheduling.
const DEADLINE_MARGIN: Duration = Duration::from_millis(500);

fn limits() -> Limits {
    Limits {
        deadline: DEADLINE,
        memory_bytes: 64 << 20,
        output_bytes: 1 << 20,
        captured_stdio_bytes: 16 << 10,
        host_call_bytes: 1 << 20,
        ..Limits::default()
    }
}

/// The tests of this file run in parallel, and some are CPU floods and memory bombs. The two
/// that measure time (a deadline, a compile's effect on the async threads) run alone, so what
/// they measure is the runtime, not two cores shared with a flood: every other test holds this
/// shared, those two exclusively. (Cargo runs one test binary at a time.)
static QUIET: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

struct Sandbox {
    hostile: Hostile,
    root: tempfile::TempDir,
    /// The test's hold on [`QUIET`], one of the two.
    _shared: Option<tokio::sync::RwLockReadGuard<'static, ()>>,
    _alone: Option<tokio::sync::RwLockWriteGuard<'static, ()>>,
}

impl Sandbox {
    async fn new() -> Self {
        let shared = QUIET.read().await;
        Sandbox {
            hostile: Hostile::load(limits()).await,
            root: host_root(),
            _shared: Some(shared),
            _alone: None,
        }
    }

    /// A sandbox for a test that measures time: no other test of this file runs meanwhile.
    async fn alone() -> Self {
        let alone = QUIET.write().await;
        Sandbox {
            hostile: Hostile::load(limits()).await,
            root: host_root(),
            _shared: None,
            _alone: Some(alone),
        }
    }

    async fn run_with(&self, args: &[&str], grants: &[&str]) -> (InvocationReport, MemorySink) {
        self.run_in(self.root.path(), args, grants).await
    }

    /// Runs the plugin with `root` as the host root.
    async fn run_in(
        &self,
        root: &Path,
        args: &[&str],
        grants: &[&str],
    ) -> (InvocationReport, MemorySink) {
        self.hostile.run(root, args, grants, None).await
    }

    async fn run(&self, args: &[&str]) -> (InvocationReport, MemorySink) {
        self.run_with(args, &["read:/data"]).await
    }

    /// Runs a misbehaving mode, then checks the runtime still runs a well-behaved plugin.
    async fn contain(&self, args: &[&str]) -> InvocationReport {
        let (report, _) = self.run(args).await;
        assert!(!report.succeeded, "{args:?} should fail: {report:#?}");
        let (after, sink) = self.run(&["mode=well-behaved"]).await;
        assert!(after.succeeded, "after {args:?}: {after:#?}");
        assert_eq!(sink.contents()[0].1, b"{\"ok\":true}\n");
        report
    }

    /// The JSON the plugin's probe wrote.
    async fn probe(&self, args: &[&str]) -> serde_json::Value {
        let (report, sink) = self.run(args).await;
        assert!(report.succeeded, "{args:?}: {report:#?}");
        let contents = sink.contents();
        let (_, probe) = contents
            .iter()
            .find(|(name, _)| name.as_str() == "probe.json")
            .expect("the plugin wrote probe.json");
        serde_json::from_slice(probe).unwrap()
    }
}

/// A host root with granted `/data` and a secret beside it, plus links pointing out of `/data`.
fn host_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("file.txt"), "inside").unwrap();
    std::fs::write(root.path().join("secret.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(root.path().join("secret.txt"), data.join("absolute-link")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", data.join("relative-link")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", data.join("passwd-link")).unwrap();
    std::os::unix::fs::symlink("file.txt", data.join("inner-link")).unwrap();
    // Absolute links that stay inside the grant, one through a subdirectory; a directory link
    // that leaves it; and, outside every grant, a link back in.
    let links = data.join("links");
    std::fs::create_dir_all(links.join("deep")).unwrap();
    std::os::unix::fs::symlink("/data/file.txt", links.join("to-file")).unwrap();
    std::os::unix::fs::symlink("/data/links/to-file", links.join("deep/chain")).unwrap();
    std::os::unix::fs::symlink("../..", links.join("up")).unwrap();
    std::os::unix::fs::symlink("/data/file.txt", root.path().join("outside-link")).unwrap();
    root
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_loop_ends_at_its_deadline() {
    let sandbox = Sandbox::alone().await;
    let started = Instant::now();
    let report = sandbox.contain(&["mode=loop"]).await;
    let (report_time, wall) = (
        Duration::from_secs_f64(report.duration_ms / 1e3),
        started.elapsed(),
    );
    assert_eq!(limit_of(&report), Some(LimitKind::Deadline), "{report:#?}");
    assert!(report_time >= DEADLINE, "ended early: {report_time:?}");
    assert!(
        report_time < DEADLINE + DEADLINE_MARGIN,
        "ended late: {report_time:?}"
    );
    assert!(
        wall < DEADLINE + DEADLINE_MARGIN + Duration::from_secs(1),
        "{wall:?}"
    );
    assert!(
        report
            .failure_line()
            .unwrap()
            .contains("ran past its deadline of 1s 500ms")
    );
}

/// A FUSE file system (tests/fuse/stuck_fs.py) mounted at a folder, unmounted when dropped.
struct StuckFs {
    server: std::process::Child,
    at: std::path::PathBuf,
}

impl StuckFs {
    /// Mounts it at `at`, or says why it cannot be made here.
    fn mount(at: &Path) -> Result<StuckFs, String> {
        if !Path::new("/dev/fuse").exists() {
            return Err("this machine has no /dev/fuse".into());
        }
        let fuse = support::workspace().join("tests/fuse");
        let venv = std::process::Command::new(fuse.join("venv.sh"))
            .output()
            .expect("running tests/fuse/venv.sh");
        assert!(venv.status.success(), "tests/fuse/venv.sh failed");
        let python = Path::new(String::from_utf8(venv.stdout).unwrap().trim()).join("bin/python3");
        let server = std::process::Command::new(python)
            .arg(fuse.join("stuck_fs.py"))
            .arg(at)
            .spawn()
            .expect("starting tests/fuse/stuck_fs.py");
        let mounted = StuckFs {
            server,
            at: at.to_owned(),
        };
        let give_up = Instant::now() + Duration::from_secs(20);
        while !at.join("stuck").exists() {
            assert!(
                Instant::now() < give_up,
                "the FUSE file system was not mounted"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(mounted)
    }
}

impl Drop for StuckFs {
    fn drop(&mut self) {
        // Unmounting ends the reads still waiting on it.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.at)
            .status();
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// A host root whose `/data/stuck` never answers a read, or `None` (said on stderr) where this
/// machine cannot mount one.
fn stuck_root() -> Option<(tempfile::TempDir, StuckFs)> {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    std::fs::create_dir(&data).unwrap();
    match StuckFs::mount(&data) {
        Ok(mounted) => Some((root, mounted)),
        Err(why) => {
            eprintln!("skipped: {why}, so no host call can be made to hang");
            None
        }
    }
}

/// A read the host makes for the plugin never returns (a hung network file system looks so):
/// no epoch tick reaches inside the host, so the timeout around the whole call ends the run.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_stuck_in_a_host_call_ends_at_its_deadline() {
    let sandbox = Sandbox::alone().await;
    let Some((root, _mounted)) = stuck_root() else {
        return;
    };
    let started = Instant::now();
    let (report, _) = sandbox
        .run_in(
            root.path(),
            &["mode=read", "path=/data/stuck"],
            &["read:/data"],
        )
        .await;
    let wall = started.elapsed();
    assert!(!report.succeeded, "{report:#?}");
    assert_eq!(limit_of(&report), Some(LimitKind::Deadline), "{report:#?}");
    assert!(
        wall < DEADLINE + DEADLINE_MARGIN + Duration::from_secs(1),
        "stuck for {wall:?}"
    );
    // The runtime goes on.
    let (after, _) = sandbox.run(&["mode=well-behaved"]).await;
    assert!(after.succeeded, "{after:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_memory_bomb_traps_at_the_cap() {
    let sandbox = Sandbox::new().await;
    let report = sandbox.contain(&["mode=alloc"]).await;
    assert_eq!(limit_of(&report), Some(LimitKind::Memory), "{report:#?}");
    assert!(
        report
            .failure_line()
            .unwrap()
            .contains("above the limit of 67108864 bytes")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn deep_recursion_traps_on_either_stack() {
    let sandbox = Sandbox::new().await;
    let report = sandbox.contain(&["mode=recurse"]).await;
    assert_eq!(limit_of(&report), Some(LimitKind::Stack), "{report:#?}");
    // Frames kept in linear memory exhaust Rust's shadow stack first: an out-of-bounds trap.
    let report = sandbox.contain(&["mode=recurse-shadow"]).await;
    match &report.failure {
        Some(PluginFailure::Trapped { message, .. }) => {
            assert!(message.contains("out of bounds memory access"), "{message}")
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_output_flood_is_cut_at_the_cap() {
    let sandbox = Sandbox::new().await;
    let report = sandbox.contain(&["mode=flood"]).await;
    assert_eq!(limit_of(&report), Some(LimitKind::Output), "{report:#?}");
    let artifact = &report.artifacts[0];
    assert_eq!((artifact.size_bytes, artifact.truncated), (1 << 20, true));
    assert!(
        artifact.sha256.is_some(),
        "a cut artifact is still finished"
    );
    assert!(
        report
            .failure_line()
            .unwrap()
            .contains("output limit of 1048576 bytes")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panic_becomes_an_error_carrying_its_message() {
    let sandbox = Sandbox::new().await;
    let report = sandbox.contain(&["mode=panic"]).await;
    match &report.failure {
        Some(PluginFailure::Panicked { message }) => {
            assert!(
                message.starts_with("hostile plugin panicked on purpose (at "),
                "{message}"
            )
        }
        other => panic!("unexpected {other:?}"),
    }
    let report = sandbox.contain(&["mode=fail"]).await;
    assert_eq!(
        report.failure,
        Some(PluginFailure::Failed {
            message: "failed on purpose".into()
        })
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_host_calls_are_refused() {
    let sandbox = Sandbox::new().await;
    let report = sandbox.contain(&["mode=huge-chunk"]).await;
    assert_eq!(limit_of(&report), Some(LimitKind::HostCall), "{report:#?}");
    assert!(
        report
            .failure_line()
            .unwrap()
            .contains("passed 8388608 bytes to `artifact.write`")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chatty_stdio_is_capped_without_failing_the_run() {
    let sandbox = Sandbox::new().await;
    let (report, _) = sandbox.run(&["mode=stdout-flood", "count=100"]).await;
    assert!(report.succeeded, "{report:#?}");
    for captured in [&report.stdout, &report.stderr] {
        assert_eq!(captured.total_bytes, 100 * 1024);
        assert_eq!(captured.text.len(), 16 << 10);
        assert!(captured.truncated && captured.tail.is_some());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn artifact_names_that_escape_are_refused() {
    let sandbox = Sandbox::new().await;
    let probe = sandbox.probe(&["mode=bad-name"]).await;
    let results: Vec<&str> = probe["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(results.len(), 13);
    for result in results {
        assert!(result.contains("invalid artifact name"), "{result}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_stay_inside_the_granted_paths() {
    let sandbox = Sandbox::new().await;
    let read = |path: &'static str| {
        let sandbox = &sandbox;
        async move { sandbox.probe(&["mode=read", &format!("path={path}")]).await }
    };
    assert_eq!(read("/data/file.txt").await["read"], "inside");
    assert_eq!(read("/data/inner-link").await["read"], "inside");
    for escape in [
        "/secret.txt",
        "/data/../secret.txt",
        "/data/absolute-link",
        "/data/relative-link",
        "/data/passwd-link",
        "/etc/passwd",
    ] {
        let probe = read(escape).await;
        assert!(probe.get("read").is_none(), "{escape} escaped: {probe}");
        assert!(probe["error"].is_string(), "{escape}: {probe}");
    }
    let listing = sandbox.probe(&["mode=list", "path=/data"]).await;
    assert_eq!(
        listing["entries"],
        serde_json::json!([
            "absolute-link",
            "file.txt",
            "inner-link",
            "links",
            "passwd-link",
            "relative-link"
        ])
    );
    assert!(sandbox.probe(&["mode=list", "path=/"]).await["error"].is_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn absolute_links_resolve_below_the_root_only_inside_the_grants() {
    let sandbox = Sandbox::new().await;
    let probe = |mode: &'static str, path: &'static str| {
        let sandbox = &sandbox;
        async move {
            sandbox
                .probe(&[&format!("mode={mode}"), &format!("path={path}")])
                .await
        }
    };
    // The host reveals a link below a grant as written, whatever it points to...
    assert_eq!(
        probe("read-link", "/data/links/to-file").await["target"],
        "/data/file.txt"
    );
    assert_eq!(
        probe("read-link", "/data/passwd-link").await["target"],
        "/etc/passwd"
    );
    assert_eq!(
        probe("read-link", "/data/./links/../inner-link").await["target"],
        "file.txt"
    );
    // ...and the SDK reads through it, below the host root.
    assert_eq!(
        probe("hostfs-read", "/data/links/to-file").await["read"],
        "inside"
    );
    assert_eq!(
        probe("hostfs-read", "/data/links/deep/chain").await["read"],
        "inside"
    );
    // A target outside the grants stays unreadable, though the host has the file.
    for path in [
        "/data/passwd-link",
        "/data/absolute-link",
        "/data/relative-link",
    ] {
        let seen = probe("hostfs-read", path).await;
        assert!(seen.get("read").is_none(), "{path} escaped: {seen}");
    }
    // No link is revealed outside a grant, or through a directory that leaves one.
    for path in [
        "/outside-link",
        "/data/../outside-link",
        "/data/links/up/outside-link",
        "/data",
        "/",
    ] {
        let seen = probe("read-link", path).await;
        let error = seen["error"].as_str().unwrap_or_default();
        assert!(error.contains("NotGranted"), "{path}: {seen}");
    }
    assert!(
        probe("read-link", "/data/file.txt").await["error"]
            .as_str()
            .is_some_and(|e| e.contains("NotALink"))
    );
    assert!(
        probe("read-link", "/data/absent").await["error"]
            .as_str()
            .is_some_and(|e| e.contains("NotFound"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn host_info_answers_about_the_host_root() {
    let sandbox = Sandbox::new().await;
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    for dir in ["etc", "dev", "proc/1", "only-in-root"] {
        std::fs::create_dir_all(r.join(dir)).unwrap();
    }
    std::fs::write(
        r.join("usr-os-release"),
        "NAME=\"Fake Linux\"\nVERSION_ID=\"7.1\"\nID=fakelinux\n",
    )
    .unwrap();
    // Absolute, so it must be read below the root, not from this machine's /.
    std::os::unix::fs::symlink("/usr-os-release", r.join("etc/os-release")).unwrap();
    std::fs::write(r.join(".dockerenv"), "").unwrap();
    std::fs::write(r.join("dev/kvm"), "").unwrap();
    std::fs::write(
        r.join("proc/1/mounts"),
        "/dev/fake0 / ext4 rw 0 0\nproc /proc proc rw 0 0\n/dev/fake1 /only-in-root ext4 ro 0 0\n",
    )
    .unwrap();
    let (report, sink) = sandbox
        .run_in(
            r,
            &["mode=host-root", "path=/,/only-in-root,/usr"],
            &["host-info"],
        )
        .await;
    assert!(report.succeeded, "{report:#?}");
    let seen: serde_json::Value = serde_json::from_slice(&sink.contents()[0].1).unwrap();
    assert_eq!(seen["name"], "Fake Linux");
    assert_eq!(seen["version"], "7.1");
    assert_eq!(seen["distribution_id"], "fakelinux");
    assert_eq!(
        seen["markers"],
        serde_json::json!(["/.dockerenv", "/dev/kvm"])
    );
    // A directory that is not a file system's root, with no process 1 root to compare.
    assert_eq!(seen["is_chroot"], true);
    // /usr exists on this machine but not below the root.
    let usage = seen["usage_blocks"].as_array().unwrap();
    assert!(usage[0].is_u64() && usage[1].is_u64(), "{seen}");
    assert!(usage[2].is_null(), "{seen}");
    assert_eq!(
        seen["disks"],
        serde_json::json!([
            "/dev/fake0 / ext4 true",
            "/dev/fake1 /only-in-root ext4 true"
        ])
    );
    assert_eq!(seen["tz"], serde_json::json!(std::env::var("TZ").ok()));
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_are_denied_everywhere() {
    let sandbox = Sandbox::new().await;
    for path in ["/data/file.txt", "/data/new.txt", "/new.txt"] {
        let probe = sandbox
            .probe(&["mode=write", &format!("path={path}")])
            .await;
        for outcome in probe["outcomes"].as_array().unwrap() {
            assert!(
                outcome.as_str().unwrap().starts_with("error:"),
                "{path}: {probe}"
            );
        }
    }
    let data = sandbox.root.path().join("data");
    assert_eq!(
        std::fs::read_to_string(data.join("file.txt")).unwrap(),
        "inside"
    );
    assert!(!data.join("new.txt").exists() && !data.join("file.txt.d").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn sockets_are_denied() {
    let sandbox = Sandbox::new().await;
    // A real listener, so a refusal can only come from the sandbox.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let probe = sandbox
        .probe(&["mode=connect", &format!("path={address}")])
        .await;
    assert!(probe["error"].is_string(), "{probe}");
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_err(),
        "the plugin reached the listener"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn udp_and_name_lookups_are_denied() {
    let sandbox = Sandbox::new().await;
    // A real UDP socket, so a refusal can only come from the sandbox.
    let listener = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let probe = sandbox
        .probe(&["mode=udp", &format!("path={address}")])
        .await;
    assert!(probe["error"].is_string(), "{probe}");
    listener.set_nonblocking(true).unwrap();
    let mut buffer = [0u8; 64];
    assert!(
        listener.recv_from(&mut buffer).is_err(),
        "the plugin's datagram arrived"
    );
    // localhost resolves everywhere, without a DNS server: only the sandbox can refuse it.
    let probe = sandbox.probe(&["mode=resolve", "path=localhost:80"]).await;
    assert!(probe["error"].is_string(), "{probe}");
    assert!(probe.get("resolved").is_none(), "{probe}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_gets_no_arguments_no_stdin_and_only_the_passed_environment() {
    // `cargo test` gives this process CARGO_* variables, which must not reach the plugin.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let sandbox = Sandbox::new().await;
    let probe = sandbox.probe(&["mode=process"]).await;
    assert_eq!(probe["args"], serde_json::json!([]), "{probe}");
    assert_eq!(probe["stdin"], "0 bytes", "{probe}");
    let env: Vec<&str> = probe["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    if std::env::var_os("HOME").is_some() {
        assert!(env.contains(&"HOME"), "HOME is passed: {probe}");
    }
    for key in &env {
        assert!(
            factbuoy_runtime::PASSED_ENVIRONMENT.contains(key) || key.starts_with("LC_"),
            "{key} reached the plugin: {probe}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ungranted_interface_gives_a_clear_error() {
    let sandbox = Sandbox::new().await;
    let (report, _) = sandbox.run_with(&["mode=host-info"], &["read:/data"]).await;
    match &report.failure {
        Some(PluginFailure::CapabilityDenied {
            capability,
            message,
        }) => {
            assert_eq!(capability, "host-info");
            assert!(
                message.contains("grant it with --grant hostile:host-info"),
                "{message}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    let (granted, _) = sandbox.run_with(&["mode=host-info"], &["host-info"]).await;
    assert!(granted.succeeded, "{granted:#?}");
    assert_eq!(granted.absent_paths, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn granted_paths_missing_on_the_host_are_reported() {
    let sandbox = Sandbox::new().await;
    let (report, _) = sandbox
        .run_with(&["mode=well-behaved"], &["read:/data", "read:/nowhere"])
        .await;
    assert!(report.succeeded);
    // The plugin asks for /data only; /nowhere is granted but not asked for, so not mapped.
    assert_eq!(report.granted.read_paths, ["/data"]);
    std::fs::remove_dir_all(sandbox.root.path().join("data")).unwrap();
    let (report, _) = sandbox.run(&["mode=well-behaved"]).await;
    assert_eq!(report.absent_paths, ["/data"]);
    assert!(Path::new(&sandbox.root.path()).exists());
}

/// Compiling a component takes seconds of CPU (more in a debug build or on a slow node); the
/// async threads stay free meanwhile, so an agent's heartbeats and uploads go on while it
/// compiles its plugins. Before this held, a 2-core node's agent compiling two plugins sent no
/// heartbeat for minutes and the aggregator marked it lost.
#[test]
fn compiling_a_plugin_leaves_the_async_threads_free() {
    use factbuoy_runtime::{Runtime, RuntimeOptions};
    use std::sync::{Arc, Mutex};

    let _alone = QUIET.blocking_write();
    // One async thread: a compile that blocked it would stop the ticker until it ended.
    let executor = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (compile, longest_gap) = executor.block_on(async {
        // No cache: this load compiles.
        let runtime = Runtime::new(RuntimeOptions {
            limits: limits(),
            cache_dir: None,
        })
        .unwrap();
        let wasm = std::fs::read(support::fixture("hostile")).unwrap();
        let longest = Arc::new(Mutex::new(Duration::ZERO));
        let ticker = {
            let longest = longest.clone();
            tokio::spawn(async move {
                let mut last = Instant::now();
                loop {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    let mut longest = longest.lock().unwrap();
                    *longest = (*longest).max(last.elapsed());
                    last = Instant::now();
                }
            })
        };
        tokio::task::yield_now().await;
        let started = Instant::now();
        runtime.load("hostile", &wasm, None).await.unwrap();
        let compile = started.elapsed();
        // Let the ticker see the end of any pause before it stops.
        tokio::time::sleep(Duration::from_millis(50)).await;
        ticker.abort();
        let longest_gap = *longest.lock().unwrap();
        (compile, longest_gap)
    });
    eprintln!("load took {compile:?}; the async thread's longest pause {longest_gap:?}");
    assert!(
        longest_gap < Duration::from_millis(500) && longest_gap * 4 < compile,
        "the async thread paused {longest_gap:?} during a {compile:?} load"
    );
}

/// An interrupted run stops its plugins: one streaming an artifact ends as `stopped` within a
/// tick, with what it wrote until then finished and kept; one stuck in a host call ends at
/// once, not at its deadline.
#[tokio::test(flavor = "multi_thread")]
async fn a_stop_signal_ends_a_streaming_or_stuck_plugin_and_keeps_what_it_wrote() {
    use factbuoy_runtime::StopSignal;
    let sandbox = Sandbox::alone().await;
    let stopped_after = |stop: StopSignal, after: Duration| {
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            stop.stop();
        })
    };

    let stop = StopSignal::new();
    let (mut request, sink) =
        sandbox
            .hostile
            .request(sandbox.root.path(), &["mode=stream"], &[], None);
    request.stop = Some(stop.clone());
    stopped_after(stop, Duration::from_millis(500));
    let started = Instant::now();
    let report = sandbox
        .hostile
        .runtime
        .invoke(&sandbox.hostile.plugin, request)
        .await;
    assert!(started.elapsed() < DEADLINE, "{:?}", started.elapsed());
    assert!(
        matches!(&report.failure, Some(PluginFailure::Stopped { message }) if message.contains("partial")),
        "{report:#?}"
    );
    let stream = &report.artifacts[0];
    assert!(stream.sha256.is_some(), "finished: {stream:?}");
    let (name, bytes) = sink.contents().remove(0);
    assert_eq!(name.to_string(), "stream.txt");
    let kept = String::from_utf8(bytes).unwrap();
    assert!(kept.starts_with("line 0\nline 1\n"), "{kept}");
    assert_eq!(kept.len() as u64, stream.size_bytes);

    // Stuck in a read that never returns: no tick reaches it, the stop does.
    let Some((root, _mounted)) = stuck_root() else {
        return;
    };
    let stop = StopSignal::new();
    let (mut request, _) = sandbox.hostile.request(
        root.path(),
        &["mode=read", "path=/data/stuck"],
        &["read:/data"],
        None,
    );
    request.stop = Some(stop.clone());
    stopped_after(stop, Duration::from_millis(500));
    let started = Instant::now();
    let report = sandbox
        .hostile
        .runtime
        .invoke(&sandbox.hostile.plugin, request)
        .await;
    assert!(
        matches!(report.failure, Some(PluginFailure::Stopped { .. })),
        "{report:#?}"
    );
    assert!(
        started.elapsed() < DEADLINE,
        "stuck for {:?}",
        started.elapsed()
    );
}

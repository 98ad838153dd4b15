//! A fleet served by the real binary on loopback, with one member joined and serving: for the
//! tests of a fleet's life (tests/all/fleet_lifecycle.rs) and of its metrics
//! (tests/all/fleet_metrics.rs).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::factbuoy;

/// A fleet served from `fleet/` and one member, `member-1`, serving from `member/`, both
/// logging at debug level into `fleet.log` and `member.log`; the operator's state directory is
/// `operator/`. Everything is in one temporary directory, removed with the processes when
/// dropped.
pub struct LoopbackFleet {
    pub work: tempfile::TempDir,
    pub address: String,
    /// The fleet's `fleet serve`, the member's `agent serve`, and whatever a test adds to be
    /// killed with them.
    pub processes: Vec<Child>,
}

impl Drop for LoopbackFleet {
    fn drop(&mut self) {
        for child in &mut self.processes {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl LoopbackFleet {
    pub fn start() -> LoopbackFleet {
        LoopbackFleet::start_with(&[])
    }

    /// A fleet served with `options` added to `fleet serve`'s.
    pub fn start_with(options: &[&str]) -> LoopbackFleet {
        let work = tempfile::tempdir().unwrap();
        let mut fleet = LoopbackFleet {
            work,
            address: String::new(),
            processes: Vec::new(),
        };
        let mut serve = fleet
            .operator()
            .args(["-vv", "fleet", "serve", "--listen", "127.0.0.1:0"])
            .args(["--name", "127.0.0.1", "-o", "json"])
            .args(options)
            .arg("--dir")
            .arg(fleet.dir())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(fleet.path("fleet.log")).unwrap())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(serve.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        fleet.processes.push(serve);
        let served: Value = serde_json::from_str(&first).unwrap();
        fleet.address = served["address"].as_str().unwrap().to_owned();
        let token = fleet.succeed(&["fleet", "token", "create", "-o", "json"]);
        let token: Value = serde_json::from_slice(&token.stdout).unwrap();
        let joined = factbuoy()
            .args(["agent", "join", &fleet.address, "--node", "member-1"])
            .args(["--token", token["token"].as_str().unwrap()])
            .args(["--ca-pin", token["ca_pin"].as_str().unwrap()])
            .arg("--state-dir")
            .arg(fleet.path("member"))
            .output()
            .unwrap();
        assert!(joined.status.success(), "{}", text(&joined.stderr));
        let member = factbuoy()
            .args(["-vv", "agent", "serve", "--state-dir"])
            .arg(fleet.path("member"))
            .stderr(std::fs::File::create(fleet.path("member.log")).unwrap())
            .spawn()
            .unwrap();
        fleet.processes.push(member);
        fleet
    }

    /// The member's `agent serve`.
    pub fn member(&mut self) -> &mut Child {
        &mut self.processes[1]
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    pub fn dir(&self) -> PathBuf {
        self.path("fleet")
    }

    /// `factbuoy` with the operator's state directory.
    pub fn operator(&self) -> Command {
        let mut command = factbuoy();
        command.env("FACTBUOY_STATE_DIR", self.path("operator"));
        command
    }

    /// `factbuoy ARGS --dir FLEET`, which must succeed.
    pub fn succeed(&self, args: &[&str]) -> Output {
        let output = self
            .operator()
            .args(args)
            .arg("--dir")
            .arg(self.dir())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
        output
    }

    /// `run --fleet` with `args`, its bundle downloaded into `out/`, which must succeed.
    pub fn run(&self, args: &[&str]) -> Output {
        let ran = self
            .operator()
            .args(["-vv", "run", "--fleet", &self.address, "--out"])
            .arg(self.path("out"))
            .args(args)
            .output()
            .unwrap();
        assert!(ran.status.success(), "{}", text(&ran.stderr));
        ran
    }

    /// Starts `run --fleet` of a plugin that runs until its deadline, two minutes away, in the
    /// background; killed with the fleet.
    pub fn start_endless_run(&mut self) {
        let hostile = super::fixture("hostile");
        let run = self
            .operator()
            .args(["run", "--fleet", &self.address, "--timeout", "120s"])
            .arg("--out")
            .arg(self.path("out"))
            .arg("--plugin")
            .arg(hostile)
            .args(["-p", "hostile:mode=loop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.processes.push(run);
    }

    /// The one run directory of the fleet, once it is retired (its retirement follows the
    /// bundle by a moment).
    pub fn retired_run(&self) -> PathBuf {
        let runs: Vec<PathBuf> = std::fs::read_dir(self.dir().join("runs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(runs.len(), 1, "{runs:?}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !runs[0].join("final-status.json").exists() {
            assert!(
                Instant::now() < deadline,
                "the finished run was not retired: {:?}",
                listing(&runs[0])
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        runs[0].clone()
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every file below `dir`, relative to it.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else {
            files.push(path.strip_prefix(dir).unwrap().display().to_string());
        }
    }
    files.sort();
    files
}

//! Shared by the end-to-end tests: the real binary with a private component cache, and (in
//! `fixtures`) the workspace and the test-fixture plugins.

#![allow(dead_code)] // each test binary uses a different part

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub mod aggregator;
pub mod authoring;
pub mod bridge;
pub mod built;
pub mod conformance;
mod fixtures;
pub mod js;
pub mod kube;
pub mod kube_runs;
pub mod loopback_fleet;
pub mod measure;
pub mod podman;
pub mod python;
pub mod registry;
pub mod sandbox;
pub mod search;
pub mod served;
pub mod status_page;
#[allow(unused_imports)] // each test binary uses a different part
pub use fixtures::{contract_fixture, fixture, frozen_contracts, workspace};

/// systemd's own journal writer, which makes the journal files tests read.
pub const JOURNAL_REMOTE: &str = "/lib/systemd/systemd-journal-remote";

/// Writes export-format `stream` as a new journal file at `path` with systemd-journal-remote,
/// with `env` (journald's format switches) set.
pub fn write_journal(path: &std::path::Path, stream: &[u8], env: &[(&str, &str)]) {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(JOURNAL_REMOTE)
        .arg(format!("--output={}", path.display()))
        .arg("-")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("running systemd-journal-remote (apt-get install systemd-journal-remote)");
    child.stdin.take().unwrap().write_all(stream).unwrap();
    assert!(child.wait().unwrap().success(), "journal-remote failed");
}

/// Unpacks the committed fixture journals (tests/fixtures/journal, zstd-compressed, a folder
/// per machine) into `into`, keeping their paths; only those whose path (below the fixture
/// directory, without `.zst`) passes `keep`.
pub fn unpack_journal_fixtures(into: &std::path::Path, keep: impl Fn(&str) -> bool) {
    let source = workspace().join("tests/fixtures/journal");
    for compressed in files_below(&source, &[], |_| true) {
        let relative = compressed.strip_prefix(&source).unwrap().to_str().unwrap();
        let Some(relative) = relative.strip_suffix(".zst") else {
            continue;
        };
        if !keep(relative) {
            continue;
        }
        let target = into.join(relative);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        let status = Command::new("zstd")
            .args(["-q", "-d", "-f"])
            .arg(&compressed)
            .arg("-o")
            .arg(&target)
            .status()
            .expect("running zstd (apt-get install zstd)");
        assert!(status.success(), "zstd -d {}", compressed.display());
    }
}

/// The real `factbuoy` binary, with this test binary's private component cache.
pub fn factbuoy() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_factbuoy"));
    command.env("FACTBUOY_CACHE_DIR", cache_dir());
    command
}

/// A fresh cache directory per test binary, so tests never share compiled code with the user.
pub fn cache_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| binary_dir("component-cache")).clone()
}

/// The node directory the Kubernetes tests' agents keep compiled plugins in (`--agent-cache`):
/// in the target directory, which the test cluster's nodes share with this machine, rather than
/// the default /var/cache/factbuoy, so that the tests leave the machine as they found it.
pub fn agent_cache_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| binary_dir("agent-cache")).clone()
}

/// `CARGO_TARGET_TMPDIR/<kind>/<this test binary>`, emptied: in the target directory, so that
/// it is removed with it (a static is never dropped, so a temporary directory would outlive
/// every run in /tmp); call it once per run, from a `OnceLock`.
pub fn binary_dir(kind: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(kind)
        .join(exe.file_stem().unwrap());
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            panic!("emptying {}: {e}", dir.display())
        }
        _ => {}
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The exit code, the JSON report and the `ansible_facts.json` artifact of a
/// `factbuoy plugin run setup -o json` that has ended (`Null` when there is none).
pub fn setup_report(output: &std::process::Output) -> (i32, serde_json::Value, serde_json::Value) {
    use serde_json::Value;
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "factbuoy printed no JSON report ({e}); stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let facts = report["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["name"] == "ansible_facts.json"))
        .map(|a| match &a["content"] {
            Value::String(text) => serde_json::from_str(text).unwrap(),
            other => other.clone(),
        })
        .unwrap_or(Value::Null);
    (output.status.code().unwrap_or(-1), report, facts)
}

/// The files of the `.tar.gz` `bytes` (a bundle), by path.
pub fn tar_gz_files(bytes: &[u8]) -> std::collections::BTreeMap<String, Vec<u8>> {
    tar_files(flate2::read::GzDecoder::new(bytes))
}

/// The files of the tar archive `reader` reads, by path.
pub fn tar_files(reader: impl std::io::Read) -> std::collections::BTreeMap<String, Vec<u8>> {
    use std::io::Read;
    let mut archive = tar::Archive::new(reader);
    let mut files = std::collections::BTreeMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        let mut content = Vec::new();
        entry.read_to_end(&mut content).unwrap();
        files.insert(name, content);
    }
    files
}

/// The files below `dir` that `keep` accepts, in path order, without entering the folders named
/// in `skip` at any depth.
pub fn files_below(
    dir: &std::path::Path,
    skip: &[&str],
    keep: impl Fn(&std::path::Path) -> bool,
) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if !skip
                    .iter()
                    .any(|s| path.file_name().is_some_and(|n| n == *s))
                {
                    dirs.push(path);
                }
            } else if keep(&path) {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

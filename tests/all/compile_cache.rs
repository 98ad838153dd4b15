//! The compiled-plugin cache's checks before it loads an entry (which runs the entry's native
//! code): an entry whose sha-256 is not the one recorded when it was written, or that another
//! user could have written, or in a directory another user could write, is never loaded; the
//! plugin is compiled again and its result is the same. Through the real binary and a bundled
//! plugin, reading whether each load came from the cache in the report (`load.cached`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support;

/// `plugin run hello -o json` with the cache in `cache`: the report and what was logged.
fn run_hello(cache: &Path) -> (serde_json::Value, String) {
    let output = support::factbuoy()
        .env("FACTBUOY_CACHE_DIR", cache)
        // As agents run on a Kubernetes node, whose cache outlives them.
        .env("FACTBUOY_CACHE_VERIFY", "1")
        .args(["plugin", "run", "hello", "-o", "json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["succeeded"], true, "{report:#}");
    (report, stderr)
}

/// Whether the report's plugin was loaded from the cache.
fn cached(report: &serde_json::Value) -> bool {
    report["load"]["cached"]
        .as_bool()
        .unwrap_or_else(|| panic!("no load.cached in {report:#}"))
}

/// What the plugin wrote: each artifact's name and content.
fn artifacts(report: &serde_json::Value) -> Vec<(String, String)> {
    report["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["name"].to_string(), a["content"].to_string()))
        .collect()
}

/// The engine's directory in `cache` and the one entry in it.
fn engine_dir_and_entry(cache: &Path) -> (PathBuf, PathBuf) {
    let entries: Vec<PathBuf> = support::files_below(cache, &[], |_| true)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    let [entry] = &entries[..] else {
        panic!("one entry expected: {entries:?}")
    };
    (entry.parent().unwrap().to_owned(), entry.clone())
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_tampered_cache_entry_is_refused_and_the_plugin_compiled_again_with_the_same_result() {
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let (first, _) = run_hello(&cache);
    assert!(!cached(&first), "an empty cache cannot have it");
    let (second, _) = run_hello(&cache);
    assert!(cached(&second), "the second load comes from the cache");
    let expected = artifacts(&first);
    assert_eq!(artifacts(&second), expected);

    // One byte of the compiled code changes, as a disk error or a hand with write access
    // would change it; wasmtime checks only the header.
    let (_, entry) = engine_dir_and_entry(&cache);
    let mut bytes = std::fs::read(&entry).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&entry, &bytes).unwrap();

    let (third, logged) = run_hello(&cache);
    assert!(!cached(&third), "the tampered entry was loaded");
    assert!(
        logged.contains("sha-256") && logged.contains(&entry.display().to_string()),
        "the refusal is logged naming the entry: {logged}"
    );
    assert_eq!(artifacts(&third), expected);
    // Compiled again, the entry is whole again and used.
    assert_ne!(std::fs::read(&entry).unwrap(), bytes);
    let (fourth, _) = run_hello(&cache);
    assert!(cached(&fourth));
    assert_eq!(artifacts(&fourth), expected);
}

#[test]
fn a_cache_entry_or_directory_another_user_could_write_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    run_hello(&cache);
    let (engine_dir, entry) = engine_dir_and_entry(&cache);
    assert!(cached(&run_hello(&cache).0));

    // An entry others may write: removed and compiled again, then written 0600.
    chmod(&entry, 0o666);
    let (report, logged) = run_hello(&cache);
    assert!(!cached(&report), "an entry writable by others was loaded");
    assert!(logged.contains("writable by other users"), "{logged}");
    assert_eq!(
        std::fs::metadata(&entry).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(cached(&run_hello(&cache).0));

    // A directory others may write (the engine's, then the cache's own): nothing in it is
    // loaded, nor stored, until it is private again.
    for dir in [&engine_dir, &cache] {
        chmod(dir, 0o777);
        for _ in 0..2 {
            let (report, logged) = run_hello(&cache);
            assert!(
                !cached(&report),
                "loaded from {} while others may write it",
                dir.display()
            );
            assert!(logged.contains("writable by other users"), "{logged}");
        }
        chmod(dir, 0o700);
        assert!(cached(&run_hello(&cache).0));
    }

    // Another user's entry (only root can make one to test with).
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(&entry, Some(65532), None).unwrap();
        let (report, logged) = run_hello(&cache);
        assert!(!cached(&report), "another user's entry was loaded");
        assert!(logged.contains("belongs to uid 65532"), "{logged}");
        assert!(cached(&run_hello(&cache).0));
    }
}

//! The real `factbuoy` binary: plugin commands, their errors and exit codes.

mod support;

use std::path::Path;
use std::process::{Command, Output};

fn factbuoy(args: &[&str]) -> Output {
    support::factbuoy()
        .args(args)
        .output()
        .expect("running factbuoy")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn lists_and_describes_the_bundled_plugins() {
    let output = factbuoy(&["plugin", "list"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("hello"));

    let output = factbuoy(&["plugin", "info", "hello", "-o", "json"]);
    let info: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(info["name"], "hello");
    assert_eq!(info["parameters"][0]["name"], "greeting");
    assert_eq!(info["parameters"][0]["type"], "string");
    assert_eq!(info["capabilities"][0]["capability"], "host-info");
}

#[test]
fn runs_a_bundled_plugin_and_writes_its_artifacts() {
    let out = tempfile::tempdir().unwrap();
    let output = factbuoy(&[
        "plugin",
        "run",
        "hello",
        "-p",
        "greeting=ahoy",
        "--out",
        path_str(out.path()),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("hello 0.1.0: succeeded"));
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("greeting.json")).unwrap()).unwrap();
    assert_eq!(written["greeting"], "ahoy");

    let output = factbuoy(&["plugin", "run", "hello", "-o", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["succeeded"], true);
    assert_eq!(report["artifacts"][0]["content"]["greeting"], "hello");
    assert_eq!(report["artifacts"][0]["sha256"].as_str().unwrap().len(), 64);
}

#[test]
fn parameters_are_checked_before_the_run() {
    let hostile = support::fixture("hostile");
    let output = factbuoy(&[
        "plugin",
        "run",
        path_str(&hostile),
        "-p",
        "count=many",
        "-p",
        "colour=red",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(message.contains("unknown parameter `colour`"), "{message}");
    assert!(
        message.contains("parameter `count` expects an integer, got \"many\""),
        "{message}"
    );
    assert!(
        message.contains("missing required parameter `mode`"),
        "{message}"
    );

    let output = factbuoy(&["plugin", "run", "hello", "-p", "nonsense"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("expected NAME=VALUE"));
}

#[test]
fn a_failed_plugin_exits_1_and_says_why() {
    let output = factbuoy(&["plugin", "run", "hello", "--deny", "host-info"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("needs capabilities that were not granted: host-info"),
        "{}",
        stderr(&output)
    );

    // A plugin from a file is granted nothing unless asked.
    let hostile = support::fixture("hostile");
    let output = factbuoy(&[
        "plugin",
        "run",
        path_str(&hostile),
        "-p",
        "mode=host-info",
        "-o",
        "json",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["failure"]["kind"], "capability-denied");
}

#[test]
fn a_plugin_built_against_an_older_0_1_contract_still_runs() {
    // Its imports and export are named @0.1.0; this host implements a later 0.1.x.
    let old = support::fixture("contract-0-1-0");
    let output = factbuoy(&[
        "plugin",
        "run",
        path_str(&old),
        "--grant",
        "host-info",
        "-o",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["succeeded"], true, "{report}");
    // The text "<seconds>" reads as a JSON number in the report.
    assert!(report["artifacts"][0]["content"].is_u64(), "{report}");
}

#[test]
fn files_that_are_not_gatherers_are_rejected_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.wasm");
    std::fs::write(&text, "just text").unwrap();
    // The smallest valid core module: magic and version.
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let command = support::fixture("not-a-gatherer");
    let future = support::fixture("future-contract");
    let cases = [
        (text.as_path(), "not a WebAssembly file"),
        (
            core.as_path(),
            "is a core WebAssembly module, not a component",
        ),
        (
            command.as_path(),
            "is not a factbuoy gatherer: it does not export `factbuoy:plugin/plugin`",
        ),
        (
            future.as_path(),
            "was built against factbuoy:plugin@9.0.0, but this factbuoy implements factbuoy:plugin@0.1.2",
        ),
        (
            Path::new("/nonexistent/plugin.wasm"),
            "cannot read the plugin",
        ),
    ];
    for (path, expected) in cases {
        for verb in ["validate", "run"] {
            let output = factbuoy(&["plugin", verb, path_str(path)]);
            assert_eq!(output.status.code(), Some(2), "{verb} {}", path.display());
            let message = stderr(&output);
            assert!(message.contains(path_str(path)), "{verb}: {message}");
            assert!(message.contains(expected), "{verb}: {message}");
        }
    }
    let output = factbuoy(&["plugin", "validate", path_str(&support::fixture("hostile"))]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("valid factbuoy gatherer hostile 0.1.0"));
}

#[test]
fn an_unknown_plugin_name_lists_the_bundled_ones() {
    let output = factbuoy(&["plugin", "info", "nosuch"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("no bundled plugin is named \"nosuch\""));
    assert!(stderr(&output).contains("hello"));
}

#[test]
fn prints_shell_completions() {
    let output = factbuoy(&["completions", "bash"]);
    assert!(output.status.success());
    assert!(stdout(&output).contains("factbuoy__subcmd__plugin__subcmd__run"));
}

#[test]
fn falls_back_to_on_demand_allocation_in_a_small_address_space() {
    // 2 GB of address space cannot hold the instance pool (hundreds of GB reserved).
    let script = format!(
        "ulimit -v 2000000 && exec '{}' -v plugin run hello -o json",
        env!("CARGO_BIN_EXE_factbuoy")
    );
    let output = Command::new("sh")
        .args(["-c", &script])
        .env("FACTBUOY_CACHE_DIR", support::cache_dir())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("allocating on demand"),
        "{}",
        stderr(&output)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["succeeded"], true);
}

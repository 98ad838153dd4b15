//! The real `factbuoy` binary: plugin commands, their errors and exit codes.

use crate::support;

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

    // The error shows a real example, not a placeholder.
    let output = factbuoy(&["plugin", "run", "hello", "-p", "nonsense"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("expected PLUGIN:NAME=VALUE, e.g. setup:gather_subset=network"),
        "{message}"
    );
    assert!(!message.contains('{'), "{message}");
}

#[test]
fn plugin_run_takes_parameters_and_grants_in_the_plugin_scoped_form_run_takes() {
    let output = factbuoy(&[
        "plugin",
        "run",
        "hello",
        "-p",
        "hello:greeting=ahoy",
        "--deny",
        "hello:read:/nowhere",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("ahoy"), "{}", stdout(&output));

    // Scoped to another plugin: refused, saying which plugin runs.
    let output = factbuoy(&["plugin", "run", "hello", "-p", "setup:greeting=ahoy"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains(
            "setup:greeting=ahoy is for plugin \"setup\", but this command runs \"hello\""
        ),
        "{message}"
    );
}

#[test]
fn a_required_capability_left_ungranted_stops_before_the_run_with_the_flag_that_fixes_it() {
    // `plugin run`: denied by hand.
    let output = factbuoy(&["plugin", "run", "hello", "--deny", "hello:host-info"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains(
            "plugin \"hello\" requires host-info, which it is not granted: add --grant hello:host-info"
        ),
        "{message}"
    );

    // `run`: a plugin from a file gets nothing unless granted; nothing starts, no run is made.
    let uptime = support::fixture("contract-0-1-0");
    let state = tempfile::tempdir().unwrap();
    let output = support::factbuoy()
        .env("FACTBUOY_STATE_DIR", state.path())
        .args(["run", "--plugin", path_str(&uptime), "--out"])
        .arg(state.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains(
            "plugin \"contract-0-1-0\" requires host-info, which it is not granted: \
             add --grant contract-0-1-0:host-info"
        ),
        "{message}"
    );
    assert!(
        !state.path().join("runs").exists(),
        "a run directory was made before the grants were checked"
    );

    // The flag the message names is the one that works, in both commands.
    let output = factbuoy(&[
        "plugin",
        "run",
        path_str(&uptime),
        "--grant",
        "contract-0-1-0:host-info",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let output = support::factbuoy()
        .env("FACTBUOY_STATE_DIR", state.path())
        .args(["run", "--plugin", path_str(&uptime)])
        .args(["--grant", "contract-0-1-0:host-info", "--out"])
        .arg(state.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
}

#[test]
fn a_failed_plugin_exits_1_and_says_why() {
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
fn a_secret_parameter_is_read_from_a_file_or_the_environment_and_never_echoed() {
    let hostile = support::fixture("hostile");
    const SECRET: &str = "s3cr3t-Zq7";
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{SECRET}\n")).unwrap();
    let from_file = format!("token=@{}", file.display());
    let run = |token: &str, env: Option<(&str, &str)>| {
        let mut command = support::factbuoy();
        command.args(["plugin", "run", path_str(&hostile), "-o", "json"]);
        command.args(["-p", "mode=budget-secret", "-p", token]);
        if let Some((name, value)) = env {
            command.env(name, value);
        }
        command.output().unwrap()
    };
    let expected: String = SECRET.chars().rev().collect();
    for output in [
        run(&from_file, None),
        run(
            "token=env:FACTBUOY_TEST_TOKEN",
            Some(("FACTBUOY_TEST_TOKEN", SECRET)),
        ),
    ] {
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(
            !stderr(&output).contains("command line"),
            "{}",
            stderr(&output)
        );
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let probe = report["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == "probe.json")
            .unwrap_or_else(|| panic!("no probe.json: {report}"));
        assert_eq!(
            probe["content"]["token_reversed"],
            expected.as_str(),
            "{report}"
        );
        assert_eq!(probe["content"]["token_len"], SECRET.len(), "{report}");
    }
    // Written on the command line it is taken, with a warning; missing sources are named,
    // their would-be value never shown.
    let literal = run(&format!("token={SECRET}"), None);
    assert!(literal.status.success());
    assert!(
        stderr(&literal).contains("written on the command line")
            && !stderr(&literal).contains(SECRET),
        "{}",
        stderr(&literal)
    );
    let missing = run("token=env:FACTBUOY_TEST_UNSET_TOKEN", None);
    assert_eq!(missing.status.code(), Some(2));
    // -o json: the error is a document on stdout.
    assert!(
        stdout(&missing).contains("FACTBUOY_TEST_UNSET_TOKEN, which is not set"),
        "{}",
        stdout(&missing)
    );
    std::fs::remove_file(&file).unwrap();
    let gone = run(&from_file, None);
    assert_eq!(gone.status.code(), Some(2));
    assert!(
        stdout(&gone).contains(&format!("from {}", file.display())),
        "{}",
        stdout(&gone)
    );
}

/// `plugin run PLUGIN --grant GRANT -o json`, which must succeed: its report.
fn passing_run(plugin: &Path, grant: &str) -> serde_json::Value {
    let output = factbuoy(&[
        "plugin",
        "run",
        path_str(plugin),
        "--grant",
        grant,
        "-o",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn the_readmes_plugin_example_builds_and_runs_as_the_readme_says() {
    // tests/plugins/uptime compiles the README's code block itself (its build.rs copies it).
    let report = passing_run(&support::fixture("uptime"), "uptime:host-info");
    assert_eq!(report["plugin"], "uptime", "{report}");
    assert_eq!(report["artifacts"][0]["name"], "uptime.json", "{report}");
    let seconds = &report["artifacts"][0]["content"]["seconds"];
    assert!(seconds.as_u64().is_some_and(|s| s > 0), "{report}");
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
            "was built against factbuoy:plugin@9.0.0, which this factbuoy does not support: \
             it supports factbuoy:plugin 0.1 (0.1.0, 0.1.1, 0.1.2), factbuoy:plugin 0.2 (0.2.0); rebuild the plugin against \
             one of them",
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
fn a_missing_kubeconfig_is_said_once_with_the_flags_that_name_one() {
    let state = tempfile::tempdir().unwrap();
    let missing = state.path().join("no-such-kubeconfig");
    let output = support::factbuoy()
        .env("FACTBUOY_STATE_DIR", state.path())
        .env("KUBECONFIG", &missing)
        .args(["delete", "0123456789ab"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let said = stderr(&output);
    assert_eq!(said.lines().count(), 1, "{said}");
    for once in [
        "reading the kubeconfig",
        "No such file",
        "--kubeconfig or $KUBECONFIG",
    ] {
        assert_eq!(said.matches(once).count(), 1, "{once:?} in {said}");
    }
}

#[test]
fn prints_shell_completions_that_complete_bundled_plugin_names() {
    let output = factbuoy(&["completions", "bash"]);
    assert!(output.status.success());
    let script = stdout(&output);
    assert!(script.contains("factbuoy__subcmd__plugin__subcmd__run"));
    // `--plugin` and `plugin info` offer the bundled plugins.
    assert!(
        script.contains("compgen -W \"hello host-facts setup systemd-logs\""),
        "{script}"
    );
}

#[test]
fn a_closed_pipe_ends_output_quietly() {
    // `factbuoy completions bash | head -1` and the like: the reader is gone before the first
    // write (its end of the pipe is closed before the command starts), so every write fails.
    for args in [
        &["completions", "bash"][..],
        &["man"],
        &["plugin", "list", "-o", "json"],
        &["plugin", "info", "hello"],
        &["version"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = support::factbuoy()
            .args(args)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).is_empty(), "{args:?}: {}", stderr(&output));
    }
}

#[test]
fn prints_a_man_page_and_the_versions() {
    let output = factbuoy(&["man"]);
    assert!(output.status.success());
    let page = stdout(&output);
    assert!(page.contains(".TH factbuoy 1"), "{page}");
    assert!(page.contains("Exit codes"), "{page}");

    let output = factbuoy(&["version", "-o", "json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let version: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(version["client"], env!("CARGO_PKG_VERSION"));
    let contract = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit/gatherer.wit"),
    )
    .unwrap();
    assert!(
        contract.contains(&format!(
            "package factbuoy:plugin@{};",
            version["contract"].as_str().unwrap()
        )),
        "{version}"
    );
    let names: Vec<&str> = version["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["hello", "host-facts", "setup", "systemd-logs"]);
}

/// `factbuoy man --dir` writes a page for every command, and every page another page names
/// (`factbuoy-inspect(1)`) is among them; `factbuoy man inspect summary` prints one of them.
#[test]
fn every_page_the_man_pages_name_exists_and_each_prints_alone() {
    let dir = tempfile::tempdir().unwrap();
    let output = factbuoy(&["man", "--dir", path_str(dir.path())]);
    assert!(output.status.success(), "{}", stderr(&output));
    let mut written: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(
        stdout(&output).lines().count(),
        written.len(),
        "{written:?}"
    );
    for page in [
        "factbuoy.1",
        "factbuoy-run.1",
        "factbuoy-inspect-summary.1",
        "factbuoy-plugin-cache-prune.1",
    ] {
        assert!(
            written.iter().any(|w| w == page),
            "{page} not in {written:?}"
        );
    }
    assert!(!written.iter().any(|w| w.contains("help")), "{written:?}");
    for page in &written {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        // roff writes a name's dashes as `\-`: `factbuoy\-inspect(1)`.
        let named = text
            .split_whitespace()
            .filter_map(|word| word.split_once("(1)"));
        for (name, _) in named.filter(|(name, _)| name.starts_with("factbuoy")) {
            let name = name.replace("\\-", "-");
            assert!(
                written.contains(&format!("{name}.1")),
                "{page} names {name}(1), which was not written"
            );
        }
    }

    let output = factbuoy(&["man", "inspect", "summary"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        std::fs::read_to_string(dir.path().join("factbuoy-inspect-summary.1")).unwrap()
    );
    let output = factbuoy(&["man", "inspekt"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no command `inspekt`; its pages: run, status"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn every_command_documents_examples_and_help_documents_exit_codes() {
    let top = factbuoy(&["--help"]);
    let help = stdout(&top);
    for code in [
        "0  success",
        "1  a plugin",
        "2  invalid input",
        "3  not ready",
        "4  no such run",
    ] {
        assert!(help.contains(code), "{help}");
    }
    // Every subcommand, however deep, shows examples in its --help.
    let mut missing = Vec::new();
    let mut pending: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(path) = pending.pop() {
        let mut args = path.clone();
        args.push("--help".into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let help = stdout(&factbuoy(&args));
        if !help.contains("Examples:") {
            missing.push(path.join(" "));
        }
        // Subcommands are listed under "Commands:", up to the next blank line.
        if let Some(commands) = help.split("Commands:\n").nth(1) {
            // A command's line starts with two spaces; its wrapped description, with more.
            let lines = commands.lines().take_while(|l| !l.trim().is_empty());
            for line in lines.filter(|l| !l.starts_with("   ")) {
                let name = line.split_whitespace().next().unwrap_or_default();
                if !name.is_empty() && name != "help" {
                    let mut next = path.clone();
                    next.push(name.to_owned());
                    pending.push(next);
                }
            }
        }
    }
    assert!(missing.is_empty(), "no examples in --help of: {missing:?}");
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

/// A cached plugin loaded from a file is not read again while the file is unchanged; a file
/// rewritten in place with the same size and modification time is still noticed (by its change
/// time) and compiled anew, never run from the old digest.
#[test]
fn a_plugin_file_rewritten_in_place_is_read_again_even_with_its_old_size_and_time() {
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let plugin = work.path().join("plugin.wasm");
    let original = std::fs::read(support::fixture("uptime")).unwrap();
    std::fs::write(&plugin, &original).unwrap();
    let info = || {
        let output = support::factbuoy()
            .args([
                "plugin",
                "info",
                path_str(&plugin),
                "-o",
                "json",
                "--cache-dir",
            ])
            .arg(&cache)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr(&output));
    };
    let compiled = || {
        support::files_below(&cache, &[], |_| true)
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
            .count()
    };
    info();
    info();
    assert_eq!(compiled(), 1);
    assert!(
        support::files_below(&cache, &[], |_| true)
            .iter()
            .any(|p| p.to_string_lossy().contains("/digests/")),
        "no digest was remembered"
    );

    // The same size: one character of the producers section's rustc version changes.
    let mut rewritten = original.clone();
    let at = rewritten
        .windows(9)
        .position(|w| w == b"rustc\x1d1.")
        .or_else(|| rewritten.windows(6).position(|w| w == b"rustc\x1d"))
        .expect("the fixture names rustc in its producers section")
        + 6;
    rewritten[at] = if rewritten[at] == b'9' { b'8' } else { b'9' };
    let modified = std::fs::metadata(&plugin).unwrap().modified().unwrap();
    std::fs::write(&plugin, &rewritten).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&plugin)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    assert_eq!(
        std::fs::metadata(&plugin).unwrap().modified().unwrap(),
        modified
    );
    info();
    assert_eq!(compiled(), 2, "the rewritten file ran from the old digest");
}

/// `plugin cache list -o json` of the cache in `cache`.
fn cache_listing(cache: &Path) -> serde_json::Value {
    let output = factbuoy(&[
        "plugin",
        "cache",
        "list",
        "-o",
        "json",
        "--cache-dir",
        path_str(cache),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The plugins named in a `plugin cache list -o json`, least recently used first.
fn cached_plugins(listing: &serde_json::Value) -> Vec<String> {
    listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            e["plugin"]
                .as_str()
                .unwrap_or("?")
                .split(' ')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// `plugin info PLUGIN` with the cache `cache` kept under `max_bytes` (none: the default).
fn load_into(cache: &Path, plugin: &str, max_bytes: Option<u64>) {
    let mut command = support::factbuoy();
    command.args(["plugin", "info", plugin, "--cache-dir", path_str(cache)]);
    if let Some(max) = max_bytes {
        command.env("FACTBUOY_CACHE_MAX_SIZE", max.to_string());
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
}

/// The cache keeps under its size (`FACTBUOY_CACHE_MAX_SIZE`) by removing the least recently
/// used plugin, where a load from the cache counts as a use.
#[test]
fn the_compilation_cache_stays_under_its_size_without_the_least_recently_used() {
    let work = tempfile::tempdir().unwrap();
    // The sizes of the three compiled plugins, measured in a cache of their own.
    let measure = work.path().join("measure");
    for plugin in ["hello", "host-facts", "systemd-logs"] {
        load_into(&measure, plugin, None);
    }
    let sizes: std::collections::HashMap<String, u64> = cache_listing(&measure)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let name = e["plugin"].as_str().unwrap().split(' ').next().unwrap();
            (name.to_owned(), e["size_bytes"].as_u64().unwrap())
        })
        .collect();
    // Room for hello and the larger of the others, not for all three.
    let max = sizes["hello"] + sizes["host-facts"].max(sizes["systemd-logs"]);

    let cache = work.path().join("cache");
    load_into(&cache, "hello", Some(max));
    load_into(&cache, "host-facts", Some(max));
    // hello is used again, so host-facts is now the least recently used...
    load_into(&cache, "hello", Some(max));
    load_into(&cache, "systemd-logs", Some(max));
    // ...and the one removed to make room.
    let listing = cache_listing(&cache);
    assert_eq!(
        cached_plugins(&listing),
        ["hello", "systemd-logs"],
        "{listing:#}"
    );
    assert!(
        listing["total_bytes"].as_u64().unwrap() <= max,
        "{listing:#}"
    );
}

#[test]
fn plugin_cache_lists_its_plugins_and_prunes_them_to_a_size() {
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    for plugin in ["hello", "host-facts"] {
        load_into(&cache, plugin, None);
    }
    // An entry an older factbuoy left (another engine's directory) is listed as such.
    let old = cache.join("00000000deadbeef");
    std::fs::create_dir_all(&old).unwrap();
    let entry = old.join(format!("{}.cwasm", "ab".repeat(32)));
    std::fs::write(&entry, b"old code").unwrap();
    let long_ago = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30);
    std::fs::File::open(&entry)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();

    let output = factbuoy(&["plugin", "cache", "list", "--cache-dir", path_str(&cache)]);
    assert!(output.status.success(), "{}", stderr(&output));
    let table = stdout(&output);
    assert!(table.starts_with("PLUGIN "), "{table}");
    assert!(table.contains("hello 0.1.0 "), "{table}");
    assert!(
        table.contains("abababababab (another factbuoy version's)"),
        "{table}"
    );
    assert!(table.contains("3 compiled plugins"), "{table}");

    // The other version's entry goes, then the least recently used (hello) to fit 1 byte more
    // than host-facts; --dry-run only says so.
    let listing = cache_listing(&cache);
    let host_facts = listing["entries"][2]["size_bytes"].as_u64().unwrap();
    assert_eq!(
        cached_plugins(&listing),
        ["?", "hello", "host-facts"],
        "{listing:#}"
    );
    let max = (host_facts + 1).to_string();
    let prune = |extra: &[&str]| {
        let mut args = vec!["plugin", "cache", "prune", "--max-size", &max, "-o", "json"];
        args.extend(extra);
        args.extend(["--cache-dir", path_str(&cache)]);
        let output = factbuoy(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let dry = prune(&["--dry-run"]);
    assert_eq!(dry["removed"].as_array().unwrap().len(), 2, "{dry:#}");
    assert_eq!(
        cache_listing(&cache)["entries"].as_array().unwrap().len(),
        3
    );
    let pruned = prune(&[]);
    assert_eq!(pruned["removed"], dry["removed"], "{pruned:#}");
    assert_eq!(cached_plugins(&cache_listing(&cache)), ["host-facts"]);

    let output = factbuoy(&[
        "plugin",
        "cache",
        "prune",
        "--all",
        "--cache-dir",
        path_str(&cache),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("removed 1 compiled plugin,"),
        "{}",
        stdout(&output)
    );
    assert_eq!(cache_listing(&cache)["entries"], serde_json::json!([]));
}

/// A granted path missing on this host is noted when the operator granted it by name, and not
/// when a bundled plugin only asked for it (`setup` asks for /dev/disk, which containers lack).
#[test]
fn a_missing_path_is_noted_only_when_the_operator_granted_it() {
    let root = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "plugin",
            "run",
            "host-facts",
            "--root",
            path_str(root.path()),
        ];
        args.extend(["--out", path_str(out.path())]);
        args.extend(extra);
        let output = factbuoy(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        stdout(&output) + &stderr(&output)
    };
    let said = run(&[]);
    assert!(!said.contains("does not exist below the root"), "{said}");
    let said = run(&["--grant", "host-facts:read:/etc"]);
    let notes: Vec<&str> = said.lines().filter(|l| l.contains("note:")).collect();
    assert_eq!(
        notes,
        ["  note: granted /etc does not exist below the root; nothing mapped"],
        "{said}"
    );

    if !Path::new("/dev/disk").exists() {
        let output = factbuoy(&["plugin", "run", "setup", "--out", path_str(out.path())]);
        assert!(output.status.success(), "{}", stderr(&output));
        let said = stdout(&output) + &stderr(&output);
        assert!(!said.contains("/dev/disk"), "{said}");
    }
}

/// An error names its OS cause once: each error type either shows its cause or hands it on as
/// its source, never both (which printed `No such file or directory (os error 2): No such file
/// or directory (os error 2)`).
#[test]
fn an_error_names_its_os_cause_once() {
    let state = tempfile::tempdir().unwrap();
    for args in [
        &[
            "agent",
            "--aggregator",
            "127.0.0.1:1",
            "--node",
            "n1",
            "--credentials",
            "/nonexistent",
        ][..],
        &["plugin", "run", "/nonexistent.wasm"],
        &["inspect", "summary", "/nonexistent.tar.gz"],
        &["run", "--fleet", "127.0.0.1:9", "--plugin", "hello"],
    ] {
        let output = support::factbuoy()
            .args(args)
            .env("FACTBUOY_STATE_DIR", state.path())
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?}");
        let said = stderr(&output);
        assert_eq!(said.matches("(os error 2)").count(), 1, "{args:?}: {said}");
    }
}

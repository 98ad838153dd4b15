//! Plugins in other languages than Rust, and a plugin author's first steps, through the real
//! binary: the Python example plugin built from source with real componentize-py; a hostile
//! Python plugin contained exactly as its Rust twin; `plugin new` + `plugin build` for each
//! language, outside the repository.

use crate::support;

use std::path::Path;

use crate::support::authoring::{artifact, contract_of, path_str, run_json, stderr};
use crate::support::python;
use serde_json::Value;

#[test]
fn the_python_sdk_unit_tests_pass() {
    let bindings = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(python::venv_bin().join("componentize-py"))
        .arg("-d")
        .arg(support::workspace().join("wit"))
        .args(["-w", "gatherer", "bindings"])
        .arg(bindings.path().join("stubs"))
        .status()
        .unwrap();
    assert!(status.success(), "componentize-py bindings failed");
    let sdk = support::workspace().join("guest-sdk/python");
    let output = std::process::Command::new(python::venv_bin().join("python3"))
        .args(["-B", "-m", "unittest", "discover", "-s"])
        .arg(sdk.join("tests"))
        .env(
            "PYTHONPATH",
            std::env::join_paths([bindings.path().join("stubs"), sdk]).unwrap(),
        )
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("OK"), "{}", stderr(&output));
}

/// `factbuoy_plugin/host_info.pyi`, which tells editors what `host_info` offers, is what
/// guest-sdk/python/host_info_stub.py makes of componentize-py's bindings of the contract today,
/// and the package says it is typed.
#[test]
fn the_python_host_info_stub_is_current_with_the_contract() {
    let bindings = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(python::venv_bin().join("componentize-py"))
        .arg("-d")
        .arg(support::workspace().join("wit"))
        .args(["-w", "gatherer", "bindings"])
        .arg(bindings.path())
        .status()
        .unwrap();
    assert!(status.success(), "componentize-py bindings failed");
    let sdk = support::workspace().join("guest-sdk/python");
    let output = std::process::Command::new(python::venv_bin().join("python3"))
        .arg(sdk.join("host_info_stub.py"))
        .arg(bindings.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let committed = std::fs::read_to_string(sdk.join("factbuoy_plugin/host_info.pyi")).unwrap();
    assert!(
        String::from_utf8(output.stdout).unwrap() == committed,
        "guest-sdk/python/factbuoy_plugin/host_info.pyi is stale: run guest-sdk/python/host_info_stub.py"
    );
    assert!(
        committed.contains("def ethtool(name: str) -> EthtoolInfo:"),
        "{committed}"
    );
    assert!(sdk.join("factbuoy_plugin/py.typed").is_file());
}

#[test]
fn the_python_listening_sockets_example_finds_a_socket_this_test_opened() {
    let wasm = python::component(&support::workspace().join("plugins-python/listening-sockets"));
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let (tcp_port, udp_port) = (
        tcp.local_addr().unwrap().port(),
        udp.local_addr().unwrap().port(),
    );

    let (code, report) = run_json(&[path_str(&wasm), "--grant", "listening-sockets:read:/proc"]);
    assert_eq!(code, 0, "{report:#}");
    let sockets = artifact(&report, "sockets.json")["sockets"].clone();
    let has =
        |protocol: &str, port: u16| {
            sockets.as_array().unwrap().iter().any(|s| {
                s["protocol"] == protocol && s["address"] == "127.0.0.1" && s["port"] == port
            })
        };
    assert!(has("tcp", tcp_port), "tcp {tcp_port} missing: {sockets:#}");
    assert!(has("udp", udp_port), "udp {udp_port} missing: {sockets:#}");

    // A typed list parameter reaches the SDK's Params, and the plugin's own check refuses.
    let (code, report) = run_json(&[
        path_str(&wasm),
        "--grant",
        "listening-sockets:read:/proc",
        "-p",
        "protocols=tcp",
    ]);
    assert_eq!(code, 0, "{report:#}");
    let sockets = artifact(&report, "sockets.json")["sockets"].clone();
    assert!(
        sockets
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["protocol"] == "tcp"),
        "{sockets:#}"
    );
    let (code, report) = run_json(&[
        path_str(&wasm),
        "--grant",
        "listening-sockets:read:/proc",
        "-p",
        "protocols=sctp",
    ]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(
        report["failure"]["kind"], "invalid-parameters",
        "{report:#}"
    );
    assert!(
        report["failure"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown protocols sctp"),
        "{report:#}"
    );

    // The read grant it asks for is required: without it nothing runs, and the message says
    // which flag fixes it.
    let output = support::factbuoy()
        .args(["plugin", "run", path_str(&wasm)])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("add --grant listening-sockets:read:/proc"),
        "{}",
        stderr(&output)
    );
    drop((tcp, udp));
}

#[test]
fn a_hostile_python_plugin_is_contained_and_reported_as_a_rust_one() {
    let rust = support::fixture("hostile");
    let python = python::component(&support::workspace().join("tests/plugins-python/hostile"));

    // describe: the same parameters (types, required, defaults, secret), capabilities and
    // artifacts, as the host reads them.
    let contract = contract_of(&rust);
    assert_eq!(contract, contract_of(&python));
    assert_eq!(contract["parameters"][2]["type"], "integer", "{contract:#}");

    // The same limits, stopped and reported the same way: an endless loop, a memory bomb, and
    // an output flood.
    for (limit, args) in [
        ("deadline", ["-p", "mode=loop", "--deadline", "2s"]),
        ("memory", ["-p", "mode=alloc", "--memory", "128MiB"]),
        ("output", ["-p", "mode=flood", "--max-output", "4MiB"]),
    ] {
        let mut reports = Vec::new();
        for wasm in [&rust, &python] {
            let (code, report) = run_json(&[&[path_str(wasm)][..], &args[..]].concat());
            assert_eq!(code, 1, "{limit}: {report:#}");
            // Stopped promptly once running (the first load's compile is not part of the run).
            let ran_ms = report["duration_ms"].as_f64().unwrap();
            assert!(ran_ms < 10_000.0, "{limit}: ran {ran_ms} ms");
            reports.push(report["failure"].clone());
        }
        assert_eq!(reports[0]["kind"], "limit-exceeded", "{reports:#?}");
        assert_eq!(reports[0]["limit"], limit, "{reports:#?}");
        assert_eq!(reports[0]["kind"], reports[1]["kind"], "{reports:#?}");
        assert_eq!(reports[0]["limit"], reports[1]["limit"], "{reports:#?}");
        // The deadline's message is the same word for word; the memory one names the size of
        // the allocation that crossed the limit, which differs between the two runtimes.
        if limit == "deadline" {
            assert_eq!(reports[0]["message"], reports[1]["message"], "{reports:#?}");
        }
    }

    // The host refuses the same bad parameters with the same words, before either runs.
    for bad in [
        vec![],
        vec!["-p", "mode=fail", "-p", "count=many"],
        vec!["-p", "mode=fail", "-p", "colour=red"],
    ] {
        let messages: Vec<(Option<i32>, String)> = [&rust, &python]
            .iter()
            .map(|wasm| {
                let output = support::factbuoy()
                    .args(["plugin", "run", path_str(wasm)])
                    .args(&bad)
                    .output()
                    .unwrap();
                // A missing parameter's message ends with its description, which differs.
                let message = stderr(&output);
                let message = match message.split_once("(string): ") {
                    Some((head, _description)) => head.to_owned(),
                    None => message,
                };
                (output.status.code(), message)
            })
            .collect();
        assert_eq!(messages[0].0, Some(2), "{bad:?}: {messages:#?}");
        assert_eq!(messages[0], messages[1], "{bad:?}");
    }

    // A failure the plugin understood, and a capability it was not granted.
    for (args, kind) in [
        (["-p", "mode=fail"], "failed"),
        (["-p", "mode=host-info"], "capability-denied"),
    ] {
        let failures: Vec<Value> = [&rust, &python]
            .iter()
            .map(|wasm| run_json(&[&[path_str(wasm)][..], &args[..]].concat()).1["failure"].clone())
            .collect();
        assert_eq!(failures[0]["kind"], kind, "{failures:#?}");
        assert_eq!(failures[0], failures[1], "{args:?}");
    }

    // A Python exception is a bug, as a Rust panic: the run fails with its type and message.
    let (code, report) = run_json(&[path_str(&python), "-p", "mode=panic"]);
    assert_eq!(code, 1);
    assert_eq!(
        report["failure"]["message"], "RuntimeError: hostile plugin raised on purpose",
        "{report:#}"
    );
}

/// `factbuoy plugin new NAME --lang LANG` in a fresh directory outside the repository, then
/// `factbuoy plugin build` in the project: the printed component's path.
fn new_and_build(lang: &str, env: &[(&str, &std::ffi::OsStr)]) -> (tempfile::TempDir, String) {
    let home = tempfile::tempdir().unwrap();
    let name = format!("greeter-{lang}");
    let output = support::factbuoy()
        .current_dir(home.path())
        .args(["plugin", "new", &name, "--lang", lang])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let output = support::factbuoy()
        .current_dir(home.path().join(&name))
        .args(["plugin", "build"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let wasm = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    (home, wasm)
}

/// Runs the greeter `plugin new` writes and checks its greeting.
fn assert_greets(wasm: &str, name: &str) {
    let (code, report) = run_json(&[
        wasm,
        "--grant",
        &format!("{name}:host-info"),
        "-p",
        "greeting=ahoy",
    ]);
    assert_eq!(code, 0, "{report:#}");
    let greeting = artifact(&report, "greeting.json");
    assert_eq!(greeting["greeting"], "ahoy", "{greeting:#}");
    assert!(greeting["kernel"].is_string(), "{greeting:#}");
}

#[test]
fn a_new_python_project_builds_and_runs_outside_the_repository() {
    let path = python::path_with_venv();
    let (home, wasm) = new_and_build("python", &[("PATH", &path)]);
    assert!(
        wasm.ends_with("greeter-python/target/greeter-python.wasm"),
        "{wasm}"
    );
    assert!(!Path::new(&wasm).starts_with(support::workspace()));
    assert_greets(&wasm, "greeter-python");

    // Without componentize-py, the build says what is missing and how to install it.
    let project = home.path().join("greeter-python");
    assert_missing_toolchain(&project, "pip install componentize-py==0.25.1");

    // With it, a build that fails is a failed command (1), not invalid input (2).
    std::fs::write(project.join("app.py"), "import no_such_module\n").unwrap();
    let output = support::factbuoy()
        .current_dir(&project)
        .args(["plugin", "build"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("componentize-py failed"),
        "{}",
        stderr(&output)
    );
}

/// `plugin build` in `project` with componentize-py on PATH and `cache` as the compilation
/// cache: the output, and how long it took.
fn build_python(project: &Path, cache: &Path) -> (std::process::Output, std::time::Duration) {
    let started = std::time::Instant::now();
    let output = support::factbuoy()
        .current_dir(project)
        .args(["plugin", "build"])
        .env("PATH", python::path_with_venv())
        .env("FACTBUOY_CACHE_DIR", cache)
        .output()
        .unwrap();
    (output, started.elapsed())
}

/// The compiled entries in the compilation cache `cache`.
fn compiled(cache: &Path) -> usize {
    support::files_below(cache, &[], |p| p.extension().is_some_and(|e| e == "cwasm")).len()
}

/// A Python project is built again only when something it is built from changed (its files,
/// the SDK, the contract, componentize-py's version); a syntax error is reported at its line
/// before componentize-py's long step.
#[test]
fn a_python_project_is_built_only_when_it_changed_and_a_syntax_error_is_found_first() {
    let home = tempfile::tempdir().unwrap();
    let cache = home.path().join("cache");
    let output = support::factbuoy()
        .current_dir(home.path())
        .args(["plugin", "new", "greeter", "--lang", "python"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let project = home.path().join("greeter");
    let (output, first) = build_python(&project, &cache);
    assert!(output.status.success(), "{}", stderr(&output));
    let wasm = String::from_utf8(output.stdout).unwrap();
    let component = std::fs::read(wasm.trim()).unwrap();
    assert_eq!(compiled(&cache), 1);

    // Nothing changed, even if a file was written again: no build, the same component, no
    // new cache entry.
    let app = project.join("app.py");
    let source = std::fs::read_to_string(&app).unwrap();
    std::fs::write(&app, &source).unwrap();
    let (output, again) = build_python(&project, &cache);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("is up to date"),
        "{}",
        stderr(&output)
    );
    assert!(
        !stderr(&output).contains("componentize-py"),
        "{}",
        stderr(&output)
    );
    assert_eq!(String::from_utf8(output.stdout).unwrap(), wasm);
    assert_eq!(std::fs::read(wasm.trim()).unwrap(), component);
    assert_eq!(compiled(&cache), 1);
    eprintln!("first build {first:?}, unchanged {again:?}");
    assert!(again < std::time::Duration::from_secs(3), "{again:?}");

    // A change to the SDK in the project is a change: built again, a new entry.
    let sdk = project.join("factbuoy_plugin/log.py");
    std::fs::write(&sdk, std::fs::read_to_string(&sdk).unwrap() + "\n").unwrap();
    let (output, _) = build_python(&project, &cache);
    assert!(
        !stderr(&output).contains("is up to date"),
        "{}",
        stderr(&output)
    );
    assert_eq!(compiled(&cache), 2);

    // A syntax error: its file and line as Python reports them, no componentize-py, exit 1.
    let broken = source.replace(
        "    def gather(self, params):",
        "    def gather(self, params:",
    );
    let line = broken
        .lines()
        .position(|l| l.contains("def gather("))
        .unwrap()
        + 1;
    std::fs::write(&app, broken).unwrap();
    let (output, took) = build_python(&project, &cache);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(
        said.contains(&format!("File \"app.py\", line {line}")),
        "{said}"
    );
    assert!(said.contains("SyntaxError"), "{said}");
    assert!(!said.contains("building with"), "{said}");
    assert!(took < std::time::Duration::from_secs(3), "{took:?}");
}

/// `plugin build` in `project` without any toolchain on PATH exits 2, saying `install`.
fn assert_missing_toolchain(project: &Path, install: &str) {
    let output = support::factbuoy()
        .current_dir(project)
        .args(["plugin", "build"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains(install), "{}", stderr(&output));
}

#[test]
fn a_new_rust_project_builds_and_runs_outside_the_repository() {
    // A target directory kept between runs (outside the repository), so wit-bindgen and
    // serde_json are compiled once; the plugin itself is built every time.
    let target = std::env::temp_dir().join("factbuoy-plugin-new-target");
    let (home, wasm) = new_and_build("rust", &[("CARGO_TARGET_DIR", target.as_os_str())]);
    assert!(
        wasm.ends_with("wasm32-wasip2/release/greeter_rust.wasm"),
        "{wasm}"
    );
    assert_greets(&wasm, "greeter-rust");
    // The README's trait and macro, against the SDK copied into the project: nothing points
    // into a factbuoy checkout.
    let project = home.path().join("greeter-rust");
    let source = std::fs::read_to_string(project.join("src/lib.rs")).unwrap();
    assert!(source.contains("export_gatherer!(Greeter);"), "{source}");
    let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("factbuoy-guest = { path = \"factbuoy-guest\" }"),
        "{manifest}"
    );
    assert!(!manifest.contains(".."), "{manifest}");

    // Without Rust, the build says what is missing and how to install it.
    assert_missing_toolchain(&home.path().join("greeter-rust"), "https://rustup.rs");
}

/// The SDK's example in docs/plugins-python.md builds and does what it says: it lists the
/// host's file systems, leaving out the types `skip` names.
#[test]
fn the_python_sdk_example_in_the_docs_builds_and_lists_the_file_systems() {
    let project = tempfile::tempdir().unwrap();
    let app = support::authoring::doc_example("docs/plugins-python.md", "python");
    std::fs::write(project.path().join("app.py"), app).unwrap();
    let wasm = python::component(project.path());
    support::authoring::assert_lists_file_systems(&wasm, "file_system");
}

/// A Python plugin that fails as its `how` parameter asks: by raising, or by importing a module
/// that was not imported at build time.
const FAILING_APP: &str = r#"from factbuoy_plugin import Description, Gatherer, Param, export


class Failing(Gatherer):
    def describe(self):
        return Description("failing", "0.1.0", "Fails as asked.").param(
            Param.string("how").required().describe("raise, or import")
        )

    def gather(self, params):
        if params.string("how") == "import":
            import csv
        raise KeyError("on purpose")


Plugin = export(Failing)
"#;

/// An uncaught exception's traceback reaches the operator as lines (each frame, its source
/// line, the project's file names), the interpreter opens none of its own files at run time
/// (no "not granted" warnings), and an import of a module that was not bundled says what to do.
#[test]
fn a_python_traceback_is_lines_and_an_import_that_was_not_bundled_says_what_to_do() {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("app.py"), FAILING_APP).unwrap();
    let wasm = python::component(project.path());
    let line_of = |text: &str| FAILING_APP.lines().position(|l| l.contains(text)).unwrap() + 1;

    let (code, report) = run_json(&[path_str(&wasm), "-p", "how=raise"]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(
        report["failure"]["message"], "KeyError: 'on purpose'",
        "{report:#}"
    );
    assert_eq!(report["warnings"], serde_json::json!([]), "{report:#}");
    assert_eq!(
        report["ungranted_paths"],
        serde_json::json!([]),
        "{report:#}"
    );
    let traceback = report["logs"][0]["message"].as_str().unwrap();
    let frame = format!(
        "  File \"app.py\", line {}, in gather\n    raise KeyError(\"on purpose\")\n",
        line_of("raise KeyError")
    );
    assert!(
        traceback.starts_with("Traceback (most recent call last):\n"),
        "{traceback}"
    );
    assert!(traceback.contains(&frame), "{traceback}");
    assert!(!traceback.contains("/0/"), "{traceback}");
    assert!(
        !traceback.contains("factbuoy_plugin"),
        "the SDK's frames: {traceback}"
    );

    // On the terminal: the traceback as lines below its `error:` line, indented.
    let output = support::factbuoy()
        .args(["plugin", "run", path_str(&wasm), "-p", "how=import"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let said = stderr(&output);
    let frame = format!(
        "\n      File \"app.py\", line {}, in gather\n        import csv\n",
        line_of("import csv")
    );
    assert!(said.contains(&frame), "{said}");
    assert!(said.contains("import csv at the top of app.py"), "{said}");
    assert!(!said.contains("not granted"), "{said}");
    let (_, report) = run_json(&[path_str(&wasm), "-p", "how=import"]);
    assert!(
        report["failure"]["message"].as_str().unwrap().starts_with(
            "ModuleNotFoundError: No module named 'csv' (componentize-py bundles only"
        ),
        "{report:#}"
    );
    assert_eq!(report["warnings"], serde_json::json!([]), "{report:#}");
}

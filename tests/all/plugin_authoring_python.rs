//! What only Python plugins have, through the real binary: the Python SDK's own unit tests, its
//! typed stub of `host_info`, the example plugin built from source with real componentize-py,
//! and tracebacks. A Python author's first steps (`plugin new`, `plugin build`, the hostile
//! twin) are in `plugin_authoring.rs`, shared with the other languages.

use crate::support;

use crate::support::authoring::{
    assert_an_edit_runs_without_a_build, assert_grant_required, path_str, plugin_new, run_json,
    run_project, stderr, table_rows,
};
use crate::support::python;

/// componentize-py's Python bindings of the contract, in a fresh directory.
fn bindings() -> tempfile::TempDir {
    let bindings = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(python::venv_bin().join("componentize-py"))
        .arg("-d")
        .arg(support::workspace().join("wit"))
        .args(["-w", "gatherer", "bindings"])
        .arg(bindings.path())
        .status()
        .unwrap();
    assert!(status.success(), "componentize-py bindings failed");
    bindings
}

#[test]
fn the_python_sdk_unit_tests_pass() {
    let bindings = bindings();
    let sdk = support::workspace().join("guest-sdk/python");
    let output = std::process::Command::new(python::venv_bin().join("python3"))
        .args(["-B", "-m", "unittest", "discover", "-s"])
        .arg(sdk.join("tests"))
        .env(
            "PYTHONPATH",
            std::env::join_paths([bindings.path().to_owned(), sdk]).unwrap(),
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
    let bindings = bindings();
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
    let sockets = serde_json::Value::Array(table_rows(&report, "sockets.jsonl"));
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
    let sockets = serde_json::Value::Array(table_rows(&report, "sockets.jsonl"));
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

    assert_grant_required(&wasm, "listening-sockets:read:/proc");
    drop((tcp, udp));
}

/// A custom plugin's table is a table of `inspect sql`, named after the plugin and the
/// artifact, with a node column and a column per field: what docs/inspect.md shows.
#[test]
fn the_python_examples_table_is_an_sql_table_of_its_bundle() {
    let wasm = python::component(&support::workspace().join("plugins-python/listening-sockets"));
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let output = support::factbuoy()
        .env("FACTBUOY_STATE_DIR", dir.path().join("state"))
        .args(["run", "--node", "this-host", "--plugin", path_str(&wasm)])
        .args([
            "--grant",
            "listening-sockets:read:/proc",
            "-o",
            "json",
            "--out",
        ])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let run: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let bundle = run["bundle"]["path"].as_str().unwrap().to_owned();

    let query = format!(
        "SELECT node, protocol, address, port FROM listening_sockets_sockets WHERE port = {port}"
    );
    let output = support::factbuoy()
        .args(["inspect", "sql", &bundle, &query, "-o", "json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        answer["rows"],
        serde_json::json!([["this-host", "tcp", "127.0.0.1", port]]),
        "{answer:#}"
    );
    drop(tcp);
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

/// docs/plugins-python.md's commands to type-check a project, run in a project `plugin new`
/// wrote:
/// `mypy --strict` finds no error in the app nor in the SDK copied beside it, and finds a
/// misspelt field of a `host_info` record.
#[test]
fn a_new_python_project_passes_mypy_strict_with_its_sdk() {
    let home = tempfile::tempdir().unwrap();
    let project = plugin_new(home.path(), "typed", "python");
    let (code, said) = type_check(&project, &[]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("Success: no issues found"), "{said}");

    std::fs::write(
        project.join("misspelt.py"),
        "from factbuoy_plugin import host_info\n\nprint(host_info.os().host_name)\n",
    )
    .unwrap();
    let (code, said) = type_check(&project, &[]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("misspelt.py:3: error: \"OsInfo\" has no attribute \"host_name\""),
        "{said}"
    );
}

/// Runs docs/plugins-python.md's type check (its block fenced `sh mypy`) in `project`, with
/// the toolchain venv's componentize-py and mypy, `flags` added to mypy's: the exit code, and
/// what mypy said.
fn type_check(project: &std::path::Path, flags: &[&str]) -> (Option<i32>, String) {
    let commands = support::authoring::doc_example("docs/plugins-python.md", "sh mypy");
    assert!(commands.contains("mypy --strict "), "{commands}");
    let commands = commands.replace(
        "mypy --strict ",
        &format!("mypy --strict {} ", flags.join(" ")),
    );
    let output = std::process::Command::new("sh")
        .args(["-ec", &commands])
        .current_dir(project)
        .env("PATH", python::path_with_venv())
        .output()
        .unwrap();
    let said = support::authoring::said(&output);
    (output.status.code(), said)
}

/// A plugin that declares its artifacts with `Description.artifact`'s deprecated form.
const OLD_FORM_APP: &str = r#"from factbuoy_plugin import Description, Gatherer, Params, export, output


class OldForm(Gatherer):
    def describe(self) -> Description:
        return (
            Description("old-form", "0.1.0", "Declares its artifacts as a 0.1 plugin did.")
            .artifact("facts.json", "application/json", "a document")
            .artifact("rows.jsonl", "application/jsonl", "rows")
            .artifact("notes.txt", "text/plain", "text")
            .artifact("charset.json", "Application/JSON; charset=utf-8", "")
            .artifact("vendor.json", "application/vnd.example+json", "")
            .artifact("rows.ndjson", "application/x-ndjson", "")
            .artifact("rows.jsonlines", "application/jsonlines", "")
            .artifact("text.json", "text/json", "")
        )

    def gather(self, params: Params) -> None:
        output.write_json("facts.json", {"answer": 42})
        output.write_json_lines("rows.jsonl", [{"n": 1}])
        output.write_text("notes.txt", "kept\n")


Plugin = export(OldForm)
"#;

/// A plugin written against the Python SDK before contract 0.2, with `artifact(name,
/// media_type, description)`, still type-checks, builds and runs: each artifact gets the kind
/// its media type implies. mypy names the deprecated form when its `deprecated` check is on.
#[test]
fn a_python_plugin_with_the_deprecated_artifact_form_builds_runs_and_is_flagged() {
    let home = tempfile::tempdir().unwrap();
    let project = plugin_new(home.path(), "old-form", "python");
    std::fs::write(project.join("app.py"), OLD_FORM_APP).unwrap();
    let wasm = python::component(&project);
    support::authoring::assert_old_form_artifacts(&wasm);

    let (code, said) = type_check(&project, &[]);
    assert_eq!(code, Some(0), "{said}");
    let (code, said) = type_check(&project, &["--enable-error-code", "deprecated"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("app.py:")
            && said.contains(
                "Description.artifact is deprecated: Description.artifact(name, media_type, \
                 description) is deprecated since 0.2"
            ),
        "{said}"
    );
}

/// The SDK is ready to publish: `python -m build` makes its wheel, typed (`py.typed` and the
/// `host_info` stub inside), and a project without a copy of the SDK, the wheel installed in
/// its `.venv` beside componentize-py, builds with `plugin build` and runs, as
/// docs/plugins-python.md says.
#[test]
fn the_python_sdk_wheel_installed_in_a_projects_venv_builds_and_runs_its_plugin() {
    let work = tempfile::tempdir().unwrap();
    // The build writes build/ and *.egg-info/ beside the sources: it works on a copy.
    let sources = work.path().join("sdk");
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(support::workspace().join("guest-sdk/python"))
        .arg(&sources)
        .status()
        .unwrap();
    assert!(status.success());
    let dist = work.path().join("dist");
    let output = std::process::Command::new(python::venv_bin().join("python3"))
        .args(["-m", "build", "--wheel", "--outdir"])
        .arg(&dist)
        .arg(&sources)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let wheel = std::fs::read_dir(&dist)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .expect("python -m build made a wheel");
    let listing = std::process::Command::new(python::venv_bin().join("python3"))
        .args(["-m", "zipfile", "-l"])
        .arg(&wheel)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    for file in ["factbuoy_plugin/py.typed", "factbuoy_plugin/host_info.pyi"] {
        assert!(listing.contains(file), "{file} not in the wheel: {listing}");
    }

    let project = plugin_new(work.path(), "packaged", "python");
    std::fs::remove_dir_all(project.join("factbuoy_plugin")).unwrap();
    let venv = project.join(".venv");
    let status = std::process::Command::new("python3")
        .arg("-m")
        .arg("venv")
        .arg(&venv)
        .status()
        .unwrap();
    assert!(status.success());
    let output = std::process::Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .arg("componentize-py==0.25.1")
        .arg(&wheel)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));

    // Nothing but the project's .venv has componentize-py or the SDK.
    let output = support::factbuoy()
        .current_dir(&project)
        .args(["plugin", "build"])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let wasm = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    support::authoring::assert_greets(&wasm, "packaged");
}

/// `plugin run DIR` of a Python project runs a development build (docs/plugins-python.md): the
/// first run builds the runner, an edit then runs at once without componentize-py, with the
/// facts and failures of the component `plugin build` writes (`--release` runs that one), and
/// an error while app.py loads names the exception and its line.
#[test]
fn an_edited_python_project_runs_at_once_as_its_built_component_would() {
    let home = tempfile::tempdir().unwrap();
    let project = plugin_new(home.path(), "dev-loop", "python");
    let path = python::path_with_venv();
    let run = |extra: &[&str]| run_project(&project, "dev-loop", &path, extra);
    let source = assert_an_edit_runs_without_a_build(&project, "dev-loop", &path, "app.py");
    let app = project.join("app.py");

    // A failure in gather, and the same from the built component.
    let failing = source.replace(
        "        os = host_info.os()\n",
        "        os = host_info.os()\n        {}[\"missing\"]\n",
    );
    std::fs::write(&app, &failing).unwrap();
    let (code, development, said) = run(&[]);
    assert_eq!(code, Some(1), "{said}");
    assert!(!said.contains("building"), "{said}");
    let (code, release, said) = run(&["--release"]);
    assert_eq!(code, Some(1), "{said}");
    assert!(project.join("target/dev-loop.wasm").exists(), "{said}");
    assert_eq!(development["failure"], release["failure"]);
    assert_eq!(development["failure"]["message"], "KeyError: 'missing'");
    assert_eq!(development["logs"], release["logs"]);

    // app.py failing while it loads, and describe raising: the exception and where.
    let failed_describe = |app_source: &str, expected: &str| {
        std::fs::write(&app, app_source).unwrap();
        let (code, error, said) = run(&[]);
        assert_eq!(code, Some(2), "{said}");
        assert!(!said.contains("building"), "{said}");
        let error = error["error"].as_str().unwrap_or_default();
        assert!(error.contains(expected), "{error}");
    };
    let line = source.lines().count() + 2;
    failed_describe(
        &format!("{source}\nundefined_name()\n"),
        &format!("NameError: name 'undefined_name' is not defined (at app.py:{line})"),
    );
    let line = source
        .lines()
        .position(|l| l == "        return (")
        .unwrap()
        + 1;
    failed_describe(
        &source.replacen(
            "        return (\n",
            "        raise ValueError(\"on purpose\")\n        return (\n",
            1,
        ),
        &format!("ValueError: on purpose (at app.py:{line})"),
    );
}

//! JavaScript plugins through the real binary: the SDK's unit tests in Node; the example plugin
//! built from source with real componentize-js and run in the sandbox; a hostile JavaScript
//! plugin contained exactly as its Rust twin; `plugin new --lang js` + `plugin build` outside the
//! repository, precompiled so that its first run hits the compilation cache; and the exit
//! status of a build whose toolchain is missing (2) or fails (1).

use crate::support;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::authoring::{artifact, contract_of, path_str, run_json, stderr};
use crate::support::js;
use serde_json::Value;

#[test]
fn the_js_sdk_unit_tests_pass() {
    let Some(_toolchain) = js::node_modules() else {
        return;
    };
    let output = std::process::Command::new("node")
        .args(["--import", "./tests/register.js", "--test", "tests/"])
        .current_dir(support::workspace().join("guest-sdk/js"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", stderr(&output));
    assert!(stdout.contains("# fail 0"), "{stdout}");
    assert!(!stdout.contains("# pass 0"), "{stdout}");
}

#[test]
fn the_js_mounts_example_reads_the_mount_table_it_is_granted() {
    let Some(toolchain) = js::node_modules() else {
        return;
    };
    let wasm = js::component(&toolchain, &support::workspace().join("plugins-js/mounts"));

    let (code, report) = run_json(&[path_str(&wasm), "--grant", "mounts:read:/proc"]);
    assert_eq!(code, 0, "{report:#}");
    let mounts = artifact(&report, "mounts.json")["mounts"].clone();
    let mounts = mounts.as_array().unwrap();
    assert!(
        mounts
            .iter()
            .any(|m| m["mount_point"] == "/proc" && m["type"] == "proc"),
        "{mounts:#?}"
    );
    assert!(
        mounts.iter().any(|m| m["mount_point"] == "/"),
        "{mounts:#?}"
    );

    // A typed list parameter reaches the SDK's Params, and the plugin's own check refuses.
    let (code, report) = run_json(&[
        path_str(&wasm),
        "--grant",
        "mounts:read:/proc",
        "-p",
        "types=proc",
    ]);
    assert_eq!(code, 0, "{report:#}");
    let mounts = artifact(&report, "mounts.json")["mounts"].clone();
    assert!(
        mounts
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["type"] == "proc"),
        "{mounts:#}"
    );
    let (code, report) = run_json(&[
        path_str(&wasm),
        "--grant",
        "mounts:read:/proc",
        "-p",
        "types=Not A Type",
    ]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(
        report["failure"]["kind"], "invalid-parameters",
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
        stderr(&output).contains("add --grant mounts:read:/proc"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_hostile_js_plugin_is_contained_and_reported_as_a_rust_one() {
    let Some(toolchain) = js::node_modules() else {
        return;
    };
    let rust = support::fixture("hostile");
    let js = js::component(
        &toolchain,
        &support::workspace().join("tests/plugins-js/hostile"),
    );

    // describe: the same parameters, capabilities and artifacts, as the host reads them.
    let contract = contract_of(&rust);
    assert_eq!(contract, contract_of(&js));

    // The same limits, stopped and reported the same way: an endless loop, a memory bomb, and
    // an output flood.
    for (limit, args) in [
        ("deadline", ["-p", "mode=loop", "--deadline", "2s"]),
        ("memory", ["-p", "mode=alloc", "--memory", "128MiB"]),
        ("output", ["-p", "mode=flood", "--max-output", "4MiB"]),
    ] {
        let mut reports = Vec::new();
        for wasm in [&rust, &js] {
            let (code, report) = run_json(&[&[path_str(wasm)][..], &args[..]].concat());
            assert_eq!(code, 1, "{limit}: {report:#}");
            let ran_ms = report["duration_ms"].as_f64().unwrap();
            assert!(ran_ms < 10_000.0, "{limit}: ran {ran_ms} ms");
            reports.push(report["failure"].clone());
        }
        assert_eq!(reports[0]["kind"], "limit-exceeded", "{reports:#?}");
        assert_eq!(
            reports[0]["kind"], reports[1]["kind"],
            "{limit}: {reports:#?}"
        );
        assert_eq!(
            reports[0]["limit"], reports[1]["limit"],
            "{limit}: {reports:#?}"
        );
        if limit == "deadline" {
            assert_eq!(reports[0]["message"], reports[1]["message"], "{reports:#?}");
        }
    }

    // A failure the plugin understood, and a capability it was not granted.
    for (args, kind) in [
        (["-p", "mode=fail"], "failed"),
        (["-p", "mode=host-info"], "capability-denied"),
    ] {
        let failures: Vec<Value> = [&rust, &js]
            .iter()
            .map(|wasm| run_json(&[&[path_str(wasm)][..], &args[..]].concat()).1["failure"].clone())
            .collect();
        assert_eq!(failures[0]["kind"], kind, "{failures:#?}");
        assert_eq!(failures[0], failures[1], "{args:?}");
    }

    // A JavaScript exception is a bug, as a Rust panic: the run fails with its name and message,
    // and the stack is in the log.
    let output = support::factbuoy()
        .args([
            "plugin",
            "run",
            path_str(&js),
            "-p",
            "mode=panic",
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        report["failure"]["message"], "Error: hostile plugin threw on purpose",
        "{report:#}"
    );
    assert!(
        stderr(&output).contains("app.js"),
        "no stack in the log: {}",
        stderr(&output)
    );
}

/// Runs `factbuoy plugin build` in `project` with `path` as PATH.
fn build(project: &Path, path: &std::ffi::OsStr, cache: &Path) -> Output {
    support::factbuoy()
        .current_dir(project)
        .args(["plugin", "build"])
        .env("PATH", path)
        .env("FACTBUOY_CACHE_DIR", cache)
        .output()
        .unwrap()
}

/// The compilation cache's entries: `<cache>/<engine hash>/<sha-256>.cwasm`.
fn cache_entries(cache: &Path) -> Vec<PathBuf> {
    let mut entries = Vec::new();
    for engine in std::fs::read_dir(cache).into_iter().flatten() {
        for entry in std::fs::read_dir(engine.unwrap().path()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "cwasm") {
                entries.push(path);
            }
        }
    }
    entries
}

#[test]
fn a_new_js_project_builds_precompiled_and_runs_outside_the_repository() {
    let Some(toolchain) = js::node_modules() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let output = support::factbuoy()
        .current_dir(home.path())
        .args(["plugin", "new", "greeter-js", "--lang", "js"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let project = home.path().join("greeter-js");
    let path = js::path_with_toolchain(&toolchain);
    let output = build(&project, &path, cache.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let wasm = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    assert!(
        wasm.ends_with("greeter-js/target/greeter-js.wasm"),
        "{wasm}"
    );

    // plugin build compiled it into the cache plugin run uses, under the wasm's digest...
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
        std::fs::read(&wasm).unwrap(),
    ));
    let entries = cache_entries(cache.path());
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(
        entries[0].ends_with(format!("{digest}.cwasm")),
        "{entries:?}"
    );
    let before = std::fs::metadata(&entries[0]).unwrap();

    // ...so the first run loads it from there: a miss would compile and write the entry anew.
    let output = support::factbuoy()
        .args([
            "plugin",
            "run",
            &wasm,
            "--grant",
            "greeter-js:host-info",
            "-p",
            "greeting=ahoy",
            "-o",
            "json",
        ])
        .env("FACTBUOY_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let greeting = artifact(&report, "greeting.json");
    assert_eq!(greeting["greeting"], "ahoy", "{greeting:#}");
    assert!(greeting["kernel"].is_string(), "{greeting:#}");
    // (Stored once: a store writes a new file; the hit only marked it used.)
    let after = std::fs::metadata(&entries[0]).unwrap();
    assert_eq!(cache_entries(cache.path()), entries);
    assert_eq!(before.ino(), after.ino());

    // Nothing changed: the build is skipped, and the same component (and cache entry) stays.
    let started = std::time::Instant::now();
    let output = build(&project, &path, cache.path());
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("is up to date"),
        "{}",
        stderr(&output)
    );
    assert!(
        !stderr(&output).contains("componentize-js"),
        "{}",
        stderr(&output)
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(String::from_utf8(output.stdout).unwrap().trim(), wasm);
    assert_eq!(cache_entries(cache.path()), entries);

    // A syntax error is found before componentize-js runs, at its file and line, and fails
    // the build (1)...
    let app = project.join("app.js");
    let source = std::fs::read_to_string(&app).unwrap();
    let line = source
        .lines()
        .position(|l| l.contains("gather(params) {"))
        .unwrap()
        + 1;
    std::fs::write(&app, source.replace("gather(params) {", "gather(params {")).unwrap();
    let output = build(&project, &path, cache.path());
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(
        said.contains(&format!("greeter-js/app.js:{line}\n")),
        "{said}"
    );
    assert!(said.contains("SyntaxError"), "{said}");
    assert!(!said.contains("building with"), "{said}");
    assert!(!said.contains("    at "), "node's own stack: {said}");

    // ...as does a toolchain that runs and fails (a module that is not there)...
    std::fs::write(&app, format!("import \"./missing.js\";\n{source}")).unwrap();
    let output = build(&project, &path, cache.path());
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("componentize-js failed"),
        "{}",
        stderr(&output)
    );

    // ...and a missing one is invalid input (2), saying how to install it.
    let output = build(&project, std::ffi::OsStr::new("/nonexistent"), cache.path());
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("Node.js (node) was not found"),
        "{}",
        stderr(&output)
    );
    let node_dir = PathBuf::from(
        String::from_utf8(
            std::process::Command::new("sh")
                .args(["-c", "command -v node"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim(),
    );
    let output = build(
        &project,
        node_dir.parent().unwrap().as_os_str(),
        cache.path(),
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("`npm install` in the project"),
        "{}",
        stderr(&output)
    );
}

/// The SDK's example in docs/plugins-js.md, pasted into a project `plugin new` wrote, builds
/// and does what it says: it lists the host's file systems, leaving out the types `skip` names.
#[test]
fn the_js_sdk_example_in_the_docs_builds_and_lists_the_file_systems() {
    let Some(node_modules) = js::node_modules() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let output = support::factbuoy()
        .current_dir(home.path())
        .args(["plugin", "new", "disk-report", "--lang", "js"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let project = home.path().join("disk-report");
    let app = support::authoring::doc_example("docs/plugins-js.md", "js");
    std::fs::write(project.join("app.js"), app).unwrap();
    let wasm = js::component(&node_modules, &project);
    support::authoring::assert_lists_file_systems(&wasm, "fileSystem");
}

/// A WIT name as componentize-js names it in JavaScript: `kernel-version` → `kernelVersion`
/// (`upper`: `os-info` → `OsInfo`).
fn camel(name: &str, upper: bool) -> String {
    let mut out = String::new();
    for (i, word) in name.split('-').enumerate() {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            if i > 0 || upper {
                out.extend(first.to_uppercase());
            } else {
                out.push(first);
            }
            out.extend(chars);
        }
    }
    out
}

/// The SDK's declarations (`factbuoy-plugin/index.d.ts`) hold every function of the contract's
/// `host-info` interface and every field of its records, as componentize-js names them.
#[test]
fn the_js_sdk_declares_every_host_info_function_and_field() {
    let mut resolve = wit_parser::Resolve::new();
    let (package, _) = resolve.push_dir(support::workspace().join("wit")).unwrap();
    let interface = &resolve.interfaces[resolve.packages[package].interfaces["host-info"]];
    let declarations = std::fs::read_to_string(
        support::workspace().join("guest-sdk/js/factbuoy-plugin/index.d.ts"),
    )
    .unwrap();
    let host_info = declarations
        .split_once("export declare namespace hostInfo {")
        .expect("index.d.ts declares hostInfo")
        .1;
    let mut missing = Vec::new();
    for name in interface.functions.keys() {
        let declared = format!("function {}(", camel(name, false));
        if !host_info.contains(&declared) {
            missing.push(declared);
        }
    }
    for (name, id) in &interface.types {
        let wit_parser::TypeDefKind::Record(record) = &resolve.types[*id].kind else {
            continue;
        };
        let head = format!("interface {} {{", camel(name, true));
        let Some((_, body)) = host_info.split_once(&head) else {
            missing.push(head);
            continue;
        };
        let body = &body[..body.find("\n  }").unwrap()];
        for field in &record.fields {
            let field = camel(&field.name, false);
            if !body.contains(&format!(" {field}:")) && !body.contains(&format!(" {field}?:")) {
                missing.push(format!("{name}.{field}"));
            }
        }
    }
    assert!(missing.is_empty(), "index.d.ts lacks {missing:?}");
}

/// TypeScript (jco's own, pinned in tests/js/package-lock.json) type-checks the app `plugin new`
/// writes and the example of docs/plugins-js.md against the SDK's declarations, and finds a
/// misspelt field: an editor shows the SDK's API, `hostInfo`'s included.
#[test]
fn the_js_template_and_docs_example_type_check_against_the_sdk_declarations() {
    let Some(toolchain) = js::node_modules() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let output = support::factbuoy()
        .current_dir(home.path())
        .args(["plugin", "new", "checked", "--lang", "js"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let project = home.path().join("checked");
    let example = support::authoring::doc_example("docs/plugins-js.md", "js");
    std::fs::write(project.join("example.js"), &example).unwrap();
    std::fs::write(
        project.join("misspelt.js"),
        example.replace("d.fileSystem", "d.filesystem"),
    )
    .unwrap();
    let check = |file: &str| {
        std::process::Command::new(toolchain.join(".bin/tsc"))
            .args([
                "--noEmit",
                "--allowJs",
                "--checkJs",
                "--strict",
                "--target",
                "es2022",
                "--module",
                "nodenext",
                "--moduleResolution",
                "nodenext",
                file,
            ])
            .current_dir(&project)
            .output()
            .unwrap()
    };
    for file in ["app.js", "example.js"] {
        let output = check(file);
        assert!(
            output.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
    let output = check("misspelt.js");
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("Property 'filesystem' does not exist"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

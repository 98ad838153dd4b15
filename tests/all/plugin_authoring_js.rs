//! What only JavaScript plugins have, through the real binary: the SDK's unit tests in Node;
//! the example plugin built from source with real componentize-js; a component precompiled by
//! `plugin build` so that its first run hits the compilation cache; the toolchain's packages
//! missing; and the SDK's TypeScript declarations. A JavaScript author's first steps (`plugin
//! new`, `plugin build`, the hostile twin) are in `plugin_authoring.rs`, shared with the other
//! languages.

use crate::support;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::authoring::{
    artifact, assert_an_edit_runs_without_a_build, assert_grant_required, path_str, run_json,
    run_project, stderr,
};
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
    // Its items have the key it declares: nothing to warn of.
    assert_eq!(report["warnings"], serde_json::json!([]), "{report:#}");
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

    assert_grant_required(&wasm, "mounts:read:/proc");
}

/// Runs `factbuoy plugin build` in `project` with `path` as PATH and `cache` as the
/// compilation cache.
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

/// `factbuoy plugin new NAME --lang js` in `home`: the project's directory.
fn new_project(home: &Path, name: &str) -> PathBuf {
    let output = support::factbuoy()
        .current_dir(home)
        .args(["plugin", "new", name, "--lang", "js"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    home.join(name)
}

/// `plugin build` compiles a JavaScript component into the cache `plugin run` uses, so that
/// its first run loads it from there (JavaScript components are large and slow to compile).
#[test]
fn a_new_js_project_is_precompiled_so_its_first_run_hits_the_cache() {
    let Some(toolchain) = js::node_modules() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let project = new_project(home.path(), "greeter-js");
    let path = js::path_with_toolchain(&toolchain);
    let output = build(&project, &path, cache.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let wasm = String::from_utf8(output.stdout).unwrap().trim().to_owned();

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
}

/// With Node.js but without the toolchain's packages, `plugin build` is invalid input (2) and
/// says to run `npm install` in the project.
#[test]
fn a_js_build_without_the_toolchains_packages_says_npm_install() {
    let Some(_toolchain) = js::node_modules() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let project = new_project(home.path(), "greeter-js");
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

/// TypeScript (pinned in toolchains/js/package.json) type-checks the app `plugin
/// new` writes and the example of docs/plugins-js.md against the SDK's declarations, and finds a
/// misspelt field: an editor shows the SDK's API, `hostInfo`'s included.
#[test]
fn the_js_template_and_docs_example_type_check_against_the_sdk_declarations() {
    let Some(toolchain) = js::node_modules() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let project = new_project(home.path(), "checked");
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

/// The mistake of issue 50: a list declared keyed by a field its items do not have
/// (`mountPoint` for items that say `mount_point`). `plugin run` warns of it, and so does a
/// run's bundle, where `inspect summary` lists the warnings.
#[test]
fn a_declared_list_key_the_items_lack_is_a_warning_at_the_run_and_in_the_bundle() {
    let Some(toolchain) = js::node_modules() else {
        return;
    };
    let project = tempfile::tempdir().unwrap();
    let example = support::workspace().join("plugins-js/mounts");
    for file in ["app.js", "package.json"] {
        let text = std::fs::read_to_string(example.join(file)).unwrap();
        let text = text.replace("\"mount_point\",\n        ]", "\"mountPoint\",\n        ]");
        std::fs::write(project.path().join(file), text).unwrap();
    }
    let app = std::fs::read_to_string(project.path().join("app.js")).unwrap();
    assert!(
        app.contains("\"mountPoint\""),
        "the example's listKeys moved"
    );
    // The SDK and contract in the project, as `plugin new` writes them.
    for (from, to) in [
        ("guest-sdk/js/factbuoy-plugin", "factbuoy-plugin"),
        ("wit", "wit"),
    ] {
        let copied = std::process::Command::new("cp")
            .arg("-r")
            .arg(support::workspace().join(from))
            .arg(project.path().join(to))
            .status()
            .unwrap();
        assert!(copied.success());
    }
    let wasm = js::component(&toolchain, project.path());
    let warned = "mounts.json: ";
    let lack = "items of the list \"mounts\" lack the declared key \"mountPoint\" (the first: \
                mounts[0]); inspect diff matches them by their keys";

    let (code, report) = run_json(&[path_str(&wasm), "--grant", "mounts:read:/proc"]);
    assert_eq!(code, 0, "{report:#}");
    let warnings = report["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| {
            let w = w.as_str().unwrap();
            w.starts_with(warned) && w.ends_with(lack)
        }),
        "{report:#}"
    );

    let out = tempfile::tempdir().unwrap();
    let run = support::factbuoy()
        .env("FACTBUOY_STATE_DIR", out.path().join("state"))
        .args([
            "run",
            "--plugin",
            path_str(&wasm),
            "--grant",
            "mounts:read:/proc",
        ])
        .args(["--node", "this-host", "-o", "json", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", stderr(&run));
    let run: Value = serde_json::from_slice(&run.stdout).unwrap();
    let summary = support::factbuoy()
        .args(["inspect", "summary"])
        .arg(run["bundle"]["path"].as_str().unwrap())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&summary.stdout);
    assert!(said.contains("Warnings:") && said.contains(lack), "{said}");
}

/// `npm run typecheck` in `project` (the script `plugin new` writes, as docs/plugins-js.md
/// says), with the toolchain's TypeScript on PATH: whether it passed, and what tsc said.
fn type_check(toolchain: &Path, project: &Path) -> (bool, String) {
    let output = std::process::Command::new("npm")
        .args(["run", "--silent", "typecheck"])
        .current_dir(project)
        .env("PATH", js::path_with_toolchain(toolchain))
        .output()
        .unwrap();
    let said = support::authoring::said(&output);
    (output.status.success(), said)
}

/// A new project passes `tsc --checkJs --strict`: its own JavaScript and the SDK's, whose
/// files are checked too (an untyped parameter in the SDK's copy is an error).
#[test]
fn a_new_js_project_passes_tsc_strict_with_its_sdk() {
    let Some(toolchain) = js::node_modules() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let project = new_project(home.path(), "typed");
    let script = std::fs::read_to_string(project.join("package.json")).unwrap();
    assert!(
        script.contains("tsc --noEmit --allowJs --checkJs --strict "),
        "{script}"
    );
    let (passed, said) = type_check(&toolchain, &project);
    assert!(passed, "{said}");

    let params = project.join("factbuoy-plugin/params.js");
    let sdk = std::fs::read_to_string(&params).unwrap();
    std::fs::write(
        &params,
        sdk + "\nexport function untyped(x) {\n  return x;\n}\n",
    )
    .unwrap();
    let (passed, said) = type_check(&toolchain, &project);
    assert!(!passed, "{said}");
    assert!(
        said.contains("params.js") && said.contains("Parameter 'x' implicitly has an 'any' type"),
        "{said}"
    );
}

/// A plugin that declares its artifacts with `Description.artifact`'s deprecated form.
const OLD_FORM_APP: &str = r#"import { Description, exportGatherer, output } from "./factbuoy-plugin/index.js";

export const plugin = exportGatherer({
  describe() {
    return new Description("old-form", "0.1.0", "Declares its artifacts as a 0.1 plugin did.")
      .artifact("facts.json", "application/json", "a document")
      .artifact("rows.jsonl", "application/jsonl", "rows")
      .artifact("notes.txt", "text/plain", "text")
      .artifact("charset.json", "Application/JSON; charset=utf-8", "")
      .artifact("vendor.json", "application/vnd.example+json", "")
      .artifact("rows.ndjson", "application/x-ndjson", "")
      .artifact("rows.jsonlines", "application/jsonlines", "")
      .artifact("text.json", "text/json", "");
  },
  gather() {
    output.writeJson("facts.json", { answer: 42 });
    output.writeJsonLines("rows.jsonl", [{ n: 1 }]);
    output.writeText("notes.txt", "kept\n");
  },
});
"#;

/// A plugin written against the JavaScript SDK before contract 0.2, with `artifact(name,
/// mediaType, description)`, still type-checks, builds and runs: each artifact gets the kind
/// its media type implies. The declarations mark that form `@deprecated`.
#[test]
fn a_js_plugin_with_the_deprecated_artifact_form_builds_runs_and_type_checks() {
    let Some(toolchain) = js::node_modules() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let project = new_project(home.path(), "old-form");
    std::fs::write(project.join("app.js"), OLD_FORM_APP).unwrap();
    let wasm = js::component(&toolchain, &project);
    support::authoring::assert_old_form_artifacts(&wasm);

    let (passed, said) = type_check(&toolchain, &project);
    assert!(passed, "{said}");
    let declarations = std::fs::read_to_string(project.join("factbuoy-plugin/index.d.ts")).unwrap();
    let (before, _) = declarations
        .split_once("artifact(name: string, mediaType: string, description: string): Description;")
        .expect("index.d.ts declares the three-argument artifact");
    assert!(
        before.rsplit_once("/**").unwrap().1.contains("@deprecated"),
        "{before}"
    );
}

/// The SDK is ready to publish: `npm pack` makes its tarball, which holds the package and its
/// declarations and not its tests; a project without a copy of the SDK, the tarball installed
/// in its `node_modules` and imported as `"factbuoy-plugin"`, type-checks, builds with `plugin
/// build` and runs, as docs/plugins-js.md says.
#[test]
fn the_js_sdk_tarball_installed_in_a_project_type_checks_builds_and_runs_its_plugin() {
    let Some(toolchain) = js::node_modules() else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let output = std::process::Command::new("npm")
        .args(["pack", "--silent", "--pack-destination"])
        .arg(work.path())
        .current_dir(support::workspace().join("guest-sdk/js"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let tarball = work
        .path()
        .join(String::from_utf8(output.stdout).unwrap().trim());
    let listing = std::process::Command::new("tar")
        .arg("-tzf")
        .arg(&tarball)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    for file in [
        "package/factbuoy-plugin/index.js",
        "package/factbuoy-plugin/index.d.ts",
    ] {
        assert!(
            listing.contains(file),
            "{file} not in the tarball: {listing}"
        );
    }
    assert!(!listing.contains("tests/"), "{listing}");

    let project = new_project(work.path(), "packaged");
    std::fs::remove_dir_all(project.join("factbuoy-plugin")).unwrap();
    let app = project.join("app.js");
    let source = std::fs::read_to_string(&app).unwrap();
    assert!(
        source.contains("from \"./factbuoy-plugin/index.js\""),
        "{source}"
    );
    std::fs::write(
        &app,
        source.replace("\"./factbuoy-plugin/index.js\"", "\"factbuoy-plugin\""),
    )
    .unwrap();
    // The SDK only: the toolchain is on PATH.
    let output = std::process::Command::new("npm")
        .args(["install", "--omit=dev", "--no-audit", "--no-fund"])
        .arg(&tarball)
        .current_dir(&project)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));

    // The type check, without the copy's modules to check: the package's declarations.
    let manifest = project.join("package.json");
    let scripts = std::fs::read_to_string(&manifest).unwrap();
    assert!(
        scripts.contains(" *.js factbuoy-plugin/index.js\""),
        "{scripts}"
    );
    std::fs::write(
        &manifest,
        scripts.replace(" *.js factbuoy-plugin/index.js\"", " *.js\""),
    )
    .unwrap();
    let (passed, said) = type_check(&toolchain, &project);
    assert!(passed, "{said}");

    let cache = tempfile::tempdir().unwrap();
    let output = build(&project, &js::path_with_toolchain(&toolchain), cache.path());
    assert!(output.status.success(), "{}", stderr(&output));
    let wasm = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    support::authoring::assert_greets(&wasm, "packaged");
}

/// `plugin run DIR` of a JavaScript project runs a development build (docs/plugins-js.md): the
/// first run builds the runner, an edit then runs at once without componentize-js, with the
/// facts and failure of the component `plugin build` writes, its stack naming the bundle's file
/// and line.
#[test]
fn an_edited_js_project_runs_at_once_as_its_built_component_would() {
    let Some(toolchain) = js::node_modules() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let project = crate::support::authoring::plugin_new(home.path(), "dev-loop-js", "js");
    let path = js::path_with_toolchain(&toolchain);
    let run = |extra: &[&str]| run_project(&project, "dev-loop-js", &path, extra);
    let source = assert_an_edit_runs_without_a_build(&project, "dev-loop-js", &path, "app.js");
    let app = project.join("app.js");

    // A failure in gather, and the same from the built component.
    let failing = source.replace(
        "    const os = hostInfo.os();\n",
        "    const os = hostInfo.os();\n    null.boom;\n",
    );
    std::fs::write(&app, &failing).unwrap();
    let (code, development, said) = run(&[]);
    assert_eq!(code, Some(1), "{said}");
    assert!(!said.contains("building"), "{said}");
    // What the component `plugin build` writes reports for this edit (seen with `--release`,
    // which builds one: not repeated here, a minute of CI for a message).
    assert_eq!(
        development["failure"],
        serde_json::json!({"kind": "failed", "message": "TypeError: can't access property \"boom\" of null"}),
    );
    let stack = development["logs"][0]["message"].as_str().unwrap();
    assert!(stack.contains("gather@target/dev/js/app.cjs:"), "{stack}");
}

//! A plugin author's first steps, written once and run for each language, through the real
//! binary: `plugin new` + `plugin build` outside the repository, a build that fails or has no
//! toolchain, a project built again only when it changed, a syntax error found first, the SDK
//! example of the docs, and a hostile plugin contained exactly as its Rust twin. Each scenario is
//! a test per language (`plugin_authoring::python::…`), so a failure names its language; what
//! only one language has is in `plugin_authoring_python.rs` and `plugin_authoring_js.rs`.

use crate::support;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use crate::support::authoring::{artifact, contract_of, path_str, run_json, stderr};
use serde_json::Value;

/// What the scenarios need to know of a language `plugin new` writes projects in.
struct Lang {
    /// The `--lang` value.
    name: &'static str,
    /// The environment `plugin build` needs to find the toolchain, or `None` when the toolchain
    /// is missing here and the test is skipped (tests/support/js.rs says when).
    toolchain: fn() -> Option<Vec<(&'static str, OsString)>>,
    /// How the component of a project named `greeter-<name>` ends its path.
    built: &'static str,
    /// What a build without the toolchain on PATH says to install.
    install: &'static str,
    /// A first line for the source that fails the toolchain's build, and what the build says.
    failing_import: Option<(&'static str, &'static str)>,
    /// What else a new project must hold (checked after it built).
    check_project: fn(&Path),
    /// Facts of the languages whose SDK and sources are built from source by a componentize
    /// tool (not Rust).
    guest: Option<Guest>,
}

/// A language built by a componentize tool, whose projects `plugin build` skips when unchanged.
struct Guest {
    /// The tool's name, as a build says it runs.
    tool: &'static str,
    /// The project's source file, which `plugin new` writes.
    app: &'static str,
    /// A file of the SDK copy in the project.
    sdk_file: &'static str,
    /// A line of the template's source, and that line with a syntax error.
    syntax_error: (&'static str, &'static str),
    /// Where the syntax error is said to be, for the project `greeter` and its line.
    syntax_at: fn(usize) -> String,
    /// The page that shows what `plugin build` prints of that syntax error, if one does.
    syntax_error_shown_in: Option<&'static str>,
    /// How long an unchanged build and a syntax error may take at the most.
    quick: Duration,
    /// The document with the SDK's example, its code fence, and the name of a disk's file-system
    /// type in it.
    doc: (&'static str, &'static str, &'static str),
    /// The component of a project, built by the tests' cached builder.
    component: fn(&Path) -> PathBuf,
    /// The hostile twin of tests/plugins/hostile.
    hostile: &'static str,
    /// The failure message of the hostile plugin's uncaught exception.
    exception: &'static str,
    /// What the exception's stack in the log shows.
    stack_shows: &'static str,
}

const PYTHON: Lang = Lang {
    name: "python",
    toolchain: || Some(vec![("PATH", support::python::path_with_venv())]),
    built: "greeter-python/target/greeter-python.wasm",
    install: "pip install componentize-py==0.25.1",
    failing_import: Some(("import no_such_module\n", "componentize-py failed")),
    check_project: |_| {},
    guest: Some(Guest {
        tool: "componentize-py",
        app: "app.py",
        sdk_file: "factbuoy_plugin/log.py",
        syntax_error: (
            "    def gather(self, params: Params) -> None:",
            "    def gather(self, params: Params -> None:",
        ),
        syntax_at: |line| format!("File \"app.py\", line {line}"),
        syntax_error_shown_in: Some("docs/cli.md"),
        quick: Duration::from_secs(3),
        doc: ("docs/plugins-python.md", "python", "file_system"),
        component: support::python::component,
        hostile: "tests/plugins-python/hostile",
        exception: "RuntimeError: hostile plugin raised on purpose",
        stack_shows: "app.py",
    }),
};

const JS: Lang = Lang {
    name: "js",
    toolchain: || {
        let toolchain = support::js::node_modules()?;
        Some(vec![("PATH", support::js::path_with_toolchain(&toolchain))])
    },
    built: "greeter-js/target/greeter-js.wasm",
    install: "Node.js (node) was not found",
    failing_import: Some(("import \"./missing.js\";\n", "componentize-js failed")),
    check_project: |_| {},
    guest: Some(Guest {
        tool: "componentize-js",
        app: "app.js",
        sdk_file: "factbuoy-plugin/output.js",
        syntax_error: ("gather(params) {", "gather(params {"),
        syntax_at: |line| format!("greeter/app.js:{line}\n"),
        syntax_error_shown_in: None,
        quick: Duration::from_secs(5),
        doc: ("docs/plugins-js.md", "js", "fileSystem"),
        component: |project| support::js::component(&support::js::node_modules().unwrap(), project),
        hostile: "tests/plugins-js/hostile",
        exception: "Error: hostile plugin threw on purpose",
        stack_shows: "app.js",
    }),
};

const RUST: Lang = Lang {
    name: "rust",
    // A target directory kept between runs (outside the repository), so wit-bindgen and
    // serde_json are compiled once; the plugin itself is built every time.
    toolchain: || {
        let target = std::env::temp_dir().join("factbuoy-plugin-new-target");
        Some(vec![("CARGO_TARGET_DIR", target.into_os_string())])
    },
    built: "wasm32-wasip2/release/greeter_rust.wasm",
    install: "https://rustup.rs",
    failing_import: None,
    check_project: |project| {
        // The README's trait and macro, against the SDK copied into the project: nothing
        // points into a factbuoy checkout.
        let source = std::fs::read_to_string(project.join("src/lib.rs")).unwrap();
        assert!(source.contains("export_gatherer!(Greeter);"), "{source}");
        // The SDK by the version its copy carries, as well as by path (docs/cli.md).
        let sdk = std::fs::read_to_string(project.join("factbuoy-guest/Cargo.toml")).unwrap();
        let version = sdk
            .lines()
            .find_map(|line| line.strip_prefix("version = "))
            .unwrap();
        let manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
        let dependency =
            format!("factbuoy-guest = {{ version = {version}, path = \"factbuoy-guest\" }}");
        assert!(manifest.contains(&dependency), "{manifest}");
        assert!(!manifest.contains(".."), "{manifest}");
    },
    guest: None,
};

/// Each scenario as a test of the language's own module: `per_language!(python, PYTHON:
/// scenario, ...)` makes `python::scenario` run `scenario(&PYTHON)`.
macro_rules! per_language {
    ($module:ident, $lang:ident: $($scenario:ident),+) => {
        mod $module {
            $(
                #[test]
                fn $scenario() {
                    super::$scenario(&super::$lang);
                }
            )+
        }
    };
}

per_language!(python, PYTHON:
    a_new_project_builds_and_runs_outside_the_repository,
    a_project_is_built_only_when_it_changed_and_a_syntax_error_is_found_first,
    the_sdk_example_in_the_docs_builds_and_lists_the_file_systems,
    a_hostile_plugin_is_contained_and_reported_as_a_rust_one
);
per_language!(js, JS:
    a_new_project_builds_and_runs_outside_the_repository,
    a_project_is_built_only_when_it_changed_and_a_syntax_error_is_found_first,
    the_sdk_example_in_the_docs_builds_and_lists_the_file_systems,
    a_hostile_plugin_is_contained_and_reported_as_a_rust_one
);
per_language!(rust, RUST: a_new_project_builds_and_runs_outside_the_repository);

/// `factbuoy plugin new NAME --lang LANG` in `home`: the project's directory.
fn plugin_new(home: &Path, name: &str, lang: &Lang) -> PathBuf {
    let output = support::factbuoy()
        .current_dir(home)
        .args(["plugin", "new", name, "--lang", lang.name])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}: {}",
        lang.name,
        stderr(&output)
    );
    home.join(name)
}

/// `factbuoy plugin build` in `project` with `env` (the toolchain, a compilation cache).
fn build(project: &Path, env: &[(&str, OsString)]) -> Output {
    support::factbuoy()
        .current_dir(project)
        .args(["plugin", "build"])
        .envs(env.iter().map(|(key, value)| (key, value)))
        .output()
        .unwrap()
}

/// The compiled entries in the compilation cache `cache`.
fn compiled(cache: &Path) -> Vec<PathBuf> {
    support::files_below(cache, &[], |p| p.extension().is_some_and(|e| e == "cwasm"))
}

/// `plugin new` + `plugin build` in a fresh directory outside the repository make a component
/// that runs; without the toolchain the build says what to install (2), and a build the
/// toolchain fails is a failed command (1), not invalid input.
fn a_new_project_builds_and_runs_outside_the_repository(lang: &Lang) {
    let Some(toolchain) = (lang.toolchain)() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let name = format!("greeter-{}", lang.name);
    let project = plugin_new(home.path(), &name, lang);
    let output = build(&project, &toolchain);
    assert!(output.status.success(), "{}", stderr(&output));
    let wasm = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    assert!(wasm.ends_with(lang.built), "{wasm}");
    assert!(
        !Path::new(&wasm).starts_with(support::workspace()),
        "{wasm}"
    );

    // It runs, and greets as the template says.
    let greeting = support::authoring::assert_greets(&wasm, &name);
    assert!(greeting["kernel"].is_string(), "{greeting:#}");
    (lang.check_project)(&project);

    // Without the toolchain, the build says what is missing and how to install it.
    let output = build(&project, &[("PATH", "/nonexistent".into())]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(lang.install),
        "{}",
        stderr(&output)
    );

    // With it, a build that fails is a failed command (1), not invalid input (2).
    if let (Some((import, says)), Some(guest)) = (lang.failing_import, &lang.guest) {
        let app = project.join(guest.app);
        let source = std::fs::read_to_string(&app).unwrap();
        std::fs::write(&app, format!("{import}{source}")).unwrap();
        let output = build(&project, &toolchain);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        assert!(stderr(&output).contains(says), "{}", stderr(&output));
    }
}

/// A project is built again only when something it is built from changed (its files, the SDK
/// copied into it; inputs.rs also hashes the contract and the toolchain's version); a syntax
/// error is reported at its line before the componentize tool's long step.
fn a_project_is_built_only_when_it_changed_and_a_syntax_error_is_found_first(lang: &Lang) {
    let guest = lang.guest.as_ref().expect("a language built from source");
    let Some(mut env) = (lang.toolchain)() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let cache = home.path().join("cache");
    env.push(("FACTBUOY_CACHE_DIR", cache.clone().into_os_string()));
    let project = plugin_new(home.path(), "greeter", lang);
    let started = Instant::now();
    let output = build(&project, &env);
    let first = started.elapsed();
    assert!(output.status.success(), "{}", stderr(&output));
    let wasm = String::from_utf8(output.stdout).unwrap();
    let component = std::fs::read(wasm.trim()).unwrap();
    let entries = compiled(&cache);
    assert_eq!(entries.len(), 1, "{entries:?}");

    // Nothing changed, even if a file was written again: no build, the same component, no
    // new cache entry.
    let app = project.join(guest.app);
    let source = std::fs::read_to_string(&app).unwrap();
    std::fs::write(&app, &source).unwrap();
    let started = Instant::now();
    let output = build(&project, &env);
    let again = started.elapsed();
    assert!(output.status.success(), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(said.contains("is up to date"), "{said}");
    assert!(!said.contains(guest.tool), "{said}");
    assert_eq!(String::from_utf8(output.stdout).unwrap(), wasm);
    assert_eq!(std::fs::read(wasm.trim()).unwrap(), component);
    assert_eq!(compiled(&cache), entries);
    eprintln!("first build {first:?}, unchanged {again:?}");
    assert!(again < guest.quick, "{again:?}");

    // A change to the SDK in the project is a change: built again, a new entry.
    let sdk = project.join(guest.sdk_file);
    std::fs::write(&sdk, std::fs::read_to_string(&sdk).unwrap() + "\n").unwrap();
    let output = build(&project, &env);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        !stderr(&output).contains("is up to date"),
        "{}",
        stderr(&output)
    );
    assert_eq!(compiled(&cache).len(), 2);

    // A syntax error: its file and line as the language reports them, no componentize tool
    // and no stack of the checker's own, exit 1.
    let (line, broken_line) = guest.syntax_error;
    let broken = source.replace(line, broken_line);
    assert_ne!(broken, source, "the template has no line {line:?}");
    let line = source.lines().position(|l| l.contains(line)).unwrap() + 1;
    std::fs::write(&app, broken).unwrap();
    let started = Instant::now();
    let output = build(&project, &env);
    let took = started.elapsed();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(said.contains(&(guest.syntax_at)(line)), "{said}");
    assert!(said.contains("SyntaxError"), "{said}");
    assert!(!said.contains("building with"), "{said}");
    assert!(!said.contains("    at "), "the checker's own stack: {said}");
    assert!(took < guest.quick, "{took:?}");
    if let Some(page) = guest.syntax_error_shown_in {
        let shown = crate::examples::shown_output(page, "factbuoy plugin build");
        snapbox::Assert::new().eq(said.as_str(), shown.as_str());
    }
}

/// The SDK's example in the language's docs, pasted into a project `plugin new` wrote, builds
/// and does what it says: it lists the host's file systems, leaving out the types `skip` names.
fn the_sdk_example_in_the_docs_builds_and_lists_the_file_systems(lang: &Lang) {
    let guest = lang.guest.as_ref().expect("a language with an SDK example");
    if (lang.toolchain)().is_none() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let project = plugin_new(home.path(), "disk-report", lang);
    let (doc, fence, type_field) = guest.doc;
    let app = support::authoring::doc_example(doc, fence);
    std::fs::write(project.join(guest.app), app).unwrap();
    let wasm = (guest.component)(&project);
    support::authoring::assert_lists_file_systems(&wasm, type_field);
}

/// A hostile plugin in the language is described, limited, refused and reported exactly as its
/// Rust twin (tests/plugins/hostile), and an uncaught exception is a bug as a Rust panic is.
fn a_hostile_plugin_is_contained_and_reported_as_a_rust_one(lang: &Lang) {
    let guest = lang.guest.as_ref().expect("a language with a hostile twin");
    if (lang.toolchain)().is_none() {
        return;
    }
    let rust = support::fixture("hostile");
    let twin = (guest.component)(&support::workspace().join(guest.hostile));

    // describe: the same parameters (types, required, defaults, secret), capabilities and
    // artifacts, as the host reads them.
    let contract = contract_of(&rust);
    assert_eq!(contract, contract_of(&twin));
    assert_eq!(contract["parameters"][2]["type"], "integer", "{contract:#}");

    // The same limits, stopped and reported the same way: an endless loop, a memory bomb, and
    // an output flood.
    for (limit, args) in [
        ("deadline", ["-p", "mode=loop", "--deadline", "2s"]),
        ("memory", ["-p", "mode=alloc", "--memory", "128MiB"]),
        ("output", ["-p", "mode=flood", "--max-output", "4MiB"]),
    ] {
        let mut reports = Vec::new();
        for wasm in [&rust, &twin] {
            let (code, report) = run_json(&[&[path_str(wasm)][..], &args[..]].concat());
            assert_eq!(code, 1, "{limit}: {report:#}");
            // Stopped promptly once running (the first load's compile is not part of the run).
            let ran_ms = report["duration_ms"].as_f64().unwrap();
            assert!(ran_ms < 10_000.0, "{limit}: ran {ran_ms} ms");
            reports.push(report["failure"].clone());
        }
        assert_eq!(reports[0]["kind"], "limit-exceeded", "{reports:#?}");
        assert_eq!(reports[0]["limit"], limit, "{reports:#?}");
        assert_eq!(
            reports[0]["kind"], reports[1]["kind"],
            "{limit}: {reports:#?}"
        );
        assert_eq!(
            reports[0]["limit"], reports[1]["limit"],
            "{limit}: {reports:#?}"
        );
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
        let messages: Vec<(Option<i32>, String)> = [&rust, &twin]
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
        let failures: Vec<Value> = [&rust, &twin]
            .iter()
            .map(|wasm| run_json(&[&[path_str(wasm)][..], &args[..]].concat()).1["failure"].clone())
            .collect();
        assert_eq!(failures[0]["kind"], kind, "{failures:#?}");
        assert_eq!(failures[0], failures[1], "{args:?}");
    }

    // An exception is a bug, as a Rust panic: the run fails with its type and message, and
    // the stack is in the log.
    let output = support::factbuoy()
        .args([
            "plugin",
            "run",
            path_str(&twin),
            "-p",
            "mode=panic",
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["failure"]["message"], guest.exception, "{report:#}");
    assert!(
        stderr(&output).contains(guest.stack_shows),
        "no stack in the log: {}",
        stderr(&output)
    );
}

/// `plugin run DIR` builds a project before running it; with `--watch` it runs it again on
/// every save: a broken save is reported and waited out, the next good one runs. `--watch` of
/// anything but a project is refused.
#[test]
fn plugin_run_of_a_project_builds_it_and_with_watch_runs_it_again_on_every_save() {
    use std::io::BufRead;
    use std::process::Stdio;
    use std::sync::mpsc::{Receiver, channel};

    let refused = support::factbuoy()
        .args(["plugin", "run", "hello", "--watch"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("give the project's directory"));

    let Some(toolchain) = (RUST.toolchain)() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let project = plugin_new(home.path(), "greeter-watch", &RUST);
    let mut watching = support::factbuoy()
        .args(["plugin", "run"])
        .arg(&project)
        .args([
            "--grant",
            "greeter-watch:host-info",
            "--watch",
            "-o",
            "json",
        ])
        .envs(toolchain.iter().map(|(key, value)| (key, value)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Each stream's lines as they come, on a channel.
    let lines = |stream: Box<dyn std::io::Read + Send>| -> Receiver<String> {
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stream)
                .lines()
                .map_while(Result::ok)
            {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        lines
    };
    let reports = lines(Box::new(watching.stdout.take().unwrap()));
    let said = lines(Box::new(watching.stderr.take().unwrap()));
    let wait = |lines: &Receiver<String>, what: &str, found: &dyn Fn(&str) -> bool| -> String {
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) if found(&line) => return line,
                Ok(_) => {}
                Err(e) => panic!("no {what}: {e}"),
            }
        }
    };
    let greeting = |report: &str| {
        let report: Value = serde_json::from_str(report).unwrap();
        artifact(&report, "greeting.json")["greeting"].clone()
    };
    let first = wait(&reports, "first run", &|l| l.starts_with('{'));
    assert_eq!(greeting(&first), "hello", "{first}");
    wait(&said, "watching line", &|l| l.starts_with("watching "));

    let lib = project.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    std::fs::write(&lib, source.replace("fn describe()", "fn describe(")).unwrap();
    wait(&said, "the broken save's change", &|l| {
        l.starts_with("changed: src/lib.rs")
    });
    wait(&said, "the broken build's error", &|l| {
        l.starts_with("error: ")
    });
    wait(&said, "watching after the error", &|l| {
        l.starts_with("watching ")
    });

    std::fs::write(
        &lib,
        source.replace(".default(\"hello\")", ".default(\"ahoy\")"),
    )
    .unwrap();
    let second = wait(&reports, "second run", &|l| l.starts_with('{'));
    assert_eq!(greeting(&second), "ahoy", "{second}");
    watching.kill().unwrap();
    watching.wait().unwrap();
}

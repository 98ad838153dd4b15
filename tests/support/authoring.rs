//! What the plugin-authoring tests share: `plugin run` and `plugin info` through the real
//! binary, read as JSON, and the example in a document's text.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// What a tool printed, its standard output then its standard error.
pub fn said(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        stderr(output)
    )
}

pub fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `factbuoy plugin run ARGS -o json` that has ended: its exit code and report.
pub fn run_json(args: &[&str]) -> (i32, Value) {
    let output = super::factbuoy()
        .args(["plugin", "run"])
        .args(args)
        .args(["-o", "json"])
        .output()
        .unwrap();
    let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("no JSON report ({e}); stderr: {}", stderr(&output));
    });
    (output.status.code().unwrap_or(-1), report)
}

/// Runs the greeter that `plugin new` writes, built at `wasm` and named `plugin`, with the
/// greeting `ahoy`, and checks that it greets the host so: its `greeting.json`.
pub fn assert_greets(wasm: &str, plugin: &str) -> Value {
    let (code, report) = run_json(&[
        wasm,
        "--grant",
        &format!("{plugin}:host-info"),
        "-p",
        "greeting=ahoy",
    ]);
    assert_eq!(code, 0, "{report:#}");
    let greeting = artifact(&report, "greeting.json");
    assert_eq!(greeting["greeting"], "ahoy", "{greeting:#}");
    greeting
}

/// An artifact's content from a `plugin run -o json` report, parsed when it is JSON.
pub fn artifact(report: &Value, name: &str) -> Value {
    let found = report["artifacts"]
        .as_array()
        .and_then(|all| all.iter().find(|a| a["name"] == name))
        .unwrap_or_else(|| panic!("no artifact {name} in {report:#}"));
    match &found["content"] {
        Value::String(text) => serde_json::from_str(text).unwrap(),
        other => other.clone(),
    }
}

/// The rows of the table artifact `name` (JSON Lines) in a `plugin run -o json` report, which
/// embeds them as an array.
pub fn table_rows(report: &Value, name: &str) -> Vec<Value> {
    let found = report["artifacts"]
        .as_array()
        .and_then(|all| all.iter().find(|a| a["name"] == name))
        .unwrap_or_else(|| panic!("no artifact {name} in {report:#}"));
    found["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{name}'s rows are not an array: {found:#}"))
        .clone()
}

/// `plugin info -o json` without the human descriptions, which differ between twins written
/// in two languages.
pub fn contract_of(wasm: &Path) -> Value {
    let output = super::factbuoy()
        .args(["plugin", "info", path_str(wasm), "-o", "json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let mut info: Value = serde_json::from_slice(&output.stdout).unwrap();
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.remove("description");
                map.remove("reason");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut info);
    info
}

/// The first code block fenced as `fence` (```python, say) in the workspace's document `doc`:
/// the examples docs show are built and run by tests, so they cannot go stale.
pub fn doc_example(doc: &str, fence: &str) -> String {
    let text = std::fs::read_to_string(super::workspace().join(doc)).unwrap();
    let start = text
        .find(&format!("```{fence}\n"))
        .unwrap_or_else(|| panic!("{doc} has no ```{fence} block"));
    let body = &text[start + fence.len() + 4..];
    body[..body.find("```").expect("the block ends")].to_owned()
}

/// Runs the disk-report example of the SDK docs, built into `wasm`, and checks that it does what
/// the docs say: lists the host's file systems, without the types `skip` leaves out by default.
/// `type_field` is the language's name of a disk's file-system type.
pub fn assert_lists_file_systems(wasm: &Path, type_field: &str) {
    let (code, report) = run_json(&[path_str(wasm), "--grant", "disk-report:host-info"]);
    assert_eq!(code, 0, "{report:#}");
    let disks = table_rows(&report, "disks.jsonl");
    assert!(!disks.is_empty(), "{report:#}");
    assert!(disks.iter().all(|d| d[type_field] != "tmpfs"), "{disks:#?}");
}

/// `plugin run` of `wasm` without the `grant` (`name:read:/proc`) its contract asks for: nothing
/// runs (2), and the message says which flag fixes it.
pub fn assert_grant_required(wasm: &Path, grant: &str) {
    let output = super::factbuoy()
        .args(["plugin", "run", path_str(wasm)])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!("add --grant {grant}")),
        "{}",
        stderr(&output)
    );
}

/// `factbuoy plugin new NAME --lang LANG` in `home`: the project's directory.
pub fn plugin_new(home: &Path, name: &str, lang: &str) -> std::path::PathBuf {
    let output = super::factbuoy()
        .current_dir(home)
        .args(["plugin", "new", name, "--lang", lang])
        .output()
        .unwrap();
    assert!(output.status.success(), "{lang}: {}", stderr(&output));
    home.join(name)
}

/// Runs the `old-form` plugin built into `wasm`, which declares `facts.json`
/// (`application/json`), `rows.jsonl` (`application/jsonl`), `notes.txt` (`text/plain`) and
/// more media types with the SDK's deprecated `artifact(name, media type, description)` and
/// writes the first three: the SDK gives each artifact the kind the host gives a 0.1 plugin's
/// of that media type (`ArtifactKind::from_media_type`, one rule), and the run succeeds.
pub fn assert_old_form_artifacts(wasm: &Path) {
    let contract = contract_of(wasm);
    let kinds: Vec<(&str, &str, &str)> = contract["artifacts"]
        .as_array()
        .unwrap_or_else(|| panic!("{contract:#}"))
        .iter()
        .map(|a| {
            let text = |field: &str| a[field].as_str().unwrap_or_else(|| panic!("{a:#}"));
            (text("name"), text("media_type"), text("kind"))
        })
        .collect();
    assert_eq!(
        kinds[..3],
        [
            ("facts.json", "application/json", "facts"),
            ("rows.jsonl", "application/jsonl", "table"),
            ("notes.txt", "text/plain", "opaque"),
        ],
        "{contract:#}"
    );
    assert_eq!(kinds.len(), 8, "{contract:#}");
    for (name, media_type, kind) in kinds {
        let host = factbuoy_protocol::artifacts::ArtifactKind::from_media_type(media_type);
        assert_eq!(kind, host.name(), "{name} ({media_type})");
    }
    let (code, report) = run_json(&[path_str(wasm)]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(artifact(&report, "facts.json")["answer"], 42, "{report:#}");
    assert_eq!(table_rows(&report, "rows.jsonl")[0]["n"], 1, "{report:#}");
}

/// `plugin run DIR -o json` of the project `dir` that `plugin new` wrote as `name`, granted
/// host-info, with `path` as PATH (the language's toolchain) and `extra` flags: its exit code,
/// its report (`null` when it printed none) and what it said on stderr.
pub fn run_project(
    dir: &Path,
    name: &str,
    path: &std::ffi::OsStr,
    extra: &[&str],
) -> (Option<i32>, Value, String) {
    let output = super::factbuoy()
        .args(["plugin", "run"])
        .arg(dir)
        .args(["--grant", &format!("{name}:host-info"), "-o", "json"])
        .args(extra)
        .env("PATH", path)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output.status.code(), report, stderr(&output))
}

/// Runs the greeter project `dir` (`plugin new`'s, as `name`) through its development build
/// twice: the first run builds the runner and greets with `hello`; then its `source` file is
/// edited to greet with `ahoy`, and the next run greets so without building anything. Returns
/// the source as `plugin new` wrote it.
pub fn assert_an_edit_runs_without_a_build(
    dir: &Path,
    name: &str,
    path: &std::ffi::OsStr,
    source: &str,
) -> String {
    let (code, report, said) = run_project(dir, name, path, &[]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("building the development runner"), "{said}");
    assert_eq!(
        artifact(&report, "greeting.json")["greeting"],
        "hello",
        "{report:#}"
    );
    assert!(!dir.join(format!("target/{name}.wasm")).exists(), "{said}");

    let file = dir.join(source);
    let original = std::fs::read_to_string(&file).unwrap();
    std::fs::write(
        &file,
        original.replace("default(\"hello\")", "default(\"ahoy\")"),
    )
    .unwrap();
    let (code, report, said) = run_project(dir, name, path, &[]);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        !said.contains("building"),
        "built again for an edit: {said}"
    );
    assert_eq!(
        artifact(&report, "greeting.json")["greeting"],
        "ahoy",
        "{report:#}"
    );
    assert_eq!(report["warnings"], serde_json::json!([]), "{report:#}");
    original
}

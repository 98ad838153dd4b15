//! Every JSON document factbuoy writes or prints spells its keys one way: snake_case.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::kube_runs::Bundle;
use serde_json::Value;

/// Whether `key` is spelled `^[a-z][a-z0-9_]*[a-z0-9]$`.
fn is_snake_case(key: &str) -> bool {
    let bytes = key.as_bytes();
    bytes.len() >= 2
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
        && bytes[bytes.len() - 1] != b'_'
}

/// Every key of `value` (at any depth) that is not snake_case, with its path in `document`.
fn misspelled_keys(document: &str, value: &Value) -> Vec<String> {
    fn walk(path: String, value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(fields) => {
                for (key, value) in fields {
                    if !is_snake_case(key) {
                        found.push(format!("{path}: {key:?}"));
                    }
                    walk(format!("{path}.{key}"), value, found);
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(format!("{path}[{i}]"), item, found);
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    walk(document.to_owned(), value, &mut found);
    found
}

fn json_of(what: &str, output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: {e}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn factbuoy_json(state: &Path, args: &[&str], code: i32) -> Value {
    let output = support::factbuoy()
        .env("FACTBUOY_STATE_DIR", state)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(code),
        "factbuoy {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    json_of(&format!("factbuoy {args:?}"), &output)
}

#[test]
fn every_json_document_spells_its_keys_in_snake_case_and_the_bundle_says_complete() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let out = dir.path().join("out");
    // hello and host-facts write factbuoy's own schemas, so their results are checked too;
    // setup fails on its parameter, which gives an `errors/<node>/error.json` (and keeps out
    // its Ansible-named facts, whose keys are Ansible's: kernel options, environment names).
    // No key of these documents is data (a file or node name), so none is exempt.
    let summary = factbuoy_json(
        &state,
        &[
            "run",
            "--plugin",
            "hello",
            "--plugin",
            "host-facts",
            "--plugin",
            "setup",
            "-p",
            "setup:gather_subset=bogus",
            "--node",
            "this-host",
            "--out",
            out.to_str().unwrap(),
            "-o",
            "json",
        ],
        1,
    );
    let path = summary["bundle"]["path"].as_str().unwrap().to_owned();
    let bundle = Bundle::read(PathBuf::from(&path));

    let mut documents = vec![("run -o json".to_owned(), summary)];
    for (name, bytes) in &bundle.files {
        if name.ends_with(".json") {
            let value = serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            documents.push((name.clone(), value));
        }
    }
    for expected in [
        "meta/run.json",
        "meta/status.json",
        "meta/index.json",
        "meta/reports/hello/this-host.json",
        "meta/reports/setup/this-host.json",
        "plugins/hello/definition.json",
        "plugins/hello/results/this-host/greeting.json",
        "plugins/host-facts/results/this-host/host-facts.json",
        "plugins/setup/errors/this-host/error.json",
    ] {
        assert!(
            bundle.files.contains_key(expected),
            "{expected} missing: {:?}",
            bundle.files.keys()
        );
    }
    for args in [
        &["status", "-o", "json"][..],
        &["plugin", "info", "hello", "-o", "json"],
        &["plugin", "list", "-o", "json"],
        &["plugin", "run", "hello", "-o", "json"],
    ] {
        documents.push((args.join(" "), factbuoy_json(&state, args, 0)));
    }
    // Every `factbuoy inspect` document of the same bundle.
    let (export, report) = (dir.path().join("export"), dir.path().join("report.html"));
    let (export, report) = (export.to_str().unwrap(), report.to_str().unwrap());
    let p = path.as_str();
    for args in [
        &["inspect", "verify", p, "-o", "json"][..],
        &["inspect", "summary", p, "-o", "json"],
        &[
            "inspect",
            "facts",
            p,
            "this-host",
            "host-facts",
            "-o",
            "json",
        ],
        &["inspect", "query", p, "cpu.cores", "-o", "json"],
        &["inspect", "diff", p, "-o", "json"],
        &["inspect", "diff", p, p, "-o", "json"],
        &["inspect", "sql", p, "SELECT run_id FROM runs", "-o", "json"],
        &[
            "inspect", "export", p, "--format", "jsonl", "--out", export, "-o", "json",
        ],
        &["inspect", "report", p, "--out", report, "-o", "json"],
    ] {
        documents.push((args.join(" "), factbuoy_json(&state, args, 0)));
    }

    let misspelled: Vec<String> = documents
        .iter()
        .flat_map(|(name, value)| misspelled_keys(name, value))
        .collect();
    assert!(
        misspelled.is_empty(),
        "keys not in snake_case:\n{}",
        misspelled.join("\n")
    );

    // The bundle holds the run's final status, not the `post-processing` it was packed in.
    let status = bundle.status();
    assert_eq!(status["status"], "complete", "{status:#}");
    // It cannot hold its own digest: the bundle's name, size and sha-256 are in `status`.
    assert!(status.get("tar_info").is_none(), "{status:#}");
}

#[test]
fn log_levels_are_written_in_lower_case_as_the_contract_spells_them() {
    let output = support::factbuoy()
        .arg("plugin")
        .arg("run")
        .arg(support::fixture("hostile"))
        .args(["-p", "mode=log-flood", "-p", "count=1", "-o", "json"])
        .output()
        .unwrap();
    let report = json_of("plugin run hostile", &output);
    assert_eq!(report["logs"][0]["level"], "info", "{report:#}");
}

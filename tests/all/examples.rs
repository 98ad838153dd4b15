//! The `factbuoy inspect` examples that `--help`, the README and docs/ show, run as written by
//! the real binary against bundles named as the examples name them: an example that stopped
//! working fails here with where it is written. (That every example of every command parses
//! is [`parse`]'s, for every command.)

mod parse;

#[path = "../support/examples.rs"]
mod written;

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::inspect::{bundle_of, fixture_journals, fleet_files, journalctl, text};
use crate::support;

/// Examples that cannot run here as written, each with the reason.
const NOT_RUN: &[(&str, &str)] = &[
    ("$(", "takes its input from another command's output"),
    ("/var/lib/", "names a directory of the operator's machine"),
    ("*.tar.gz", "names bundles by a shell pattern"),
];

/// Every `factbuoy inspect` invocation the help of `inspect` and its commands shows.
fn help_examples() -> Vec<written::Invocation> {
    let help = |args: &[&str]| {
        let output = support::factbuoy()
            .args(args)
            .arg("--help")
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        text(&output.stdout)
    };
    let top = help(&["inspect"]);
    let commands: Vec<String> = top
        .split_once("Commands:\n")
        .unwrap()
        .1
        .lines()
        .take_while(|l| l.starts_with("  "))
        // A description's wrapped lines are indented further.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help")
        .collect();
    let mut found = Vec::new();
    for (source, help) in std::iter::once(("inspect".to_owned(), top.clone())).chain(
        commands
            .iter()
            .map(|c| (format!("inspect {c}"), help(&["inspect", c]))),
    ) {
        for line in written::help_lines(&help) {
            let source = format!("`factbuoy {source} --help`");
            found.extend(
                written::invocations(&source, &line)
                    .unwrap_or_else(|| panic!("{source}: {line:?} does not split as a shell's")),
            );
        }
    }
    found
}

/// Every `factbuoy inspect` invocation of the README's and docs/'s code blocks.
fn page_examples() -> Vec<written::Invocation> {
    let root = support::workspace();
    let mut pages = vec![root.join("README.md")];
    pages.extend(support::files_below(&root.join("docs"), &[], |p| {
        p.extension().is_some_and(|e| e == "md")
    }));
    let mut found = Vec::new();
    for page in pages {
        let relative = page.strip_prefix(&root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&page).unwrap();
        for (number, line) in written::markdown_lines(&text) {
            found.extend(
                written::invocations(&format!("{relative}:{number}"), &line).unwrap_or_default(),
            );
        }
    }
    found
}

/// The files of a three-node bundle with facts and journals ([`fleet_files`], the committed
/// journals as web-1's and web-2's), its run `run_id`, created at `created`.
fn files_of_run(journals: &[Vec<u8>], run_id: &str, created: &str) -> Vec<(&'static str, Vec<u8>)> {
    let mut files = fleet_files();
    for (path, data) in &mut files {
        let mut document: Value = match *path {
            "meta/run.json" | "meta/status.json" => serde_json::from_slice(data).unwrap(),
            _ => continue,
        };
        document["run_id"] = json!(run_id);
        if *path == "meta/run.json" {
            document["created"] = json!(created);
        }
        *data = serde_json::to_vec(&document).unwrap();
    }
    files.push((
        "plugins/systemd-logs/results/web-1/journal.jsonl",
        journals[0].clone(),
    ));
    files.push((
        "plugins/systemd-logs/results/web-2/journal.jsonl",
        journals[1].clone(),
    ));
    files
}

/// `files` of web-1 alone, as a local run's bundle is of one node.
fn of_one_node(files: Vec<(&'static str, Vec<u8>)>) -> Vec<(&'static str, Vec<u8>)> {
    files
        .into_iter()
        .filter(|(path, _)| !path.contains("/web-2/") && !path.contains("/web-3/"))
        .map(|(path, data)| {
            if path != "meta/status.json" {
                return (path, data);
            }
            let mut status: Value = serde_json::from_slice(&data).unwrap();
            status["plugins"]
                .as_array_mut()
                .unwrap()
                .retain(|pair| pair["node"] == "web-1");
            (path, serde_json::to_vec(&status).unwrap())
        })
        .collect()
}

/// Whether `name` is as a local run names its bundle (`<time>_factbuoy_<run id>.tar.gz`).
fn is_local_run_name(name: &str) -> bool {
    name.strip_suffix(".tar.gz")
        .and_then(|stem| stem.split_once("_factbuoy_"))
        .is_some_and(|(time, id)| {
            time.len() == 14 && time.bytes().all(|b| b.is_ascii_digit()) && id.len() == 12
        })
}

/// A folder holding what the examples name: each `.tar.gz` they name (a three-node bundle; a
/// one-node one where named as a local run's), `./extracted-bundle` (the three-node one,
/// extracted) and `./bundles` (two runs of it, one from 30 April 2026, one from now).
fn fixtures(dir: &Path, examples: &[written::Invocation]) {
    let machines = tempfile::tempdir().unwrap();
    let journals: Vec<Vec<u8>> = fixture_journals(machines.path())
        .iter()
        .map(|machine| {
            journalctl(machine, &[])
                .iter()
                .map(|entry| format!("{entry}\n"))
                .collect::<String>()
                .into_bytes()
        })
        .collect();
    let now = "2026-11-27T12:00:00Z";
    let bundle = bundle_of(
        dir,
        "run.tar.gz",
        &files_of_run(&journals, "0a0a0a0a0a0a", now),
    );
    let local = bundle_of(
        dir,
        "local.tar.gz",
        &of_one_node(files_of_run(&journals, "0c0c0c0c0c0c", now)),
    );
    for name in examples
        .iter()
        .flat_map(|e| &e.args)
        .filter(|a| a.ends_with(".tar.gz") && !a.contains(['/', '*']))
    {
        let source = if is_local_run_name(name) {
            &local
        } else {
            &bundle
        };
        if !dir.join(name).exists() {
            std::fs::copy(source, dir.join(name)).unwrap();
        }
    }
    let extracted = dir.join("extracted-bundle");
    std::fs::create_dir(&extracted).unwrap();
    let untar = Command::new("tar")
        .arg("-xzf")
        .arg(&bundle)
        .arg("-C")
        .arg(&extracted)
        .status()
        .unwrap();
    assert!(untar.success());
    let bundles = dir.join("bundles");
    std::fs::create_dir(&bundles).unwrap();
    bundle_of(
        &bundles,
        "april.tar.gz",
        &files_of_run(&journals, "0b0b0b0b0b0b", "2026-04-30T12:00:00Z"),
    );
    std::fs::copy(&bundle, bundles.join("november.tar.gz")).unwrap();
}

#[test]
fn every_inspect_example_in_help_the_readme_and_docs_runs() {
    let mut examples = help_examples();
    let from_help = examples.len();
    examples.extend(page_examples());
    examples.retain(|e| e.args.first().is_some_and(|a| a == "inspect"));
    let (skipped, examples): (Vec<_>, Vec<_>) = examples
        .into_iter()
        .partition(|e| NOT_RUN.iter().any(|(s, _)| e.line.contains(s)));
    assert!(
        from_help >= 30,
        "only {from_help} examples in inspect's help"
    );
    assert!(examples.len() >= 60, "only {} examples run", examples.len());
    assert!(skipped.len() <= 5, "{skipped:#?}");

    let template = tempfile::tempdir().unwrap();
    fixtures(template.path(), &examples);
    let mut failures = Vec::new();
    for example in &examples {
        // Each in a folder of its own: examples write files (--out, --db) that must not exist.
        let dir = tempfile::tempdir().unwrap();
        let copied = Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", template.path().display()))
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(copied.success());
        let output = support::factbuoy()
            .current_dir(dir.path())
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .args(&example.args)
            .output()
            .unwrap();
        // `--exit-code` exits 1 when there are differences, as `git diff --exit-code` does.
        let allowed: &[i32] = if example.args.iter().any(|a| a == "--exit-code") {
            &[0, 1]
        } else {
            &[0]
        };
        if !output.status.code().is_some_and(|c| allowed.contains(&c)) {
            failures.push(format!(
                "{}: {}\n  exit {:?}: {}",
                example.source,
                example.line,
                output.status.code(),
                text(&output.stderr).trim()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

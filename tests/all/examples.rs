//! The command examples that `--help`, the README and docs/ show, run as written by the real
//! binary against the bundles they name (the fleet of [`fleet`]), their output compared with
//! what the page shows where it shows any: an example that stopped working, or whose output
//! changed, fails here with where it is written. Markdown shows output after a `$ ` prompt's
//! command, up to the next prompt; `[..]` in it stands for any text within a line and `...`
//! on a line of its own for any lines, as in trycmd (the comparison is snapbox's). That every
//! example of every command parses is [`parse`]'s.

mod fleet;
mod parse;

#[path = "../support/examples.rs"]
pub(crate) mod written;

use std::path::Path;
use std::process::Command;

use snapbox::IntoData;

use crate::inspect::text;
use crate::support;
use fleet::Month;

/// Examples that cannot run here as written, each with the reason.
const NOT_RUN: &[(&str, &str)] = &[
    ("$(", "takes its input from another command's output"),
    ("/var/lib/", "names a directory of the operator's machine"),
    ("*.tar.gz", "names bundles by a shell pattern"),
    ("/var/cache/", "names a directory of the operator's machine"),
    (
        "--root /host",
        "names the host's root where a pod mounts it",
    ),
    (
        "my.wasm",
        "runs a plugin of the reader's (tests/all/plugin_authoring.rs builds and runs one)",
    ),
    (
        "cluster-report.wasm",
        "runs a plugin of the reader's (tests/kube_shared/manifests.rs generates a global one)",
    ),
    (
        "\"$wasm\"",
        "takes its plugin from a variable an earlier command set",
    ),
    (
        "--watch",
        "runs until interrupted (tests/all/plugin_authoring.rs runs it on a project it edits)",
    ),
    (
        "3f2a9c01d4e7",
        "names a run of the reader's (tests/all/cli_runs.rs asks for runs by id)",
    ),
    (
        "target/",
        "runs a plugin the reader built (tests/all/plugin_authoring*.rs build and run them)",
    ),
    (
        "oci://",
        "names a registry of the reader's (tests/all/registry.rs pushes, pulls and runs plugins through one it starts)",
    ),
];

/// Bundles the examples name for the fleet's October run; any other name is its November run.
const OCTOBER: &[&str] = &[
    "last-month.tar.gz",
    "old.tar.gz",
    "jan.tar.gz",
    "earlier.tar.gz",
    "day1.tar.gz",
];

/// The run ids of the fleet's runs.
const OCTOBER_RUN: &str = "5e9b1c2a7d30";
const NOVEMBER_RUN: &str = "f1ee7f1ee700";
/// A run between them, of October's facts, that web-2 missed.
const MID_NOVEMBER_RUN: &str = "3d1a5b0c9e47";

/// The run id and creation time of a bundle named as a local run names it
/// (`<%Y%m%d%H%M%S>_factbuoy_<run id>.tar.gz`).
fn local_run(name: &str) -> Option<(&str, String)> {
    let (time, id) = name.strip_suffix(".tar.gz")?.split_once("_factbuoy_")?;
    let digits = time.len() == 14 && time.bytes().all(|b| b.is_ascii_digit());
    let hex = id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit());
    (digits && hex).then(|| {
        let t = |range: std::ops::Range<usize>| &time[range];
        let created = format!(
            "{}-{}-{}T{}:{}:{}Z",
            t(0..4),
            t(4..6),
            t(6..8),
            t(8..10),
            t(10..12),
            t(12..14)
        );
        (id, created)
    })
}

/// A folder holding what the examples name: each `.tar.gz` they name (the fleet's November
/// run; its October run for the names in [`OCTOBER`]; web-1's facts alone, as that run, for a
/// name as a local run gives), `./extracted-bundle` (November's, extracted) and `./bundles`
/// (both runs, and one between them that web-2 missed).
fn fixtures(dir: &Path, examples: &[written::Invocation]) {
    let november = "2026-11-27T12:00:00Z";
    let october = "2026-10-27T12:00:00Z";
    let bundle = fleet::bundle(
        dir,
        "run.tar.gz",
        Month::November,
        NOVEMBER_RUN,
        november,
        None,
    );
    for name in examples
        .iter()
        .flat_map(|e| &e.args)
        .filter(|a| a.ends_with(".tar.gz") && !a.contains(['/', '*']))
    {
        if dir.join(name).exists() {
            continue;
        }
        if let Some((id, created)) = local_run(name) {
            fleet::bundle(dir, name, Month::November, id, &created, Some(&["web-1"]));
        } else if OCTOBER.contains(&name.as_str()) {
            fleet::bundle(dir, name, Month::October, OCTOBER_RUN, october, None);
        } else {
            std::fs::copy(&bundle, dir.join(name)).unwrap();
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
    fleet::bundle(
        &bundles,
        "october.tar.gz",
        Month::October,
        OCTOBER_RUN,
        october,
        None,
    );
    fleet::bundle(
        &bundles,
        "mid-november.tar.gz",
        Month::October,
        MID_NOVEMBER_RUN,
        "2026-11-13T12:00:00Z",
        Some(&["web-1", "web-3", "web-4"]),
    );
    std::fs::copy(&bundle, bundles.join("november.tar.gz")).unwrap();
}

/// Outputs the pages show of examples that no test here runs, each with the test that checks
/// the same.
const SHOWN_ELSEWHERE: &[(&str, &str)] = &[
    (
        "listening_sockets_sockets",
        "tests/all/plugin_authoring_python.rs the_python_examples_table_is_an_sql_table_of_its_bundle",
    ),
    (
        "factbuoy plugin build",
        "tests/all/plugin_authoring.rs a_project_is_built_only_when_it_changed_and_a_syntax_error_is_found_first (shown_output)",
    ),
];

/// What `page` (a path from the repository's root) shows `command` printing: for tests that
/// run an example elsewhere ([`SHOWN_ELSEWHERE`]).
pub(crate) fn shown_output(page: &str, command: &str) -> String {
    let text = std::fs::read_to_string(support::workspace().join(page)).unwrap();
    written::markdown_lines(&text)
        .into_iter()
        .find(|l| l.line == command && l.shown.is_some())
        .and_then(|l| l.shown)
        .unwrap_or_else(|| panic!("{page} shows no output of {command:?}"))
}

/// Where an example's command runs: here, against the fixtures, or in the tests named.
enum Place {
    Here,
    /// Needs what this test does not set up: the entry of [`ELSEWHERE`] that says which tests
    /// run it.
    Elsewhere(usize),
}

/// Commands whose examples need a cluster, a fleet, long-running services or a project's
/// toolchain, each with the tests that run them.
const ELSEWHERE: &[(&[&str], &str)] = &[
    (
        &["--kubernetes"],
        "a cluster: tests/kube_shared/run.rs, tests/kube_nodes/",
    ),
    (&["--context"], "a cluster: tests/kube_shared/run.rs"),
    (
        &["--fleet"],
        "a fleet of machines: tests/all/fleet_cli.rs, tests/all/fleet_lifecycle.rs",
    ),
    (
        &["fleet"],
        "a fleet's server and machines, or a cluster for its hub: tests/all/fleet_cli.rs, tests/all/fleet_lifecycle.rs, tests/kube_shared/hub.rs",
    ),
    (
        &["agent"],
        "an aggregator to join or serve: tests/all/fleet_cli.rs, tests/all/aggregator_enroll.rs",
    ),
    (&["delete"], "a cluster: tests/kube_shared/run.rs"),
    (
        &["aggregator"],
        "a run's plan and certificates: tests/all/aggregator.rs, tests/all/cli_runs.rs",
    ),
    (
        &["plugin", "build"],
        "a project built with its toolchain: tests/all/plugin_authoring*.rs",
    ),
    (
        &["--web"],
        "a page server that serves until it is stopped: tests/all/status_web.rs",
    ),
];

/// Where `example` runs ([`Place`]).
fn place(example: &written::Invocation) -> Place {
    for (entry, (words, _)) in ELSEWHERE.iter().enumerate() {
        let matches = match words {
            [flag] if flag.starts_with("--") => example.args.iter().any(|a| a.starts_with(flag)),
            _ => example
                .args
                .iter()
                .map(String::as_str)
                .take(words.len())
                .eq(words.iter().copied()),
        };
        if matches {
            return Place::Elsewhere(entry);
        }
    }
    Place::Here
}

/// Runs `example` in a copy of `template`, with its own state and caches, and says how it
/// failed: an exit other than 0 (or 1 for `--exit-code`), or output other than the page shows.
fn failure_of(example: &written::Invocation, template: &Path) -> Option<String> {
    // Each in a folder of its own: examples write files (--out, --db) that must not exist.
    let dir = tempfile::tempdir().unwrap();
    let copied = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", template.display()))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(copied.success());
    // The cache's own commands see a cache of their own, holding the hello plugin: what the
    // tests share changes, and must not be pruned.
    let own_cache = example
        .args
        .starts_with(&["plugin".to_owned(), "cache".to_owned()])
        .then(|| dir.path().join("components"));
    let factbuoy = || {
        let mut command = support::factbuoy();
        command
            .current_dir(dir.path())
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .env("FACTBUOY_STATE_DIR", dir.path().join("state"));
        if let Some(cache) = &own_cache {
            command.env("FACTBUOY_CACHE_DIR", cache);
        }
        command
    };
    if own_cache.is_some() {
        let hello = factbuoy()
            .args(["plugin", "run", "hello"])
            .output()
            .unwrap();
        assert!(hello.status.success(), "{}", text(&hello.stderr));
    }
    let output = factbuoy().args(&example.args).output().unwrap();
    // `--exit-code` exits 1 when there are differences, as `git diff --exit-code` does.
    let allowed: &[i32] = if example.args.iter().any(|a| a == "--exit-code") {
        &[0, 1]
    } else {
        &[0]
    };
    if !output.status.code().is_some_and(|c| allowed.contains(&c)) {
        return Some(format!(
            "{}: {}\n  exit {:?}: {}",
            example.source,
            example.line,
            output.status.code(),
            text(&output.stderr).trim()
        ));
    }
    let shown = example.shown.as_ref()?;
    let compared = snapbox::Assert::new().try_eq(
        Some(&example.source),
        text(&output.stdout).into_data(),
        shown.as_str().into_data(),
    );
    compared.err().map(|difference| {
        format!(
            "{}: {}\n  prints other than the page shows:\n{difference}\n  it printed:\n{}",
            example.source,
            example.line,
            text(&output.stdout)
        )
    })
}

#[test]
fn every_inspect_example_runs_and_prints_what_the_docs_show() {
    let (examples, from_help) = parse::written_examples();
    let (inspect_help, pages): (Vec<_>, Vec<_>) = examples
        .into_iter()
        .enumerate()
        .filter(|(_, e)| e.args.first().is_some_and(|a| a == "inspect"))
        .partition(|(i, _)| *i < from_help);
    let inspect_from_help = inspect_help.len();
    let (skipped, examples): (Vec<_>, Vec<_>) = inspect_help
        .into_iter()
        .chain(pages)
        .map(|(_, e)| e)
        .partition(|e| NOT_RUN.iter().any(|(s, _)| e.line.contains(s)));
    assert!(
        inspect_from_help >= 30,
        "only {inspect_from_help} examples in --help of inspect's commands"
    );
    assert!(examples.len() >= 60, "only {} examples run", examples.len());
    assert!(skipped.len() <= 5, "{skipped:#?}");
    let shown = examples.iter().filter(|e| e.shown.is_some()).count();
    assert!(shown >= 8, "only {shown} examples' output is shown");

    let template = tempfile::tempdir().unwrap();
    fixtures(template.path(), &examples);
    assert_each_runs(&examples, template.path());
}

/// Runs each of `examples` in a copy of `template` ([`failure_of`]), and fails with every one
/// that failed.
fn assert_each_runs(examples: &[written::Invocation], template: &Path) {
    let failures: Vec<String> = examples
        .iter()
        .filter_map(|e| failure_of(e, template))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_example_of_a_command_that_runs_on_this_host_runs_and_prints_what_the_docs_show() {
    let (examples, _) = parse::written_examples();
    // How many examples each entry of ELSEWHERE sends to other tests: an entry that no
    // longer names any is stale.
    let mut elsewhere = vec![0_usize; ELSEWHERE.len()];
    let mut here = Vec::new();
    for example in examples {
        if example.args.first().is_some_and(|a| a == "inspect")
            || NOT_RUN.iter().any(|(s, _)| example.line.contains(s))
        {
            continue;
        }
        match place(&example) {
            Place::Here => here.push(example),
            Place::Elsewhere(entry) => elsewhere[entry] += 1,
        }
    }
    assert!(here.len() >= 40, "only {} examples run here", here.len());
    let stale: Vec<&[&str]> = ELSEWHERE
        .iter()
        .zip(&elsewhere)
        .filter(|(_, count)| **count == 0)
        .map(|((words, _), _)| *words)
        .collect();
    assert!(
        stale.is_empty(),
        "ELSEWHERE entries no example needs: {stale:?}"
    );
    eprintln!("{} examples run here; elsewhere:", here.len());
    for ((words, tests), count) in ELSEWHERE.iter().zip(&elsewhere) {
        eprintln!("  {count} with {words:?}, needing {tests}");
    }

    // The bundles they name, and a finished local run in the state they see (status,
    // retrieve, runs), its records in ./my-run.
    let template = tempfile::tempdir().unwrap();
    fixtures(template.path(), &here);
    let run = support::factbuoy()
        .current_dir(template.path())
        .env("FACTBUOY_STATE_DIR", template.path().join("state"))
        .args([
            "run",
            "--plugin",
            "hello",
            "--run-dir",
            "my-run",
            "--out",
            ".",
        ])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_each_runs(&here, template.path());
}

#[test]
fn every_output_a_page_shows_is_compared_by_a_test() {
    let (examples, _) = parse::written_examples();
    let unchecked: Vec<String> = examples
        .iter()
        .filter(|e| e.shown.is_some())
        .filter(|e| {
            NOT_RUN.iter().any(|(s, _)| e.line.contains(s))
                || matches!(place(e), Place::Elsewhere(_))
        })
        .filter(|e| !SHOWN_ELSEWHERE.iter().any(|(s, _)| e.line.contains(s)))
        .map(|e| format!("{}: {}", e.source, e.line))
        .collect();
    assert!(
        unchecked.is_empty(),
        "output shown that no test compares:\n{}",
        unchecked.join("\n")
    );
}

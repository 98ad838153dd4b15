//! A directory of bundles read as one history by the real binary: `inspect index`, `history`,
//! `sql --as-of` and `diff --since` over bundles written by the bundle writer from the real
//! run's facts, a day apart, with nodes that change, go missing, appear and stop reporting.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use factbuoy_bundle::writer;
use factbuoy_protocol::types::StatusDocument;
use serde_json::{Value, json};

use crate::inspect::{json_of, real_bundle, real_facts, rendered, text};
use crate::support;
use crate::support::kube_runs::Bundle;

const ORIGIN: &str = "fleet:0123abcd";

/// A node's state on one day: its kernel, and the version of its openssl package.
pub(crate) struct NodeDay {
    node: &'static str,
    kernel: &'static str,
    openssl: &'static str,
}

pub(crate) fn on(node: &'static str, kernel: &'static str, openssl: &'static str) -> NodeDay {
    NodeDay {
        node,
        kernel,
        openssl,
    }
}

/// Writes, into `dir`, the bundle of a run created at `created` by `origin` (`kind:id`)
/// whose nodes are `nodes`, through the bundle writer, as an aggregator writes one.
pub(crate) fn day(
    dir: &Path,
    created: &str,
    run_id: &str,
    origin: &str,
    nodes: &[NodeDay],
) -> PathBuf {
    let real = Bundle::read(real_bundle().0.to_owned()).files;
    let mut run: Value = serde_json::from_slice(&real["meta/run.json"]).unwrap();
    run["run_id"] = json!(run_id);
    run["created"] = json!(created);
    let (kind, id) = origin.split_once(':').unwrap();
    run["origin"] = json!({"kind": kind, "id": id});
    let (setup, _) = real_facts();
    let tree = tempfile::tempdir().unwrap();
    let mut pairs = Vec::new();
    for n in nodes {
        let mut facts = setup.clone();
        facts["ansible_kernel"] = json!(n.kernel);
        // A clock, which changes every run and is left out unless asked for.
        facts["ansible_date_time"]["iso8601"] = json!(created);
        let results = tree.path().join("plugins/setup/results").join(n.node);
        std::fs::create_dir_all(&results).unwrap();
        std::fs::write(results.join("ansible_facts.json"), facts.to_string()).unwrap();
        let results = tree.path().join("plugins/inventory/results").join(n.node);
        std::fs::create_dir_all(&results).unwrap();
        let rows = [
            json!({"name": "openssl", "version": n.openssl}),
            json!({"name": "curl", "version": "7.88"}),
        ];
        let rows: Vec<String> = rows.iter().map(Value::to_string).collect();
        std::fs::write(results.join("packages.jsonl"), rows.join("\n")).unwrap();
        for plugin in ["setup", "inventory"] {
            pairs.push(
                json!({"plugin": plugin, "node": n.node, "status": "complete",
                              "result_status": "passed"}),
            );
        }
    }
    let status: StatusDocument =
        serde_json::from_value(json!({"run_id": run_id, "status": "complete", "plugins": pairs}))
            .unwrap();
    let setup_definition: Value =
        serde_json::from_slice(&real["plugins/setup/definition.json"]).unwrap();
    let inventory = json!({
        "name": "inventory", "version": "1.0.0", "description": "installed packages",
        "parameters": [], "capabilities": [],
        "artifacts": [{"name": "packages.jsonl", "media_type": "application/jsonl",
                       "description": "one row per package", "kind": "table",
                       "row_keys": ["name"]}]});
    let (path, _) = writer::write(
        &writer::Meta {
            run_id,
            run: &run,
            status: &status,
            definitions: vec![("setup", &setup_definition), ("inventory", &inventory)],
        },
        tree.path(),
        dir,
    )
    .unwrap();
    // Named by its day, not by when the test wrote it: the order is the runs' own.
    let named = dir.join(format!("{run_id}.tar.gz"));
    std::fs::rename(&path, &named).unwrap();
    named
}

/// The pile: four daily runs of one fleet. web-1 gets a new kernel on day 2 and a new openssl
/// on day 3; web-2 misses day 2 and gets the new kernel on day 4; web-3 appears on day 2 and
/// stops reporting after day 3.
fn pile(dir: &Path) -> Vec<PathBuf> {
    vec![
        day(
            dir,
            "2030-03-01T02:00:00Z",
            "day1",
            ORIGIN,
            &[
                on("web-1", "6.1.0-18", "3.0.1"),
                on("web-2", "6.1.0-18", "3.0.1"),
            ],
        ),
        day(
            dir,
            "2030-03-02T02:00:00Z",
            "day2",
            ORIGIN,
            &[
                on("web-1", "6.1.0-20", "3.0.1"),
                on("web-3", "6.1.0-18", "3.0.1"),
            ],
        ),
        day(
            dir,
            "2030-03-03T02:00:00.5Z",
            "day3",
            ORIGIN,
            &[
                on("web-1", "6.1.0-20", "3.0.2"),
                on("web-2", "6.1.0-18", "3.0.1"),
                on("web-3", "6.1.0-18", "3.0.1"),
            ],
        ),
        day(
            dir,
            "2030-03-04T02:00:00Z",
            "day4",
            ORIGIN,
            &[
                on("web-1", "6.1.0-20", "3.0.2"),
                on("web-2", "6.1.0-20", "3.0.1"),
            ],
        ),
    ]
}

/// A work folder holding `bundles/`, the directory [`pile`] writes (its bundles' paths are
/// returned too), and `cache/`, for the index.
fn piled() -> (tempfile::TempDir, PathBuf, PathBuf, Vec<PathBuf>) {
    let work = tempfile::tempdir().unwrap();
    let (dir, cache) = (work.path().join("bundles"), work.path().join("cache"));
    std::fs::create_dir(&dir).unwrap();
    let days = pile(&dir);
    (work, dir, cache, days)
}

/// `factbuoy inspect ARGS` with the cache directory in `cache`.
fn inspect(cache: &Path, args: &[&str]) -> Output {
    support::factbuoy()
        .env("XDG_CACHE_HOME", cache)
        .arg("inspect")
        .args(args)
        .output()
        .unwrap()
}

/// The same, which must succeed, as JSON.
fn inspect_json(cache: &Path, args: &[&str]) -> Value {
    let output = inspect(cache, &[args, &["-o", "json"]].concat());
    assert!(output.status.success(), "{}", text(&output.stderr));
    json_of(&output)
}

/// Each value of `node`'s fact in a history answer: (value, first seen, last seen, previous).
fn values(answer: &Value, node: &str) -> Vec<(Value, String, String, Value)> {
    let node = answer["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == node)
        .unwrap_or_else(|| panic!("no {node} in {answer:#}"));
    assert_eq!(node["facts"].as_array().unwrap().len(), 1, "{node:#}");
    node["facts"][0]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["value"].clone(),
                c["first_seen"]["run_id"].as_str().unwrap().to_owned(),
                c["last_seen"]["run_id"].as_str().unwrap().to_owned(),
                c.get("previous").cloned().unwrap_or(Value::Null),
            )
        })
        .collect()
}

fn change(
    value: &str,
    first: &str,
    last: &str,
    previous: Option<&str>,
) -> (Value, String, String, Value) {
    (
        json!(value),
        first.to_owned(),
        last.to_owned(),
        previous.map_or(Value::Null, |p| json!(p)),
    )
}

#[test]
fn history_tells_when_each_fact_changed_and_when_each_node_came_and_went() {
    let (_work, dir, cache, _) = piled();
    let d = dir.to_str().unwrap();

    let kernel = inspect_json(&cache, &["history", d, "ansible_kernel"]);
    assert_eq!(kernel["origin"], ORIGIN);
    assert_eq!(
        values(&kernel, "web-1"),
        [
            change("6.1.0-18", "day1", "day1", None),
            change("6.1.0-20", "day2", "day4", Some("6.1.0-18")),
        ]
    );
    // A day missing is not a change: the old kernel was last seen on day 3.
    assert_eq!(
        values(&kernel, "web-2"),
        [
            change("6.1.0-18", "day1", "day3", None),
            change("6.1.0-20", "day4", "day4", Some("6.1.0-18")),
        ]
    );
    // A table's row, named by its key, as `diff` names it.
    let openssl = inspect_json(
        &cache,
        &[
            "history",
            d,
            "packages[name=\"openssl\"].version",
            "--node",
            "web-1",
        ],
    );
    assert_eq!(
        values(&openssl, "web-1"),
        [
            change("3.0.1", "day1", "day2", None),
            change("3.0.2", "day3", "day4", Some("3.0.1")),
        ]
    );

    // A clock, which the index keeps apart from the other facts, asked for by its path.
    let clock = inspect_json(
        &cache,
        &["history", d, "ansible_date_time.iso8601", "--node", "web-2"],
    );
    assert_eq!(
        values(&clock, "web-2"),
        [
            change("2030-03-01T02:00:00Z", "day1", "day1", None),
            change(
                "2030-03-03T02:00:00.5Z",
                "day3",
                "day3",
                Some("2030-03-01T02:00:00Z")
            ),
            change(
                "2030-03-04T02:00:00Z",
                "day4",
                "day4",
                Some("2030-03-03T02:00:00.5Z")
            ),
        ]
    );
    // And among the facts that changed once the clocks are not left out.
    let unfiltered = inspect_json(
        &cache,
        &["history", d, "--node", "web-1", "--no-default-ignores"],
    );
    let unfiltered: Vec<&str> = unfiltered["nodes"][0]["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        unfiltered,
        [
            "packages[name=\"openssl\"].version",
            "ansible_date_time.iso8601",
            "ansible_kernel"
        ]
    );

    // Without a path: the facts that changed, but not the clock, and each node's life.
    let all = inspect_json(&cache, &["history", d]);
    let node = |name: &str| {
        all["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == name)
            .unwrap()
            .clone()
    };
    let paths = |name: &str| -> Vec<String> {
        node(name)["facts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                format!(
                    "{} {}",
                    f["plugin"].as_str().unwrap(),
                    f["path"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(
        paths("web-1"),
        [
            "inventory packages[name=\"openssl\"].version",
            "setup ansible_kernel"
        ]
    );
    assert_eq!(paths("web-3"), Vec::<String>::new());
    let events = |name: &str| -> Vec<(String, String, Value)> {
        node(name)["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["kind"].as_str().unwrap().to_owned(),
                    e["run"]["run_id"].as_str().unwrap().to_owned(),
                    e.get("runs").cloned().unwrap_or(Value::Null),
                )
            })
            .collect()
    };
    assert_eq!(events("web-1"), []);
    assert_eq!(
        events("web-2"),
        [("absent".to_owned(), "day2".to_owned(), json!(1))]
    );
    assert_eq!(
        events("web-3"),
        [
            ("appeared".to_owned(), "day2".to_owned(), Value::Null),
            ("stopped-reporting".to_owned(), "day4".to_owned(), json!(1)),
        ]
    );
    let shown = inspect(&cache, &["history", d, "ansible_kernel", "--node", "web-2"]);
    let shown = text(&shown.stdout);
    assert!(shown.contains("absent from 1 run from run day2"), "{shown}");
    assert!(shown.contains("2030-03-04T02:00:00Z"), "{shown}");
    let unknown = inspect(&cache, &["history", d, "--node", "web-9"]);
    assert!(!unknown.status.success());
    assert!(
        text(&unknown.stderr).contains("names node \"web-9\""),
        "{}",
        text(&unknown.stderr)
    );
}

#[test]
fn sql_as_of_a_day_reads_the_latest_bundle_of_that_day_and_diff_since_nets_the_changes() {
    let (_work, dir, cache, _) = piled();
    let d = dir.to_str().unwrap();

    let query = "SELECT node, facts->>'ansible_kernel' FROM setup ORDER BY node";
    let rows =
        |as_of: &str| inspect_json(&cache, &["sql", d, query, "--as-of", as_of])["rows"].clone();
    // Which nodes had which kernel on 2 March: day 2's run, the latest of that day.
    assert_eq!(
        rows("2030-03-02"),
        json!([["web-1", "6.1.0-20"], ["web-3", "6.1.0-18"]])
    );
    assert_eq!(
        rows("2030-03-03T02:00:00.4Z"),
        json!([["web-1", "6.1.0-20"], ["web-3", "6.1.0-18"]]),
        "day 3's run was created half a second later"
    );
    // The forms `inspect logs --since` takes, too.
    assert_eq!(
        rows("2030-03-03 12:00"),
        json!([
            ["web-1", "6.1.0-20"],
            ["web-2", "6.1.0-18"],
            ["web-3", "6.1.0-18"]
        ])
    );
    let nonsense = inspect(&cache, &["sql", d, query, "--as-of", "last blue moon"]);
    assert!(
        text(&nonsense.stderr).contains("\"last blue moon\" is not a time"),
        "{}",
        text(&nonsense.stderr)
    );
    let before = inspect(&cache, &["sql", d, query, "--as-of", "2030-02-28"]);
    assert!(!before.status.success());
    assert!(
        text(&before.stderr).contains("the first is from 2030-03-01T02:00:00Z"),
        "{}",
        text(&before.stderr)
    );
    // Without --as-of, every run, each row with its run and the run's time: facts and a
    // table's rows alike.
    let per_run = |table: &str| {
        inspect_json(
            &cache,
            &[
                "sql",
                d,
                &format!(
                    "SELECT run_id, created, count(*) FROM {table} GROUP BY run_id, created
                     ORDER BY created"
                ),
            ],
        )["rows"]
            .clone()
    };
    let runs = json!([
        ["day1", "2030-03-01T02:00:00Z", 2],
        ["day2", "2030-03-02T02:00:00Z", 2],
        ["day3", "2030-03-03T02:00:00.5Z", 3],
        ["day4", "2030-03-04T02:00:00Z", 2]
    ]);
    assert_eq!(per_run("setup"), runs);
    let rows_per_run = |runs: Value| -> Value {
        // Two packages a node.
        runs.as_array()
            .unwrap()
            .iter()
            .map(|r| json!([r[0], r[1], r[2].as_i64().unwrap() * 2]))
            .collect()
    };
    assert_eq!(per_run("inventory_packages"), rows_per_run(runs));

    // From 2 March on: day 2 against day 4.
    let net = inspect_json(&cache, &["diff", d, "--since", "2030-03-02"]);
    assert_eq!(net["before"]["run_id"], "day2");
    assert_eq!(net["after"]["run_id"], "day4");
    assert_eq!(net["nodes_added"], json!(["web-2"]));
    assert_eq!(net["nodes_removed"], json!(["web-3"]));
    let changed: Vec<(String, Value)> = net["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["path"].as_str().unwrap().to_owned(), c["nodes"].clone()))
        .collect();
    assert_eq!(
        changed,
        [(
            "packages[name=\"openssl\"].version".to_owned(),
            json!(["web-1"])
        )]
    );
    // A duration back from now: the bundles are from 2030, so every one of them.
    let week = inspect_json(&cache, &["diff", d, "--since", "7d"]);
    assert_eq!(
        (&week["before"]["run_id"], &week["after"]["run_id"]),
        (&json!("day1"), &json!("day4"))
    );
    let bare = inspect(&cache, &["diff", d]);
    assert!(!bare.status.success());
    assert!(
        text(&bare.stderr).contains("give --since"),
        "{}",
        text(&bare.stderr)
    );
}

/// What `inspect index DIR -o json` says it did: (bundles read, why built anew).
fn indexed(cache: &Path, dir: &str) -> (u64, Value) {
    let update = inspect_json(cache, &["index", dir]);
    (update["added"].as_u64().unwrap(), update["rebuilt"].clone())
}

#[test]
fn the_index_reads_only_new_bundles_and_trusts_no_bundle_that_changed_or_went() {
    let (_work, dir, cache, days) = piled();
    let d = dir.to_str().unwrap();
    let kernel =
        |cache: &Path| inspect_json(cache, &["history", d, "ansible_kernel", "--node", "web-2"]);

    assert_eq!(indexed(&cache, d), (4, json!("there was none")));
    let mut files: Vec<String> = std::fs::read_dir(cache.join("factbuoy/history"))
        .unwrap()
        .map(|e| {
            e.unwrap()
                .path()
                .extension()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["lock", "sqlite", "states"],
        "the index, its states and the lock of its updates, in the cache directory"
    );
    assert_eq!(indexed(&cache, d), (0, Value::Null));

    // A fifth day: only it is read.
    day(
        &dir,
        "2030-03-05T02:00:00Z",
        "day5",
        ORIGIN,
        &[on("web-2", "6.1.0-21", "3.0.1")],
    );
    assert_eq!(indexed(&cache, d), (1, Value::Null));
    assert_eq!(
        values(&kernel(&cache), "web-2").last().unwrap(),
        &change("6.1.0-21", "day5", "day5", Some("6.1.0-20"))
    );
    // Touched but the same bytes: trusted again after its digest is compared.
    let file = std::fs::File::options()
        .append(true)
        .open(&days[0])
        .unwrap();
    file.set_modified(std::time::SystemTime::now()).unwrap();
    assert_eq!(indexed(&cache, d), (0, Value::Null));
    // The same name with other bytes: built anew (they are day 2's, so day1.tar.gz is now
    // day2.tar.gz's copy, and the run is read once).
    std::fs::copy(&days[1], &days[0]).unwrap();
    let update = inspect_json(&cache, &["index", d]);
    assert_eq!(
        (&update["added"], &update["rebuilt"], &update["duplicates"]),
        (
            &json!(4),
            &json!("day1.tar.gz changed"),
            &json!([{"bundle": "day2.tar.gz", "kept": "day1.tar.gz", "run_id": "day2"}])
        ),
        "{update:#}"
    );
    std::fs::remove_file(&days[0]).unwrap();
    day(
        &dir,
        "2030-03-01T02:00:00Z",
        "day1",
        ORIGIN,
        &[on("web-2", "6.1.0-18", "3.0.1")],
    );
    let (_, why) = indexed(&cache, d);
    assert_eq!(why, "day1.tar.gz changed");
    // A states file that is not the index's own (cut, replaced, left by a crash): built anew.
    let states = std::fs::read_dir(cache.join("factbuoy/history"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "states"))
        .expect("the index's states file, beside it");
    let bytes = std::fs::read(&states).unwrap();
    std::fs::write(&states, &bytes[..bytes.len() / 2]).unwrap();
    day(
        &dir,
        "2030-03-06T02:00:00Z",
        "day6",
        ORIGIN,
        &[on("web-2", "6.1.0-21", "3.0.1")],
    );
    let (read, why) = indexed(&cache, d);
    assert_eq!(read, 6);
    assert!(
        why.as_str()
            .unwrap()
            .starts_with("its states file could not be read"),
        "{why}"
    );
    std::fs::remove_file(dir.join("day6.tar.gz")).unwrap();
    let (_, why) = indexed(&cache, d);
    assert_eq!(why, "day6.tar.gz is gone");
    // Gone: built anew.
    std::fs::remove_file(dir.join("day5.tar.gz")).unwrap();
    let (read, why) = indexed(&cache, d);
    assert_eq!((read, why.as_str().unwrap()), (4, "day5.tar.gz is gone"));
    // One older than the latest indexed: built anew, in the runs' order.
    day(
        &dir,
        "2030-02-28T02:00:00Z",
        "day0",
        ORIGIN,
        &[on("web-2", "6.1.0-17", "3.0.1")],
    );
    let (read, why) = indexed(&cache, d);
    assert_eq!(
        (read, why.as_str().unwrap()),
        (5, "day0.tar.gz is older than the latest bundle indexed")
    );
    assert_eq!(
        values(&kernel(&cache), "web-2")[0],
        change("6.1.0-17", "day0", "day0", None)
    );

    // The index is a cache: without it, the same answers.
    let with_index = kernel(&cache);
    std::fs::remove_dir_all(cache.join("factbuoy")).unwrap();
    assert_eq!(kernel(&cache)["nodes"], with_index["nodes"]);

    // A bundle whose run can be read but not the rest (cut short): left out, and nothing of
    // what was read of it before the cut counts (web-2's kernel did not go through it).
    let cut = day(
        &dir,
        "2030-03-02T12:00:00Z",
        "cut",
        ORIGIN,
        &[on("web-2", "6.9.9-never", "3.0.1")],
    );
    let bytes = std::fs::read(&cut).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let update = inspect_json(&cache, &["index", d]);
    assert_eq!(update["unreadable"][0]["bundle"], "cut.tar.gz", "{update}");
    assert_eq!(kernel(&cache)["nodes"], with_index["nodes"]);
    std::fs::remove_file(&cut).unwrap();

    // A file that is not a bundle is left out, said so, and the rest answer.
    std::fs::write(dir.join("junk.tar.gz"), b"not a bundle").unwrap();
    let output = inspect(&cache, &["history", d, "ansible_kernel", "--node", "web-2"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("junk.tar.gz is left out"),
        "{}",
        text(&output.stderr)
    );
    let update = inspect_json(&cache, &["index", d]);
    assert_eq!(update["unreadable"][0]["bundle"], "junk.tar.gz", "{update}");
}

/// Commands that update one index at once wait for each other: each bundle is added once,
/// and every one of them answers.
#[test]
fn updates_of_one_index_at_once_add_each_bundle_once() {
    let (_work, dir, cache, _) = piled();
    let d = dir.to_str().unwrap();
    assert_eq!(indexed(&cache, d), (4, json!("there was none")));
    let kernels = ["6.1.0-25", "6.1.0-26", "6.1.0-27", "6.1.0-28", "6.1.0-29"];
    for (n, kernel) in (5..).zip(kernels) {
        day(
            &dir,
            &format!("2030-03-0{n}T02:00:00Z"),
            &format!("day{n}"),
            ORIGIN,
            &[on("web-1", kernel, "3.0.1")],
        );
    }
    let updates: Vec<_> = (0..4)
        .map(|_| {
            support::factbuoy()
                .env("XDG_CACHE_HOME", &cache)
                .args(["inspect", "index", d, "-o", "json"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut added = 0;
    for update in updates {
        let output = update.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", text(&output.stderr));
        let update = json_of(&output);
        assert_eq!(update["bundles"], 9, "{update}");
        added += update["added"].as_u64().unwrap();
    }
    assert_eq!(added, 5, "each new bundle read by one update");
    let seen: Vec<Value> = values(
        &inspect_json(&cache, &["history", d, "ansible_kernel", "--node", "web-1"]),
        "web-1",
    )
    .into_iter()
    .map(|(value, ..)| value)
    .collect();
    assert_eq!(seen, [&["6.1.0-18", "6.1.0-20"][..], &kernels].concat());
}

#[test]
fn a_directory_with_bundles_of_two_origins_is_a_history_per_origin_never_compared() {
    let (_work, dir, cache, _) = piled();
    // Another fleet's web-1, which is another machine. (Both fleets' runs record the names of
    // the real local run their run.json comes from.)
    day(
        &dir,
        "2030-03-05T02:00:00Z",
        "other",
        "fleet:99ff",
        &[on("web-1", "5.10", "1.1.1")],
    );
    let d = dir.to_str().unwrap();

    // Each origin its own history, under its name; web-1 once in each.
    let mixed = inspect_json(&cache, &["history", d, "ansible_kernel"]);
    let origins = mixed["origins"].as_array().expect("a history per origin");
    let named: Vec<(&str, &str)> = origins
        .iter()
        .map(|o| (o["origin"].as_str().unwrap(), o["label"].as_str().unwrap()))
        .collect();
    assert_eq!(
        named,
        [
            (
                "fleet:0123abcd",
                "fleet localhost, 127.0.0.1 (CA sha-256 0123abcd)"
            ),
            ("fleet:99ff", "fleet localhost, 127.0.0.1 (CA sha-256 99ff)")
        ]
    );
    assert_eq!(origins[0]["bundles"].as_array().unwrap().len(), 4);
    assert_eq!(
        values(&origins[0], "web-1").len(),
        2,
        "the other fleet's web-1 is not ours"
    );
    // Never compared across: the other web-1's kernel is its first value, not a change from
    // ours.
    assert_eq!(
        values(&origins[1], "web-1"),
        [change("5.10", "other", "other", None)]
    );
    let table = inspect(&cache, &["history", d, "ansible_kernel"]);
    assert!(table.status.success(), "{}", text(&table.stderr));
    let table = text(&table.stdout);
    assert!(
        table.contains("holds runs of 2 origins, a history each")
            && table.contains("== fleet localhost, 127.0.0.1 (CA sha-256 0123abcd) ==")
            && table.contains("== fleet localhost, 127.0.0.1 (CA sha-256 99ff) =="),
        "{table}"
    );
    assert_eq!(table.matches("\nweb-1: in ").count(), 2, "{table}");

    // --origin still reads one, as before there were several.
    let ours = inspect_json(
        &cache,
        &["history", d, "ansible_kernel", "--origin", "fleet:01"],
    );
    assert_eq!(ours["origin"], "fleet:0123abcd");
    assert_eq!(values(&ours, "web-1").len(), 2);
    // A third origin that the second's id starts: named whole, the second is still one.
    day(
        &dir,
        "2030-03-06T02:00:00Z",
        "third",
        "fleet:99ffaa",
        &[on("web-1", "5.15", "1.1.1")],
    );
    let exact = inspect_json(
        &cache,
        &["history", d, "ansible_kernel", "--origin", "fleet:99ff"],
    );
    assert_eq!(exact["origin"], "fleet:99ff");
    let both = inspect_json(&cache, &["history", d, "--origin", "fleet:99"]);
    let both: Vec<&Value> = both["origins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| &o["origin"])
        .collect();
    assert_eq!(both, ["fleet:99ff", "fleet:99ffaa"]);
    // What still reads one estate refuses two, naming each.
    let diff = inspect(&cache, &["diff", d, "--since", "2030-03-01"]);
    assert!(
        text(&diff.stderr).contains(
            "fleet:0123abcd (4 bundles), fleet:99ff (1 bundles), fleet:99ffaa (1 bundles); choose one with --origin"
        ),
        "{}",
        text(&diff.stderr)
    );
}

#[test]
fn report_of_a_directory_draws_the_historys_changes_per_day_in_a_real_browser() {
    let (work, dir, cache, _) = piled();
    let page = work.path().join("history.html");
    let output = inspect(
        &cache,
        &[
            "report",
            dir.to_str().unwrap(),
            "--out",
            page.to_str().unwrap(),
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));

    let dom = rendered(&[], &format!("file://{}", page.display()));
    assert!(
        dom.contains("<section id=\"history\" class=\"\">"),
        "the history is shown"
    );
    // A column per day: the kernel on day 2 (and web-3 appeared), openssl on day 3, web-2's
    // kernel on day 4 (and web-3 stopped); the first values and the clock are no changes.
    for day in [
        "2030-03-01: 0 changes on 0 nodes, 1 run; 0 appeared, 0 stopped reporting",
        "2030-03-02: 1 change on 1 node, 1 run; 1 appeared, 0 stopped reporting",
        "2030-03-03: 1 change on 1 node, 1 run; 0 appeared, 0 stopped reporting",
        "2030-03-04: 1 change on 1 node, 1 run; 0 appeared, 1 stopped reporting",
    ] {
        assert!(dom.contains(&format!("<title>{day}</title>")), "{day}");
    }
    assert_eq!(dom.matches("<g class=\"day\"").count(), 4);
    let top = &dom[dom
        .find("id=\"history-top\"")
        .expect("the facts that changed most")..];
    let kernel =
        top.find("ansible_kernel</td><td class=\"number\">2</td><td class=\"number\">2</td>");
    let openssl = top.find("packages[name=\"openssl\"].version</td><td class=\"number\">1</td>");
    assert!(
        kernel.is_some() && openssl.is_some() && kernel < openssl,
        "{top:.2000}"
    );
    // The rest of the page is the latest run's.
    assert!(
        dom.contains("run day4"),
        "the report is of the latest bundle"
    );
}

/// One run under two names (a bundle copied, or downloaded twice) counts once in every
/// command that reads the directory, whichever order the files came in, and each command says
/// on stderr which file it left out and which it read; two bundles of one run that differ are
/// refused, naming both.
#[test]
fn a_run_under_two_names_counts_once_and_two_bundles_of_one_run_that_differ_are_refused() {
    let (work, dir, cache, days) = piled();
    let d = dir.to_str().unwrap();
    assert_eq!(indexed(&cache, d), (4, json!("there was none")));
    // Copies added after the index was made: one whose name sorts before the original's,
    // one of the oldest run (neither is "older than the latest indexed": nothing is rebuilt).
    std::fs::copy(&days[1], dir.join("backup-day2.tar.gz")).unwrap();
    std::fs::copy(&days[0], dir.join("zz-day1.tar.gz")).unwrap();
    let copies = json!([
        {"bundle": "day2.tar.gz", "kept": "backup-day2.tar.gz", "run_id": "day2"},
        {"bundle": "zz-day1.tar.gz", "kept": "day1.tar.gz", "run_id": "day1"},
    ]);
    let update = inspect_json(&cache, &["index", d]);
    assert_eq!(
        (&update["added"], &update["rebuilt"], &update["duplicates"]),
        (&json!(0), &Value::Null, &copies),
        "{update:#}"
    );
    let warned = |output: &Output| {
        assert!(output.status.success(), "{}", text(&output.stderr));
        let stderr = text(&output.stderr);
        for said in [
            "day2.tar.gz is left out: the same files as backup-day2.tar.gz (run day2)",
            "zz-day1.tar.gz is left out: the same files as day1.tar.gz (run day1)",
        ] {
            assert!(stderr.contains(said), "{said:?} in {stderr}");
        }
    };

    let counts = inspect(
        &cache,
        &[
            "sql",
            d,
            "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM setup),
                    (SELECT group_concat(bundle, ' ') FROM runs WHERE run_id = 'day2')",
            "-o",
            "json",
        ],
    );
    warned(&counts);
    let kept = dir.join("backup-day2.tar.gz");
    assert_eq!(
        json_of(&counts)["rows"],
        json!([[4, 9, kept.to_str().unwrap()]])
    );
    let history = inspect(&cache, &["history", d, "ansible_kernel"]);
    warned(&history);
    assert!(
        text(&history.stdout).starts_with(&format!("4 runs of {d} from")),
        "{}",
        text(&history.stdout)
    );
    let answer = inspect_json(&cache, &["history", d, "ansible_kernel"]);
    assert_eq!(answer["duplicates"], copies);
    assert_eq!(answer["bundles"].as_array().unwrap().len(), 4);
    let since = inspect(&cache, &["diff", d, "--since", "2030-03-01", "-o", "json"]);
    warned(&since);
    assert_eq!(json_of(&since)["before"]["run_id"], "day1");
    let page = work.path().join("history.html");
    let report = inspect(&cache, &["report", d, "--out", page.to_str().unwrap()]);
    warned(&report);
    let page = std::fs::read_to_string(&page).unwrap();
    assert!(
        page.contains(r#""timeline":{"runs":4,"days":[{"date":"2030-03-01","runs":1,"#),
        "four runs, the first day's once"
    );

    // Built anew, the same file of each pair is read.
    std::fs::remove_dir_all(cache.join("factbuoy")).unwrap();
    let update = inspect_json(&cache, &["index", d]);
    assert_eq!(
        (&update["added"], &update["duplicates"]),
        (&json!(4), &copies)
    );
    // A copy removed is forgotten, with nothing to build anew.
    std::fs::remove_file(dir.join("zz-day1.tar.gz")).unwrap();
    let update = inspect_json(&cache, &["index", d]);
    assert_eq!(
        (&update["rebuilt"], &update["duplicates"]),
        (&Value::Null, &json!([copies[0]]))
    );

    // The same files compressed again are other bytes but the same run: left out too. A copy
    // cut short is not whole: left out as unreadable, saying so, and the run is read from the
    // whole file; neither refuses the directory.
    let recompressed = dir.join("recompressed-day3.tar.gz");
    let gzip = Command::new("sh")
        .arg("-c")
        .arg(r#"gzip -dc "$1" | gzip -9 > "$2""#)
        .args([
            "sh",
            days[2].to_str().unwrap(),
            recompressed.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(gzip.success());
    assert_ne!(
        std::fs::read(&recompressed).unwrap(),
        std::fs::read(&days[2]).unwrap()
    );
    let whole = std::fs::read(&days[3]).unwrap();
    let cut = dir.join("zz-cut-day4.tar.gz");
    std::fs::write(&cut, &whole[..whole.len() * 2 / 3]).unwrap();
    let update = inspect_json(&cache, &["index", d]);
    assert_eq!(
        update["duplicates"][1],
        json!({"bundle": "recompressed-day3.tar.gz", "kept": "day3.tar.gz", "run_id": "day3"}),
        "{update:#}"
    );
    let unreadable = &update["unreadable"];
    assert_eq!(unreadable[0]["bundle"], "zz-cut-day4.tar.gz", "{update:#}");
    assert!(
        unreadable[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("a copy of run day4 (day4.tar.gz is read) that is not whole: "),
        "{update:#}"
    );
    let counted = inspect(
        &cache,
        &["sql", d, "SELECT count(*) FROM runs", "-o", "json"],
    );
    assert!(counted.status.success(), "{}", text(&counted.stderr));
    assert_eq!(json_of(&counted)["rows"], json!([[4]]));
    std::fs::remove_file(&recompressed).unwrap();
    std::fs::remove_file(&cut).unwrap();

    // Another bundle of run day3, with other facts: refused by every command, naming both.
    let elsewhere = work.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let other = day(
        &elsewhere,
        "2030-03-03T02:00:00.5Z",
        "day3",
        ORIGIN,
        &[on("web-1", "6.1.0-99", "3.0.2")],
    );
    std::fs::rename(&other, dir.join("day3-again.tar.gz")).unwrap();
    let page = work.path().join("refused.html");
    for args in [
        &["index", d][..],
        &["history", d],
        &["sql", d, "SELECT count(*) FROM runs"],
        &["diff", d, "--since", "2030-03-01"],
        &["report", d, "--out", page.to_str().unwrap()],
    ] {
        let refused = inspect(&cache, args);
        assert_eq!(refused.status.code(), Some(2), "{args:?}");
        let error = text(&refused.stderr);
        assert!(
            error.contains(
                "day3-again.tar.gz and day3.tar.gz are both run day3, but hold different files"
            ),
            "{args:?}: {error}"
        );
    }
    assert!(!page.exists());
}

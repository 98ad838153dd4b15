//! `factbuoy inspect` on real bundles: a real `factbuoy run`'s, and bundles of several nodes
//! and hostile bundles built here with the `tar` crate (no binary fixture is committed). Every
//! hostile class gets its own test: an error naming the entry, and nothing written anywhere.

use crate::support;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::support::kube_runs::Bundle;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A real run's bundle, made once per test binary: `factbuoy run --node this-host` with the
/// default plugins (host-facts, setup, systemd-logs), and the sha-256 the run reported.
pub(crate) fn real_bundle() -> (&'static Path, &'static str) {
    static BUNDLE: OnceLock<(tempfile::TempDir, PathBuf, String)> = OnceLock::new();
    let (_, path, sha256) = BUNDLE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let output = support::factbuoy()
            .env("FACTBUOY_STATE_DIR", dir.path().join("state"))
            .args(["run", "--node", "this-host", "-o", "json", "--out"])
            .arg(dir.path().join("out"))
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", text(&output.stderr));
        let run: Value = serde_json::from_slice(&output.stdout).unwrap();
        let bundle = PathBuf::from(run["bundle"]["path"].as_str().unwrap());
        let sha256 = run["bundle"]["sha256"]
            .as_str()
            .unwrap_or_else(|| panic!("no bundle.sha256 in {run}"))
            .to_owned();
        (dir, bundle, sha256)
    });
    (path, sha256)
}

/// What goes into a `.tar.gz` built here.
enum Item<'a> {
    /// A regular file.
    File(&'a str, Vec<u8>),
    /// A regular file whose header (name written raw, unchecked) says `size`.
    Raw(String, tar::EntryType, u64, Vec<u8>),
    /// A link (symbolic or hard) at a path, to a target.
    Link(&'static str, tar::EntryType, &'static str),
    /// A regular file after a PAX header of `(key, value)` records, its ustar header saying
    /// `size` whatever the records say.
    Pax(&'static str, Vec<(&'static str, String)>, u64, Vec<u8>),
}

/// Writes `items` as a `.tar.gz` at `path`. Names go into the header raw, so the hostile ones
/// (`..`, absolute) the tar builder would refuse get in.
fn write_targz(path: &Path, items: &[Item<'_>]) {
    let file = std::fs::File::create(path).unwrap();
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        file,
        flate2::Compression::fast(),
    ));
    for item in items {
        let (name, kind, size, data, link): (&str, _, u64, &[u8], Option<&str>) = match item {
            Item::File(name, data) => {
                (name, tar::EntryType::Regular, data.len() as u64, data, None)
            }
            Item::Raw(name, kind, size, data) => (name, *kind, *size, data, None),
            Item::Link(name, kind, target) => (name, *kind, 0, &[], Some(target)),
            Item::Pax(name, records, size, data) => {
                let records = records.iter().map(|(k, v)| (*k, v.as_bytes()));
                builder.append_pax_extensions(records).unwrap();
                (name, tar::EntryType::Regular, *size, data, None)
            }
        };
        let mut header = tar::Header::new_gnu();
        let raw = &mut header.as_old_mut().name;
        raw[..name.len()].copy_from_slice(name.as_bytes());
        header.set_entry_type(kind);
        header.set_size(size);
        header.set_mode(0o644);
        if let Some(target) = link {
            header.set_link_name(target).unwrap();
        }
        if matches!(kind, tar::EntryType::Char | tar::EntryType::Block) {
            header.set_device_major(1).unwrap();
            header.set_device_minor(3).unwrap();
        }
        header.set_cksum();
        builder.append(&header, data).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap();
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The `meta/index.json` of `files`, each with its true size and digest.
fn index_of(files: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let index: Vec<Value> = files
        .iter()
        .map(|(path, data)| json!({"path": path, "size": data.len(), "sha256": sha256(data)}))
        .collect();
    serde_json::to_vec(&index).unwrap()
}

/// The facts documents of the real run: (setup's, host-facts').
pub(crate) fn real_facts() -> (Value, Value) {
    let files = Bundle::read(real_bundle().0.to_owned()).files;
    let find = |suffix: &str| {
        let (_, data) = files.iter().find(|(p, _)| p.ends_with(suffix)).unwrap();
        serde_json::from_slice::<Value>(data).unwrap()
    };
    (find("/ansible_facts.json"), find("/host-facts.json"))
}

/// A bundle of three nodes built from the real run's facts: web-1 and web-2 with setup and
/// host-facts results (web-2's with other values), web-3 whose setup timed out. Returns its
/// files, without the index.
pub(crate) fn fleet_files() -> Vec<(&'static str, Vec<u8>)> {
    let run = Bundle::read(real_bundle().0.to_owned()).files["meta/run.json"].clone();
    let (setup, host) = real_facts();
    let mut setup2 = setup.clone();
    setup2["ansible_distribution_version"] = json!("13.1");
    setup2["ansible_mounts"] = json!([{"mount": "/"}, {"mount": "/data"}, {"mount": "/var"}]);
    let mut host2 = host.clone();
    host2["cpu"]["cores"] = json!(64);
    // A pair without a passed result timed out: the aggregator's stand-in result failed.
    let pair = |plugin: &str, node: &str, result: Option<&str>| match result {
        Some(result) => json!({"plugin": plugin, "node": node, "status": "complete",
                               "result_status": result}),
        None => json!({"plugin": plugin, "node": node, "status": "timed-out",
                       "result_status": "failed"}),
    };
    // web-1's setup passed with a warning.
    let mut warned = pair("setup", "web-1", Some("passed"));
    warned["warnings"] = json!(["cannot read /etc/shadow: permission denied"]);
    let status = json!({
        "run_id": "f1ee7f1ee700",
        "status": "complete",
        "plugins": [
            warned,
            pair("host-facts", "web-1", Some("passed")),
            pair("setup", "web-2", Some("passed")),
            pair("host-facts", "web-2", Some("passed")),
            pair("setup", "web-3", None),
            pair("host-facts", "web-3", Some("passed")),
        ],
    });
    let to = |v: &Value| serde_json::to_vec(v).unwrap();
    // The real plugins' definitions, which declare their facts documents and list keys.
    let real = Bundle::read(real_bundle().0.to_owned()).files;
    vec![
        ("meta/run.json", run),
        ("meta/status.json", to(&status)),
        (
            "plugins/setup/definition.json",
            real["plugins/setup/definition.json"].clone(),
        ),
        (
            "plugins/host-facts/definition.json",
            real["plugins/host-facts/definition.json"].clone(),
        ),
        ("plugins/setup/results/web-1/ansible_facts.json", to(&setup)),
        (
            "plugins/host-facts/results/web-1/host-facts.json",
            to(&host),
        ),
        (
            "plugins/setup/results/web-2/ansible_facts.json",
            to(&setup2),
        ),
        (
            "plugins/host-facts/results/web-2/host-facts.json",
            to(&host2),
        ),
        (
            "plugins/host-facts/results/web-3/host-facts.json",
            to(&host),
        ),
        (
            "plugins/setup/errors/web-3/error.json",
            to(
                &json!({"error": "plugin \"setup\" 0.1.0: rejected its parameters: Bad subset 'bogus'"}),
            ),
        ),
    ]
}

/// [`fleet_files`] with a true index, as a `.tar.gz` in `dir`.
fn fleet_bundle(dir: &Path) -> PathBuf {
    bundle_of(dir, "fleet.tar.gz", &fleet_files())
}

/// `files` with a true index, as the `.tar.gz` `name` in `dir`.
pub(crate) fn bundle_of(dir: &Path, name: &str, files: &[(&str, Vec<u8>)]) -> PathBuf {
    let mut items: Vec<Item> = files
        .iter()
        .map(|(p, d)| Item::File(p, d.clone()))
        .collect();
    items.push(Item::File("meta/index.json", index_of(files)));
    let path = dir.join(name);
    write_targz(&path, &items);
    path
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `factbuoy inspect ARGS`, run in `cwd`.
fn inspect(cwd: &Path, args: &[&str]) -> Output {
    support::factbuoy()
        .current_dir(cwd)
        .arg("inspect")
        .args(args)
        .output()
        .unwrap()
}

pub(crate) fn json_of(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON ({e}): {} {}",
            text(&output.stdout),
            text(&output.stderr)
        )
    })
}

/// Every path under `root`.
fn tree(root: &Path) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.symlink_metadata().unwrap().is_dir() {
                pending.push(path.clone());
            }
            found.insert(path);
        }
    }
    found
}

/// Runs every reading command on the hostile bundle `items` (in a folder of its own, from a
/// working folder inside it) and checks each fails, exit 2 (verify: 1, listing the problem),
/// with an error naming `entry` and saying `why`; and that not a file appeared anywhere in the
/// folder (the escape targets `..` and absolute names point at are inside it).
fn assert_refused(items: &[Item], entry: &str, why: &str) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let work = root.join("a").join("work");
    std::fs::create_dir_all(&work).unwrap();
    let bundle = root.join("hostile.tar.gz");
    write_targz(&bundle, items);
    let before = tree(root);
    let name = bundle.to_str().unwrap();
    for args in [
        vec!["summary", name],
        vec!["facts", name, "n1"],
        vec!["query", name, "cpu.cores"],
        vec!["diff", name],
        vec!["diff", name, name],
        vec!["sql", name, "SELECT 1"],
        vec!["logs", name],
        vec!["report", name, "--out", "report.html"],
    ] {
        let output = inspect(&work, &args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(entry) && stderr.contains(why),
            "{args:?} does not name {entry:?} ({why:?}): {stderr}"
        );
    }
    // An export stops too, and leaves nothing in its folder: no half-written file.
    let out = root.join("a").join("out");
    for format in ["jsonl", "csv"] {
        let args = [
            "export",
            name,
            "--format",
            format,
            "--out",
            out.to_str().unwrap(),
        ];
        let output = inspect(&work, &args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(entry),
            "{args:?} does not name {entry:?}: {stderr}"
        );
        assert_eq!(
            std::fs::read_dir(&out).unwrap().count(),
            0,
            "{format}: a file was left"
        );
    }
    std::fs::remove_dir(&out).unwrap();
    let output = inspect(&work, &["verify", name, "-o", "json"]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let problems = json_of(&output)["problems"].to_string();
    assert!(
        problems.contains(entry) && problems.contains(why),
        "verify does not list {entry:?}: {problems}"
    );
    assert_eq!(tree(root), before, "something was written");
}

#[test]
fn verify_passes_a_real_runs_bundle_its_digest_and_its_extracted_folder() {
    let (bundle, sha256) = real_bundle();
    let dir = tempfile::tempdir().unwrap();
    let b = bundle.to_str().unwrap();
    let output = inspect(dir.path(), &["verify", b, "--sha256", sha256]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stdout));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("every file matches meta/index.json"),
        "{stdout}"
    );
    assert!(stdout.contains(sha256), "{stdout}");
    // The files verify counts are the files summary counts.
    let summary = json_of(&inspect(dir.path(), &["summary", b, "-o", "json"]));
    let files = summary["sizes"]["files"].as_u64().unwrap();
    assert!(
        stdout.contains(&format!("({files} files, the index among them, ")),
        "summary counts {files} files: {stdout}"
    );

    let output = inspect(
        dir.path(),
        &["verify", b, "--sha256", &"0".repeat(64), "-o", "json"],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        json_of(&output)["problems"][0]["problem"]
            .as_str()
            .unwrap()
            .contains("not the 0000")
    );

    let folder = dir.path().join("extracted");
    std::fs::create_dir(&folder).unwrap();
    let untar = Command::new("tar")
        .arg("-xzf")
        .arg(bundle)
        .arg("-C")
        .arg(&folder)
        .status()
        .unwrap();
    assert!(untar.success());
    let output = inspect(
        dir.path(),
        &["verify", folder.to_str().unwrap(), "-o", "json"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stdout));
    assert!(json_of(&output)["indexed"].as_u64().unwrap() >= 8);
    // The folder holds the same files as the .tar.gz: the same content digest.
    let archived = json_of(&inspect(dir.path(), &["verify", b, "-o", "json"]));
    let content = archived["content_sha256"].as_str().unwrap();
    assert_eq!(content.len(), 64, "{archived}");
    assert_eq!(json_of(&output)["content_sha256"], content);

    // A file changed after extraction is caught by name.
    let facts = folder.join("plugins/setup/results/this-host/ansible_facts.json");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&facts)
        .unwrap()
        .write_all(b" ")
        .unwrap();
    let output = inspect(
        dir.path(),
        &["verify", folder.to_str().unwrap(), "-o", "json"],
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(json_of(&output)["content_sha256"], Value::Null);
    let output = inspect(dir.path(), &["verify", folder.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("plugins/setup/results/this-host/ansible_facts.json: ")
            && stdout.contains("but meta/index.json says"),
        "{stdout}"
    );
}

#[test]
fn verify_lists_every_way_a_lying_index_disagrees_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let files = fleet_files();
    let mut index: Vec<Value> = serde_json::from_slice(&index_of(&files)).unwrap();
    // web-1's setup facts: a wrong size; web-1's host-facts: a wrong digest; web-2's
    // host-facts: not listed; a file listed that the bundle does not hold; a path that leads
    // out; one listed twice.
    index[4]["size"] = json!(1);
    index[5]["sha256"] = json!("ab".repeat(32));
    index.remove(7);
    index.push(json!({"path": "plugins/setup/results/web-9/ansible_facts.json", "size": 2, "sha256": "00"}));
    index.push(json!({"path": "../../etc/passwd", "size": 2, "sha256": "00"}));
    index.push(index[0].clone());
    let mut items: Vec<Item> = files
        .iter()
        .map(|(p, d)| Item::File(p, d.clone()))
        .collect();
    items.push(Item::File(
        "meta/index.json",
        serde_json::to_vec(&index).unwrap(),
    ));
    let bundle = dir.path().join("lying.tar.gz");
    write_targz(&bundle, &items);

    let output = inspect(
        dir.path(),
        &["verify", bundle.to_str().unwrap(), "-o", "json"],
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let report = json_of(&output);
    let problems: Vec<(String, String)> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["entry"].as_str().unwrap().into(),
                p["problem"].as_str().unwrap().into(),
            )
        })
        .collect();
    let has = |entry: &str, says: &str| {
        assert!(
            problems.iter().any(|(e, p)| e == entry && p.contains(says)),
            "no problem {entry}: {says} in {problems:?}"
        )
    };
    has(
        "plugins/setup/results/web-1/ansible_facts.json",
        "but meta/index.json says 1",
    );
    has(
        "plugins/host-facts/results/web-1/host-facts.json",
        "sha-256",
    );
    has(
        "plugins/host-facts/results/web-2/host-facts.json",
        "present but not in meta/index.json",
    );
    has(
        "plugins/setup/results/web-9/ansible_facts.json",
        "indexed but missing",
    );
    has("../../etc/passwd", "lists a path no bundle entry can have");
    has("meta/run.json", "lists it twice");
    assert_eq!(problems.len(), 6, "{problems:?}");

    // The table lists them too, one a line.
    let output = inspect(dir.path(), &["verify", bundle.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("6 problems"), "{stdout}");
    assert!(
        stdout.contains("  - plugins/setup/results/web-9/ansible_facts.json: indexed but missing"),
        "{stdout}"
    );
}

#[test]
fn summary_shows_the_run_a_nodes_by_plugins_table_errors_and_sizes() {
    let (bundle, _) = real_bundle();
    let dir = tempfile::tempdir().unwrap();
    let output = inspect(dir.path(), &["summary", bundle.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    for says in [
        "run ",
        ": complete",
        "created 20",
        "factbuoy 0.1.0",
        "setup 0.1.0",
        "Sizes: ",
    ] {
        assert!(stdout.contains(says), "no {says:?} in {stdout}");
    }
    let header = stdout.lines().find(|l| l.starts_with("NODE")).unwrap();
    assert!(
        header.contains("host-facts") && header.contains("setup"),
        "{header}"
    );
    let row = stdout.lines().find(|l| l.starts_with("this-host")).unwrap();
    assert!(row.contains("passed"), "{row}");

    let fleet = fleet_bundle(dir.path());
    let output = inspect(
        dir.path(),
        &["summary", fleet.to_str().unwrap(), "-o", "json"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let summary = json_of(&output);
    assert_eq!(summary["run"]["run_id"], "f1ee7f1ee700");
    assert_eq!(summary["run"]["nodes"], json!(["web-1", "web-2", "web-3"]));
    assert_eq!(summary["errors"][0]["node"], "web-3");
    assert!(
        summary["errors"][0]["error"]
            .as_str()
            .unwrap()
            .contains("Bad subset 'bogus'")
    );
    assert_eq!(summary["sizes"]["files"], 11);
    assert_eq!(summary["sizes"]["by_node"][1]["node"], "web-2");
    assert!(summary["sizes"]["by_node"][1]["bytes"].as_u64().unwrap() > 1000);

    let output = inspect(dir.path(), &["summary", fleet.to_str().unwrap()]);
    let stdout = text(&output.stdout);
    let web3 = stdout.lines().find(|l| l.starts_with("web-3")).unwrap();
    // Columns in the status document's order: setup, then host-facts; a pair that did not
    // complete shows how it ended, not its stand-in result's `failed`.
    assert_eq!(
        web3.split_whitespace().collect::<Vec<_>>(),
        ["web-3", "timed-out", "passed"]
    );
    assert!(
        stdout.contains("  - setup on web-3: plugin \"setup\" 0.1.0: rejected its parameters"),
        "{stdout}"
    );
    // The whole truth, as the report tells it: the failure in the run's line, the warnings
    // after the errors.
    assert!(
        stdout.starts_with("run f1ee7f1ee700: complete with 1 failure\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "\nWarnings:\n  - setup on web-1: cannot read /etc/shadow: permission denied\n"
        ),
        "{stdout}"
    );

    // A result that passed with nothing to collect says so, in the words `run` uses.
    let run = Bundle::read(real_bundle().0.to_owned()).files["meta/run.json"].clone();
    let status = json!({"run_id": "e3e3e3e3e3e3", "status": "complete", "plugins": [
        {"plugin": "systemd-logs", "node": "n1", "status": "complete",
         "result_status": "passed", "empty": true}]});
    let empty = bundle_of(
        dir.path(),
        "empty.tar.gz",
        &[
            ("meta/run.json", run),
            ("meta/status.json", serde_json::to_vec(&status).unwrap()),
        ],
    );
    let output = inspect(dir.path(), &["summary", empty.to_str().unwrap()]);
    let table = text(&output.stdout);
    let n1 = table.lines().find(|l| l.starts_with("n1")).unwrap();
    assert!(
        n1.ends_with(" passed (empty: nothing to collect)"),
        "{table}"
    );
    let output = inspect(
        dir.path(),
        &["summary", empty.to_str().unwrap(), "-o", "json"],
    );
    assert_eq!(json_of(&output)["results"][0]["empty"], true);
}

#[test]
fn facts_and_query_answer_for_every_node() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = fleet_bundle(dir.path());
    let b = fleet.to_str().unwrap();

    // The issue's three paths, as a table and as JSON.
    let output = inspect(dir.path(), &["query", b, "cpu.cores"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let row = |node: &str, plugin: &str| {
        stdout
            .lines()
            .filter(|l| l.split_whitespace().take(2).eq([node, plugin]))
            .map(|l| l.split_whitespace().nth(2).unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(row("web-2", "host-facts"), ["64"]);
    assert_eq!(row("web-2", "setup"), ["-"]);
    let (setup, host) = real_facts();
    assert_eq!(
        row("web-1", "host-facts"),
        [host["cpu"]["cores"].to_string()]
    );

    let output = inspect(
        dir.path(),
        &["query", b, "ansible_mounts[*].mount", "-o", "json"],
    );
    let answer = json_of(&output);
    assert_eq!(answer["path"], "$.ansible_mounts[*].mount");
    let nodes = answer["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3);
    assert_eq!(nodes[1]["node"], "web-2");
    // Each node's plugins in name order: host-facts, then setup.
    assert_eq!(nodes[1]["plugins"][1]["plugin"], "setup");
    assert_eq!(
        nodes[1]["plugins"][1]["values"],
        json!(["/", "/data", "/var"])
    );
    let mounts: Vec<Value> = setup["ansible_mounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mount"].clone())
        .collect();
    assert_eq!(nodes[0]["plugins"][1]["values"], json!(mounts));
    assert_eq!(
        nodes[2]["plugins"],
        json!([{"plugin": "host-facts", "values": []}]),
        "web-3 has no setup facts"
    );

    let output = inspect(
        dir.path(),
        &["query", b, "ansible_distribution_version", "-o", "yaml"],
    );
    let stdout = text(&output.stdout);
    assert!(stdout.contains("13.1"), "{stdout}");

    let output = inspect(dir.path(), &["query", b, "a..["]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("is not a path into the facts"));

    // facts: both plugins, one, or an error for a node without facts.
    let output = inspect(dir.path(), &["facts", b, "web-2", "-o", "json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let facts = json_of(&output);
    assert_eq!(facts["node"], "web-2");
    assert_eq!(facts["plugins"][0]["plugin"], "host-facts");
    assert_eq!(facts["plugins"][0]["facts"]["cpu"]["cores"], 64);
    assert_eq!(
        facts["plugins"][1]["facts"]["ansible_distribution_version"],
        "13.1"
    );
    let output = inspect(dir.path(), &["facts", b, "web-2", "host-facts"]);
    let stdout = text(&output.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.split_whitespace().eq(["host-facts", "cpu.cores", "64"])),
        "{stdout}"
    );
    assert!(!stdout.contains("ansible_"), "only host-facts: {stdout}");
    let output = inspect(dir.path(), &["facts", b, "web-9"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("no facts for node \"web-9\""));
    // --node and --plugin as the positionals; no node of several names them.
    let output = inspect(
        dir.path(),
        &[
            "facts",
            b,
            "--plugin",
            "host-facts",
            "--node",
            "web-2",
            "-o",
            "json",
        ],
    );
    assert_eq!(json_of(&output)["plugins"].as_array().unwrap().len(), 1);
    assert_eq!(json_of(&output)["plugins"][0]["facts"]["cpu"]["cores"], 64);
    let output = inspect(dir.path(), &["facts", b]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("facts of 3 nodes (web-1, web-2, web-3): name one"),
        "{}",
        text(&output.stderr)
    );

    // A one-node bundle needs no node; a plugin named where the node goes is pointed to
    // --plugin.
    let (bundle, _) = real_bundle();
    let one = bundle.to_str().unwrap();
    let output = inspect(
        dir.path(),
        &["facts", one, "--plugin", "setup", "-o", "json"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let facts = json_of(&output);
    assert_eq!(facts["node"], "this-host");
    assert_eq!(facts["plugins"][0]["facts"], setup);
    assert_eq!(facts["plugins"].as_array().unwrap().len(), 1);
    let output = inspect(dir.path(), &["facts", one, "-o", "json"]);
    assert_eq!(json_of(&output)["plugins"].as_array().unwrap().len(), 2);
    let output = inspect(dir.path(), &["facts", one, "setup"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("has no node \"setup\", but a plugin of that name")
            && text(&output.stderr).contains("--plugin setup"),
        "{}",
        text(&output.stderr)
    );

    // The real run's bundle, extracted, answers as the archive does.
    let (bundle, _) = real_bundle();
    let archive = inspect(
        dir.path(),
        &["query", bundle.to_str().unwrap(), "$..mount", "-o", "json"],
    );
    let folder = dir.path().join("extracted");
    std::fs::create_dir(&folder).unwrap();
    assert!(
        Command::new("tar")
            .arg("-xzf")
            .arg(bundle)
            .arg("-C")
            .arg(&folder)
            .status()
            .unwrap()
            .success()
    );
    let extracted = inspect(
        dir.path(),
        &["query", folder.to_str().unwrap(), "$..mount", "-o", "json"],
    );
    assert_eq!(json_of(&archive), json_of(&extracted));
    assert!(
        !json_of(&archive)["nodes"][0]["plugins"][1]["values"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn diff_groups_the_facts_on_which_nodes_disagree_and_leaves_out_what_always_changes() {
    let dir = tempfile::tempdir().unwrap();
    // web-2's setup facts also differ in a clock, which the built-in list leaves out.
    let mut files = fleet_files();
    let (path, setup2) = &mut files[6];
    assert_eq!(*path, "plugins/setup/results/web-2/ansible_facts.json");
    let mut facts: Value = serde_json::from_slice(setup2).unwrap();
    facts["ansible_date_time"]["epoch"] = json!("1");
    // ... and in its time zone, which is no clock: it shows.
    let (setup, host) = real_facts();
    let zone = if setup["ansible_date_time"]["tz_offset"] == "+0100" {
        "+0200"
    } else {
        "+0100"
    };
    facts["ansible_date_time"]["tz_offset"] = json!(zone);
    *setup2 = serde_json::to_vec(&facts).unwrap();
    let fleet = bundle_of(dir.path(), "fleet.tar.gz", &files);
    let b = fleet.to_str().unwrap();

    let output = inspect(dir.path(), &["diff", b, "-o", "json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let drift = json_of(&output);
    assert_eq!(drift["nodes"], json!(["web-1", "web-2", "web-3"]));
    assert_eq!(
        drift["without_facts"],
        json!([{"node": "web-3", "plugins": ["setup"]}]),
        "web-3's setup failed: its setup facts are not drift"
    );
    let groups = drift["groups"].as_array().unwrap();
    let group_of = |path: &str| {
        groups
            .iter()
            .find(|g| {
                g["facts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|f| f["path"] == path)
            })
            .unwrap_or_else(|| panic!("no group holds {path}: {drift}"))
    };
    // host-facts: web-2 alone has 64 cores; web-3 (host-facts only) agrees with web-1.
    let cores = group_of("cpu.cores");
    assert_eq!(cores["node_sets"], json!([["web-1", "web-3"], ["web-2"]]));
    assert_eq!(
        cores["facts"],
        json!([{"plugin": "host-facts", "path": "cpu.cores",
                "values": [host["cpu"]["cores"], 64], "absent": []}])
    );
    // setup: web-1 and web-2 only; the version and the mounts split them the same way, so
    // they are one group.
    let version = group_of("ansible_distribution_version");
    assert_eq!(version["node_sets"], json!([["web-1"], ["web-2"]]));
    // setup declares its mounts keyed by `mount`: web-2's /var is a mount of its own.
    let var = r#"ansible_mounts[mount="/var"].mount"#;
    assert!(std::ptr::eq(version, group_of(var)));
    let fact = |path: &str| {
        version["facts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == path)
            .unwrap()
            .clone()
    };
    assert_eq!(
        fact("ansible_distribution_version")["values"],
        json!([setup["ansible_distribution_version"], "13.1"])
    );
    // web-1 (the real host) has no /var mount: absent, and said so.
    if !setup["ansible_mounts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["mount"] == "/var")
    {
        assert_eq!(
            fact(var),
            json!({"plugin": "setup", "path": var, "values": [null, "/var"], "absent": [0]})
        );
    }
    assert_eq!(
        fact("ansible_date_time.tz_offset")["values"],
        json!([setup["ansible_date_time"]["tz_offset"], zone])
    );
    assert_eq!(groups.len(), 2, "{drift}");
    assert!(
        !drift["groups"]
            .to_string()
            .contains("ansible_date_time.epoch")
    );
    assert!(drift["ignored"]["facts"].as_u64().unwrap() > 0);
    assert!(
        drift["ignored"]["patterns"]
            .as_array()
            .unwrap()
            .contains(&json!("ansible_date_time.epoch*"))
    );

    // The same as a table: the node sets, then a column per set.
    let output = inspect(dir.path(), &["diff", b]);
    let stdout = text(&output.stdout);
    assert!(stdout.contains("[a] web-1, web-3"), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.split_whitespace().eq([
            "host-facts",
            "cpu.cores",
            &host["cpu"]["cores"].to_string(),
            "64"
        ])),
        "{stdout}"
    );
    assert!(stdout.contains("web-3 has no setup facts"), "{stdout}");

    // Without the built-in list the clock is drift; --ignore leaves out a path of one's own.
    let output = inspect(
        dir.path(),
        &["diff", b, "--no-default-ignores", "-o", "json"],
    );
    let drift = json_of(&output);
    assert!(drift.to_string().contains("ansible_date_time.epoch"));
    assert_eq!(drift["ignored"], json!({"patterns": [], "facts": 0}));
    let output = inspect(dir.path(), &["diff", b, "--ignore", "cpu.*", "-o", "json"]);
    let drift = json_of(&output);
    assert!(!drift.to_string().contains("cpu.cores"), "{drift}");
    assert_eq!(drift["groups"].as_array().unwrap().len(), 1);

    // --exit-code: 1 when nodes differ.
    let output = inspect(dir.path(), &["diff", b, "--exit-code"]);
    assert_eq!(output.status.code(), Some(1));
}

/// Two bundles of a custom plugin, `mounts`, whose definition declares its facts document with
/// the list `mounts` keyed by `mount_point`, and a table of packages keyed by `name`: a month
/// apart, one of three mounts is gone, a flag was added to a set in another order, a package was
/// upgraded and one installed.
fn custom_plugin_bundles(dir: &Path) -> (PathBuf, PathBuf) {
    let definition = json!({"name": "mounts", "version": "0.1.0", "description": "mounts",
    "parameters": [], "capabilities": [],
    "artifacts": [
        {"name": "mounts.json", "media_type": "application/json",
         "description": "the mounts", "kind": "facts",
         "list_keys": [{"path": "mounts", "keys": ["mount_point"]}]},
        {"name": "packages.jsonl", "media_type": "application/jsonl",
         "description": "the packages", "kind": "table", "row_keys": ["name"]},
        {"name": "events.jsonl", "media_type": "application/jsonl",
         "description": "events, nothing identifies one", "kind": "table"},
    ]});
    let mount = |at: &str, fs: &str| json!({"mount_point": at, "fs": fs});
    let bundle = |name: &str, created: &str, run_id: &str, facts: Value, packages: &str| {
        let to = |v: &Value| serde_json::to_vec(v).unwrap();
        let real = Bundle::read(real_bundle().0.to_owned()).files;
        let mut run: Value = serde_json::from_slice(&real["meta/run.json"]).unwrap();
        run["created"] = json!(created);
        let status = json!({"run_id": run_id, "status": "complete", "plugins": [
            {"plugin": "mounts", "node": "n1", "status": "complete", "result_status": "passed"}]});
        bundle_of(
            dir,
            name,
            &[
                ("meta/run.json", to(&run)),
                ("meta/status.json", to(&status)),
                ("plugins/mounts/definition.json", to(&definition)),
                ("plugins/mounts/results/n1/mounts.json", to(&facts)),
                (
                    "plugins/mounts/results/n1/packages.jsonl",
                    packages.as_bytes().to_vec(),
                ),
                (
                    "plugins/mounts/results/n1/events.jsonl",
                    format!("{{\"at\": \"{created}\"}}\n").into_bytes(),
                ),
            ],
        )
    };
    let before = json!({"mounts": [mount("/", "ext4"), mount("/mnt", "tmpfs"),
                                   mount("/mnt2", "tmpfs")], "flags": ["a", "b"]});
    let after = json!({"mounts": [mount("/", "ext4"), mount("/mnt2", "tmpfs")],
                       "flags": ["b", "c", "a"]});
    let package = |name: &str, version: &str| json!({"name": name, "version": version}).to_string();
    let before_packages = [package("openssl", "3.0.1"), package("curl", "7.88")].join("\n");
    // Rows in another order, and a blank line, which is passed over.
    let after_packages = [
        package("curl", "7.88"),
        String::new(),
        package("openssl", "3.0.2"),
        package("zsh", "5.9"),
    ]
    .join("\n");
    (
        bundle(
            "before.tar.gz",
            "2030-01-01T00:00:00Z",
            "b4b4b4b4b4b4",
            before,
            &before_packages,
        ),
        bundle(
            "after.tar.gz",
            "2030-02-01T00:00:00Z",
            "af7eaf7eaf7e",
            after,
            &after_packages,
        ),
    )
}

#[test]
fn a_custom_plugins_facts_and_tables_are_read_and_their_keyed_lists_diff_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let (before, after) = custom_plugin_bundles(dir.path());
    let (a, b) = (before.to_str().unwrap(), after.to_str().unwrap());

    // `facts` and `query` read it as they read setup's.
    let facts = json_of(&inspect(
        dir.path(),
        &["facts", b, "n1", "mounts", "-o", "json"],
    ));
    assert_eq!(facts["plugins"][0]["plugin"], "mounts", "{facts}");
    assert_eq!(
        facts["plugins"][0]["facts"]["mounts"][1]["mount_point"],
        "/mnt2"
    );
    let answer = json_of(&inspect(
        dir.path(),
        &["query", b, "mounts[*].mount_point", "-o", "json"],
    ));
    assert_eq!(
        answer["nodes"][0]["plugins"],
        json!([{"plugin": "mounts", "values": ["/", "/mnt2"]}])
    );

    // The mount that went is one item removed, not /mnt2 moving into its place; the set that
    // gained an element in another order is one element added.
    let output = inspect(dir.path(), &["diff", a, b, "-o", "json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let diff = json_of(&output);
    let changes: Vec<(String, String)> = diff["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().into(),
                c["kind"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        changes,
        [
            ("flags".into(), "changed".into()),
            (r#"mounts[mount_point="/mnt"].fs"#.into(), "removed".into()),
            (
                r#"mounts[mount_point="/mnt"].mount_point"#.into(),
                "removed".into()
            ),
            // The table's rows are matched by name: openssl upgraded, zsh installed.
            (
                r#"packages[name="openssl"].version"#.into(),
                "changed".into()
            ),
            (r#"packages[name="zsh"].name"#.into(), "added".into()),
            (r#"packages[name="zsh"].version"#.into(), "added".into()),
        ],
        "{diff:#}"
    );
    assert_eq!(
        diff["subtrees"],
        json!([
            {"plugin": "mounts", "subtree": "flags", "added": 1, "removed": 0, "changed": 0},
            {"plugin": "mounts", "subtree": "mounts", "added": 0, "removed": 1, "changed": 0},
            {"plugin": "mounts", "subtree": "packages", "added": 1, "removed": 0, "changed": 1},
        ])
    );
    // A table without row keys (its rows changed) is not compared: nothing identifies a row.
    assert!(!diff["changes"].to_string().contains("events"), "{diff:#}");
    // The table is an SQL table of its own, in both bundles.
    let query = "SELECT run_id, node, version FROM mounts_packages WHERE name = 'openssl' \
                 ORDER BY version";
    let answer = json_of(&inspect(dir.path(), &["sql", a, b, query, "-o", "json"]));
    assert_eq!(
        answer["rows"],
        json!([
            ["b4b4b4b4b4b4", "n1", "3.0.1"],
            ["af7eaf7eaf7e", "n1", "3.0.2"]
        ]),
        "{answer:#}"
    );
    // The table says the same, the summary first.
    let stdout = text(&inspect(dir.path(), &["diff", a, b]).stdout);
    let summary = stdout.find("mounts mounts: 1 removed").expect(&stdout);
    assert!(stdout.contains("mounts flags: 1 added"), "{stdout}");
    assert!(summary < stdout.find("PLUGIN").expect(&stdout), "{stdout}");
}

#[test]
fn diff_of_two_bundles_lists_nodes_added_and_removed_and_each_change_with_its_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let before = fleet_bundle(dir.path());
    // A month later: web-2 is gone, web-4 is new, web-1 and web-3 run another kernel, web-1
    // lost a fact and gained one, and web-3's setup now passes (nothing to compare it with).
    let (setup, host) = real_facts();
    let mut setup1 = setup.clone();
    setup1["ansible_kernel"] = json!("9.9.9-factbuoy");
    setup1
        .as_object_mut()
        .unwrap()
        .remove("ansible_distribution_version");
    setup1["ansible_new_fact"] = json!(true);
    let mut host3 = host.clone();
    host3["kernel"]["release"] = json!("9.9.9-factbuoy");
    let mut host1 = host.clone();
    host1["kernel"]["release"] = json!("9.9.9-factbuoy");
    // A clock that moved is no change.
    host1["collected_at"] = json!("2030-01-01T00:00:00Z");
    let status = json!({"run_id": "1a7e41a7e41a", "status": "complete", "plugins": [
        {"plugin": "setup", "node": "web-1", "status": "complete", "result_status": "passed"},
        {"plugin": "setup", "node": "web-3", "status": "complete", "result_status": "passed"},
        {"plugin": "setup", "node": "web-4", "status": "complete", "result_status": "passed"},
    ]});
    let to = |v: &Value| serde_json::to_vec(v).unwrap();
    let run = Bundle::read(real_bundle().0.to_owned()).files["meta/run.json"].clone();
    let mut run: Value = serde_json::from_slice(&run).unwrap();
    run["created"] = json!("2030-01-01T00:00:00Z");
    let run = to(&run);
    let real = Bundle::read(real_bundle().0.to_owned()).files;
    let after = bundle_of(
        dir.path(),
        "later.tar.gz",
        &[
            ("meta/run.json", run),
            ("meta/status.json", to(&status)),
            (
                "plugins/setup/definition.json",
                real["plugins/setup/definition.json"].clone(),
            ),
            (
                "plugins/host-facts/definition.json",
                real["plugins/host-facts/definition.json"].clone(),
            ),
            (
                "plugins/setup/results/web-1/ansible_facts.json",
                to(&setup1),
            ),
            (
                "plugins/host-facts/results/web-1/host-facts.json",
                to(&host1),
            ),
            ("plugins/setup/results/web-3/ansible_facts.json", to(&setup)),
            (
                "plugins/host-facts/results/web-3/host-facts.json",
                to(&host3),
            ),
            ("plugins/setup/results/web-4/ansible_facts.json", to(&setup)),
        ],
    );
    let (a, b) = (before.to_str().unwrap(), after.to_str().unwrap());
    let output = inspect(dir.path(), &["diff", a, b, "-o", "json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let diff = json_of(&output);
    assert_eq!(diff["before"]["run_id"], "f1ee7f1ee700");
    assert_eq!(diff["after"]["run_id"], "1a7e41a7e41a");
    assert_eq!(diff["nodes_added"], json!(["web-4"]));
    assert_eq!(diff["nodes_removed"], json!(["web-2"]));
    assert_eq!(diff["nodes_compared"], 2);
    assert_eq!(
        diff["not_compared"],
        json!([{"node": "web-3", "plugin": "setup", "missing_in": "before"}])
    );
    assert_eq!(
        diff["changes"],
        json!([
            {"plugin": "host-facts", "path": "kernel.release", "kind": "changed",
             "before": host["kernel"]["release"].clone(), "after": "9.9.9-factbuoy",
             "nodes": ["web-1", "web-3"]},
            {"plugin": "setup", "path": "ansible_distribution_version", "kind": "removed",
             "before": setup["ansible_distribution_version"].clone(), "after": null,
             "nodes": ["web-1"]},
            {"plugin": "setup", "path": "ansible_kernel", "kind": "changed",
             "before": setup["ansible_kernel"].clone(), "after": "9.9.9-factbuoy",
             "nodes": ["web-1"]},
            {"plugin": "setup", "path": "ansible_new_fact", "kind": "added",
             "before": null, "after": true, "nodes": ["web-1"]},
        ])
    );

    let output = inspect(dir.path(), &["diff", a, b]);
    let stdout = text(&output.stdout);
    assert!(stdout.contains("nodes added: web-4"), "{stdout}");
    assert!(stdout.contains("nodes removed: web-2"), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.split_whitespace().eq([
            "setup",
            "ansible_new_fact",
            "added",
            "(absent)",
            "true",
            "web-1"
        ])),
        "{stdout}"
    );

    // Given later first (a glob of bundles sorts by name), they are compared in the order
    // their runs were created, and the table says so.
    let output = inspect(dir.path(), &["diff", b, a, "-o", "json"]);
    let reversed = json_of(&output);
    assert_eq!(reversed["reordered"], true);
    assert_eq!(reversed["before"]["run_id"], "f1ee7f1ee700");
    assert_eq!(reversed["changes"], diff["changes"]);
    assert_eq!(diff["reordered"], false);
    let output = inspect(dir.path(), &["diff", b, a]);
    assert!(
        text(&output.stdout).starts_with(&format!(
            "note: {a} was created before {b}, so it is the earlier"
        )),
        "{}",
        text(&output.stdout)
    );

    // A bundle compared with itself: nothing, and --exit-code says so with 0.
    let output = inspect(dir.path(), &["diff", a, a, "--exit-code", "-o", "json"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(json_of(&output)["changes"], json!([]));
    let output = inspect(dir.path(), &["diff", a, b, "--exit-code"]);
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn sql_answers_over_every_nodes_facts_results_and_several_bundles() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = fleet_bundle(dir.path());
    let b = fleet.to_str().unwrap();
    let sql = |args: &[&str]| {
        let output = inspect(dir.path(), &[&["sql"], args, &["-o", "json"]].concat());
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        json_of(&output)
    };
    let (setup, host) = real_facts();

    // JSON functions on the whole documents, through the view.
    let answer = sql(&[
        b,
        "SELECT node, facts->>'ansible_distribution_version' AS version FROM setup ORDER BY node",
    ]);
    assert_eq!(answer["columns"], json!(["node", "version"]));
    assert_eq!(
        answer["rows"],
        json!([
            ["web-1", setup["ansible_distribution_version"]],
            ["web-2", "13.1"]
        ])
    );
    // One row per leaf, typed: numbers compare as numbers.
    let answer = sql(&[
        b,
        "SELECT node, value FROM fact_values WHERE path = 'cpu.cores' AND value > 32",
    ]);
    assert_eq!(answer["rows"], json!([["web-2", 64]]));
    let answer = sql(&[
        b,
        "SELECT count(DISTINCT node) FROM fact_values WHERE plugin = 'host-facts'",
    ]);
    assert_eq!(answer["rows"], json!([[3]]));
    // The results, with the status document's spelling and error.
    let answer = sql(&[
        b,
        "SELECT run_id, node, status, result_status FROM results WHERE plugin = 'setup' AND result_status = 'failed'",
    ]);
    assert_eq!(
        answer["rows"],
        json!([["f1ee7f1ee700", "web-3", "timed-out", "failed"]])
    );

    // Several bundles: each row carries its run.
    let real = real_bundle().0.to_str().unwrap();
    let answer = sql(&[
        b,
        real,
        "SELECT r.run_id, count(f.node) FROM runs r LEFT JOIN host_facts f USING (run_id) GROUP BY r.run_id ORDER BY count(f.node)",
    ]);
    let rows = answer["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{answer}");
    assert_eq!(rows[0][1], 1, "the real run has one node");
    assert_eq!(rows[1], json!(["f1ee7f1ee700", 3]));
    // A bundle (not written by factbuoy) whose status document comes after the facts: their
    // rows still carry the run's id.
    let mut status_last = fleet_files();
    let status = status_last.remove(1);
    assert_eq!(status.0, "meta/status.json");
    status_last.push(status);
    let late = bundle_of(dir.path(), "status-last.tar.gz", &status_last);
    let answer = sql(&[
        late.to_str().unwrap(),
        "SELECT DISTINCT run_id FROM fact_values",
    ]);
    assert_eq!(answer["rows"], json!([["f1ee7f1ee700"]]));

    // A table for people.
    let output = inspect(
        dir.path(),
        &[
            "sql",
            b,
            "SELECT node, facts->'cpu'->>'cores' AS cores FROM host_facts",
        ],
    );
    let stdout = text(&output.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.split_whitespace().eq(["web-2", "64"])),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("web-1  {}", host["cpu"]["cores"])),
        "{stdout}"
    );

    // The tables are read-only, a bad query says what is there, and --db keeps the file.
    for (statement, refusal) in [
        (
            "DELETE FROM facts",
            "cannot modify facts because it is a view",
        ),
        ("DELETE FROM \"facts rows\"", "readonly"),
    ] {
        let output = inspect(dir.path(), &["sql", b, statement]);
        assert_eq!(output.status.code(), Some(2));
        assert!(
            text(&output.stderr).contains(refusal),
            "{}",
            text(&output.stderr)
        );
    }
    let output = inspect(dir.path(), &["sql", b, "SELECT name FROM nowhere"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("no such table: nowhere") && stderr.contains("fact_values"),
        "{stderr}"
    );
    let kept = dir.path().join("fleet.sqlite");
    sql(&[b, "SELECT 1", "--db", kept.to_str().unwrap()]);
    // Kept whole, whatever the query named, with the path index for the queries to come.
    let read = Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); \
            print(c.execute('SELECT count(*) FROM fact_values').fetchone()[0], \
                  c.execute('SELECT count(*) FROM setup').fetchone()[0], \
                  c.execute(\"SELECT name FROM sqlite_master WHERE type = 'index'\").fetchall())",
        ])
        .arg(&kept)
        .output()
        .unwrap();
    let read = text(&read.stdout);
    let counts: Vec<&str> = read.split_whitespace().collect();
    assert!(counts[0].parse::<u64>().unwrap() > 100, "{read}");
    assert_eq!(counts[1], "2", "{read}");
    assert!(read.contains("fact_values_by_path"), "{read}");
    let output = inspect(
        dir.path(),
        &["sql", b, "SELECT 1", "--db", kept.to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("exists"));
}

#[test]
fn export_writes_jsonl_csv_and_ansibles_fact_cache_into_the_folder_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = fleet_bundle(dir.path());
    let b = fleet.to_str().unwrap();
    let out = dir.path().join("export");
    let o = out.to_str().unwrap();
    let files = fleet_files();
    let document = |path: &str| -> Value {
        let (_, data) = files.iter().find(|(p, _)| *p == path).unwrap();
        serde_json::from_slice(data).unwrap()
    };

    // JSON Lines: a line per node and plugin, the node first.
    let output = inspect(dir.path(), &["export", b, "--format", "jsonl", "--out", o]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let jsonl = std::fs::read_to_string(out.join("facts.jsonl")).unwrap();
    let lines: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5, "web-1 and web-2 twice, web-3 once");
    assert!(jsonl.starts_with("{\"node\":"), "{}", &jsonl[..40]);
    let web2 = lines
        .iter()
        .find(|l| l["node"] == "web-2" && l["plugin"] == "setup")
        .unwrap();
    assert_eq!(
        web2["facts"],
        document("plugins/setup/results/web-2/ansible_facts.json")
    );

    // CSV with columns: a row per node; several values are a JSON array, none an empty cell.
    let output = inspect(
        dir.path(),
        &[
            "export",
            b,
            "--format",
            "csv",
            "--out",
            o,
            "--path",
            "ansible_distribution_version",
            "--path",
            "ansible_mounts[*].mount",
            "--path",
            "cpu.cores",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let read_csv = |path: &Path| -> Vec<Vec<String>> {
        csv::Reader::from_path(path)
            .unwrap()
            .into_records()
            .map(|r| r.unwrap().iter().map(str::to_owned).collect())
            .collect()
    };
    let mut reader = csv::Reader::from_path(out.join("facts.csv")).unwrap();
    assert_eq!(
        reader.headers().unwrap().iter().collect::<Vec<_>>(),
        [
            "node",
            "ansible_distribution_version",
            "ansible_mounts[*].mount",
            "cpu.cores"
        ]
    );
    let rows = read_csv(&out.join("facts.csv"));
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[1], ["web-2", "13.1", r#"["/","/data","/var"]"#, "64"]);
    assert_eq!(rows[2][0], "web-3");
    assert_eq!(rows[2][1], "", "web-3 has no setup facts");

    // CSV without columns: every leaf, a row each.
    let output = inspect(dir.path(), &["export", b, "--format", "csv", "--out", o]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let rows = read_csv(&out.join("facts.csv"));
    let (_, host) = real_facts();
    assert!(rows.contains(&vec![
        "web-2".to_owned(),
        "host-facts".into(),
        "cpu.cores".into(),
        "64".into()
    ]));
    assert!(rows.contains(&vec![
        "web-3".to_owned(),
        "host-facts".into(),
        "cpu.cores".into(),
        host["cpu"]["cores"].to_string()
    ]));

    // Ansible's fact cache: both layouts, a file each per node with setup facts.
    let cache = out.join("cache");
    let output = inspect(
        dir.path(),
        &[
            "export",
            b,
            "--format",
            "ansible-fact-cache",
            "--out",
            cache.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let mut names: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["s1_web-1", "s1_web-2", "web-1", "web-2"]);
    let plain: Value =
        serde_json::from_slice(&std::fs::read(cache.join("web-2")).unwrap()).unwrap();
    assert_eq!(plain["ansible_distribution_version"], "13.1");

    // Nothing but the files asked for, in the folder asked for.
    let mut written: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(written, ["cache", "facts.csv", "facts.jsonl"]);
    let output = inspect(
        dir.path(),
        &["export", b, "--format", "jsonl", "--out", o, "--path", "x"],
    );
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn export_writes_each_table_as_jsonl_and_csv_named_as_sql_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_, after) = custom_plugin_bundles(dir.path());
    let out = dir.path().join("export");
    let (b, o) = (after.to_str().unwrap(), out.to_str().unwrap());
    let lines = |file: &str| -> Vec<Value> {
        std::fs::read_to_string(out.join(file))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };

    let output = inspect(
        dir.path(),
        &["export", b, "--format", "jsonl", "--out", o, "-o", "json"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let written: Vec<(String, u64)> = json_of(&output)
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let file = PathBuf::from(f["file"].as_str().unwrap());
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            (name, f["rows"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(
        written,
        [
            ("facts.jsonl".to_owned(), 1),
            ("mounts_events.jsonl".to_owned(), 1),
            ("mounts_packages.jsonl".to_owned(), 3)
        ]
    );
    assert_eq!(
        lines("mounts_packages.jsonl"),
        [
            json!({"node": "n1", "name": "curl", "version": "7.88"}),
            json!({"node": "n1", "name": "openssl", "version": "3.0.2"}),
            json!({"node": "n1", "name": "zsh", "version": "5.9"}),
        ]
    );
    assert!(
        std::fs::read_to_string(out.join("mounts_packages.jsonl"))
            .unwrap()
            .starts_with("{\"node\":\"n1\",")
    );

    let output = inspect(dir.path(), &["export", b, "--format", "csv", "--out", o]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("mounts_packages.csv: 3 rows"),
        "{}",
        text(&output.stdout)
    );
    assert_eq!(
        std::fs::read_to_string(out.join("mounts_packages.csv")).unwrap(),
        "node,name,version\nn1,curl,7.88\nn1,openssl,3.0.2\nn1,zsh,5.9\n"
    );

    // A row cannot pass itself off as another node: its `node` field is `node_`. Fields a row
    // lacks are empty; values that are not strings are JSON.
    let definition = json!({"name": "p", "artifacts": [{"name": "t.jsonl",
        "media_type": "application/jsonl", "kind": "table"}]});
    let status = json!({"run_id": "r1", "status": "complete", "plugins": []});
    let to = |v: &Value| serde_json::to_vec(v).unwrap();
    let wide: serde_json::Map<String, Value> =
        (0..2001).map(|i| (format!("c{i}"), json!(i))).collect();
    let bundle = |name: &str, rows: String| {
        bundle_of(
            dir.path(),
            name,
            &[
                ("meta/status.json", to(&status)),
                ("plugins/p/definition.json", to(&definition)),
                ("plugins/p/results/n1/t.jsonl", rows.into_bytes()),
            ],
        )
    };
    let liar = bundle(
        "liar.tar.gz",
        format!(
            "{}\n{}\n",
            json!({"node": "n2", "a": 1}),
            json!({"b": [1, 2]})
        ),
    );
    let o2 = dir.path().join("liar");
    let output = inspect(
        dir.path(),
        &[
            "export",
            liar.to_str().unwrap(),
            "--format",
            "csv",
            "--out",
            o2.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert_eq!(
        std::fs::read_to_string(o2.join("p_t.csv")).unwrap(),
        "node,a,node_,b\nn1,1,n2,\nn1,,,\"[1,2]\"\n"
    );

    // A table of more columns than CSV is given is refused, and leaves no file; JSON Lines
    // takes it.
    let wide = bundle("wide.tar.gz", format!("{}\n", Value::from(wide)));
    let o3 = dir.path().join("wide");
    let output = inspect(
        dir.path(),
        &[
            "export",
            wide.to_str().unwrap(),
            "--format",
            "csv",
            "--out",
            o3.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains(
            "table p_t has more than 2000 columns, too many for CSV: export it with --format jsonl"
        ),
        "{}",
        text(&output.stderr)
    );
    assert!(!o3.join("p_t.csv").exists());
    let output = inspect(
        dir.path(),
        &[
            "export",
            wide.to_str().unwrap(),
            "--format",
            "jsonl",
            "--out",
            o3.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let mut names: Vec<String> = std::fs::read_dir(&o3)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["facts.csv", "facts.jsonl", "p_t.jsonl"],
        "no temporary file"
    );
}

/// The committed fixture journals unpacked into `dir`: its folders, one per machine, in name
/// order.
pub(crate) fn fixture_journals(dir: &Path) -> Vec<PathBuf> {
    support::unpack_journal_fixtures(dir, |_| true);
    let mut machines: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    machines.sort();
    machines
}

/// `journalctl -D <machine> -o json ARGS`: the journal.jsonl the systemd-logs plugin writes is
/// journalctl's, so these are a real node's results.
pub(crate) fn journalctl(machine: &Path, args: &[&str]) -> Vec<Value> {
    let output = Command::new("journalctl")
        .env("TZ", "UTC")
        .arg("-D")
        .arg(machine)
        .args(["-o", "json", "--no-pager"])
        .args(args)
        .output()
        .expect("running journalctl (apt-get install systemd)");
    text(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `inspect logs ARGS -o json`: each line's (node, entry).
fn logs(dir: &Path, bundle: &Path, args: &[&str]) -> Vec<(String, Value)> {
    let output = inspect(
        dir,
        &[&["logs", bundle.to_str().unwrap(), "-o", "json"], args].concat(),
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    text(&output.stdout)
        .lines()
        .map(|l| {
            let line: Value = serde_json::from_str(l).unwrap();
            (
                line["node"].as_str().unwrap().to_owned(),
                line["entry"].clone(),
            )
        })
        .collect()
}

fn cursors(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .map(|e| e["__CURSOR"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn logs_merge_every_nodes_journal_in_time_order_and_filter_as_journalctl_does() {
    let dir = tempfile::tempdir().unwrap();
    let machines = fixture_journals(&dir.path().join("journals"));
    assert_eq!(machines.len(), 2);
    let nodes = ["web-1", "web-2"];
    let whole: Vec<Vec<Value>> = machines.iter().map(|m| journalctl(m, &[])).collect();
    let to_lines = |entries: &[Value]| {
        entries
            .iter()
            .map(|e| format!("{e}\n"))
            .collect::<String>()
            .into_bytes()
    };
    let mut files = fleet_files();
    files.push((
        "plugins/systemd-logs/results/web-1/journal.jsonl",
        to_lines(&whole[0]),
    ));
    files.push((
        "plugins/systemd-logs/results/web-2/journal.jsonl",
        to_lines(&whole[1]),
    ));
    let bundle = bundle_of(dir.path(), "logs.tar.gz", &files);
    let time = |e: &Value| {
        e["__REALTIME_TIMESTAMP"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };

    // Every entry; each node's in journalctl's order; across nodes, the earliest next entry
    // first (the fixture's first machine interleaves files, so its order is not by time).
    let merged = logs(dir.path(), &bundle, &[]);
    assert_eq!(merged.len(), whole[0].len() + whole[1].len());
    for (node, entries) in nodes.iter().zip(&whole) {
        let of_node: Vec<Value> = merged
            .iter()
            .filter(|(n, _)| n == node)
            .map(|(_, e)| e.clone())
            .collect();
        assert_eq!(cursors(&of_node), cursors(entries), "{node}'s own order");
    }
    let (mut next, mut expected) = ([0, 0], Vec::new());
    while next[0] < whole[0].len() || next[1] < whole[1].len() {
        let front = |i: usize| whole[i].get(next[i]).map(time);
        let i = match (front(0), front(1)) {
            (Some(a), Some(b)) => usize::from(b < a),
            (Some(_), None) => 0,
            _ => 1,
        };
        expected.push(nodes[i].to_owned());
        next[i] += 1;
    }
    let order: Vec<String> = merged.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(order, expected, "merged by each node's earliest next entry");
    assert!(
        expected.windows(2).filter(|w| w[0] != w[1]).count() > 2,
        "the fixture's nodes interleave"
    );

    // Filters: the same entries as journalctl's own -u and -p, node by node.
    let web1 = |args: &[&str]| -> Vec<Value> {
        logs(dir.path(), &bundle, &[&["--node", "web-1"], args].concat())
            .into_iter()
            .map(|(n, e)| {
                assert_eq!(n, "web-1");
                e
            })
            .collect()
    };
    for unit in ["unit-27", "unit-2*", "init.scope"] {
        let expected = journalctl(&machines[0], &["-u", unit]);
        assert!(!expected.is_empty(), "{unit}");
        assert_eq!(
            cursors(&web1(&["--unit", unit])),
            cursors(&expected),
            "-u {unit}"
        );
    }
    let expected = journalctl(&machines[0], &["-p", "err"]);
    assert!(!expected.is_empty() && expected.len() < whole[0].len());
    assert_eq!(cursors(&web1(&["--priority", "err"])), cursors(&expected));
    assert_eq!(cursors(&web1(&["--priority", "3"])), cursors(&expected));

    // Time: only entries within, from both nodes.
    // From web-2's first entry to 30 s before its last: both nodes logged then.
    let all: Vec<u64> = merged.iter().map(|(_, e)| time(e)).collect();
    let (low, high) = (
        time(&whole[1][0]),
        time(whole[1].last().unwrap()) - 30_000_000,
    );
    let at = |micros: u64| {
        humantime::format_rfc3339_micros(
            std::time::UNIX_EPOCH + std::time::Duration::from_micros(micros),
        )
        .to_string()
    };
    let within = logs(
        dir.path(),
        &bundle,
        &["--since", &at(low), "--until", &at(high)],
    );
    assert_eq!(
        within.len(),
        all.iter().filter(|t| (low..=high).contains(*t)).count()
    );
    assert!(within.iter().all(|(_, e)| (low..=high).contains(&time(e))));
    assert!(within.iter().any(|(n, _)| n == "web-2") && within.iter().any(|(n, _)| n == "web-1"));

    // Text.
    let found = logs(dir.path(), &bundle, &["--grep", "other-machine #5"]);
    assert!(!found.is_empty());
    assert!(
        found
            .iter()
            .all(|(n, e)| n == "web-2"
                && e["MESSAGE"].as_str().unwrap().contains("other-machine #5"))
    );

    // For people: a line per entry, the node after the time, control characters escaped.
    let output = inspect(dir.path(), &["logs", bundle.to_str().unwrap()]);
    let stdout = text(&output.stdout);
    assert_eq!(stdout.lines().count(), merged.len());
    let first = &merged[0].1;
    assert!(
        stdout.lines().next().unwrap().starts_with(&format!(
            "{} {} ",
            at(time(first)),
            merged[0].0
        )),
        "{}",
        stdout.lines().next().unwrap()
    );
    assert!(!stdout.contains('\u{85}') && !stdout.contains('\x1b'));

    // A node without a journal, and a bundle without any, are errors that say what there is.
    let output = inspect(
        dir.path(),
        &["logs", bundle.to_str().unwrap(), "--node", "web-3"],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("no journal for web-3; it has journals for web-1, web-2")
    );
    let fleet = fleet_bundle(dir.path());
    let output = inspect(dir.path(), &["logs", fleet.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("has no journals"));

    // Nothing to print is said, not left silent: filters that match nothing, and journals with
    // no entries.
    let output = inspect(
        dir.path(),
        &[
            "logs",
            bundle.to_str().unwrap(),
            "--grep",
            "no such text anywhere",
        ],
    );
    assert!(output.status.success() && output.stdout.is_empty());
    assert!(
        text(&output.stderr).contains(&format!(
            "none of the {} entries of its 2 journals matches the filters",
            merged.len()
        )),
        "{}",
        text(&output.stderr)
    );
    let mut files = fleet_files();
    files.push((
        "plugins/systemd-logs/results/web-1/journal.jsonl",
        Vec::new(),
    ));
    let empty = bundle_of(dir.path(), "empty-journal.tar.gz", &files);
    let output = inspect(dir.path(), &["logs", empty.to_str().unwrap()]);
    assert!(output.status.success() && output.stdout.is_empty());
    assert!(
        text(&output.stderr).contains("its 1 journal holds no entries"),
        "{}",
        text(&output.stderr)
    );

    // --since and --until take what the plugin's own `since` takes: a duration ago (the
    // committed fixtures' entries are older than an hour), `@SECONDS`.
    assert!(logs(dir.path(), &bundle, &["--since", "1h"]).is_empty());
    assert_eq!(
        logs(dir.path(), &bundle, &["--until", "1h"]).len(),
        merged.len()
    );
    let seconds = |micros: u64| format!("@{}.{:06}", micros / 1_000_000, micros % 1_000_000);
    assert_eq!(
        logs(
            dir.path(),
            &bundle,
            &["--since", &seconds(low), "--until", &seconds(high)]
        )
        .len(),
        within.len()
    );
}

#[test]
fn logs_of_large_journals_stream_in_bounded_memory_and_an_endless_line_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // An extracted bundle of three nodes with 40 MiB journals each, entries interleaving.
    let root = dir.path().join("bundle");
    std::fs::create_dir_all(root.join("meta")).unwrap();
    std::fs::write(
        root.join("meta/status.json"),
        br#"{"run_id":"r1","status":"complete","plugins":[]}"#,
    )
    .unwrap();
    let size = 40 << 20;
    let mut lines = 0;
    for node in 0..3u64 {
        let folder = root.join(format!("plugins/systemd-logs/results/n{node}"));
        std::fs::create_dir_all(&folder).unwrap();
        let mut out =
            std::io::BufWriter::new(std::fs::File::create(folder.join("journal.jsonl")).unwrap());
        let (mut written, mut i) = (0, 0u64);
        while written < size {
            let line = json!({
                "__REALTIME_TIMESTAMP": (1_700_000_000_000_000 + i * 3 + node).to_string(),
                "_SYSTEMD_UNIT": "big.service", "PRIORITY": "6", "_PID": "42",
                "MESSAGE": format!("entry {i} of node {node}: {}", "x".repeat(200)),
            })
            .to_string();
            writeln!(out, "{line}").unwrap();
            written += line.len() + 1;
            i += 1;
        }
        lines += i;
    }
    let mut command = support::factbuoy();
    command.args(["inspect", "logs", "-o", "json"]).arg(&root);
    let measured = support::measure::measure_into(&command, std::process::Stdio::null());
    assert_eq!(measured.code, 0, "{}", measured.stderr());
    let what = format!("logs of 3 x {} MiB journals ({lines} entries)", size >> 20);
    assert_bounded(&measured, &what);
    // The same, counted: every entry is there.
    let output = support::factbuoy()
        .args(["inspect", "logs", "--grep", "of node 1:"])
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(
        text(&output.stdout).lines().count() as u64 * 3,
        lines,
        "every entry of n1"
    );

    // A line longer than any journal writes: refused by entry and line, in bounded memory.
    let endless = root.join("plugins/systemd-logs/results/n0/journal.jsonl");
    let mut out = std::fs::OpenOptions::new()
        .append(true)
        .open(&endless)
        .unwrap();
    out.write_all(b"{\"MESSAGE\":\"").unwrap();
    out.write_all(&vec![b'y'; 17 << 20]).unwrap();
    drop(out);
    let mut command = support::factbuoy();
    command.args(["inspect", "logs"]).arg(&root);
    let measured = support::measure::measure_into(&command, std::process::Stdio::null());
    assert_eq!(measured.code, 2);
    assert!(
        measured
            .stderr()
            .contains("plugins/systemd-logs/results/n0/journal.jsonl, line")
            && measured.stderr().contains("longer than 16777216 bytes"),
        "{}",
        measured.stderr()
    );
    assert_bounded(&measured, "logs refusing a 17 MiB line");
}

/// `chromium --headless ARGS URL`: its stdout, and the console messages it logged (every one,
/// errors included, as `INFO:CONSOLE` lines on stderr).
pub(crate) fn chromium(args: &[&str], url: &str) -> (String, Vec<String>) {
    let profile = tempfile::tempdir().unwrap();
    let output = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            // The page inflates its facts asynchronously: let it finish before the DOM is
            // dumped or the screenshot taken (virtual time runs ahead when the page is idle).
            "--virtual-time-budget=30000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(url)
        .output()
        .expect("running chromium (apt-get install chromium)");
    assert!(
        output.status.success(),
        "chromium: {}",
        text(&output.stderr)
    );
    let console = text(&output.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_owned)
        .collect();
    (text(&output.stdout), console)
}

/// The DOM of the page at `url` once its script has run (`chromium --dump-dom` with `args`),
/// which must have finished (`data-rendered="ok"`) and logged nothing to the console.
pub(crate) fn rendered(args: &[&str], url: &str) -> String {
    let (dom, console) = chromium(&[args, &["--dump-dom"]].concat(), url);
    assert_eq!(
        console,
        Vec::<String>::new(),
        "the page logged to the console"
    );
    assert!(
        dom.contains("data-rendered=\"ok\""),
        "the script did not finish"
    );
    dom
}

/// A screenshot of the page at `url` in a window of `size` (`1280,900`), kept as `name` in the
/// test's output folder (target/tmp/inspect-report) for a person to look at; its bytes, a PNG.
fn screenshot(url: &str, name: &str, size: &str) -> Vec<u8> {
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("inspect-report");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join(name);
    let _ = std::fs::remove_file(&shot);
    chromium(
        &[
            &format!("--window-size={size}"),
            &format!("--screenshot={}", shot.display()),
        ],
        url,
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "{} is no PNG", shot.display());
    eprintln!("screenshot: {}", shot.display());
    png
}

#[test]
fn report_is_one_self_contained_page_that_shows_every_node_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    // The fleet, with a fact value and an error message that try to become HTML.
    let mut files = fleet_files();
    let hostile = "</script><script>document.body.dataset.pwned='script'</script>\
                   <img src=x onerror=\"document.body.dataset.pwned='img'\"><!--";
    let (path, setup2) = &mut files[6];
    assert_eq!(*path, "plugins/setup/results/web-2/ansible_facts.json");
    let mut facts: Value = serde_json::from_slice(setup2).unwrap();
    facts["ansible_hostile"] = json!(hostile);
    *setup2 = serde_json::to_vec(&facts).unwrap();
    let (path, error) = files.last_mut().unwrap();
    assert_eq!(*path, "plugins/setup/errors/web-3/error.json");
    *error = serde_json::to_vec(&json!({"error": hostile})).unwrap();
    let fleet = bundle_of(dir.path(), "fleet.tar.gz", &files);

    let page = dir.path().join("report.html");
    let output = inspect(
        dir.path(),
        &[
            "report",
            fleet.to_str().unwrap(),
            "--out",
            page.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!doctype html>"));
    // Nothing to fetch: no external script, style or image, and a policy that forbids it.
    assert!(!html.contains("<script src") && !html.contains("<link") && !html.contains("<img"));
    assert!(html.contains("default-src 'none'"));

    let url = format!("file://{}", page.display());
    let dom = rendered(&[], &url);
    assert!(!dom.contains("data-pwned"), "bundle text ran as HTML");
    for node in ["web-1", "web-2", "web-3"] {
        assert!(
            dom.contains(&format!("<tr class=\"node-row\" data-node=\"{node}\"")),
            "{node}"
        );
        assert!(
            dom.contains(&format!("<details data-node=\"{node}\"")),
            "{node}"
        );
    }
    // Drift highlighted: web-2's version, a drift cell; its hostile value shown as text.
    assert!(
        dom.contains("<td class=\"value drift\">13.1</td>"),
        "no drift cell"
    );
    // The hostile value in web-2's drift, and web-3's error whole, shown as text.
    let shown = "&lt;/script&gt;&lt;script&gt;document.body.dataset.pwned='script'";
    assert!(dom.matches(shown).count() >= 2, "{dom}");
    assert!(dom.contains("<strong>setup on web-3: </strong><span class=\"error\">&lt;/script&gt;"));
    // The whole truth at the top: web-3's setup failed, so the run is not just "complete";
    // web-1's warning is beside the errors; times to the second; plurals right.
    assert!(
        dom.contains("<span class=\"badge failed\">complete with 1 failure</span>"),
        "{dom}"
    );
    assert!(dom.contains("1 error, 1 warning."), "{dom}");
    assert!(
        dom.contains("No journals in this bundle: systemd-logs did not run, or found none."),
        "{dom}"
    );
    assert!(
        dom.contains(
            "<strong>setup on web-1: </strong><span class=\"warning\">cannot read /etc/shadow: permission denied</span>"
        ),
        "{dom}"
    );
    let meta = &dom[dom.find("id=\"meta\"").unwrap()..];
    let meta = &meta[..meta.find("</div>").unwrap()];
    assert!(meta.contains(" · 3 nodes · created "), "{meta}");
    assert!(
        meta.contains(" UTC · last activity") && !meta.contains("Z ·"),
        "times to the second: {meta}"
    );
    assert!(
        !meta
            .split(' ')
            .any(|word| word.contains(':') && word.contains('.')),
        "no fractions of seconds: {meta}"
    );

    // Searchable: a search for web-2's version leaves only web-2 in the fleet table.
    let dom = rendered(&[], &format!("{url}#q=13.1"));
    assert!(
        dom.contains("<tr class=\"node-row\" data-node=\"web-2\""),
        "{dom}"
    );
    // The table shows only the nodes that match.
    assert!(!dom.contains("<tr class=\"node-row\" data-node=\"web-1\""));
    assert!(!dom.contains("<tr class=\"node-row\" data-node=\"web-3\""));
    assert!(dom.contains("1 of 3 nodes shown"), "{dom}");
    // It opens the node it matches, with the matching fact shown, and says how many match.
    assert!(
        dom.contains("<details data-node=\"web-2\" open=\"\""),
        "{dom}"
    );
    assert!(dom.contains(">13.1</td>"), "{dom}");
    assert!(
        dom.contains("<span id=\"search-count\" class=\"muted\"> 1 node matches</span>"),
        "{dom}"
    );

    // A screenshot, kept in the test's output folder for a person to look at.
    let png = screenshot(&url, "report.png", "1280,1600");
    assert!(png.len() > 10_000, "{} bytes", png.len());
}

#[test]
fn report_has_a_section_per_other_plugin_with_its_tables_and_summarises_the_journals() {
    let dir = tempfile::tempdir().unwrap();
    let machines = fixture_journals(&dir.path().join("journals"));
    let whole: Vec<Vec<Value>> = machines.iter().map(|m| journalctl(m, &[])).collect();
    let errors: usize = machines
        .iter()
        .map(|m| journalctl(m, &["-p", "err"]).len())
        .sum();
    assert!(errors > 0, "the fixture journals hold errors");
    let to_lines = |entries: &[Value]| -> Vec<u8> {
        entries
            .iter()
            .map(|e| format!("{e}\n"))
            .collect::<String>()
            .into_bytes()
    };
    let to = |v: &Value| serde_json::to_vec(v).unwrap();
    let definition = json!({"name": "inventory", "version": "0.3.0", "description": "packages",
        "parameters": [], "capabilities": [],
        "artifacts": [
            {"name": "facts.json", "media_type": "application/json", "description": "facts",
             "kind": "facts"},
            {"name": "packages.jsonl", "media_type": "application/jsonl",
             "description": "the packages", "kind": "table", "row_keys": ["name"]}]});
    let package = |name: &str, version: &str| json!({"name": name, "version": version}).to_string();
    // web-2 has more rows than the page shows of a table (after web-1's two); zsh is only on
    // web-1.
    let many: String = (0..2_500)
        .map(|i| package(&format!("lib{i}"), "1.0") + "\n")
        .collect();
    let mut files = fleet_files();
    let (path, status) = &mut files[1];
    assert_eq!(*path, "meta/status.json");
    let mut doc: Value = serde_json::from_slice(status).unwrap();
    for node in ["web-1", "web-2"] {
        doc["plugins"]
            .as_array_mut()
            .unwrap()
            .push(json!({"plugin": "inventory", "node": node,
            "status": "complete", "result_status": "passed"}));
    }
    *status = to(&doc);
    files.extend([
        ("plugins/inventory/definition.json", to(&definition)),
        (
            "plugins/inventory/results/web-1/facts.json",
            to(&json!({"repo": "stable"})),
        ),
        (
            "plugins/inventory/results/web-1/packages.jsonl",
            (package("openssl", "3.0.2") + "\n" + &package("zsh", "5.9")).into_bytes(),
        ),
        (
            "plugins/inventory/results/web-2/facts.json",
            to(&json!({"repo": "testing"})),
        ),
        (
            "plugins/inventory/results/web-2/packages.jsonl",
            many.into_bytes(),
        ),
        (
            "plugins/systemd-logs/results/web-1/journal.jsonl",
            to_lines(&whole[0]),
        ),
        (
            "plugins/systemd-logs/results/web-2/journal.jsonl",
            to_lines(&whole[1]),
        ),
    ]);
    let bundle = bundle_of(dir.path(), "fleet.tar.gz", &files);
    let page = dir.path().join("report.html");
    let output = inspect(
        dir.path(),
        &[
            "report",
            bundle.to_str().unwrap(),
            "--out",
            page.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let url = format!("file://{}", page.display());

    let dom = rendered(&[], &url);
    // The journals: every entry counted, the errors as journalctl -p err selects them.
    let entries = whole[0].len() + whole[1].len();
    assert!(
        dom.contains(&format!(
            "{entries} entries in the journals of 2 nodes; {errors} error{} (priority err or more severe).",
            if errors == 1 { "" } else { "s" }
        )),
        "{dom}"
    );
    let logs = &dom[dom.find("id=\"logs-body\"").unwrap()..];
    let logs = &logs[..logs.find("</section>").unwrap()];
    for priority in whole
        .iter()
        .flatten()
        .filter_map(|e| e["PRIORITY"].as_str())
    {
        let name = [
            "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
        ][priority.parse::<usize>().unwrap()];
        assert!(
            logs.contains(&format!("<td class=\"\">{name}</td>")),
            "{name}: {logs}"
        );
    }
    // The custom plugin's section: its facts, and its table with the cap said out loud.
    let section = &dom[dom
        .find("<section class=\"plugin\" data-plugin=\"inventory\"")
        .unwrap()..];
    let section = &section[..section.find("</section>").unwrap()];
    assert!(
        section.contains("<h2>Plugin inventory 0.3.0</h2>")
            || section.contains("<h2>Plugin inventory</h2>"),
        "{section}"
    );
    assert!(section.contains("passed on 2 nodes."), "{section}");
    assert!(
        section
            .contains("<td class=\"path\">repo</td><td class=\"value\">testing</td><td>web-2</td>"),
        "{section}"
    );
    assert!(
        section.contains("Table packages.jsonl (2502 rows, a row per name)"),
        "{section}"
    );
    assert!(
        section.contains(
            "The first 2000 rows; all of them: factbuoy inspect sql fleet.tar.gz 'SELECT * FROM inventory_packages'"
        ),
        "{section}"
    );
    assert!(
        section.contains("<td class=\"value\">lib1997</td>"),
        "{section}"
    );
    assert!(
        !section.contains("<td class=\"value\">lib1998</td>"),
        "past the cap"
    );
    assert!(
        !dom.contains("data-plugin=\"setup\"") && !dom.contains("data-plugin=\"systemd-logs\"")
    );

    // A search for what only web-1's table holds finds web-1 and shows that row alone.
    let dom = rendered(&[], &format!("{url}#q=zsh"));
    assert!(
        dom.contains("<tr class=\"node-row\" data-node=\"web-1\""),
        "{dom}"
    );
    assert!(
        !dom.contains("<tr class=\"node-row\" data-node=\"web-2\""),
        "{dom}"
    );
    assert!(dom.contains("<span id=\"search-count\" class=\"muted\"> 1 node matches</span>"));
    assert!(
        dom.contains("<tr data-search=\"web-1 zsh 5.9\"><td>web-1</td>"),
        "{dom}"
    );
    assert!(
        dom.contains("<tr data-search=\"web-1 openssl 3.0.2\" class=\"hidden\"><td>web-1</td>"),
        "{dom}"
    );
}

#[test]
fn report_of_a_thousand_nodes_shows_the_three_that_failed_and_why_on_its_first_screen() {
    let dir = tempfile::tempdir().unwrap();
    let to = |v: &Value| serde_json::to_vec(v).unwrap();
    let real = Bundle::read(real_bundle().0.to_owned()).files;
    let name = |i: usize| format!("node-{i:04}");
    let (setup, _) = real_facts();
    let mut pairs = Vec::new();
    let mut files: Vec<(&'static str, Vec<u8>)> = vec![
        ("meta/run.json", real["meta/run.json"].clone()),
        (
            "plugins/setup/definition.json",
            real["plugins/setup/definition.json"].clone(),
        ),
    ];
    // Paths must live as long as the bundle's files: leak them, as the test is short.
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    for i in 0..1000 {
        let node = name(i);
        let (vcpus, memory) = ([2, 4, 8][i % 3], [3900, 7900, 15900][i % 3]);
        // A real node's setup facts, with this node's own name, address, versions and sizes.
        let mut facts = setup.clone();
        facts["ansible_hostname"] = json!(node);
        facts["ansible_distribution_version"] = json!(if i % 10 == 0 { "13.1" } else { "12.11" });
        facts["ansible_kernel"] = json!(format!("6.1.0-{}-amd64", 20 + i % 3));
        facts["ansible_processor_vcpus"] = json!(vcpus);
        facts["ansible_memtotal_mb"] = json!(memory);
        let address = format!("10.0.{}.{}", i / 250, i % 250);
        facts["ansible_default_ipv4"]["address"] = json!(address);
        // A mount of its own, an item of a list keyed by mount point.
        facts["ansible_mounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"mount": format!("/srv/{node}"), "fstype": "xfs"}));
        files.push((
            leak(format!("plugins/setup/results/{node}/ansible_facts.json")),
            to(&facts),
        ));
        pairs.push(
            json!({"plugin": "setup", "node": node, "status": "complete",
                          "result_status": "passed"}),
        );
        let logs = match i {
            // Two nodes fail the same way (their own names in the message), a third times out.
            100 | 700 => {
                files.push((
                    leak(format!("plugins/systemd-logs/errors/{node}/error.json")),
                    to(&json!({"error": format!(
                        "plugin \"systemd-logs\" on {node}: permission denied on /var/log/journal")})),
                ));
                json!({"plugin": "systemd-logs", "node": node, "status": "complete",
                       "result_status": "failed"})
            }
            400 => json!({"plugin": "systemd-logs", "node": node, "status": "timed-out",
                          "result_status": "failed"}),
            _ => json!({"plugin": "systemd-logs", "node": node, "status": "complete",
                        "result_status": "passed"}),
        };
        pairs.push(logs);
    }
    let status = json!({"run_id": "a1000a1000a1", "status": "complete", "plugins": pairs});
    files.push(("meta/status.json", to(&status)));
    let bundle = bundle_of(dir.path(), "thousand.tar.gz", &files);
    let page = dir.path().join("report.html");
    let output = inspect(
        dir.path(),
        &[
            "report",
            bundle.to_str().unwrap(),
            "--out",
            page.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    // Each node's facts are written as what differs from the first node's: the page is a
    // small part of what the documents weigh whole.
    let whole: usize = files
        .iter()
        .filter(|(path, _)| path.ends_with("ansible_facts.json"))
        .map(|(_, data)| data.len())
        .sum();
    let size = std::fs::metadata(&page).unwrap().len() as usize;
    eprintln!("report of 1,000 nodes: {size} bytes; their facts documents: {whole} bytes");
    assert!(size < whole / 10, "{size} bytes for {whole} bytes of facts");

    // A copy of the page that also writes, after it has rendered, where its parts end, and
    // what the node table shows after a click on a chart's bar and on a column's header.
    let html = std::fs::read_to_string(&page).unwrap();
    let measured = dir.path().join("measured.html");
    let probe = r##"<script>
const b = document.body.dataset;
for (const id of ["errors", "overview"]) b[id + "Bottom"] = Math.round(document.getElementById(id).getBoundingClientRect().bottom);
const rows = () => [...document.querySelectorAll("tr.node-row")].map((r) => r.dataset.node).join(" ");
const chart = [...document.querySelectorAll("figure.chart")].find((f) => f.querySelector("figcaption").textContent === "systemd-logs result");
[...chart.querySelectorAll("g.bar")].find((g) => g.querySelector("title").textContent.startsWith("failed:")).dispatchEvent(new Event("click"));
b.afterBar = rows() + " | " + document.getElementById("fleet-filter").textContent;
document.querySelector("#fleet-filter button").click();
const nodeFilter = document.querySelector("#fleet-table tr.filters input");
nodeFilter.value = "NODE-070"; nodeFilter.dispatchEvent(new Event("input"));
b.afterColumnFilter = rows() + " | " + document.getElementById("fleet-pager").textContent;
nodeFilter.value = ""; nodeFilter.dispatchEvent(new Event("input"));
const cpus = [...document.querySelectorAll("#fleet-table th")].find((th) => th.textContent === "CPUs");
cpus.click(); cpus.click();
b.afterSort = rows().split(" ").slice(0, 3).join(" ") + " | " + document.querySelectorAll("tr.node-row").length;
</script></body>"##;
    std::fs::write(&measured, html.replace("</body>", probe)).unwrap();
    let dom = rendered(
        &["--window-size=1280,900"],
        &format!("file://{}", measured.display()),
    );
    // The answer first: the band counts, and the failures grouped with their reasons.
    assert!(
        dom.contains("<span class=\"badge failed\">complete with 3 failures</span>"),
        "{dom}"
    );
    assert!(dom.contains(">2 results failed</a>"), "{dom}");
    assert!(dom.contains(">1 result lost or timed out</a>"), "{dom}");
    assert!(
        dom.contains(
            "<strong>systemd-logs on 2 nodes: </strong><span class=\"error\">plugin \"systemd-logs\" \
             on NODE: permission denied on /var/log/journal</span><div class=\"muted\">node-0100, node-0700</div>"
        ),
        "{dom}"
    );
    assert!(
        dom.contains(
            "<strong>systemd-logs on node-0400: </strong><span class=\"error\">timed-out, with no error recorded</span>"
        ),
        "{dom}"
    );
    // ... all of it on the first screen, 900 pixels high, with the charts under it.
    let bottom = |id: &str| -> u32 {
        let at = dom
            .find(&format!("data-{id}-bottom=\""))
            .unwrap_or_else(|| panic!("{id}"))
            + id.len()
            + 14;
        dom[at..at + dom[at..].find('"').unwrap()].parse().unwrap()
    };
    assert!(
        bottom("errors") <= 900,
        "the failures end at {} px",
        bottom("errors")
    );
    assert!(bottom("overview") > bottom("errors"));
    for chart in [
        "OS",
        "Kernel",
        "CPUs",
        "Memory (MiB)",
        "setup result",
        "systemd-logs result",
    ] {
        assert!(
            dom.contains(&format!("<figcaption>{chart}</figcaption>")),
            "{chart}"
        );
    }
    // A fact every node has its own value of splits them into 1,000 sets: the page holds the
    // first six and counts the rest (all of them would be a page of 1,000 columns a fact).
    assert!(dom.contains("and 994 more sets (one per node)"), "{dom}");
    // A mount of a node's own is a fact it alone has: said per node, not as 1,000 splits.
    assert!(
        dom.contains("1000 nodes have facts no other node has"),
        "{dom}"
    );
    assert!(
        dom.contains(
            ">node-0000: 2 setup facts, ansible_mounts[mount=\"/srv/node-0000\"].fstype, \
             ansible_mounts[mount=\"/srv/node-0000\"].mount</li>"
        ),
        "{dom}"
    );
    // A page of the node table at a time; a bar keeps only its nodes; a header sorts.
    assert_eq!(dom.matches("<tr class=\"node-row\"").count(), 100);
    assert!(
        dom.contains("1000 of 1000 nodes shown; rows 1–100"),
        "{dom}"
    );
    assert!(
        dom.contains("data-after-bar=\"node-0100 node-0700 | Only systemd-logs: failed show all\""),
        "{dom}"
    );
    assert!(
        dom.contains("data-after-sort=\"node-0002 node-0005 node-0008 | 100\""),
        "{dom}"
    );
    // A column's filter box: the nodes whose name holds what it holds, in any case.
    let nodes: Vec<String> = (700..710).map(|n| format!("node-{n:04}")).collect();
    assert!(
        dom.contains(&format!(
            "data-after-column-filter=\"{} | 10 of 1000 nodes shown \"",
            nodes.join(" ")
        )),
        "{dom}"
    );

    // A search for one node's address finds it, and its facts, rebuilt in the page from the
    // first node's and its own differences, are the whole document.
    let dom = rendered(&[], &format!("file://{}#q=10.0.2.150", page.display()));
    assert!(dom.contains("1 node matches"), "{dom}");
    let details = &dom[dom
        .find("<details data-node=\"node-0650\" open=\"\"")
        .expect("node-0650 opened")..];
    let details = &details[..details.find("</details>").unwrap()];
    let mut expected = setup.clone();
    expected["ansible_hostname"] = json!("node-0650");
    expected["ansible_mounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"mount": "/srv/node-0650", "fstype": "xfs"}));
    let rows = details.matches("<tr class=").count();
    assert_eq!(
        rows,
        support_leaves(&expected),
        "every leaf of node-0650's facts"
    );
    assert!(
        details.contains("<td class=\"value\">node-0650</td>"),
        "{details}"
    );
    assert!(
        details.contains("<td class=\"value\">10.0.2.150</td>"),
        "{details}"
    );

    // A screenshot of the first screen, kept for a person to look at.
    screenshot(
        &format!("file://{}", page.display()),
        "report-1000-first-screen.png",
        "1280,900",
    );
}

/// How many leaves `inspect facts` (and the report) shows of `facts`.
fn support_leaves(facts: &Value) -> usize {
    match facts {
        Value::Object(map) if !map.is_empty() => map.values().map(support_leaves).sum(),
        Value::Array(items) if !items.is_empty() => items.iter().map(support_leaves).sum(),
        _ => 1,
    }
}

/// The files of a small valid bundle, without an index.
fn base_files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("meta/run.json", br#"{"run_id":"r1","plugins":[]}"#.to_vec()),
        (
            "meta/status.json",
            br#"{"run_id":"r1","status":"complete","plugins":[]}"#.to_vec(),
        ),
    ]
}

/// A small valid bundle for hostile tests to add one bad entry to.
fn base() -> Vec<Item<'static>> {
    base_files()
        .into_iter()
        .map(|(path, data)| Item::File(path, data))
        .collect()
}

fn with(extra: Item<'static>) -> Vec<Item<'static>> {
    let mut items = base();
    items.push(extra);
    items
}

#[test]
fn an_entry_leading_out_with_dot_dot_is_refused_by_name() {
    assert_refused(
        &with(Item::Raw(
            "plugins/setup/results/n1/../../../../escaped".into(),
            tar::EntryType::Regular,
            2,
            b"{}".to_vec(),
        )),
        "plugins/setup/results/n1/../../../../escaped",
        "leading out of the bundle",
    );
}

#[test]
fn an_absolute_entry_is_refused_by_name() {
    let target = std::env::temp_dir().join("factbuoy-inspect-absolute-escape");
    let name = target.to_str().unwrap().to_owned();
    assert_refused(
        &with(Item::Raw(
            name.clone(),
            tar::EntryType::Regular,
            2,
            b"{}".to_vec(),
        )),
        &name,
        "an absolute path",
    );
    assert!(!target.exists());
}

#[test]
fn a_symlink_pointing_out_is_refused_by_name_in_an_archive_and_a_folder() {
    assert_refused(
        &with(Item::Link(
            "plugins/setup/results/n1/ansible_facts.json",
            tar::EntryType::Symlink,
            "/etc/shadow",
        )),
        "plugins/setup/results/n1/ansible_facts.json",
        "a symbolic link to /etc/shadow",
    );
    // An extracted bundle whose facts file is a link out is refused the same way.
    let dir = tempfile::tempdir().unwrap();
    let facts = dir.path().join("plugins/setup/results/n1");
    std::fs::create_dir_all(&facts).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", facts.join("ansible_facts.json")).unwrap();
    let output = inspect(dir.path(), &["facts", dir.path().to_str().unwrap(), "n1"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(
            "entry plugins/setup/results/n1/ansible_facts.json: a symbolic link to /etc/shadow"
        ),
        "{stderr}"
    );
}

#[test]
fn a_hard_link_is_refused_by_name() {
    assert_refused(
        &with(Item::Link(
            "plugins/host-facts/results/n1/host-facts.json",
            tar::EntryType::Link,
            "/etc/passwd",
        )),
        "plugins/host-facts/results/n1/host-facts.json",
        "a hard link to /etc/passwd",
    );
}

#[test]
fn a_device_file_is_refused_by_name() {
    assert_refused(
        &with(Item::Raw(
            "plugins/setup/results/n1/ansible_facts.json".into(),
            tar::EntryType::Char,
            0,
            Vec::new(),
        )),
        "plugins/setup/results/n1/ansible_facts.json",
        "a device file",
    );
}

#[test]
fn a_second_entry_of_one_path_is_refused_by_name() {
    let mut items = base();
    items.push(Item::File("meta/status.json", b"{}".to_vec()));
    assert_refused(&items, "meta/status.json", "a second entry of a path");
}

#[test]
fn invalid_json_is_an_error_naming_the_entry() {
    let items = vec![
        Item::File("meta/run.json", br#"{"run_id":"r1","plugins":[]}"#.to_vec()),
        Item::File(
            "meta/status.json",
            br#"{"run_id":"r1","status":"complete","plugins":[]}"#.to_vec(),
        ),
        Item::File(
            "plugins/setup/results/n1/ansible_facts.json",
            b"{\"cpu\": [1,".to_vec(),
        ),
        Item::File("meta/index.json", b"[{\"path\": ".to_vec()),
    ];
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("b.tar.gz");
    write_targz(&bundle, &items);
    let b = bundle.to_str().unwrap();
    for args in [vec!["facts", b, "n1"], vec!["query", b, "cpu"]] {
        let output = inspect(dir.path(), &args);
        assert_eq!(output.status.code(), Some(2));
        let stderr = text(&output.stderr);
        assert!(
            stderr.contains("entry plugins/setup/results/n1/ansible_facts.json is not valid JSON"),
            "{stderr}"
        );
    }
    let output = inspect(dir.path(), &["verify", b]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("meta/index.json: entry meta/index.json is not valid JSON"),
        "{stdout}"
    );
}

#[test]
fn a_truncated_archive_is_an_error_naming_where_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    // The gzip stream cut short: the real run's bundle, its first half.
    let (bundle, _) = real_bundle();
    let bytes = std::fs::read(bundle).unwrap();
    let cut = dir.path().join("cut.tar.gz");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    for command in ["summary", "verify"] {
        let output = inspect(dir.path(), &[command, cut.to_str().unwrap()]);
        assert_ne!(output.status.code(), Some(0));
        let said = text(&output.stderr) + &text(&output.stdout);
        assert!(
            said.contains("corrupt or truncated after entry ") || said.contains("reading entry "),
            "{command}: {said}"
        );
    }
    // A whole gzip stream around a tar cut inside an entry: the header says 1000 bytes, 10 follow.
    let short = dir.path().join("short.tar.gz");
    let mut tar = Vec::new();
    {
        let mut header = tar::Header::new_gnu();
        header.set_path("meta/status.json").unwrap();
        header.set_size(1000);
        header.set_cksum();
        tar.extend_from_slice(header.as_bytes());
        tar.extend_from_slice(b"{\"run_id\":");
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).unwrap();
    std::fs::write(&short, gz.finish().unwrap()).unwrap();
    let output = inspect(dir.path(), &["summary", short.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("meta/status.json") && stderr.contains("truncated"),
        "{stderr}"
    );
}

#[test]
fn a_bundle_of_more_entries_than_any_run_writes_is_refused_by_name() {
    // 100,000 empty entries after the two of `base`: gzip packs them into a few megabytes.
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("many.tar.gz");
    let file = std::fs::File::create(&bundle).unwrap();
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(
        file,
        flate2::Compression::fast(),
    ));
    for item in base() {
        let Item::File(name, data) = item else {
            unreachable!()
        };
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_cksum();
        builder
            .append_data(&mut header, name, data.as_slice())
            .unwrap();
    }
    for i in 0..100_000 {
        let mut header = tar::Header::new_gnu();
        header.set_size(0);
        header.set_cksum();
        builder
            .append_data(
                &mut header,
                format!("plugins/hello/results/n1/f{i}"),
                &[][..],
            )
            .unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap();
    for (command, code) in [("summary", 2), ("verify", 1)] {
        let mut run = support::factbuoy();
        run.current_dir(dir.path())
            .args(["inspect", command])
            .arg(&bundle);
        let measured = support::measure::measure(&run);
        assert_eq!(measured.code, code, "{command}: {}", measured.stderr());
        let said = measured.stderr() + &String::from_utf8_lossy(&measured.stdout);
        assert!(
            said.contains(
                "entry plugins/hello/results/n1/f99998 is past the 100000 entries a bundle may have"
            ),
            "{command}: {said}"
        );
        assert_bounded(&measured, command);
    }
}

/// How a tar header states an entry's size.
#[derive(Debug, Clone, Copy)]
enum SizeField {
    /// In its own size field: octal, or GNU's base-256 from 8 GiB on (the tar crate writes
    /// that, and so does factbuoy's bundle writer).
    Header,
    /// In a PAX `size` record before it, with 0 in the ustar field: how GNU tar writes an
    /// entry of 8 GiB or more in its `pax` format.
    Pax,
}

/// A bundle whose `plugins/systemd-logs/results/n1/journal.export` holds `size` zero bytes,
/// indexed truthfully, and (when `bomb`) a setup facts document of `size` spaces, each size
/// stated as `field` says. gzip packs each to about a thousandth of its size, and writing
/// them costs little more than hashing them ([`write_spliced_targz`]).
fn big_bundle(dir: &Path, size: u64, bomb: bool, field: SizeField) -> PathBuf {
    let mut index = Vec::new();
    let mut spans = Vec::new();
    let mut tar = tar::Builder::new(Vec::new());
    for (name, data) in base_files() {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        index.push(json!({"path": name, "size": data.len(), "sha256": sha256(&data)}));
        tar.append_data(&mut header, name, data.as_slice()).unwrap();
    }
    let mut runs = vec![("plugins/systemd-logs/results/n1/journal.export", 0)];
    if bomb {
        runs.push(("plugins/setup/results/n1/ansible_facts.json", b' '));
    }
    for (name, byte) in runs {
        let mut header = match field {
            SizeField::Header => {
                let mut header = tar::Header::new_gnu();
                header.set_size(size);
                header
            }
            SizeField::Pax => {
                let record = size.to_string();
                tar.append_pax_extensions([("size", record.as_bytes())])
                    .unwrap();
                let mut header = tar::Header::new_ustar();
                header.set_size(0);
                header
            }
        };
        header.set_mode(0o644);
        header.set_cksum();
        // The header alone; the content follows as a run, then the padding to a block.
        tar.append_data(&mut header, name, std::io::empty())
            .unwrap();
        spans.push(Span::Bytes(std::mem::take(tar.get_mut())));
        spans.push(Span::Run(byte, size));
        let padding = (512 - size % 512) % 512;
        tar.get_mut().resize(padding as usize, 0);
        let mut hasher = Sha256::new();
        let piece = vec![byte; 1 << 20];
        for _ in 0..size / piece.len() as u64 {
            hasher.update(&piece);
        }
        hasher.update(&piece[..(size % piece.len() as u64) as usize]);
        index.push(json!({"path": name, "size": size, "sha256": hex::encode(hasher.finalize())}));
    }
    let index = serde_json::to_vec(&index).unwrap();
    let mut header = tar::Header::new_gnu();
    header.set_size(index.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    tar.append_data(&mut header, "meta/index.json", index.as_slice())
        .unwrap();
    spans.push(Span::Bytes(tar.into_inner().unwrap()));
    let path = dir.join("big.tar.gz");
    write_spliced_targz(&path, &spans);
    path
}

/// A stretch of a tar stream [`write_spliced_targz`] compresses.
enum Span {
    /// Bytes as they are.
    Bytes(Vec<u8>),
    /// A byte repeated so many times.
    Run(u8, u64),
}

/// Writes `spans` as one gzip member at `path` without compressing a run's gigabytes: a
/// mebibyte of its byte is deflated on its own, flushed to a byte boundary, and that block
/// written again and again. Every deflated piece refers to nothing before it, so any inflater
/// reads the pieces one after another as the whole stream; the CRC-32 of a run is combined
/// from its mebibyte's. gzip and tar read the file as any other `.tar.gz`.
fn write_spliced_targz(path: &Path, spans: &[Span]) {
    const PIECE: u64 = 1 << 20;
    let deflated = |bytes: &[u8]| {
        let mut encoder =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(bytes).unwrap();
        // A sync flush: the piece ends on a byte boundary, and not as the stream's last.
        encoder.flush().unwrap();
        std::mem::take(encoder.get_mut())
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    // gzip's header: deflate, no flags, no time, no extra flags, operating system unknown.
    out.write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff])
        .unwrap();
    let mut crc = flate2::Crc::new();
    for span in spans {
        match span {
            Span::Bytes(bytes) => {
                out.write_all(&deflated(bytes)).unwrap();
                crc.update(bytes);
            }
            Span::Run(byte, length) => {
                let piece = vec![*byte; PIECE as usize];
                let block = deflated(&piece);
                let mut piece_crc = flate2::Crc::new();
                piece_crc.update(&piece);
                for _ in 0..length / PIECE {
                    out.write_all(&block).unwrap();
                    crc.combine(&piece_crc);
                }
                let rest = &piece[..(length % PIECE) as usize];
                out.write_all(&deflated(rest)).unwrap();
                crc.update(rest);
            }
        }
    }
    // The last block (empty, final), then the CRC-32 and the length modulo 2^32.
    out.write_all(
        &flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast())
            .finish()
            .unwrap(),
    )
    .unwrap();
    out.write_all(&crc.sum().to_le_bytes()).unwrap();
    out.write_all(&crc.amount().to_le_bytes()).unwrap();
    out.into_inner().unwrap();
}

/// The most a command may hold while it reads an enormous entry.
const MAX_PEAK_RSS: u64 = 50 * 1024 * 1024;

/// Prints what `what` peaked at, and fails above [`MAX_PEAK_RSS`].
fn assert_bounded(measured: &support::measure::Measured, what: &str) {
    eprintln!(
        "{what}: peak RSS {} MiB in {:?}",
        measured.peak_rss >> 20,
        measured.elapsed
    );
    assert!(
        measured.peak_rss < MAX_PEAK_RSS,
        "{what}: peak RSS {} bytes, more than {MAX_PEAK_RSS}",
        measured.peak_rss
    );
}

#[test]
fn an_enormous_entry_is_streamed_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let size = 256 * 1024 * 1024;
    let bundle = big_bundle(dir.path(), size, false, SizeField::Header);
    let mut command = support::factbuoy();
    command
        .current_dir(dir.path())
        .args(["inspect", "verify", "-o", "json"])
        .arg(&bundle);
    let measured = support::measure::measure(&command);
    assert_eq!(measured.code, 0, "{}", measured.stderr());
    let report = measured.json();
    let read = report["bytes"].as_u64().unwrap();
    assert!(read > size && read < size + 4096, "{report}");
    assert_eq!(report["problems"], json!([]), "{report}");
    let what = format!("verify of a {} MiB entry", size >> 20);
    assert_bounded(&measured, &what);
    let mut command = support::factbuoy();
    command
        .args(["inspect", "summary", "-o", "json"])
        .arg(&bundle);
    let measured = support::measure::measure(&command);
    assert_eq!(measured.code, 0, "{}", measured.stderr());
    assert_eq!(
        measured.json()["sizes"]["by_plugin"],
        json!([{"plugin": "systemd-logs", "bytes": size}])
    );
    assert_bounded(&measured, "summary of a 256 MiB entry");
}

#[test]
fn a_gzip_bomb_of_json_is_refused_before_it_is_read_into_memory() {
    let dir = tempfile::tempdir().unwrap();
    // 200 MiB of spaces as a facts document: a valid JSON prefix, far past the 64 MiB cap.
    let bundle = big_bundle(dir.path(), 200 * 1024 * 1024, true, SizeField::Header);
    for args in [vec!["facts", "n1"], vec!["query", "cpu.cores"]] {
        let mut command = support::factbuoy();
        command
            .current_dir(dir.path())
            .args(["inspect", args[0]])
            .arg(&bundle)
            .arg(args[1]);
        let measured = support::measure::measure(&command);
        assert_eq!(measured.code, 2, "{}", measured.stderr());
        let stderr = measured.stderr();
        assert!(
            stderr.contains("entry plugins/setup/results/n1/ansible_facts.json is 209715200 bytes, more than the 67108864 bytes read into memory"),
            "{stderr}"
        );
        assert_bounded(&measured, &format!("{} of a gzip bomb", args[0]));
    }
}

#[test]
fn an_entry_whose_pax_and_ustar_sizes_disagree_is_refused_by_name() {
    // The ustar header says 5 bytes, the PAX header 12. tar reads 12; a reader of the ustar
    // field alone would check the first 5 against an index made for them, and pass.
    let entry = "plugins/hello/results/n1/greeting.json";
    let content = br#"{"hi":"yo"} "#.to_vec();
    assert_eq!(content.len(), 12);
    let mut files = base_files();
    files.push((entry, content[..5].to_vec()));
    let mut items = base();
    items.push(Item::Pax(
        entry,
        vec![("size", "12".into())],
        5,
        content.clone(),
    ));
    items.push(Item::File("meta/index.json", index_of(&files)));
    let why =
        "headers that disagree on its size: 12 bytes in its PAX header, 5 in its ustar header";
    assert_refused(&items, entry, why);

    // What tar lists and extracts: the PAX size's 12 bytes.
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("two-sizes.tar.gz");
    write_targz(&bundle, &items);
    assert_eq!(tar_sizes(&bundle)[entry], 12);
    let extracted = Command::new("tar")
        .arg("-xzOf")
        .arg(&bundle)
        .arg(entry)
        .output()
        .unwrap();
    assert_eq!(extracted.stdout, content);
    // `verify`'s table names the entry and both sizes, and exits 1.
    let output = inspect(dir.path(), &["verify", bundle.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains(&format!("  - {entry}: entry {entry}: {why}")),
        "{stdout}"
    );
}

/// Each regular file's size as `tar -tvzf` lists it.
fn tar_sizes(bundle: &Path) -> std::collections::BTreeMap<String, u64> {
    let listed = Command::new("tar")
        .arg("-tvzf")
        .arg(bundle)
        .output()
        .unwrap();
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    // `-rw-r--r-- 0/0  8589934593 1970-01-01 00:00 plugins/...`
    text(&listed.stdout)
        .lines()
        .filter(|line| line.starts_with('-'))
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields[5].to_owned(), fields[2].parse().unwrap())
        })
        .collect()
}

/// 8 GiB and a byte: one past the most an ustar header's 11 octal digits hold.
const PAST_OCTAL: u64 = 8 * 1024 * 1024 * 1024 + 1;

#[test]
fn an_entry_of_8_gib_is_read_at_the_size_tar_reads_from_a_pax_or_a_base_256_header() {
    let dir = tempfile::tempdir().unwrap();
    let journal = "plugins/systemd-logs/results/n1/journal.export";
    for field in [SizeField::Pax, SizeField::Header] {
        // About 8 MiB on disk: gzip packs the zeros a thousandfold.
        let bundle = big_bundle(dir.path(), PAST_OCTAL, false, field);
        let b = bundle.to_str().unwrap();
        // GNU tar's own listing of the PAX size (its base-256 reading is compared in
        // factbuoy-bundle's tests on a small entry: a second 8 GiB pass of gzip costs a minute).
        if let SizeField::Pax = field {
            assert_eq!(tar_sizes(&bundle)[journal], PAST_OCTAL);
        }
        let output = inspect(dir.path(), &["verify", b, "-o", "json"]);
        let report = json_of(&output);
        assert_eq!(output.status.code(), Some(0), "{field:?}: {report}");
        assert_eq!(report["problems"], json!([]), "{field:?}");
        let read = report["bytes"].as_u64().unwrap();
        assert!(
            read > PAST_OCTAL && read < PAST_OCTAL + 4096,
            "{field:?}: {report}"
        );
        let output = inspect(dir.path(), &["summary", b, "-o", "json"]);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        assert_eq!(
            json_of(&output)["sizes"]["by_plugin"],
            json!([{"plugin": "systemd-logs", "bytes": PAST_OCTAL}]),
            "{field:?}"
        );
        let output = inspect(dir.path(), &["summary", b]);
        let stdout = text(&output.stdout);
        assert!(
            stdout.contains("by plugin: systemd-logs 8.0 GiB"),
            "{field:?}: {stdout}"
        );
        std::fs::remove_file(&bundle).unwrap();
    }
}

#[test]
fn node_names_that_differ_by_a_zero_width_space_are_told_apart_in_every_table() {
    // `web-<zero-width space>1` looks like `web-1` wherever it reaches a terminal raw.
    let twin = "web-\u{200b}1";
    let shown = r"web-\u{200b}1";
    let nodes = ["web-1", twin];
    let pair = |plugin: &str, node: &str| json!({"plugin": plugin, "node": node, "status": "complete", "result_status": "passed"});
    let status = json!({
        "run_id": "r1",
        "status": "complete",
        "plugins": nodes
            .iter()
            .flat_map(|node| [pair("setup", node), pair("systemd-logs", node)])
            .collect::<Vec<_>>(),
    });
    let mut files: Vec<(&'static str, Vec<u8>)> = vec![
        ("meta/run.json", br#"{"run_id":"r1","plugins":[]}"#.to_vec()),
        ("meta/status.json", serde_json::to_vec(&status).unwrap()),
    ];
    for (i, node) in nodes.into_iter().enumerate() {
        let facts = json!({"ansible_hostname": node});
        let journal = json!({
            "__REALTIME_TIMESTAMP": format!("170000000000000{i}"),
            "SYSLOG_IDENTIFIER": "sshd",
            "_PID": "1",
            "MESSAGE": format!("hello from {node}"),
        });
        let path = |plugin: &str, file: &str| -> &'static str {
            format!("plugins/{plugin}/results/{node}/{file}").leak()
        };
        files.push((
            path("setup", "ansible_facts.json"),
            serde_json::to_vec(&facts).unwrap(),
        ));
        files.push((
            path("systemd-logs", "journal.jsonl"),
            format!("{journal}\n").into_bytes(),
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle_of(dir.path(), "twins.tar.gz", &files);
    let b = bundle.to_str().unwrap();
    let table = |args: &[&str]| {
        let output = inspect(dir.path(), args);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        let stdout = text(&output.stdout);
        assert!(
            !stdout.contains('\u{200b}'),
            "{args:?} printed it raw: {stdout}"
        );
        assert!(stdout.contains(shown), "{args:?}: {stdout}");
        stdout
    };
    let has_line = |stdout: &str, words: &[&str]| {
        assert!(
            stdout
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == words),
            "no line {words:?} in {stdout}"
        );
    };

    let summary = table(&["summary", b]);
    has_line(&summary, &["web-1", "passed", "passed"]);
    has_line(&summary, &[shown, "passed", "passed"]);
    // The columns after the escaped name still line up.
    let column = |prefix: &str, word: &str| {
        let line = summary.lines().find(|l| l.starts_with(prefix)).unwrap();
        line.find(word).unwrap()
    };
    assert_eq!(column("NODE", "setup"), column("web-1 ", "passed"));
    assert_eq!(column("NODE", "setup"), column(shown, "passed"));

    let facts = table(&["facts", b, twin]);
    has_line(&facts, &["setup", "ansible_hostname", shown]);
    let query = table(&["query", b, "ansible_hostname"]);
    has_line(&query, &["web-1", "setup", "web-1"]);
    has_line(&query, &[shown, "setup", shown]);
    let sql = table(&["sql", b, "SELECT node FROM setup ORDER BY node"]);
    has_line(&sql, &["web-1"]);
    has_line(&sql, &[shown]);
    let logs = table(&["logs", b]);
    assert!(
        logs.contains(" web-1 sshd[1]: hello from web-1\n")
            && logs.contains(&format!(" {shown} sshd[1]: hello from {shown}\n")),
        "{logs}"
    );

    // Documents for machines keep the exact names.
    let output = inspect(dir.path(), &["summary", b, "-o", "json"]);
    assert_eq!(json_of(&output)["run"]["nodes"], json!(["web-1", twin]));
    let output = inspect(dir.path(), &["query", b, "ansible_hostname", "-o", "json"]);
    let answers = json_of(&output);
    let named: Vec<&Value> = answers["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| &n["node"])
        .collect();
    assert_eq!(named, [&json!("web-1"), &json!(twin)]);
    let output = inspect(
        dir.path(),
        &[
            "sql",
            b,
            "SELECT node FROM setup ORDER BY node",
            "-o",
            "json",
        ],
    );
    assert_eq!(json_of(&output)["rows"], json!([["web-1"], [twin]]));
    let output = inspect(dir.path(), &["logs", b, "-o", "json"]);
    let logged: Vec<Value> = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["node"].clone())
        .collect();
    assert_eq!(logged, [json!("web-1"), json!(twin)]);
}

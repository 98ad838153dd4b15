//! `factbuoy ansible fact-cache` with real Ansible: `ansible-playbook` with
//! `fact_caching=jsonfile` reads the facts the real factbuoy binary wrote, with `gathering =
//! smart` (no gathering happens) and with `gather_facts: false`, for ansible-core 2.19 (the
//! `s1_` layout) and 2.18 (the plain layout). Bundles with broken nodes lose only those nodes.
//!
//! ansible-core comes from PyPI into cached venvs under target/ (tests/ansible/venv.sh).

use crate::support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use sha2::Digest;

/// The venv with this ansible-core version (made on first use).
fn ansible_venv(version: Option<&str>) -> PathBuf {
    let output = Command::new(support::workspace().join("tests/ansible/venv.sh"))
        .args(version)
        .output()
        .expect("running tests/ansible/venv.sh");
    assert!(
        output.status.success(),
        "could not install ansible-core from PyPI (python3 with venv and network needed): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
}

fn factbuoy(args: &[&str]) -> Output {
    support::factbuoy()
        .args(args)
        .output()
        .expect("running factbuoy")
}

/// `factbuoy ansible fact-cache CACHE --from BUNDLE ARGS`.
fn fact_cache_from(cache: &Path, bundle: &Path, args: &[&str]) -> Output {
    let mut all = vec![
        "ansible",
        "fact-cache",
        cache.to_str().unwrap(),
        "--from",
        bundle.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    factbuoy(&all)
}

/// Runs a playbook against localhost with the jsonfile cache in `cache`; returns its stdout
/// and what the playbook recorded in `seen.json`.
fn run_playbook(venv: &Path, cache: &Path, play: &str) -> (String, Value) {
    let work = tempfile::tempdir().unwrap();
    let playbook = work.path().join("play.yml");
    let seen = work.path().join("seen.json");
    std::fs::write(&playbook, play).unwrap();
    let output = Command::new(venv.join("bin/ansible-playbook"))
        .args(["-i", "localhost,", "-c", "local"])
        .arg("-e")
        .arg(format!(
            "ansible_python_interpreter={}",
            venv.join("bin/python3").display()
        ))
        .arg("-e")
        .arg(format!("seen={}", seen.display()))
        .arg(&playbook)
        .env("ANSIBLE_CACHE_PLUGIN", "jsonfile")
        .env("ANSIBLE_CACHE_PLUGIN_CONNECTION", cache)
        .env("ANSIBLE_GATHERING", "smart")
        .env("ANSIBLE_NOCOLOR", "1")
        .output()
        .expect("running ansible-playbook");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "ansible-playbook failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen = serde_json::from_slice(&std::fs::read(&seen).unwrap()).unwrap();
    (stdout, seen)
}

/// A play that records facts it can only have from the cache.
fn play(gather_facts: Option<bool>) -> String {
    let gather = gather_facts
        .map(|g| format!("  gather_facts: {g}\n"))
        .unwrap_or_default();
    format!(
        r#"- hosts: all
{gather}  tasks:
    - copy:
        dest: "{{{{ seen }}}}"
        content: "{{{{ {{'hostname': ansible_hostname, 'machine_id': ansible_machine_id | default(''), 'kernel': ansible_kernel, 'vcpus': ansible_processor_vcpus, 'count': ansible_facts | length}} | to_json }}}}"
"#
    )
}

fn cached_facts(cache: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(cache.join("localhost")).unwrap()).unwrap()
}

fn check_ansible_reads_the_cache(version: Option<&str>, layout: &str) {
    let venv = ansible_venv(version);
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().join("facts");
    let output = factbuoy(&[
        "ansible",
        "fact-cache",
        cache_dir.to_str().unwrap(),
        "--host",
        "localhost",
        "--layout",
        layout,
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Write the plain layout too, only to read what was cached in the test.
    let mine = cache.path().join("mine");
    factbuoy(&[
        "ansible",
        "fact-cache",
        mine.to_str().unwrap(),
        "--host",
        "localhost",
        "--layout",
        "plain",
    ]);
    let ours = cached_facts(&mine);

    let (stdout, seen) = run_playbook(&venv, &cache_dir, &play(None));
    assert!(
        !stdout.contains("Gathering Facts"),
        "gathering=smart gathered although the cache had the facts:\n{stdout}"
    );
    assert_eq!(seen["hostname"], ours["ansible_hostname"]);
    assert_eq!(seen["kernel"], ours["ansible_kernel"]);
    assert_eq!(seen["vcpus"], ours["ansible_processor_vcpus"]);
    assert!(seen["count"].as_u64().unwrap() > 50, "{seen}");

    let (_, seen) = run_playbook(&venv, &cache_dir, &play(Some(false)));
    assert_eq!(seen["hostname"], ours["ansible_hostname"]);
}

#[test]
fn ansible_core_2_19_reads_the_cache() {
    check_ansible_reads_the_cache(None, "schema1");
}

#[test]
fn ansible_core_2_18_reads_the_plain_layout() {
    check_ansible_reads_the_cache(Some("2.18.12"), "plain");
}

/// A `.tar.gz` with these files at these paths.
fn bundle(path: &Path, files: &[(&str, &[u8])]) {
    let file = std::fs::File::create(path).unwrap();
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (name, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, name, *bytes).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap().flush().unwrap();
}

#[test]
fn a_bundle_gives_one_file_per_node_and_bad_nodes_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let good = |name: &str| json!({"ansible_hostname": name, "module_setup": true}).to_string();
    let (a, b) = (good("node-a"), good("node-b"));
    // 64 KiB that gzip cannot shrink, after node-b: a cut at two thirds of the file falls in it,
    // after both good nodes.
    let mut noise = Vec::new();
    let mut block = [0u8; 32];
    while noise.len() < 64 * 1024 {
        block = sha2::Sha256::digest(block).into();
        noise.extend_from_slice(&block);
    }
    let path = dir.path().join("run.tar.gz");
    bundle(
        &path,
        &[
            ("meta/run.json", b"{}"),
            (
                "plugins/setup/results/node-a/ansible_facts.json",
                a.as_bytes(),
            ),
            (
                "plugins/setup/results/node-b/ansible_facts.json",
                b.as_bytes(),
            ),
            ("plugins/hello/results/node-b/noise.bin", &noise),
            (
                "plugins/setup/results/node-c/ansible_facts.json",
                b"{\"truncated",
            ),
            (
                "plugins/setup/results/node-d/ansible_facts.json",
                b"[1, 2, 3]",
            ),
            ("plugins/hello/results/node-a/greeting.json", b"{}"),
        ],
    );
    let cache = dir.path().join("cache");
    let output = fact_cache_from(&cache, &path, &["-o", "json"]);
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let errors = report["errors"].to_string();
    assert!(
        errors.contains("node-c") && errors.contains("not valid JSON"),
        "{errors}"
    );
    assert!(
        errors.contains("node-d") && errors.contains("not a JSON object of facts"),
        "{errors}"
    );
    for node in ["node-a", "node-b"] {
        let plain: Value =
            serde_json::from_slice(&std::fs::read(cache.join(node)).unwrap()).unwrap();
        assert_eq!(plain["ansible_hostname"], node);
        assert_eq!(plain["_ansible_facts_gathered"], true);
        assert!(cache.join(format!("s1_{node}")).exists());
    }
    assert!(!cache.join("node-c").exists() && !cache.join("node-d").exists());

    // A truncated bundle: the nodes before the cut are kept, the cut is an error.
    let bytes = std::fs::read(&path).unwrap();
    let cut = dir.path().join("cut.tar.gz");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let kept = dir.path().join("cut-cache");
    let output = fact_cache_from(&kept, &cut, &[]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("corrupt or truncated after the nodes read so far"),
        "{stderr}"
    );
    for node in ["node-a", "node-b"] {
        let plain: Value = serde_json::from_slice(&std::fs::read(kept.join(node)).unwrap())
            .unwrap_or_else(|e| panic!("{node} before the cut was not kept: {e}"));
        assert_eq!(plain["ansible_hostname"], node);
    }

    // Not a bundle at all.
    let output = fact_cache_from(&dir.path().join("x"), Path::new("/etc/hostname"), &[]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not a .tar.gz bundle"), "{stderr}");
}

/// An extracted bundle whose facts file for one node is a link out of it (to facts a hostile
/// agent could not have sent): that node is refused by name and gets no cache file; the
/// others are written.
#[test]
fn a_facts_file_that_is_a_link_out_is_refused_for_its_node_only() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("bundle/plugins/setup/results");
    for node in ["node-a", "node-b"] {
        std::fs::create_dir_all(results.join(node)).unwrap();
    }
    let facts = |name: &str| json!({"ansible_hostname": name, "module_setup": true}).to_string();
    std::fs::write(results.join("node-a/ansible_facts.json"), facts("node-a")).unwrap();
    let outside = dir.path().join("outside.json");
    std::fs::write(&outside, facts("not-from-the-run")).unwrap();
    std::os::unix::fs::symlink(&outside, results.join("node-b/ansible_facts.json")).unwrap();
    let cache = dir.path().join("cache");
    let output = fact_cache_from(&cache, &dir.path().join("bundle"), &["-o", "json"]);
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let errors = report["errors"].to_string();
    assert!(
        errors.contains("node-b")
            && errors.contains("plugins/setup/results/node-b/ansible_facts.json: a symbolic link"),
        "{errors}"
    );
    assert!(cache.join("node-a").exists());
    assert!(!cache.join("node-b").exists() && !cache.join("s1_node-b").exists());
}

/// A node's facts document as big as a bundle may carry (a hostile agent's), made of small
/// values: parsed into a tree it would take about 16 times its size. The cache files are
/// transcoded from it entry by entry, so the peak RSS stays near the document's own size.
#[test]
fn a_huge_facts_document_is_transcoded_not_parsed_into_memory() {
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("bundle/plugins/setup/results/node-a");
    std::fs::create_dir_all(&node).unwrap();
    let document = {
        let mut file = std::io::BufWriter::new(
            std::fs::File::create(node.join("ansible_facts.json")).unwrap(),
        );
        write!(file, r#"{{"ansible_nodename": "node-a""#).unwrap();
        // 24 facts of 1 MiB, each an array of 1-digit numbers.
        let array = format!("[{}0]", "1,".repeat(512 * 1024 - 1));
        for i in 0..24 {
            write!(file, r#", "fact_{i}": {array}"#).unwrap();
        }
        write!(file, "}}").unwrap();
        file.flush().unwrap();
        24 << 20
    };
    let cache = dir.path().join("cache");
    let mut export = Command::new(env!("CARGO_BIN_EXE_factbuoy"));
    export
        .args(["ansible", "fact-cache"])
        .arg(&cache)
        .arg("--from")
        .arg(dir.path().join("bundle"));
    let measured = support::measure::measure(&export);
    assert_eq!(measured.code, 0, "{}", measured.stderr());
    let peak_kib = measured.peak_rss >> 10;
    let bound = document + (64 << 20);
    assert!(
        peak_kib * 1024 < bound,
        "peak RSS {} MiB, above the document's {} MiB + 64 MiB",
        peak_kib >> 10,
        document >> 20
    );
    let plain: Value = serde_json::from_slice(&std::fs::read(cache.join("node-a")).unwrap())
        .expect("the plain cache file is JSON");
    assert_eq!(plain["_ansible_facts_gathered"], true);
    assert_eq!(plain["fact_23"].as_array().unwrap().len(), 512 * 1024);
    eprintln!(
        "peak RSS {} MiB for a {} MiB document",
        peak_kib >> 10,
        document >> 20
    );
}

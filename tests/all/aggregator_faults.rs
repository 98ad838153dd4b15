//! The aggregator under faults and hostile pacing, end to end: the real `factbuoy` binary
//! serving a run, curl and `openssl s_client` as real TLS clients, a small tmpfs that fills up,
//! and SIGKILL at many points of a commit and of packaging. What docs/protocol.md promises
//! after 201, after a 5xx and after a crash is checked here.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::aggregator::{
    Aggregator, Answer, content_digest, curl, manifest_json, run, s_client, sha256,
};

/// A result of `hello` for one node: artifact names and contents.
struct Result_ {
    files: Vec<(String, Vec<u8>)>,
}

impl Result_ {
    fn new(count: usize, tag: &str) -> Self {
        Result_ {
            files: (0..count)
                .map(|i| {
                    (
                        format!("d{}/f{i}.txt", i % 16),
                        format!("{tag} {i}").into_bytes(),
                    )
                })
                .collect(),
        }
    }

    /// Its manifest, with a report.
    fn manifest(&self, outcome: &str) -> Vec<u8> {
        let files: Vec<(&str, &[u8])> = self
            .files
            .iter()
            .map(|(name, bytes)| (name.as_str(), bytes.as_slice()))
            .collect();
        let mut manifest = manifest_json(outcome, &files);
        manifest["report"] = serde_json::json!({"outcome": outcome, "files": self.files.len()});
        serde_json::to_vec(&manifest).unwrap()
    }
}

/// Uploads every file of `result` for `node` over one kept-alive curl connection; returns the
/// HTTP statuses.
fn upload(aggregator: &Aggregator, node: &str, result: &Result_) -> Vec<u16> {
    let credentials = aggregator.issue(&format!("agent:{node}"));
    let scratch = tempfile::tempdir().unwrap();
    let mut config = String::new();
    for (i, (name, bytes)) in result.files.iter().enumerate() {
        let file = scratch.path().join(i.to_string());
        std::fs::write(&file, bytes).unwrap();
        if i > 0 {
            config.push_str("next\n");
        }
        config.push_str(&format!(
            "url = \"https://{}/api/v1/results/by-node/{node}/hello/files/{name}\"\n\
             upload-file = \"{}\"\nheader = \"content-digest: {}\"\noutput = \"/dev/null\"\n\
             write-out = \"%{{http_code}}\\n\"\nsilent\ncacert = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n",
            aggregator.agent,
            file.display(),
            content_digest(bytes),
            credentials.join("ca.pem").display(),
            credentials.join("client.pem").display(),
            credentials.join("client.key").display(),
        ));
    }
    std::fs::write(scratch.path().join("config"), config).unwrap();
    let output = Command::new("curl")
        .arg("--config")
        .arg(scratch.path().join("config"))
        .output()
        .unwrap();
    let statuses: Vec<u16> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| l.trim().parse().unwrap_or(0))
        .collect();
    assert_eq!(
        statuses.len(),
        result.files.len(),
        "curl stopped early: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    statuses
}

fn commit(aggregator: &Aggregator, node: &str, manifest: &[u8]) -> Answer {
    let credentials = aggregator.issue(&format!("agent:{node}"));
    curl(
        &credentials,
        "PUT",
        &format!(
            "https://{}/api/v1/results/by-node/{node}/hello",
            aggregator.agent
        ),
        Some(manifest),
        &[],
    )
}

/// Every file below `dir`, relative, with its contents.
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(current) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                files.push((relative, std::fs::read(&path).unwrap()));
            }
        }
    }
    files.sort();
    files
}

/// Checks that the pair (hello, `node`) on disk is what its commit record says, file for file
/// and digest for digest, or has no result at all. Returns the recorded files' digests.
fn check_intact(run_dir: &Path, node: &str) -> Option<(String, Vec<(String, String)>)> {
    let record = run_dir.join(format!("commits/hello/{node}.json"));
    let results = run_dir.join(format!("results/plugins/hello/results/{node}"));
    let errors = run_dir.join(format!("results/plugins/hello/errors/{node}"));
    let Ok(bytes) = std::fs::read(&record) else {
        assert!(
            !results.exists() && !errors.exists(),
            "a result without a record for {node}"
        );
        return None;
    };
    let record: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let committed = &record["committed"];
    let outcome = committed["outcome"].as_str().unwrap().to_owned();
    let (here, other) = if outcome == "succeeded" {
        (&results, &errors)
    } else {
        (&errors, &results)
    };
    assert!(!other.exists(), "{node} has both a result and an error");
    let mut expected: Vec<(String, String)> = committed["files"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, v)| (name.clone(), v[1].as_str().unwrap().to_owned()))
        .collect();
    let mut found: Vec<(String, String)> = tree(here)
        .into_iter()
        .map(|(name, bytes)| (name, sha256(&bytes)))
        .filter(|(name, _)| !(outcome == "failed" && name == "error.json"))
        .collect();
    expected.sort();
    found.sort();
    assert_eq!(
        found.len(),
        expected.len(),
        "{node}: {} files on disk, the record lists {}",
        found.len(),
        expected.len()
    );
    assert_eq!(found, expected, "{node}: the files differ from the record");
    if outcome == "failed" {
        assert!(here.join("error.json").exists(), "{node}: no error.json");
    }
    // Nothing half-done is left beside it.
    let staging = run_dir.join(format!("staging/hello/{node}"));
    if let Ok(entries) = std::fs::read_dir(&staging) {
        for entry in entries {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(
                !name.starts_with("commit-") && !name.starts_with("report-"),
                "{node}: {name} left in staging"
            );
        }
    }
    Some((outcome, expected))
}

fn digests(result: &Result_) -> Vec<(String, String)> {
    let mut digests: Vec<(String, String)> = result
        .files
        .iter()
        .map(|(name, bytes)| (name.clone(), sha256(bytes)))
        .collect();
    digests.sort();
    digests
}

/// Checks the bundle the status names: its index matches its entries, and each node's result
/// in it is what the run directory's record says.
fn check_bundle(aggregator: &Aggregator, status: &serde_json::Value) {
    let name = status["tar_info"]["name"].as_str().unwrap();
    let path = aggregator.out_dir().join(name);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(sha256(&bytes), status["tar_info"]["sha256"]);
    let entries = support::tar_gz_files(&bytes);
    let index: Vec<serde_json::Value> =
        serde_json::from_slice(&entries["meta/index.json"]).unwrap();
    assert_eq!(index.len() + 1, entries.len());
    for item in &index {
        let content = &entries[item["path"].as_str().unwrap()];
        assert_eq!(sha256(content), item["sha256"], "{item}");
    }
    let leftovers: Vec<String> = std::fs::read_dir(aggregator.out_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != name)
        .collect();
    assert!(
        leftovers.is_empty(),
        "left beside the bundle: {leftovers:?}"
    );
}

/// `size` bytes that do not compress.
fn noise(size: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; size];
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for byte in bytes.iter_mut() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        *byte = state as u8;
    }
    bytes
}

/// A tmpfs of `size` mounted at `at` for as long as it lives.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Self {
        std::fs::create_dir_all(at).unwrap();
        run(Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at));
        Tmpfs(at.to_owned())
    }

    /// Fills it up; returns the filler file.
    fn fill(&self) -> PathBuf {
        let filler = self.0.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let block = vec![0xA5u8; 64 << 10];
        loop {
            if file.write_all(&block).is_err() {
                break;
            }
        }
        // The last partial pages too.
        while file.write_all(&[1]).is_ok() {}
        let _ = file.sync_all();
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_answers_507_keeps_the_upload_and_ends_the_run_with_a_clear_error() {
    let scratch = tempfile::tempdir().unwrap();
    let disk = Tmpfs::mount(&scratch.path().join("disk"), "16m");
    let aggregator = Aggregator::create_in(&disk.0.join("x"), &["a", "b"], &["--lost-after", "8s"]);
    let result = Result_::new(20, "full");
    assert!(upload(&aggregator, "a", &result).iter().all(|s| *s == 201));

    let filler = disk.fill();
    // An upload on a full disk: 507, and nothing half-written stays.
    let credentials = aggregator.issue("agent:a");
    let big = vec![7u8; 16 << 10];
    let answer = curl(
        &credentials,
        "PUT",
        &format!(
            "https://{}/api/v1/results/by-node/a/hello/files/big.bin",
            aggregator.agent
        ),
        Some(&big),
        &[format!("content-digest: {}", content_digest(&big))],
    );
    assert_eq!(answer.status, 507, "{}", answer.text());
    assert_eq!(
        std::fs::read_dir(aggregator.run_dir().join("staging/.incoming"))
            .unwrap()
            .count(),
        0
    );
    // A commit on a full disk: 507, nothing committed, the staged files kept; again and again.
    let manifest = result.manifest("succeeded");
    for _ in 0..2 {
        let answer = commit(&aggregator, "a", &manifest);
        assert_eq!(answer.status, 507, "{}", answer.text());
        assert!(
            answer.text().contains("disk") || answer.text().contains("space"),
            "{}",
            answer.text()
        );
        assert!(check_intact(&aggregator.run_dir(), "a").is_none());
        let staged = std::fs::read_dir(aggregator.run_dir().join("staging/hello/a"))
            .unwrap()
            .count();
        assert_eq!(staged, result.files.len(), "the staged files were not kept");
    }
    // Space again: the same commit is accepted, and the result is whole.
    std::fs::remove_file(&filler).unwrap();
    let answer = commit(&aggregator, "a", &manifest);
    assert_eq!(answer.status, 201, "{}", answer.text());
    let (outcome, files) = check_intact(&aggregator.run_dir(), "a").unwrap();
    assert_eq!((outcome.as_str(), files), ("succeeded", digests(&result)));

    // Full again until the end: node b is lost, its error result cannot be written, and the
    // run still ends, failed, saying why.
    let _filler = disk.fill();
    let status = aggregator.wait_for_served("failed", Duration::from_secs(60));
    let error = status["error"].as_str().unwrap_or_default();
    assert!(error.contains("full"), "{status}");
    let (_, files) = check_intact(&aggregator.run_dir(), "a").unwrap();
    assert_eq!(files, digests(&result));
    assert!(check_intact(&aggregator.run_dir(), "b").is_none());
}

#[test]
fn a_bundle_that_does_not_fit_fails_the_run_and_leaves_no_partial() {
    let scratch = tempfile::tempdir().unwrap();
    let disk = Tmpfs::mount(&scratch.path().join("disk"), "12m");
    let aggregator = Aggregator::create_in(&disk.0.join("x"), &["a"], &[]);
    // Incompressible: the bundle needs as much room again as the result.
    let result = Result_ {
        files: vec![("noise.bin".to_owned(), noise(7 << 20))],
    };
    assert_eq!(upload(&aggregator, "a", &result), [201]);
    assert_eq!(
        commit(&aggregator, "a", &result.manifest("succeeded")).status,
        201
    );
    let status = aggregator.wait_for_served("failed", Duration::from_secs(60));
    let error = status["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("bundle") && error.contains("full"),
        "{status}"
    );
    let out: Vec<_> = std::fs::read_dir(aggregator.out_dir())
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(out.is_empty(), "left in the bundle folder: {out:?}");
    let (_, files) = check_intact(&aggregator.run_dir(), "a").unwrap();
    assert_eq!(files, digests(&result));
}

#[test]
fn sigkill_at_any_point_of_a_commit_or_of_packaging_tears_no_result() {
    let scratch = tempfile::tempdir().unwrap();
    let mut aggregator = Aggregator::create_in(&scratch.path().join("x"), &["a", "b"], &[]);
    const FILES: usize = 200;
    const KILLS: u32 = 8;
    // How long a replacing commit takes here, to spread the kills over it.
    let first = Result_::new(FILES, "first");
    assert!(upload(&aggregator, "a", &first).iter().all(|s| *s == 201));
    assert_eq!(
        commit(&aggregator, "a", &first.manifest("failed")).status,
        201
    );
    let second = Result_::new(FILES + 1, "second");
    assert!(upload(&aggregator, "a", &second).iter().all(|s| *s == 201));
    let started = Instant::now();
    assert_eq!(
        commit(&aggregator, "a", &second.manifest("failed")).status,
        201
    );
    let span = started.elapsed();
    let mut current = second;
    let mut took_effect = 0;
    for kill in 0..KILLS {
        // Replace the failed result with another, and kill the aggregator partway.
        let next = Result_::new(FILES + 2 + kill as usize, &format!("attempt {kill}"));
        assert!(upload(&aggregator, "a", &next).iter().all(|s| *s == 201));
        let manifest = next.manifest("failed");
        let credentials = aggregator.issue("agent:a");
        let body = scratch.path().join("manifest.json");
        std::fs::write(&body, &manifest).unwrap();
        let mut committing = Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-X", "PUT", "--data-binary"])
            .arg(format!("@{}", body.display()))
            .arg("--cacert")
            .arg(credentials.join("ca.pem"))
            .arg("--cert")
            .arg(credentials.join("client.pem"))
            .arg("--key")
            .arg(credentials.join("client.key"))
            .arg(format!(
                "https://{}/api/v1/results/by-node/a/hello",
                aggregator.agent
            ))
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(span * 2 * kill / KILLS + Duration::from_millis(15));
        aggregator.kill();
        let _ = committing.wait();
        aggregator.serve();
        // After the restart: either the new result whole, or the old one whole and the new
        // one retryable.
        let (outcome, files) = check_intact(&aggregator.run_dir(), "a").unwrap();
        assert_eq!(outcome, "failed");
        if files == digests(&next) {
            took_effect += 1;
        } else {
            assert_eq!(files, digests(&current), "kill {kill}: neither result");
        }
        // The retry of a commit that took effect is answered as done; one that did not is
        // accepted now.
        let answer = commit(&aggregator, "a", &manifest);
        assert_eq!(answer.status, 201, "kill {kill}: {}", answer.text());
        let (_, files) = check_intact(&aggregator.run_dir(), "a").unwrap();
        assert_eq!(files, digests(&next));
        current = next;
    }
    eprintln!("{took_effect} of {KILLS} killed commits had taken effect (span {span:?})");

    // The last results complete the run (b's is large, so packaging takes a while); kill
    // packaging at points spread over it.
    let last = Result_::new(FILES, "last");
    let large = Result_ {
        files: vec![("large.bin".to_owned(), noise(1 << 20))],
    };
    assert!(upload(&aggregator, "a", &last).iter().all(|s| *s == 201));
    assert!(upload(&aggregator, "b", &large).iter().all(|s| *s == 201));
    assert_eq!(
        commit(&aggregator, "a", &last.manifest("succeeded")).status,
        201
    );
    let started = Instant::now();
    assert_eq!(
        commit(&aggregator, "b", &large.manifest("succeeded")).status,
        201
    );
    aggregator.wait_for_served("complete", Duration::from_secs(60));
    let span = started.elapsed();
    // Packaging again from the start: the run is set back to post-processing as a stop
    // before its end would leave it.
    let mut partials = 0;
    for kill in 0..KILLS {
        aggregator.kill();
        let state_file = aggregator.run_dir().join("state.json");
        let mut state: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&state_file).unwrap()).unwrap();
        if kill == 0 {
            state["status"] = "post-processing".into();
            state.as_object_mut().unwrap().remove("tar_info");
            state.as_object_mut().unwrap().remove("finished");
            std::fs::write(&state_file, serde_json::to_vec(&state).unwrap()).unwrap();
        }
        aggregator.serve();
        std::thread::sleep(span * kill / KILLS);
        aggregator.kill();
        partials += std::fs::read_dir(aggregator.out_dir())
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().ends_with(".partial")
            })
            .count();
        aggregator.serve();
    }
    eprintln!("{partials} kills left a .partial (packaging took {span:?})");
    assert!(partials > 0, "no kill landed while the bundle was written");
    let status = aggregator.wait_for_served("complete", Duration::from_secs(60));
    check_bundle(&aggregator, &status);
    for (node, result) in [("a", &last), ("b", &large)] {
        let (outcome, files) = check_intact(&aggregator.run_dir(), node).unwrap();
        assert_eq!((outcome.as_str(), files), ("succeeded", digests(result)));
    }
    assert!(
        std::fs::read_dir(aggregator.run_dir().join("staging/.trash"))
            .unwrap()
            .next()
            .is_none()
    );
}

#[test]
fn a_huge_commit_blocks_no_other_request() {
    let scratch = tempfile::tempdir().unwrap();
    // Node c keeps the run open after the others have results.
    let aggregator = Aggregator::create_in(&scratch.path().join("x"), &["a", "b", "c"], &[]);
    // An agent that uploaded 8,000 small files (the staging area as the uploads leave it,
    // written directly: uploading them one by one through this 2-core machine's debug build
    // takes minutes). The server reads it back when it starts again.
    let mut aggregator = aggregator;
    aggregator.kill();
    let huge = Result_::new(8_000, "huge");
    let staging = aggregator.run_dir().join("staging/hello/a");
    std::fs::create_dir_all(&staging).unwrap();
    for (name, bytes) in &huge.files {
        let digest = sha256(bytes);
        let staged = format!("{}.{}.{digest}", sha256(name.as_bytes()), bytes.len());
        std::fs::write(staging.join(staged), bytes).unwrap();
    }
    aggregator.serve();
    let manifest = huge.manifest("succeeded");
    let committing = {
        let credentials = aggregator.issue("agent:a");
        let url = format!(
            "https://{}/api/v1/results/by-node/a/hello",
            aggregator.agent
        );
        std::thread::spawn(move || {
            let started = Instant::now();
            let answer = curl(&credentials, "PUT", &url, Some(&manifest), &[]);
            (answer.status, answer.text(), started.elapsed())
        })
    };
    // While it commits, the operator's status and another agent's upload answer at once.
    let operator = aggregator.operator_credentials();
    let agent_b = aggregator.issue("agent:b");
    let mut probes = Vec::new();
    let mut i = 0;
    while !committing.is_finished() {
        let body = format!("probe {i}").into_bytes();
        let started = Instant::now();
        let during = !committing.is_finished();
        let status = curl(
            &operator,
            "GET",
            &format!("https://{}/status", aggregator.operator),
            None,
            &[],
        )
        .status;
        let upload = curl(
            &agent_b,
            "PUT",
            &format!(
                "https://{}/api/v1/results/by-node/b/hello/files/p{i}.txt",
                aggregator.agent
            ),
            Some(&body),
            &[format!("content-digest: {}", content_digest(&body))],
        )
        .status;
        // Another pair's commit (a failed result, which later uploads may still replace).
        let other_commit = if i == 0 {
            let manifest = Result_ {
                files: vec![("p0.txt".to_owned(), body.clone())],
            }
            .manifest("failed");
            commit(&aggregator, "b", &manifest).status
        } else {
            201
        };
        probes.push((status, upload, other_commit, started.elapsed(), during));
        i += 1;
    }
    let (status, body, took) = committing.join().unwrap();
    assert_eq!(status, 201, "{body}");
    eprintln!("the commit took {took:?}; probes: {probes:?}");
    let during: Vec<_> = probes.iter().filter(|p| p.4).collect();
    assert!(
        !during.is_empty(),
        "the commit ({took:?}) was too quick to probe: {probes:?}"
    );
    for (status, upload, other_commit, elapsed, _) in during {
        assert_eq!((*status, *upload, *other_commit), (200, 201, 201));
        assert!(
            *elapsed < Duration::from_millis(1500),
            "a status, an upload (and a commit) took {elapsed:?} during the commit ({took:?})"
        );
    }
    let (_, files) = check_intact(&aggregator.run_dir(), "a").unwrap();
    assert_eq!(files, digests(&huge));
}

/// Sends `head` and then `body` one byte a second through `openssl s_client`, and returns what
/// came back and when.
fn trickle(address: &str, credentials: &Path, head: &str, body: &[u8]) -> (String, Duration) {
    let mut child = s_client(address, credentials, &[]);
    let started = Instant::now();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        (text, started.elapsed())
    });
    let _ = stdin.write_all(head.as_bytes());
    for byte in body {
        std::thread::sleep(Duration::from_secs(1));
        if reader.is_finished()
            || stdin
                .write_all(&[*byte])
                .and_then(|()| stdin.flush())
                .is_err()
        {
            break;
        }
    }
    drop(stdin);
    let answer = reader.join().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    answer
}

#[test]
fn progress_and_commit_bodies_sent_a_byte_a_second_are_cut_off() {
    let scratch = tempfile::tempdir().unwrap();
    let aggregator = Aggregator::create_in(
        &scratch.path().join("x"),
        &["a"],
        &["--upload-grace", "2s", "--max-connections", "2"],
    );
    let agent = aggregator.issue("agent:a");
    let progress = br#"{"plugin":"hello","node":"a","msg":"slowly"}"#;
    let manifest = br#"{"outcome":"succeeded","files":[],"plugin_version":"0.1.0"}"#;
    let requests = [
        ("POST /api/v1/progress/by-node/a/hello", progress.as_slice()),
        ("PUT /api/v1/results/by-node/a/hello", manifest.as_slice()),
    ];
    // Both at once, holding both connection slots.
    let slow: Vec<_> = requests
        .iter()
        .map(|(line, body)| {
            let head = format!(
                "{line} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n",
                body.len()
            );
            let (agent, body, address) = (agent.clone(), body.to_vec(), aggregator.agent.clone());
            std::thread::spawn(move || trickle(&address, &agent, &head, &body))
        })
        .collect();
    for thread in slow {
        let (answer, elapsed) = thread.join().unwrap();
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("too slow"), "{answer}");
        assert!(elapsed < Duration::from_secs(8), "held for {elapsed:?}");
    }
    // The slots are free again.
    let answer = curl(
        &agent,
        "GET",
        &format!("https://{}/api/v1/plan/by-node/a", aggregator.agent),
        None,
        &[],
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
}

#[test]
fn silent_connections_cannot_starve_agents_or_exhaust_descriptors() {
    let scratch = tempfile::tempdir().unwrap();
    // A hard limit of 256 open files, and the default cap of 10,000 connections.
    let aggregator = Aggregator::create_limited(
        &scratch.path().join("x"),
        &["a"],
        &[],
        Some("ulimit -n 256"),
    );
    let agent = aggregator.issue("agent:a");
    let plan = format!("https://{}/api/v1/plan/by-node/a", aggregator.agent);
    // 600 connections that never say a word: more than the descriptors the server has.
    let silent: Vec<TcpStream> = (0..600)
        .map(|_| TcpStream::connect(&aggregator.agent).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..3 {
        let started = Instant::now();
        let answer = curl(&agent, "GET", &plan, None, &[]);
        assert_eq!(
            answer.status,
            200,
            "an agent was starved: {}",
            answer.text()
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
    assert_eq!(aggregator.served_status()["status"], "running");
    drop(silent);
    let log = aggregator.log();
    assert!(
        log.contains("instead of 10000") && log.contains("open 256 files"),
        "no warning about the lowered cap: {log}"
    );
}

#[test]
fn the_soft_descriptor_limit_is_raised_to_the_hard_limit() {
    let scratch = tempfile::tempdir().unwrap();
    let aggregator = Aggregator::create_limited(
        &scratch.path().join("x"),
        &["a"],
        &[],
        Some("ulimit -S -n 256"),
    );
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", aggregator.pid())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[3], fields[4], "{line}");
    assert_ne!(fields[3], "256", "{line}");
}

//! Collection runs end to end: the real `factbuoy` binary as aggregator and agents, with curl
//! and `openssl s_client` as independent clients for everything a hostile or broken client might
//! send. Real TLS, real HTTP over loopback.

use crate::support;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::aggregator::{
    Aggregator, content_digest, curl, curl_as, manifest, run, s_client, sha256,
};
use crate::support::factbuoy;

#[test]
fn the_handshake_needs_a_certificate_from_this_runs_ca() {
    let aggregator = Aggregator::create(&["a"], &[]);
    let own = aggregator.issue("agent:a");
    let ca = own.join("ca.pem");
    let url = format!("https://{}/api/v1/plan/by-node/a", aggregator.agent);
    assert_eq!(curl_as(&ca, Some(&own), "GET", &url, None, &[]).status, 200);

    let without = curl_as(&ca, None, "GET", &url, None, &[]);
    assert_eq!(without.status, 0);
    assert!(
        without.stderr.contains("certificate required"),
        "{}",
        without.stderr
    );

    let elsewhere = Aggregator::create(&["a"], &[]);
    let foreign = elsewhere.issue("agent:a");
    let refused = curl_as(&ca, Some(&foreign), "GET", &url, None, &[]);
    assert_eq!(refused.status, 0);
    assert!(refused.stderr.contains("unknown ca"), "{}", refused.stderr);

    // openssl as a second, independent client.
    let output = Command::new("openssl")
        .args(["s_client", "-connect", &aggregator.agent, "-CAfile"])
        .arg(&ca)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(b"GET /api/v1/plan/by-node/a HTTP/1.1\r\nHost: x\r\n\r\n")?;
            // Stay connected long enough to read the server's alert.
            std::thread::sleep(Duration::from_secs(1));
            drop(stdin);
            child.wait_with_output()
        })
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(text.contains("certificate required"), "{text}");
    assert!(!text.contains("HTTP/1.1 200"), "{text}");
}

#[test]
fn each_certificate_may_do_only_its_own_part() {
    let aggregator = Aggregator::create(&["a", "b"], &[]);
    let agent_a = aggregator.issue("agent:a");
    let operator = aggregator.operator_credentials();
    let ca = agent_a.join("ca.pem");
    let body = b"{}";

    // Node a's certificate cannot speak for node b.
    let answer = aggregator.put(
        &agent_a,
        "/api/v1/results/by-node/b/hello/files/x.json",
        body,
    );
    assert_eq!(answer.status, 403, "{}", answer.text());
    assert!(
        answer
            .text()
            .contains("the agent for node \\\"a\\\" may not use"),
        "{}",
        answer.text()
    );
    let url = format!("https://{}/api/v1/heartbeat/by-node/b", aggregator.agent);
    assert_eq!(curl(&agent_a, "POST", &url, None, &[]).status, 403);

    // An agent cannot read status or download the bundle.
    for path in ["/status", "/bundle", "/metrics"] {
        let url = format!("https://{}{path}", aggregator.operator);
        assert_eq!(curl(&agent_a, "GET", &url, None, &[]).status, 403, "{path}");
    }
    // An operator cannot upload.
    let answer = aggregator.put(
        &operator,
        "/api/v1/results/by-node/a/hello/files/x.json",
        body,
    );
    assert_eq!(answer.status, 403);
    // A global uploader cannot upload for a node, and this run expects no global result.
    let global = aggregator.issue("global:cluster");
    let answer = aggregator.put(
        &global,
        "/api/v1/results/by-node/a/hello/files/x.json",
        body,
    );
    assert_eq!(answer.status, 403);
    let answer = aggregator.put(&global, "/api/v1/results/global/hello/files/x.json", body);
    assert_eq!(answer.status, 403);
    assert!(
        answer.text().contains("expects no result"),
        "{}",
        answer.text()
    );
    // An unexpected plugin.
    let answer = aggregator.put(
        &agent_a,
        "/api/v1/results/by-node/a/other/files/x.json",
        body,
    );
    assert_eq!(answer.status, 403);
    // The operator reads the status.
    let status = curl_as(
        &ca,
        Some(&operator),
        "GET",
        &format!("https://{}/status", aggregator.operator),
        None,
        &[],
    );
    assert_eq!(status.status, 200);
    assert!(
        status.text().contains("\"status\":\"running\""),
        "{}",
        status.text()
    );
}

#[test]
fn uploads_are_checked_before_anything_is_stored() {
    let aggregator = Aggregator::create(&["a"], &["--max-file", "1KiB"]);
    let agent = aggregator.issue("agent:a");
    let staged = aggregator.run_dir().join("staging/hello/a");
    let path = "/api/v1/results/by-node/a/hello/files/facts.json";
    let facts = br#"{"ok":true}"#;

    let url = format!("https://{}{path}", aggregator.agent);
    let mismatch = curl(
        &agent,
        "PUT",
        &url,
        Some(facts),
        &[format!(
            "content-digest: {}",
            content_digest(b"something else")
        )],
    );
    assert_eq!(mismatch.status, 400);
    assert!(
        mismatch.text().contains("nothing was stored"),
        "{}",
        mismatch.text()
    );
    assert!(!staged.exists());
    let no_digest = curl(&agent, "PUT", &url, Some(facts), &[]);
    assert_eq!(no_digest.status, 400);
    assert!(no_digest.text().contains("Content-Digest"));

    for traversal in [
        "/api/v1/results/by-node/a/hello/files/..%2F..%2Fescape",
        "/api/v1/results/by-node/a/hello/files/%2Fetc%2Fpasswd",
        "/api/v1/results/by-node/a/hello/files/a%5Cb",
        "/api/v1/results/by-node/..%2Fa/hello/files/x",
    ] {
        let answer = aggregator.put(&agent, traversal, facts);
        assert_eq!(answer.status, 400, "{traversal}: {}", answer.text());
    }

    let big = vec![b'x'; 2048];
    let too_large = aggregator.put(&agent, path, &big);
    assert_eq!(too_large.status, 413);
    assert!(!staged.exists());

    assert_eq!(aggregator.put(&agent, path, facts).status, 201);
    let commit_url = format!(
        "https://{}/api/v1/results/by-node/a/hello",
        aggregator.agent
    );
    let incomplete = manifest(
        "succeeded",
        &[("facts.json", facts), ("missing.json", b"?")],
    );
    let answer = curl(&agent, "PUT", &commit_url, Some(&incomplete), &[]);
    assert_eq!(answer.status, 400);
    assert!(answer.text().contains("missing.json"), "{}", answer.text());
    let complete = manifest("succeeded", &[("facts.json", facts)]);
    assert_eq!(
        curl(&agent, "PUT", &commit_url, Some(&complete), &[]).status,
        201
    );

    // A true duplicate, of the commit or of a file, is refused.
    assert_eq!(
        curl(&agent, "PUT", &commit_url, Some(&complete), &[]).status,
        409
    );
    assert_eq!(aggregator.put(&agent, path, facts).status, 409);
    let stored = aggregator
        .run_dir()
        .join("results/plugins/hello/results/a/facts.json");
    assert_eq!(std::fs::read(stored).unwrap(), facts);
}

/// Sends a request through `openssl s_client`, writing `head`, then `body` one piece at a time
/// with `pause` between pieces, and returns what came back.
fn raw_request(
    aggregator: &Aggregator,
    credentials: &Path,
    head: &str,
    pieces: &[&[u8]],
    pause: Duration,
) -> (String, Duration) {
    raw_request_with(aggregator, credentials, head, pieces, pause, &[])
}

/// [`raw_request`] with more `openssl s_client` options.
fn raw_request_with(
    aggregator: &Aggregator,
    credentials: &Path,
    head: &str,
    pieces: &[&[u8]],
    pause: Duration,
    options: &[&str],
) -> (String, Duration) {
    let mut child = s_client(&aggregator.agent, credentials, options);
    let started = Instant::now();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let _ = stdin.write_all(head.as_bytes());
    for piece in pieces {
        std::thread::sleep(pause);
        if stdin.write_all(piece).and_then(|()| stdin.flush()).is_err() {
            break;
        }
    }
    drop(stdin);
    let text = reader.join().unwrap();
    let elapsed = started.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    (text, elapsed)
}

/// The peak resident set size of the live process `pid`, in bytes.
fn peak_rss(pid: u32) -> u64 {
    support::measure::peak_rss_kib(pid).expect("VmHWM in /proc/<pid>/status") * 1024
}

#[test]
fn uploads_stream_to_disk_and_the_aggregators_memory_follows_uploads_in_flight_not_their_size() {
    const UPLOADS: usize = 4;
    const SIZE: usize = 64 << 20;
    // Held whole, one upload alone would lift the aggregator past this.
    const MAX_PEAK_RSS: u64 = 48 << 20;
    let aggregator = Aggregator::create(&["a"], &[]);
    let agent = aggregator.issue("agent:a");
    let pid = aggregator.pid();
    let before = peak_rss(pid);
    // Four large files at once, each different, so no layer can share their pages.
    let files: Vec<Vec<u8>> = (0..UPLOADS).map(|i| vec![b'a' + i as u8; SIZE]).collect();
    std::thread::scope(|scope| {
        for (i, bytes) in files.iter().enumerate() {
            let (aggregator, agent) = (&aggregator, &agent);
            scope.spawn(move || {
                let path = format!("/api/v1/results/by-node/a/hello/files/big-{i}.bin");
                let answer = aggregator.put(agent, &path, bytes);
                assert_eq!(answer.status, 201, "{}", answer.stderr);
            });
        }
    });
    let peak = peak_rss(pid);
    eprintln!(
        "aggregator: {UPLOADS} uploads of {} MiB at once: peak RSS {} MiB (before {} MiB)",
        SIZE >> 20,
        peak >> 20,
        before >> 20
    );
    assert!(
        peak < MAX_PEAK_RSS,
        "peak RSS {} MiB after {UPLOADS} uploads of {} MiB",
        peak >> 20,
        SIZE >> 20
    );
    // Every byte is on disk, in the staging area.
    let staged: u64 = std::fs::read_dir(aggregator.run_dir().join("staging/hello/a"))
        .map(|d| d.map(|e| e.unwrap().metadata().unwrap().len()).sum())
        .unwrap_or(0);
    assert_eq!(staged, (UPLOADS * SIZE) as u64);
}

/// The aggregator's `/metrics` text, read as an operator.
fn metrics(aggregator: &Aggregator) -> String {
    let operator = aggregator.operator_credentials();
    curl(
        &operator,
        "GET",
        &format!("https://{}/metrics", aggregator.operator),
        None,
        &[],
    )
    .text()
}

/// How many requests or connections the aggregator refused for `reason`, from its `/metrics`.
fn rejections(aggregator: &Aggregator, reason: &str) -> u64 {
    let label = format!("reason=\"{reason}\"");
    metrics(aggregator)
        .lines()
        .find(|l| l.contains(&label) && !l.starts_with('#'))
        .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .unwrap_or(0)
}

#[test]
fn a_cut_off_upload_stores_nothing_and_its_retry_is_accepted() {
    let aggregator = Aggregator::create(&["a"], &[]);
    let agent = aggregator.issue("agent:a");
    let facts = vec![b'f'; 1000];
    let head = format!(
        "PUT /api/v1/results/by-node/a/hello/files/facts.json HTTP/1.1\r\nHost: localhost\r\n\
         Content-Length: {}\r\ncontent-digest: {}\r\n\r\n",
        facts.len(),
        content_digest(&facts)
    );
    // Half the body, then the connection closes: -no_ign_eof closes it when stdin ends.
    let (answer, _) = raw_request_with(
        &aggregator,
        &agent,
        &head,
        &[&facts[..500]],
        Duration::ZERO,
        &["-no_ign_eof"],
    );
    assert!(!answer.contains("201 Created"), "{answer}");
    // The server saw the upload begin and be cut off: not a stall ended by its idle timeout.
    let deadline = Instant::now() + Duration::from_secs(10);
    while rejections(&aggregator, "interrupted") == 0 {
        assert!(
            Instant::now() < deadline,
            "the aggregator never saw the cut upload (rejections: interrupted {}, too-slow {})",
            rejections(&aggregator, "interrupted"),
            rejections(&aggregator, "too-slow")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(rejections(&aggregator, "too-slow"), 0);
    assert!(!aggregator.run_dir().join("staging/hello/a").exists());
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read_dir(aggregator.run_dir().join("staging/.incoming"))
        .map(|d| d.count())
        .unwrap_or(0)
        > 0
    {
        assert!(Instant::now() < deadline, "the partial upload was kept");
        std::thread::sleep(Duration::from_millis(50));
    }
    let path = "/api/v1/results/by-node/a/hello/files/facts.json";
    assert_eq!(aggregator.put(&agent, path, &facts).status, 201);
}

#[test]
fn an_oversized_request_head_gets_431() {
    let aggregator = Aggregator::create(&["a"], &[]);
    let agent = aggregator.issue("agent:a");
    let head = format!(
        "GET /api/v1/plan/by-node/a HTTP/1.1\r\nHost: localhost\r\nX-Padding: {}\r\n\r\n",
        "p".repeat(20 << 10)
    );
    let (answer, _) = raw_request(&aggregator, &agent, &head, &[], Duration::ZERO);
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    // A head within the limit is served.
    let head =
        "GET /api/v1/plan/by-node/a HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    let (answer, _) = raw_request(&aggregator, &agent, head, &[], Duration::ZERO);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn connections_past_the_cap_are_closed_and_counted() {
    let aggregator = Aggregator::create(&["a"], &["--max-connections", "2"]);
    let agent = aggregator.issue("agent:a");
    let plan_url = format!("https://{}/api/v1/plan/by-node/a", aggregator.agent);
    let rejections = || rejections(&aggregator, "too-many-connections");
    assert_eq!(curl(&agent, "GET", &plan_url, None, &[]).status, 200);
    // Two clients that connect and say nothing hold both slots until the head timeout.
    let idle: Vec<Child> = (0..2)
        .map(|_| s_client(&aggregator.agent, &agent, &[]))
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let refused = curl(&agent, "GET", &plan_url, None, &[]);
    assert_ne!(
        refused.status,
        200,
        "a third connection was served: {}",
        refused.text()
    );
    assert!(rejections() >= 1);
    for mut child in idle {
        let _ = child.kill();
        let _ = child.wait();
    }
    // Freed slots serve again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while curl(&agent, "GET", &plan_url, None, &[]).status != 200 {
        assert!(Instant::now() < deadline, "the slots were never freed");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_client_sending_one_byte_a_second_is_dropped() {
    let aggregator = Aggregator::create(&["a"], &["--upload-grace", "2s"]);
    let agent = aggregator.issue("agent:a");
    let body = vec![b'x'; 30];
    let head = format!(
        "PUT /api/v1/results/by-node/a/hello/files/slow.bin HTTP/1.1\r\nHost: localhost\r\n\
         Content-Length: {}\r\ncontent-digest: {}\r\n\r\n",
        body.len(),
        content_digest(&body)
    );
    let pieces: Vec<&[u8]> = body.chunks(1).collect();
    let (answer, elapsed) =
        raw_request(&aggregator, &agent, &head, &pieces, Duration::from_secs(1));
    assert!(answer.contains("408 Request Timeout"), "{answer}");
    assert!(answer.contains("too slow"), "{answer}");
    assert!(elapsed < Duration::from_secs(10), "held for {elapsed:?}");
}

#[test]
fn a_global_result_comes_from_a_global_certificate_and_completes_the_run() {
    let aggregator = Aggregator::create(
        &["a"],
        &["--plugin", "systemd-logs", "--global", "systemd-logs"],
    );
    let global = aggregator.issue("global:cluster");
    let agent = aggregator.issue("agent:a");
    let facts = br#"{"nodes":1}"#;
    let path = "/api/v1/results/global/systemd-logs/files/cluster.json";
    // Only the global certificate may deliver it.
    assert_eq!(aggregator.put(&agent, path, facts).status, 403);
    assert_eq!(aggregator.put(&global, path, facts).status, 201);
    let commit_url = format!(
        "https://{}/api/v1/results/global/systemd-logs",
        aggregator.agent
    );
    let committed = curl(
        &global,
        "PUT",
        &commit_url,
        Some(&manifest("succeeded", &[("cluster.json", facts)])),
        &[],
    );
    assert_eq!(committed.status, 201, "{}", committed.text());
    // The node's agent runs only the per-node plugin, and the run ends complete.
    let output = aggregator.agent_run("a");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let status = aggregator.wait_for("complete", Duration::from_secs(60));
    let pairs = status["plugins"].as_array().unwrap();
    assert_eq!(pairs.len(), 2, "{status}");
    assert!(
        pairs.iter().any(|p| p["plugin"] == "systemd-logs"
            && p["node"] == "global"
            && p["result_status"] == "passed"),
        "{status}"
    );
    assert!(
        pairs
            .iter()
            .any(|p| p["plugin"] == "hello" && p["node"] == "a" && p["result_status"] == "passed"),
        "{status}"
    );
    let stored = aggregator
        .run_dir()
        .join("results/plugins/systemd-logs/results/global/cluster.json");
    assert_eq!(std::fs::read(stored).unwrap(), facts);
    // A plugin that is not part of the run cannot be made global.
    let dir = tempfile::tempdir().unwrap();
    let refused = factbuoy()
        .args([
            "aggregator",
            "create",
            "--node",
            "a",
            "--plugin",
            "hello",
            "--global",
            "setup",
            "--run-dir",
        ])
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--global \"setup\" names no plugin"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    // Nor one that requires host-info: beside the aggregator it would describe whichever
    // machine runs it, not the run (the same rule as `gen --global`).
    let refused = factbuoy()
        .args(["aggregator", "create", "--node", "a", "--plugin", "hello"])
        .args(["--global", "hello", "--run-dir"])
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("\"hello\" requires host-info") && stderr.contains("run it per node"),
        "{stderr}"
    );
}

#[test]
fn factbuoy_agent_global_runs_the_global_plugins_once_and_node_agents_skip_them() {
    let aggregator = Aggregator::create(
        &["a"],
        &["--plugin", "systemd-logs", "--global", "systemd-logs"],
    );
    // A node's certificate cannot fetch the global plan.
    let agent = aggregator.issue("agent:a");
    let forged = factbuoy()
        .args(["agent", "--global", "--aggregator", &aggregator.agent])
        .arg("--credentials")
        .arg(&agent)
        .output()
        .unwrap();
    assert!(!forged.status.success());
    let stderr = String::from_utf8_lossy(&forged.stderr);
    assert!(
        stderr.contains("403") && stderr.contains("plan/global"),
        "{stderr}"
    );

    // The global agent's root holds a journal (a global plugin reads what its runner is given,
    // never host-info).
    let global = aggregator.issue("global:runner");
    let root = aggregator.root().join("global-root");
    support::unpack_journal_fixtures(&root.join("var/log/journal"), |_| true);
    let ran = run(factbuoy()
        .args(["agent", "--global", "--aggregator", &aggregator.agent])
        .arg("--credentials")
        .arg(&global)
        .arg("--root")
        .arg(&root));
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout).trim(),
        "systemd-logs: succeeded"
    );
    let ran = aggregator.agent_run("a");
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout).trim(),
        "hello: succeeded"
    );
    let status = aggregator.wait_for("complete", Duration::from_secs(60));
    let mut pairs: Vec<(String, String, String)> = status["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let text = |key: &str| p[key].as_str().unwrap_or_default().to_owned();
            (text("plugin"), text("node"), text("result_status"))
        })
        .collect();
    pairs.sort();
    let pair = |plugin: &str, node: &str| (plugin.into(), node.into(), "passed".into());
    assert_eq!(pairs, [pair("hello", "a"), pair("systemd-logs", "global")]);
    let journal = aggregator
        .run_dir()
        .join("results/plugins/systemd-logs/results/global/journal.jsonl");
    assert!(journal.is_file(), "{} is missing", journal.display());
}

#[test]
fn a_run_with_real_agents_ends_in_a_bundle_that_resumes_downloading() {
    let aggregator = Aggregator::create(&["a"], &[]);
    let output = aggregator.agent_run("a");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let status = aggregator.wait_for("complete", Duration::from_secs(60));
    assert_eq!(status["plugins"][0]["result_status"], "passed");
    let tar = &status["tar_info"];

    // Retrieve, then cut the download short and resume it.
    let out = aggregator.root().join("retrieved");
    let retrieve = |out: &Path| {
        let output = run(factbuoy()
            .args(["retrieve", "-o", "json", "--run-dir"])
            .arg(aggregator.run_dir())
            .arg("--out")
            .arg(out));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let first = retrieve(&out);
    assert_eq!(first["sha256"], tar["sha256"]);
    let path = PathBuf::from(first["path"].as_str().unwrap());
    let whole = std::fs::read(&path).unwrap();
    std::fs::write(&path, &whole[..whole.len() / 2]).unwrap();
    let resumed = retrieve(&out);
    assert_eq!(resumed["sha256"], tar["sha256"]);
    assert_eq!(resumed["resumed_from"], whole.len() / 2, "{resumed}");
    assert_eq!(std::fs::read(&path).unwrap(), whole);

    // The bundle is a valid tar.gz whose index matches every file in it.
    let files = support::tar_gz_files(&whole);
    for expected in [
        "meta/run.json",
        "meta/status.json",
        "meta/index.json",
        "plugins/hello/definition.json",
        "plugins/hello/results/a/greeting.json",
        "meta/reports/hello/a.json",
    ] {
        assert!(
            files.contains_key(expected),
            "{expected} missing from {:?}",
            files.keys()
        );
    }
    let index: Vec<serde_json::Value> = serde_json::from_slice(&files["meta/index.json"]).unwrap();
    assert_eq!(index.len(), files.len() - 1);
    for entry in index {
        let bytes = &files[entry["path"].as_str().unwrap()];
        assert_eq!(entry["sha256"], sha256(bytes));
        assert_eq!(entry["size"], bytes.len());
    }

    let metrics = metrics(&aggregator);
    assert!(
        metrics.contains("factbuoy_aggregator_results_total{outcome=\"succeeded\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("factbuoy_aggregator_nodes{state=\"done\"} 1"),
        "{metrics}"
    );
}

#[test]
fn a_restarted_aggregator_completes_the_run_and_loses_nothing() {
    let mut aggregator = Aggregator::create(&["a", "b"], &[]);
    assert!(aggregator.agent_run("a").status.success());
    aggregator.kill();
    // Agent b starts while the aggregator is down, and keeps retrying.
    let credentials = aggregator.issue("agent:b");
    let agent_b = factbuoy()
        .args([
            "agent",
            "--aggregator",
            &aggregator.agent,
            "--node",
            "b",
            "--retry-for",
            "60s",
        ])
        .arg("--credentials")
        .arg(credentials)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let address = aggregator.agent.clone();
    aggregator.serve();
    assert_eq!(
        aggregator.agent, address,
        "a restarted aggregator listens where agents knew it"
    );
    let output = agent_b.wait_with_output().unwrap();
    assert!(output.status.success());
    let status = aggregator.wait_for("complete", Duration::from_secs(60));
    let passed: Vec<&serde_json::Value> = status["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["result_status"] == "passed")
        .collect();
    assert_eq!(passed.len(), 2, "{status}");
    let results = aggregator.run_dir().join("results/plugins/hello/results");
    assert!(results.join("a/greeting.json").exists() && results.join("b/greeting.json").exists());
}

#[test]
fn a_silent_node_is_marked_lost_and_the_run_still_ends() {
    let aggregator = Aggregator::create(&["a", "ghost"], &["--lost-after", "2s"]);
    assert!(aggregator.agent_run("a").status.success());
    let status = aggregator.wait_for("complete", Duration::from_secs(60));
    let ghost = status["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["node"] == "ghost")
        .unwrap()
        .clone();
    assert_eq!(ghost["status"], "lost");
    assert_eq!(ghost["result_status"], "failed");
    let error = aggregator
        .run_dir()
        .join("results/plugins/hello/errors/ghost/error.json");
    assert!(
        std::fs::read_to_string(error)
            .unwrap()
            .contains("marked lost")
    );
}

#[test]
fn factbuoy_run_collects_this_host_into_a_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let output = factbuoy()
        .env("FACTBUOY_STATE_DIR", dir.path().join("state"))
        .args([
            "run",
            "--plugin",
            "hello",
            "-o",
            "json",
            "--node",
            "this-host",
        ])
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["status"], "complete");
    let bundle = PathBuf::from(summary["bundle"]["path"].as_str().unwrap());
    let name = bundle.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.ends_with(&format!(
            "_factbuoy_{}.tar.gz",
            summary["run_id"].as_str().unwrap()
        )),
        "{name}"
    );
    assert_eq!(
        summary["bundle"]["sha256"],
        sha256(&std::fs::read(&bundle).unwrap())
    );

    // `status` from another process finds the run through the private state file.
    let status = factbuoy()
        .env("FACTBUOY_STATE_DIR", dir.path().join("state"))
        .args(["status", "-o", "json"])
        .output()
        .unwrap();
    let document: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(document["status"], "complete");
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: PathBuf| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(dir.path().join("state/current-run.json")), 0o600);
    // The run is over: its CA key went with the rest of its working files (tests/all/cli_runs.rs).
    let run_dir = dir
        .path()
        .join("state/runs")
        .join(summary["run_id"].as_str().unwrap());
    assert_eq!(mode(run_dir.clone()), 0o700);
    assert!(!run_dir.join("pki").exists());
    // What stays of it (configuration, state, final status) is its owner's only, as the bundle
    // is, even where --run-dir puts it outside the private state directory.
    let mut dirs = vec![run_dir];
    let mut files = 0;
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files += 1;
                assert_eq!(mode(path.clone()), 0o600, "{}", path.display());
            }
        }
    }
    assert!(files >= 2, "the run directory kept {files} files");
}

#[test]
fn a_failing_plugin_becomes_an_error_result_and_the_others_carry_on() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = support::fixture("hostile");
    let output = factbuoy()
        .env("FACTBUOY_STATE_DIR", dir.path().join("state"))
        .args([
            "run",
            "--plugin",
            "hello",
            "-p",
            "hostile:mode=panic",
            "-o",
            "json",
            "--node",
            "n1",
            "--plugin",
        ])
        .arg(&hostile)
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["status"], "complete");
    let result = |plugin: &str| {
        summary["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["plugin"] == plugin)
            .unwrap()["result_status"]
            .clone()
    };
    assert_eq!(result("hello"), "passed");
    assert_eq!(result("hostile"), "failed");

    let bundle = std::fs::read(summary["bundle"]["path"].as_str().unwrap()).unwrap();
    let files = support::tar_gz_files(&bundle);
    let error = String::from_utf8_lossy(
        files
            .get("plugins/hostile/errors/n1/error.json")
            .expect("an error result for the failed plugin"),
    );
    assert!(
        error.contains("panicked: hostile plugin panicked on purpose"),
        "{error}"
    );
}

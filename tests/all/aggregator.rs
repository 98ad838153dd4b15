//! Collection runs end to end: the real `factbuoy` binary as aggregator and agents, with curl
//! and `openssl s_client` as independent clients for everything a hostile or broken client might
//! send. Real TLS, real HTTP over loopback.

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::support::factbuoy;

fn run(command: &mut Command) -> Output {
    let output = command.output().expect("running factbuoy");
    assert!(
        output.status.success(),
        "{:?} failed: {}",
        command,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `sha-256=:<base64>:` for `bytes`.
fn content_digest(bytes: &[u8]) -> String {
    use base64::Engine as _;
    format!(
        "sha-256=:{}:",
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(bytes))
    )
}

/// A run directory with its aggregator serving in a child process.
struct Aggregator {
    dir: tempfile::TempDir,
    child: Option<Child>,
    agent: String,
    operator: String,
}

impl Aggregator {
    /// Creates a run expecting `nodes` to run `hello`, with extra `aggregator create` flags.
    fn create(nodes: &[&str], extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut command = factbuoy();
        command
            .args(["aggregator", "create", "--plugin", "hello"])
            .arg("--run-dir")
            .arg(dir.path().join("run"));
        command.arg("--out").arg(dir.path().join("out"));
        for node in nodes {
            command.args(["--node", node]);
        }
        run(command.args(extra));
        let mut aggregator = Aggregator {
            dir,
            child: None,
            agent: String::new(),
            operator: String::new(),
        };
        aggregator.serve();
        aggregator
    }

    fn run_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    fn serve(&mut self) {
        let mut child = factbuoy()
            .args(["aggregator", "serve", "--run-dir"])
            .arg(self.run_dir())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addresses: serde_json::Value = serde_json::from_str(&line).expect("the serve line");
        self.agent = addresses["agent_address"].as_str().unwrap().to_owned();
        self.operator = addresses["operator_address"].as_str().unwrap().to_owned();
        self.child = Some(child);
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// Credentials for `role` (`agent:a`, `operator:x`, `global:y`) in a fresh directory.
    fn issue(&self, role: &str) -> PathBuf {
        let out = self.dir.path().join(role.replace(':', "-"));
        run(factbuoy()
            .args(["aggregator", "issue", "--role", role])
            .arg("--run-dir")
            .arg(self.run_dir())
            .arg("--out")
            .arg(&out));
        out
    }

    /// The run directory's own operator credentials.
    fn operator_credentials(&self) -> PathBuf {
        let out = self.dir.path().join("operator-creds");
        std::fs::create_dir_all(&out).unwrap();
        let pki = self.run_dir().join("pki");
        std::fs::copy(pki.join("ca.pem"), out.join("ca.pem")).unwrap();
        std::fs::copy(pki.join("operator.pem"), out.join("client.pem")).unwrap();
        std::fs::copy(pki.join("operator.key"), out.join("client.key")).unwrap();
        out
    }

    fn agent_run(&self, node: &str) -> Output {
        let credentials = self.issue(&format!("agent:{node}"));
        factbuoy()
            .args([
                "agent",
                "--aggregator",
                &self.agent,
                "--node",
                node,
                "--retry-for",
                "60s",
            ])
            .arg("--credentials")
            .arg(credentials)
            .output()
            .unwrap()
    }

    fn status(&self) -> serde_json::Value {
        let output = run(factbuoy()
            .args(["status", "-o", "json", "--run-dir"])
            .arg(self.run_dir()));
        serde_json::from_slice(&output.stdout).unwrap()
    }

    fn wait_for(&self, status: &str) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let document = self.status();
            if document["status"] == status {
                return document;
            }
            assert!(
                Instant::now() < deadline,
                "the run never became {status}: {document}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Aggregator {
    fn drop(&mut self) {
        self.kill();
    }
}

/// An answer from curl: HTTP status and body. Status 0 means no HTTP exchange happened.
struct Answer {
    status: u16,
    body: String,
    stderr: String,
}

fn curl(
    credentials: Option<&Path>,
    ca: &Path,
    method: &str,
    url: &str,
    body: Option<&[u8]>,
    headers: &[String],
) -> Answer {
    let scratch = tempfile::tempdir().unwrap();
    let mut command = Command::new("curl");
    command
        .args(["-sS", "-X", method, "-o"])
        .arg(scratch.path().join("body"))
        .args(["-w", "%{http_code}"]);
    command.arg("--cacert").arg(ca);
    if let Some(dir) = credentials {
        command
            .arg("--cert")
            .arg(dir.join("client.pem"))
            .arg("--key")
            .arg(dir.join("client.key"));
    }
    for header in headers {
        command.args(["-H", header]);
    }
    if let Some(body) = body {
        std::fs::write(scratch.path().join("upload"), body).unwrap();
        command
            .arg("--data-binary")
            .arg(format!("@{}", scratch.path().join("upload").display()));
    }
    let output = command.arg(url).output().expect("running curl");
    Answer {
        status: String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .unwrap_or(0),
        body: std::fs::read_to_string(scratch.path().join("body")).unwrap_or_default(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn put_file(
    aggregator: &Aggregator,
    credentials: &Path,
    path: &str,
    bytes: &[u8],
    digest: &str,
) -> Answer {
    let url = format!("https://{}{path}", aggregator.agent);
    curl(
        Some(credentials),
        &credentials.join("ca.pem"),
        "PUT",
        &url,
        Some(bytes),
        &[format!("content-digest: {digest}")],
    )
}

fn manifest(files: &[(&str, &[u8])]) -> Vec<u8> {
    let files: Vec<serde_json::Value> = files
        .iter()
        .map(|(name, bytes)| serde_json::json!({"name": name, "size": bytes.len(), "sha256": sha256(bytes)}))
        .collect();
    serde_json::to_vec(
        &serde_json::json!({"outcome": "succeeded", "files": files, "plugin_version": "0.1.0"}),
    )
    .unwrap()
}

#[test]
fn the_handshake_needs_a_certificate_from_this_runs_ca() {
    let aggregator = Aggregator::create(&["a"], &[]);
    let own = aggregator.issue("agent:a");
    let ca = own.join("ca.pem");
    let url = format!("https://{}/api/v1/plan/by-node/a", aggregator.agent);
    assert_eq!(curl(Some(&own), &ca, "GET", &url, None, &[]).status, 200);

    let without = curl(None, &ca, "GET", &url, None, &[]);
    assert_eq!(without.status, 0);
    assert!(
        without.stderr.contains("certificate required"),
        "{}",
        without.stderr
    );

    let elsewhere = Aggregator::create(&["a"], &[]);
    let foreign = elsewhere.issue("agent:a");
    let refused = curl(Some(&foreign), &ca, "GET", &url, None, &[]);
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
    let answer = put_file(
        &aggregator,
        &agent_a,
        "/api/v1/results/by-node/b/hello/files/x.json",
        body,
        &content_digest(body),
    );
    assert_eq!(answer.status, 403, "{}", answer.body);
    assert!(
        answer
            .body
            .contains("the agent for node \\\"a\\\" may not use"),
        "{}",
        answer.body
    );
    let url = format!("https://{}/api/v1/heartbeat/by-node/b", aggregator.agent);
    assert_eq!(
        curl(Some(&agent_a), &ca, "POST", &url, None, &[]).status,
        403
    );

    // An agent cannot read status or download the bundle.
    for path in ["/status", "/bundle", "/metrics"] {
        let url = format!("https://{}{path}", aggregator.operator);
        assert_eq!(
            curl(Some(&agent_a), &ca, "GET", &url, None, &[]).status,
            403,
            "{path}"
        );
    }
    // An operator cannot upload.
    let answer = put_file(
        &aggregator,
        &operator,
        "/api/v1/results/by-node/a/hello/files/x.json",
        body,
        &content_digest(body),
    );
    assert_eq!(answer.status, 403);
    // A global uploader cannot upload for a node, and this run expects no global result.
    let global = aggregator.issue("global:cluster");
    let answer = put_file(
        &aggregator,
        &global,
        "/api/v1/results/by-node/a/hello/files/x.json",
        body,
        &content_digest(body),
    );
    assert_eq!(answer.status, 403);
    let answer = put_file(
        &aggregator,
        &global,
        "/api/v1/results/global/hello/files/x.json",
        body,
        &content_digest(body),
    );
    assert_eq!(answer.status, 403);
    assert!(answer.body.contains("expects no result"), "{}", answer.body);
    // An unexpected plugin.
    let answer = put_file(
        &aggregator,
        &agent_a,
        "/api/v1/results/by-node/a/other/files/x.json",
        body,
        &content_digest(body),
    );
    assert_eq!(answer.status, 403);
    // The operator reads the status.
    let status = curl(
        Some(&operator),
        &ca,
        "GET",
        &format!("https://{}/status", aggregator.operator),
        None,
        &[],
    );
    assert_eq!(status.status, 200);
    assert!(
        status.body.contains("\"status\":\"running\""),
        "{}",
        status.body
    );
}

#[test]
fn uploads_are_checked_before_anything_is_stored() {
    let aggregator = Aggregator::create(&["a"], &["--max-file", "1KiB"]);
    let agent = aggregator.issue("agent:a");
    let staged = aggregator.run_dir().join("staging/hello/a");
    let path = "/api/v1/results/by-node/a/hello/files/facts.json";
    let facts = br#"{"ok":true}"#;

    let mismatch = put_file(
        &aggregator,
        &agent,
        path,
        facts,
        &content_digest(b"something else"),
    );
    assert_eq!(mismatch.status, 400);
    assert!(
        mismatch.body.contains("nothing was stored"),
        "{}",
        mismatch.body
    );
    assert!(!staged.exists());
    let ca = agent.join("ca.pem");
    let url = format!("https://{}{path}", aggregator.agent);
    let no_digest = curl(Some(&agent), &ca, "PUT", &url, Some(facts), &[]);
    assert_eq!(no_digest.status, 400);
    assert!(no_digest.body.contains("Content-Digest"));

    for traversal in [
        "/api/v1/results/by-node/a/hello/files/..%2F..%2Fescape",
        "/api/v1/results/by-node/a/hello/files/%2Fetc%2Fpasswd",
        "/api/v1/results/by-node/a/hello/files/a%5Cb",
        "/api/v1/results/by-node/..%2Fa/hello/files/x",
    ] {
        let answer = put_file(
            &aggregator,
            &agent,
            traversal,
            facts,
            &content_digest(facts),
        );
        assert_eq!(answer.status, 400, "{traversal}: {}", answer.body);
    }

    let big = vec![b'x'; 2048];
    let too_large = put_file(&aggregator, &agent, path, &big, &content_digest(&big));
    assert_eq!(too_large.status, 413);
    assert!(!staged.exists());

    assert_eq!(
        put_file(&aggregator, &agent, path, facts, &content_digest(facts)).status,
        201
    );
    let commit_url = format!(
        "https://{}/api/v1/results/by-node/a/hello",
        aggregator.agent
    );
    let incomplete = manifest(&[("facts.json", facts), ("missing.json", b"?")]);
    let answer = curl(
        Some(&agent),
        &ca,
        "PUT",
        &commit_url,
        Some(&incomplete),
        &[],
    );
    assert_eq!(answer.status, 400);
    assert!(answer.body.contains("missing.json"), "{}", answer.body);
    let complete = manifest(&[("facts.json", facts)]);
    assert_eq!(
        curl(Some(&agent), &ca, "PUT", &commit_url, Some(&complete), &[]).status,
        201
    );

    // A true duplicate, of the commit or of a file, is refused.
    assert_eq!(
        curl(Some(&agent), &ca, "PUT", &commit_url, Some(&complete), &[]).status,
        409
    );
    assert_eq!(
        put_file(&aggregator, &agent, path, facts, &content_digest(facts)).status,
        409
    );
    let stored = aggregator
        .run_dir()
        .join("results/plugins/hello/results/a/facts.json");
    assert_eq!(std::fs::read(stored).unwrap(), facts);
}

/// A TLS connection to the agent listener through `openssl s_client`, with `credentials`; the
/// request is written to its stdin, the answer read from its stdout. `-quiet` implies
/// `-ign_eof`: the connection stays open after stdin ends, until the server closes it.
fn s_client(aggregator: &Aggregator, credentials: &Path) -> Child {
    s_client_with(aggregator, credentials, &[])
}

/// [`s_client`] with more options.
fn s_client_with(aggregator: &Aggregator, credentials: &Path, options: &[&str]) -> Child {
    Command::new("openssl")
        .args(["s_client", "-quiet", "-connect", &aggregator.agent])
        .args(options)
        .arg("-CAfile")
        .arg(credentials.join("ca.pem"))
        .arg("-cert")
        .arg(credentials.join("client.pem"))
        .arg("-key")
        .arg(credentials.join("client.key"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
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
    let mut child = s_client_with(aggregator, credentials, options);
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
    let pid = aggregator.child.as_ref().unwrap().id();
    let before = peak_rss(pid);
    // Four large files at once, each different, so no layer can share their pages.
    let files: Vec<Vec<u8>> = (0..UPLOADS).map(|i| vec![b'a' + i as u8; SIZE]).collect();
    std::thread::scope(|scope| {
        for (i, bytes) in files.iter().enumerate() {
            let (aggregator, agent) = (&aggregator, &agent);
            scope.spawn(move || {
                let path = format!("/api/v1/results/by-node/a/hello/files/big-{i}.bin");
                let answer = put_file(aggregator, agent, &path, bytes, &content_digest(bytes));
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
        Some(&operator),
        &operator.join("ca.pem"),
        "GET",
        &format!("https://{}/metrics", aggregator.operator),
        None,
        &[],
    )
    .body
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
    assert_eq!(
        put_file(&aggregator, &agent, path, &facts, &content_digest(&facts)).status,
        201
    );
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
    let ca = agent.join("ca.pem");
    let plan_url = format!("https://{}/api/v1/plan/by-node/a", aggregator.agent);
    let rejections = || rejections(&aggregator, "too-many-connections");
    assert_eq!(
        curl(Some(&agent), &ca, "GET", &plan_url, None, &[]).status,
        200
    );
    // Two clients that connect and say nothing hold both slots until the head timeout.
    let idle: Vec<Child> = (0..2).map(|_| s_client(&aggregator, &agent)).collect();
    std::thread::sleep(Duration::from_millis(1500));
    let refused = curl(Some(&agent), &ca, "GET", &plan_url, None, &[]);
    assert_ne!(
        refused.status, 200,
        "a third connection was served: {}",
        refused.body
    );
    assert!(rejections() >= 1);
    for mut child in idle {
        let _ = child.kill();
        let _ = child.wait();
    }
    // Freed slots serve again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while curl(Some(&agent), &ca, "GET", &plan_url, None, &[]).status != 200 {
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
    assert_eq!(
        put_file(&aggregator, &agent, path, facts, &content_digest(facts)).status,
        403
    );
    assert_eq!(
        put_file(&aggregator, &global, path, facts, &content_digest(facts)).status,
        201
    );
    let commit_url = format!(
        "https://{}/api/v1/results/global/systemd-logs",
        aggregator.agent
    );
    let committed = curl(
        Some(&global),
        &global.join("ca.pem"),
        "PUT",
        &commit_url,
        Some(&manifest(&[("cluster.json", facts)])),
        &[],
    );
    assert_eq!(committed.status, 201, "{}", committed.body);
    // The node's agent runs only the per-node plugin, and the run ends complete.
    let output = aggregator.agent_run("a");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let status = aggregator.wait_for("complete");
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
    let root = aggregator.dir.path().join("global-root");
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
    let status = aggregator.wait_for("complete");
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
    let status = aggregator.wait_for("complete");
    assert_eq!(status["plugins"][0]["result_status"], "passed");
    let tar = &status["tar_info"];

    // Retrieve, then cut the download short and resume it.
    let out = aggregator.dir.path().join("retrieved");
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
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(whole.as_slice()));
    let mut files = std::collections::BTreeMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        files.insert(name, bytes);
    }
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
    let status = aggregator.wait_for("complete");
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
    let status = aggregator.wait_for("complete");
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
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bundle.as_slice()));
    let error = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap())
        .find(|e| e.path().unwrap().to_string_lossy() == "plugins/hostile/errors/n1/error.json")
        .map(|mut e| {
            let mut text = String::new();
            e.read_to_string(&mut text).unwrap();
            text
        })
        .expect("an error result for the failed plugin");
    assert!(
        error.contains("panicked: hostile plugin panicked on purpose"),
        "{error}"
    );
}

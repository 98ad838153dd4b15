//! Enrollment (docs/protocol.md, Enrollment): agents without a shared key make their key on the
//! node and get a certificate for the node their credential admits, and nothing else. The
//! aggregator runs in this process with an admission that maps fixed tokens to nodes (the real
//! one, a Kubernetes TokenReview, lives in the dispatch crate); listeners are real loopback TLS,
//! agents the real binary, other clients curl, openssl and the protocol crate's client.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::aggregator::{Answer, curl_as};
use crate::support::factbuoy;
use crate::support::served::{
    bundle_files, create, issue, node, pair_status, serve, serve_with, wait_for,
};
use factbuoy_aggregator::enroll::{Admission, Admitting, NotAdmitted};
use factbuoy_aggregator::{RunDir, RunningAggregator};
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::types::RunStatus;
use factbuoy_protocol::{Client, ClientError, Scope};

/// Admits fixed tokens: `token-<node>` for that node; `refuse` is refused with a hostile
/// message; `hang` never answers; `slow-<node>` answers after [`SLOW`]; `down` is unavailable.
struct Tokens {
    calls: AtomicUsize,
    /// Slow admissions running now, and the most that ever ran at once.
    slow: AtomicUsize,
    most_slow: AtomicUsize,
}

const SLOW: Duration = Duration::from_secs(3);

impl Admission for Tokens {
    fn admit<'a>(&'a self, credential: &'a str) -> Admitting<'a> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if let Some(name) = credential.strip_prefix("token-") {
                return NodeName::parse(name).map_err(|e| NotAdmitted::Refused(e.to_string()));
            }
            if let Some(name) = credential.strip_prefix("slow-") {
                let now = self.slow.fetch_add(1, Ordering::SeqCst) + 1;
                self.most_slow.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(SLOW).await;
                self.slow.fetch_sub(1, Ordering::SeqCst);
                return NodeName::parse(name).map_err(|e| NotAdmitted::Refused(e.to_string()));
            }
            match credential {
                "hang" => std::future::pending().await,
                "down" => Err(NotAdmitted::Unavailable(
                    "the API server is unreachable".into(),
                )),
                _ => Err(NotAdmitted::Refused(format!(
                    "this token is no agent's\u{1b}[31m; check the DaemonSet's serviceAccountName{}",
                    "!".repeat(4000)
                ))),
            }
        })
    }
}

fn tokens() -> Arc<Tokens> {
    Arc::new(Tokens {
        calls: AtomicUsize::new(0),
        slow: AtomicUsize::new(0),
        most_slow: AtomicUsize::new(0),
    })
}

async fn enrolling(run_dir: &RunDir, tokens: &Arc<Tokens>) -> RunningAggregator {
    serve_with(run_dir, Some(tokens.clone() as Arc<dyn Admission>)).await
}

fn ca_file(run_dir: &RunDir) -> std::path::PathBuf {
    run_dir.pki().join("ca.pem")
}

/// The real agent, enrolling with `token`; verifies the aggregator as `localhost` while it
/// dials 127.0.0.1.
fn enrolling_agent(running: &RunningAggregator, run_dir: &RunDir, token: &str) -> Command {
    let file = run_dir
        .root()
        .parent()
        .unwrap()
        .join(format!("token-file-{:016x}", rand::random::<u64>()));
    std::fs::write(&file, format!("{token}\n")).unwrap();
    agent_with_token_file(running, run_dir, &file)
}

fn agent_with_token_file(running: &RunningAggregator, run_dir: &RunDir, file: &Path) -> Command {
    let mut command = factbuoy();
    command
        .args(["agent", "--aggregator"])
        .arg(running.agent_address.to_string())
        .args(["--server-name", "localhost", "--retry-for", "20s", "--ca"])
        .arg(ca_file(run_dir))
        .arg("--enroll-credential-file")
        .arg(file);
    command
}

async fn output_of(mut command: Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

/// curl without a client certificate, sending a JSON `body` if there is one.
fn anonymous_curl(ca: &Path, method: &str, url: &str, body: Option<&[u8]>) -> Answer {
    let json = body.map(|_| "content-type: application/json".to_owned());
    curl_as(ca, None, method, url, body, json.as_slice())
}

/// A key and a CSR made by openssl, asking for `node` in its subject and as a role URI.
fn openssl_csr(dir: &Path, node: &str) -> (String, std::path::PathBuf) {
    let key = dir.join(format!("{node}.key"));
    let csr = dir.join(format!("{node}.csr"));
    let status = Command::new("openssl")
        .args(["req", "-new", "-newkey", "ec", "-pkeyopt"])
        .arg("ec_paramgen_curve:P-256")
        .args(["-nodes", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&csr)
        .args(["-subj", &format!("/CN={node}"), "-addext"])
        .arg(format!("subjectAltName=URI:urn:factbuoy:agent:{node}"))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    (std::fs::read_to_string(csr).unwrap(), key)
}

fn enroll_body(csr: &str, credential: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({ "csr": csr, "credential": credential })).unwrap()
}

fn enroll_url(running: &RunningAggregator) -> String {
    format!("https://{}/api/v1/enroll", running.agent_address)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_good_credential_gets_a_certificate_for_its_node_and_the_agent_delivers() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &[], true, &[]);
    let tokens = tokens();
    let running = enrolling(&run_dir, &tokens).await;
    let output = output_of(enrolling_agent(&running, &run_dir, "token-a")).await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Admitted, a became expected, and its result is in.
    let document = running.status_document();
    assert_eq!(
        pair_status(&document, "hello", "a").as_deref(),
        Some("complete")
    );
    running.nodes().settled().await.unwrap();
    wait_for(&running, RunStatus::Complete, Duration::from_secs(30)).await;
    assert!(bundle_files(&running).contains_key("plugins/hello/results/a/greeting.json"));
    // The credential appears in no log line of the agent.
    assert!(!String::from_utf8_lossy(&output.stderr).contains("token-a"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_for_node_b_with_as_credential_gets_a_certificate_for_a_only() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &["a", "b"], false, &[]);
    let tokens = tokens();
    let running = enrolling(&run_dir, &tokens).await;
    let (csr, key) = openssl_csr(dir.path(), "b");
    let answer = anonymous_curl(
        &ca_file(&run_dir),
        "POST",
        &enroll_url(&running),
        Some(&enroll_body(&csr, "token-a")),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    let body: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(body["node"], "a");
    let certificate = body["certificate"].as_str().unwrap();
    let der = factbuoy_protocol::tls::certificates(certificate, "certificate")
        .unwrap()
        .remove(0);
    assert_eq!(
        factbuoy_pki::role_of(&der),
        Some(Role::Agent { node: node("a") })
    );
    assert_eq!(
        body["ca"].as_str().unwrap(),
        std::fs::read_to_string(ca_file(&run_dir)).unwrap()
    );

    // With that certificate and the key openssl kept: a's plan, never b's.
    let creds = dir.path().join("enrolled");
    std::fs::create_dir_all(&creds).unwrap();
    std::fs::copy(ca_file(&run_dir), creds.join("ca.pem")).unwrap();
    std::fs::write(creds.join("client.pem"), certificate).unwrap();
    std::fs::copy(&key, creds.join("client.key")).unwrap();
    let plan = |of: &str| {
        support::aggregator::curl(
            &creds,
            "GET",
            &format!("https://{}/api/v1/plan/by-node/{of}", running.agent_address),
            None,
            &[],
        )
    };
    assert_eq!(plan("a").status, 200);
    assert_eq!(plan("b").status, 403);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_credential_gets_403_and_the_agent_exits_non_zero_with_the_message() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &[], true, &[]);
    let tokens = tokens();
    let running = enrolling(&run_dir, &tokens).await;
    let started = Instant::now();
    let output = output_of(enrolling_agent(&running, &run_dir, "stolen")).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    // Not retried: a refusal is final.
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(tokens.calls.load(Ordering::SeqCst), 1);
    assert!(stderr.contains("403"), "{stderr}");
    assert!(
        stderr.contains("check the DaemonSet's serviceAccountName"),
        "{stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
    // Bounded: the aggregator cut the admission's 4,000-byte message.
    assert!(stderr.len() < 3000, "{}", stderr.len());
    assert!(running.nodes().disposition(&node("stolen")).is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forged_or_malformed_request_gets_400_or_413() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &["a"], false, &[]);
    let tokens = tokens();
    let running = enrolling(&run_dir, &tokens).await;
    let ca = ca_file(&run_dir);
    let (csr, _) = openssl_csr(dir.path(), "a");
    // One base64 character near the end: a byte of the signature.
    let mut lines: Vec<String> = csr.lines().map(str::to_owned).collect();
    let last = lines.len() - 2;
    let mut chars: Vec<char> = lines[last].chars().collect();
    let at = chars.len() - 4;
    chars[at] = if chars[at] == 'A' { 'B' } else { 'A' };
    lines[last] = chars.into_iter().collect();
    let forged = lines.join("\n");
    let answer = anonymous_curl(
        &ca,
        "POST",
        &enroll_url(&running),
        Some(&enroll_body(&forged, "token-a")),
    );
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert!(
        answer.text().contains("certificate signing request"),
        "{}",
        answer.text()
    );
    for body in [
        enroll_body("not a CSR", "token-a"),
        b"{\"csr\": 1}".to_vec(),
    ] {
        let answer = anonymous_curl(&ca, "POST", &enroll_url(&running), Some(&body));
        assert_eq!(answer.status, 400, "{}", answer.text());
    }
    // A bad request never reaches the admission.
    assert_eq!(tokens.calls.load(Ordering::SeqCst), 0);
    let huge = enroll_body(&"x".repeat(20 << 10), "token-a");
    let answer = anonymous_curl(&ca, "POST", &enroll_url(&running), Some(&huge));
    assert_eq!(answer.status, 413, "{}", answer.text());
    // The genuine request is fine.
    let answer = anonymous_curl(
        &ca,
        "POST",
        &enroll_url(&running),
        Some(&enroll_body(&csr, "token-a")),
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_certificate_only_enrollment_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &["a"], false, &[]);
    let tokens = tokens();
    let running = enrolling(&run_dir, &tokens).await;
    let ca = ca_file(&run_dir);
    let agent = |path: &str| format!("https://{}{path}", running.agent_address);
    for (method, path) in [
        ("GET", "/api/v1/plan/by-node/a"),
        ("PUT", "/api/v1/results/by-node/a/hello"),
        ("PUT", "/api/v1/results/by-node/a/hello/files/x.json"),
        ("POST", "/api/v1/heartbeat/by-node/a"),
        ("POST", "/api/v1/progress/by-node/a/hello"),
        ("GET", "/status"),
    ] {
        let answer = anonymous_curl(&ca, method, &agent(path), Some(b"{}"));
        assert_eq!(answer.status, 403, "{method} {path}: {}", answer.text());
    }
    // The operator listener still wants a certificate at the handshake.
    let operator = anonymous_curl(
        &ca,
        "GET",
        &format!("https://{}/status", running.operator_address),
        None,
    );
    assert_eq!(operator.status, 0);
    assert_eq!(tokens.calls.load(Ordering::SeqCst), 0);
    drop(running);

    // Without an admission the agent listener wants one too, exactly as before.
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &["a"], false, &[]);
    let running = serve(&run_dir).await;
    let answer = anonymous_curl(
        &ca_file(&run_dir),
        "GET",
        &format!("https://{}/api/v1/plan/by-node/a", running.agent_address),
        None,
    );
    assert_eq!(answer.status, 0, "{}", answer.text());
    let credentials = issue(&run_dir, &Role::Agent { node: node("a") });
    let answer = support::aggregator::curl(
        &credentials,
        "POST",
        &enroll_url(&running),
        Some(&enroll_body("x", "token-a")),
        &[],
    );
    assert_eq!(answer.status, 404, "{}", answer.text());
}

/// An anonymous protocol client enrolling with `credential`, timed.
async fn enroll(
    running: &RunningAggregator,
    ca: &str,
    credential: &str,
) -> (Result<NodeName, ClientError>, Duration) {
    let client = Client::anonymous(&running.agent_address.to_string(), ca)
        .unwrap()
        .with_timeout(Duration::from_secs(30));
    let request = factbuoy_pki::KeyRequest::new("test").unwrap();
    let started = Instant::now();
    let answer = client.enroll(&request.csr_pem, credential).await;
    (answer.map(|a| a.node), started.elapsed())
}

/// Enrollments with each of `credentials`, at once, each in a task of its own.
fn spawn_enrollments(
    running: &Arc<RunningAggregator>,
    ca: &str,
    credentials: impl IntoIterator<Item = String>,
) -> Vec<tokio::task::JoinHandle<(Result<NodeName, ClientError>, Duration)>> {
    credentials
        .into_iter()
        .map(|credential| {
            let (running, ca) = (running.clone(), ca.to_owned());
            tokio::spawn(async move { enroll(&running, &ca, &credential).await })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_admission_blocks_nothing_else_and_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &["a", "b"], false, &[]);
    let tokens = tokens();
    let running = Arc::new(enrolling(&run_dir, &tokens).await);
    let ca = std::fs::read_to_string(ca_file(&run_dir)).unwrap();
    let hanging = {
        let (running, ca) = (running.clone(), ca.clone());
        tokio::spawn(async move { enroll(&running, &ca, "hang").await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (answer, took) = enroll(&running, &ca, "token-a").await;
    assert_eq!(answer.unwrap(), node("a"));
    assert!(took < Duration::from_secs(3), "{took:?}");
    let (answer, _) = enroll(&running, &ca, "down").await;
    let error = answer.unwrap_err();
    assert_eq!(error.status().map(|s| s.as_u16()), Some(503), "{error}");
    assert!(error.is_retryable());
    assert!(error.to_string().contains("unreachable"), "{error}");
    let (answer, took) = hanging.await.unwrap();
    let error = answer.unwrap_err();
    assert_eq!(error.status().map(|s| s.as_u16()), Some(503), "{error}");
    assert!(error.to_string().contains("within 10s"), "{error}");
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(15),
        "{took:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flood_past_the_in_flight_bound_waits_its_turn_and_every_enrollment_succeeds() {
    use factbuoy_aggregator::enroll::MAX_ADMISSIONS_IN_FLIGHT;
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &[], true, &[]);
    let tokens = tokens();
    let running = Arc::new(enrolling(&run_dir, &tokens).await);
    let ca = std::fs::read_to_string(ca_file(&run_dir)).unwrap();
    let flood = MAX_ADMISSIONS_IN_FLIGHT + 16;
    let tasks = spawn_enrollments(&running, &ca, (0..flood).map(|i| format!("slow-n{i}")));
    let mut waited = 0;
    for task in tasks {
        let (answer, took) = task.await.unwrap();
        answer.unwrap();
        if took >= SLOW * 2 {
            waited += 1;
        }
    }
    // Never more than the bound at once; those past it waited for a turn, not for a retry.
    assert_eq!(
        tokens.most_slow.load(Ordering::SeqCst),
        MAX_ADMISSIONS_IN_FLIGHT
    );
    assert!(waited >= 16, "{waited} enrollments waited a turn");
    assert_eq!(running.status_document().plugins.len(), flood);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_enrollment_that_waits_past_its_turn_gets_503_and_says_why() {
    use factbuoy_aggregator::enroll::{ADMISSION_QUEUE_WAIT, MAX_ADMISSIONS_IN_FLIGHT};
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &[], true, &[]);
    let tokens = tokens();
    let running = Arc::new(enrolling(&run_dir, &tokens).await);
    let ca = std::fs::read_to_string(ca_file(&run_dir)).unwrap();
    let hanging = spawn_enrollments(
        &running,
        &ca,
        (0..MAX_ADMISSIONS_IN_FLIGHT).map(|_| "hang".to_owned()),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (answer, took) = enroll(&running, &ca, "token-late").await;
    let error = answer.unwrap_err();
    assert_eq!(error.status().map(|s| s.as_u16()), Some(503), "{error}");
    assert!(error.is_retryable());
    assert!(
        error.to_string().contains(&format!(
            "{MAX_ADMISSIONS_IN_FLIGHT} enrollments were being admitted for the {}s this one waited",
            ADMISSION_QUEUE_WAIT.as_secs()
        )),
        "{error}"
    );
    assert!(took >= ADMISSION_QUEUE_WAIT, "{took:?}");
    for task in hanging {
        let (answer, _) = task.await.unwrap();
        assert_eq!(answer.unwrap_err().status().map(|s| s.as_u16()), Some(503));
    }
    // Once the line is gone it is admitted.
    let (answer, _) = enroll(&running, &ca, "token-late").await;
    assert_eq!(answer.unwrap(), node("late"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fixed_run_refuses_nodes_not_in_it_and_a_skipped_node_is_refused_with_why() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &["a", "b"], false, &[]);
    let tokens = tokens();
    let running = enrolling(&run_dir, &tokens).await;
    let ca = std::fs::read_to_string(ca_file(&run_dir)).unwrap();
    let (answer, _) = enroll(&running, &ca, "token-z").await;
    let error = answer.unwrap_err();
    assert_eq!(error.status().map(|s| s.as_u16()), Some(403), "{error}");
    assert!(
        error.to_string().contains("not one of this run's nodes"),
        "{error}"
    );
    running
        .nodes()
        .skip(&node("b"), "untolerated taint x=y:NoSchedule")
        .await
        .unwrap();
    let (answer, _) = enroll(&running, &ca, "token-b").await;
    let error = answer.unwrap_err();
    assert_eq!(error.status().map(|s| s.as_u16()), Some(403), "{error}");
    assert!(error.to_string().contains("x=y:NoSchedule"), "{error}");
    let (answer, _) = enroll(&running, &ca, "token-a").await;
    assert_eq!(answer.unwrap(), node("a"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_staying_agent_waits_for_sigterm_after_delivering_and_runs_nothing_again() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &["a", "b"], false, &[]);
    let tokens = tokens();
    let running = enrolling(&run_dir, &tokens).await;
    let mut command = enrolling_agent(&running, &run_dir, "token-a");
    let mut child = command
        .arg("--stay-alive")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while pair_status(&running.status_document(), "hello", "a").as_deref() != Some("complete") {
        assert!(Instant::now() < deadline, "a's result never arrived");
        assert!(child.try_wait().unwrap().is_none(), "the agent ended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "the agent did not stay"
    );
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let stopped = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(5),
            "SIGTERM did not end it"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}");
    // One enrollment and one result: nothing ran twice.
    assert_eq!(tokens.calls.load(Ordering::SeqCst), 1);
    let metrics = running.metrics_text();
    assert!(
        metrics.contains("factbuoy_aggregator_results_total{outcome=\"succeeded\"} 1\n"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_credential_file_is_read_again_at_each_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &["a"], false, &[]);
    let tokens = tokens();
    let running = enrolling(&run_dir, &tokens).await;
    // The admission cannot decide yet; meanwhile kubelet rotates the token.
    let file = dir.path().join("token");
    std::fs::write(&file, "down").unwrap();
    let child = agent_with_token_file(&running, &run_dir, &file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while tokens.calls.load(Ordering::SeqCst) < 2 {
        assert!(Instant::now() < deadline, "the agent did not retry");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::write(&file, "token-a").unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        pair_status(&running.status_document(), "hello", "a").as_deref(),
        Some("complete")
    );
}

/// A Kubernetes run's operator holds a certificate from an operator CA of its own, whose key
/// never leaves its machine (docs/kubernetes.md); the run's `operator_ca` names that CA.
#[tokio::test(flavor = "multi_thread")]
async fn an_operator_ca_named_by_the_run_reaches_status_and_nothing_else() {
    use factbuoy_protocol::tls::Identity;

    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &["a"], false, &[]);
    let operator_ca = factbuoy_pki::RunCa::create("operator").unwrap();
    let run_ca = std::fs::read_to_string(run_dir.pki().join("ca.pem")).unwrap();
    // A certificate from the operator CA, presented to the run's server (trusting the run's CA).
    let holding = |role: &Role| {
        let issued = operator_ca.issue_client(role).unwrap();
        Identity {
            ca_pem: run_ca.clone(),
            cert_pem: issued.cert_pem,
            key_pem: issued.key_pem,
        }
    };
    let operator = holding(&Role::Operator {
        name: "laptop".into(),
    });
    let agent = holding(&Role::Agent { node: node("a") });

    // Not named by the run: refused at the handshake.
    let running = serve(&run_dir).await;
    let status = Client::new(&running.operator_address.to_string(), &operator)
        .unwrap()
        .status()
        .await;
    assert!(
        matches!(
            status,
            Err(ClientError::Handshake { .. }) | Err(ClientError::Http(_))
        ),
        "{status:?}"
    );
    drop(running);

    let mut config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run_dir.config()).unwrap()).unwrap();
    config["operator_ca"] = operator_ca.cert_pem().into();
    std::fs::write(run_dir.config(), serde_json::to_vec(&config).unwrap()).unwrap();
    let running = serve(&run_dir).await;
    let operators = Client::new(&running.operator_address.to_string(), &operator).unwrap();
    assert_eq!(operators.status().await.unwrap().run_id, config["run_id"]);
    // The operator CA's certificates are no agents': not at the agent listener...
    let plan = Client::new(&running.agent_address.to_string(), &agent)
        .unwrap()
        .plan(&Scope::Node(node("a")))
        .await;
    assert!(
        matches!(
            plan,
            Err(ClientError::Handshake { .. }) | Err(ClientError::Http(_))
        ),
        "{plan:?}"
    );
    // ...and at the operator listener, only the operator role may read status.
    let status = Client::new(&running.operator_address.to_string(), &agent)
        .unwrap()
        .status()
        .await;
    assert_eq!(status.unwrap_err().status().map(|s| s.as_u16()), Some(403));
}

/// Without `--spool` an agent spools into a private temporary directory, which goes with it:
/// agents run over and over (a DaemonSet, a timer) must not fill the temporary directory.
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_without_spool_leaves_no_directory_behind() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = create(dir.path(), &["a"], false, &[]);
    let running = serve(&run_dir).await;
    let credentials = issue(&run_dir, &Role::Agent { node: node("a") });
    let temporary = tempfile::tempdir().unwrap();
    let mut command = factbuoy();
    command
        .env("TMPDIR", temporary.path())
        .args(["agent", "--aggregator"])
        .arg(running.agent_address.to_string())
        .args(["--node", "a", "--retry-for", "30s", "--credentials"])
        .arg(&credentials);
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let left: Vec<_> = std::fs::read_dir(temporary.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "the agent left {left:?} behind");
}

//! Who may speak for what, and which names a run accepts: the real `factbuoy` binary as
//! aggregator and agents, curl and `openssl` as independent TLS clients, and certificates
//! forged with openssl from the run's own CA key, as an attacker holding it would.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::aggregator::{Aggregator, create_command, curl, manifest};

/// Signs a client certificate carrying `uri` with the run's CA key, bypassing every check
/// `aggregator issue` makes, and returns a credentials directory for it.
fn forge(aggregator: &Aggregator, uri: &str) -> PathBuf {
    let out = aggregator.root().join("forged");
    std::fs::create_dir_all(&out).unwrap();
    let pki = aggregator.run_dir().join("pki");
    std::fs::copy(pki.join("ca.pem"), out.join("ca.pem")).unwrap();
    std::fs::write(
        out.join("ext.cnf"),
        format!("subjectAltName=URI:{uri}\nextendedKeyUsage=clientAuth\n"),
    )
    .unwrap();
    let openssl = |args: &[&str]| {
        let status = Command::new("openssl")
            .args(args)
            .current_dir(&out)
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "openssl {args:?}");
    };
    openssl(&[
        "req",
        "-new",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "client.key",
        "-subj",
        "/CN=forged",
        "-out",
        "client.csr",
    ]);
    let ca_key = pki.join("ca.key");
    openssl(&[
        "x509",
        "-req",
        "-in",
        "client.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        ca_key.to_str().unwrap(),
        "-set_serial",
        "7",
        "-days",
        "1",
        "-extfile",
        "ext.cnf",
        "-out",
        "client.pem",
    ]);
    out
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn create_fails(nodes: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let output = create_command(dir.path(), nodes, &[]).output().unwrap();
    assert!(!output.status.success(), "creating a run with {nodes:?}");
    assert!(
        !dir.path().join("run").exists(),
        "a refused run left {}",
        dir.path().join("run").display()
    );
    stderr(&output)
}

#[test]
fn no_node_certificate_can_speak_for_the_global_scope() {
    let aggregator = Aggregator::create(
        &["a"],
        &["--plugin", "systemd-logs", "--global", "systemd-logs"],
    );
    // A certificate for node `global` made with the CA key itself gets nowhere near the global
    // result: neither through the node route nor through the global one.
    let forged = forge(&aggregator, "urn:factbuoy:agent:global");
    let fake = br#"{"forged":true}"#;
    for path in [
        "/api/v1/results/by-node/global/systemd-logs/files/cluster.json",
        "/api/v1/results/global/systemd-logs/files/cluster.json",
    ] {
        let answer = aggregator.put(&forged, path, fake);
        assert!(
            matches!(answer.status, 400 | 403),
            "{path}: {} {}",
            answer.status,
            answer.text()
        );
    }
    let commit = |credentials: &Path, path: &str, files: &[(&str, &[u8])]| {
        curl(
            credentials,
            "PUT",
            &format!("https://{}{path}", aggregator.agent),
            Some(&manifest("succeeded", files)),
            &[],
        )
    };
    let answer = commit(
        &forged,
        "/api/v1/results/by-node/global/systemd-logs",
        &[("cluster.json", fake)],
    );
    assert!(matches!(answer.status, 400 | 403), "{}", answer.text());
    assert!(
        !aggregator
            .run_dir()
            .join("staging/systemd-logs/global")
            .exists()
    );

    // `global` is refused as a node where names enter: creating a run and issuing a certificate.
    let refused = create_fails(&["a", "global"]);
    assert!(refused.contains("\"global\" is reserved"), "{refused}");
    let (output, _) = aggregator.try_issue("agent:global");
    assert!(!output.status.success());
    assert!(stderr(&output).contains("reserved"), "{}", stderr(&output));
    // A certificate for a node that is not part of the run is not issued either.
    let (output, _) = aggregator.try_issue("agent:b");
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("not a node of run"),
        "{}",
        stderr(&output)
    );

    // The real global uploader delivers the result, and it is what the bundle holds.
    let global = aggregator.issue("global:cluster");
    let real = br#"{"nodes":1}"#;
    let answer = aggregator.put(
        &global,
        "/api/v1/results/global/systemd-logs/files/cluster.json",
        real,
    );
    assert_eq!(answer.status, 201, "{}", answer.text());
    let answer = commit(
        &global,
        "/api/v1/results/global/systemd-logs",
        &[("cluster.json", real)],
    );
    assert_eq!(answer.status, 201, "{}", answer.text());
    assert!(aggregator.agent_run("a").status.success());
    aggregator.wait_for("complete", Duration::from_secs(60));
    let stored = aggregator
        .run_dir()
        .join("results/plugins/systemd-logs/results/global/cluster.json");
    assert_eq!(std::fs::read(stored).unwrap(), real);
}

#[test]
fn node_names_longer_than_a_file_name_holds_are_refused_where_they_enter() {
    // 253 characters is a valid DNS name, but `<node>.json` would not fit in 255 bytes.
    for length in [251, 253] {
        let refused = create_fails(&[&"n".repeat(length)]);
        assert!(refused.contains("at most 250"), "{refused}");
    }
    // The longest accepted name goes all the way through: agent, commit, record, bundle.
    let longest = "n".repeat(250);
    let aggregator = Aggregator::create(&[&longest], &[]);
    let (output, _) = aggregator.try_issue(&format!("agent:{}", "n".repeat(251)));
    assert!(!output.status.success());
    assert!(stderr(&output).contains("at most 250"));
    let output = aggregator.agent_run(&longest);
    assert!(output.status.success(), "{}", stderr(&output));
    let status = aggregator.wait_for("complete", Duration::from_secs(60));
    assert_eq!(status["plugins"][0]["result_status"], "passed", "{status}");
    let run = aggregator.run_dir();
    assert!(run.join(format!("commits/hello/{longest}.json")).exists());
    assert!(
        run.join(format!("results/meta/reports/hello/{longest}.json"))
            .exists()
    );
    // Routes refuse the longer name before anything else.
    let credentials = aggregator.issue(&format!("agent:{longest}"));
    let path = format!(
        "/api/v1/results/by-node/{}/hello/files/a.json",
        "n".repeat(251)
    );
    let answer = aggregator.put(&credentials, &path, b"{}");
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert!(answer.text().contains("at most 250"), "{}", answer.text());
}

#[test]
fn a_run_ends_even_when_an_error_result_cannot_be_recorded() {
    let aggregator = Aggregator::create(&["a", "ghost"], &["--lost-after", "2s"]);
    // A directory where ghost's record would go: writing it fails, as a full or broken disk
    // would make it fail.
    std::fs::create_dir_all(
        aggregator
            .run_dir()
            .join("commits/hello/ghost.json/blocked"),
    )
    .unwrap();
    assert!(aggregator.agent_run("a").status.success());
    // It ends failed, saying why, rather than retrying the record for ever.
    let status = aggregator.wait_for("failed", Duration::from_secs(30));
    let error = status["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("recording the error result of hello for ghost"),
        "{status}"
    );
    let a = status["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["node"] == "a")
        .unwrap()
        .clone();
    assert_eq!(a["status"], "complete", "{status}");
    std::thread::sleep(Duration::from_secs(2));
    let log = aggregator.log();
    // Said once as it happened; the summary printed when the run ends says it again, once.
    let said = |prefix: &str| {
        log.lines()
            .filter(|l| l.starts_with(prefix))
            .filter(|l| l.contains("recording the error result of hello for ghost"))
            .count()
    };
    assert_eq!(said("error: "), 1, "{log}");
    assert_eq!(said("The run failed: "), 1, "{log}");
    assert_eq!(
        log.matches("recording the error result of hello for ghost")
            .count(),
        2,
        "{log}"
    );
}

#[test]
fn names_unsafe_on_windows_or_macos_are_refused_where_they_enter() {
    for node in ["con", "nul.example.com", "com1"] {
        let refused = create_fails(&["a", node]);
        assert!(refused.contains("device name on Windows"), "{refused}");
    }
    let aggregator = Aggregator::create(&["a"], &[]);
    let agent = aggregator.issue("agent:a");
    for (encoded, rule) in [
        ("CON", "device name"),
        ("logs/nul.txt", "device name"),
        ("a.json%3Astream", "Windows refuses"),
        ("a%2A", "Windows refuses"),
        ("a%3F", "Windows refuses"),
        ("a%3Cb%3E", "Windows refuses"),
        ("a%7Cb", "Windows refuses"),
        ("a%22b", "Windows refuses"),
        ("trailing.", "ending in `.`"),
        ("trailing%20", "ending in `.`"),
        ("evil%E2%80%AEnosj.exe", "invisible"),
        ("zero%E2%80%8Bwidth.json", "invisible"),
        ("bom%EF%BB%BF.json", "invisible"),
        ("bell%07.json", "control character"),
        ("error.json", "reserved"),
        ("Error.JSON", "reserved"),
    ] {
        let path = format!("/api/v1/results/by-node/a/hello/files/{encoded}");
        let answer = aggregator.put(&agent, &path, b"{}");
        assert_eq!(answer.status, 400, "{encoded}: {}", answer.text());
        assert!(answer.text().contains(rule), "{encoded}: {}", answer.text());
    }
    assert!(!aggregator.run_dir().join("staging/hello/a").exists());
    // A manifest cannot name them either: a failed result's `error.json` is the aggregator's.
    let answer = curl(
        &agent,
        "PUT",
        &format!(
            "https://{}/api/v1/results/by-node/a/hello",
            aggregator.agent
        ),
        Some(&manifest("failed", &[("error.json", b"{}")])),
        &[],
    );
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert!(answer.text().contains("reserved"), "{}", answer.text());
    // Nor two names that are one path on macOS and Windows, each uploaded as it may be.
    let (lower, upper) = (b"{\"n\":1}", b"{\"n\":2}");
    for (name, bytes) in [("twin.json", &lower[..]), ("TWIN.json", &upper[..])] {
        let path = format!("/api/v1/results/by-node/a/hello/files/{name}");
        let answer = aggregator.put(&agent, &path, bytes);
        assert_eq!(answer.status, 201, "{name}: {}", answer.text());
    }
    let answer = curl(
        &agent,
        "PUT",
        &format!(
            "https://{}/api/v1/results/by-node/a/hello",
            aggregator.agent
        ),
        Some(&manifest(
            "succeeded",
            &[("twin.json", lower), ("TWIN.json", upper)],
        )),
        &[],
    );
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert!(
        answer.text().contains("case-insensitive"),
        "{}",
        answer.text()
    );
}

#[test]
fn an_upload_finishing_after_its_result_is_complete_gets_409_and_leaves_nothing() {
    // Node b keeps the run open once a's result is complete.
    let aggregator = Aggregator::create(&["a", "b"], &[]);
    let agent = aggregator.issue("agent:a");
    let late = vec![b'l'; 4096];
    // The late upload is accepted as the pair is still open, then its body stalls.
    let upload = aggregator.start_upload(
        &agent,
        "/api/v1/results/by-node/a/hello/files/late.json",
        &late,
        100,
    );
    std::thread::sleep(Duration::from_millis(500));
    let facts = br#"{"ok":true}"#;
    let answer = aggregator.put(
        &agent,
        "/api/v1/results/by-node/a/hello/files/facts.json",
        facts,
    );
    assert_eq!(answer.status, 201, "{}", answer.text());
    let answer = curl(
        &agent,
        "PUT",
        &format!(
            "https://{}/api/v1/results/by-node/a/hello",
            aggregator.agent
        ),
        Some(&manifest("succeeded", &[("facts.json", facts)])),
        &[],
    );
    assert_eq!(answer.status, 201, "{}", answer.text());
    // The result is complete: the rest of the late body arrives too late.
    let answer = upload.finish();
    assert!(answer.starts_with("HTTP/1.1 409"), "{answer}");
    assert!(answer.contains("already stored"), "{answer}");
    let staging = aggregator.run_dir().join("staging/hello/a");
    assert!(
        !staging.exists(),
        "{:?}",
        std::fs::read_dir(&staging).map(|d| d.count())
    );
    let incoming = aggregator.run_dir().join("staging/.incoming");
    assert_eq!(std::fs::read_dir(incoming).unwrap().count(), 0);
    let result = aggregator.run_dir().join("results/plugins/hello/results/a");
    assert!(result.join("facts.json").exists() && !result.join("late.json").exists());
}

#[test]
fn progress_past_its_caps_is_refused_and_status_stays_small() {
    let aggregator = Aggregator::create(&["a"], &[]);
    let agent = aggregator.issue("agent:a");
    let url = format!(
        "https://{}/api/v1/progress/by-node/a/hello",
        aggregator.agent
    );
    let send = |update: serde_json::Value| {
        curl(
            &agent,
            "POST",
            &url,
            Some(&serde_json::to_vec(&update).unwrap()),
            &[],
        )
    };
    let update = |msg: String, warnings: Vec<String>| {
        serde_json::json!({
            "plugin": "hello", "node": "a", "timestamp": "", "msg": msg,
            "total": 10, "completed": 1, "warnings": warnings,
        })
    };
    for (hostile, field) in [
        (update("m".repeat(4_000_000), vec![]), "`msg`"),
        (update("m".repeat(1025), vec![]), "`msg`"),
        (update("ok".into(), vec!["w".into(); 17]), "`warnings`"),
        (update("ok".into(), vec!["w".repeat(513)]), "`warnings`"),
    ] {
        let answer = send(hostile);
        assert_eq!(answer.status, 413, "{field}: {}", answer.text());
        assert!(answer.text().contains(field), "{}", answer.text());
    }
    let largest = update("m".repeat(1024), vec!["w".repeat(512); 16]);
    assert_eq!(send(largest).status, 202);
    let status = aggregator.operator_get("/status", &[]);
    assert_eq!(status.status, 200);
    assert!(status.body.len() < 16 << 10, "{} bytes", status.body.len());
    assert!(status.text().contains(&"m".repeat(1024)));
}

#[test]
fn a_finished_bundle_is_private_and_served_by_rfc_9110_ranges() {
    use std::os::unix::fs::PermissionsExt;
    let aggregator = Aggregator::create(&["a"], &[]);
    assert!(aggregator.agent_run("a").status.success());
    let status = aggregator.wait_for("complete", Duration::from_secs(60));
    let path = aggregator
        .out_dir()
        .join(status["tar_info"]["name"].as_str().unwrap());
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", path.display());
    let whole = std::fs::read(&path).unwrap();
    let size = whole.len();

    let get = |range: &str| aggregator.operator_get("/bundle", &[format!("range: {range}")]);
    let full = aggregator.operator_get("/bundle", &[]);
    assert_eq!((full.status, full.body.as_slice()), (200, whole.as_slice()));
    for (range, first, last) in [
        ("bytes=0-0".to_owned(), 0, 0),
        ("bytes=-5".to_owned(), size - 5, size - 1),
        ("bytes=10-19".to_owned(), 10, 19),
        (format!("bytes={}-", size - 3), size - 3, size - 1),
        (format!("bytes=5-{}", size + 100), 5, size - 1),
    ] {
        let answer = get(&range);
        assert_eq!(answer.status, 206, "{range}: {}", answer.text());
        assert_eq!(answer.body, &whole[first..=last], "{range}");
        assert_eq!(
            answer.header("content-range").as_deref(),
            Some(format!("bytes {first}-{last}/{size}").as_str()),
            "{range}"
        );
    }
    for range in [
        "bytes=10-5".to_owned(),
        format!("bytes={size}-"),
        "bytes=-0".to_owned(),
        "bytes=abc".to_owned(),
    ] {
        let answer = get(&range);
        assert_eq!(answer.status, 416, "{range}: {}", answer.text());
        assert_eq!(
            answer.header("content-range").as_deref(),
            Some(format!("bytes */{size}").as_str()),
            "{range}"
        );
    }
    // Several ranges, and other units, are answered with the whole bundle.
    for range in ["bytes=0-1,5-6", "items=0-1"] {
        let answer = get(range);
        assert_eq!(answer.status, 200, "{range}");
        assert_eq!(answer.body, whole, "{range}");
    }
    // The operator's downloaded copy is private too.
    let out = aggregator.root().join("retrieved");
    let output = support::aggregator::run(
        support::factbuoy()
            .args(["retrieve", "-o", "json", "--run-dir"])
            .arg(aggregator.run_dir())
            .arg("--out")
            .arg(&out),
    );
    let retrieved: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let copy = PathBuf::from(retrieved["path"].as_str().unwrap());
    assert_eq!(std::fs::read(&copy).unwrap(), whole);
    let mode = std::fs::metadata(&copy).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

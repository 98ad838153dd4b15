//! Who may speak for what, and which names a run accepts: the real `factbuoy` binary as
//! aggregator and agents, curl and `openssl` as independent TLS clients, and certificates
//! forged with openssl from the run's own CA key, as an attacker holding it would.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::aggregator::{Aggregator, create_command, curl, manifest};

/// Signs a client certificate carrying `uri` with the run's CA key, bypassing every check
/// `aggregator issue` makes, and returns a credentials directory for it.
fn forge(aggregator: &Aggregator, uri: &str) -> PathBuf {
    let out = aggregator.dir.path().join("forged");
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
    // `global` is refused as a node where names enter: creating a run and issuing a certificate.
    let refused = create_fails(&["a", "global"]);
    assert!(refused.contains("\"global\" is reserved"), "{refused}");
    let aggregator = Aggregator::create(&["a"], &["--plugin", "setup", "--global", "setup"]);
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

    // A certificate for node `global` made with the CA key itself gets nowhere near the global
    // result: neither through the node route nor through the global one.
    let forged = forge(&aggregator, "urn:factbuoy:agent:global");
    let fake = br#"{"forged":true}"#;
    for path in [
        "/api/v1/results/by-node/global/setup/files/cluster.json",
        "/api/v1/results/global/setup/files/cluster.json",
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
        "/api/v1/results/by-node/global/setup",
        &[("cluster.json", fake)],
    );
    assert!(matches!(answer.status, 400 | 403), "{}", answer.text());
    assert!(!aggregator.run_dir().join("staging/setup/global").exists());

    // The real global uploader delivers the result, and it is what the bundle holds.
    let global = aggregator.issue("global:cluster");
    let real = br#"{"nodes":1}"#;
    let answer = aggregator.put(
        &global,
        "/api/v1/results/global/setup/files/cluster.json",
        real,
    );
    assert_eq!(answer.status, 201, "{}", answer.text());
    let answer = commit(
        &global,
        "/api/v1/results/global/setup",
        &[("cluster.json", real)],
    );
    assert_eq!(answer.status, 201, "{}", answer.text());
    assert!(aggregator.agent_run("a").status.success());
    aggregator.wait_for("complete", Duration::from_secs(60));
    let stored = aggregator
        .run_dir()
        .join("results/plugins/setup/results/global/cluster.json");
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
    assert_eq!(status["plugins"][0]["result-status"], "passed", "{status}");
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
    let status = aggregator.wait_for("complete", Duration::from_secs(30));
    let ghost = status["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["node"] == "ghost")
        .unwrap()
        .clone();
    assert_eq!(ghost["status"], "lost", "{status}");
    assert_eq!(ghost["result-status"], "failed", "{status}");
    let log = aggregator.log();
    assert_eq!(
        log.matches("recording the error result of hello for ghost")
            .count(),
        1,
        "{log}"
    );
}

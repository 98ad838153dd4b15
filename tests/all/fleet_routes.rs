//! The fleet listener against hostile and mistaken clients (docs/protocol.md, "Fleet"): each
//! gets a clear error, and none enrolls anything or spends a token. The fleet is served in this
//! process on loopback; clients are the protocol crate's and curl.

use crate::support;
use crate::support::served::{serve_fleet, serve_fleet_with};

use std::path::Path;
use std::time::Duration;

use factbuoy_aggregator::fleet::{self, FleetDir, FleetSettings, PortRange, registry, tokens};
use factbuoy_protocol::fleet::{FleetRunRequest, FleetRunStarted, JoinRequest};
use factbuoy_protocol::names::{ArtifactName, NodeName};
use factbuoy_protocol::routes::Scope;
use factbuoy_protocol::tls::Identity;
use factbuoy_protocol::types::{ManifestFile, Outcome, PairStatus, ResultManifest, RunStatus};
use factbuoy_protocol::{Client, ClientError};

fn node(name: &str) -> NodeName {
    NodeName::parse(name).unwrap()
}

/// The status and message of a refused request.
fn refusal<T: std::fmt::Debug>(result: Result<T, ClientError>) -> (u16, String) {
    match result {
        Err(ClientError::Status {
            status, message, ..
        }) => (status.as_u16(), message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// `curl` without a client certificate, trusting the fleet CA: the status code and body.
fn anonymous_curl(ca: &Path, method: &str, url: &str, body: Option<&[u8]>) -> (u16, String) {
    let json = ["content-type: application/json".to_owned()];
    let answer = support::aggregator::curl_as(ca, None, method, url, body, &json);
    (answer.status, answer.text())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_fleet_refuses_hostile_and_mistaken_requests_and_enrolls_nothing_for_them() {
    let work = tempfile::tempdir().unwrap();
    let dir = FleetDir::new(work.path().join("fleet"));
    let running = serve_fleet(&dir).await;
    let address = running.address.to_string();
    let url = |path: &str| format!("https://{address}{path}");
    let ca_file = dir.operator().join("ca.pem");
    let ca = std::fs::read_to_string(&ca_file).unwrap();
    let pin = fleet::ca_pin(&dir).unwrap();
    let token = tokens::create(&dir, Duration::from_secs(3600), Some(1)).unwrap();
    let unspent = || tokens::list(&dir).unwrap()[0].used == 0;

    // Without a certificate only `join` is answered.
    let anonymous = Client::anonymous(&address, &ca).unwrap();
    let (status, message) = refusal(anonymous.next_run(0).await);
    assert_eq!(status, 403, "{message}");
    assert!(message.contains("join the fleet first"), "{message}");
    let (status, _) = refusal(anonymous.renew("x").await);
    assert_eq!(status, 403);

    // Malformed joins: nothing enrolled, the token unspent.
    let joiner = Client::pinned(&address, &pin).unwrap();
    let bad_csr = JoinRequest {
        token: token.clone(),
        node: node("a"),
        csr: "not a request".into(),
    };
    let (status, message) = refusal(joiner.join(&bad_csr).await);
    assert_eq!(status, 400, "{message}");
    assert!(message.contains("certificate signing request"), "{message}");
    let join_url = url("/api/v1/fleet/join");
    let hostile_name = format!(r#"{{"token":"{token}","node":"../etc","csr":"x"}}"#);
    let (status, body) = anonymous_curl(&ca_file, "POST", &join_url, Some(hostile_name.as_bytes()));
    assert_eq!(status, 400, "{body}");
    let reserved = format!(r#"{{"token":"{token}","node":"global","csr":"x"}}"#);
    assert_eq!(
        anonymous_curl(&ca_file, "POST", &join_url, Some(reserved.as_bytes())).0,
        400
    );
    let huge = vec![b' '; 20 << 10];
    let (status, body) = anonymous_curl(&ca_file, "POST", &join_url, Some(&huge));
    assert_eq!(status, 413, "{body}");
    assert_eq!(anonymous_curl(&ca_file, "GET", &join_url, None).0, 405);
    assert_eq!(
        anonymous_curl(&ca_file, "GET", &url("/api/v1/fleet/runs/next/+1"), None).0,
        404
    );
    assert!(registry::load(&dir).unwrap().is_empty());
    assert!(unspent(), "a refused join spent the token");

    // A real join, then its certificate used where it may not go.
    let key = factbuoy_pki::KeyRequest::new("a").unwrap();
    let joined = joiner
        .join(&JoinRequest {
            token: token.clone(),
            node: node("a"),
            csr: key.csr_pem.clone(),
        })
        .await
        .unwrap();
    let agent = Identity {
        ca_pem: joined.ca.clone(),
        cert_pem: joined.certificate.clone(),
        key_pem: key.key_pem,
    };
    let agent_client = Client::new(&address, &agent).unwrap();
    let (status, message) = refusal(
        agent_client
            .start_fleet_run(&FleetRunRequest {
                plugins: Vec::new(),
                timeout_seconds: 60,
                lost_after_seconds: 60,
            })
            .await,
    );
    assert_eq!(status, 403, "{message}");
    assert!(message.contains("operator"), "{message}");

    // An operator cannot poll for work, and asking for a plugin the fleet does not bundle is
    // refused before anything is made.
    let operator = Identity::from_files(
        &ca_file,
        &dir.operator().join("client.pem"),
        &dir.operator().join("client.key"),
    )
    .unwrap();
    let operator_client = Client::new(&address, &operator).unwrap();
    let (status, _) = refusal(operator_client.next_run(0).await);
    assert_eq!(status, 403);
    let foreign = serde_json::json!({
        "name": "mine", "sha256": "0".repeat(64), "scope": "per-node", "params": [],
        "grants": [], "denies": [], "deadline_seconds": 60, "definition": {},
    });
    let (status, message) = refusal(
        operator_client
            .start_fleet_run(&FleetRunRequest {
                plugins: vec![foreign],
                timeout_seconds: 60,
                lost_after_seconds: 60,
            })
            .await,
    );
    assert_eq!(status, 400, "{message}");
    assert!(
        message.contains("neither bundled") && message.contains("upload it first"),
        "{message}"
    );
    assert!(std::fs::read_dir(dir.runs()).unwrap().next().is_none());

    // Plugins from files are stored by digest, by operators only, and only whole.
    let wasm = std::fs::read(support::fixture("uptime")).unwrap();
    let sha256 = factbuoy_protocol::digest::sha256_hex(&wasm);
    let stored = work.path().join("fleet/plugins");
    let plugin_url = url(&format!("/api/v1/fleet/plugins/{sha256}"));
    let (status, message) = refusal(agent_client.store_fleet_plugin(&sha256, &wasm).await);
    assert_eq!(status, 403, "{message}");
    assert!(message.contains("operator"), "{message}");
    let (status, body) = anonymous_curl(&ca_file, "PUT", &plugin_url, Some(&wasm));
    assert_eq!(status, 403, "{body}");
    let (status, message) = refusal(
        operator_client
            .store_fleet_plugin(&sha256, b"not that plugin")
            .await,
    );
    assert_eq!(status, 400, "{message}");
    assert!(message.contains("sha-256"), "{message}");
    let operator_dir = dir.operator();
    let declared_huge = ["content-length: 999999999999".to_owned()];
    let answer = support::aggregator::curl_as(
        &ca_file,
        Some(&operator_dir),
        "PUT",
        &plugin_url,
        Some(b"x"),
        &declared_huge,
    );
    assert_eq!(answer.status, 413, "{}", answer.text());
    let traversal = url("/api/v1/fleet/plugins/../../pki/ca.key");
    let answer =
        support::aggregator::curl_as(&ca_file, Some(&operator_dir), "GET", &traversal, None, &[]);
    assert_eq!(answer.status, 404, "{}", answer.text());
    assert_eq!(
        std::fs::read_dir(&stored).unwrap().count(),
        0,
        "a refused upload left a file"
    );
    assert!(
        operator_client
            .store_fleet_plugin(&sha256, &wasm)
            .await
            .unwrap()
    );
    assert!(
        !operator_client
            .store_fleet_plugin(&sha256, &wasm)
            .await
            .unwrap(),
        "a stored plugin was uploaded again"
    );
    let uptime = serde_json::json!({
        "name": "uptime", "sha256": sha256, "scope": "per-node", "params": [],
        "grants": ["host-info"], "denies": [], "deadline_seconds": 60, "definition": {},
    });
    operator_client
        .start_fleet_run(&FleetRunRequest {
            plugins: vec![uptime],
            timeout_seconds: 60,
            lost_after_seconds: 60,
        })
        .await
        .unwrap();
    let run = std::fs::read_dir(dir.runs())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let linked = run.join("components").join(format!("{sha256}.wasm"));
    assert_eq!(
        std::fs::read(&linked).unwrap(),
        wasm,
        "the run lacks the stored plugin"
    );

    // Without a valid token, nothing is said about which names are enrolled.
    let taken = JoinRequest {
        token: format!("{}.{}", token.split_once('.').unwrap().0, "0".repeat(32)),
        node: node("a"),
        csr: factbuoy_pki::KeyRequest::new("a").unwrap().csr_pem,
    };
    let (status, message) = refusal(joiner.join(&taken).await);
    assert_eq!(status, 403, "{message}");
    assert!(!message.contains("enrolled"), "{message}");

    // Renewal replaces the certificate: the old one is refused from then on.
    let new_key = factbuoy_pki::KeyRequest::new("a").unwrap();
    agent_client.renew(&new_key.csr_pem).await.unwrap();
    let (status, message) = refusal(agent_client.next_run(0).await);
    assert_eq!(status, 403, "{message}");
    assert!(message.contains("replaced"), "{message}");
}

/// A small tmpfs, unmounted when dropped (root only).
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(at: &Path, options: &str) -> SmallDisk {
        std::fs::create_dir_all(at).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(at)
            .status()
            .unwrap();
        assert!(mounted.success(), "mounting a tmpfs needs root");
        SmallDisk(at.to_owned())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// What runs out on the small disk.
#[derive(Debug, Clone, Copy)]
enum Exhausted {
    Inodes,
    Blocks,
}

/// Takes everything `exhausted` names on the disk at `filler` but `left` units (inodes, or
/// 4 KiB pages).
fn fill(filler: &Path, exhausted: Exhausted, left: usize) {
    let _ = std::fs::remove_dir_all(filler);
    std::fs::create_dir_all(filler).unwrap();
    match exhausted {
        Exhausted::Inodes => {
            let mut made = Vec::new();
            for n in 0.. {
                let path = filler.join(n.to_string());
                if std::fs::File::create(&path).is_err() {
                    break;
                }
                made.push(path);
            }
            for path in made.iter().rev().take(left) {
                std::fs::remove_file(path).unwrap();
            }
        }
        Exhausted::Blocks => {
            use std::io::Write;
            let path = filler.join("blocks");
            let mut file = std::fs::File::create(&path).unwrap();
            let page = [0u8; 4096];
            while file.write_all(&page).and_then(|()| file.sync_all()).is_ok() {}
            let length = file.metadata().unwrap().len() / 4096 * 4096;
            file.set_len(length.saturating_sub(4096 * left as u64))
                .unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_join_the_disk_refuses_spends_no_token_and_records_no_node() {
    for exhausted in [Exhausted::Inodes, Exhausted::Blocks] {
        // With nothing left, then a little more each time, until a join fits; each the first
        // join of a fleet of its own (the first also makes `nodes/`).
        let mut refused = 0;
        for left in 0..12 {
            let work = tempfile::tempdir().unwrap();
            let disk = work.path().join("disk");
            let _mounted = SmallDisk::mount(&disk, "size=1m,nr_inodes=64,mode=0700");
            let dir = FleetDir::new(disk.join("fleet"));
            let running = serve_fleet(&dir).await;
            let joiner =
                Client::pinned(&running.address.to_string(), &fleet::ca_pin(&dir).unwrap())
                    .unwrap();
            // Tokens of a few hundred bytes each: the token file takes pages of its own.
            for _ in 0..11 {
                tokens::create(&dir, Duration::from_secs(3600), Some(1)).unwrap();
            }
            let token = tokens::create(&dir, Duration::from_secs(3600), Some(1)).unwrap();
            let request = JoinRequest {
                token: token.clone(),
                node: node("m"),
                csr: factbuoy_pki::KeyRequest::new("m").unwrap().csr_pem,
            };
            let filler = disk.join("filler");
            fill(&filler, exhausted, left);
            let answer = joiner.join(&request).await;
            std::fs::remove_dir_all(&filler).unwrap();
            if answer.is_ok() {
                break;
            }
            refused += 1;
            let (status, message) = refusal(answer);
            assert_eq!(status, 500, "{exhausted:?}, {left} left: {message}");
            // Nothing of the refused join stays: no node, no spent token.
            assert!(
                registry::load(&dir).unwrap().is_empty(),
                "{exhausted:?}, {left} left: a refused join recorded its node"
            );
            let id = token.split_once('.').unwrap().0;
            let used = tokens::list(&dir)
                .unwrap()
                .into_iter()
                .find(|t| t.id == id)
                .unwrap()
                .used;
            assert_eq!(
                used, 0,
                "{exhausted:?}, {left} left: a refused join spent its token"
            );
            // With room again, the same token joins.
            joiner.join(&request).await.unwrap_or_else(|e| {
                panic!("{exhausted:?}, {left} left: the token no longer joins: {e}")
            });
        }
        assert!(
            refused > 0,
            "{exhausted:?}: no join was refused: the disk never filled"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_machine_that_joins_again_starts_a_fresh_record() {
    let work = tempfile::tempdir().unwrap();
    let dir = FleetDir::new(work.path().join("fleet"));
    let running = serve_fleet(&dir).await;
    let address = running.address.to_string();
    let joiner = Client::pinned(&address, &fleet::ca_pin(&dir).unwrap()).unwrap();
    let join = |name: &str| {
        let key = factbuoy_pki::KeyRequest::new(name).unwrap();
        let request = JoinRequest {
            token: tokens::create(&dir, Duration::from_secs(3600), Some(1)).unwrap(),
            node: node(name),
            csr: key.csr_pem.clone(),
        };
        let joiner = joiner.clone();
        async move { (joiner.join(&request).await.unwrap(), key) }
    };

    // The first membership asks for work (with its agent's version), and is seen doing so.
    let (joined, key) = join("a").await;
    let agent = Identity {
        ca_pem: joined.ca.clone(),
        cert_pem: joined.certificate.clone(),
        key_pem: key.key_pem,
    };
    let polling = Client::new(&address, &agent).unwrap();
    let _ = tokio::time::timeout(Duration::from_millis(500), polling.next_run(0)).await;
    drop(running); // writes the last-seen times
    let first = registry::load(&dir).unwrap()[&node("a")].clone();
    assert!(first.agent_version.is_some(), "{first:?}");

    // Revoked, then joined again (another machine, say): nothing of the first membership
    // shows; what it says is the second's own (seen joining, with the agent that joined).
    registry::revoke(&dir, &node("a")).unwrap();
    let running = serve_fleet(&dir).await;
    let _ = join("a").await;
    let second = registry::load(&dir).unwrap()[&node("a")].clone();
    assert_ne!(second.enrolled_at, first.enrolled_at);
    assert_eq!(
        second.agent_version.as_deref(),
        Some(factbuoy_protocol::client::USER_AGENT),
        "{second:?}"
    );
    assert_ne!(second.last_seen, first.last_seen, "{second:?}");
    drop(running);
}

/// The fleet operator's identity, as the fleet wrote it into its directory.
fn operator_identity(dir: &FleetDir) -> Identity {
    Identity::from_files(
        &dir.operator().join("ca.pem"),
        &dir.operator().join("client.pem"),
        &dir.operator().join("client.key"),
    )
    .unwrap()
}

/// Joins the machine `name` to the fleet at `address` with a token of one use, as
/// `agent join` does; the member's identity.
async fn join_member(address: &str, dir: &FleetDir, name: &str) -> Identity {
    let key = factbuoy_pki::KeyRequest::new(name).unwrap();
    let joined = Client::pinned(address, &fleet::ca_pin(dir).unwrap())
        .unwrap()
        .join(&JoinRequest {
            token: tokens::create(dir, Duration::from_secs(3600), Some(1)).unwrap(),
            node: node(name),
            csr: key.csr_pem.clone(),
        })
        .await
        .unwrap();
    Identity {
        ca_pem: joined.ca,
        cert_pem: joined.certificate,
        key_pem: key.key_pem,
    }
}

/// Stores the `uptime` plugin in the fleet and starts a run of it over every member.
async fn start_uptime_run(operator: &Client) -> FleetRunStarted {
    let wasm = std::fs::read(support::fixture("uptime")).unwrap();
    let sha256 = factbuoy_protocol::digest::sha256_hex(&wasm);
    operator.store_fleet_plugin(&sha256, &wasm).await.unwrap();
    let uptime = serde_json::json!({
        "name": "uptime", "sha256": sha256, "scope": "per-node", "params": [],
        "grants": ["host-info"], "denies": [], "deadline_seconds": 60, "definition": {},
    });
    operator
        .start_fleet_run(&FleetRunRequest {
            plugins: vec![uptime],
            timeout_seconds: 600,
            lost_after_seconds: 600,
        })
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_revoked_during_a_run_is_refused_by_the_run_and_its_pairs_end_in_errors_that_say_so()
{
    let work = tempfile::tempdir().unwrap();
    let dir = FleetDir::new(work.path().join("fleet"));
    let running = serve_fleet(&dir).await;
    let address = running.address.to_string();
    let operator = operator_identity(&dir);
    let operator_client = Client::new(&address, &operator).unwrap();

    // r1 joins; a run with a plugin from a file starts over it.
    let member = Client::new(&address, &join_member(&address, &dir, "r1").await).unwrap();
    let started = start_uptime_run(&operator_client).await;

    // The member takes the offer and enrolls in the run, as `agent serve` does.
    let offer = member
        .next_run(0)
        .await
        .unwrap()
        .expect("an offer of the run");
    let run_address = format!("127.0.0.1:{}", offer.agent_port);
    let run_key = factbuoy_pki::KeyRequest::new("r1").unwrap();
    let enrolled = Client::anonymous(&run_address, &offer.ca)
        .unwrap()
        .enroll(&run_key.csr_pem, &offer.credential)
        .await
        .unwrap();
    let agent = Client::new(
        &run_address,
        &Identity {
            ca_pem: enrolled.ca.clone(),
            cert_pem: enrolled.certificate.clone(),
            key_pem: run_key.key_pem,
        },
    )
    .unwrap();
    let scope = Scope::Node(node("r1"));
    let artifact = work.path().join("uptime.json");
    std::fs::write(&artifact, b"{\"seconds\": 1}").unwrap();
    let artifact_sha256 = factbuoy_protocol::digest::sha256_hex(b"{\"seconds\": 1}");
    let name = ArtifactName::parse("uptime.json").unwrap();
    agent.plan(&scope).await.unwrap();
    agent.heartbeat(&node("r1")).await.unwrap();
    agent
        .put_file(&scope, "uptime", &name, &artifact, &artifact_sha256)
        .await
        .unwrap();
    // Its next long poll waits for a later run.
    let waiting = tokio::spawn({
        let member = member.clone();
        async move { member.next_run(offer.number).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Revoked between its enrollment and its commit: from that moment every request it makes
    // to the run is refused, before anything it sends is taken.
    registry::revoke(&dir, &node("r1")).unwrap();
    let refused_with = |(status, message): (u16, String)| {
        assert_eq!(status, 403, "{message}");
        assert!(message.contains("node r1 was revoked"), "{message}");
    };
    refused_with(refusal(agent.plan(&scope).await));
    refused_with(refusal(agent.heartbeat(&node("r1")).await));
    refused_with(refusal(
        agent
            .put_file(&scope, "uptime", &name, &artifact, &artifact_sha256)
            .await,
    ));
    let manifest = ResultManifest {
        outcome: Outcome::Succeeded,
        error: None,
        files: vec![ManifestFile {
            name: "uptime.json".into(),
            size: std::fs::metadata(&artifact).unwrap().len(),
            sha256: artifact_sha256.clone(),
        }],
        plugin_version: "1".into(),
        report: None,
    };
    refused_with(refusal(agent.commit(&scope, "uptime", &manifest).await));
    // Its parked poll ends with the refusal, without waiting out its period.
    let polled = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the revoked node's long poll went on")
        .unwrap();
    refused_with(refusal(polled));

    // The run does not wait for it: its pair ends in an error result that says why, and the
    // run ends long before its lost window or its timeout.
    let run_operator = Client::new(
        &format!("127.0.0.1:{}", started.operator_port),
        &Identity {
            ca_pem: started.ca.clone(),
            ..operator.clone()
        },
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        let status = run_operator.status().await.unwrap();
        if status.status == RunStatus::Complete {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run still waits for the revoked node: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let pair = &status.plugins[0];
    assert_eq!(
        (pair.node.as_str(), pair.status),
        ("r1", PairStatus::Skipped),
        "{status:?}"
    );
    let error = pair.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("node r1") && error.contains("revoked from the fleet during the run"),
        "{error}"
    );

    // The bundle holds the error result and nothing the node sent.
    let bundle = dir.bundles().join(&status.tar_info.unwrap().name);
    let listing = std::process::Command::new("tar")
        .arg("-tzf")
        .arg(&bundle)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout).into_owned();
    assert!(
        listing.contains("plugins/uptime/errors/r1/error.json"),
        "{listing}"
    );
    assert!(!listing.contains("/results/r1"), "{listing}");
    drop(running);
}

type ByHand = rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>;

/// A TLS connection to the fleet as `identity`, to speak HTTP/1.1 on by hand; reads give up
/// after 10 s.
fn by_hand(address: &str, identity: &Identity) -> ByHand {
    let tcp = std::net::TcpStream::connect(address).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let config = factbuoy_protocol::tls::client_config(identity).unwrap();
    let connection =
        rustls::ClientConnection::new(config, "127.0.0.1".try_into().unwrap()).unwrap();
    rustls::StreamOwned::new(connection, tcp)
}

/// Writes a poll for a run after 0 (asking to be parked, or not), and reads the answer's head
/// byte by byte, so that nothing after it is taken from the stream.
fn poll_by_hand(stream: &mut ByHand, park: bool) -> String {
    use std::io::{Read, Write};
    let upgrade = if park {
        "connection: upgrade\r\nupgrade: factbuoy-parked-poll\r\n"
    } else {
        ""
    };
    write!(
        stream,
        "GET /api/v1/fleet/runs/next/0 HTTP/1.1\r\nhost: 127.0.0.1\r\n{upgrade}\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8];
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap().to_ascii_lowercase()
}

/// Reads a line, or what there is until the fleet closes the stream (or 10 s pass).
fn line_by_hand(stream: &mut ByHand) -> std::io::Result<String> {
    use std::io::Read;
    let mut line = Vec::new();
    while !line.ends_with(b"\n") {
        let mut byte = [0u8];
        match stream.read(&mut byte)? {
            0 => break,
            _ => line.push(byte[0]),
        }
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parked_poll_is_told_idle_every_period_and_changed_when_a_run_starts_then_speaks_http_again()
 {
    let work = tempfile::tempdir().unwrap();
    let dir = FleetDir::new(work.path().join("fleet"));
    // A short period between idle lines, so that the test does not wait the default's.
    const IDLE_SECONDS: u64 = 10;
    let running = serve_fleet_with(
        &dir,
        FleetSettings {
            idle_seconds: IDLE_SECONDS,
            ..support::served::loopback_fleet()
        },
    )
    .await;
    let address = running.address.to_string();
    let operator = Client::new(&address, &operator_identity(&dir)).unwrap();
    let identity = join_member(&address, &dir, "p1").await;

    // Nothing to answer: 101, naming the period, and then nothing on the stream.
    let (mut parked, mut hostile, parked_at) = tokio::task::spawn_blocking({
        let (address, identity) = (address.clone(), identity.clone());
        move || {
            let mut parked = by_hand(&address, &identity);
            let head = poll_by_hand(&mut parked, true);
            let parked_at = std::time::Instant::now();
            assert!(head.starts_with("http/1.1 101"), "{head}");
            assert!(head.contains("upgrade: factbuoy-parked-poll"), "{head}");
            assert!(
                head.contains(&format!("factbuoy-idle-seconds: {IDLE_SECONDS}\r\n")),
                "{head}"
            );
            let mut hostile = by_hand(&address, &identity);
            let head = poll_by_hand(&mut hostile, true);
            assert!(head.starts_with("http/1.1 101"), "{head}");
            (parked, hostile, parked_at)
        }
    })
    .await
    .unwrap();

    // An agent that writes on its parked poll breaks the protocol: the fleet closes it.
    let broken = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        hostile
            .write_all(b"GET /api/v1/fleet/runs/next/0 HTTP/1.1\r\nhost: x\r\n\r\n")
            .unwrap();
        line_by_hand(&mut hostile)
    })
    .await
    .unwrap();
    let closed = match &broken {
        Ok(line) => line.is_empty(),
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    };
    assert!(
        closed,
        "the fleet did not close a parked poll that sent bytes out of turn: {broken:?}"
    );

    // Nothing for a period: the parked poll hears `idle`, not before, and its acknowledgement
    // is the node's sign of life.
    let last_seen = || {
        std::thread::sleep(Duration::from_secs(6)); // the fleet writes them every 5 s
        registry::load(&dir).unwrap()[&node("p1")].last_seen.clone()
    };
    let seen_polling = last_seen();
    let (line, mut parked, waited) = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        parked
            .sock
            .set_read_timeout(Some(Duration::from_secs(IDLE_SECONDS + 20)))
            .unwrap();
        let line = line_by_hand(&mut parked).unwrap();
        let waited = parked_at.elapsed();
        parked.write_all(b"\n").unwrap();
        parked.flush().unwrap();
        (line, parked, waited)
    })
    .await
    .unwrap();
    assert_eq!(line, "idle\n");
    assert!(
        waited >= Duration::from_secs(IDLE_SECONDS - 1),
        "idle came {waited:?} after parking, before the period of {IDLE_SECONDS} s"
    );
    assert_ne!(
        last_seen(),
        seen_polling,
        "the acknowledged idle line was not seen"
    );

    // A run starts: the parked poll hears `changed`, and the same connection then carries an
    // ordinary poll, answered with the offer at once.
    let started = start_uptime_run(&operator).await;
    let (line, head, body) = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let line = line_by_hand(&mut parked).unwrap();
        let head = poll_by_hand(&mut parked, false);
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .expect("a content-length")
            .trim()
            .parse()
            .unwrap();
        let mut body = vec![0; length];
        parked.read_exact(&mut body).unwrap();
        (line, head, body)
    })
    .await
    .unwrap();
    assert_eq!(line, "changed\n");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let offer: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(offer["run_id"], started.run_id, "{offer}");

    // The protocol crate's client parks its polls too, and takes the same offer.
    let member = Client::new(&address, &identity).unwrap().keep_alive();
    let offer = member.next_run(0).await.unwrap().expect("an offer");
    assert_eq!(offer.run_id, started.run_id);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_refuses_to_serve_with_an_idle_period_outside_one_second_to_fifteen_minutes() {
    for idle_seconds in [0, 15 * 60 + 1] {
        let work = tempfile::tempdir().unwrap();
        let settings = FleetSettings {
            idle_seconds,
            ..support::served::loopback_fleet()
        };
        let refused = fleet::serve(
            FleetDir::new(work.path().join("fleet")),
            settings,
            factbuoy_catalog::bundled_component,
        )
        .await
        .err()
        .unwrap_or_else(|| panic!("served with idle lines every {idle_seconds} s"));
        assert!(
            refused.to_string().contains("give one from 1 s to 900 s"),
            "{refused:#}"
        );
    }
}

/// `count` consecutive ports on 127.0.0.1 that nothing listens on now.
fn free_ports(count: u16) -> PortRange {
    (20_000..60_000)
        .step_by(usize::from(count) + 7)
        .map(|first| PortRange {
            first,
            last: first + count - 1,
        })
        .find(|range| {
            range
                .ports()
                .all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        })
        .expect("free ports")
}

#[tokio::test(flavor = "multi_thread")]
async fn with_run_ports_each_run_listens_on_two_ports_of_the_range_and_a_run_finding_none_free_is_refused()
 {
    let work = tempfile::tempdir().unwrap();
    let dir = FleetDir::new(work.path().join("fleet"));
    let range = free_ports(4);
    let running = serve_fleet_with(
        &dir,
        FleetSettings {
            run_ports: Some(range),
            ..support::served::loopback_fleet()
        },
    )
    .await;
    let address = running.address.to_string();
    let operator = Client::new(&address, &operator_identity(&dir)).unwrap();
    let member = Client::new(&address, &join_member(&address, &dir, "p1").await).unwrap();

    let first = start_uptime_run(&operator).await;
    let offer = member.next_run(0).await.unwrap().expect("an offer");
    let second = start_uptime_run(&operator).await;
    let second_offer = member.next_run(offer.number).await.unwrap();
    let mut taken = vec![first.operator_port, offer.agent_port, second.operator_port];
    taken.extend(second_offer.map(|o| o.agent_port));
    for port in &taken {
        assert!(
            range.ports().contains(port),
            "port {port} is outside {range}"
        );
    }
    let distinct: std::collections::BTreeSet<_> =
        [first.operator_port, offer.agent_port, second.operator_port].into();
    assert_eq!(distinct.len(), 3, "two listeners share a port: {taken:?}");

    // Both runs hold the four ports: a third is refused, saying why and what to do.
    let wasm = std::fs::read(support::fixture("uptime")).unwrap();
    let uptime = serde_json::json!({
        "name": "uptime", "sha256": factbuoy_protocol::digest::sha256_hex(&wasm),
        "scope": "per-node", "params": [], "grants": ["host-info"], "denies": [],
        "deadline_seconds": 60, "definition": {},
    });
    let (status, message) = refusal(
        operator
            .start_fleet_run(&FleetRunRequest {
                plugins: vec![uptime],
                timeout_seconds: 60,
                lost_after_seconds: 60,
            })
            .await,
    );
    assert_eq!(status, 503, "{message}");
    assert!(
        message.contains(&format!(
            "no two free ports in the fleet's run ports {range}"
        )) && message.contains("--run-ports"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn anyone_learns_from_healthz_that_the_fleet_serves_and_nothing_else() {
    let work = tempfile::tempdir().unwrap();
    let dir = FleetDir::new(work.path().join("fleet"));
    let running = serve_fleet(&dir).await;
    let ca = dir.root().join("pki/ca.pem");
    let url = format!("https://127.0.0.1:{}/healthz", running.address.port());
    assert_eq!(
        anonymous_curl(&ca, "GET", &url, None),
        (200, "ok\n".to_owned())
    );
    let (status, _) = anonymous_curl(&ca, "POST", &url, Some(b"{}"));
    assert_eq!(status, 405);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_process_serving_the_same_directory_waits_until_the_first_stops() {
    let work = tempfile::tempdir().unwrap();
    let dir = FleetDir::new(work.path().join("fleet"));
    let first = serve_fleet(&dir).await;
    let second = tokio::spawn({
        let dir = dir.clone();
        async move { serve_fleet(&dir).await.address }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!second.is_finished(), "two fleets serve one directory");
    drop(first);
    tokio::time::timeout(Duration::from_secs(20), second)
        .await
        .expect("the second fleet still waits after the first stopped")
        .unwrap();
}

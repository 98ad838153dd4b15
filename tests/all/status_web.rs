//! `factbuoy status --web` with the real binary and a real local run: who gets 403 (no token, a
//! wrong one, another Host or Origin) and that they get no data; the status API's event stream
//! read over HTTP by a client that is not the page; and the page itself in headless Chromium
//! (status-browser.mjs), showing a run with a slow plugin change without a reload.

use crate::support;
use crate::support::status_page;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A private state directory, where runs are started and the page server reads them.
struct Host {
    dir: tempfile::TempDir,
}

impl Host {
    fn new() -> Self {
        Host {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = support::factbuoy();
        command
            .env("FACTBUOY_STATE_DIR", self.dir.path().join("state"))
            .args(args);
        command
    }

    /// Starts `factbuoy run --node this-host ARGS` in the background and waits for its id.
    fn start_run(&self, args: &[&str]) -> (Killed, String) {
        let run = self
            .command(&["run", "--node", "this-host", "--out"])
            .arg(self.dir.path().join("out"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let give_up = Instant::now() + Duration::from_secs(60);
        let current = self.dir.path().join("state/current-run.json");
        while !current.exists() {
            assert!(Instant::now() < give_up, "waited a minute for the run");
            std::thread::sleep(Duration::from_millis(50));
        }
        let status = self.command(&["status", "-o", "json"]).output().unwrap();
        assert!(status.status.success(), "{}", text(&status.stderr));
        let document: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
        (Killed(run), document["run_id"].as_str().unwrap().to_owned())
    }

    /// [`Host::start_run`] of a run that goes on for a few seconds, reporting progress as it
    /// goes (hostile's progress mode: `steps` steps of 300 ms), with setup failing at once
    /// beside it.
    fn start_slow_run_with_a_failure(&self, steps: u32) -> (Killed, String) {
        let hostile = support::fixture("hostile");
        let steps = format!("hostile:count={steps}");
        self.start_run(&[
            "--plugin",
            hostile.to_str().unwrap(),
            "-p",
            "hostile:mode=progress",
            "-p",
            &steps,
            "--plugin",
            "setup",
            "-p",
            "setup:gather_subset=bogus",
        ])
    }

    /// Starts `factbuoy status --web ARGS` and reads the URL it prints.
    fn serve(&self, args: &[&str]) -> Served {
        let mut command = self.command(&["status", "--web"]);
        command.args(args);
        serve(command)
    }
}

/// Starts `command`, a `factbuoy status --web`, and reads the URL it prints.
fn serve(mut command: Command) -> Served {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_owned();
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .expect(&url);
    let (authority, rest) = rest.split_once('/').unwrap();
    let (path, token) = rest.split_once("?token=").unwrap();
    Served {
        _child: Killed(child),
        url: url.clone(),
        authority: authority.to_owned(),
        path: format!("/{path}"),
        token: token.to_owned(),
    }
}

/// A child process killed when the test ends, passed or not.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running `status --web`.
struct Served {
    _child: Killed,
    url: String,
    /// `127.0.0.1:PORT`.
    authority: String,
    /// The path the URL opens.
    path: String,
    token: String,
}

/// An answer: its status, head and body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Served {
    /// `GET path` with `Host: host` and the extra `headers`, over a connection of its own.
    fn get_as(&self, host: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
        self.request("GET", host, path, headers)
    }

    /// `METHOD path` with `Host: host` and the extra `headers`, over a connection of its own.
    fn request(&self, method: &str, host: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
        let mut stream = TcpStream::connect(&self.authority).unwrap();
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: 0\r\n"
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        Answer {
            status: head[9..12].parse().unwrap(),
            head: head.to_owned(),
            body: body.to_owned(),
        }
    }

    fn get(&self, path: &str, headers: &[(&str, &str)]) -> Answer {
        self.get_as(&self.authority.clone(), path, headers)
    }

    /// The `status` events of `/api/v1/runs/{id}/events`, until the stream ends (the run did)
    /// or `give_up` passes. HTTP/1.0, so the stream comes unchunked and ends with the
    /// connection.
    fn events(&self, run_id: &str, give_up: Duration) -> Vec<serde_json::Value> {
        let mut stream = TcpStream::connect(&self.authority).unwrap();
        stream.set_read_timeout(Some(give_up)).unwrap();
        write!(
            stream,
            "GET /api/v1/runs/{run_id}/events HTTP/1.0\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
            self.authority, self.token
        )
        .unwrap();
        let mut lines = BufReader::new(stream).lines();
        let status = lines.next().unwrap().unwrap();
        assert!(status.contains(" 200 "), "{status}");
        let mut head = Vec::new();
        for line in lines.by_ref() {
            let line = line.unwrap();
            if line.is_empty() {
                break;
            }
            head.push(line.to_ascii_lowercase());
        }
        assert!(
            head.contains(&"content-type: text/event-stream".to_owned()),
            "{head:?}"
        );
        let deadline = Instant::now() + give_up;
        let mut events = Vec::new();
        let mut kind = String::new();
        for line in lines {
            let Ok(line) = line else { break };
            if let Some(name) = line.strip_prefix("event: ") {
                kind = name.to_owned();
            } else if let Some(data) = line.strip_prefix("data: ") {
                assert_eq!(kind, "status");
                events.push(serde_json::from_str(data).unwrap());
            }
            assert!(Instant::now() < deadline, "the stream did not end");
        }
        events
    }
}

/// Where a document of the status API breaks its published schema
/// (host/watch/schema/status-api.v1.json), one line each.
fn schema_errors(document: &serde_json::Value) -> Vec<String> {
    let path = support::workspace().join("host/watch/schema/status-api.v1.json");
    let schema: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("the schema itself is valid");
    validator
        .iter_errors(document)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The pair of `plugin` in a view's status document.
fn pair<'a>(view: &'a serde_json::Value, plugin: &str) -> &'a serde_json::Value {
    view["status"]["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["plugin"] == plugin)
        .unwrap_or_else(|| panic!("no {plugin} in {view}"))
}

#[test]
fn without_the_token_or_from_another_host_or_origin_a_request_gets_403_and_no_data() {
    let host = Host::new();
    let (_run, run_id) = host.start_run(&["--plugin", "hello"]);
    let served = host.serve(&[]);
    assert_eq!(served.path, format!("/runs/{run_id}"), "{}", served.url);
    let token = served.token.clone();
    let wrong = "0".repeat(token.len());
    let cookie = |token: &str| {
        let port = served.authority.rsplit(':').next().unwrap().to_owned();
        format!("factbuoy-status-{port}={token}")
    };
    let run = format!("/api/v1/runs/{run_id}");
    let events = format!("/api/v1/runs/{run_id}/events");
    let refused = [
        ("no token", served.get(&run, &[])),
        ("no token, events", served.get(&events, &[])),
        ("no token, page", served.get(&served.path, &[])),
        ("no token, list", served.get("/api/v1/runs", &[])),
        (
            "a wrong token",
            served.get(&format!("{run}?token={wrong}"), &[]),
        ),
        (
            "a wrong cookie",
            served.get(&run, &[("Cookie", &cookie(&wrong))]),
        ),
        (
            "a wrong bearer",
            served.get(&run, &[("Authorization", &format!("Bearer {wrong}"))]),
        ),
        (
            "another Host",
            served.get_as("evil.example", &format!("{run}?token={token}"), &[]),
        ),
        (
            "another Origin",
            served.get(
                &format!("{run}?token={token}"),
                &[("Origin", "http://evil.example")],
            ),
        ),
    ];
    for (what, answer) in refused {
        assert_eq!(answer.status, 403, "{what}: {}", answer.head);
        assert!(
            answer.body.starts_with("forbidden: "),
            "{what}: {}",
            answer.body
        );
        assert!(!answer.body.contains(&run_id), "{what}: {}", answer.body);
        assert!(
            !answer.head.contains("set-cookie"),
            "{what}: {}",
            answer.head
        );
    }

    // The token in the URL: the page sets the cookie and drops the token from the address.
    let opened = served.get(&format!("{}?token={token}", served.path), &[]);
    assert_eq!(opened.status, 303, "{}", opened.head);
    assert!(opened.head.contains(&format!("location: {}", served.path)));
    let set = opened
        .head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .expect(&opened.head);
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let by_cookie = served.get(
        &run,
        &[
            ("Cookie", &cookie(&token)),
            ("Origin", &format!("http://{}", served.authority)),
        ],
    );
    assert_eq!(by_cookie.status, 200, "{}", by_cookie.body);
    let view: serde_json::Value = serde_json::from_str(&by_cookie.body).unwrap();
    assert_eq!(view["api_version"], "factbuoy.status/v1");
    assert_eq!(view["run_id"], run_id.as_str());
    assert_eq!(schema_errors(&view), Vec::<String>::new(), "{view}");
    let list = served.get("/api/v1/runs", &[("Cookie", &cookie(&token))]);
    let list: serde_json::Value = serde_json::from_str(&list.body).unwrap();
    assert_eq!(list["runs"][0]["run_id"], run_id.as_str(), "{list}");
    assert_eq!(schema_errors(&list), Vec::<String>::new(), "{list}");

    // Without TLS it will not listen where others could read it; nor on every address, as it
    // answers one Host.
    let refused = host
        .command(&["status", "--web", "--listen", "192.0.2.1:0"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr)
            .contains("192.0.2.1:0 is not a loopback address: serving there needs TLS"),
        "{}",
        text(&refused.stderr)
    );
    let refused = host
        .command(&["status", "--web", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(
        text(&refused.stderr).contains("0.0.0.0:0 is every address"),
        "{}",
        text(&refused.stderr)
    );
}

/// `status --web --tls-cert --tls-key`: HTTPS with the operator's certificate, which a real TLS
/// client (curl) checks against its CA; the token and the Origin rules hold, the Origin now
/// `https://`; plain HTTP gets no answer.
#[test]
fn with_a_certificate_the_page_serves_https_with_the_same_checks() {
    let host = Host::new();
    let (_run, run_id) = host.start_run(&["--plugin", "hello"]);
    let ca = factbuoy_pki::RunCa::create("statuspage").unwrap();
    let issued = ca.issue_server(&["127.0.0.1".to_owned()]).unwrap();
    let files = host.dir.path();
    std::fs::write(files.join("ca.pem"), ca.cert_pem()).unwrap();
    std::fs::write(files.join("page.pem"), &issued.cert_pem).unwrap();
    std::fs::write(files.join("page.key"), &issued.key_pem).unwrap();
    let mut command = host.command(&["status", "--web", "--tls-cert"]);
    command
        .arg(files.join("page.pem"))
        .arg("--tls-key")
        .arg(files.join("page.key"))
        .args(["--out"])
        .arg(files.join("retrieved"));
    let served = serve(command);
    assert!(
        served.url.starts_with("https://127.0.0.1:"),
        "{}",
        served.url
    );
    let base = format!("https://{}", served.authority);
    let curl = |args: &[&str]| {
        let output = Command::new("curl")
            .args(["-s", "-o", "-", "-w", "\n%{http_code}", "--cacert"])
            .arg(files.join("ca.pem"))
            .args(args)
            .output()
            .unwrap();
        let out = text(&output.stdout);
        let (body, code) = out.rsplit_once('\n').unwrap_or(("", &out));
        (output.status.code(), code.to_owned(), body.to_owned())
    };
    let bearer = format!("Authorization: Bearer {}", served.token);
    let (_, code, body) = curl(&["-H", &bearer, &format!("{base}/api/v1/runs/{run_id}")]);
    assert_eq!(code, "200", "{body}");
    let view: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(view["run_id"], run_id.as_str());
    // The token still: none gets 403 over TLS too.
    let (_, code, body) = curl(&[&format!("{base}/api/v1/runs/{run_id}")]);
    assert_eq!(code, "403", "{body}");
    assert!(!body.contains(&run_id), "{body}");
    // The Origin is https://: the http:// one is another site's.
    let retrieve = format!("{base}/api/v1/runs/{run_id}/retrieve");
    let plain_origin = format!("Origin: http://{}", served.authority);
    let (_, code, _) = curl(&["-X", "POST", "-H", &bearer, "-H", &plain_origin, &retrieve]);
    assert_eq!(code, "403");
    assert!(!files.join("retrieved").exists());
    let origin = format!("Origin: {base}");
    let (_, code, body) = curl(&["-X", "POST", "-H", &bearer, "-H", &origin, &retrieve]);
    assert_eq!(code, "200", "{body}");
    // The cookie the token sets is for HTTPS only.
    let (_, code, head) = curl(&["-D", "-", &format!("{base}/?token={}", served.token)]);
    assert_eq!(code, "303", "{head}");
    assert!(head.contains("; Secure"), "{head}");
    // A client that does not trust the CA refuses the server; plain HTTP gets no page.
    let untrusted = Command::new("curl")
        .args(["-s", "-o", "/dev/null", &format!("{base}/")])
        .status()
        .unwrap();
    assert_eq!(
        untrusted.code(),
        Some(60),
        "curl: the peer's certificate is not trusted"
    );
    let (_, code, _) = curl(&["--max-time", "10", &format!("http://{}/", served.authority)]);
    assert_ne!(code, "403");
    assert_ne!(code, "200");
}

#[test]
fn the_event_stream_shows_a_run_change_as_it_goes_until_it_ends() {
    let host = Host::new();
    let (_run, run_id) = host.start_slow_run_with_a_failure(20);
    let served = host.serve(&[&run_id]);
    let views = served.events(&run_id, Duration::from_secs(120));
    assert!(views.len() >= 3, "{views:?}");
    for view in &views {
        assert_eq!(view["run_id"], run_id.as_str());
        assert_eq!(schema_errors(view), Vec::<String>::new(), "{view}");
    }
    // Each event differs from the one before: the stream says what changed, not that time passed.
    for two in views.windows(2) {
        assert_ne!(two[0]["status"], two[1]["status"], "{two:?}");
    }
    // The slow plugin's progress moves while the run goes on, event by event.
    let steps: Vec<u64> = views
        .iter()
        .filter(|v| v["status"]["status"] == "running")
        .filter_map(|v| pair(v, "hostile")["progress"]["completed"].as_u64())
        .collect();
    assert!(
        steps.windows(2).all(|w| w[0] <= w[1]) && steps.first() < steps.last(),
        "{steps:?}"
    );
    // setup's failure is told while the run is still going.
    assert!(
        views.iter().any(|v| v["status"]["status"] == "running"
            && pair(v, "setup")["result_status"] == "failed"
            && pair(v, "hostile")["result_status"].is_null()),
        "{views:?}"
    );
    // The last event is the end, with the bundle.
    let last = views.last().unwrap();
    assert_eq!(last["ended"], true, "{last}");
    assert_eq!(last["status"]["status"], "complete", "{last}");
    assert_eq!(pair(last, "hostile")["result_status"], "passed", "{last}");
    let tar = &last["status"]["tar_info"];
    assert!(tar["sha256"].as_str().unwrap().len() == 64, "{last}");
    let path = PathBuf::from(last["bundle_path"].as_str().unwrap());
    assert_eq!(std::fs::metadata(&path).unwrap().len(), tar["size"]);
    assert_eq!(last["retrieve"], format!("factbuoy retrieve {run_id}"));
    // A local run's bundle is on this machine already: its report is served without a retrieve.
    let report = served.get(
        &format!("/runs/{run_id}/report"),
        &[("Authorization", &format!("Bearer {}", served.token))],
    );
    assert_eq!(report.status, 200, "{}", report.body);
    assert!(report.body.contains("<!doctype html>") && report.body.contains("this-host"));
}

/// Runs status-browser.mjs on `url` (in `mode`, if any), saving its screenshot to `shot`: what it
/// saw.
fn browse(url: &str, shot: &Path, mode: Option<&str>) -> serde_json::Value {
    status_page::browse(Command::new("node"), url, shot, mode)
}

/// Set to refresh docs/images/status-live.png, docs/status.md's picture of a live run, with the
/// screenshot this test takes (left alone otherwise, so that a test run leaves the tree clean).
const UPDATE_SCREENSHOT: &str = "FACTBUOY_UPDATE_SCREENSHOT";

#[test]
fn the_page_shows_a_run_live_in_headless_chromium_without_a_reload_or_a_script_error() {
    let host = Host::new();
    let (_run, run_id) = host.start_slow_run_with_a_failure(30);
    let retrieved_into = host.dir.path().join("retrieved");
    let served = host.serve(&["--out", retrieved_into.to_str().unwrap()]);
    let shot = host.dir.path().join("status-live.png");
    let seen = browse(&served.url, &shot, None);
    status_page::assert_live_then_retrieved(&seen, &run_id, "this-host");
    // The token left the address bar for the cookie.
    assert!(!seen["href"].as_str().unwrap().contains("token"), "{seen}");
    assert_eq!(seen["navigations"], 1, "{seen}");
    let estimate = seen["estimate"].as_str().unwrap_or_default();
    assert!(
        estimate.starts_with("about ") && estimate.ends_with(" left"),
        "{seen}"
    );
    // At its end: the bundle and how to retrieve it.
    let bundle = seen["bundle"].as_str().unwrap();
    assert!(
        bundle.contains(&format!("factbuoy retrieve {run_id}")),
        "{seen}"
    );
    let tar_name = format!("_factbuoy_{run_id}.tar.gz");
    assert!(bundle.contains(&tar_name), "{seen}");
    // Retrieve, one click away: the bundle downloaded into --out.
    let files: Vec<String> = std::fs::read_dir(&retrieved_into)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        files.len() == 1 && files[0].ends_with(&tar_name),
        "{files:?}"
    );
    assert!(
        seen["report"]["text"]
            .as_str()
            .unwrap()
            .contains("this-host"),
        "{seen}"
    );
    // The list of runs, one click away: the run, its state as `factbuoy runs` says it.
    let row = seen["runs_row"].as_str().unwrap();
    assert!(
        row.contains(&run_id) && row.contains("complete, 1 failed"),
        "{seen}"
    );

    // The docs' screenshot, taken above while the run was live.
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a screenshot");
    if std::env::var_os(UPDATE_SCREENSHOT).is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/images/status-live.png");
        std::fs::write(docs, png).unwrap();
    }
}

/// The nodes of the large run [`a_run_of_5000_nodes_shows_summaries_and_pages_its_node_table`]
/// makes up.
const LARGE_RUN_NODES: usize = 5000;

/// A run of 5,000 nodes: the page draws summaries and one page of 200 nodes, pages on, and
/// filters, without an error. The run is a real one whose final status is then replaced by one
/// of 5,000 nodes, some failed and some lost, which the server reads as it reads any ended
/// local run's.
#[test]
fn a_run_of_5000_nodes_shows_summaries_and_pages_its_node_table() {
    let host = Host::new();
    let (mut run, run_id) = host.start_run(&["--plugin", "hello"]);
    assert!(run.0.wait().unwrap().success());
    let final_status = host
        .dir
        .path()
        .join("state/runs")
        .join(&run_id)
        .join("final-status.json");
    let mut document: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&final_status).unwrap()).unwrap();
    let mut pairs = Vec::new();
    for n in 0..LARGE_RUN_NODES {
        for plugin in ["hello", "setup", "host-facts"] {
            let mut pair = serde_json::json!({
                "plugin": plugin,
                "node": format!("node-{n:04}"),
                "status": "complete",
                "result_status": "passed",
                "last_heartbeat": "2026-11-28T18:00:00Z",
            });
            if n % 250 == 7 {
                pair["status"] = "lost".into();
                pair["result_status"] = "failed".into();
                pair["error"] = "node-lost: no heartbeat for 60s".into();
            } else if plugin == "setup" && n % 100 == 3 {
                pair["result_status"] = "failed".into();
                pair["error"] = format!("setup failed: reason {}", n % 3).into();
            }
            pairs.push(pair);
        }
    }
    document["plugins"] = pairs.into();
    std::fs::write(&final_status, serde_json::to_vec(&document).unwrap()).unwrap();

    let served = host.serve(&[&run_id]);
    let shot = host.dir.path().join("large.png");
    let seen = browse(&served.url, &shot, Some("large"));
    assert_eq!(seen["errors"], serde_json::json!([]), "{seen}");
    let before = &seen["before"];
    assert_eq!(before["rows"], 200, "{seen}");
    assert_eq!(before["pageOf"], "page 1 of 25", "{seen}");
    assert_eq!(before["title"], "Nodes (5000)", "{seen}");
    assert_eq!(before["plugins"], 3, "{seen}");
    // Three reasons setup failed, and the lost nodes' one.
    assert_eq!(before["groups"], 4, "{seen}");
    // 20 lost nodes of 3 pairs each: the first 50 listed, the rest counted.
    assert_eq!(before["problems"], 50, "{seen}");
    assert!(
        before["problemsMore"].as_str().unwrap().contains("10 more"),
        "{seen}"
    );
    let after = &seen["after"];
    assert_eq!(after["pageOf"], "page 2 of 25", "{seen}");
    assert_eq!(after["firstNode"], "node-0200", "{seen}");
    // 50 nodes with setup failed and 20 lost.
    assert_eq!(after["onlyProblems"], "Nodes (70 of 5000)", "{seen}");
    eprintln!(
        "a {LARGE_RUN_NODES}-node run's page drew in {} ms",
        seen["first_draw_ms"]
    );
}

/// Starts `run --fleet` of `plugins` over `fleet`'s member in the background and waits until it
/// is the operator's current run: its id.
fn start_fleet_run(fleet: &mut support::loopback_fleet::LoopbackFleet, plugins: &[&str]) -> String {
    let run = fleet
        .operator()
        .args(["run", "--fleet", &fleet.address, "--out"])
        .arg(fleet.path("out"))
        .args(plugins)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    fleet.processes.push(run);
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        let status = fleet.operator().args(["status", "-o", "json"]).output();
        if let Ok(status) = status
            && status.status.success()
        {
            let document: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
            return document["run_id"].as_str().unwrap().to_owned();
        }
        assert!(
            Instant::now() < give_up,
            "waited a minute for the fleet run"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The page in headless Chromium for a fleet run (a real `fleet serve` and one member on
/// loopback): it fills in without a reload as the member's slow plugin reports progress, puts
/// setup's failure on the member at the top while the run goes on, and retrieves the bundle from
/// the fleet with one click, its report opened, without a script error.
#[test]
fn a_fleet_run_shows_live_in_headless_chromium_and_is_retrieved_with_one_click() {
    let mut fleet = support::loopback_fleet::LoopbackFleet::start();
    let hostile = support::fixture("hostile");
    let run_id = start_fleet_run(
        &mut fleet,
        &[
            "--plugin",
            hostile.to_str().unwrap(),
            "-p",
            "hostile:mode=progress",
            "-p",
            "hostile:count=30",
            "--plugin",
            "setup",
            "-p",
            "setup:gather_subset=bogus",
        ],
    );
    let retrieved = fleet.path("retrieved");
    let mut command = fleet.operator();
    command
        .args(["status", "--web", &run_id, "--out"])
        .arg(&retrieved);
    let served = serve(command);
    let seen = browse(&served.url, &fleet.path("fleet-live.png"), None);
    status_page::assert_live_then_retrieved(&seen, &run_id, "member-1");
    let bundles = support::loopback_fleet::listing(&retrieved);
    assert!(
        bundles.len() == 1 && bundles[0].ends_with(&format!("_factbuoy_{run_id}.tar.gz")),
        "{bundles:?}"
    );
}

/// A fleet run (a real `fleet serve` and one member on loopback) watched through the page
/// server: its events change as the member's slow plugin reports progress, until it ends; the
/// bundle is then retrieved from the fleet with one POST from the page's origin, and its HTML
/// report is served. A POST from another origin, or with none, gets 403 and downloads nothing.
#[test]
fn a_fleet_run_shows_live_then_its_bundle_is_retrieved_and_reported_from_the_page() {
    let mut fleet = support::loopback_fleet::LoopbackFleet::start();
    let hostile = support::fixture("hostile");
    let run_id = start_fleet_run(
        &mut fleet,
        &[
            "--plugin",
            hostile.to_str().unwrap(),
            "-p",
            "hostile:mode=progress",
            "-p",
            "hostile:count=20",
        ],
    );
    let bundles = fleet.path("retrieved");
    let mut command = fleet.operator();
    command
        .args(["status", "--web", &run_id, "--out"])
        .arg(&bundles);
    let served = serve(command);

    let views = served.events(&run_id, Duration::from_secs(120));
    for view in &views {
        assert_eq!(view["kind"], "fleet", "{view}");
        assert_eq!(schema_errors(view), Vec::<String>::new(), "{view}");
    }
    let steps: Vec<u64> = views
        .iter()
        .filter(|v| v["status"]["status"] == "running")
        .filter_map(|v| pair(v, "hostile")["progress"]["completed"].as_u64())
        .collect();
    assert!(
        steps.len() >= 2
            && steps.windows(2).all(|w| w[0] <= w[1])
            && steps[0] < steps[steps.len() - 1],
        "{steps:?}"
    );
    let last = views.last().unwrap();
    assert_eq!(last["ended"], true, "{last}");
    assert_eq!(pair(last, "hostile")["node"], "member-1", "{last}");
    assert_eq!(pair(last, "hostile")["result_status"], "passed", "{last}");
    // A fleet run's bundle is on the fleet's host, not here, until it is retrieved.
    assert!(last["bundle_path"].is_null(), "{last}");
    let tar = &last["status"]["tar_info"];

    let bearer = format!("Bearer {}", served.token);
    let ours = format!("http://{}", served.authority);
    let retrieve = format!("/api/v1/runs/{run_id}/retrieve");
    let report = format!("/runs/{run_id}/report");
    let post =
        |headers: &[(&str, &str)]| served.request("POST", &served.authority, &retrieve, headers);
    // Not from this page: refused, and nothing downloaded.
    for (what, answer) in [
        (
            "another Origin",
            post(&[
                ("Authorization", &bearer),
                ("Origin", "http://evil.example"),
            ]),
        ),
        ("no Origin", post(&[("Authorization", &bearer)])),
        ("no token", post(&[("Origin", &ours)])),
    ] {
        assert_eq!(answer.status, 403, "{what}: {}", answer.body);
        assert!(!answer.body.contains(&run_id), "{what}: {}", answer.body);
    }
    let by_get = served.get(&retrieve, &[("Authorization", &bearer)]);
    assert_eq!(by_get.status, 405, "{}", by_get.body);
    assert!(!bundles.exists(), "a refused retrieve wrote {bundles:?}");
    // No report before the bundle is here.
    let early = served.get(&report, &[("Authorization", &bearer)]);
    assert_eq!(early.status, 409, "{}", early.body);

    // From the page: the bundle, checked against the run's size and digest.
    let retrieved = post(&[("Authorization", &bearer), ("Origin", &ours)]);
    assert_eq!(retrieved.status, 200, "{}", retrieved.body);
    let fetched: serde_json::Value = serde_json::from_str(&retrieved.body).unwrap();
    let path = PathBuf::from(fetched["path"].as_str().unwrap());
    assert_eq!(path.parent().unwrap(), bundles, "{fetched}");
    assert_eq!(fetched["sha256"], tar["sha256"], "{fetched}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), tar["size"]);

    // Its report, the one `inspect report` writes.
    let page = served.get(&report, &[("Authorization", &bearer)]);
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.head.contains("content-type: text/html"),
        "{}",
        page.head
    );
    assert!(
        page.body.contains("<!doctype html>"),
        "{}",
        &page.body[..200]
    );
    assert!(page.body.contains("member-1"), "the report names the node");
    assert!(page.body.contains(&run_id), "the report names the run");
}

/// Two machines of their own, removed when dropped: network namespaces joined by a veth pair,
/// the page server's at `server_ip` and a browser's at the other end. Their names and subnet are
/// this process's, so that two test runs at once never meet.
struct TwoHosts {
    server: String,
    client: String,
    server_ip: String,
}

impl TwoHosts {
    fn new() -> TwoHosts {
        let slot = std::process::id() % 200;
        let hosts = TwoHosts {
            server: format!("fbweb-s-{slot}"),
            client: format!("fbweb-c-{slot}"),
            server_ip: format!("10.214.{slot}.1"),
        };
        let (server, client) = (hosts.server.as_str(), hosts.client.as_str());
        let (server_end, client_end) = (format!("fbws{slot}"), format!("fbwc{slot}"));
        for ns in [server, client] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        for args in [
            vec!["netns", "add", server],
            vec!["netns", "add", client],
            vec![
                "link",
                "add",
                &server_end,
                "type",
                "veth",
                "peer",
                "name",
                &client_end,
            ],
            vec!["link", "set", &server_end, "netns", server],
            vec!["link", "set", &client_end, "netns", client],
            vec![
                "-n",
                server,
                "addr",
                "add",
                &format!("{}/30", hosts.server_ip),
                "dev",
                &server_end,
            ],
            vec![
                "-n",
                client,
                "addr",
                "add",
                &format!("10.214.{slot}.2/30"),
                "dev",
                &client_end,
            ],
            vec!["-n", server, "link", "set", &server_end, "up"],
            vec!["-n", client, "link", "set", &client_end, "up"],
            vec!["-n", server, "link", "set", "lo", "up"],
            vec!["-n", client, "link", "set", "lo", "up"],
        ] {
            let made = Command::new("ip").args(&args).output().unwrap();
            assert!(made.status.success(), "ip {args:?}: {}", text(&made.stderr));
        }
        hosts
    }

    /// `program` on machine `ns`.
    fn on(ns: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", ns]).arg(program);
        command
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        for ns in [&self.server, &self.client] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

#[test]
fn off_loopback_the_page_serves_https_at_its_address_to_another_machine_with_the_same_checks() {
    let host = Host::new();
    let (mut run, run_id) = host.start_run(&["--plugin", "hello"]);
    // Ended, so that the other machine's page server reads it from the state directory (a local
    // run's aggregator listens on this machine's loopback).
    assert!(run.0.wait().unwrap().success());
    let hosts = TwoHosts::new();
    let ca = factbuoy_pki::RunCa::create("statuspage").unwrap();
    let issued = ca
        .issue_server(std::slice::from_ref(&hosts.server_ip))
        .unwrap();
    let files = host.dir.path();
    std::fs::write(files.join("ca.pem"), ca.cert_pem()).unwrap();
    std::fs::write(files.join("page.pem"), &issued.cert_pem).unwrap();
    std::fs::write(files.join("page.key"), &issued.key_pem).unwrap();
    let mut command = TwoHosts::on(&hosts.server, env!("CARGO_BIN_EXE_factbuoy"));
    command
        .env("FACTBUOY_STATE_DIR", files.join("state"))
        .args(["status", "--web", &run_id, "--listen"])
        .arg(format!("{}:0", hosts.server_ip))
        .arg("--tls-cert")
        .arg(files.join("page.pem"))
        .arg("--tls-key")
        .arg(files.join("page.key"));
    let served = serve(command);
    let base = format!("https://{}", served.authority);
    assert!(
        served
            .url
            .starts_with(&format!("{base}/runs/{run_id}?token=")),
        "{}",
        served.url
    );
    // curl on `ns`: its exit code, the HTTP status and the body.
    let curl = |ns: &str, args: &[&str]| {
        let output = TwoHosts::on(ns, "curl")
            .args([
                "-s",
                "--max-time",
                "10",
                "-o",
                "-",
                "-w",
                "\n%{http_code}",
                "--cacert",
            ])
            .arg(files.join("ca.pem"))
            .args(args)
            .output()
            .unwrap();
        let out = text(&output.stdout);
        let (body, code) = out.rsplit_once('\n').unwrap_or(("", &out));
        (output.status.code(), code.to_owned(), body.to_owned())
    };
    let run_url = format!("{base}/api/v1/runs/{run_id}");
    let bearer = format!("Authorization: Bearer {}", served.token);
    // From the other machine: the run, with the token; 403 and no data without it.
    let (_, code, body) = curl(&hosts.client, &["-H", &bearer, &run_url]);
    assert_eq!(code, "200", "{body}");
    let view: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(view["run_id"], run_id.as_str());
    assert_eq!(view["status"]["status"], "complete", "{view}");
    let (_, code, body) = curl(&hosts.client, &[&run_url]);
    assert_eq!(code, "403", "{body}");
    assert!(!body.contains(&run_id), "{body}");
    // HTTPS only: plain HTTP to the same port gets no page.
    let (_, code, body) = curl(
        &hosts.client,
        &[
            "-H",
            &bearer,
            &format!("http://{}/api/v1/runs/{run_id}", served.authority),
        ],
    );
    assert!(code != "200" && code != "403", "{code} {body}");
    // It listens at its address only: not on the server machine's loopback.
    let port = served.authority.rsplit_once(':').unwrap().1;
    let (exit, _, _) = curl(
        &hosts.server,
        &[
            "-H",
            &bearer,
            &format!("https://127.0.0.1:{port}/api/v1/runs/{run_id}"),
        ],
    );
    assert_eq!(
        exit,
        Some(7),
        "curl: connection refused on 127.0.0.1:{port}"
    );
}

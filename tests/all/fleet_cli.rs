//! A fleet run from the fleet's own machine as an operator meets it, on loopback with the real
//! binary: the fleet served from a directory of its own, a member joining with a state directory
//! of its own and serving, and `run --fleet` finding the operator credentials by itself.
//! (tests/all/fleet.rs puts members on machines of their own.)

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::support::factbuoy;

/// `factbuoy` with the operator's state directory in `state`.
fn operator(state: &Path) -> Command {
    let mut command = factbuoy();
    command.env("FACTBUOY_STATE_DIR", state);
    command
}

/// Kills the processes it holds when dropped, so a failing test leaves none behind.
struct Processes(Vec<Child>);

impl Drop for Processes {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn run_fleet_on_the_fleets_machine_finds_its_credentials_and_the_member_says_what_it_serves() {
    let work = tempfile::tempdir().unwrap();
    let state = work.path().join("operator-state");
    let fleet_dir = work.path().join("somewhere-else/fleet");
    let member_dir = work.path().join("member-state");
    let mut processes = Processes(Vec::new());

    // The fleet, served from a directory that is not the default one.
    let mut fleet = operator(&state)
        .args([
            "fleet",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--name",
            "127.0.0.1",
        ])
        .arg("--dir")
        .arg(&fleet_dir)
        .args(["-o", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(fleet.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    processes.0.push(fleet);
    let served: serde_json::Value = serde_json::from_str(&first).unwrap();
    let address = served["address"].as_str().unwrap().to_owned();

    let token = operator(&state)
        .args(["fleet", "token", "create", "-o", "json", "--dir"])
        .arg(&fleet_dir)
        .output()
        .unwrap();
    assert!(token.status.success(), "{}", text(&token.stderr));
    let token: serde_json::Value = serde_json::from_slice(&token.stdout).unwrap();

    // The join names the state directory `agent serve` must be given too.
    let joined = factbuoy()
        .args(["agent", "join", &address, "--node", "member-1"])
        .args(["--token", token["token"].as_str().unwrap()])
        .args(["--ca-pin", token["ca_pin"].as_str().unwrap()])
        .arg("--state-dir")
        .arg(&member_dir)
        .output()
        .unwrap();
    assert!(joined.status.success(), "{}", text(&joined.stderr));
    let hint = format!(
        "`factbuoy agent serve --state-dir {}`",
        member_dir.display()
    );
    assert!(
        text(&joined.stdout).contains(&hint),
        "{}",
        text(&joined.stdout)
    );

    // Serving, the member says so first.
    let mut member = factbuoy()
        .args(["agent", "serve", "--state-dir"])
        .arg(&member_dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    BufReader::new(member.stderr.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    processes.0.push(member);
    assert_eq!(
        said.trim(),
        format!("serving the fleet at {address} as node member-1; waiting for runs")
    );

    // No --fleet-credentials: the run finds those of the fleet this machine serves there.
    let out = work.path().join("out");
    let ran = operator(&state)
        .args(["run", "--fleet", &address, "--plugin", "hello", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    assert!(text(&ran.stdout).contains("hello"), "{}", text(&ran.stdout));

    // `fleet nodes` lines its columns up under their headings.
    let nodes = operator(&state)
        .args(["fleet", "nodes", "--dir"])
        .arg(&fleet_dir)
        .output()
        .unwrap();
    let nodes = text(&nodes.stdout);
    let lines: Vec<&str> = nodes.lines().collect();
    assert_eq!(lines.len(), 2, "{nodes}");
    for heading in ["LAST SEEN", "AGENT", "ENROLLED", "CERTIFICATE EXPIRES"] {
        let column = lines[0].find(heading).unwrap();
        let cell = &lines[1][column..];
        assert!(
            column > 0 && lines[1].as_bytes()[column - 1] == b' ' && !cell.starts_with(' '),
            "{heading} is not lined up:\n{nodes}"
        );
    }
}

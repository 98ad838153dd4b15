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

/// `line` run by the shell as a person would paste it, `factbuoy` on the PATH, with the
/// operator's state directory in `state`.
fn shell(state: &Path, line: &str) -> std::process::Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_factbuoy")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("sh")
        .args(["-c", line])
        .env("PATH", path)
        .env("FACTBUOY_STATE_DIR", state)
        .env("FACTBUOY_CACHE_DIR", crate::support::cache_dir())
        .output()
        .unwrap()
}

/// `fleet serve` of `dir` on loopback, as the operator of `state`: its output piped.
fn fleet_serve(state: &Path, dir: &Path) -> Command {
    let mut command = operator(state);
    command
        .args([
            "fleet",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--name",
            "127.0.0.1",
        ])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    command
}

/// `fleet serve` on loopback from `dir`, with the operator's state directory in `state`: the
/// process, and the line it printed once it listened.
fn serve_fleet(state: &Path, dir: &Path) -> (Child, String) {
    let mut fleet = fleet_serve(state, dir).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(fleet.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("fleet listening on "), "{line}");
    (fleet, line)
}

#[test]
fn run_fleet_on_the_fleets_machine_finds_its_credentials_and_the_member_says_what_it_serves() {
    let work = tempfile::tempdir().unwrap();
    let state = work.path().join("operator-state");
    let fleet_dir = work.path().join("somewhere-else/fleet");
    let member_dir = work.path().join("member-state");
    let mut processes = Processes(Vec::new());

    // The fleet, served from a directory that is not the default one.
    let (fleet, first) = serve_fleet(&state, &fleet_dir);
    processes.0.push(fleet);
    let address = first
        .strip_prefix("fleet listening on ")
        .and_then(|rest| rest.split_once(' '))
        .unwrap_or_else(|| panic!("{first}"))
        .0
        .to_owned();

    // The hint it prints runs as printed, and so does the join line that prints.
    let hint = first.split('`').nth(1).unwrap_or_else(|| panic!("{first}"));
    let token = shell(&state, hint);
    assert!(token.status.success(), "{hint}: {}", text(&token.stderr));
    let join = text(&token.stdout).trim().to_owned();
    // The token is not on the agent's command line, which every local user can read.
    let agent = join
        .split_once("| ")
        .map_or(join.as_str(), |(_, agent)| agent);
    assert!(
        agent.starts_with("factbuoy agent join") && !agent.contains(" --token "),
        "{join}"
    );
    let joined = shell(
        &state,
        &format!(
            "{join} --node member-1 --state-dir {}",
            member_dir.display()
        ),
    );
    // The join names the state directory `agent serve` must be given too.
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

    // `fleet nodes` finds the fleet as `run --fleet` does, and lines its columns up under
    // their headings.
    let nodes = operator(&state).args(["fleet", "nodes"]).output().unwrap();
    assert!(nodes.status.success(), "{}", text(&nodes.stderr));
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

/// A client without a certificate that pipelines requests and never reads an answer, as an
/// attacker holding a connection slot does: it writes until the server stops taking its
/// requests (its answers fill the buffers), and keeps the connection open.
fn slow_reader(
    address: &str,
    ca_pem: &str,
) -> Option<rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>> {
    use std::io::Write;
    let tcp = std::net::TcpStream::connect(address).ok()?;
    tcp.set_write_timeout(Some(std::time::Duration::from_millis(500)))
        .unwrap();
    let config = factbuoy_protocol::tls::anonymous_client_config(ca_pem).unwrap();
    let connection =
        rustls::ClientConnection::new(config, "127.0.0.1".try_into().unwrap()).unwrap();
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    let burst = b"GET /api/v1/fleet/nothing HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n".repeat(256);
    for _ in 0..200 {
        if stream.write_all(&burst).is_err() {
            break;
        }
    }
    Some(stream)
}

/// Waits for `child` for at most `timeout`; `None` (and the child killed) when it runs longer.
fn wait_with_timeout(
    mut child: Child,
    timeout: std::time::Duration,
) -> Option<std::process::Output> {
    let deadline = std::time::Instant::now() + timeout;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Some(child.wait_with_output().unwrap())
}

#[test]
fn anonymous_clients_that_never_read_keep_no_machine_from_joining_and_no_run_from_starting() {
    let work = tempfile::tempdir().unwrap();
    let state = work.path().join("operator-state");
    let fleet_dir = work.path().join("fleet");
    let member_dir = work.path().join("member-state");
    let fleet_log = work.path().join("fleet.log");
    let mut processes = Processes(Vec::new());

    // The fleet, allowed 200 open files: a budget an attacker could fill with 54 connections
    // when every client shared one pool.
    let mut fleet = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -n 200 && exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_factbuoy"))
        .args(["fleet", "serve", "--listen", "127.0.0.1:0"])
        .args(["--name", "127.0.0.1", "-o", "json", "--dir"])
        .arg(&fleet_dir)
        .env("FACTBUOY_STATE_DIR", &state)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&fleet_log).unwrap())
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

    // More clients that never read than the fleet has slots of any kind, eight at a time (as
    // many as its handshake slots: none is dropped before it holds a slot).
    let ca_pem = std::fs::read_to_string(fleet_dir.join("operator/ca.pem")).unwrap();
    let mut attackers = Vec::new();
    for _ in 0..10 {
        attackers.extend(std::thread::scope(|scope| {
            let batch: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| slow_reader(&address, &ca_pem)))
                .collect();
            batch
                .into_iter()
                .map(|a| a.join().unwrap())
                .collect::<Vec<_>>()
        }));
    }

    // A machine joins, within a moment rather than after its retries give up.
    let join = factbuoy()
        .args(["agent", "join", &address, "--node", "member-1"])
        .args(["--token", token["token"].as_str().unwrap()])
        .args(["--ca-pin", token["ca_pin"].as_str().unwrap()])
        .arg("--state-dir")
        .arg(&member_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let joined = wait_with_timeout(join, std::time::Duration::from_secs(30))
        .expect("the join did not end within 30 s: the attackers held its slot");
    assert!(joined.status.success(), "{}", text(&joined.stderr));

    // It polls and uploads, and the operator starts runs: two, one after the other.
    let member = factbuoy()
        .args(["agent", "serve", "--state-dir"])
        .arg(&member_dir)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    processes.0.push(member);
    for round in 0..2 {
        let out = work.path().join(format!("out-{round}"));
        let ran = operator(&state)
            .args(["run", "--fleet", &address, "--plugin", "hello", "--out"])
            .arg(&out)
            .arg("--fleet-credentials")
            .arg(fleet_dir.join("operator"))
            .output()
            .unwrap();
        assert!(ran.status.success(), "{}", text(&ran.stderr));
        assert!(text(&ran.stdout).contains("hello"), "{}", text(&ran.stdout));
    }

    // The fleet said once, when it started, that its descriptors lower its budgets.
    let log = std::fs::read_to_string(&fleet_log).unwrap();
    assert_eq!(log.matches("serving at most").count(), 1, "{log}");
}

#[test]
fn the_operator_credentials_exported_where_the_fleet_serves_are_imported_whole_and_nothing_else_is()
{
    let work = tempfile::tempdir().unwrap();
    let state = work.path().join("operator-state");
    let fleet_dir = work.path().join("fleet");
    let (fleet, _) = serve_fleet(&state, &fleet_dir);
    let _processes = Processes(vec![fleet]);

    let imported = work.path().join("elsewhere/fleet-operator");
    let carried = shell(
        &state,
        &format!(
            "factbuoy fleet credentials export --dir {} | factbuoy fleet credentials import {}",
            fleet_dir.display(),
            imported.display()
        ),
    );
    assert!(carried.status.success(), "{}", text(&carried.stderr));
    for file in ["ca.pem", "client.pem", "client.key"] {
        assert_eq!(
            std::fs::read(imported.join(file)).unwrap(),
            std::fs::read(fleet_dir.join("operator").join(file)).unwrap(),
            "{file}"
        );
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&imported.join("client.key")), 0o600);
    assert_eq!(mode(&imported), 0o700);

    // Anything else on standard input is refused, saying what to pipe in, and writes nothing.
    let refused_into = work.path().join("refused");
    let refused = shell(
        &state,
        &format!(
            "echo '{{\"ca_pem\": \"x\", \"client_pem\": \"y\", \"client_key\": \"z\"}}' | factbuoy fleet credentials import {}",
            refused_into.display()
        ),
    );
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("does not parse"),
        "{}",
        text(&refused.stderr)
    );
    assert!(!refused_into.exists());
    let garbage = shell(
        &state,
        &format!(
            "echo nonsense | factbuoy fleet credentials import {}",
            refused_into.display()
        ),
    );
    assert!(
        text(&garbage.stderr).contains("fleet credentials export"),
        "{}",
        text(&garbage.stderr)
    );
}

#[test]
fn fleet_gen_prints_the_hubs_objects_and_refuses_a_fleet_port_among_the_run_ports() {
    let work = tempfile::tempdir().unwrap();
    let printed = operator(work.path())
        .args(["fleet", "gen", "--name", "192.0.2.10", "-o", "json"])
        .output()
        .unwrap();
    assert!(printed.status.success(), "{}", text(&printed.stderr));
    let list: serde_json::Value = serde_json::from_slice(&printed.stdout).unwrap();
    let kinds: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ServiceAccount",
            "PersistentVolumeClaim",
            "Deployment",
            "Service"
        ]
    );
    // The next steps go to stderr, the objects alone to stdout.
    assert!(text(&printed.stderr).contains("fleet credentials export"));

    let clash = operator(work.path())
        .args(["fleet", "gen", "--name", "192.0.2.10", "--port", "30450"])
        .output()
        .unwrap();
    assert!(!clash.status.success());
    assert!(
        text(&clash.stderr).contains("inside the run ports 30444-30459"),
        "{}",
        text(&clash.stderr)
    );
}

#[test]
fn fleet_serve_stops_on_sigterm_as_a_kubelet_sends_it_and_frees_its_directory() {
    let work = tempfile::tempdir().unwrap();
    let fleet_dir = work.path().join("fleet");
    let serve = || serve_fleet(work.path(), &fleet_dir).0;
    let terminate = |child: Child, what: &str| {
        let pid = libc::pid_t::try_from(child.id()).unwrap();
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let stopped = wait_with_timeout(child, std::time::Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{what} still runs 10 s after SIGTERM"));
        assert!(stopped.status.success(), "{what}: {:?}", stopped.status);
    };
    // At once: a SIGTERM right after it says it serves is not lost.
    let first = serve();
    terminate(first, "fleet serve");

    // A second `fleet serve` of the directory (a replacing pod's) waits for the first, and
    // stops on SIGTERM while it waits.
    let first = serve();
    let mut waiting = fleet_serve(work.path(), &fleet_dir).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "a second fleet serve of the directory did not wait"
    );
    terminate(waiting, "a fleet serve waiting for the directory");
    terminate(first, "fleet serve");
    // The directory is free: the next one serves at once.
    let _next = Processes(vec![serve()]);
}

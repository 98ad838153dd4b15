//! The fleet agent as a container (docs/fleet.md, "The agent as a container"): factbuoy's image,
//! built from this test binary, runs `agent join` and `agent serve` under rootful Podman as
//! deploy/podman/factbuoy-agent-container.service does, and takes part in a fleet run beside an
//! agent started by hand on the same machine. What each gathers of the machine is the same, but
//! for what differs by design: the list the Kubernetes conformance test holds its three ways to
//! ([`BY_DESIGN`](crate::support::conformance::BY_DESIGN)).

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::conformance::{by_design_lines, deterministic, differences};
use crate::support::kube_runs::Bundle;
use crate::support::loopback_fleet::{LoopbackFleet, text};
use crate::support::{kube, workspace};

const UNIT: &str = "deploy/podman/factbuoy-agent-container.service";

/// `podman ARGS`. This machine's root may not raise resource limits (no CAP_SYS_RESOURCE), so
/// Podman is told to set none and containers keep the host's: the `containers.conf` in
/// `config`.
fn podman(config: &Path, args: &[&str]) -> Output {
    Command::new("podman")
        .env("CONTAINERS_CONF", config)
        .args(args)
        .output()
        .expect("running podman (apt-get install podman)")
}

/// The arguments of `podman run` in the unit's ExecStart, from `--rm` to the image (which its
/// environment file names): the same container the unit starts.
fn unit_run_options() -> Vec<String> {
    let unit = std::fs::read_to_string(workspace().join(UNIT)).unwrap();
    let exec = unit
        .split("ExecStart=/usr/bin/podman run ")
        .nth(1)
        .expect("the unit's ExecStart runs podman")
        .replace("\\\n", " ");
    let exec = exec.lines().next().unwrap();
    let options = exec
        .split(" ${FACTBUOY_IMAGE}")
        .next()
        .expect("the unit runs ${FACTBUOY_IMAGE}");
    shlex::split(options).unwrap()
}

#[test]
fn an_agent_in_a_podman_container_gathers_what_an_agent_by_hand_does() {
    let fleet = LoopbackFleet::start();
    let work = fleet.path("container");
    std::fs::create_dir_all(work.join("state")).unwrap();
    std::fs::create_dir_all(work.join("cache")).unwrap();
    let config = work.join("containers.conf");
    std::fs::write(&config, "[containers]\ndefault_ulimits = []\n").unwrap();
    let loaded = podman(
        &config,
        &[
            "load",
            "-q",
            "-i",
            kube::factbuoy_archive().to_str().unwrap(),
        ],
    );
    assert!(loaded.status.success(), "{}", text(&loaded.stderr));
    let image = kube::FACTBUOY_IMAGE;

    let token = fleet.succeed(&["fleet", "token", "create", "-o", "json"]);
    let token: Value = serde_json::from_slice(&token.stdout).unwrap();
    let state = format!("{}:/var/lib/factbuoy-agent", work.join("state").display());
    let joined = podman(
        &config,
        &[
            "run",
            "--rm",
            "--network",
            "host",
            "--uts",
            "host",
            "-v",
            &state,
            image,
            "agent",
            "join",
            &fleet.address,
            "--node",
            "container-1",
            "--token",
            token["token"].as_str().unwrap(),
            "--ca-pin",
            token["ca_pin"].as_str().unwrap(),
            "--state-dir",
            "/var/lib/factbuoy-agent",
        ],
    );
    assert!(joined.status.success(), "{}", text(&joined.stderr));
    // What the unit's ExecStart waits for (ConditionPathExists=).
    let condition = std::fs::read_to_string(workspace().join(UNIT))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("ConditionPathExists=/var/lib/factbuoy-agent/"))
        .map(str::to_owned)
        .expect("the unit waits for the enrollment");
    assert!(work.join("state").join(&condition).exists(), "{condition}");

    // The unit's container, with this test's directories for its state and cache, and a name
    // of its own.
    let name = format!("factbuoy-agent-test-{}", std::process::id());
    let mut options = unit_run_options();
    for option in options.iter_mut() {
        *option = option
            .replace(
                "/var/lib/factbuoy-agent:",
                &format!("{}:", work.join("state").display()),
            )
            .replace(
                "/var/cache/factbuoy-agent:",
                &format!("{}:", work.join("cache").display()),
            );
        if *option == "factbuoy-agent" {
            *option = name.clone();
        }
    }
    // systemd's notification socket is the unit's; here the container runs detached.
    options.retain(|o| !o.starts_with("--sdnotify") && !o.starts_with("--cgroups"));
    options.retain(|o| o != "--log-driver=journald");
    let mut run: Vec<&str> = vec!["run", "-d"];
    run.extend(options.iter().map(String::as_str));
    run.extend([
        image,
        "agent",
        "serve",
        "--state-dir",
        "/var/lib/factbuoy-agent",
        "--root",
        "/host",
    ]);
    let started = podman(&config, &run);
    let _container = Container {
        config: config.clone(),
        name: name.clone(),
    };
    assert!(started.status.success(), "{}", text(&started.stderr));

    let ran = fleet.run(&["--plugin", "host-facts", "--plugin", "setup", "-o", "json"]);
    let status: Value = serde_json::from_slice(&ran.stdout).unwrap();
    let bundle = Bundle::read(
        fleet
            .path("out")
            .join(status["tar_info"]["name"].as_str().unwrap()),
    );
    let logs = podman(&config, &["logs", &name]);
    let documents = |node: &str| {
        [
            bundle.json(&format!(
                "plugins/host-facts/results/{node}/host-facts.json"
            )),
            bundle.json(&format!("plugins/setup/results/{node}/ansible_facts.json")),
        ]
    };
    let mut found = Vec::new();
    for (by_hand, contained) in documents("member-1").iter().zip(documents("container-1")) {
        differences(
            &deterministic(by_hand),
            &deterministic(&contained),
            "",
            &mut found,
        );
    }
    assert!(
        found.is_empty(),
        "the agent in a container saw the machine otherwise than the agent by hand:\n{}\n\
         (not compared, as they differ by design:\n{})\nthe container's log: {}",
        found.join("\n"),
        by_design_lines(),
        text(&logs.stderr)
    );
    // What differs by design differs for the reason given: both are root, the container with
    // Podman's capabilities.
    let [_, by_hand] = documents("member-1");
    let [_, contained] = documents("container-1");
    assert_eq!(
        by_hand["ansible_real_user_id"],
        contained["ansible_real_user_id"]
    );
    assert_ne!(
        by_hand["ansible_system_capabilities"],
        contained["ansible_system_capabilities"]
    );
}

/// Removes the container when dropped.
struct Container {
    config: std::path::PathBuf,
    name: String,
}

impl Drop for Container {
    fn drop(&mut self) {
        podman(&self.config, &["rm", "-f", "-t", "1", &self.name]);
    }
}

#[test]
fn the_container_unit_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("factbuoy-agent-container.service");
    std::fs::copy(workspace().join(UNIT), &unit).unwrap();
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .unwrap();
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "{}",
        text(&verify.stderr)
    );
}

//! The fleet agent as a container (docs/fleet.md, "The agent as a container"): factbuoy's image,
//! built from this test binary, runs `agent join` and `agent serve` under rootful Podman as
//! deploy/podman/factbuoy-agent-container.service does, and takes part in a fleet run beside an
//! agent started by hand on the same machine. What each gathers of the machine is the same, but
//! for what differs by design: the list the Kubernetes conformance test holds its three ways to
//! ([`BY_DESIGN`](crate::support::conformance::BY_DESIGN)).

use std::process::Command;

use serde_json::Value;

use crate::support::conformance::{by_design_lines, deterministic, differences};
use crate::support::kube_runs::Bundle;
use crate::support::loopback_fleet::{LoopbackFleet, text};
use crate::support::podman::{self, Podman};
use crate::support::workspace;

#[test]
fn an_agent_in_a_podman_container_gathers_what_an_agent_by_hand_does() {
    let fleet = LoopbackFleet::start();
    let work = fleet.path("container");
    let (state, cache) = (work.join("state"), work.join("cache"));
    std::fs::create_dir_all(&state).unwrap();
    std::fs::create_dir_all(&cache).unwrap();
    let podman = Podman::new();
    let image = podman.load_factbuoy_image();

    let token = fleet.succeed(&["fleet", "token", "create", "-o", "json"]);
    let token: Value = serde_json::from_slice(&token.stdout).unwrap();
    let joined = podman.run(&podman::join_args(
        image,
        &state,
        &fleet.address,
        "container-1",
        &token,
    ));
    assert!(joined.status.success(), "{}", text(&joined.stderr));
    // What the unit's ExecStart waits for.
    let condition = podman::unit_condition();
    assert!(state.join(&condition).exists(), "{}", condition.display());

    let name = format!("factbuoy-agent-test-{}", std::process::id());
    let started = podman.run(&podman::serve_args(image, &name, &state, &cache));
    let _container = Container {
        podman: &podman,
        name: &name,
    };
    assert!(started.status.success(), "{}", text(&started.stderr));

    let ran = fleet.run(&["--plugin", "host-facts", "--plugin", "setup", "-o", "json"]);
    let status: Value = serde_json::from_slice(&ran.stdout).unwrap();
    let bundle = Bundle::read(
        fleet
            .path("out")
            .join(status["tar_info"]["name"].as_str().unwrap()),
    );
    let logs = podman.run(&["logs".into(), name.clone()]);
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
struct Container<'a> {
    podman: &'a Podman,
    name: &'a str,
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        self.podman.remove(self.name);
    }
}

#[test]
fn the_container_unit_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("factbuoy-agent-container.service");
    std::fs::copy(workspace().join(podman::UNIT), &unit).unwrap();
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

//! factbuoy's fleet agent in a Podman container, as deploy/podman/factbuoy-agent-container.service
//! runs it: for the agent in a container beside an agent by hand (tests/all/agent_container.rs)
//! and as the fourth way of the Kubernetes conformance test (tests/kube_nodes/conformance.rs).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::kube;
use super::workspace;

/// The unit the container's options are read from.
pub const UNIT: &str = "deploy/podman/factbuoy-agent-container.service";

/// Where the container keeps the agent's enrollment, as the unit mounts it.
const STATE: &str = "/var/lib/factbuoy-agent";

/// Podman as the tests run it. This machine's root may not raise resource limits (no
/// CAP_SYS_RESOURCE), so Podman is told to set none and containers keep the host's: a
/// `containers.conf` of the test's own, removed when dropped.
pub struct Podman {
    dir: tempfile::TempDir,
}

impl Podman {
    pub fn new() -> Podman {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("containers.conf"),
            "[containers]\ndefault_ulimits = []\n",
        )
        .unwrap();
        Podman { dir }
    }

    /// Gives `command`, which runs podman (here or on a test cluster's node), the test's
    /// configuration.
    pub fn configure<'a>(&self, command: &'a mut Command) -> &'a mut Command {
        command.env("CONTAINERS_CONF", self.dir.path().join("containers.conf"))
    }

    /// `podman ARGS` on this machine.
    pub fn run(&self, args: &[String]) -> Output {
        self.configure(&mut Command::new("podman"))
            .args(args)
            .output()
            .expect("running podman (apt-get install podman)")
    }

    /// Loads factbuoy's image, built from this test binary's `factbuoy` (the Kubernetes tests'
    /// image), and returns its name.
    pub fn load_factbuoy_image(&self) -> &'static str {
        let loaded = self.run(&[
            "load".into(),
            "-q".into(),
            "-i".into(),
            kube::factbuoy_archive().display().to_string(),
        ]);
        assert!(
            loaded.status.success(),
            "podman load: {}",
            String::from_utf8_lossy(&loaded.stderr)
        );
        kube::FACTBUOY_IMAGE
    }

    /// Removes container `name` (run by [`serve_args`]), wherever it was started.
    pub fn remove(&self, name: &str) {
        self.run(&[
            "rm".into(),
            "-f".into(),
            "-t".into(),
            "1".into(),
            name.into(),
        ]);
    }
}

/// `podman run` arguments that join the fleet at `address` as `node` with `token` (`fleet token
/// create -o json`), the enrollment kept in `state`, as the unit's comment says to.
pub fn join_args(
    image: &str,
    state: &Path,
    address: &str,
    node: &str,
    token: &serde_json::Value,
) -> Vec<String> {
    let mut args: Vec<String> = ["run", "--rm", "--network", "host", "--uts", "host", "-v"]
        .map(String::from)
        .to_vec();
    args.push(format!("{}:{STATE}", state.display()));
    args.push(image.into());
    args.extend(["agent", "join", address, "--node", node].map(String::from));
    args.extend([
        "--token".into(),
        token["token"].as_str().unwrap().to_owned(),
        "--ca-pin".into(),
        token["ca_pin"].as_str().unwrap().to_owned(),
        "--state-dir".into(),
        STATE.into(),
    ]);
    args
}

/// `podman run -d` arguments of the unit's container, named `name`, with `state` and `cache`
/// for its enrollment and component cache; without what ties it to systemd (its notification
/// socket, its cgroup, the journal as its log), so that it runs detached from a test.
pub fn serve_args(image: &str, name: &str, state: &Path, cache: &Path) -> Vec<String> {
    let mut args = vec!["run".to_owned(), "-d".to_owned()];
    for option in unit_run_options() {
        if option.starts_with("--sdnotify")
            || option.starts_with("--cgroups")
            || option == "--log-driver=journald"
        {
            continue;
        }
        let option = option
            .replace(&format!("{STATE}:"), &format!("{}:", state.display()))
            .replace(
                "/var/cache/factbuoy-agent:",
                &format!("{}:", cache.display()),
            );
        args.push(if option == "factbuoy-agent" {
            name.to_owned()
        } else {
            option
        });
    }
    args.push(image.into());
    args.extend(["agent", "serve", "--state-dir", STATE, "--root", "/host"].map(String::from));
    args
}

/// The file below [`STATE`] whose presence the unit waits for (`ConditionPathExists=`).
pub fn unit_condition() -> PathBuf {
    let unit = std::fs::read_to_string(workspace().join(UNIT)).unwrap();
    unit.lines()
        .find_map(|l| l.strip_prefix(&format!("ConditionPathExists={STATE}/")))
        .map(PathBuf::from)
        .expect("the unit waits for the enrollment")
}

/// The options of `podman run` in the unit's ExecStart, from `--rm` to the image (which its
/// environment file names): the container the unit starts.
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

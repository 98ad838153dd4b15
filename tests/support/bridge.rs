//! A network of a test's own on this host: a bridge holding this host's address, and network
//! namespaces plugged into it, each a machine with an address of its own (tests/all/fleet.rs's
//! nodes, tests/all/ansible_role.rs's machines). Names and subnets carry this process's
//! [`slot`], so that two runs at once (CI beside a developer's) take apart ones. Removed, with
//! whatever still runs in its namespaces, when dropped.

use std::process::{Command, Output};

/// This process's share of names and subnets.
pub fn slot() -> u32 {
    std::process::id() % 200
}

fn sh(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"))
}

/// `program ARGS`, which must succeed.
pub fn must(program: &str, args: &[&str]) -> Output {
    let output = sh(program, args);
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Whether this machine lets the test make network namespaces (`probe` names the one it tries):
/// why not, where it does not.
pub fn namespaces_refused(probe: &str) -> Option<String> {
    let made = sh("ip", &["netns", "add", probe]);
    let _ = sh("ip", &["netns", "del", probe]);
    (!made.status.success()).then(|| String::from_utf8_lossy(&made.stderr).into_owned())
}

/// The bridge and the namespaces plugged into it.
pub struct Bridge {
    name: String,
    namespaces: Vec<String>,
}

impl Bridge {
    /// Bridge `name` with this host's `host_cidr` on it, up; a leftover of the same name (a run
    /// killed before it could clean up) is removed first.
    pub fn up(name: &str, host_cidr: &str) -> Bridge {
        let _ = sh("ip", &["link", "del", name]);
        must("ip", &["link", "add", name, "type", "bridge"]);
        must("ip", &["addr", "add", host_cidr, "dev", name]);
        must("ip", &["link", "set", name, "up"]);
        Bridge {
            name: name.to_owned(),
            namespaces: Vec::new(),
        }
    }

    /// Namespace `ns` (a leftover removed first), plugged into the bridge by a veth pair whose
    /// host end is `link`, with `cidr` on its own end and its loopback up.
    pub fn plug(&mut self, ns: &str, link: &str, cidr: &str) {
        let inner = format!("{link}n");
        let _ = sh("ip", &["netns", "del", ns]);
        must("ip", &["netns", "add", ns]);
        self.namespaces.push(ns.to_owned());
        must(
            "ip",
            &["link", "add", link, "type", "veth", "peer", "name", &inner],
        );
        must("ip", &["link", "set", link, "master", &self.name, "up"]);
        must("ip", &["link", "set", &inner, "netns", ns]);
        for args in [
            ["addr", "add", cidr, "dev", &inner].as_slice(),
            &["link", "set", &inner, "up"],
            &["link", "set", "lo", "up"],
        ] {
            must("ip", &[&["-n", ns], args].concat());
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            // Whatever still runs in it (an agent) is killed first.
            let pids = sh("ip", &["netns", "pids", ns]);
            for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
                let _ = sh("kill", &["-9", pid]);
            }
            let _ = sh("ip", &["netns", "del", ns]);
        }
        let _ = sh("ip", &["link", "del", &self.name]);
    }
}

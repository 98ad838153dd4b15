//! The Ansible role (deploy/ansible/, docs/fleet.md "With Ansible"), applied by the real
//! `ansible-playbook` to two machines, each a Debian system booted by `systemd-nspawn` (its own
//! systemd as PID 1, its own network namespace behind a bridge, sshd, Podman), from one root
//! file system that tests/ansible/machine-rootfs.sh makes once and caches outside the
//! repository. machine-1 takes the binary method, machine-2 the container method (factbuoy's
//! image loaded from the controller's archive, run by rootful Podman). The fleet is the real
//! binary on the bridge. Checked: a check-mode apply changes nothing, an apply joins both
//! machines and runs their agents (they take part in a `run --fleet` with their own facts), the
//! handlers restart an agent whose binary, unit or environment file changed, a second apply
//! changes nothing, the join token shows in no output, log, journal, file or process of the
//! machines, and an uninstall leaves no unit, binary, enrollment or container. The role must
//! also pass ansible-lint's production profile.
//!
//! Needs root, debootstrap and systemd-container (tests/prerequisites.sh). Where machines cannot
//! be booted here the test says so and is skipped, except under CI (`CI` set), where that is a
//! failure.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::bridge::{Bridge, must, namespaces_refused, slot};
use crate::support::kube::{FACTBUOY_IMAGE, factbuoy_archive};
use crate::support::kube_runs::Bundle;
use crate::support::{factbuoy, workspace};

const MACHINES: [&str; 2] = ["machine-1", "machine-2"];
/// The machines' names in the fleet: machine-1 joins by its host name (the role's default),
/// machine-2 by the name its inventory gives (`factbuoy_agent_node`).
const NODES: [&str; 2] = ["machine-1", "bastion"];
/// How each machine gets its agent (`factbuoy_agent_method`), and the unit that runs it.
const METHODS: [&str; 2] = ["binary", "container"];
const SERVICES: [&str; 2] = ["factbuoy-agent", "factbuoy-agent-container"];

fn bridge() -> String {
    format!("fbans{}", slot())
}

/// The test host's address on the bridge: where the fleet listens.
fn host_ip() -> String {
    format!("10.78.{}.1", slot())
}

fn machine_ip(index: usize) -> String {
    format!("10.78.{}.{}", slot(), 11 + index)
}

fn namespace(index: usize) -> String {
    format!("fbans{}-{}", slot(), index + 1)
}

/// The name of machine `index`'s own cgroups.
fn cgroup(index: usize) -> String {
    format!("fbans{}-{}", slot(), MACHINES[index])
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A script of tests/ansible/ that prints a path.
fn path_from(script: &str) -> PathBuf {
    let output = must(workspace().join(script).to_str().unwrap(), &[]);
    PathBuf::from(text(&output.stdout).trim())
}

/// Two booted machines on a bridge of the test's own, with sshd taking the test's key; shut
/// down and removed when dropped.
struct Machines {
    work: PathBuf,
    nspawns: Vec<Child>,
    /// Dropped after the machines are shut down.
    network: Bridge,
}

impl Machines {
    /// `None` (after saying why) where this machine cannot boot them.
    fn boot(work: &Path) -> Option<Machines> {
        let missing: Vec<&str> = ["debootstrap", "systemd-nspawn", "unshare", "ssh"]
            .into_iter()
            .filter(|tool| {
                !Command::new("sh")
                    .args([
                        "-c",
                        &format!("command -v {tool} || [ -x /usr/sbin/{tool} ]"),
                    ])
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .collect();
        let refused = namespaces_refused(&format!("fbans{}-probe", slot()));
        if !missing.is_empty() || refused.is_some() {
            let why = format!(
                "missing {missing:?} (tests/prerequisites.sh installs them), or no network \
                 namespaces ({refused:?})"
            );
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must boot the Ansible role's machines: {why}"
            );
            eprintln!("SKIPPED: {why}");
            return None;
        }
        let rootfs = path_from("tests/ansible/machine-rootfs.sh");
        let key = work.join("id_ed25519");
        must(
            "ssh-keygen",
            &["-q", "-t", "ed25519", "-N", "", "-f", key.to_str().unwrap()],
        );
        let mut machines = Machines {
            work: work.to_owned(),
            nspawns: Vec::new(),
            network: Bridge::up(&bridge(), &format!("{}/24", host_ip())),
        };
        for (i, name) in MACHINES.iter().enumerate() {
            let ns = namespace(i);
            let address = format!("{}/24", machine_ip(i));
            machines.network.plug(&ns, &format!("{ns}h"), &address);
            // nspawn keeps its per-machine files in /run/systemd/nspawn and removes them only
            // from a tmpfs: one of the machine's own, in a mount namespace of its own. No host
            // systemd registers it (--register=no, --keep-unit): the host need not run systemd,
            // so nothing gives the machine cgroups of its own either, and two machines' systemd
            // would make and remove the same unit's cgroup at once (a unit then fails to start,
            // 219/CGROUP). On a cgroup v1 host (cgroup2 at /sys/fs/cgroup/unified) the machine
            // gets a cgroup of its own in every hierarchy, which nspawn makes its root; cpuset
            // is left out, as it takes no process before it is given CPUs.
            // --volatile=overlay: both boot the cached tree read-only, their writes in memory.
            // Podman's storage is a tmpfs: its overlay driver cannot stack on nspawn's overlay.
            let nspawn = format!(
                "if [ -d /sys/fs/cgroup/unified ]; then \
                   cgroups=$(cat /proc/self/cgroup); \
                   while IFS=: read -r _ controllers path; do \
                     case $controllers in \
                       '') dir=unified ;; name=*) dir=${{controllers#name=}} ;; \
                       cpuset) continue ;; *) dir=$controllers ;; \
                     esac; \
                     own=/sys/fs/cgroup/$dir${{path%/}}/{cgroup} && \
                     mkdir -p $own && echo $$ >$own/cgroup.procs || exit; \
                   done <<<\"$cgroups\"; \
                 fi; \
                 mkdir -p /run/systemd/nspawn && mount -t tmpfs tmpfs /run/systemd/nspawn && \
                 exec systemd-nspawn --quiet --boot --directory {rootfs} --volatile=overlay \
                 --register=no --keep-unit --machine {name} --console=read-only \
                 --tmpfs=/var/lib/containers:mode=0700 \
                 --network-namespace-path=/run/netns/{ns} \
                 --bind-ro={key}.pub:/root/.ssh/authorized_keys",
                rootfs = rootfs.display(),
                key = key.display(),
                cgroup = cgroup(i),
            );
            let console = std::fs::File::create(work.join(format!("{name}.console"))).unwrap();
            let child = Command::new("unshare")
                .args(["--mount", "--propagation", "private", "bash", "-c", &nspawn])
                .stdin(Stdio::null())
                .stdout(console.try_clone().unwrap())
                .stderr(console)
                .spawn()
                .unwrap();
            machines.nspawns.push(child);
        }
        for i in 0..MACHINES.len() {
            machines.wait_for_ssh(i);
        }
        Some(machines)
    }

    fn wait_for_ssh(&mut self, index: usize) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let up = self.ssh(index, "systemctl is-system-running --wait", b"");
            if up.status.success() {
                return;
            }
            if let Some(status) = self.nspawns[index].try_wait().unwrap() {
                panic!(
                    "{} stopped ({status}) while booting: {}",
                    MACHINES[index],
                    self.console(index)
                );
            }
            assert!(
                Instant::now() < deadline,
                "{} did not come up within 90 s: {}{}\nits console: {}",
                MACHINES[index],
                text(&up.stdout),
                text(&up.stderr),
                self.console(index)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn console(&self, index: usize) -> String {
        std::fs::read_to_string(self.work.join(format!("{}.console", MACHINES[index])))
            .unwrap_or_default()
    }

    fn key(&self) -> PathBuf {
        self.work.join("id_ed25519")
    }

    fn ssh_options() -> [&'static str; 8] {
        [
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "ConnectTimeout=5",
        ]
    }

    /// `script` run by sh as root on machine `index`, `stdin` on its standard input.
    fn ssh(&self, index: usize, script: &str, stdin: &[u8]) -> Output {
        let mut child = Command::new("ssh")
            .args(Machines::ssh_options())
            .arg("-i")
            .arg(self.key())
            .arg(format!("root@{}", machine_ip(index)))
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        child.wait_with_output().unwrap()
    }

    /// The inventory of both machines, as an operator's would name them.
    fn inventory(&self) -> String {
        let mut hosts = serde_json::Map::new();
        for (i, name) in MACHINES.iter().enumerate() {
            let mut host = json!({
                "ansible_host": machine_ip(i),
                "ansible_user": "root",
                "ansible_ssh_private_key_file": self.key(),
                "ansible_ssh_common_args": Machines::ssh_options().join(" "),
                "ansible_python_interpreter": "/usr/bin/python3",
            });
            if NODES[i] != *name {
                host["factbuoy_agent_node"] = json!(NODES[i]);
            }
            if METHODS[i] != "binary" {
                host["factbuoy_agent_method"] = json!(METHODS[i]);
            }
            hosts.insert(name.to_string(), host);
        }
        json!({"factbuoy_agents": {"hosts": hosts}}).to_string()
    }
}

impl Drop for Machines {
    fn drop(&mut self) {
        // SIGTERM asks nspawn to shut the machine down cleanly; SIGKILL if it takes too long.
        for child in &mut self.nspawns {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for child in &mut self.nspawns {
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        // Their cgroups, emptied when their processes ended: deepest first.
        for i in 0..MACHINES.len() {
            let _ = Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "find /sys/fs/cgroup -mindepth 2 -type d -name {} -prune \
                     -exec find {{}} -depth -type d -delete \\;",
                    cgroup(i)
                ))
                .output();
        }
    }
}

/// The fleet served on the bridge by the real binary; killed when dropped.
struct Fleet {
    child: Child,
    address: String,
    dir: PathBuf,
    operator: PathBuf,
}

impl Fleet {
    fn start(work: &Path) -> Fleet {
        let (dir, operator) = (work.join("fleet"), work.join("operator"));
        let mut child = factbuoy()
            .env("FACTBUOY_STATE_DIR", &operator)
            .args(["-v", "fleet", "serve", "-o", "json", "--name", &host_ip()])
            .args(["--listen", &format!("{}:0", host_ip()), "--dir"])
            .arg(&dir)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(work.join("fleet.log")).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let started: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!(
                "fleet serve printed {line:?} ({e}): {}",
                std::fs::read_to_string(work.join("fleet.log")).unwrap_or_default()
            )
        });
        Fleet {
            child,
            address: started["advertised"].as_str().unwrap().to_owned(),
            dir,
            operator,
        }
    }

    /// `factbuoy ARGS` as the fleet's operator, which must succeed.
    fn operator(&self, args: &[&str]) -> Output {
        let output = factbuoy()
            .env("FACTBUOY_STATE_DIR", &self.operator)
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
        output
    }

    fn nodes(&self) -> Vec<String> {
        let dir = self.dir.to_str().unwrap();
        let listed = self.operator(&["fleet", "nodes", "-o", "json", "--dir", dir]);
        let nodes: Value = serde_json::from_slice(&listed.stdout).unwrap();
        let mut names: Vec<String> = nodes
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ansible-playbook deploy/ansible/site.yml`, the example playbook, with the test's inventory
/// and extra variables; every output is kept in `outputs` for the token's search.
struct Playbook {
    venv: PathBuf,
    work: PathBuf,
    outputs: Vec<String>,
}

impl Playbook {
    /// Runs it with `args`; returns its output (stdout and stderr) and whether it succeeded.
    fn run(&mut self, args: &[&str]) -> (bool, String) {
        let work = &self.work;
        let path = format!(
            "{}:{}",
            self.venv.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let output = Command::new(self.venv.join("bin/ansible-playbook"))
            .current_dir(workspace().join("deploy/ansible"))
            .arg("-i")
            .arg(work.join("inventory.json"))
            .arg("-e")
            .arg(format!("@{}", work.join("vars.json").display()))
            .args(args)
            .arg("site.yml")
            .env("PATH", path)
            .env("ANSIBLE_HOME", work.join("ansible-home"))
            .env("ANSIBLE_LOCAL_TEMP", work.join("ansible-tmp"))
            .env("ANSIBLE_LOG_PATH", work.join("ansible.log"))
            .env("ANSIBLE_NOCOLOR", "1")
            .env("ANSIBLE_RETRY_FILES_ENABLED", "0")
            .output()
            .expect("running ansible-playbook (tests/ansible/venv.sh)");
        let all = format!("{}{}", text(&output.stdout), text(&output.stderr));
        self.outputs.push(all.clone());
        (output.status.success(), all)
    }

    /// Runs it with `args`, which must succeed with no host failed or unreachable; returns each
    /// host's `changed=` count from the recap.
    fn apply(&mut self, args: &[&str]) -> BTreeMap<String, u64> {
        let (ok, output) = self.run(args);
        let recap = recap(&output);
        assert!(
            ok && recap.len() == MACHINES.len()
                && recap
                    .values()
                    .all(|counts| counts["failed"] == 0 && counts["unreachable"] == 0),
            "ansible-playbook {args:?} failed:\n{output}"
        );
        recap
            .into_iter()
            .map(|(host, counts)| (host, counts["changed"]))
            .collect()
    }
}

/// The PLAY RECAP's counts per host: `machine-1 : ok=9 changed=0 unreachable=0 failed=0 ...`.
fn recap(output: &str) -> BTreeMap<String, BTreeMap<String, u64>> {
    let Some((_, after)) = output.split_once("PLAY RECAP") else {
        return BTreeMap::new();
    };
    after
        .lines()
        .filter_map(|line| {
            let (host, counts) = line.split_once(" : ")?;
            let counts = counts
                .split_whitespace()
                .filter_map(|pair| {
                    let (key, value) = pair.split_once('=')?;
                    Some((key.to_owned(), value.parse().ok()?))
                })
                .collect();
            Some((host.trim().to_owned(), counts))
        })
        .collect()
}

/// `script` on machine `index`, which must succeed.
fn must_ssh(machines: &Machines, index: usize, script: &str) {
    let done = machines.ssh(index, script, b"");
    assert!(done.status.success(), "{script}: {}", text(&done.stderr));
}

/// What check mode must not have made, and an uninstall must leave none of: the binary, the
/// units, the enrollment, a container. Returns the ones `index` has, and whether an agent runs
/// there. (The uninstall leaves Podman and the image, as deploy/ansible/README.md says.)
fn leftovers(machines: &Machines, index: usize) -> String {
    let found = machines.ssh(
        index,
        "ls -d /usr/local/bin/factbuoy /var/lib/factbuoy-agent /etc/systemd/system/factbuoy-agent*.service \
         /etc/factbuoy 2>/dev/null; systemctl list-unit-files --no-legend 'factbuoy*'; \
         systemctl list-units --all --no-legend 'factbuoy*'; pgrep -a factbuoy; \
         podman ps --all --format '{{.Names}} {{.Image}}'; true",
        b"",
    );
    text(&found.stdout)
}

/// Whether machine `index` has factbuoy's image.
fn has_image(machines: &Machines, index: usize) -> bool {
    let found = machines.ssh(index, &format!("podman image exists {FACTBUOY_IMAGE}"), b"");
    found.status.success()
}

#[test]
fn the_role_deploys_agents_that_join_idempotently_and_uninstalls_them() {
    let started = Instant::now();
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    let Some(machines) = Machines::boot(work) else {
        return;
    };
    eprintln!("machines up after {:?}", started.elapsed());
    let fleet = Fleet::start(work);
    let made = fleet.operator(&[
        "fleet",
        "token",
        "create",
        "--uses",
        "2",
        "-o",
        "json",
        "--dir",
        fleet.dir.to_str().unwrap(),
    ]);
    let made: Value = serde_json::from_slice(&made.stdout).unwrap();
    let token = made["token"].as_str().unwrap().to_owned();

    // The binary without its debug info: a fifth of the size to copy, the same program.
    let binary = work.join("factbuoy");
    must(
        "objcopy",
        &[
            "--strip-debug",
            env!("CARGO_BIN_EXE_factbuoy"),
            binary.to_str().unwrap(),
        ],
    );
    let sha256 = text(&must("sha256sum", &[binary.to_str().unwrap()]).stdout)[..64].to_owned();
    std::fs::write(work.join("inventory.json"), machines.inventory()).unwrap();
    let vars = json!({
        "factbuoy_agent_fleet_address": fleet.address,
        "factbuoy_agent_ca_pin": made["ca_pin"],
        "factbuoy_agent_token": token,
        "factbuoy_agent_binary_src": binary,
        "factbuoy_agent_binary_sha256": sha256,
        "factbuoy_agent_image": FACTBUOY_IMAGE,
        "factbuoy_agent_image_archive": factbuoy_archive(),
    });
    std::fs::write(work.join("vars.json"), vars.to_string()).unwrap();
    let mut playbook = Playbook {
        venv: path_from("tests/ansible/venv.sh"),
        work: work.to_owned(),
        outputs: Vec::new(),
    };

    // Check mode on fresh machines: it says what it would change, changes nothing, fails not.
    playbook.apply(&["--check"]);
    for (i, name) in MACHINES.iter().enumerate() {
        assert_eq!(leftovers(&machines, i), "", "--check changed {}", name);
    }
    assert_eq!(fleet.nodes(), Vec::<String>::new(), "--check joined");
    assert!(!has_image(&machines, 1), "--check loaded the image");

    // A binary that does not have the operator's checksum is refused, and nothing is done (on
    // machine-1, the one that takes the binary).
    let wrong = format!("factbuoy_agent_binary_sha256={}", "0".repeat(64));
    let (ok, output) = playbook.run(&["-e", &wrong, "--limit", MACHINES[0]]);
    assert!(
        !ok && output.contains(&format!(
            "has SHA-256 {sha256}, not factbuoy_agent_binary_sha256"
        )),
        "a binary of another checksum was not refused:\n{output}"
    );
    for (i, name) in MACHINES.iter().enumerate() {
        assert_eq!(
            leftovers(&machines, i),
            "",
            "a refused binary changed {name}"
        );
    }

    // The apply, at -vvv: both join (one token of two uses) and their agents run.
    let changed = playbook.apply(&["-vvv"]);
    assert!(changed.values().all(|&n| n > 0), "{changed:?}");
    let mut nodes = NODES.to_vec();
    nodes.sort();
    assert_eq!(fleet.nodes(), nodes, "{}", playbook.outputs.join("\n"));
    for (i, name) in MACHINES.iter().enumerate() {
        let service = SERVICES[i];
        let state = machines.ssh(
            i,
            &format!("systemctl is-enabled {service}; systemctl is-active {service}"),
            b"",
        );
        assert_eq!(text(&state.stdout), "enabled\nactive\n", "{}", name);
    }
    assert!(has_image(&machines, 1), "the image was not loaded");
    let container = machines.ssh(1, "podman ps --format '{{.Names}} {{.Image}}'", b"");
    assert_eq!(
        text(&container.stdout),
        format!("factbuoy-agent {FACTBUOY_IMAGE}\n"),
        "machine-2's agent is not the container"
    );
    eprintln!("applied after {:?}", started.elapsed());

    // The agents the units run take part in a fleet run: both machines' facts in its bundle.
    let out = work.join("out");
    let ran = fleet.operator(&[
        "run",
        "--fleet",
        &fleet.address,
        "--plugin",
        "host-facts",
        "-o",
        "json",
        "--out",
        out.to_str().unwrap(),
    ]);
    let status: Value = serde_json::from_slice(&ran.stdout).unwrap();
    let bundle = Bundle::read(out.join(status["tar_info"]["name"].as_str().unwrap()));
    for (name, node) in MACHINES.into_iter().zip(NODES) {
        let facts = bundle.json(&format!(
            "plugins/host-facts/results/{node}/host-facts.json"
        ));
        assert_eq!(
            facts["host"]["hostname"], name,
            "{name}'s facts are not its own: {facts}"
        );
    }
    eprintln!("fleet run after {:?}", started.elapsed());

    // The handlers: a changed binary (on machine-1) is put back and a changed unit (the
    // container's, on machine-2) reloaded, and either restarts the agent (a new invocation of
    // the unit).
    let invocation = |i: usize| {
        let shown = machines.ssh(
            i,
            &format!("systemctl show -P InvocationID {}", SERVICES[i]),
            b"",
        );
        text(&shown.stdout).trim().to_owned()
    };
    let before: Vec<String> = (0..MACHINES.len()).map(invocation).collect();
    // (A new file in its place: the running one may not be written.)
    must_ssh(
        &machines,
        0,
        "cp /usr/local/bin/factbuoy /usr/local/bin/.new && echo changed >>/usr/local/bin/.new \
         && mv /usr/local/bin/.new /usr/local/bin/factbuoy",
    );
    must_ssh(
        &machines,
        1,
        "echo '# changed' >>/etc/systemd/system/factbuoy-agent-container.service",
    );
    let changed = playbook.apply(&[]);
    assert!(changed.values().all(|&n| n > 0), "{changed:?}");
    for i in 0..MACHINES.len() {
        assert_ne!(
            invocation(i),
            before[i],
            "{} was not restarted",
            MACHINES[i]
        );
        let service = SERVICES[i];
        let state = machines.ssh(
            i,
            &format!("systemctl show -P NeedDaemonReload {service}; systemctl is-active {service}"),
            b"",
        );
        assert_eq!(text(&state.stdout), "no\nactive\n", "{}", MACHINES[i]);
    }

    // A changed environment file (the container's image, on machine-2) is put back and
    // restarts that agent alone.
    let before: Vec<String> = (0..MACHINES.len()).map(invocation).collect();
    must_ssh(
        &machines,
        1,
        "echo '# changed' >>/etc/factbuoy/factbuoy-agent.env",
    );
    let changed = playbook.apply(&[]);
    assert!(
        changed[MACHINES[0]] == 0 && changed[MACHINES[1]] > 0,
        "{changed:?}"
    );
    assert_eq!(invocation(0), before[0], "machine-1 was restarted");
    assert_ne!(invocation(1), before[1], "machine-2 was not restarted");

    // Another apply changes nothing.
    let changed = playbook.apply(&[]);
    assert!(changed.values().all(|&n| n == 0), "{changed:?}");

    // The token is in no output (-vvv included), no Ansible log, and nothing on the machines:
    // not their journals, files, processes' command lines or environments. grep reads it from
    // its standard input, so that the search does not put it on a command line itself.
    playbook
        .outputs
        .push(std::fs::read_to_string(work.join("ansible.log")).unwrap());
    for output in &playbook.outputs {
        assert!(!output.contains(&token), "the token is in:\n{output}");
    }
    // (-vvv it was: Ansible's connection lines, which only -vvv prints, are there.)
    let verbose = format!("<{}> ESTABLISH SSH CONNECTION", machine_ip(0));
    assert!(playbook.outputs.iter().any(|o| o.contains(&verbose)));
    for (i, name) in MACHINES.iter().enumerate() {
        let found = machines.ssh(
            i,
            "exec bash -c 'grep -rlsaF -f /dev/stdin /etc /var /root /tmp /run /usr/local \
             /proc/[0-9]*/cmdline /proc/[0-9]*/environ <(journalctl -o export --no-pager); true'",
            token.as_bytes(),
        );
        assert_eq!(
            text(&found.stdout),
            "",
            "the token is on {}: {}",
            name,
            text(&found.stderr)
        );
    }

    // The uninstall: the units stopped and gone, the binary and the enrollment removed; a
    // second one changes nothing.
    playbook.apply(&["-e", "factbuoy_agent_state=absent"]);
    for (i, name) in MACHINES.iter().enumerate() {
        assert_eq!(leftovers(&machines, i), "", "left on {}", name);
    }
    let changed = playbook.apply(&["-e", "factbuoy_agent_state=absent"]);
    assert!(changed.values().all(|&n| n == 0), "{changed:?}");
    eprintln!("done after {:?}", started.elapsed());
}

#[test]
fn the_role_passes_ansible_lint() {
    let venv = path_from("tests/ansible/lint-venv.sh");
    let path = format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let home = tempfile::tempdir().unwrap();
    let lint = Command::new(venv.join("bin/ansible-lint"))
        .current_dir(workspace())
        .args(["--offline", "--profile", "production", "deploy/ansible"])
        .env("PATH", path)
        .env("ANSIBLE_HOME", home.path())
        .env("NO_COLOR", "1")
        .output()
        .expect("running ansible-lint (tests/ansible/lint-venv.sh)");
    let all = format!("{}{}", text(&lint.stdout), text(&lint.stderr));
    assert!(
        lint.status.success() && all.contains("0 failure(s), 0 warning(s)"),
        "ansible-lint finds fault with deploy/ansible:\n{all}"
    );
}

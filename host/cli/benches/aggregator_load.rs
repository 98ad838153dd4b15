//! Load on the aggregator: N simulated agents, each with its own node-bound certificate, upload
//! one result file over mutual TLS, all at once. The same generator then loads nginx
//! (`ssl_verify_client on`, WebDAV PUT to disk) with the same certificates. Prints results per
//! second, p99 latency, the server's peak RSS, the server's and the load generator's CPU time per
//! upload for each, and the ratios.
//!
//! Run with `cargo bench -p factbuoy --bench aggregator_load` (needs nginx: `apt-get install
//! nginx`). `FACTBUOY_LOAD=agents:size,...` overrides the default mix, `FACTBUOY_LOAD_ROUNDS`
//! the number of rounds (3).
//!
//! Both servers write to a fresh ext4 file system with a journal, on a loop device in a mount
//! namespace of the benchmark's own, when it runs as root ([`Scratch`]); otherwise to the
//! temporary directory, and it says so.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use factbuoy_aggregator::{Run, RunDir};
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::names::{ArtifactName, NodeName};
use factbuoy_protocol::{Client, Scope};
use tokio::sync::Semaphore;

/// Uploads in flight at once: many agents, as in a cluster-wide run, without exhausting ports.
const IN_FLIGHT: usize = 512;
const DEFAULT_MIX: &str = "5000:1KiB,1000:1MiB,20:50MiB";

struct Server {
    child: Child,
    /// Every process whose peak RSS counts (nginx has workers).
    pids: Vec<u32>,
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM, not SIGKILL: nginx's master then stops its workers too.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// User plus system CPU time of a process and all its threads so far. Less disturbed by other
/// work on the machine than throughput, so it shows where the server's own cost changes.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat(5); `fields` starts at field 3.
    (ticks(11) + ticks(12)) / 100.0
}

fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

struct Measured {
    per_second: f64,
    p99: Duration,
    peak_rss_mib: f64,
    /// Server CPU time per upload.
    cpu_ms_per_upload: f64,
    /// The load generator's (this process's) CPU time per upload: it shares the cores with the
    /// server, so the throughput follows the sum of the two.
    load_cpu_ms_per_upload: f64,
    failures: usize,
}

impl Measured {
    /// Median throughput, latency and CPU; the highest peak RSS.
    fn median(rounds: Vec<Measured>) -> Measured {
        fn middle<T: PartialOrd + Copy>(mut values: Vec<T>) -> T {
            values.sort_by(|a, b| a.partial_cmp(b).unwrap());
            values[values.len() / 2]
        }
        Measured {
            per_second: middle(rounds.iter().map(|m| m.per_second).collect()),
            p99: middle(rounds.iter().map(|m| m.p99).collect()),
            peak_rss_mib: rounds.iter().map(|m| m.peak_rss_mib).fold(0.0, f64::max),
            cpu_ms_per_upload: middle(rounds.iter().map(|m| m.cpu_ms_per_upload).collect()),
            load_cpu_ms_per_upload: middle(
                rounds.iter().map(|m| m.load_cpu_ms_per_upload).collect(),
            ),
            failures: rounds.iter().map(|m| m.failures).sum(),
        }
    }

    fn columns(&self) -> String {
        format!(
            "{:>10.0} {:>8.1}ms {:>8.1} {:>7.2} {:>7.2}",
            self.per_second,
            self.p99.as_secs_f64() * 1e3,
            self.peak_rss_mib,
            self.cpu_ms_per_upload,
            self.load_cpu_ms_per_upload
        )
    }
}

async fn load(clients: &[Client], file: &Path, sha256: &str, server: &Server) -> Measured {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let name = ArtifactName::parse("result.bin").unwrap();
    let cpu_before: f64 = server.pids.iter().map(|pid| cpu_seconds(*pid)).sum();
    let load_cpu_before = cpu_seconds(std::process::id());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        let (client, name, file, sha256, slots) = (
            client.clone(),
            name.clone(),
            file.to_owned(),
            sha256.to_owned(),
            slots.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let _slot = slots.acquire_owned().await.unwrap();
            let began = Instant::now();
            let scope = Scope::Node(NodeName::parse(&format!("node-{i}")).unwrap());
            let result = client
                .put_file(&scope, "hello", &name, &file, &sha256)
                .await;
            (began.elapsed(), result.err().map(|e| e.to_string()))
        }));
    }
    let mut latencies = Vec::new();
    let mut failures = Vec::new();
    for task in tasks {
        let (latency, error) = task.await.unwrap();
        latencies.push(latency);
        failures.extend(error);
    }
    let elapsed = started.elapsed();
    if let Some(first) = failures.first() {
        eprintln!("  {} uploads failed, first: {first}", failures.len());
    }
    latencies.sort();
    let p99 = latencies[((latencies.len() - 1) as f64 * 0.99) as usize];
    let rss: u64 = server.pids.iter().map(|pid| peak_rss_kib(*pid)).sum();
    let cpu: f64 = server.pids.iter().map(|pid| cpu_seconds(*pid)).sum::<f64>() - cpu_before;
    let load_cpu = cpu_seconds(std::process::id()) - load_cpu_before;
    Measured {
        // Only uploads that were stored count: a failed one is no throughput.
        per_second: (clients.len() - failures.len()) as f64 / elapsed.as_secs_f64(),
        p99,
        peak_rss_mib: rss as f64 / 1024.0,
        cpu_ms_per_upload: cpu * 1e3 / clients.len() as f64,
        load_cpu_ms_per_upload: load_cpu * 1e3 / clients.len() as f64,
        failures: failures.len(),
    }
}

/// A server's command, killed when the benchmark dies: it holds the scratch file system, and
/// its mount namespace, open ([`private_mounts`]).
fn server_command(program: &str) -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(program);
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    command
}

fn start_factbuoy(run_dir: &Path) -> (Server, String) {
    use std::io::BufRead;
    let mut child = server_command(env!("CARGO_BIN_EXE_factbuoy"))
        .args(["aggregator", "serve", "--run-dir"])
        .arg(run_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addresses: serde_json::Value = serde_json::from_str(&line).unwrap();
    let address = addresses["agent_address"].as_str().unwrap().to_owned();
    let pid = child.id();
    (
        Server {
            child,
            pids: vec![pid],
        },
        address,
    )
}

/// Why nginx is not there to compare with.
enum NoPeer {
    /// The binary is not installed.
    Missing,
    /// It started and stopped: what its error log says.
    Failed(String),
}

fn start_nginx(dir: &Path, pki: &Path) -> Result<(Server, String), NoPeer> {
    let failed = |e: std::io::Error| NoPeer::Failed(e.to_string());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(failed)?
        .port();
    let root = dir.join("nginx-root");
    std::fs::create_dir_all(&root).map_err(failed)?;
    let config = format!(
        "daemon off; master_process on; worker_processes auto; user root; pid {dir}/nginx.pid;
         error_log {dir}/nginx-error.log;
         events {{ worker_connections 4096; }}
         http {{
           access_log off; client_body_temp_path {dir}/nginx-body;
           server {{
             listen 127.0.0.1:{port} ssl;
             ssl_certificate {pki}/server.pem; ssl_certificate_key {pki}/server.key;
             ssl_client_certificate {pki}/ca.pem; ssl_verify_client on;
             client_max_body_size 100m;
             location / {{ root {root}; dav_methods PUT; create_full_put_path on; }}
           }}
         }}",
        dir = dir.display(),
        pki = pki.display(),
        root = root.display(),
    );
    let config_path = dir.join("nginx.conf");
    std::fs::write(&config_path, config).map_err(failed)?;
    let mut child = match server_command("nginx")
        .arg("-c")
        .arg(&config_path)
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(NoPeer::Missing),
        Err(e) => return Err(failed(e)),
    };
    std::thread::sleep(Duration::from_millis(500));
    // A configuration nginx refuses ends it at once; say why rather than load a dead port.
    if let Ok(Some(status)) = child.try_wait() {
        let log = std::fs::read_to_string(dir.join("nginx-error.log")).unwrap_or_default();
        return Err(NoPeer::Failed(format!(
            "nginx exited ({status}): {}",
            log.trim()
        )));
    }
    let master = child.id();
    let mut pids = vec![master];
    pids.extend(children_of(master));
    Ok((Server { child, pids }, format!("127.0.0.1:{port}")))
}

/// Where both servers write. On ext4 without a journal (this development machine's root file
/// system), each new inode is found by searching past every inode deleted in the last minute:
/// after a round's files were deleted, that search took a third of factbuoy's CPU and almost half
/// of nginx's, and decided the ratio. A server's disk has a journal, so the servers write to a
/// fresh ext4 file system made with mkfs.ext4's defaults, on a loop device, mounted in this
/// process's own mount namespace ([`private_mounts`]).
struct Scratch {
    dir: tempfile::TempDir,
    /// The mounted file system, if one could be made.
    mounted: Option<std::path::PathBuf>,
}

impl Scratch {
    /// A place for `bytes` of uploads, and a line that says what it is.
    fn new(bytes: u64, private: Result<(), String>) -> (Scratch, String) {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("ext4.img");
        let mount_point = dir.path().join("fs");
        let made = (|| -> Result<(), String> {
            private?;
            let run = |command: &mut Command| {
                let output = command.output().map_err(|e| format!("{command:?}: {e}"))?;
                if output.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "{command:?}: {}",
                        String::from_utf8_lossy(&output.stderr).trim()
                    ))
                }
            };
            // Sparse: only what the rounds write takes room on the disk beneath.
            std::fs::File::create(&image)
                .and_then(|file| file.set_len(bytes))
                .map_err(|e| e.to_string())?;
            run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image))?;
            std::fs::create_dir(&mount_point).map_err(|e| e.to_string())?;
            run(Command::new("mount")
                .args(["-o", "loop"])
                .arg(&image)
                .arg(&mount_point))
        })();
        match made {
            Ok(()) => (
                Scratch {
                    dir,
                    mounted: Some(mount_point),
                },
                "servers write to a fresh ext4 file system with a journal (loop device)".to_owned(),
            ),
            Err(why) => {
                let _ = std::fs::remove_file(&image);
                let line = format!(
                    "servers write to {} (no journaled file system of their own: {why})",
                    dir.path().display()
                );
                (Scratch { dir, mounted: None }, line)
            }
        }
    }

    fn path(&self) -> &Path {
        self.mounted.as_deref().unwrap_or(self.dir.path())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(mounted) = &self.mounted {
            let _ = Command::new("umount").arg(mounted).status();
        }
    }
}

fn parse_mix(text: &str) -> Vec<(usize, u64)> {
    text.split(',')
        .map(|item| {
            let (agents, size) = item.split_once(':').expect("AGENTS:SIZE");
            (
                agents.parse().unwrap(),
                size.parse::<bytesize::ByteSize>().unwrap().as_u64(),
            )
        })
        .collect()
}

/// Moves this process into a mount namespace of its own, before any thread starts (a process
/// with threads cannot leave its namespace). The scratch file system is mounted there, seen only
/// by the benchmark and the servers it starts, and it goes with the last of them (the servers
/// die with the benchmark, [`server_command`]): one killed with SIGKILL leaves no mount and no
/// loop device behind.
fn private_mounts() -> Result<(), String> {
    // SAFETY: plain system calls on this process, with no threads yet; the strings live across
    // the calls.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return Err(format!(
                "a mount namespace of its own: {}",
                std::io::Error::last_os_error()
            ));
        }
        // Mounts made here must not propagate back to the host's namespace.
        if libc::mount(
            c"none".as_ptr(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(format!(
                "making its mounts private: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

fn main() {
    let private = private_mounts();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(bench(private));
}

async fn bench(private: Result<(), String>) {
    let mix = parse_mix(&std::env::var("FACTBUOY_LOAD").unwrap_or_else(|_| DEFAULT_MIX.to_owned()));
    let rounds: usize = std::env::var("FACTBUOY_LOAD_ROUNDS")
        .map_or(3, |r| r.parse().expect("FACTBUOY_LOAD_ROUNDS is a number"));
    let most_agents = mix.iter().map(|(agents, _)| *agents).max().unwrap();
    // One round's uploads at a time, every size's payload, and room for the file system's own.
    let one_round = mix
        .iter()
        .map(|(agents, size)| *agents as u64 * size.max(&4096))
        .max()
        .unwrap();
    let payloads: u64 = mix.iter().map(|(_, size)| size).sum();
    let (scratch, where_written) = Scratch::new(2 * one_round + payloads + (1 << 30), private);
    let dir = scratch.path();
    let nodes: Vec<String> = (0..most_agents).map(|i| format!("node-{i}")).collect();
    println!(
        "{:>6} agents x {:>8}   {:>10} {:>10} {:>8} {:>7} {:>7}   {:>10} {:>10} {:>8} {:>7} {:>7}   \
         {:>6}",
        "",
        "size",
        "factbuoy/s",
        "p99",
        "RSS MiB",
        "CPU ms",
        "load ms",
        "nginx/s",
        "p99",
        "RSS MiB",
        "CPU ms",
        "load ms",
        "ratio"
    );
    println!(
        "  (medians of {rounds} rounds; CPU ms: the server's CPU time per upload, user + system; \
         load ms: the load generator's, on the same cores; {where_written})"
    );
    for (agents, size) in mix {
        // A fresh run (and server) per size, so each peak RSS belongs to one size.
        let run_dir = dir.join(format!("run-{size}"));
        let mut create = Command::new(env!("CARGO_BIN_EXE_factbuoy"));
        create.args([
            "aggregator",
            "create",
            "--plugin",
            "hello",
            "--lost-after",
            "10h",
            "--max-file",
            "1GiB",
        ]);
        create
            .arg("--run-dir")
            .arg(&run_dir)
            .arg("--out")
            .arg(dir.join("out"));
        for node in &nodes[..agents] {
            create.args(["--node", node]);
        }
        assert!(create.stdout(Stdio::null()).status().unwrap().success());
        let run = Run::open(RunDir::new(&run_dir)).unwrap();
        let ca = run.ca();
        let identities: Vec<_> = nodes[..agents]
            .iter()
            .map(|node| {
                ca.identity(
                    &ca.issue_client(&Role::Agent {
                        node: NodeName::parse(node).unwrap(),
                    })
                    .unwrap(),
                )
            })
            .collect();
        let file = dir.join(format!("payload-{size}"));
        std::fs::write(&file, vec![0x5a; size as usize]).unwrap();
        let sha256 = factbuoy_protocol::digest::sha256_file(&file).unwrap();

        // Rounds alternate which server goes first, so neither always meets the page cache the
        // other left behind; each figure is the median over the rounds.
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        let mut no_peer = None;
        for round in 0..rounds {
            for server_kind in if round % 2 == 0 {
                ["factbuoy", "nginx"]
            } else {
                ["nginx", "factbuoy"]
            } {
                if server_kind == "factbuoy" {
                    let (server, address) = start_factbuoy(&run_dir);
                    let clients: Vec<Client> = identities
                        .iter()
                        .map(|id| Client::new(&address, id).unwrap())
                        .collect();
                    ours.push(load(&clients, &file, &sha256, &server).await);
                    drop(server);
                    let _ = std::fs::remove_dir_all(run_dir.join("staging"));
                } else {
                    match start_nginx(dir, &run_dir.join("pki")) {
                        Ok((server, address)) => {
                            let clients: Vec<Client> = identities
                                .iter()
                                .map(|id| Client::new(&address, id).unwrap())
                                .collect();
                            theirs.push(load(&clients, &file, &sha256, &server).await);
                            drop(server);
                            let _ = std::fs::remove_dir_all(dir.join("nginx-root"));
                        }
                        Err(why) => no_peer = Some(why),
                    }
                }
            }
        }
        let ours = Measured::median(ours);
        let theirs = (!theirs.is_empty()).then(|| Measured::median(theirs));
        let size_text = bytesize::ByteSize(size).to_string();
        let uploads = agents * rounds;
        match (theirs, no_peer) {
            // A ratio only when both sides stored every upload: failures are no throughput.
            (Some(theirs), None) if ours.failures == 0 && theirs.failures == 0 => println!(
                "{agents:>6} agents x {size_text:>8}   {}   {}   {:>5.2}x",
                ours.columns(),
                theirs.columns(),
                ours.per_second / theirs.per_second,
            ),
            (Some(theirs), None) => println!(
                "{agents:>6} agents x {size_text:>8}   {}   {}   no ratio: uploads failed \
                 (factbuoy {} of {uploads}, nginx {} of {uploads})",
                ours.columns(),
                theirs.columns(),
                ours.failures,
                theirs.failures,
            ),
            (_, Some(NoPeer::Failed(why))) => println!(
                "{agents:>6} agents x {size_text:>8}   {}   no ratio: nginx did not serve: {why}",
                ours.columns()
            ),
            (_, _) => println!(
                "{agents:>6} agents x {size_text:>8}   {}   (nginx not installed)",
                ours.columns()
            ),
        }
    }
}

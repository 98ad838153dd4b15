//! bench/fleet-scale.sh's load generator. Plays `--agents` machines against one fleet aggregator,
//! each exactly as `factbuoy agent join` and `agent serve` would (a key of its own, a join with
//! the token, then long polls with its enrollment certificate), and measures:
//!
//! 1. the enrollment rate (joins per second, `--in-flight` at once);
//! 2. the aggregator's RSS and CPU while every agent holds an idle long poll (read from
//!    /proc/`--fleet-pid` over `--idle` seconds);
//! 3. the time from starting a run (`--start-run`, a shell command) to every agent holding its
//!    offer.
//!
//! Prints one JSON document; any error of any agent is printed instead, with no figures.
//!
//! With `--replay DIR`, each agent then takes part in the run ([`take_part`]): it enrolls at
//! once and delivers DIR's recorded results, the agents one after another over
//! `--deliver-over` seconds, so that results keep arriving while others measure the run
//! (bench/status-web.sh). A second JSON document says how many were delivered; an error of
//! any agent is printed instead, and the program fails.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use factbuoy_protocol::Client;
use factbuoy_protocol::fleet::JoinRequest;
use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::tls::Identity;
use tokio::sync::{Mutex, Semaphore};

mod take_part;

#[derive(Parser)]
struct Args {
    /// The fleet's HOST:PORT.
    #[arg(long)]
    fleet: String,
    /// A token that allows at least --agents joins.
    #[arg(long)]
    token: String,
    /// The fleet CA's pin.
    #[arg(long)]
    pin: String,
    /// Simulated agents.
    #[arg(long, default_value_t = 5000)]
    agents: usize,
    /// Joins in flight at once.
    #[arg(long, default_value_t = 64)]
    in_flight: usize,
    /// The fleet aggregator's process id, whose RSS and CPU are read.
    #[arg(long)]
    fleet_pid: u32,
    /// Seconds of idle long polls over which the aggregator's CPU is measured.
    #[arg(long, default_value_t = 60)]
    idle: u64,
    /// A shell command that starts a run over the fleet (it may keep running).
    #[arg(long)]
    start_run: String,
    /// Take part in the run with the recorded results in DIR (`DIR/<plugin>/report.json` and
    /// its artifacts), as working agents would.
    #[arg(long, value_name = "DIR")]
    replay: Option<PathBuf>,
    /// With --replay: the seconds over which the agents' results arrive, one agent after
    /// another, from the offers on.
    #[arg(long, default_value_t = 30)]
    deliver_over: u64,
}

/// CPU seconds (user + system) the process has used.
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').context("unreadable stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
    Ok(ticks / 100.0)
}

/// A line of /proc/PID/status, in KiB.
fn status_kib(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .with_context(|| format!("no {field} in /proc/{pid}/status"))?;
    Ok(line.split_whitespace().nth(1).unwrap_or("0").parse()?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));

    // 1. Joins.
    let joined_at = Instant::now();
    let slots = Arc::new(Semaphore::new(args.in_flight));
    let mut joins = tokio::task::JoinSet::new();
    for i in 0..args.agents {
        let (slots, fleet, token, pin) = (
            slots.clone(),
            args.fleet.clone(),
            args.token.clone(),
            args.pin.clone(),
        );
        joins.spawn(async move {
            let _slot = slots.acquire_owned().await.expect("never closed");
            let node = NodeName::parse(&format!("sim-{i:05}")).expect("a valid name");
            let key = factbuoy_pki::KeyRequest::new(node.as_str())?;
            let enrollment = Client::pinned(&fleet, &pin)?
                .join(&JoinRequest {
                    token,
                    node,
                    csr: key.csr_pem,
                })
                .await?;
            anyhow::Ok(Identity {
                ca_pem: enrollment.ca,
                cert_pem: enrollment.certificate,
                key_pem: key.key_pem,
            })
        });
    }
    let mut identities = Vec::new();
    while let Some(joined) = joins.join_next().await {
        match joined? {
            Ok(identity) => identities.push(identity),
            Err(e) => errors.lock().await.push(format!("join: {e:#}")),
        }
    }
    let join_seconds = joined_at.elapsed().as_secs_f64();
    if !errors.lock().await.is_empty() {
        return report_errors(&errors).await;
    }

    // 2. Every agent long-polls.
    let offered = Arc::new(AtomicUsize::new(0));
    let delivered = Arc::new(AtomicUsize::new(0));
    let last_offer = Arc::new(Mutex::new(None::<Instant>));
    let replays = match &args.replay {
        Some(dir) => Some(Arc::new(factbuoy_bench_replay::load_replays(dir)?)),
        None => None,
    };
    let host = args
        .fleet
        .rsplit_once(':')
        .map(|(host, _)| host.to_owned())
        .context("--fleet is not HOST:PORT")?;
    let mut polls = tokio::task::JoinSet::new();
    for (i, identity) in identities.into_iter().enumerate() {
        let (fleet, errors, offered, last_offer) = (
            args.fleet.clone(),
            errors.clone(),
            offered.clone(),
            last_offer.clone(),
        );
        let (replays, host, delivered) = (replays.clone(), host.clone(), delivered.clone());
        // Agent i's results arrive i/agents of the way through --deliver-over.
        let after = Duration::from_secs(args.deliver_over).mul_f64(i as f64 / args.agents as f64);
        polls.spawn(async move {
            // As `agent serve` polls: over one kept connection.
            let client = match Client::new(&fleet, &identity) {
                Ok(client) => client.keep_alive(),
                Err(e) => return errors.lock().await.push(format!("client: {e}")),
            };
            loop {
                match client.next_run(0).await {
                    Ok(Some(offer)) => {
                        offered.fetch_add(1, Ordering::SeqCst);
                        *last_offer.lock().await = Some(Instant::now());
                        let Some(replays) = replays else { return };
                        match take_part::take_part(&host, offer, &replays, after).await {
                            Ok(()) => {
                                delivered.fetch_add(1, Ordering::SeqCst);
                            }
                            Err(e) => errors.lock().await.push(format!("taking part: {e:#}")),
                        }
                        return;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        errors.lock().await.push(format!("poll: {e}"));
                        return;
                    }
                }
            }
        });
        // Connections open at a pace the handshakes keep up with.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Settle: every agent's poll is in flight.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let rss_before_idle = status_kib(args.fleet_pid, "VmRSS:")?;
    let cpu_before = cpu_seconds(args.fleet_pid)?;
    tokio::time::sleep(Duration::from_secs(args.idle)).await;
    let idle_cpu = (cpu_seconds(args.fleet_pid)? - cpu_before) / args.idle as f64;
    let idle_rss = status_kib(args.fleet_pid, "VmRSS:")?.max(rss_before_idle);
    if !errors.lock().await.is_empty() {
        return report_errors(&errors).await;
    }

    // 3. A run: how long until every agent holds its offer.
    let started = Instant::now();
    let mut run = tokio::process::Command::new("sh")
        .args(["-c", &args.start_run])
        .kill_on_drop(true)
        .spawn()
        .context("starting the run")?;
    while offered.load(Ordering::SeqCst) < args.agents {
        if let Some(status) = run.try_wait()?
            && !status.success()
        {
            errors
                .lock()
                .await
                .push(format!("the run command ended: {status}"));
        }
        if !errors.lock().await.is_empty() || started.elapsed() > Duration::from_secs(300) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let all_offered = last_offer
        .lock()
        .await
        .map(|at| at.duration_since(started).as_secs_f64());
    if !errors.lock().await.is_empty() || offered.load(Ordering::SeqCst) < args.agents {
        errors.lock().await.push(format!(
            "{} of {} agents got the run's offer",
            offered.load(Ordering::SeqCst),
            args.agents
        ));
        return report_errors(&errors).await;
    }
    println!(
        "{}",
        serde_json::json!({
            "agents": args.agents,
            "join_seconds": join_seconds,
            "joins_per_second": args.agents as f64 / join_seconds,
            "idle_seconds": args.idle,
            "idle_rss_mib": idle_rss as f64 / 1024.0,
            "idle_cpu_cores": idle_cpu,
            "peak_rss_mib": status_kib(args.fleet_pid, "VmHWM:")? as f64 / 1024.0,
            "run_to_all_offered_seconds": all_offered,
        })
    );
    if args.replay.is_none() {
        return Ok(());
    }
    // 4. The results, arriving over --deliver-over.
    let give_up = Duration::from_secs(args.deliver_over + 120);
    let all_done = async { while polls.join_next().await.is_some() {} };
    if tokio::time::timeout(give_up, all_done).await.is_err() {
        errors.lock().await.push(format!(
            "{} of {} agents delivered within {give_up:?}",
            delivered.load(Ordering::SeqCst),
            args.agents
        ));
    }
    if !errors.lock().await.is_empty() {
        return report_errors(&errors).await;
    }
    println!(
        "{}",
        serde_json::json!({
            "delivered": delivered.load(Ordering::SeqCst),
            "deliver_over_seconds": args.deliver_over,
        })
    );
    Ok(())
}

async fn report_errors(errors: &Mutex<Vec<String>>) -> anyhow::Result<()> {
    let errors = errors.lock().await;
    let mut counted: std::collections::BTreeMap<&str, usize> = Default::default();
    for e in errors.iter() {
        *counted.entry(e.as_str()).or_default() += 1;
    }
    for (e, n) in counted.iter().take(20) {
        eprintln!("{n} x {e}");
    }
    anyhow::bail!("{} errors; no figures", errors.len())
}

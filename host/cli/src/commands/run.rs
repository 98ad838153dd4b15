//! `factbuoy run`: a collection run on this host (an aggregator on loopback and an agent for
//! this host, over the same mutual-TLS protocol as in a cluster), over a Kubernetes cluster's
//! nodes (`--kubernetes`), or over a fleet's (`--fleet`), followed to its bundle. The operator
//! library does the work; this maps the flags onto it and shows progress and the summary.

use std::path::PathBuf;

use clap::Args;
use factbuoy_aggregator::config;
use factbuoy_operator::{
    FleetTarget, Interrupts, KubernetesTarget, LocalTarget, RunRecord, RunRequest, StateDir, Target,
};
use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::types::StatusDocument;

use crate::flags::{KubeArgs, PluginArgs};
use crate::logging;
use crate::output::{ExitStatus, Format, emit, emit_document};
use factbuoy_present::summary;

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    plugin_args: PluginArgs,
    /// Where the bundle is written.
    #[arg(long, default_value = ".", value_name = "DIR")]
    out: PathBuf,
    /// Where the run keeps its state [default: ~/.local/state/factbuoy/runs/<run id>].
    #[arg(long, value_name = "DIR")]
    run_dir: Option<PathBuf>,
    /// This host's node name [default: its host name].
    #[arg(long)]
    node: Option<NodeName>,
    /// Host directory plugins' paths are mapped onto.
    #[arg(long, default_value = "/", value_name = "DIR")]
    root: PathBuf,
    /// Deadline of the whole run; what is missing then becomes error results, and plugins
    /// still running on this host are stopped.
    #[arg(long, default_value_t = config::DEFAULT_RUN_TIMEOUT.into())]
    timeout: humantime::Duration,
    /// Collect every node of a Kubernetes cluster: apply the run's manifests (what `factbuoy gen`
    /// prints), follow the run, download the bundle into --out. See docs/kubernetes.md.
    #[arg(long)]
    kubernetes: bool,
    /// With --kubernetes: return once the manifests are applied, without waiting for the run.
    #[arg(long, requires = "kubernetes")]
    detach: bool,
    #[command(flatten, next_help_heading = "Fleet (with --fleet)")]
    fleet: FleetRunArgs,
    #[command(flatten, next_help_heading = "Kubernetes (with --kubernetes)")]
    kube: KubeArgs,
}

/// `run`'s options for a fleet run.
#[derive(Debug, Args)]
pub struct FleetRunArgs {
    /// Collect every node enrolled in the fleet at ADDRESS (HOST:PORT; see docs/fleet.md),
    /// follow the run, download the bundle into --out.
    #[arg(long = "fleet", value_name = "ADDRESS", conflicts_with = "kubernetes")]
    address: Option<String>,
    /// The fleet's operator credentials [default: those of the fleet served from this machine
    /// at ADDRESS, else operator/ in ~/.local/state/factbuoy/fleet].
    #[arg(long, value_name = "DIR", requires = "address")]
    fleet_credentials: Option<PathBuf>,
    /// How long a node may stay silent (its machine off, say) before its results are given up
    /// as lost.
    #[arg(long, default_value_t = config::DEFAULT_LOST_AFTER.into(), requires = "address")]
    lost_after: humantime::Duration,
    /// Start a run every PERIOD (`24h`, say) until stopped, each with its own bundle in --out;
    /// a run that fails is reported and the schedule goes on.
    #[arg(long, value_name = "PERIOD", requires = "address")]
    every: Option<humantime::Duration>,
}

pub async fn run(args: RunArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let state = StateDir::from_env()?;
    let (target, global) = if let Some(address) = &args.fleet.address {
        let target = FleetTarget {
            address: address.clone(),
            credentials: args.fleet.fleet_credentials.clone(),
            lost_after: *args.fleet.lost_after,
        };
        (Target::Fleet(target), Vec::new())
    } else if args.kubernetes {
        let target = KubernetesTarget {
            cluster: args.kube.cluster.cluster(),
            placement: args.kube.placement(),
            run_id: None,
        };
        (
            Target::Kubernetes(Box::new(target)),
            args.kube.global.clone(),
        )
    } else {
        let target = LocalTarget {
            node: args.node.clone(),
            root: args.root.clone(),
            run_dir: args.run_dir.clone(),
        };
        (Target::Local(target), Vec::new())
    };
    let request = RunRequest {
        target,
        plugins: args.plugin_args.selection(&global),
        timeout: *args.timeout,
        out: args.out.clone(),
    };
    let Some(every) = args.fleet.every else {
        return once(&state, request, args.detach, format).await;
    };
    loop {
        let next = tokio::time::Instant::now() + *every;
        if let Err(e) = once(&state, request.clone(), false, format).await {
            let error =
                factbuoy_protocol::text::printable(&crate::output::sentence(&e)).into_owned();
            eprintln!("the scheduled run failed: {error}; the next one starts on time");
        }
        tokio::time::sleep_until(next).await;
    }
}

/// One run, from its start to its summary.
async fn once(
    state: &StateDir,
    request: RunRequest,
    detach: bool,
    format: Format,
) -> anyhow::Result<ExitStatus> {
    let local = matches!(request.target, Target::Local(_));
    let started = factbuoy_operator::start(state, request).await?;
    match started.record() {
        RunRecord::Kubernetes(kube) => {
            eprintln!(
                "run {}: applied in namespace {}",
                kube.run_id, kube.namespace
            );
            if detach {
                let line = format!(
                    "run {id} started in namespace {ns}; `factbuoy status` follows it, `factbuoy retrieve` downloads its bundle, `factbuoy delete {id}` removes it",
                    id = kube.run_id,
                    ns = kube.namespace
                );
                match format {
                    Format::Table => emit(&line),
                    machine => emit_document(
                        &serde_json::json!({
                            "run_id": kube.run_id,
                            "namespace": kube.namespace,
                            "kind": "kubernetes",
                        }),
                        machine,
                    ),
                }
                return Ok(ExitStatus::Success);
            }
        }
        RunRecord::Fleet(_) => {
            let fleet = started
                .fleet()
                .expect("a fleet run says what the fleet started");
            for (sha256, size) in &fleet.stored {
                eprintln!("stored plugin {sha256} ({size} bytes) in the fleet");
            }
            eprintln!(
                "run {} (fleet run {}): {} nodes",
                fleet.started.run_id,
                fleet.started.number,
                fleet.started.nodes.len()
            );
        }
        RunRecord::Local(_) => {}
    }
    // Ctrl-C or SIGTERM ends a local run with what was collected; a cluster's or a fleet's run
    // goes on without this process.
    let mut interrupts = if local {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                let signal = crate::signals::interrupted().await;
                if sender.send(signal.to_owned()).is_err() {
                    break;
                }
            }
        });
        Interrupts::from_channel(receiver)
    } else {
        Interrupts::none()
    };
    let mut bar = None;
    let mut on_status = |document: &StatusDocument| {
        let bar =
            bar.get_or_insert_with(|| logging::progress_bar(document, format == Format::Table));
        summary::advance(bar, document);
    };
    let finished = started.finish(&mut interrupts, &mut on_status).await;
    crate::logging::hide_bar();
    let finished = finished?;
    match format {
        Format::Table => emit(&summary::text(&finished.status, Some(&finished.bundle_dir))),
        machine if local => {
            let document = &finished.status;
            let bundle = document.tar_info.as_ref().map(|t| {
                serde_json::json!({ "path": finished.bundle_dir.join(&t.name), "sha256": t.sha256, "size": t.size })
            });
            emit_document(
                &serde_json::json!({
                    "run_id": document.run_id,
                    "status": document.status,
                    "error": document.error,
                    "results": document.plugins,
                    "bundle": bundle,
                }),
                machine,
            );
        }
        machine => emit_document(&finished.status, machine),
    }
    Ok(if finished.all_passed() {
        ExitStatus::Success
    } else {
        ExitStatus::Failed
    })
}

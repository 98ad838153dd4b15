//! `factbuoy run` (a collection on this host: an aggregator on loopback and an agent for this
//! host, over the same mutual-TLS protocol as in a cluster), `factbuoy status` and
//! `factbuoy retrieve`.
//!
//! The CLI remembers the current run (`runs`), so `status` and `retrieve` from another terminal
//! just work, for a local run as for a Kubernetes one.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::tls::Identity;
use factbuoy_protocol::types::{RunStatus, StatusDocument};
use factbuoy_protocol::{Client, Scope};

use factbuoy_agent::{AgentConfig, LoadedPlugins};
use factbuoy_aggregator::config::{self, RunConfig, ServerLimits};
use factbuoy_aggregator::{Run, RunDir};
use factbuoy_protocol::types::now_rfc3339;
use factbuoy_runtime::{Limits, Runtime, RuntimeOptions};

use crate::kube_cmd::ClusterArgs;
use crate::output::{Ended, ExitStatus, Format, emit, emit_document};
use crate::runs::{self, RunAt};
use crate::{plan, summary};

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    plugin_args: plan::PluginArgs,
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
    fleet: crate::fleet_cmd::FleetRunArgs,
    #[command(flatten, next_help_heading = "Kubernetes (with --kubernetes)")]
    kube: crate::kube_cmd::KubeArgs,
}

/// Which run `status` and `retrieve` talk about.
#[derive(Debug, Args)]
pub struct WhichRun {
    /// The run: a Kubernetes run started from this machine, or a local run [default: the current run].
    #[arg(value_name = "RUN-ID", conflicts_with = "run_dir")]
    run_id: Option<String>,
    /// A local run's directory.
    #[arg(long, value_name = "DIR")]
    run_dir: Option<PathBuf>,
    /// For a Kubernetes run: reach its cluster otherwise than the command that started it did.
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  factbuoy status\n  factbuoy status 3f2a9c01d4e7 -o json\n  factbuoy status --run-dir ./my-run"
)]
pub struct StatusArgs {
    #[command(flatten)]
    run: WhichRun,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  factbuoy retrieve --out bundles/\n  factbuoy retrieve --wait             # the current run's, once it is written\n  factbuoy retrieve 3f2a9c01d4e7 --context prod"
)]
pub struct RetrieveArgs {
    #[command(flatten)]
    run: WhichRun,
    /// Where to write the bundle; a partial download there is resumed.
    #[arg(long, default_value = ".", value_name = "DIR")]
    out: PathBuf,
    /// Wait until the run has written its bundle, instead of exiting 3 while it runs.
    #[arg(long)]
    wait: bool,
}

/// A new run id: 12 hex digits.
pub fn new_run_id() -> String {
    format!("{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff)
}

pub async fn run(args: RunArgs, format: Format) -> anyhow::Result<ExitStatus> {
    if args.fleet.address.is_some() {
        return crate::fleet_cmd::run(
            &args.fleet,
            &args.plugin_args,
            *args.timeout,
            &args.out,
            format,
        )
        .await;
    }
    let run_id = new_run_id();
    if args.kubernetes {
        return crate::kube_run::run(
            &args.kube,
            &args.plugin_args,
            *args.timeout,
            &run_id,
            &args.out,
            args.detach,
            format,
        )
        .await;
    }
    let run_dir = match &args.run_dir {
        Some(dir) => dir.clone(),
        None => runs::local_runs_dir()
            .context("pass --run-dir")?
            .join(&run_id),
    };
    let node = match &args.node {
        Some(node) => node.clone(),
        None => NodeName::parse(&plan::node_name(
            &sysinfo::System::host_name().unwrap_or_default(),
        ))
        .context("this host's name makes no valid node name; name it with --node")?,
    };
    let runtime = Arc::new(Runtime::new(RuntimeOptions {
        limits: Limits {
            deadline: *args.plugin_args.plugin_timeout,
            ..Limits::default()
        },
        ..RuntimeOptions::default()
    })?);
    let plugins = if args.plugin_args.plugins.is_empty() {
        plan::default_plugins(&args.root)
    } else {
        args.plugin_args.plugins.clone()
    };
    let choices = args.plugin_args.choices(&plugins);
    let planned = plan::build(&runtime, &choices).await?;
    let loopback: SocketAddr = "127.0.0.1:0".parse().expect("a valid address");
    let config = RunConfig {
        run_id: run_id.clone(),
        created: now_rfc3339(),
        factbuoy_version: env!("CARGO_PKG_VERSION").to_owned(),
        plugins: planned.plans,
        nodes: vec![node.clone()],
        dynamic_nodes: false,
        heartbeat_seconds: config::DEFAULT_HEARTBEAT.as_secs(),
        lost_after_seconds: config::DEFAULT_LOST_AFTER.as_secs(),
        run_timeout_seconds: args.timeout.as_secs().max(1),
        agent_listen: loopback,
        operator_listen: loopback,
        server_names: vec!["localhost".into(), "127.0.0.1".into()],
        bundle_dir: std::path::absolute(&args.out)?,
        operator_ca: None,
        limits: ServerLimits {
            max_connections: LOCAL_MAX_CONNECTIONS,
            ..ServerLimits::default()
        },
    };
    let run = Run::create(RunDir::new(&run_dir), config.clone(), &planned.components)?;
    let identity = run
        .ca()
        .identity(&run.issue(&Role::Agent { node: node.clone() })?);
    let spool_dir = run.dir().spool();
    let mut running = factbuoy_aggregator::start(run, factbuoy_catalog::bundled_component).await?;
    runs::remember(&RunAt::Local {
        run_id: run_id.clone(),
        run_dir: run_dir.clone(),
        operator_address: running.operator_address,
    })?;

    let client = Client::new(
        &format!("127.0.0.1:{}", running.agent_address.port()),
        &identity,
    )?;
    let agent_config = Arc::new(AgentConfig {
        scope: Scope::Node(node),
        host_root: args.root.clone(),
        spool_dir,
        retry_for: factbuoy_agent::RETRY_FOR,
        parallel: AgentConfig::all_cores(),
    });
    let loaded = Arc::new(LoadedPlugins::default());
    for (sha256, plugin) in planned.loaded {
        loaded.insert(sha256, plugin);
    }
    let bar = summary::progress_bar(&running.status_document(), format == Format::Table);
    let status = running.status_reader();
    let ticker = {
        let bar = bar.clone();
        tokio::spawn(async move {
            loop {
                summary::advance(&bar, &status.document());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let agent = factbuoy_agent::run(client, runtime, agent_config, loaded);
    let agent_result = tokio::select! {
        result = agent => Some(result),
        // The run ended without the agent (at its timeout): nothing the agent still runs has
        // a run to go to, so its plugins stop with its future, and the run is not held up.
        _ = running.finished() => None,
        signal = interrupted() => {
            // The agent's plugins stopped with its future; what they delivered is kept.
            running.interrupt(&format!("{signal} from the operator"));
            None
        }
    };
    let status = tokio::select! {
        status = running.finished() => status,
        signal = interrupted() => {
            crate::logging::hide_bar();
            return Err(Ended::Failed(format!(
                "{signal} again: stopped while the bundle was being written; `factbuoy aggregator serve --run-dir {} --exit-when-complete` finishes it",
                run_dir.display()
            ))
            .into());
        }
    };
    ticker.abort();
    crate::logging::hide_bar();
    let document = running.status_document();
    drop(running);
    // Only a bundle holds everything: a run that could not write one (a full disk) keeps its
    // results in the run directory's results/, the only copy of them.
    if document.tar_info.is_some()
        && let Err(e) = RunDir::new(&run_dir).retire(&document)
    {
        tracing::warn!(
            "removing the finished run's working files from {}: {e}",
            run_dir.display()
        );
    }
    if let Some(Err(e)) = agent_result {
        // The results it could not deliver are error results in the bundle; say why.
        tracing::warn!("the local agent could not finish: {e:#}");
    }
    report(&document, &config, format);
    Ok(
        if status == RunStatus::Complete && summary::all_passed(&document) {
            ExitStatus::Success
        } else {
            ExitStatus::Failed
        },
    )
}

/// Connections a local run's listeners serve at once: one agent and a few `status` callers.
const LOCAL_MAX_CONNECTIONS: usize = 64;

/// Waits for Ctrl-C (SIGINT) or SIGTERM and names it.
async fn interrupted() -> &'static str {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut terminate) => {
                terminate.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "Ctrl-C",
        () = terminate => "SIGTERM",
    }
}

fn report(document: &StatusDocument, config: &RunConfig, format: Format) {
    match format {
        Format::Table => emit(&summary::text(document, Some(&config.bundle_dir))),
        machine => {
            let bundle = document.tar_info.as_ref().map(|t| {
                serde_json::json!({ "path": config.bundle_dir.join(&t.name), "sha256": t.sha256, "size": t.size })
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
    }
}

/// The operator client of a local run.
fn operator(run_dir: &Path, address: SocketAddr) -> anyhow::Result<Client> {
    let (ca, cert, key) = RunDir::new(run_dir).operator_files();
    let identity = Identity::from_files(&ca, &cert, &key)?;
    Ok(
        Client::new(&format!("127.0.0.1:{}", address.port()), &identity)?
            .with_timeout(Duration::from_secs(10)),
    )
}

/// What a run says of itself: its aggregator's status, or for a local run whose aggregator is
/// gone, the saved status.
async fn current_status(at: &RunAt, cluster: &ClusterArgs) -> anyhow::Result<StatusDocument> {
    match at {
        RunAt::Local {
            run_dir,
            operator_address,
            ..
        } => {
            // A retired run's credentials are gone with its aggregator.
            if let Some(document) = RunDir::new(run_dir).load_final_status()? {
                return Ok(document);
            }
            match operator(run_dir, *operator_address)?.status().await {
                Ok(document) => Ok(document),
                Err(e) if e.is_retryable() => saved_status(run_dir),
                Err(e) => Err(e.into()),
            }
        }
        RunAt::Kubernetes(_) | RunAt::Fleet(_) => {
            Ok(operator_for(at, cluster).await?.status().await?)
        }
    }
}

/// The operator client of a run that is being served.
async fn operator_for(at: &RunAt, cluster: &ClusterArgs) -> anyhow::Result<Client> {
    match at {
        RunAt::Local {
            run_dir,
            operator_address,
            ..
        } => operator(run_dir, *operator_address),
        RunAt::Kubernetes(kube) => {
            let connected = factbuoy_dispatch::connect(&kube.cluster(cluster).target()).await?;
            crate::kube_run::operator_client(&connected, &kube.namespace, &kube.run_id).await
        }
        RunAt::Fleet(fleet) => fleet.operator(),
    }
}

/// The saved status of a local run whose aggregator does not answer. One that had not ended
/// is reported failed: its process is gone, and nothing will end it but a new aggregator.
fn saved_status(run_dir: &Path) -> anyhow::Result<StatusDocument> {
    let mut document = RunDir::new(run_dir).saved_status()?;
    if matches!(
        document.status,
        RunStatus::Running | RunStatus::PostProcessing
    ) {
        document.status = RunStatus::Failed;
        document.error = Some(format!(
            "the run's process ended before the run did (killed?); `factbuoy aggregator serve --run-dir {} --exit-when-complete` ends it and writes its bundle",
            run_dir.display()
        ));
    }
    Ok(document)
}

/// Where a run's bundle is written: its bundle directory, for a local run.
fn bundle_dir(at: &RunAt) -> Option<PathBuf> {
    match at {
        RunAt::Local { run_dir, .. } => RunDir::new(run_dir)
            .load_config()
            .ok()
            .map(|c| c.bundle_dir),
        RunAt::Kubernetes(_) | RunAt::Fleet(_) => None,
    }
}

pub async fn status(args: StatusArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let at = runs::locate(args.run.run_dir, args.run.run_id.as_deref())?;
    let document = current_status(&at, &args.run.cluster).await?;
    match format {
        Format::Table => emit(&summary::text(&document, bundle_dir(&at).as_deref())),
        machine => emit_document(&document, machine),
    }
    Ok(ExitStatus::Success)
}

/// How often `retrieve --wait` asks for the run's status.
const WAIT_EVERY: Duration = Duration::from_millis(500);

pub async fn retrieve(args: RetrieveArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let at = runs::locate(args.run.run_dir, args.run.run_id.as_deref())?;
    // A Kubernetes run is asked through one port-forward, kept for the download.
    let remote = match &at {
        RunAt::Kubernetes(_) | RunAt::Fleet(_) => Some(operator_for(&at, &args.run.cluster).await?),
        RunAt::Local { .. } => None,
    };
    let status_now = || async {
        match &remote {
            Some(client) => Ok(client.status().await?),
            None => current_status(&at, &args.run.cluster).await,
        }
    };
    let mut document = status_now().await?;
    let bar = args
        .wait
        .then(|| summary::progress_bar(&document, format == Format::Table));
    while document.tar_info.is_none() && !ended(document.status) {
        if !args.wait {
            return Err(Ended::NotReady(format!(
                "the bundle is not ready: the run is {}; `factbuoy retrieve --wait` waits for it",
                summary::wire_name(&document.status)
            ))
            .into());
        }
        tokio::time::sleep(WAIT_EVERY).await;
        document = status_now().await?;
        if let Some(bar) = &bar {
            summary::advance(bar, &document);
        }
    }
    crate::logging::hide_bar();
    let tar = document.tar_info.with_context(|| {
        format!(
            "the run ended without a bundle: {}",
            document.error.as_deref().unwrap_or("no reason was given")
        )
    })?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let dest = args.out.join(&tar.name);
    let resumed_from = match &remote {
        Some(client) => client.download_bundle(&dest).await?.resumed_from,
        None => match served_download(&at, &dest).await {
            Some(resumed_from) => resumed_from,
            // The aggregator has gone (a local run's goes once the run has ended): its bundle
            // is a file on this host.
            None => {
                let source = bundle_dir(&at).unwrap_or_default().join(&tar.name);
                copy_bundle(&source, &dest)?;
                0
            }
        },
    };
    let sha256 = factbuoy_protocol::digest::sha256_file(&dest)?;
    let size = std::fs::metadata(&dest)?.len();
    anyhow::ensure!(
        size == tar.size && sha256 == tar.sha256,
        "the bundle {} does not match the run's ({} bytes, sha256 {}); delete it and retrieve again",
        dest.display(),
        tar.size,
        tar.sha256
    );
    match format {
        Format::Table => emit(&dest.display().to_string()),
        machine => emit_document(
            &serde_json::json!({
                "path": dest,
                "size": size,
                "resumed_from": resumed_from,
                "sha256": sha256,
            }),
            machine,
        ),
    }
    Ok(ExitStatus::Success)
}

/// Downloads a local run's bundle from its aggregator while it still serves it, resuming a
/// partial download; `None` once it does not (the run was retired, or its process is gone).
async fn served_download(at: &RunAt, dest: &Path) -> Option<u64> {
    let RunAt::Local {
        run_dir,
        operator_address,
        ..
    } = at
    else {
        return None;
    };
    if RunDir::new(run_dir).load_final_status().ok()?.is_some() {
        return None;
    }
    match operator(run_dir, *operator_address)
        .ok()?
        .download_bundle(dest)
        .await
    {
        Ok(downloaded) => Some(downloaded.resumed_from),
        Err(e) => {
            tracing::debug!("downloading from the run's aggregator: {e}; copying its file");
            None
        }
    }
}

/// Whether a run has ended, with or without a bundle.
fn ended(status: RunStatus) -> bool {
    matches!(status, RunStatus::Complete | RunStatus::Failed)
}

/// Copies a finished local run's bundle from where the run wrote it, unless that is `dest`.
fn copy_bundle(source: &Path, dest: &Path) -> anyhow::Result<()> {
    let same =
        std::fs::canonicalize(source).ok() == std::fs::canonicalize(dest).ok() && dest.exists();
    if !same {
        std::fs::copy(source, dest).with_context(|| {
            format!(
                "copying the run's bundle from {} (was it moved or deleted?)",
                source.display()
            )
        })?;
    }
    Ok(())
}

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
use factbuoy_protocol::text::printable;
use factbuoy_protocol::tls::Identity;
use factbuoy_protocol::types::{PairStatus, ResultStatus, RunStatus, StatusDocument};
use factbuoy_protocol::{Client, Scope};
use indicatif::{ProgressBar, ProgressStyle};

use factbuoy_agent::{AgentConfig, LoadedPlugins};
use factbuoy_aggregator::config::{self, RunConfig, ServerLimits};
use factbuoy_aggregator::state::RunState;
use factbuoy_aggregator::{Run, RunDir};
use factbuoy_protocol::types::now_rfc3339;
use factbuoy_runtime::{Limits, Runtime, RuntimeOptions};

use crate::kube_cmd::ClusterArgs;
use crate::output::{ExitStatus, Format, emit};
use crate::plan;
use crate::runs::{self, RunAt};

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
    /// Deadline of the whole run; what is missing then becomes error results.
    #[arg(long, default_value_t = config::DEFAULT_RUN_TIMEOUT.into())]
    timeout: humantime::Duration,
    /// Collect every node of a Kubernetes cluster: apply the run's manifests (what `factbuoy gen`
    /// prints), follow the run, download the bundle into --out. See docs/kubernetes.md.
    #[arg(long)]
    kubernetes: bool,
    /// With --kubernetes: return once the manifests are applied, without waiting for the run.
    #[arg(long, requires = "kubernetes")]
    detach: bool,
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
    after_help = "Examples:\n  factbuoy retrieve --out bundles/\n  factbuoy retrieve 3f2a9c01d4e7 --context prod"
)]
pub struct RetrieveArgs {
    #[command(flatten)]
    run: WhichRun,
    /// Where to write the bundle; a partial download there is resumed.
    #[arg(long, default_value = ".", value_name = "DIR")]
    out: PathBuf,
}

fn default_run_dir(run_id: &str) -> anyhow::Result<PathBuf> {
    Ok(runs::state_dir()
        .context("pass --run-dir")?
        .join("runs")
        .join(run_id))
}

/// A new run id: 12 hex digits.
pub fn new_run_id() -> String {
    format!("{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff)
}

pub async fn run(args: RunArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let run_id = new_run_id();
    if args.kubernetes {
        return crate::kube_run::run(
            &args.kube,
            &args.plugin_args,
            *args.timeout,
            &run_id,
            &args.out,
            args.detach,
        )
        .await;
    }
    let run_dir = match &args.run_dir {
        Some(dir) => dir.clone(),
        None => default_run_dir(&run_id)?,
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
        limits: ServerLimits::default(),
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
    let progress = progress_bar(format, &running.shared.status_document());
    let shared = running.shared.clone();
    let ticker = {
        let progress = progress.clone();
        tokio::spawn(async move {
            loop {
                show(&progress, &shared.status_document());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let agent_result = factbuoy_agent::run(client, runtime, agent_config, loaded).await;
    let status = running.finished().await;
    ticker.abort();
    progress.finish_and_clear();
    agent_result.context("the local agent could not finish")?;
    let document = running.shared.status_document();
    report(&document, &config, format);
    let all_passed = document
        .plugins
        .iter()
        .all(|p| p.result_status == Some(ResultStatus::Passed));
    Ok(if status == RunStatus::Complete && all_passed {
        ExitStatus::Success
    } else {
        ExitStatus::PluginFailed
    })
}

fn progress_bar(format: Format, document: &StatusDocument) -> ProgressBar {
    if format == Format::Json {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(document.plugins.len() as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} results  {wide_msg}",
        )
        .expect("a valid template"),
    );
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

fn show(bar: &ProgressBar, document: &StatusDocument) {
    let done = document
        .plugins
        .iter()
        .filter(|p| p.result_status.is_some())
        .count();
    bar.set_position(done as u64);
    let running = document
        .plugins
        .iter()
        .find(|p| p.result_status.is_none() && p.status == PairStatus::Running);
    let message = match running.and_then(|p| p.progress.as_ref()) {
        Some(progress) if progress.total > 0 => {
            format!(
                "{}: {}/{} {}",
                progress.plugin,
                progress.completed,
                progress.total,
                printable(&progress.msg)
            )
        }
        Some(progress) => format!("{}: {}", progress.plugin, printable(&progress.msg)),
        None => String::new(),
    };
    bar.set_message(message);
}

fn report(document: &StatusDocument, config: &RunConfig, format: Format) {
    match format {
        Format::Json => {
            let bundle = document.tar_info.as_ref().map(|t| {
                serde_json::json!({ "path": config.bundle_dir.join(&t.name), "sha256": t.sha256, "size": t.size })
            });
            emit(
                &serde_json::to_string_pretty(&serde_json::json!({
                    "run_id": document.run_id,
                    "status": document.status,
                    "results": document.plugins,
                    "bundle": bundle,
                }))
                .expect("serialising a summary"),
            );
        }
        Format::Text => {
            emit(&status_table(document));
            match &document.tar_info {
                Some(tar) => emit(&format!(
                    "\nbundle: {} ({} bytes, sha256 {})",
                    config.bundle_dir.join(&tar.name).display(),
                    tar.size,
                    tar.sha256
                )),
                None => emit(&format!(
                    "\nno bundle: the run is {}",
                    wire_name(&document.status)
                )),
            }
        }
    }
}

/// A status as the wire, `-o json` and the docs spell it (`agent-failed`, `post-processing`).
fn wire_name<T: serde::Serialize>(status: &T) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn status_table(document: &StatusDocument) -> String {
    let mut lines = vec![format!(
        "run {}: {}",
        document.run_id,
        wire_name(&document.status)
    )];
    let width = document
        .plugins
        .iter()
        .map(|p| p.plugin.len())
        .max()
        .unwrap_or(0);
    for p in &document.plugins {
        let result = match p.result_status {
            Some(ResultStatus::Passed) => "passed",
            Some(ResultStatus::Failed) => "failed",
            None => "",
        };
        let progress = p
            .progress
            .as_ref()
            .filter(|_| p.result_status.is_none())
            .map(|pr| format!("  {}/{} {}", pr.completed, pr.total, printable(&pr.msg)))
            .unwrap_or_default();
        let status = wire_name(&p.status);
        lines.push(format!(
            "  {:width$}  {:20}  {status:9}  {result}{progress}",
            p.plugin, p.node
        ));
    }
    lines.join("\n")
}

/// The operator client of a run, and where its bundle will be.
fn operator(run_dir: &Path, address: SocketAddr) -> anyhow::Result<Client> {
    let (ca, cert, key) = RunDir::new(run_dir).operator_files();
    let identity = Identity::from_files(&ca, &cert, &key)?;
    Ok(
        Client::new(&format!("127.0.0.1:{}", address.port()), &identity)?
            .with_timeout(Duration::from_secs(10)),
    )
}

/// The operator client of a run.
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
    }
}

pub async fn status(args: StatusArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let at = runs::locate(args.run.run_dir, args.run.run_id.as_deref())?;
    let document = match (
        operator_for(&at, &args.run.cluster).await?.status().await,
        &at,
    ) {
        (Ok(document), _) => document,
        // The aggregator has exited (a finished local run): its saved state still answers.
        (Err(e), RunAt::Local { run_dir, .. }) if e.is_retryable() => {
            let run_dir = RunDir::new(run_dir);
            let config = RunConfig::load(&run_dir)?;
            RunState::load(&run_dir, &config)?.document(&config.run_id)
        }
        (Err(e), _) => return Err(e.into()),
    };
    match format {
        Format::Json => emit(&serde_json::to_string_pretty(&document)?),
        Format::Text => emit(&status_table(&document)),
    }
    Ok(ExitStatus::Success)
}

pub async fn retrieve(args: RetrieveArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let at = runs::locate(args.run.run_dir, args.run.run_id.as_deref())?;
    let client = operator_for(&at, &args.run.cluster).await?;
    let document = client.status().await.map_err(|e| match &at {
        RunAt::Local { run_dir, .. } => {
            let config = RunConfig::load(&RunDir::new(run_dir)).ok();
            let bundle = config
                .map(|c| c.bundle_dir.display().to_string())
                .unwrap_or_default();
            anyhow::anyhow!(
                "the run's aggregator does not answer ({e}); a finished local run left its bundle in {bundle}"
            )
        }
        RunAt::Kubernetes(kube) => anyhow::anyhow!(
            "the run's aggregator does not answer ({e}); see `kubectl -n {} describe pod {}`",
            kube.namespace,
            factbuoy_dispatch::names::AGGREGATOR
        ),
    })?;
    let tar = document.tar_info.with_context(|| {
        format!(
            "the bundle is not ready: the run is {}",
            wire_name(&document.status)
        )
    })?;
    std::fs::create_dir_all(&args.out)?;
    let dest = args.out.join(&tar.name);
    let downloaded = client.download_bundle(&dest).await?;
    let sha256 = factbuoy_protocol::digest::sha256_file(&dest)?;
    anyhow::ensure!(
        downloaded.size == tar.size && sha256 == tar.sha256,
        "the downloaded bundle {} does not match the aggregator's ({} bytes, sha256 {}); delete it and retrieve again",
        dest.display(),
        tar.size,
        tar.sha256
    );
    match format {
        Format::Json => emit(
            &serde_json::json!({
                "path": dest,
                "size": downloaded.size,
                "resumed_from": downloaded.resumed_from,
                "sha256": sha256,
            })
            .to_string(),
        ),
        Format::Text => emit(&dest.display().to_string()),
    }
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;
    use factbuoy_protocol::types::PluginStatus;

    #[test]
    fn the_status_table_spells_statuses_as_the_wire_does() {
        let pair = |status| PluginStatus {
            plugin: "setup".into(),
            node: "node-1".into(),
            status,
            result_status: Some(ResultStatus::Failed),
            progress: None,
            last_heartbeat: None,
        };
        let table = status_table(&StatusDocument {
            run_id: "r".into(),
            status: RunStatus::PostProcessing,
            plugins: vec![pair(PairStatus::AgentFailed), pair(PairStatus::TimedOut)],
            tar_info: None,
            error: None,
        });
        for spelled in ["post-processing", "agent-failed", "timed-out"] {
            assert!(table.contains(spelled), "{table}");
        }
    }
}

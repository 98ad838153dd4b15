//! The fleet's runs: each an ordinary run served in this process, numbered in the order the
//! fleet started them, kept in `runs/<number>-<run id>/` so that a restarted fleet serves the
//! unfinished ones again. A run whose bundle is written is retired as a local run is
//! ([`RunDir::retire`]): its keys, commit records and results copy go, its configuration and
//! final status stay; a run that ended without a bundle keeps its results, their only copy.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use factbuoy_protocol::fleet::{FleetRoute, FleetRunRequest, FleetRunStarted};
use factbuoy_protocol::names::{IdentifierKind, NodeName, check_identifier};
use factbuoy_protocol::types::RunStatus;

use super::admission::FleetAdmission;
use super::dir::PortRange;
use super::offers::FleetRun;
use super::shared::Fleet;
use super::{plugins, registry};
use crate::enroll::Admission;
use crate::model::config::{Origin, OriginKind, RunConfig, RunPlugin};
use crate::persistence::run_dir::RunDir;
use crate::run::Run;
use crate::start::start_within;

/// The directory of run `number`.
fn run_dir(fleet: &Fleet, number: u64, run_id: &str) -> RunDir {
    RunDir::new(fleet.dir.runs().join(format!("{number:06}-{run_id}")))
}

/// Serves again the runs a stop left unfinished, and numbers new runs after every run there is.
pub(crate) async fn resume(fleet: &Arc<Fleet>) -> anyhow::Result<()> {
    let mut newest = 0;
    let mut found = Vec::new();
    for entry in std::fs::read_dir(fleet.dir.runs())? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(number) = name
            .split_once('-')
            .and_then(|(n, _)| n.parse::<u64>().ok())
        else {
            continue;
        };
        newest = newest.max(number);
        found.push((number, entry.path()));
    }
    *fleet.runs.newest.lock().unwrap() = newest;
    for (number, path) in found {
        let dir = RunDir::new(&path);
        if dir.final_status().exists() {
            continue;
        }
        let run = match Run::open(dir) {
            Ok(run) => run,
            Err(e) => {
                tracing::warn!("not serving {}: {e:#}", path.display());
                continue;
            }
        };
        if matches!(run.status(), RunStatus::Complete | RunStatus::Failed) {
            // A stop between the bundle and the retirement.
            retire_if_bundled(run.dir());
            continue;
        }
        serve(fleet, number, run)
            .await
            .with_context(|| format!("serving the unfinished run in {}", path.display()))?;
        tracing::info!(number, "serving an unfinished run again");
    }
    Ok(())
}

/// Serves `run` as the fleet's run `number`, whose agents enroll with the fleet's admission;
/// returns its operator listener's address.
async fn serve(fleet: &Arc<Fleet>, number: u64, run: Run) -> anyhow::Result<SocketAddr> {
    let run_id = run.config().run_id.clone();
    let nodes = run.config().nodes.clone();
    let ca = run.ca().cert_pem().to_owned();
    let admission = admission(fleet, &run_id);
    let dir = run.dir().clone();
    let running = start_within(run, fleet.bundled, Some(admission), fleet.run_budget).await?;
    let operator_address = running.operator_address;
    let finished = running.on_finish();
    let served_for = Duration::from_secs(fleet.settings.finished_run_seconds);
    let weak = Arc::downgrade(fleet);
    let retiring = tokio::spawn(async move {
        finished.await;
        // The state on disk, not the run's memory: this task must not keep the run alive.
        tokio::task::spawn_blocking(move || retire_if_bundled(&dir))
            .await
            .unwrap_or_else(|e| tracing::error!("retiring a fleet run: {e}"));
        // Its listeners answer `status` and `retrieve` a while longer, then close: a fleet that
        // starts a run every day must not keep every run it ever served.
        tokio::time::sleep(served_for).await;
        if let Some(fleet) = weak.upgrade() {
            tracing::info!(number, "stopped serving the finished run; its bundle stays");
            fleet.runs.remove(number);
        }
    });
    fleet.metrics.runs.inc();
    fleet.runs.add(
        number,
        FleetRun {
            run_id,
            nodes,
            ca,
            running,
            retiring,
        },
    );
    Ok(operator_address)
}

/// Retires the run in `dir` if it ended with its bundle written; logs what fails (the run's
/// bundle is whole either way, and a later start tries again).
fn retire_if_bundled(dir: &RunDir) {
    let document = match dir.saved_status() {
        Ok(document) => document,
        Err(e) => {
            tracing::warn!("reading the status of {}: {e:#}", dir.root().display());
            return;
        }
    };
    if document.tar_info.is_none()
        || !matches!(document.status, RunStatus::Complete | RunStatus::Failed)
    {
        return;
    }
    match dir.retire(&document) {
        Ok(()) => tracing::info!(
            run = %document.run_id,
            "retired the finished run: its keys, records and results copy are removed"
        ),
        Err(e) => tracing::warn!(
            "removing the finished run's working files from {}: {e}",
            dir.root().display()
        ),
    }
}

fn admission(fleet: &Arc<Fleet>, run_id: &str) -> Arc<dyn Admission> {
    Arc::new(FleetAdmission {
        key: fleet.ticket_key.clone(),
        run_id: run_id.to_owned(),
        dir: fleet.dir.clone(),
    })
}

/// Why a run could not start: the operator's mistake (400, 409) or the fleet's (500).
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    /// The request names something the fleet cannot run.
    #[error("{0}")]
    Invalid(String),
    /// No node is enrolled.
    #[error(
        "no node is enrolled in this fleet (or every one is revoked); join machines with `factbuoy fleet token create` and `factbuoy agent join` first"
    )]
    NoNodes,
    /// Every port of `fleet serve --run-ports` is taken by runs served (running, or finished
    /// and still answering for `--serve-finished-for`).
    #[error(
        "no two free ports in the fleet's run ports {0}: each run served takes two, finished ones too for `fleet serve --serve-finished-for`; try again when one stops being served, or serve the fleet with a wider --run-ports"
    )]
    NoPorts(PortRange),
    /// Creating or serving the run failed.
    #[error("starting the run: {0:#}")]
    Failed(anyhow::Error),
}

/// Two ports for a new run's listeners (agents, operators): the first two free ones of
/// `--run-ports`, or 0 (any) without it. A port is free when it can be bound: the listeners of
/// the runs this fleet serves hold theirs.
fn run_ports(fleet: &Fleet) -> Result<(u16, u16), StartError> {
    let Some(range) = fleet.settings.run_ports else {
        return Ok((0, 0));
    };
    let ip = fleet.settings.listen.ip();
    let mut free = range
        .ports()
        .filter(|&port| std::net::TcpListener::bind((ip, port)).is_ok());
    match (free.next(), free.next()) {
        (Some(agents), Some(operators)) => Ok((agents, operators)),
        _ => Err(StartError::NoPorts(range)),
    }
}

/// Starts a run of `request` over every enrolled node that is not revoked.
pub(crate) async fn start(
    fleet: &Arc<Fleet>,
    request: FleetRunRequest,
) -> Result<FleetRunStarted, StartError> {
    let mut plugins = Vec::new();
    let mut from_files = Vec::new();
    for value in request.plugins {
        let plan: RunPlugin = serde_json::from_value(value)
            .map_err(|e| StartError::Invalid(format!("a plugin of the request: {e}")))?;
        check_identifier(IdentifierKind::Plugin, &plan.name)
            .map_err(|e| StartError::Invalid(e.to_string()))?;
        if (fleet.bundled)(&plan.sha256).is_none() {
            if !plugins::is_stored(&fleet.dir, &plan.sha256) {
                return Err(StartError::Invalid(format!(
                    "plugin {} (sha256 {sha256}) is neither bundled in the fleet's binary nor stored by the fleet; upload it first (PUT {}; `factbuoy run --fleet` does)",
                    plan.name,
                    FleetRoute::Plugin {
                        sha256: plan.sha256.clone()
                    }
                    .path(),
                    sha256 = plan.sha256,
                )));
            }
            from_files.push(plan.sha256.clone());
        }
        plugins.push(plan);
    }
    if plugins.is_empty() {
        return Err(StartError::Invalid("the request names no plugin".into()));
    }
    let nodes: Vec<NodeName> = {
        let registry = fleet.registry.lock().unwrap();
        registry
            .0
            .keys()
            .filter(|node| !registry::is_revoked(&fleet.dir, node))
            .cloned()
            .collect()
    };
    if nodes.is_empty() {
        return Err(StartError::NoNodes);
    }
    // Ports are picked and bound one run at a time, so two runs starting at once never pick
    // the same ones.
    let _picking = fleet.starting.lock().await;
    let (agent_port, operator_port) = run_ports(fleet)?;
    let number = {
        let mut newest = fleet.runs.newest.lock().unwrap();
        *newest += 1;
        *newest
    };
    let ip = fleet.settings.listen.ip();
    let config = RunConfig {
        nodes: nodes.clone(),
        lost_after_seconds: request.lost_after_seconds.max(1),
        run_timeout_seconds: request.timeout_seconds.max(1),
        agent_listen: SocketAddr::new(ip, agent_port),
        operator_listen: SocketAddr::new(ip, operator_port),
        server_names: fleet.settings.server_names.clone(),
        bundle_dir: fleet.dir.bundles(),
        operator_ca: Some(fleet.ca.cert_pem().to_owned()),
        origin: Some(Origin {
            kind: OriginKind::Fleet,
            // The fleet's CA is made once at `fleet init` and outlives every run.
            id: factbuoy_pki::fingerprint_pem(fleet.ca.cert_pem())
                .context("the fleet's CA certificate does not parse")
                .map_err(StartError::Failed)?
                .sha256,
        }),
        ..RunConfig::new(plugins)
    };
    let run_id = config.run_id.clone();
    let dir = run_dir(fleet, number, &run_id);
    let run = Run::create(dir.clone(), config, &[]).map_err(StartError::Failed)?;
    for sha256 in &from_files {
        if let Err(e) = plugins::link_into(&fleet.dir, sha256, &dir) {
            // Not left for a restart to serve as a run whose plugin no agent could fetch.
            let _ = std::fs::remove_dir_all(dir.root());
            return Err(StartError::Failed(
                anyhow::Error::new(e).context(format!("linking plugin {sha256} into the run")),
            ));
        }
    }
    let ca = run.ca().cert_pem().to_owned();
    let operator = serve(fleet, number, run)
        .await
        .map_err(StartError::Failed)?;
    tracing::info!(number, run = %run_id, nodes = nodes.len(), "started a fleet run");
    Ok(FleetRunStarted {
        number,
        run_id,
        operator_port: operator.port(),
        ca,
        nodes,
    })
}

#[cfg(test)]
mod tests {
    use factbuoy_protocol::fleet::DEFAULT_IDLE_SECONDS;
    use factbuoy_protocol::types::TarInfo;

    use super::*;
    use crate::fleet::{FleetDir, FleetSettings, serve};
    use crate::model::config::sample;
    use crate::model::state::RunState;

    #[tokio::test(flavor = "multi_thread")]
    async fn a_run_bundled_before_a_stop_is_retired_when_the_fleet_starts_again_and_one_without_a_bundle_is_not()
     {
        let work = tempfile::tempdir().unwrap();
        let fleet = FleetDir::new(work.path());
        // The bundle written, the fleet stopped before the run was retired.
        let dir = RunDir::new(fleet.runs().join("000001-r"));
        let config = sample();
        Run::create(dir.clone(), config.clone(), &[]).unwrap();
        let mut state = RunState::new(&config);
        state.status = RunStatus::Complete;
        state.tar_info = Some(TarInfo {
            name: "20261125T000000Z_factbuoy_r.tar.gz".into(),
            created: String::new(),
            sha256: String::new(),
            size: 0,
        });
        dir.save_state(&state).unwrap();
        // One that failed without a bundle (a full disk): its results are their only copy.
        let unbundled = RunDir::new(fleet.runs().join("000002-u"));
        Run::create(unbundled.clone(), config.clone(), &[]).unwrap();
        std::fs::create_dir_all(unbundled.results()).unwrap();
        let mut state = RunState::new(&config);
        state.status = RunStatus::Failed;
        unbundled.save_state(&state).unwrap();

        let settings = FleetSettings {
            listen: "127.0.0.1:0".parse().unwrap(),
            server_names: vec!["127.0.0.1".into()],
            certificate_validity_seconds: 3600,
            finished_run_seconds: 3600,
            idle_seconds: DEFAULT_IDLE_SECONDS,
            run_ports: None,
        };
        let running = serve(fleet, settings, |_| None).await.unwrap();
        assert!(dir.final_status().exists(), "the run was not retired");
        assert!(!dir.pki().exists(), "the run's keys outlived its bundle");
        assert!(dir.config().exists());
        assert!(
            unbundled.results().exists() && !unbundled.final_status().exists(),
            "a run without a bundle was retired"
        );
        drop(running);
    }
}

//! A run whose aggregator and agents are separate processes (`factbuoy aggregator create`, then
//! `aggregator serve` and an `agent` per node started by hand, on other machines or here): the
//! run directory is planned and created here, and served again here ([`serve`]), by the
//! aggregator.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use factbuoy_aggregator::config::{Origin, OriginKind, RunConfig, ServerLimits};
use factbuoy_aggregator::{Run, RunDir, RunningAggregator};
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::names::NodeName;
use factbuoy_runtime::{Limits, Runtime, RuntimeOptions};

use crate::plan::{Nodes, Plan, PluginSelection};

/// A run directory to create, for agents started by hand.
#[derive(Debug, Clone)]
pub struct SeparateRun {
    /// The run directory, which must be empty or missing.
    pub run_dir: PathBuf,
    /// The nodes expected to send results.
    pub nodes: Vec<NodeName>,
    /// Where the agent listener binds; port 0 picks one at the first start.
    pub agent_listen: SocketAddr,
    /// Where the operator listener binds.
    pub operator_listen: SocketAddr,
    /// Names and addresses agents and operators dial, for the server certificate.
    pub server_names: Vec<String>,
    /// Where the bundle is written.
    pub bundle_dir: PathBuf,
    /// Interval between an agent's heartbeats.
    pub heartbeat: Duration,
    /// Silence after which a node is marked lost.
    pub lost_after: Duration,
    /// Deadline of the whole run.
    pub timeout: Duration,
    /// Limits of both listeners.
    pub limits: ServerLimits,
}

/// Plans `selection` and creates the run directory `run` describes; returns the run's id.
pub async fn create(selection: &PluginSelection, run: &SeparateRun) -> anyhow::Result<String> {
    let runtime = Runtime::new(RuntimeOptions {
        limits: Limits {
            deadline: selection.deadline,
            ..Limits::default()
        },
        ..RuntimeOptions::default()
    })?;
    let plan = Plan::build(&runtime, selection, Nodes::Elsewhere).await?;
    let config = RunConfig {
        nodes: run.nodes.clone(),
        heartbeat_seconds: run.heartbeat.as_secs().max(1),
        lost_after_seconds: run.lost_after.as_secs().max(1),
        run_timeout_seconds: run.timeout.as_secs().max(1),
        agent_listen: run.agent_listen,
        operator_listen: run.operator_listen,
        server_names: run.server_names.clone(),
        bundle_dir: std::path::absolute(&run.bundle_dir)?,
        limits: run.limits.clone(),
        ..RunConfig::new(plan.plugins())
    };
    let run_id = config.run_id.clone();
    Run::create(RunDir::new(&run.run_dir), config, &plan.components())?;
    Ok(run_id)
}

/// Issues a certificate for `role` in the run in `run_dir` into `out` (`ca.pem`, `client.pem`,
/// `client.key`), for an agent or an operator started by hand. An agent's node must be one of
/// the run's.
pub fn issue(run_dir: &Path, role: &Role, out: &Path) -> anyhow::Result<()> {
    let run = Run::open(RunDir::new(run_dir))?;
    if let Role::Agent { node } = role
        && !run.config().nodes.contains(node)
    {
        anyhow::bail!(
            "node {node:?} is not a node of run {}; its nodes are given to `aggregator create --node`",
            run.config().run_id
        );
    }
    run.issue_to_files(role, out)?;
    Ok(())
}

/// Why a killed local run's missing results are error results once it is served again.
pub const ABANDONED_LOCAL_RUN: &str =
    "the run's process ended before the run did, and its agent with it";

/// Serves the run in `run_dir` (made by `create`, or a local run's) until the handle is
/// dropped. A local run whose process ended before the run did ([`crate::follow::local_status`]
/// says abandoned) is ended at once with what was collected: its agent lived in that process
/// and will never deliver, so waiting out the lost-node window would only delay the bundle.
pub async fn serve(run_dir: &Path) -> anyhow::Result<RunningAggregator> {
    let run = Run::open(RunDir::new(run_dir))?;
    let local = matches!(
        run.config().origin,
        Some(Origin {
            kind: OriginKind::Local,
            ..
        })
    );
    // Asked before this process listens on the run's port.
    let abandoned = local && crate::follow::local_status(run_dir)?.abandoned;
    let running = factbuoy_aggregator::start(run, factbuoy_catalog::bundled_component).await?;
    if abandoned {
        running.interrupt(ABANDONED_LOCAL_RUN, Duration::ZERO);
    }
    Ok(running)
}

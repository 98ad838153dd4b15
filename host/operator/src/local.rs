//! A run on this host: an aggregator on loopback and an agent for this host in this process,
//! over the same mutual-TLS protocol as in a cluster. The plugins loaded for planning are handed
//! to the agent, so none is described twice.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use anyhow::Context;

use factbuoy_agent::{AgentConfig, AgentSummary, LoadedPlugins};
use factbuoy_aggregator::config::{Origin, OriginKind, RunConfig, ServerLimits};
use factbuoy_aggregator::{Run, RunDir, RunningAggregator};
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::names::NodeName;
use factbuoy_protocol::types::StatusDocument;
use factbuoy_protocol::{Client, Scope};
use factbuoy_runtime::{Limits, Runtime, RuntimeOptions, StopSignal};

use crate::error::Error;
use crate::follow::Finished;
use crate::plan::{Nodes, Plan, PluginSelection};
use crate::records::{LocalRun, RunRecord};
use crate::state::StateDir;

/// Connections a local run's listeners serve at once: one agent and a few `status` callers.
const LOCAL_MAX_CONNECTIONS: usize = 64;
/// How often a local run's progress is shown.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// A run on this host.
#[derive(Debug, Clone)]
pub struct LocalTarget {
    /// This host's node name [default: made from its host name].
    pub node: Option<NodeName>,
    /// The host directory plugins' paths are mapped onto.
    pub root: PathBuf,
    /// Where the run keeps its state [default: `runs/<run id>` in the state directory].
    pub run_dir: Option<PathBuf>,
}

impl Default for LocalTarget {
    fn default() -> Self {
        LocalTarget {
            node: None,
            root: PathBuf::from("/"),
            run_dir: None,
        }
    }
}

/// Requests from the operator to end a local run early (Ctrl-C, say), each with its reason.
/// The first ends the run with what was collected; another while the bundle is being written
/// stops waiting for it.
pub struct Interrupts(Option<mpsc::UnboundedReceiver<String>>);

impl Interrupts {
    /// No interrupts: the run goes to its end.
    pub fn none() -> Interrupts {
        Interrupts(None)
    }

    /// Interrupts sent on a channel, with the reason (`"Ctrl-C"`).
    pub fn from_channel(receiver: mpsc::UnboundedReceiver<String>) -> Interrupts {
        Interrupts(Some(receiver))
    }

    /// The next interrupt's reason; never, when there are none.
    pub(crate) async fn next(&mut self) -> String {
        match &mut self.0 {
            Some(receiver) => match receiver.recv().await {
                Some(reason) => reason,
                None => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    }
}

/// This host's node name, made from its host name.
pub fn this_host() -> anyhow::Result<NodeName> {
    NodeName::from_host_name(&sysinfo::System::host_name().unwrap_or_default())
        .context("this host's name makes no valid node name; name it with --node")
}

type AgentRun = Pin<Box<dyn Future<Output = anyhow::Result<AgentSummary>> + Send>>;

/// A local run being served, with its agent.
pub(crate) struct LocalRunning {
    running: RunningAggregator,
    agent: AgentRun,
    /// Stops the agent's plugins when the run is interrupted.
    stop: StopSignal,
    run_dir: PathBuf,
    bundle_dir: PathBuf,
}

/// How long an interrupted run waits for the agent to deliver what its stopped plugins wrote.
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);

/// Plans and starts a run of `selection` on this host, its bundle to be written into `out`.
pub(crate) async fn start(
    state: &StateDir,
    target: &LocalTarget,
    selection: &PluginSelection,
    timeout: Duration,
    out: &std::path::Path,
) -> anyhow::Result<(RunRecord, LocalRunning)> {
    let node = match &target.node {
        Some(node) => node.clone(),
        None => this_host()?,
    };
    let runtime = Arc::new(Runtime::new(RuntimeOptions {
        limits: Limits {
            deadline: selection.deadline,
            ..Limits::default()
        },
        ..RuntimeOptions::default()
    })?);
    let plan = Plan::build(&runtime, selection, Nodes::ThisHost { root: &target.root }).await?;
    let config = RunConfig {
        nodes: vec![node.clone()],
        run_timeout_seconds: timeout.as_secs().max(1),
        bundle_dir: std::path::absolute(out)?,
        limits: ServerLimits {
            max_connections: LOCAL_MAX_CONNECTIONS,
            ..ServerLimits::default()
        },
        origin: Some(Origin {
            kind: OriginKind::Local,
            id: node.to_string(),
        }),
        ..RunConfig::new(plan.plugins())
    };
    let run_dir = match &target.run_dir {
        Some(dir) => dir.clone(),
        None => state.local_runs().join(&config.run_id),
    };
    let bundle_dir = config.bundle_dir.clone();
    let run = Run::create(RunDir::new(&run_dir), config, &plan.components())?;
    let identity = run
        .ca()
        .identity(&run.issue(&Role::Agent { node: node.clone() })?);
    let spool_dir = run.dir().spool();
    let running = factbuoy_aggregator::start(run, factbuoy_catalog::bundled_component).await?;
    let record = RunRecord::Local(LocalRun {
        run_id: running.config().run_id.clone(),
        run_dir: run_dir.clone(),
        operator_address: running.operator_address,
    });

    let client = Client::new(
        &format!("127.0.0.1:{}", running.agent_address.port()),
        &identity,
    )?;
    let stop = StopSignal::new();
    let agent_config = Arc::new(AgentConfig {
        scope: Scope::Node(node),
        host_root: target.root.clone(),
        spool_dir,
        retry_for: factbuoy_agent::RETRY_FOR,
        parallel: AgentConfig::all_cores(),
        stop: stop.clone(),
    });
    let loaded = Arc::new(LoadedPlugins::default());
    for entry in plan.entries {
        loaded.insert(entry.plugin.sha256, entry.loaded);
    }
    let agent = Box::pin(factbuoy_agent::run(client, runtime, agent_config, loaded));
    Ok((
        record,
        LocalRunning {
            running,
            agent,
            stop,
            run_dir,
            bundle_dir,
        },
    ))
}

impl LocalRunning {
    /// Serves the run to its end: the agent delivers, or the run's timeout or an interrupt
    /// ends it; then the bundle is written and the run's working files retired.
    pub(crate) async fn finish(
        self,
        interrupts: &mut Interrupts,
        on_status: &mut dyn FnMut(&StatusDocument),
    ) -> crate::Result<Finished> {
        let LocalRunning {
            mut running,
            mut agent,
            stop,
            run_dir,
            bundle_dir,
        } = self;
        let mut progress = tokio::time::interval(PROGRESS_EVERY);
        let agent_result = loop {
            tokio::select! {
                result = &mut agent => break Some(result),
                // The run ended without the agent (at its timeout): nothing the agent still
                // runs has a run to go to, so its plugins stop with its future, and the run is
                // not held up.
                _ = running.finished() => break None,
                reason = interrupts.next() => {
                    if stop.is_stopped() {
                        // Again: what is not delivered yet becomes error results now.
                        running.end_interrupt_grace();
                        break None;
                    }
                    // The plugins stop; the agent delivers what they wrote until then, marked
                    // partial, while the run waits for it up to the grace.
                    stop.stop();
                    running.interrupt(&format!("{reason} from the operator"), INTERRUPT_GRACE);
                    tracing::warn!(
                        "{reason}: stopping the plugins and keeping what they wrote; {reason} again to stop at once"
                    );
                }
                _ = progress.tick() => on_status(&running.status_document()),
            }
        };
        // The agent is done (or given up on): an interrupted run waits for nothing more.
        drop(agent);
        if stop.is_stopped() {
            running.end_interrupt_grace();
        }
        loop {
            tokio::select! {
                _ = running.finished() => break,
                reason = interrupts.next() => return Err(Error::Stopped(format!(
                    "{reason} again: stopped while the bundle was being written; `factbuoy aggregator serve --run-dir {} --exit-when-complete` finishes it",
                    run_dir.display()
                ))),
                _ = progress.tick() => on_status(&running.status_document()),
            }
        }
        let document = running.status_document();
        drop(running);
        // Only a bundle holds everything: a run that could not write one (a full disk) keeps
        // its results in the run directory's results/, the only copy of them.
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
        Ok(Finished {
            bundle: document.tar_info.as_ref().map(|t| bundle_dir.join(&t.name)),
            bundle_dir,
            status: document,
        })
    }
}

//! Serving a run: [`start`] binds its two listeners (agents, operators), recovers what a stop
//! left in flight, and spawns the watchdog; what it returns, [`RunningAggregator`], is the
//! serving binary's handle on the run: its status, its node set, an interruption, its end.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use factbuoy_pki::ClientTrust;
use factbuoy_protocol::types::{RunStatus, StatusDocument};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::commit::ResultStore;
use crate::enroll::{Admission, Enrollment};
use crate::live::node_set::NodeSet;
use crate::live::shared::{BundledComponents, Shared};
use crate::live::watchdog::watchdog;
use crate::metrics::Metrics;
use crate::model::config::RunConfig;
use crate::routes::router::{self, Listener};
use crate::run::Run;
use crate::serving::{self, Budget};

/// A serving aggregator. Dropping it stops the listeners.
pub struct RunningAggregator {
    /// What the listeners, the node set and the watchdog share.
    pub(crate) shared: Arc<Shared>,
    /// The address the agent listener is bound to.
    pub agent_address: SocketAddr,
    /// The address the operator listener is bound to.
    pub operator_address: SocketAddr,
    status: tokio::sync::watch::Receiver<RunStatus>,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningAggregator {
    /// The handle that changes the run's set of nodes while it serves.
    pub fn nodes(&self) -> NodeSet {
        NodeSet::new(self.shared.clone())
    }

    /// The run's configuration, with the listen addresses actually bound.
    pub fn config(&self) -> &RunConfig {
        &self.shared.config
    }

    /// Where the run is, as of now.
    pub fn status(&self) -> RunStatus {
        self.shared.state.lock().unwrap().status
    }

    /// The status document operators see (`GET /status`), as of now.
    pub fn status_document(&self) -> StatusDocument {
        self.shared.status_document()
    }

    /// A handle that reads the status document while the run serves, for another task.
    pub fn status_reader(&self) -> StatusReader {
        StatusReader(self.shared.clone())
    }

    /// The run's metrics in the Prometheus text format (`GET /metrics`), as of now.
    pub fn metrics_text(&self) -> String {
        self.shared.update_node_gauges();
        self.shared.metrics.encode()
    }

    /// Ends the run early, for `reason` (the operator pressed Ctrl-C, say): results still
    /// arriving within `grace` are taken (an agent delivering what its stopped plugins wrote),
    /// then every missing result becomes an error result saying so, the bundle holds what was
    /// collected, and the run ends failed. Does nothing to a run that is no longer running or
    /// already interrupted.
    pub fn interrupt(&self, reason: &str, grace: Duration) {
        let mut state = self.shared.state.lock().unwrap();
        if state.status != RunStatus::Running || state.interrupted.is_some() {
            return;
        }
        tracing::warn!("interrupting the run: {reason}");
        state.interrupted = Some(reason.to_owned());
        state.interrupt_grace_until = Some(SystemTime::now() + grace);
        self.shared.save_state(&state);
        drop(state);
        self.shared.changed.notify_one();
    }

    /// Ends an interrupted run's grace now (a second Ctrl-C, or its agents are done): the
    /// missing results become error results at once.
    pub fn end_interrupt_grace(&self) {
        self.shared.state.lock().unwrap().interrupt_grace_until = None;
        self.shared.changed.notify_one();
    }

    /// Waits until the run is complete or failed.
    pub async fn finished(&mut self) -> RunStatus {
        until_finished(&mut self.status).await
    }

    /// Waits, as [`RunningAggregator::finished`] does, without borrowing the handle: for a task
    /// beside the run that acts when it ends.
    pub(crate) fn on_finish(&self) -> impl Future<Output = RunStatus> + Send + 'static {
        let mut status = self.status.clone();
        async move { until_finished(&mut status).await }
    }
}

async fn until_finished(status: &mut tokio::sync::watch::Receiver<RunStatus>) -> RunStatus {
    let status = status
        .wait_for(|s| matches!(s, RunStatus::Complete | RunStatus::Failed))
        .await
        .map(|s| *s);
    status.unwrap_or(RunStatus::Failed)
}

impl Drop for RunningAggregator {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Reads a serving run's status document; cheap to clone, and usable from any task.
#[derive(Clone)]
pub struct StatusReader(Arc<Shared>);

impl StatusReader {
    /// The status document operators see, as of now.
    pub fn document(&self) -> StatusDocument {
        self.0.status_document()
    }
}

/// Serves `run`. `bundled` finds components of this binary's bundled plugins for agents that
/// ask for one. Agents need a certificate from the run's CA ([`start_with`] also enrolls them).
pub async fn start(run: Run, bundled: BundledComponents) -> anyhow::Result<RunningAggregator> {
    start_with(run, bundled, None).await
}

/// Serves `run` as [`start`] does; with an `admission`, the agent listener also lets clients
/// without a certificate finish the TLS handshake, for `POST /api/v1/enroll` only (every other
/// route refuses them with 403), and signs a certificate for the node each credential admits
/// ([`crate::enroll`]).
pub async fn start_with(
    run: Run,
    bundled: BundledComponents,
    admission: Option<Arc<dyn Admission>>,
) -> anyhow::Result<RunningAggregator> {
    let budget = serving::budget(run.config().limits.max_connections);
    start_within(run, bundled, admission, budget).await
}

/// Serves `run` as [`start_with`] does, its listeners each within `budget`: a fleet works out
/// its runs' budget once, when it starts serving.
pub(crate) async fn start_within(
    run: Run,
    bundled: BundledComponents,
    admission: Option<Arc<dyn Admission>>,
    budget: Budget,
) -> anyhow::Result<RunningAggregator> {
    let Run {
        dir: run_dir,
        mut config,
        state,
        ca,
        server,
    } = run;
    let operator_tls = ca.server_config_with(
        &server,
        ClientTrust {
            also: config.operator_ca.as_deref(),
            ..ClientTrust::default()
        },
    )?;
    let agent_tls = ca.server_config_with(
        &server,
        ClientTrust {
            anonymous: admission.is_some(),
            ..ClientTrust::default()
        },
    )?;
    let agent_listener = serving::bind(config.agent_listen)
        .with_context(|| format!("binding the agent listener to {}", config.agent_listen))?;
    let operator_listener = serving::bind(config.operator_listen).with_context(|| {
        format!(
            "binding the operator listener to {}",
            config.operator_listen
        )
    })?;
    let agent_address = agent_listener.local_addr()?;
    let operator_address = operator_listener.local_addr()?;
    // A restarted aggregator must be found where agents knew it.
    if (agent_address, operator_address) != (config.agent_listen, config.operator_listen) {
        config.agent_listen = agent_address;
        config.operator_listen = operator_address;
        run_dir.save_config(&config)?;
    }
    let (status_tx, status_rx) = tokio::sync::watch::channel(state.status);
    let results = ResultStore::open(&run_dir)
        .and_then(|results| {
            results.recover(&state)?;
            Ok(results)
        })
        .with_context(|| {
            format!(
                "preparing {} (finishing or undoing the commits a stop cut short)",
                run_dir.staging().display()
            )
        })?;
    let shared = Arc::new(Shared {
        results,
        run_dir,
        state: Mutex::new(state),
        metrics: Metrics::default(),
        open: tokio::sync::RwLock::new(()),
        changed: tokio::sync::Notify::new(),
        node_changes: tokio::sync::Mutex::new(()),
        status: status_tx,
        started_at: SystemTime::now(),
        config,
        bundled,
        enrollment: admission.map(|admission| Enrollment::new(admission, ca)),
    });
    let tasks = vec![
        tokio::spawn(listen(
            agent_listener,
            agent_tls,
            Listener::Agent,
            shared.clone(),
            budget,
        )),
        tokio::spawn(listen(
            operator_listener,
            operator_tls,
            Listener::Operator,
            shared.clone(),
            budget,
        )),
        tokio::spawn(watchdog(shared.clone())),
    ];
    tracing::info!(%agent_address, %operator_address, run = %shared.config.run_id, "aggregator serving");
    Ok(RunningAggregator {
        shared,
        agent_address,
        operator_address,
        status: status_rx,
        tasks,
    })
}

/// Serves `listener` until the task is dropped, answering each request with the run's routes.
async fn listen(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    kind: Listener,
    shared: Arc<Shared>,
    budget: Budget,
) {
    let limits = shared.config.limits.clone();
    let reject = {
        let shared = shared.clone();
        Arc::new(move |reason: &'static str| shared.metrics.reject(reason))
    };
    serving::serve(
        listener,
        tls,
        &limits,
        budget,
        reject,
        move |peer, request| router::handle(shared.clone(), kind, peer.role.clone(), request),
    )
    .await
}

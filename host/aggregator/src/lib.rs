//! The aggregator: expects results from (plugin, node) pairs, receives them from agents over
//! mutual TLS, reports status and progress to operators, and packages one bundle per run.
//!
//! A run lives in a [`RunDir`]. [`Run::create`] makes one and [`Run::open`] reads one back;
//! [`start`] serves it, new or after a restart, continuing where it stopped. A run always ends:
//! nodes that stop sending heartbeats are marked lost, and the run timeout turns whatever is
//! missing into error results. Not here: what runs the plugins (the agent crate) and how agents
//! are dispatched.

pub mod config;
pub mod enroll;
pub mod fleet;
pub mod handler;
pub mod metrics;
pub mod nodes;
pub mod run_dir;
pub mod server;
pub mod shared;
pub mod state;
pub mod storage;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use factbuoy_pki::{ClientTrust, Issued, RunCa};
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::routes::Scope;
use factbuoy_protocol::types::{PairStatus, RunStatus, now_rfc3339};
use tokio::net::{TcpListener, TcpSocket};
use tokio::task::JoinHandle;

use config::RunConfig;
use handler::Listener;
use metrics::Metrics;
pub use run_dir::RunDir;
pub use shared::Shared;
use state::{RunState, Unheard};
use storage::Storage;

/// How often the watchdog looks for lost nodes, timeouts and a finished run.
const WATCHDOG_TICK: Duration = Duration::from_millis(250);

/// Finds a plugin component compiled into the serving binary by its sha-256, so a run need not
/// store copies of bundled plugins for agents that lack them.
pub type BundledComponents = fn(&str) -> Option<&'static [u8]>;

/// A run: its directory, configuration, state and CA, in memory.
pub struct Run {
    dir: RunDir,
    config: RunConfig,
    state: RunState,
    ca: RunCa,
    server: Issued,
}

impl Run {
    /// Creates a run directory: its CA, server and operator certificates, configuration and
    /// initial state. `components` are plugin components not bundled in this binary.
    pub fn create(
        dir: RunDir,
        config: RunConfig,
        components: &[(String, Vec<u8>)],
    ) -> anyhow::Result<Run> {
        use std::os::unix::fs::DirBuilderExt;
        let root = dir.root();
        if root.exists() && std::fs::read_dir(root)?.next().is_some() {
            anyhow::bail!(
                "{} already holds a run; choose another --run-dir",
                root.display()
            );
        }
        let mut private = std::fs::DirBuilder::new();
        private.recursive(true).mode(0o700);
        private.create(root)?;
        private.create(dir.pki())?;
        let ca = RunCa::create(&config.run_id)?;
        ca.save(&dir.pki())?;
        let server = ca.issue_server(&config.server_names)?;
        server.save(&dir.pki(), "server")?;
        let operator = ca.issue_client(&Role::Operator {
            name: "operator".into(),
        })?;
        operator.save(&dir.pki(), "operator")?;
        for (sha256, bytes) in components {
            let path = dir.component(sha256);
            std::fs::create_dir_all(path.parent().expect("component paths have a parent"))?;
            std::fs::write(path, bytes)?;
        }
        config.save(&dir)?;
        let state = RunState::new(&config);
        state.save(&dir)?;
        Ok(Run {
            dir,
            config,
            state,
            ca,
            server,
        })
    }

    /// Reads back the run in `dir`, new or interrupted.
    pub fn open(dir: RunDir) -> anyhow::Result<Run> {
        let config = RunConfig::load(&dir)?;
        let state = RunState::load(&dir, &config).context("loading the run's state")?;
        let ca = RunCa::load(&dir.pki(), &config.run_id)?;
        let server = Issued::load(&dir.pki(), "server")?;
        Ok(Run {
            dir,
            config,
            state,
            ca,
            server,
        })
    }

    /// The run's configuration.
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// The run's directory.
    pub fn dir(&self) -> &RunDir {
        &self.dir
    }

    /// The run's CA.
    pub fn ca(&self) -> &RunCa {
        &self.ca
    }

    /// Issues a client certificate for `role` from the run's CA.
    pub fn issue(&self, role: &Role) -> anyhow::Result<Issued> {
        Ok(self.ca.issue_client(role)?)
    }

    /// Writes a client certificate for `role` into `dir` (ca.pem, client.pem, client.key
    /// 0600), for an agent started by hand.
    pub fn issue_to_files(&self, role: &Role, dir: &std::path::Path) -> anyhow::Result<()> {
        let issued = self.issue(role)?;
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("ca.pem"), self.ca.cert_pem())?;
        issued.save(dir, "client")?;
        Ok(())
    }
}

/// A serving aggregator. Dropping it stops the listeners.
pub struct RunningAggregator {
    /// What the listeners and the watchdog share.
    pub shared: Arc<Shared>,
    /// The address the agent listener is bound to.
    pub agent_address: SocketAddr,
    /// The address the operator listener is bound to.
    pub operator_address: SocketAddr,
    status: tokio::sync::watch::Receiver<RunStatus>,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningAggregator {
    /// The handle that changes the run's set of nodes while it serves.
    pub fn nodes(&self) -> nodes::NodeSet {
        nodes::NodeSet {
            shared: self.shared.clone(),
        }
    }

    /// Ends the run early, for `reason` (the operator pressed Ctrl-C, say): every missing result
    /// becomes an error result saying so, the bundle holds what was collected, and the run
    /// ends failed. Does nothing to a run that is no longer running.
    pub fn interrupt(&self, reason: &str) {
        let mut state = self.shared.state.lock().unwrap();
        if state.status != RunStatus::Running || state.interrupted.is_some() {
            return;
        }
        tracing::warn!("interrupting the run: {reason}");
        state.interrupted = Some(reason.to_owned());
        if let Err(e) = state.save(&self.shared.run_dir) {
            tracing::error!("saving the run state: {e:#}");
        }
        drop(state);
        self.shared.changed.notify_one();
    }

    /// Waits until the run is complete or failed.
    pub async fn finished(&mut self) -> RunStatus {
        let status = self
            .status
            .wait_for(|s| matches!(s, RunStatus::Complete | RunStatus::Failed))
            .await
            .map(|s| *s);
        status.unwrap_or(RunStatus::Failed)
    }
}

impl Drop for RunningAggregator {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Connections the kernel holds for the aggregator before it accepts them. Agents arrive in
/// bursts (a whole cluster starts at once); with the default of 128 the queue overflowed under
/// 512 uploads in flight, and each dropped connection cost its agent a one-second SYN retry.
/// Linux caps it at `net.core.somaxconn`.
const LISTEN_BACKLOG: u32 = 4096;

fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // As TcpListener::bind does: a restarted aggregator must get its port back at once.
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Serves `run`. `bundled` finds components of this binary's bundled plugins for agents that
/// ask for one. Agents need a certificate from the run's CA ([`start_with`] also enrolls them).
pub async fn start(run: Run, bundled: BundledComponents) -> anyhow::Result<RunningAggregator> {
    start_with(run, bundled, None).await
}

/// Serves `run` as [`start`] does; with an `admission`, the agent listener also lets clients
/// without a certificate finish the TLS handshake, for `POST /api/v1/enroll` only (every other
/// route refuses them with 403), and signs a certificate for the node each credential admits
/// ([`enroll`]).
pub async fn start_with(
    run: Run,
    bundled: BundledComponents,
    admission: Option<Arc<dyn enroll::Admission>>,
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
    let agent_listener = bind(config.agent_listen)
        .with_context(|| format!("binding the agent listener to {}", config.agent_listen))?;
    let operator_listener = bind(config.operator_listen).with_context(|| {
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
        config.save(&run_dir)?;
    }
    let (status_tx, status_rx) = tokio::sync::watch::channel(state.status);
    let storage = Storage::open(&run_dir)
        .and_then(|storage| {
            storage.recover(&state)?;
            Ok(storage)
        })
        .with_context(|| {
            format!(
                "preparing {} (finishing or undoing the commits a stop cut short)",
                run_dir.staging().display()
            )
        })?;
    let shared = Arc::new(Shared {
        storage,
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
        enrollment: admission.map(|admission| enroll::Enrollment::new(admission, ca)),
    });
    let budget = server::budget(shared.config.limits.max_connections);
    let tasks = vec![
        tokio::spawn(server::serve(
            agent_listener,
            agent_tls,
            Listener::Agent,
            shared.clone(),
            budget,
        )),
        tokio::spawn(server::serve(
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

/// Marks lost nodes and timed-out pairs, and packages the run once every pair has a result.
async fn watchdog(shared: Arc<Shared>) {
    let created: SystemTime = time::OffsetDateTime::parse(
        &shared.config.created,
        &time::format_description::well_known::Rfc3339,
    )
    .map(Into::into)
    .unwrap_or(shared.started_at);
    let window = Duration::from_secs(shared.config.lost_after_seconds);
    let timeout = Duration::from_secs(shared.config.run_timeout_seconds);
    let unheard = if shared.config.dynamic_nodes {
        Unheard::Dispatcher
    } else {
        Unheard::Silent
    };
    loop {
        let status = shared.state.lock().unwrap().status;
        match status {
            RunStatus::Complete | RunStatus::Failed => {
                shared.status.send_replace(status);
                return;
            }
            RunStatus::PostProcessing => {
                package(&shared).await;
                continue;
            }
            RunStatus::Running => {}
        }
        let now = SystemTime::now();
        let timed_out = now.duration_since(created).unwrap_or_default() > timeout;
        let (decided, lost, missing, interrupted) = {
            let state = shared.state.lock().unwrap();
            (
                // Those a stop cut short, or a node-set change could not write.
                state.disposition_stand_ins(),
                state.lost_pairs(now, shared.started_at, window, unheard),
                state.missing_pairs(),
                state.interrupted.clone(),
            )
        };
        let mut stand_ins: Vec<(String, Scope, PairStatus, String)> = decided;
        stand_ins.extend(lost.into_iter().map(|(plugin, scope)| {
            let message = format!(
                "node {:?} sent no heartbeat for {}s and no result of {plugin}; it was marked lost",
                scope.label(),
                window.as_secs()
            );
            (plugin, scope, PairStatus::Lost, message)
        }));
        if let Some(reason) = &interrupted {
            stand_ins.extend(missing.into_iter().map(|(plugin, scope)| {
                let message = format!(
                    "no result of {plugin} for {}: the run was interrupted ({reason})",
                    scope.label()
                );
                (plugin, scope, PairStatus::Interrupted, message)
            }));
        } else if timed_out {
            stand_ins.extend(missing.into_iter().map(|(plugin, scope)| {
                let message = format!(
                    "no result of {plugin} for {} within the run timeout of {}s",
                    scope.label(),
                    timeout.as_secs()
                );
                (plugin, scope, PairStatus::TimedOut, message)
            }));
        }
        for (plugin, scope, status, message) in stand_ins {
            if let Err(e) = stand_in(&shared, &plugin, &scope, status, &message).await {
                // A run must end: one that cannot record an error result ends failed.
                fail_run(
                    &shared,
                    format!(
                        "recording the error result of {plugin} for {} failed: {e}{}",
                        scope.label(),
                        disk_full_hint(&shared, e.is_disk_full())
                    ),
                );
                break;
            }
        }
        // A dynamic run waits for its dispatcher's first listing of nodes, or the timeout.
        let can_end = |state: &RunState| {
            state.all_done()
                && (!shared.config.dynamic_nodes
                    || state.settled
                    || timed_out
                    || state.interrupted.is_some())
        };
        if can_end(&shared.state.lock().unwrap()) {
            // Commits and node-set changes in flight finish first; later ones find the run
            // closed.
            let _closing = shared.open.write().await;
            let mut state = shared.state.lock().unwrap();
            if state.status == RunStatus::Running && can_end(&state) {
                state.status = RunStatus::PostProcessing;
                if let Err(e) = state.save(&shared.run_dir) {
                    tracing::error!("saving the run state: {e:#}");
                }
                shared.status.send_replace(RunStatus::PostProcessing);
                continue;
            }
        }
        tokio::select! {
            _ = shared.changed.notified() => {}
            _ = tokio::time::sleep(WATCHDOG_TICK) => {}
        }
    }
}

/// What to do about a full disk, for error messages.
fn disk_full_hint(shared: &Shared, full: bool) -> String {
    if full {
        format!(
            "; the disk holding {} is full. Every result committed so far is intact there",
            shared.run_dir.root().display()
        )
    } else {
        String::new()
    }
}

/// Removes the run's secret parameters from disk.
fn forget_secrets(shared: &Shared) {
    if let Err(e) = RunConfig::forget_secrets(&shared.run_dir) {
        tracing::error!("removing the run's secret parameters: {e}");
    }
}

/// Ends the run as failed, with `message` in its status document.
fn fail_run(shared: &Shared, message: String) {
    tracing::error!("the run failed: {message}");
    forget_secrets(shared);
    let mut state = shared.state.lock().unwrap();
    state.status = RunStatus::Failed;
    state.error = Some(message);
    state.finished = Some(now_rfc3339());
    if let Err(e) = state.save(&shared.run_dir) {
        tracing::error!("saving the run state: {e:#}");
    }
    shared.status.send_replace(RunStatus::Failed);
}

/// Commits an error result in place of a missing one.
pub(crate) async fn stand_in(
    shared: &Arc<Shared>,
    plugin: &str,
    scope: &Scope,
    status: PairStatus,
    message: &str,
) -> Result<(), storage::CommitError> {
    let pair = shared.storage.lock_pair(plugin, scope.label()).await;
    if shared
        .state
        .lock()
        .unwrap()
        .pair(plugin, scope)
        .is_none_or(|p| p.committed.is_some())
    {
        return Ok(()); // a commit came first
    }
    tracing::warn!("{message}");
    let worker = shared.clone();
    let (plugin_name, label, text) = (
        plugin.to_owned(),
        scope.label().to_owned(),
        message.to_owned(),
    );
    // The pair's lock is held until the state records the result (see the commit handler).
    let (committed, _pair) = tokio::task::spawn_blocking(move || {
        let committed = worker
            .storage
            .synthetic_error(&plugin_name, &label, status, &text);
        (committed, pair)
    })
    .await
    .map_err(|e| storage::CommitError::Io(std::io::Error::other(e.to_string())))?;
    let committed = match committed {
        Ok(committed) => committed,
        // Recorded: it stands; packaging moves it into place first.
        Err(storage::CommitError::Unfinished(committed, _)) => *committed,
        Err(e) => return Err(e),
    };
    shared
        .state
        .lock()
        .unwrap()
        .apply_commit(plugin, scope, status, committed);
    Ok(())
}

/// Writes the bundle and completes the run: first finishes any recorded commit not yet in
/// place, and removes what an earlier packaging left (a `.partial` from a stop).
async fn package(shared: &Arc<Shared>) {
    // Every result is in: no plan will be handed out again, so the secrets go.
    forget_secrets(shared);
    let document = shared
        .state
        .lock()
        .unwrap()
        .bundle_document(&shared.config.run_id);
    let worker = shared.clone();
    let written = tokio::task::spawn_blocking(move || {
        let state = worker.state.lock().unwrap().clone();
        worker
            .storage
            .recover(&state)
            .context("moving recorded results into place")?;
        factbuoy_bundle::writer::remove_earlier(&worker.config.bundle_dir, &worker.config.run_id)?;
        let public_config = worker.config.without_secrets();
        let meta = factbuoy_bundle::writer::Meta {
            run_id: &worker.config.run_id,
            run: &public_config,
            status: &document,
            definitions: worker
                .config
                .plugins
                .iter()
                .map(|p| (p.name.as_str(), &p.definition))
                .collect(),
        };
        factbuoy_bundle::writer::write(
            &meta,
            worker.storage.bundle_root(),
            &worker.config.bundle_dir,
        )
    })
    .await;
    let error = match written {
        Ok(Ok((path, tar_info))) => {
            tracing::info!(bundle = %path.display(), "run complete");
            let mut state = shared.state.lock().unwrap();
            state.tar_info = Some(tar_info);
            state.finished = Some(now_rfc3339());
            state.error = state.final_error();
            state.status = state.final_status();
            if let Err(e) = state.save(&shared.run_dir) {
                tracing::error!("saving the run state: {e:#}");
            }
            return;
        }
        Ok(Err(e)) => {
            let full = e
                .chain()
                .filter_map(|c| c.downcast_ref::<std::io::Error>())
                .any(storage::is_disk_full);
            let hint = if full {
                format!(
                    "; the disk holding {} or {} is full. Every committed result is intact in the run directory",
                    shared.config.bundle_dir.display(),
                    shared.run_dir.root().display()
                )
            } else {
                String::new()
            };
            format!("writing the bundle failed: {e:#}{hint}")
        }
        Err(e) => format!("the bundle writer crashed: {e}"),
    };
    fail_run(shared, error);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_burst_of_connections_waits_in_the_queue_instead_of_being_dropped() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let address = listener.local_addr().unwrap();
        // Nothing accepts: every connection must fit in the kernel's queue. With the default
        // backlog of 128 the rest would wait for a SYN retry and time out here.
        let burst = 300;
        // A kernel whose somaxconn is below the burst caps any backlog, and the test could not
        // tell 4096 from 128: say so rather than pass.
        let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .expect("reading /proc/sys/net/core/somaxconn")
            .trim()
            .parse()
            .expect("net.core.somaxconn is a number");
        assert!(
            somaxconn >= burst,
            "this kernel caps listen backlogs at {somaxconn} (net.core.somaxconn), below the \
             {burst} connections this test needs: raise it (sysctl -w net.core.somaxconn=4096, \
             the default since Linux 5.4) to run it"
        );
        let connections: Vec<_> = (0..burst)
            .map(|i| {
                std::net::TcpStream::connect_timeout(&address, Duration::from_millis(500))
                    .unwrap_or_else(|e| panic!("connection {i} was not queued: {e}"))
            })
            .collect();
        assert_eq!(connections.len(), burst);
    }
}

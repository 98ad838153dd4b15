//! The agent: runs the plugins its aggregator's plan names on this node (or, as the runner of
//! a run's global plugins, once for the run), and phones the results home over mutual TLS. Not here: the sandbox (factbuoy-runtime) and the wire protocol
//! (factbuoy-protocol), which it uses.
//!
//! Artifacts are spooled to disk first, so that each upload carries its digest and a retry after
//! a broken connection (or an aggregator restart) can send the file again. Transport errors and
//! 5xx answers are retried with exponential backoff and jitter; 409 means the aggregator already
//! has the result. A plugin that fails becomes an error result; the other plugins still run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use factbuoy_protocol::names::{ArtifactName, NodeName};
use factbuoy_protocol::text::printable;
use factbuoy_protocol::tls::Identity;
use factbuoy_protocol::types::{
    ManifestFile, Outcome, PlannedPlugin, ProgressUpdate, ResultManifest, now_rfc3339,
};
use factbuoy_protocol::{Client, ClientError, Scope};
use factbuoy_runtime::sink::DirectorySink;
use factbuoy_runtime::{InvocationReport, Limits, LoadedPlugin, Runtime, StopSignal};
use factbuoy_runtime::{Level, PluginProgress, ProgressObserver};
use hyper::StatusCode;
use tokio::sync::mpsc;

use invoke::Call;

pub mod fleet;
pub mod invoke;

/// First wait before retrying a request.
pub const RETRY_INITIAL: Duration = Duration::from_millis(200);
/// Longest wait between two tries.
pub const RETRY_MAX: Duration = Duration::from_secs(10);
/// How long a request is retried before the agent gives up on it.
pub const RETRY_FOR: Duration = Duration::from_secs(15 * 60);
/// Progress reports waiting to be sent; newer ones are dropped while it is full.
const PROGRESS_QUEUE: usize = 16;
/// How long a finished plugin's queued progress may take to reach the aggregator.
const RELAY_FINISH: Duration = Duration::from_secs(5);

/// Where and as what the agent runs.
pub struct AgentConfig {
    /// Whom it speaks for, as its certificate says: a node (`agent:NODE`), or the run's global
    /// plugins (`global:NAME`).
    pub scope: Scope,
    /// The host directory plugins' granted paths are mapped onto.
    pub host_root: PathBuf,
    /// Where artifacts wait for upload.
    pub spool_dir: PathBuf,
    /// How long each request is retried.
    pub retry_for: Duration,
    /// Plugins run at once: each may use the sandbox's whole memory limit.
    pub parallel: usize,
    /// Stops the run's plugins before they finish (an interrupted run): those running end
    /// failed as stopped, and deliver what they wrote until then, marked partial; those not
    /// started yet never start.
    pub stop: StopSignal,
}

impl AgentConfig {
    /// As many plugins at once as the machine has cores.
    pub fn all_cores() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// Plugins already loaded (compiled, linked and described), by the sha-256 of their component:
/// a local run hands over those it described while planning, so none is described twice.
#[derive(Default)]
pub struct LoadedPlugins(Mutex<HashMap<String, Arc<LoadedPlugin>>>);

impl LoadedPlugins {
    /// Remembers `plugin`, whose component has digest `sha256`.
    pub fn insert(&self, sha256: String, plugin: LoadedPlugin) {
        self.0.lock().unwrap().insert(sha256, Arc::new(plugin));
    }

    fn get(&self, sha256: &str) -> Option<Arc<LoadedPlugin>> {
        self.0.lock().unwrap().get(sha256).cloned()
    }
}

/// What the agent did, plugin by plugin.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AgentSummary {
    /// Each plugin's name and the outcome delivered for it.
    pub results: Vec<(String, Outcome)>,
}

/// Runs the plan to the end. The plan's plugins are independent, so they run at once, up to
/// `config.parallel`. A node's agent sends heartbeats meanwhile; the global runner has no node
/// whose heartbeats could stop, so it sends none. Dropping the future (an interrupted run)
/// stops the plugins and the heartbeats it started; so does the aggregator refusing a
/// heartbeat (the node was revoked), which ends the run with an error.
pub async fn run(
    client: Client,
    runtime: Arc<Runtime>,
    config: Arc<AgentConfig>,
    loaded: Arc<LoadedPlugins>,
) -> anyhow::Result<AgentSummary> {
    let plan = retry(config.retry_for, "fetching the plan", || {
        client.plan(&config.scope)
    })
    .await?;
    tracing::info!(run = %plan.run_id, scope = config.scope.label(), plugins = plan.plugins.len(), "agent starting");
    // A JoinSet aborts its tasks when dropped.
    let mut heartbeats = tokio::task::JoinSet::new();
    if let Scope::Node(node) = &config.scope {
        heartbeats.spawn(send_heartbeats(
            client.clone(),
            node.clone(),
            Duration::from_secs(plan.heartbeat_seconds.max(1)),
        ));
    }
    let slots = Arc::new(tokio::sync::Semaphore::new(config.parallel.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for (index, planned) in plan.plugins.into_iter().enumerate() {
        let (client, runtime, config, slots, loaded) = (
            client.clone(),
            runtime.clone(),
            config.clone(),
            slots.clone(),
            loaded.clone(),
        );
        tasks.spawn(async move {
            let _slot = slots
                .acquire_owned()
                .await
                .expect("the semaphore is never closed");
            // Stopped before its turn: nothing to deliver; the aggregator gives the pair an
            // error result saying the run was interrupted.
            if config.stop.is_stopped() {
                return (index, planned.name, Outcome::Failed);
            }
            let outcome = run_plugin(&client, &runtime, &config, &loaded, &planned).await;
            (index, planned.name, outcome)
        });
    }
    let mut results = Vec::new();
    loop {
        tokio::select! {
            done = tasks.join_next() => match done {
                Some(done) => results.push(done?),
                None => break,
            },
            // Heartbeats end only when the aggregator refuses the node (a fleet revoked it):
            // nothing it still runs would be taken.
            Some(refused) = heartbeats.join_next() => {
                anyhow::bail!("the aggregator refused this node, so its plugins were stopped: {}", refused?);
            }
        }
    }
    // In the plan's order.
    results.sort_by_key(|(index, _, _)| *index);
    Ok(AgentSummary {
        results: results
            .into_iter()
            .map(|(_, name, outcome)| (name, outcome))
            .collect(),
    })
}

/// Sends the node's heartbeats until the aggregator refuses them (403: the node's admission was
/// withdrawn); returns that refusal. Other failures are the aggregator being away: tried again.
async fn send_heartbeats(client: Client, node: NodeName, every: Duration) -> ClientError {
    loop {
        match client.heartbeat(&node).await {
            Err(e) if e.status() == Some(StatusCode::FORBIDDEN) => return e,
            Err(e) => tracing::debug!("heartbeat: {e}"),
            Ok(()) => {}
        }
        tokio::time::sleep(every).await;
    }
}

/// Runs one plugin and delivers its result (or its failure). Returns what was delivered: failed
/// when the aggregator did not take the result.
async fn run_plugin(
    client: &Client,
    runtime: &Runtime,
    config: &AgentConfig,
    loaded: &LoadedPlugins,
    planned: &PlannedPlugin,
) -> Outcome {
    let scope = &config.scope;
    let spool = config.spool_dir.join(&planned.name);
    let (manifest, files) = match gather(client, runtime, config, loaded, planned, &spool).await {
        Ok(Gathered { report, files }) => {
            let manifest = ResultManifest {
                outcome: if report.succeeded {
                    Outcome::Succeeded
                } else {
                    Outcome::Failed
                },
                error: report.failure_line(),
                files: files.iter().map(|(file, _)| file.clone()).collect(),
                plugin_version: report.version.clone(),
                report: serde_json::to_value(&report).ok(),
            };
            (manifest, files)
        }
        Err(message) => {
            // A load failure can carry the plugin's own text (a panic in describe).
            tracing::error!(plugin = %planned.name, "{}", printable(&message));
            let manifest = ResultManifest {
                outcome: Outcome::Failed,
                error: Some(message),
                files: Vec::new(),
                plugin_version: String::new(),
                report: None,
            };
            (manifest, Vec::new())
        }
    };
    let delivered = deliver(
        client,
        config.retry_for,
        scope,
        &planned.name,
        &manifest,
        &files,
    )
    .await;
    let _ = tokio::fs::remove_dir_all(&spool).await;
    match delivered {
        Ok(()) => manifest.outcome,
        // A result the aggregator does not hold is no success, whatever the plugin did.
        Err(e) => {
            tracing::error!(plugin = %planned.name, "could not deliver the result: {e}");
            Outcome::Failed
        }
    }
}

struct Gathered {
    report: InvocationReport,
    /// Each artifact's manifest entry and where it is spooled.
    files: Vec<(ManifestFile, PathBuf)>,
}

/// Loads and runs the plugin. An `Err` is a failure before the plugin could run.
async fn gather(
    client: &Client,
    runtime: &Runtime,
    config: &AgentConfig,
    plugins: &LoadedPlugins,
    planned: &PlannedPlugin,
    spool: &Path,
) -> Result<Gathered, String> {
    let loaded = match plugins.get(&planned.sha256) {
        Some(loaded) => loaded,
        None => {
            let wasm = match factbuoy_catalog::bundled_by_digest(&planned.sha256) {
                Some(bundled) => bundled.wasm.to_vec(),
                None => retry(config.retry_for, "fetching the plugin", || {
                    client.component(&planned.sha256)
                })
                .await
                .map_err(|e| e.to_string())?,
            };
            let loaded = runtime
                .load(&planned.name, &wasm, Some(&planned.sha256))
                .await
                .map_err(|e| e.to_string())?;
            Arc::new(loaded)
        }
    };
    let _ = tokio::fs::remove_dir_all(spool).await;
    tokio::fs::create_dir_all(spool)
        .await
        .map_err(|e| format!("creating {}: {e}", spool.display()))?;
    let scope = config.scope.clone();
    let relay_client = client.clone();
    let (observer, relay) = ProgressRelay::start(
        scope.label().to_owned(),
        planned.name.clone(),
        move |update| {
            let (client, scope) = (relay_client.clone(), scope.clone());
            async move { client.progress(&scope, &update).await }
        },
    );
    let limits = Limits {
        deadline: Duration::from_secs(planned.deadline_seconds),
        ..runtime.limits().clone()
    };
    let call = Call {
        params: &planned.params,
        grants: &planned.grants,
        denies: &planned.denies,
        host_root: config.host_root.clone(),
        sink: Arc::new(DirectorySink::new(spool)),
        observer: Some(observer),
        limits: Some(limits),
        stop: Some(config.stop.clone()),
    };
    let report = invoke::invoke(runtime, &loaded, call).await;
    relay.finish().await;
    let report = report.map_err(|e| e.to_string())?;
    let files = report
        .artifacts
        .iter()
        .filter(|a| a.error.is_none())
        .filter_map(|a| {
            let sha256 = a.sha256.clone()?;
            let entry = ManifestFile {
                name: a.name.to_string(),
                size: a.size_bytes,
                sha256,
            };
            Some((entry, spool.join(a.name.to_relative_path())))
        })
        .collect();
    Ok(Gathered { report, files })
}

/// Uploads the files, then commits the manifest. A 409 on either means the aggregator already
/// holds a complete result: done.
async fn deliver(
    client: &Client,
    retry_for: Duration,
    scope: &Scope,
    plugin: &str,
    manifest: &ResultManifest,
    files: &[(ManifestFile, PathBuf)],
) -> Result<(), ClientError> {
    for (file, path) in files {
        let name =
            ArtifactName::parse(&file.name).expect("names were checked when the plugin wrote them");
        let sent = retry(retry_for, "uploading an artifact", || {
            client.put_file(scope, plugin, &name, path, &file.sha256)
        })
        .await;
        match sent {
            Err(e) if e.status() == Some(StatusCode::CONFLICT) => return Ok(()),
            other => other?,
        }
    }
    match retry(retry_for, "committing the result", || {
        client.commit(scope, plugin, manifest)
    })
    .await
    {
        Err(e) if e.status() == Some(StatusCode::CONFLICT) => Ok(()),
        other => other,
    }
}

/// A spool directory for an agent given none: private to its user (0700) and removed, with
/// whatever it holds, when dropped.
pub fn private_spool() -> std::io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix("factbuoy-spool-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
}

/// How an agent proves whom it speaks for.
#[derive(Debug, Clone)]
pub enum Credentials {
    /// A certificate issued by hand (`factbuoy aggregator issue`): `ca.pem`, `client.pem` and
    /// `client.key` in `dir`, for `scope`.
    Issued {
        /// The directory holding the three files.
        dir: PathBuf,
        /// The node (or the global runner) the certificate was issued for.
        scope: Scope,
    },
    /// A key made here and a certificate the aggregator signs for the node it admits on the
    /// credential in `credential_file` (in a pod, its ServiceAccount token; read again at each
    /// attempt), trusting the CA certificate in `ca_file`.
    Enrolled {
        /// The credential presented.
        credential_file: PathBuf,
        /// The aggregator's CA certificate.
        ca_file: PathBuf,
    },
}

/// A client of the aggregator at `address` (its certificate checked for `server_name` when
/// given, else for the address's host) speaking for whom `credentials` say, and that scope.
pub async fn connect(
    address: &str,
    server_name: Option<&str>,
    credentials: &Credentials,
    retry_for: Duration,
) -> anyhow::Result<(Client, Scope)> {
    let named = |client: Client| -> anyhow::Result<Client> {
        Ok(match server_name {
            Some(name) => client.with_server_name(name)?,
            None => client,
        })
    };
    let (identity, scope) = match credentials {
        Credentials::Enrolled {
            credential_file,
            ca_file,
        } => {
            let ca_pem = std::fs::read_to_string(ca_file).map_err(|e| {
                anyhow::anyhow!("reading the CA certificate {}: {e}", ca_file.display())
            })?;
            let anonymous = named(Client::anonymous(address, &ca_pem)?)?;
            let enrolled = enroll(&anonymous, &ca_pem, credential_file, retry_for).await?;
            (enrolled.identity, Scope::Node(enrolled.node))
        }
        Credentials::Issued { dir, scope } => (
            Identity::from_files(
                &dir.join("ca.pem"),
                &dir.join("client.pem"),
                &dir.join("client.key"),
            )?,
            scope.clone(),
        ),
    };
    Ok((named(Client::new(address, &identity)?)?, scope))
}

/// What enrolling gave: the node the aggregator admitted this agent for, and the identity to
/// speak for it with.
#[derive(Debug)]
pub struct Enrolled {
    /// The admitted node, which the certificate names.
    pub node: NodeName,
    /// The run's CA (as the caller trusts it), the certificate and the key made here.
    pub identity: Identity,
}

/// Gets a certificate for this agent's node from the aggregator: makes a private key here (it
/// never leaves this process), and sends its signing request with the credential read from
/// `credential_file` (read again at each attempt: kubelet rotates projected tokens). Transport
/// errors and 5xx are retried with backoff for `retry_for`; a refusal (403, say) ends it with
/// the aggregator's message. `client` presents no certificate ([`Client::anonymous`]) and
/// trusts `ca_pem`.
pub async fn enroll(
    client: &Client,
    ca_pem: &str,
    credential_file: &Path,
    retry_for: Duration,
) -> anyhow::Result<Enrolled> {
    enroll_with(client, ca_pem, retry_for, || {
        std::fs::read_to_string(credential_file).map_err(|e| {
            ClientError::Io(std::io::Error::new(
                e.kind(),
                format!("{}: {e}", credential_file.display()),
            ))
        })
    })
    .await
}

/// As [`enroll`], presenting what `credential` returns at each attempt.
pub async fn enroll_with(
    client: &Client,
    ca_pem: &str,
    retry_for: Duration,
    credential: impl Fn() -> Result<String, ClientError>,
) -> anyhow::Result<Enrolled> {
    let request = factbuoy_pki::KeyRequest::new("factbuoy agent")?;
    let answer = retry(retry_for, "enrolling", || async {
        client.enroll(&request.csr_pem, credential()?.trim()).await
    })
    .await
    .map_err(|e| match e {
        ClientError::Status {
            status, message, ..
        } if status.is_client_error() => anyhow::anyhow!(
            "the aggregator refused to enroll this agent ({status}): {}",
            printable(&message)
        ),
        ClientError::Status {
            status, message, ..
        } => anyhow::anyhow!(
            "the aggregator could not enroll this agent within {retry_for:?} ({status}): {}",
            printable(&message)
        ),
        other => anyhow::anyhow!("enrolling with the aggregator failed: {other}"),
    })?;
    tracing::info!(node = %answer.node, "enrolled");
    Ok(Enrolled {
        node: answer.node,
        identity: Identity {
            ca_pem: ca_pem.to_owned(),
            cert_pem: answer.certificate,
            key_pem: request.key_pem,
        },
    })
}

/// Calls `attempt` until it succeeds, fails for good, or `budget` has passed, waiting with
/// exponential backoff and full jitter between tries.
pub async fn retry<T, F, Fut>(budget: Duration, what: &str, attempt: F) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    retry_when(budget, what, ClientError::is_retryable, attempt).await
}

/// As [`retry`], trying again only after errors for which `retryable` is true.
pub async fn retry_when<T, F, Fut>(
    budget: Duration,
    what: &str,
    retryable: impl Fn(&ClientError) -> bool,
    mut attempt: F,
) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let started = tokio::time::Instant::now();
    let mut wait = RETRY_INITIAL;
    loop {
        match attempt().await {
            Err(e) if retryable(&e) && started.elapsed() < budget => {
                let jittered = wait.mul_f64(rand::random::<f64>());
                tracing::info!("{what} failed ({e}); retrying in {jittered:?}");
                tokio::time::sleep(jittered).await;
                wait = (wait * 2).min(RETRY_MAX);
            }
            other => return other,
        }
    }
}

/// Relays a plugin's progress to the aggregator without ever blocking the plugin: reports go
/// through a short queue, and are dropped when it is full (the next one supersedes them).
struct ProgressRelay {
    sender: mpsc::Sender<ProgressUpdate>,
    node: String,
}

struct RelayHandle {
    task: tokio::task::JoinHandle<()>,
}

impl ProgressRelay {
    /// Starts relaying through `send` (the aggregator's progress route, in an agent).
    fn start<S, F>(
        node: String,
        plugin: String,
        send: S,
    ) -> (Arc<dyn ProgressObserver>, RelayHandle)
    where
        S: Fn(ProgressUpdate) -> F + Send + 'static,
        F: std::future::Future<Output = Result<(), ClientError>> + Send,
    {
        let (sender, mut receiver) = mpsc::channel::<ProgressUpdate>(PROGRESS_QUEUE);
        let task = tokio::spawn(async move {
            while let Some(update) = receiver.recv().await {
                if let Err(e) = send(update).await {
                    tracing::debug!(%plugin, "progress not delivered: {e}");
                }
            }
        });
        (
            Arc::new(ProgressRelay { sender, node }),
            RelayHandle { task },
        )
    }
}

impl RelayHandle {
    /// Sends what is queued, then stops.
    async fn finish(self) {
        // The observer (and so the sender) was dropped with the plugin's store.
        let _ = tokio::time::timeout(RELAY_FINISH, self.task).await;
    }
}

impl ProgressObserver for ProgressRelay {
    fn progress(&self, plugin: &str, update: &PluginProgress) {
        let mut update = ProgressUpdate {
            plugin: plugin.to_owned(),
            node: self.node.clone(),
            timestamp: now_rfc3339(),
            msg: update.message.clone(),
            total: update.total,
            completed: update.completed,
            errors: update.errors.clone(),
            warnings: update.warnings.clone(),
        };
        // The aggregator refuses what is past the caps; the run's report keeps it all.
        update.truncate_to_caps();
        let _ = self.sender.try_send(update);
    }

    fn log(&self, _plugin: &str, _level: Level, _message: &str) {}
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn rejected(status: StatusCode) -> ClientError {
        ClientError::Status {
            method: hyper::Method::PUT,
            path: "/x".into(),
            status,
            message: String::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retries_transient_failures_with_growing_waits_until_success() {
        let calls = AtomicUsize::new(0);
        let started = tokio::time::Instant::now();
        let result = retry(Duration::from_secs(60), "testing", || {
            let call = calls.fetch_add(1, Ordering::SeqCst);
            async move {
                match call {
                    0 => Err(ClientError::Timeout(Duration::from_secs(1))),
                    1 => Err(rejected(StatusCode::SERVICE_UNAVAILABLE)),
                    2 => Err(rejected(StatusCode::TOO_MANY_REQUESTS)),
                    _ => Ok(call),
                }
            }
        })
        .await;
        assert_eq!(result.unwrap(), 3);
        // Three waits, each at most the doubled backoff: 200 + 400 + 800 ms.
        assert!(
            started.elapsed() <= Duration::from_millis(1400),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_is_not_retried() {
        let calls = AtomicUsize::new(0);
        let result: Result<(), _> = retry(Duration::from_secs(60), "testing", || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(rejected(StatusCode::CONFLICT)) }
        })
        .await;
        assert_eq!(result.unwrap_err().status(), Some(StatusCode::CONFLICT));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn retrying_stops_when_the_budget_is_spent() {
        let calls = AtomicUsize::new(0);
        let budget = Duration::from_secs(30);
        let started = tokio::time::Instant::now();
        let result: Result<(), _> = retry(budget, "testing", || {
            calls.fetch_add(1, Ordering::SeqCst);
            async { Err(ClientError::Timeout(Duration::from_secs(1))) }
        })
        .await;
        assert!(result.unwrap_err().is_retryable());
        // It gave up after the budget, one wait of at most RETRY_MAX past it.
        assert!(started.elapsed() >= budget && started.elapsed() <= budget + RETRY_MAX);
        assert!(calls.load(Ordering::SeqCst) > 3);
    }

    fn update(completed: u64) -> PluginProgress {
        PluginProgress {
            message: format!("step {completed}"),
            total: 100,
            completed,
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_stalled_aggregator_never_blocks_the_plugin_and_the_queue_stays_bounded() {
        let delivered = Arc::new(Mutex::new(Vec::new()));
        let (release, released) = tokio::sync::watch::channel(false);
        let (observer, relay) = {
            let delivered = delivered.clone();
            ProgressRelay::start("n1".into(), "p".into(), move |update: ProgressUpdate| {
                let (delivered, mut released) = (delivered.clone(), released.clone());
                async move {
                    // The aggregator answers nothing until released.
                    let _ = released.wait_for(|r| *r).await;
                    delivered.lock().unwrap().push(update);
                    Ok(())
                }
            })
        };
        let started = std::time::Instant::now();
        for step in 0..1000 {
            observer.progress("p", &update(step));
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "the plugin waited on the relay"
        );
        release.send(true).unwrap();
        drop(observer);
        relay.finish().await;
        let delivered = delivered.lock().unwrap();
        // The one being sent when the queue filled, and the queue.
        assert!(
            delivered.len() <= PROGRESS_QUEUE + 1,
            "{} delivered",
            delivered.len()
        );
        assert_eq!(delivered[0].msg, "step 0");
        assert!(
            delivered
                .iter()
                .all(|u| u.node == "n1" && u.plugin == "p" && u.total == 100)
        );
    }
}

//! The agent: runs the plugins its aggregator's plan names on this node, and phones the results
//! home over mutual TLS.
//!
//! Artifacts are spooled to disk first, so that each upload carries its digest and a retry after
//! a broken connection (or an aggregator restart) can send the file again. Transport errors and
//! 5xx answers are retried with exponential backoff and jitter; 409 means the aggregator already
//! has the result. A plugin that fails becomes an error result; the other plugins still run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use factbuoy_protocol::names::ArtifactName;
use factbuoy_protocol::types::{ManifestFile, Outcome, PlannedPlugin, ProgressUpdate, ResultManifest};
use factbuoy_protocol::{Client, ClientError, Scope};
use hyper::StatusCode;
use tokio::sync::mpsc;

use crate::capabilities::GrantSet;
use crate::plugin::{BUNDLED, params};
use crate::runtime::host::progress::{Level, ProgressObserver};
use crate::runtime::sink::DirectorySink;
use crate::runtime::{Limits, RunReport, RunRequest, Runtime};

/// First wait before retrying a request.
pub const RETRY_INITIAL: Duration = Duration::from_millis(200);
/// Longest wait between two tries.
pub const RETRY_MAX: Duration = Duration::from_secs(10);
/// How long a request is retried before the agent gives up on it.
pub const RETRY_FOR: Duration = Duration::from_secs(15 * 60);
/// Progress reports waiting to be sent; older ones are dropped when the aggregator is slow.
const PROGRESS_QUEUE: usize = 16;

/// Where and as what the agent runs.
pub struct AgentConfig {
    pub node: String,
    /// The host directory plugins' granted paths are mapped onto.
    pub host_root: PathBuf,
    /// Where artifacts wait for upload.
    pub spool_dir: PathBuf,
    /// How long each request is retried.
    pub retry_for: Duration,
}

/// What the agent did, plugin by plugin.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AgentSummary {
    pub results: Vec<(String, Outcome)>,
}

/// Runs the node's plan to the end. The plan's plugins are independent, so they run at once,
/// as many as the machine has cores.
pub async fn run(client: Client, runtime: Arc<Runtime>, config: Arc<AgentConfig>) -> anyhow::Result<AgentSummary> {
    let plan = retry(config.retry_for, "fetching the plan", || client.plan(&config.node)).await?;
    tracing::info!(run = %plan.run_id, plugins = plan.plugins.len(), "agent starting");
    let heartbeats = tokio::spawn(send_heartbeats(
        client.clone(),
        config.node.clone(),
        Duration::from_secs(plan.heartbeat_seconds.max(1)),
    ));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let slots = Arc::new(tokio::sync::Semaphore::new(cores));
    let tasks: Vec<_> = plan
        .plugins
        .into_iter()
        .map(|planned| {
            let (client, runtime, config, slots) = (client.clone(), runtime.clone(), config.clone(), slots.clone());
            tokio::spawn(async move {
                let _slot = slots.acquire_owned().await.expect("the semaphore is never closed");
                let outcome = run_plugin(&client, &runtime, &config, &planned).await;
                (planned.name, outcome)
            })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await?);
    }
    heartbeats.abort();
    Ok(AgentSummary { results })
}

async fn send_heartbeats(client: Client, node: String, every: Duration) {
    loop {
        if let Err(e) = client.heartbeat(&node).await {
            tracing::debug!("heartbeat: {e}");
        }
        tokio::time::sleep(every).await;
    }
}

/// Runs one plugin and delivers its result (or its failure). Returns what was delivered.
async fn run_plugin(client: &Client, runtime: &Runtime, config: &AgentConfig, planned: &PlannedPlugin) -> Outcome {
    let scope = Scope::Node(config.node.clone());
    let spool = config.spool_dir.join(&planned.name);
    let (manifest, files) = match gather(client, runtime, config, planned, &spool).await {
        Ok(Gathered { report, files }) => {
            let manifest = ResultManifest {
                outcome: if report.succeeded { Outcome::Succeeded } else { Outcome::Failed },
                error: report.failure_line(),
                files: files.iter().map(|(file, _)| file.clone()).collect(),
                plugin_version: report.version.clone(),
                report: serde_json::to_value(&report).ok(),
            };
            (manifest, files)
        }
        Err(message) => {
            tracing::error!(plugin = %planned.name, "{message}");
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
    let delivered = deliver(client, config.retry_for, &scope, &planned.name, &manifest, &files).await;
    if let Err(e) = &delivered {
        tracing::error!(plugin = %planned.name, "could not deliver the result: {e}");
    }
    let _ = tokio::fs::remove_dir_all(&spool).await;
    manifest.outcome
}

struct Gathered {
    report: RunReport,
    /// Each artifact's manifest entry and where it is spooled.
    files: Vec<(ManifestFile, PathBuf)>,
}

/// Loads and runs the plugin. An `Err` is a failure before the plugin could run.
async fn gather(
    client: &Client,
    runtime: &Runtime,
    config: &AgentConfig,
    planned: &PlannedPlugin,
    spool: &Path,
) -> Result<Gathered, String> {
    let wasm = match BUNDLED.iter().find(|b| b.sha256 == planned.sha256) {
        Some(bundled) => bundled.wasm.to_vec(),
        None => retry(config.retry_for, "fetching the plugin", || client.component(&planned.sha256))
            .await
            .map_err(|e| e.to_string())?,
    };
    let loaded = runtime
        .load(&planned.name, &wasm, Some(&planned.sha256))
        .await
        .map_err(|e| e.to_string())?;
    let params = params::resolve(&loaded.info.parameters, &planned.params)
        .map_err(|e| format!("plugin {:?}: {e}", planned.name))?;
    let mut grants = GrantSet::default();
    grants.extend_written(&planned.grants, &planned.denies).map_err(|e| e.to_string())?;
    let _ = tokio::fs::remove_dir_all(spool).await;
    tokio::fs::create_dir_all(spool).await.map_err(|e| format!("creating {}: {e}", spool.display()))?;
    let (observer, relay) = ProgressRelay::start(client.clone(), config.node.clone(), planned.name.clone());
    let limits = Limits {
        deadline: Duration::from_secs(planned.deadline_seconds),
        ..runtime.limits().clone()
    };
    let report = runtime
        .run(
            &loaded,
            RunRequest {
                params,
                grants,
                host_root: config.host_root.clone(),
                sink: Arc::new(DirectorySink::new(spool)),
                observer: Some(observer),
                limits: Some(limits),
            },
        )
        .await;
    relay.finish().await;
    let files = report
        .artifacts
        .iter()
        .filter(|a| a.error.is_none())
        .filter_map(|a| {
            let sha256 = a.sha256.clone()?;
            let entry = ManifestFile { name: a.name.to_string(), size: a.size_bytes, sha256 };
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
        let name = ArtifactName::parse(&file.name).expect("names were checked when the plugin wrote them");
        let sent = retry(retry_for, "uploading an artifact", || client.put_file(scope, plugin, &name, path, &file.sha256)).await;
        match sent {
            Err(e) if e.status() == Some(StatusCode::CONFLICT) => return Ok(()),
            other => other?,
        }
    }
    match retry(retry_for, "committing the result", || client.commit(scope, plugin, manifest)).await {
        Err(e) if e.status() == Some(StatusCode::CONFLICT) => Ok(()),
        other => other,
    }
}

/// Calls `attempt` until it succeeds, fails for good, or `budget` has passed, waiting with
/// exponential backoff and full jitter between tries.
pub async fn retry<T, F, Fut>(budget: Duration, what: &str, mut attempt: F) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let started = tokio::time::Instant::now();
    let mut wait = RETRY_INITIAL;
    loop {
        match attempt().await {
            Err(e) if e.is_retryable() && started.elapsed() < budget => {
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
    fn start(client: Client, node: String, plugin: String) -> (Arc<dyn ProgressObserver>, RelayHandle) {
        let (sender, mut receiver) = mpsc::channel::<ProgressUpdate>(PROGRESS_QUEUE);
        let scope = Scope::Node(node.clone());
        let task = tokio::spawn(async move {
            while let Some(update) = receiver.recv().await {
                if let Err(e) = client.progress(&scope, &update).await {
                    tracing::debug!(%plugin, "progress not delivered: {e}");
                }
            }
        });
        (Arc::new(ProgressRelay { sender, node }), RelayHandle { task })
    }
}

impl RelayHandle {
    /// Sends what is queued, then stops.
    async fn finish(self) {
        // The observer (and so the sender) was dropped with the plugin's store.
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
    }
}

impl ProgressObserver for ProgressRelay {
    fn progress(&self, plugin: &str, update: &crate::runtime::host::progress::ProgressUpdate) {
        let update = ProgressUpdate {
            plugin: plugin.to_owned(),
            node: self.node.clone(),
            timestamp: crate::aggregator::state::now_rfc3339(),
            msg: update.message.clone(),
            total: update.total,
            completed: update.completed,
            errors: update.errors.clone(),
            warnings: update.warnings.clone(),
        };
        let _ = self.sender.try_send(update);
    }

    fn log(&self, _plugin: &str, _level: Level, _message: &str) {}
}

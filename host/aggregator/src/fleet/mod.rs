//! A fleet: a long-lived aggregator for machines outside any cluster. It keeps an enrollment CA,
//! join tokens and a registry of enrolled nodes in its directory (all of which survive restarts),
//! and starts runs on an operator's request. Each run is an ordinary run of this crate (its own
//! CA, id, directory and bundle), whose expected nodes are the enrolled ones; agents learn of it
//! by long-polling the fleet and get a run certificate through the run's enrollment with a
//! credential the fleet gave them ([`admission`]). Agents only ever connect out.
//!
//! The directory (`FleetDir`):
//!
//! ```text
//! pki/ca.pem, ca.key          the enrollment CA (key 0600)
//! pki/server.pem, server.key  the fleet listener's certificate
//! pki/ticket.key              the key of run credentials (0600)
//! operator/                   an operator certificate: ca.pem, client.pem, client.key
//! fleet.json                  where it listens and the names in its certificate
//! tokens.json                 join tokens (hashed)
//! nodes/<node>.json           enrolled nodes; last-seen.json when each last asked for work
//! revoked/<node>              revocations
//! runs/<number>-<run id>/     each run's directory; bundles/ their bundles
//! plugins/<sha256>.wasm       plugins from files, uploaded by operators ([`plugins`])
//! ```

pub mod admission;
mod plugins;
pub mod registry;
mod routes;
mod runs;
pub mod tokens;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use factbuoy_pki::{FLEET_CA_NAME, Issued, RunCa};
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::names::NodeName;
use ring::hmac;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use crate::BundledComponents;
use crate::config::ServerLimits;
use crate::metrics::Metrics;

/// How long the enrollment CA is valid.
const CA_VALIDITY: time::Duration = time::Duration::days(3650);
/// How often last-seen times are written to `last-seen.json`.
const FLUSH_EVERY: Duration = Duration::from_secs(5);

/// The paths of a fleet's directory.
#[derive(Debug, Clone)]
pub struct FleetDir(PathBuf);

impl FleetDir {
    /// The fleet in `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FleetDir(root.into())
    }
    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.0
    }
    fn pki(&self) -> PathBuf {
        self.0.join("pki")
    }
    /// The operator credentials: `ca.pem`, `client.pem`, `client.key`.
    pub fn operator(&self) -> PathBuf {
        self.0.join("operator")
    }
    fn settings(&self) -> PathBuf {
        self.0.join("fleet.json")
    }
    fn tokens(&self) -> PathBuf {
        self.0.join("tokens.json")
    }
    fn nodes(&self) -> PathBuf {
        self.0.join("nodes")
    }
    fn node(&self, node: &NodeName) -> PathBuf {
        self.nodes().join(format!("{node}.json"))
    }
    fn last_seen(&self) -> PathBuf {
        self.0.join("last-seen.json")
    }
    fn lock_file(&self) -> PathBuf {
        self.0.join(".lock")
    }
    fn revoked_dir(&self) -> PathBuf {
        self.0.join("revoked")
    }
    fn revoked(&self, node: &NodeName) -> PathBuf {
        self.revoked_dir().join(node.as_str())
    }
    /// Where the runs' directories are.
    pub fn runs(&self) -> PathBuf {
        self.0.join("runs")
    }
    /// Where the runs' bundles are written.
    pub fn bundles(&self) -> PathBuf {
        self.0.join("bundles")
    }
    /// Where plugins from files are stored.
    fn plugins(&self) -> PathBuf {
        self.0.join("plugins")
    }
    /// The stored plugin component with digest `sha256`.
    fn plugin(&self, sha256: &str) -> PathBuf {
        self.plugins().join(format!("{sha256}.wasm"))
    }
}

/// How a fleet serves: kept in `fleet.json`, so a restart listens where agents knew it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetSettings {
    /// Where the fleet listens; port 0 picks one, recorded at the first start.
    pub listen: SocketAddr,
    /// The names and addresses agents dial, in the fleet's certificate (and its runs').
    pub server_names: Vec<String>,
    /// How long enrollment certificates are valid; agents renew them when a third is left.
    pub certificate_validity_seconds: u64,
}

impl FleetSettings {
    /// The address the join line names: the first server name and the port.
    pub fn advertised(&self) -> String {
        let host = self
            .server_names
            .first()
            .cloned()
            .unwrap_or_else(|| self.listen.ip().to_string());
        if host.contains(':') {
            format!("[{host}]:{}", self.listen.port())
        } else {
            format!("{host}:{}", self.listen.port())
        }
    }
}

/// Reads `fleet.json`.
pub fn settings(dir: &FleetDir) -> anyhow::Result<FleetSettings> {
    let path = dir.settings();
    let text = std::fs::read(&path).with_context(|| {
        format!(
            "reading {}: is this a fleet directory? `factbuoy fleet serve --dir` makes one",
            path.display()
        )
    })?;
    Ok(serde_json::from_slice(&text)?)
}

/// The pin of the fleet's CA, which the join line carries.
pub fn ca_pin(dir: &FleetDir) -> anyhow::Result<String> {
    let ca = std::fs::read_to_string(dir.pki().join("ca.pem"))
        .with_context(|| format!("reading the fleet CA in {}", dir.pki().display()))?;
    Ok(factbuoy_protocol::tls::ca_pin(&ca)?)
}

/// Makes the fleet's directory the first time (its CA, certificates and ticket key), and
/// records `settings` (the names may change between starts; the CA never does).
fn init(dir: &FleetDir, settings: &FleetSettings) -> anyhow::Result<RunCa> {
    use std::os::unix::fs::DirBuilderExt;
    let mut private = std::fs::DirBuilder::new();
    private.recursive(true).mode(0o700);
    private.create(dir.pki())?;
    let ca = if dir.pki().join("ca.key").exists() {
        RunCa::load_named(&dir.pki(), FLEET_CA_NAME)?
    } else {
        let ca = RunCa::create_named(FLEET_CA_NAME, CA_VALIDITY)?;
        ca.save(&dir.pki())?;
        private.create(dir.operator())?;
        let operator = ca.issue_client(&Role::Operator {
            name: "fleet-operator".into(),
        })?;
        operator.save(&dir.operator(), "client")?;
        std::fs::write(dir.operator().join("ca.pem"), ca.cert_pem())?;
        factbuoy_pki::write_private(
            &dir.pki().join("ticket.key"),
            &hex::encode(rand::random::<[u8; 32]>()),
        )?;
        ca
    };
    // The certificate follows the names given at each start.
    let server = ca.issue_server(&settings.server_names)?;
    server.save(&dir.pki(), "server")?;
    write_settings(dir, settings)?;
    std::fs::create_dir_all(dir.runs())?;
    std::fs::create_dir_all(dir.bundles())?;
    std::fs::create_dir_all(dir.plugins())?;
    Ok(ca)
}

fn write_settings(dir: &FleetDir, settings: &FleetSettings) -> anyhow::Result<()> {
    crate::run_dir::write_atomically(&dir.settings(), &serde_json::to_vec_pretty(settings)?)?;
    Ok(())
}

/// What the fleet's listener, its runs and its flusher share.
pub(crate) struct Fleet {
    dir: FleetDir,
    settings: FleetSettings,
    ca: RunCa,
    ticket_key: hmac::Key,
    /// The enrolled nodes; a node's record is written at once on a join or renewal, last-seen
    /// times every [`FLUSH_EVERY`] when they changed.
    registry: Mutex<(registry::Registry, bool)>,
    runs: runs::FleetRuns,
    bundled: BundledComponents,
    metrics: Metrics,
}

/// A serving fleet. Dropping it stops the listener and every run it serves.
pub struct RunningFleet {
    /// Where the fleet listens.
    pub address: SocketAddr,
    /// The settings it serves with (the port picked at the first start included).
    pub settings: FleetSettings,
    fleet: Arc<Fleet>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for RunningFleet {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.fleet.flush();
    }
}

/// Serves the fleet in `dir` (made on the first start) with `settings`; runs that were still
/// running when it last stopped are served again.
pub async fn serve(
    dir: FleetDir,
    mut settings: FleetSettings,
    bundled: BundledComponents,
) -> anyhow::Result<RunningFleet> {
    // A restart keeps the port agents know, unless told otherwise.
    if settings.listen.port() == 0
        && let Ok(previous) = self::settings(&dir)
        && previous.listen.ip() == settings.listen.ip()
    {
        settings.listen = previous.listen;
    }
    let ca = init(&dir, &settings)?;
    let listener = crate::bind(settings.listen)
        .with_context(|| format!("binding the fleet listener to {}", settings.listen))?;
    let address = listener.local_addr()?;
    if address != settings.listen {
        settings.listen = address;
        write_settings(&dir, &settings)?;
    }
    let server = Issued::load(&dir.pki(), "server")?;
    // The chain carries the CA: a joining agent checks it against its pin.
    let chained = Issued {
        cert_pem: format!("{}{}", server.cert_pem, ca.cert_pem()),
        key_pem: server.key_pem,
    };
    let tls = ca.server_config_with(
        &chained,
        factbuoy_pki::ClientTrust {
            anonymous: true,
            ..Default::default()
        },
    )?;
    let key_hex = std::fs::read_to_string(dir.pki().join("ticket.key"))?;
    let ticket_key = hmac::Key::new(
        hmac::HMAC_SHA256,
        &hex::decode(key_hex.trim()).context("reading pki/ticket.key")?,
    );
    let fleet = Arc::new(Fleet {
        registry: Mutex::new((registry::load(&dir)?, false)),
        runs: runs::FleetRuns::default(),
        dir,
        settings: settings.clone(),
        ca,
        ticket_key,
        bundled,
        metrics: Metrics::default(),
    });
    runs::resume(&fleet).await?;
    let limits = ServerLimits::default();
    let budget = crate::server::fleet_budget(limits.max_connections);
    let reject = {
        let fleet = fleet.clone();
        Arc::new(move |reason: &'static str| fleet.metrics.reject(reason))
    };
    let handler = {
        let fleet = fleet.clone();
        move |peer, request| routes::handle(fleet.clone(), peer, request)
    };
    let tasks = vec![
        tokio::spawn(async move {
            crate::server::serve_with(listener, tls, &limits, budget, reject, handler).await
        }),
        tokio::spawn(flusher(fleet.clone())),
    ];
    tracing::info!(%address, "fleet serving");
    Ok(RunningFleet {
        address,
        settings,
        fleet,
        tasks,
    })
}

impl Fleet {
    /// Writes the last-seen times if they changed since they were last written.
    fn flush(&self) {
        let mut registry = self.registry.lock().unwrap();
        if registry.1 {
            match registry::save_seen(&self.dir, &registry.0) {
                Ok(()) => registry.1 = false,
                Err(e) => tracing::warn!("writing {}: {e}", self.dir.last_seen().display()),
            }
        }
    }
}

async fn flusher(fleet: Arc<Fleet>) {
    loop {
        tokio::time::sleep(FLUSH_EVERY).await;
        let fleet = fleet.clone();
        let _ = tokio::task::spawn_blocking(move || fleet.flush()).await;
    }
}

/// Writes `value` as JSON into a file readable by its owner only, atomically.
fn write_json_private(path: &Path, value: &impl Serialize) -> std::io::Result<()> {
    factbuoy_pki::write_private(path, &serde_json::to_string_pretty(value)?)
        .map_err(std::io::Error::other)
}

/// Takes the advisory lock of `path` (made if missing) until the guard is dropped.
fn lock(path: &Path) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
    Ok(file)
}

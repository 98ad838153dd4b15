//! Serving a fleet: its directory made on the first start, its listener bound (where agents
//! knew it), the runs a stop left unfinished served again, the flusher of last-seen times and
//! the watch of revocations.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use factbuoy_pki::{FLEET_CA_NAME, Issued, RunCa};
use factbuoy_protocol::fleet::MAX_IDLE_SECONDS;
use factbuoy_protocol::identity::Role;
use ring::hmac;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::dir::{FleetDir, FleetSettings, write_settings};
use super::metrics::FleetMetrics;
use super::offers::FleetRuns;
use super::shared::{FLUSH_EVERY, Fleet};
use super::{registry, revocations, routes, runs};
use crate::live::shared::BundledComponents;
use crate::model::config::ServerLimits;
use crate::serving;

/// How long the enrollment CA is valid.
const CA_VALIDITY: time::Duration = time::Duration::days(3650);

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

/// A serving fleet. Dropping it stops the listener and every run it serves.
pub struct RunningFleet {
    /// Where the fleet listens.
    pub address: SocketAddr,
    /// The settings it serves with (the port picked at the first start included).
    pub settings: FleetSettings,
    /// How many agents' connections its listener holds at once: the process's descriptor
    /// limit decides.
    pub max_agents: usize,
    fleet: Arc<Fleet>,
    tasks: Vec<JoinHandle<()>>,
    /// Held while the fleet serves, released when the process ends however it ends.
    _serving_lock: std::fs::File,
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
    anyhow::ensure!(
        (1..=MAX_IDLE_SECONDS).contains(&settings.idle_seconds),
        "the period between idle lines is {} s; give one from 1 s to {} s",
        settings.idle_seconds,
        MAX_IDLE_SECONDS
    );
    // A restart keeps the port agents know, unless told otherwise.
    if settings.listen.port() == 0
        && let Ok(previous) = super::dir::settings(&dir)
        && previous.listen.ip() == settings.listen.ip()
    {
        settings.listen = previous.listen;
    }
    let serving_lock = hold_directory(&dir).await?;
    let ca = init(&dir, &settings)?;
    let listener = serving::bind(settings.listen)
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
    let limits = ServerLimits::default();
    let (budget, run_budget) = serving::fleet_budgets(limits.max_connections);
    let max_agents = budget.connections;
    let fleet = Arc::new(Fleet {
        registry: Mutex::new((registry::load(&dir)?, false)),
        flushing: Mutex::default(),
        runs: FleetRuns::default(),
        starting: tokio::sync::Mutex::default(),
        dir,
        settings: settings.clone(),
        ca,
        ticket_key,
        bundled,
        metrics: FleetMetrics::default(),
        run_budget,
        revocations: watch::Sender::new(0),
    });
    runs::resume(&fleet).await?;
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
            serving::serve(listener, tls, &limits, budget, reject, handler).await
        }),
        tokio::spawn(flusher(fleet.clone())),
        tokio::spawn(revocations::watch(fleet.clone())),
    ];
    tracing::info!(%address, "fleet serving");
    Ok(RunningFleet {
        address,
        settings,
        max_agents,
        fleet,
        tasks,
        _serving_lock: serving_lock,
    })
}

/// Takes the fleet directory's serving lock, waiting while another process holds it: two
/// processes serving one directory would both serve its unfinished runs. In Kubernetes, a pod
/// that replaces a deleted one starts while the old one still stops; it waits here, not ready,
/// until the old one has written its last state and exited.
async fn hold_directory(dir: &FleetDir) -> anyhow::Result<std::fs::File> {
    std::fs::create_dir_all(dir.root())
        .with_context(|| format!("making the fleet's directory {}", dir.root().display()))?;
    let path = dir.serving_lock();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    use rustix::fs::{FlockOperation, flock};
    let mut told = false;
    // Tried again every half second rather than waited for in a blocking thread: the wait can
    // be given up (a pod stopped while it waits), and a process would not exit while a thread
    // of its runtime still blocks.
    loop {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(file),
            Err(rustix::io::Errno::WOULDBLOCK) if !told => {
                tracing::warn!(
                    "another process serves the fleet in {}; waiting until it stops",
                    dir.root().display()
                );
                told = true;
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {}
            Err(e) => {
                return Err(anyhow::Error::new(e).context(format!("locking {}", path.display())));
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

async fn flusher(fleet: Arc<Fleet>) {
    loop {
        tokio::time::sleep(FLUSH_EVERY).await;
        let fleet = fleet.clone();
        let _ = tokio::task::spawn_blocking(move || fleet.flush()).await;
    }
}

//! A fleet's directory ([`FleetDir`], with its layout), its settings (`fleet.json`), its CA's
//! pin, and the file steps the fleet's records share: private JSON written atomically, and an
//! advisory lock for what the CLI and the serving fleet both change.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use factbuoy_protocol::fleet::DEFAULT_IDLE_SECONDS;
use factbuoy_protocol::names::NodeName;
use serde::{Deserialize, Serialize};

use crate::persistence::files::write_atomically;

/// The paths of a fleet's directory, which survives restarts:
///
/// ```text
/// pki/ca.pem, ca.key          the enrollment CA (key 0600)
/// pki/server.pem, server.key  the fleet listener's certificate
/// pki/ticket.key              the key of run credentials (0600)
/// operator/                   an operator certificate: ca.pem, client.pem, client.key
/// fleet.json                  where it listens and the names in its certificate
/// tokens.json                 join tokens (hashed)
/// nodes/<node>.json           enrolled nodes; last-seen.json when each last asked for work
/// revoked/<node>              revocations
/// runs/<number>-<run id>/     each run's directory; bundles/ their bundles
/// plugins/<sha256>.wasm       plugins from files, uploaded by operators (`plugins`)
/// ```
///
/// Written by the serving fleet, except tokens and revocations, which the CLI writes too.
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
    /// Whether a fleet was served from the directory (its `fleet.json` is there).
    pub fn holds_fleet(&self) -> bool {
        self.settings().exists()
    }
    pub(crate) fn pki(&self) -> PathBuf {
        self.0.join("pki")
    }
    /// The operator credentials: `ca.pem`, `client.pem`, `client.key`.
    pub fn operator(&self) -> PathBuf {
        self.0.join("operator")
    }
    pub(crate) fn settings(&self) -> PathBuf {
        self.0.join("fleet.json")
    }
    pub(crate) fn tokens(&self) -> PathBuf {
        self.0.join("tokens.json")
    }
    pub(crate) fn nodes(&self) -> PathBuf {
        self.0.join("nodes")
    }
    pub(crate) fn node(&self, node: &NodeName) -> PathBuf {
        self.nodes().join(format!("{node}.json"))
    }
    pub(crate) fn last_seen(&self) -> PathBuf {
        self.0.join("last-seen.json")
    }
    /// Locked by the process that serves the fleet, while it does.
    pub(crate) fn serving_lock(&self) -> PathBuf {
        self.0.join(".serving")
    }
    pub(crate) fn lock_file(&self) -> PathBuf {
        self.0.join(".lock")
    }
    pub(crate) fn revoked_dir(&self) -> PathBuf {
        self.0.join("revoked")
    }
    pub(crate) fn revoked(&self, node: &NodeName) -> PathBuf {
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
    pub(crate) fn plugins(&self) -> PathBuf {
        self.0.join("plugins")
    }
    /// The stored plugin component with digest `sha256`.
    pub(crate) fn plugin(&self, sha256: &str) -> PathBuf {
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
    /// How long a finished run still answers on its own listeners (`status`, `retrieve`) before
    /// the fleet closes them and forgets it; its bundle stays in `bundles/` either way.
    #[serde(default = "default_finished_run_seconds")]
    pub finished_run_seconds: u64,
    /// The seconds between the `idle` lines written on a parked poll (docs/protocol.md, "Parked
    /// polls"): under the idle timeout of any NAT or load balancer between agents and the
    /// fleet, and at most [`factbuoy_protocol::fleet::MAX_IDLE_SECONDS`].
    #[serde(default = "default_idle_seconds")]
    pub idle_seconds: u64,
    /// The ports runs listen on, two per run (agents, operators); `None`: any free port.
    /// Behind a Kubernetes Service or a firewall, every port must be known in advance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_ports: Option<PortRange>,
}

/// An inclusive range of TCP ports, written `FIRST-LAST`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRange {
    /// The first port.
    pub first: u16,
    /// The last port, included.
    pub last: u16,
}

impl PortRange {
    /// Every port of the range, in order.
    pub fn ports(self) -> std::ops::RangeInclusive<u16> {
        self.first..=self.last
    }
}

impl std::fmt::Display for PortRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

impl std::str::FromStr for PortRange {
    type Err = String;

    fn from_str(text: &str) -> Result<PortRange, String> {
        let parse = |part: &str| {
            part.trim()
                .parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| format!("{part:?} is not a port from 1 to 65535"))
        };
        let (first, last) = text
            .split_once('-')
            .ok_or_else(|| format!("{text:?} is not a range FIRST-LAST, e.g. 30444-30459"))?;
        let range = PortRange {
            first: parse(first)?,
            last: parse(last)?,
        };
        if range.first >= range.last {
            return Err(format!(
                "{text:?}: a run takes two ports, so give at least two, lowest first"
            ));
        }
        Ok(range)
    }
}

/// How long a finished run is served by default: an hour to fetch its bundle again.
pub const DEFAULT_FINISHED_RUN_SECONDS: u64 = 3600;

fn default_finished_run_seconds() -> u64 {
    DEFAULT_FINISHED_RUN_SECONDS
}

fn default_idle_seconds() -> u64 {
    DEFAULT_IDLE_SECONDS
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

/// Writes `fleet.json`, atomically.
pub(crate) fn write_settings(dir: &FleetDir, settings: &FleetSettings) -> anyhow::Result<()> {
    write_atomically(&dir.settings(), &serde_json::to_vec_pretty(settings)?)?;
    Ok(())
}

/// Writes `value` as JSON into a file readable by its owner only, atomically.
pub(crate) fn write_json_private(path: &Path, value: &impl Serialize) -> std::io::Result<()> {
    factbuoy_pki::write_private(path, &serde_json::to_string_pretty(value)?)
        .map_err(std::io::Error::other)
}

/// Takes the advisory lock of `path` (made if missing) until the guard is dropped.
pub(crate) fn lock(path: &Path) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
    Ok(file)
}

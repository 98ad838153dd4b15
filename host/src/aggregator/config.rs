//! What a run is: written once to `run.json` in the run directory when the run starts, read
//! back by a restarted aggregator.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default interval between agent heartbeats.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(5);
/// Default silence after which a node is marked lost.
pub const DEFAULT_LOST_AFTER: Duration = Duration::from_secs(60);
/// Default time after which a run ends with error results for whatever is missing.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(3600);

/// Whether a plugin runs on every node or once for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlanScope {
    PerNode,
    Global,
}

/// One plugin of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginPlan {
    pub name: String,
    pub sha256: String,
    pub scope: PlanScope,
    pub params: Vec<(String, String)>,
    pub grants: Vec<String>,
    pub denies: Vec<String>,
    pub deadline_seconds: u64,
    /// The plugin's description, written to `plugins/<name>/definition.json` in the bundle.
    pub definition: serde_json::Value,
}

/// Limits of the aggregator's HTTP server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerLimits {
    /// Largest uploaded file.
    pub max_file_bytes: u64,
    /// Largest JSON body (manifests, progress).
    pub max_json_bytes: u64,
    /// Largest request head (request line and headers); also each connection's read buffer.
    pub max_header_bytes: usize,
    /// Time allowed to send the request head.
    pub header_timeout_seconds: u64,
    /// Longest wait for the next piece of a body.
    pub idle_timeout_seconds: u64,
    /// Slowest accepted average upload rate, checked once a request is older than the grace.
    pub min_upload_bytes_per_second: u64,
    pub upload_grace_seconds: u64,
    /// Connections served at once; more are closed on accept.
    pub max_connections: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_file_bytes: 16 << 30,
            max_json_bytes: 4 << 20,
            max_header_bytes: 16 << 10,
            header_timeout_seconds: 10,
            idle_timeout_seconds: 30,
            min_upload_bytes_per_second: 16 << 10,
            upload_grace_seconds: 10,
            max_connections: 10_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub run_id: String,
    /// RFC 3339.
    pub created: String,
    pub factbuoy_version: String,
    pub plugins: Vec<PluginPlan>,
    /// Nodes expected to send per-node results.
    pub nodes: Vec<String>,
    pub heartbeat_seconds: u64,
    pub lost_after_seconds: u64,
    pub run_timeout_seconds: u64,
    /// Where the agent listener binds; port 0 picks a free port, recorded after the first start.
    pub agent_listen: SocketAddr,
    pub operator_listen: SocketAddr,
    /// Names and addresses in the server certificate: what agents and operators dial.
    pub server_names: Vec<String>,
    /// Where the finished bundle is written.
    pub bundle_dir: PathBuf,
    pub limits: ServerLimits,
}

impl RunConfig {
    pub fn path(run_dir: &Path) -> PathBuf {
        run_dir.join("run.json")
    }

    pub fn load(run_dir: &Path) -> anyhow::Result<Self> {
        let path = Self::path(run_dir);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}; is this a factbuoy run directory?", path.display()))?;
        Ok(serde_json::from_str(&text)?)
    }

    pub fn save(&self, run_dir: &Path) -> anyhow::Result<()> {
        super::state::write_atomically(&Self::path(run_dir), &serde_json::to_vec_pretty(self)?)
    }

    pub fn plugin(&self, name: &str) -> Option<&PluginPlan> {
        self.plugins.iter().find(|p| p.name == name)
    }
}

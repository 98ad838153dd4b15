//! The JSON documents of the protocol.

use serde::{Deserialize, Serialize};

/// A progress report for one plugin on one node: Sonobuoy's ProgressUpdate, plus warnings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgressUpdate {
    pub plugin: String,
    pub node: String,
    /// RFC 3339.
    pub timestamp: String,
    pub msg: String,
    pub total: u64,
    pub completed: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One artifact named in a [`ResultManifest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    pub name: String,
    pub size: u64,
    /// Lower-case hex sha-256.
    pub sha256: String,
}

/// How a plugin run ended, as the agent reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Succeeded,
    Failed,
}

/// Completes a result: every file it names must have been uploaded with that digest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultManifest {
    pub outcome: Outcome,
    /// Why the plugin failed, for a failed outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub files: Vec<ManifestFile>,
    /// The plugin's own version.
    #[serde(default)]
    pub plugin_version: String,
    /// The agent's full report of the plugin run, kept in the bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<serde_json::Value>,
}

/// A plugin an agent is to run, as the aggregator's plan says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedPlugin {
    pub name: String,
    /// Digest of the component; fetch it from [`crate::routes::Route::Component`].
    pub sha256: String,
    /// Parameters as NAME=VALUE text, checked by the agent against the plugin's description.
    pub params: Vec<(String, String)>,
    /// Capabilities granted in written form (`host-info`, `read:/proc`, `all`).
    pub grants: Vec<String>,
    /// Capabilities denied in written form.
    #[serde(default)]
    pub denies: Vec<String>,
    /// Wall-clock deadline for the plugin, in seconds.
    pub deadline_seconds: u64,
}

/// What one node's agent is to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub run_id: String,
    pub plugins: Vec<PlannedPlugin>,
    /// How often to send heartbeats, in seconds.
    pub heartbeat_seconds: u64,
}

/// The state of a whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    Running,
    PostProcessing,
    Complete,
    Failed,
}

/// The state of one (plugin, node) pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PairStatus {
    /// Nothing received yet.
    Pending,
    /// Progress or files received, not yet complete.
    Running,
    /// A result was committed.
    Complete,
    /// The node stopped sending heartbeats; an error result stands in for its result.
    Lost,
    /// The run timed out before a result arrived; an error result stands in for it.
    TimedOut,
}

/// Whether a committed result says the plugin succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResultStatus {
    Passed,
    Failed,
}

/// Status of one (plugin, node) pair in [`StatusDocument`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginStatus {
    pub plugin: String,
    /// A node name, or `global`.
    pub node: String,
    pub status: PairStatus,
    #[serde(rename = "result-status", default, skip_serializing_if = "Option::is_none")]
    pub result_status: Option<ResultStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<ProgressUpdate>,
    /// RFC 3339.
    #[serde(rename = "last-heartbeat", default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat: Option<String>,
}

/// The finished bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TarInfo {
    pub name: String,
    /// RFC 3339.
    pub created: String,
    pub sha256: String,
    pub size: u64,
}

/// `GET /status`: Sonobuoy's status document, plus heartbeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusDocument {
    pub run_id: String,
    pub status: RunStatus,
    pub plugins: Vec<PluginStatus>,
    #[serde(rename = "tar-info", default, skip_serializing_if = "Option::is_none")]
    pub tar_info: Option<TarInfo>,
}

/// Every error response's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong and, where there is one, what to do.
    pub error: String,
}

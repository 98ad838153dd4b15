//! The JSON documents of the protocol. Keys are snake_case, as in every JSON document factbuoy
//! writes; enum values are lower-case kebab-case (`post-processing`, `agent-failed`).

use std::time::SystemTime;

use crate::names::NodeName;
use serde::{Deserialize, Serialize};

/// `at` as the protocol writes times: RFC 3339, UTC.
pub fn rfc3339(at: SystemTime) -> String {
    let at: time::OffsetDateTime = at.into();
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// A status or kind as the wire, `-o json` and the docs spell it (`agent-failed`,
/// `post-processing`): the value's serialised name.
pub fn wire_name<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Now, as [`rfc3339`] writes it.
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// A progress report for one plugin on one node: Sonobuoy's ProgressUpdate, plus warnings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgressUpdate {
    /// The plugin reporting; the aggregator takes it from the route.
    pub plugin: String,
    /// The node it runs on, or `global`; the aggregator takes it from the route.
    pub node: String,
    /// When the report was sent, RFC 3339 UTC; the aggregator fills in its arrival when empty.
    pub timestamp: String,
    /// What the plugin is doing now.
    pub msg: String,
    /// Units of work expected in all; 0 when unknown.
    pub total: u64,
    /// Units of work finished so far, out of `total`.
    pub completed: u64,
    /// Problems that mean part of the output is missing, new since the previous report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// Problems that did not stop the plugin, new since the previous report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Longest `msg` of a [`ProgressUpdate`], in bytes.
pub const MAX_PROGRESS_MESSAGE_BYTES: usize = 1024;
/// Most `errors`, and most `warnings`, in one [`ProgressUpdate`].
pub const MAX_PROGRESS_ENTRIES: usize = 16;
/// Longest entry of `errors` or `warnings`, in bytes.
pub const MAX_PROGRESS_ENTRY_BYTES: usize = 512;
/// Longest `timestamp`, in bytes (an RFC 3339 time needs about 35).
pub const MAX_PROGRESS_TIMESTAMP_BYTES: usize = 64;

impl ProgressUpdate {
    /// Whether every field is within its cap; the error names the first that is not. The
    /// aggregator refuses updates that break a cap, so that the status document stays small.
    pub fn check_caps(&self) -> Result<(), String> {
        let too_long = |field: &str, len: usize, max: usize| {
            format!("progress `{field}` is {len} bytes; at most {max} are accepted")
        };
        if self.msg.len() > MAX_PROGRESS_MESSAGE_BYTES {
            return Err(too_long("msg", self.msg.len(), MAX_PROGRESS_MESSAGE_BYTES));
        }
        if self.timestamp.len() > MAX_PROGRESS_TIMESTAMP_BYTES {
            return Err(too_long(
                "timestamp",
                self.timestamp.len(),
                MAX_PROGRESS_TIMESTAMP_BYTES,
            ));
        }
        for (field, entries) in [("errors", &self.errors), ("warnings", &self.warnings)] {
            if entries.len() > MAX_PROGRESS_ENTRIES {
                return Err(format!(
                    "progress `{field}` has {} entries; at most {MAX_PROGRESS_ENTRIES} are accepted",
                    entries.len()
                ));
            }
            if let Some(long) = entries.iter().find(|e| e.len() > MAX_PROGRESS_ENTRY_BYTES) {
                return Err(too_long(field, long.len(), MAX_PROGRESS_ENTRY_BYTES));
            }
        }
        Ok(())
    }

    /// Cuts every field to its cap, as an agent does before sending: longer texts end in `…`,
    /// and entries past the cap are replaced by one saying how many more there were (the run's
    /// report keeps them all).
    pub fn truncate_to_caps(&mut self) {
        truncate(&mut self.msg, MAX_PROGRESS_MESSAGE_BYTES);
        truncate(&mut self.timestamp, MAX_PROGRESS_TIMESTAMP_BYTES);
        truncate_entries(&mut self.errors);
        truncate_entries(&mut self.warnings);
    }
}

/// Cuts a list of errors or warnings to the caps of a [`ProgressUpdate`]'s: entries past
/// [`MAX_PROGRESS_ENTRIES`] become one saying how many more there were (the run's report keeps
/// them all), and each entry is cut to [`MAX_PROGRESS_ENTRY_BYTES`].
pub fn truncate_entries(entries: &mut Vec<String>) {
    if entries.len() > MAX_PROGRESS_ENTRIES {
        let more = entries.len() - (MAX_PROGRESS_ENTRIES - 1);
        entries.truncate(MAX_PROGRESS_ENTRIES - 1);
        entries.push(format!("… and {more} more, in the run's report"));
    }
    for entry in entries.iter_mut() {
        truncate(entry, MAX_PROGRESS_ENTRY_BYTES);
    }
}

/// Cuts `text` to at most `max` bytes on a character boundary, ending in `…` when cut.
pub fn truncate(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut end = max - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push('…');
}

/// One artifact named in a [`ResultManifest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// The artifact's name: a relative path, as uploaded (see [`crate::names`]).
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Lower-case hex sha-256.
    pub sha256: String,
}

/// How a plugin run ended, as the agent reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The plugin finished; its artifacts go to the pair's `results/`.
    Succeeded,
    /// The plugin (or the agent running it) failed; what it left goes to the pair's `errors/`.
    Failed,
}

/// Completes a result: every file it names must have been uploaded with that digest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultManifest {
    /// How the plugin run ended.
    pub outcome: Outcome,
    /// Why the plugin failed, for a failed outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Every artifact of the result, each already uploaded with this size and digest.
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
    /// The plugin's name, as results and progress name it.
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
pub struct AgentPlan {
    /// The run this plan belongs to.
    pub run_id: String,
    /// The plugins to run on this node.
    pub plugins: Vec<PlannedPlugin>,
    /// How often to send heartbeats, in seconds.
    pub heartbeat_seconds: u64,
}

/// The state of a whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    /// Results are still accepted.
    Running,
    /// Every pair has a result (sent, or made up for a lost node or the timeout); the bundle is
    /// being written.
    PostProcessing,
    /// The bundle is written and can be downloaded.
    Complete,
    /// The run ended short of what it was asked, as `error` says: writing the bundle failed
    /// (there is none), or the run was interrupted (its bundle holds what was collected).
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
    /// The run was interrupted (its operator stopped it) before a result arrived; an error
    /// result stands in for it.
    Interrupted,
    /// The node is not waited for (its dispatcher skipped it, e.g. for a taint the run does not
    /// tolerate); an error result saying why stands in for its result.
    Skipped,
    /// The node's agent cannot deliver, as its dispatcher saw (it cannot be scheduled, its
    /// image cannot be pulled, it crash-loops); an error result with the dispatcher's message
    /// stands in, and a result the agent still sends replaces it.
    AgentFailed,
}

/// Whether a committed result says the plugin succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResultStatus {
    /// The result's outcome is [`Outcome::Succeeded`].
    Passed,
    /// The result's outcome is [`Outcome::Failed`], as is every error result the aggregator
    /// makes up.
    Failed,
}

/// Status of one (plugin, node) pair in [`StatusDocument`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginStatus {
    /// The plugin's name.
    pub plugin: String,
    /// A node name, or `global`.
    pub node: String,
    /// Where the pair is.
    pub status: PairStatus,
    /// Whether the committed result passed; none before a result is committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_status: Option<ResultStatus>,
    /// The latest progress report, if any arrived since the aggregator started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<ProgressUpdate>,
    /// The node's latest heartbeat since the aggregator started, RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_heartbeat: Option<String>,
    /// Why the committed result failed: the plugin's error, or why the aggregator made up the
    /// result (a lost node, the timeout), cut to [`MAX_PROGRESS_MESSAGE_BYTES`]. The bundle
    /// keeps the whole text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The warnings and partial-output errors the committed result reports, capped as a
    /// [`ProgressUpdate`]'s are; the bundle's run report keeps them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The committed result passed without a single byte of artifacts: there was nothing to
    /// collect.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub empty: bool,
}

/// The finished bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TarInfo {
    /// The bundle's file name, `<UTC timestamp>_factbuoy_<run id>.tar.gz`.
    pub name: String,
    /// When the bundle was written, RFC 3339 UTC.
    pub created: String,
    /// Lower-case hex sha-256 of the whole `.tar.gz`.
    pub sha256: String,
    /// Size of the `.tar.gz` in bytes.
    pub size: u64,
}

/// `GET /status`: Sonobuoy's status document, plus heartbeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusDocument {
    /// The run's id.
    pub run_id: String,
    /// Where the whole run is.
    pub status: RunStatus,
    /// One entry per expected (plugin, node) pair.
    pub plugins: Vec<PluginStatus>,
    /// The bundle, once it is written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tar_info: Option<TarInfo>,
    /// Why the run failed, when it did (a full disk, a bundle that could not be written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Every error response's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong and, where there is one, what to do.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_cut_to_its_caps_and_checked_against_them() {
        let mut update = ProgressUpdate {
            msg: "é".repeat(MAX_PROGRESS_MESSAGE_BYTES),
            warnings: vec!["w".repeat(MAX_PROGRESS_ENTRY_BYTES + 1); MAX_PROGRESS_ENTRIES + 5],
            ..ProgressUpdate::default()
        };
        assert!(update.check_caps().unwrap_err().contains("`msg`"));
        update.truncate_to_caps();
        assert!(update.check_caps().is_ok());
        assert!(update.msg.len() <= MAX_PROGRESS_MESSAGE_BYTES && update.msg.ends_with('…'));
        assert_eq!(update.warnings.len(), MAX_PROGRESS_ENTRIES);
        assert_eq!(
            update.warnings.last().unwrap(),
            "… and 6 more, in the run's report"
        );
        let fits = ProgressUpdate {
            msg: "m".repeat(MAX_PROGRESS_MESSAGE_BYTES),
            ..ProgressUpdate::default()
        };
        let mut cut = fits.clone();
        cut.truncate_to_caps();
        assert_eq!(cut, fits);
    }
}

/// `POST /api/v1/enroll`: a certificate signing request and the credential that vouches for
/// the agent (a Kubernetes ServiceAccount token, say; the aggregator's admission decides).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnrollRequest {
    /// A PEM `CERTIFICATE REQUEST` signed with the agent's own key; only its public key is used.
    pub csr: String,
    /// The credential; secret, never logged.
    pub credential: String,
}

impl std::fmt::Debug for EnrollRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnrollRequest { credential: <redacted> }")
    }
}

/// The answer to [`EnrollRequest`]: a certificate for the admitted node only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnrollResponse {
    /// The node the credential admitted, which the certificate names.
    pub node: NodeName,
    /// The agent's certificate, PEM, for the role `agent:<node>`.
    pub certificate: String,
    /// The run's CA certificate, PEM.
    pub ca: String,
}

//! The status API's documents, version 1 (docs/status.md): what `/api/v1/runs`,
//! `/api/v1/runs/{id}` and each event of `/api/v1/runs/{id}/events` carry. Fields are only
//! ever added within a version; a change that would break a reader is `/api/v2`.

use serde::Serialize;

use factbuoy_operator::list::Listed;
use factbuoy_protocol::types::StatusDocument;

/// The version every document names in `api_version`.
pub const API_VERSION: &str = "factbuoy.status/v1";

/// `GET /api/v1/runs`: the runs this operator's machine knows, newest first, as `factbuoy
/// runs --local` lists them (a Kubernetes or fleet run's state is on its own page).
#[derive(Debug, Clone, Serialize)]
pub struct RunList {
    /// [`API_VERSION`].
    pub api_version: &'static str,
    /// The runs.
    pub runs: Vec<Listed>,
}

/// `GET /api/v1/runs/{id}` and each `status` event: one run as last polled.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunView {
    /// [`API_VERSION`].
    pub api_version: &'static str,
    /// The run's id.
    pub run_id: String,
    /// `local`, `kubernetes` or `fleet`.
    pub kind: &'static str,
    /// When this server last asked the run's aggregator, RFC 3339 UTC (heartbeat ages are
    /// measured from it, so the aggregator's clock and the browser's need not agree).
    pub polled_at: String,
    /// Whether the run has ended (complete or failed): no event follows this one.
    pub ended: bool,
    /// Why the last poll failed, when it did; `status` is then the last one that answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll_error: Option<String>,
    /// The aggregator's status document, as `factbuoy status -o json` prints it; none until
    /// one poll has answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusDocument>,
    /// Where the bundle is on this machine, for a local run that wrote one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle_path: Option<String>,
    /// The command that downloads the bundle here.
    pub retrieve: String,
}

//! What the fleet's listener, its runs and its flusher share.

use std::sync::Mutex;
use std::time::Duration;

use factbuoy_pki::RunCa;
use ring::hmac;
use tokio::sync::watch;

use super::dir::{FleetDir, FleetSettings};
use super::offers::FleetRuns;
use super::registry::{Registry, save_seen};
use crate::live::shared::BundledComponents;
use crate::metrics::Metrics;
use crate::serving::Budget;

/// How often last-seen times are written to `last-seen.json`.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_secs(5);

/// What the fleet's listener, its runs and its flusher share.
pub(crate) struct Fleet {
    /// The fleet's directory.
    pub(crate) dir: FleetDir,
    /// Its settings, with the port picked at the first start.
    pub(crate) settings: FleetSettings,
    /// The enrollment CA.
    pub(crate) ca: RunCa,
    /// The key of run credentials.
    pub(crate) ticket_key: hmac::Key,
    /// The enrolled nodes; a node's record is written at once on a join or renewal, last-seen
    /// times every [`FLUSH_EVERY`] when they changed.
    pub(crate) registry: Mutex<(Registry, bool)>,
    /// The runs it serves.
    pub(crate) runs: FleetRuns,
    /// Components bundled in the serving binary.
    pub(crate) bundled: BundledComponents,
    /// The fleet listener's counters.
    pub(crate) metrics: Metrics,
    /// The connections each run's listeners hold, worked out once when the fleet started.
    pub(crate) run_budget: Budget,
    /// Counts the times new revocations were found (`revocations`): long polls watch it.
    pub(crate) revocations: watch::Sender<u64>,
}

impl Fleet {
    /// Writes the last-seen times if they changed since they were last written.
    pub(crate) fn flush(&self) {
        let mut registry = self.registry.lock().unwrap();
        if registry.1 {
            match save_seen(&self.dir, &registry.0) {
                Ok(()) => registry.1 = false,
                Err(e) => tracing::warn!("writing {}: {e}", self.dir.last_seen().display()),
            }
        }
    }
}

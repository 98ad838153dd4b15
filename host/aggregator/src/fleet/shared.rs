//! What the fleet's listener, its runs and its flusher share.

use std::sync::Mutex;
use std::time::Duration;

use factbuoy_pki::RunCa;
use ring::hmac;
use tokio::sync::watch;

use super::dir::{FleetDir, FleetSettings};
use super::metrics::FleetMetrics;
use super::offers::FleetRuns;
use super::registry::{Registry, seen_json, write_seen};
use crate::live::shared::BundledComponents;
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
    /// Held while last-seen times are written.
    pub(crate) flushing: Mutex<()>,
    /// The runs it serves.
    pub(crate) runs: FleetRuns,
    /// Held while a run's ports are picked and bound.
    pub(crate) starting: tokio::sync::Mutex<()>,
    /// Components bundled in the serving binary.
    pub(crate) bundled: BundledComponents,
    /// What the fleet counts, served at `/metrics`.
    pub(crate) metrics: FleetMetrics,
    /// The connections each run's listeners hold, worked out once when the fleet started.
    pub(crate) run_budget: Budget,
    /// Counts the times new revocations were found (`revocations`): long polls watch it.
    pub(crate) revocations: watch::Sender<u64>,
}

impl Fleet {
    /// Writes the last-seen times if they changed since they were last written. The registry
    /// is locked only while they are serialized, not while they are written and synced: the
    /// agents' requests and acknowledgements never wait on the disk.
    pub(crate) fn flush(&self) {
        // One writer at a time: the periodic flush and the last one share a temporary file.
        let _writing = self.flushing.lock().unwrap();
        let json = {
            let mut registry = self.registry.lock().unwrap();
            if !registry.1 {
                return;
            }
            registry.1 = false;
            seen_json(&registry.0)
        };
        let written = json
            .map_err(std::io::Error::other)
            .and_then(|json| write_seen(&self.dir, &json));
        if let Err(e) = written {
            tracing::warn!("writing {}: {e}", self.dir.last_seen().display());
            // Tried again at the next flush.
            self.registry.lock().unwrap().1 = true;
        }
    }
}

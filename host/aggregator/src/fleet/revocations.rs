//! Revocations reaching the runs. `factbuoy fleet revoke` writes `revoked/<node>`, from another
//! process and whether the fleet serves or not. From that moment the node's requests are
//! refused, to the fleet and to every run it enrolled in: each run's admission looks for the
//! file at every request its agents make (`Admission::withdrawn`), so no request waits for this
//! watch. What the watch adds: it looks at the folder every [`CHECK_EVERY`] and, for each node
//! newly revoked, ends that node's pairs still without a result in every running run with an
//! error result that says it was revoked ([`REASON`]), so that the run ends now instead of
//! when the node's lost window runs out, and it wakes the long polls, so that the revoked
//! agent's ends with the refusal at once.
//!
//! Why a poll of the folder and not a file-system notification: the folder is small (one file
//! per revoked node), a listing every second costs nothing next to a fleet's idle long polls,
//! and it works on every file system a fleet's directory may sit on (inotify misses changes
//! made over NFS). Requests never depend on it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use factbuoy_protocol::names::NodeName;

use super::registry::revoked_nodes;
use super::shared::Fleet;
use crate::live::node_set::NodeSetError;

/// How often the fleet looks for new revocations.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(1);

/// What a revoked node's pairs without a result say (status `skipped`), after "node N was
/// skipped and not waited for: ".
const REASON: &str = concat!(
    "it was revoked from the fleet during the run (`factbuoy fleet revoke`); ",
    "the run refused its requests from then on and kept nothing it sent after"
);

/// Applies new revocations to the fleet's runs and long polls until the task is dropped. At
/// the start every revocation is new: a restarted fleet applies them to the runs it serves
/// again.
pub(crate) async fn watch(fleet: Arc<Fleet>) {
    let mut applied = BTreeSet::new();
    loop {
        let dir = fleet.dir.clone();
        match tokio::task::spawn_blocking(move || revoked_nodes(&dir)).await {
            Ok(Ok(revoked)) => {
                let new: Vec<NodeName> = revoked.difference(&applied).cloned().collect();
                if !new.is_empty() {
                    fleet.revocations.send_modify(|count| *count += 1);
                    fleet.metrics.revocations.inc_by(new.len() as u64);
                    for node in &new {
                        apply(&fleet, node).await;
                    }
                }
                applied = revoked;
            }
            Ok(Err(e)) => tracing::warn!(
                "looking for revocations in {}: {e}",
                fleet.dir.revoked_dir().display()
            ),
            Err(e) => tracing::warn!("looking for revocations: {e}"),
        }
        tokio::time::sleep(CHECK_EVERY).await;
    }
}

/// Ends `node`'s pairs without a result with an error result in every running run that
/// expects it, and stops waiting for it there.
async fn apply(fleet: &Fleet, node: &NodeName) {
    for (number, nodes) in fleet.runs.running_with(node) {
        match nodes.skip(node, REASON).await {
            Ok(()) => tracing::info!(%node, run = number, "a revoked node is no longer waited for"),
            // The run ended meanwhile, or the node was already given up.
            Err(NodeSetError::Ended(_) | NodeSetError::Final(_)) => {}
            Err(e) => tracing::error!(%node, run = number, "giving up a revoked node: {e}"),
        }
    }
}

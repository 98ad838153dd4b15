//! Revocations reaching the runs. `factbuoy fleet revoke` writes `revoked/<node>`, whether the
//! fleet serves or not; from that moment the node's requests are refused, to the fleet and to
//! every run it enrolled in (the runs' admission looks for the file at each request). This
//! watch looks at the folder every [`CHECK_EVERY`] and, for each node newly revoked, turns its
//! pairs still without a result in every running run into error results saying so, and ends
//! its agent's long poll with the refusal, so that the agent stops at once instead of when its
//! poll would have ended.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use factbuoy_protocol::names::NodeName;

use super::shared::Fleet;
use crate::live::node_set::NodeSetError;
use crate::persistence::files::read_dir_names;

/// How often the fleet looks for new revocations.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(500);

/// What a revoked node's pairs without a result say, after "node N was skipped and not waited
/// for: ".
const REASON: &str =
    "it was revoked (`factbuoy fleet revoke`); its requests to the run are refused";

/// Applies new revocations to the fleet's runs and long polls until the task is dropped. At
/// the start every revocation is new: a restarted fleet applies them to the runs it serves
/// again.
pub(crate) async fn watch(fleet: Arc<Fleet>) {
    let mut applied = BTreeSet::new();
    loop {
        let dir = fleet.dir.revoked_dir();
        let found = tokio::task::spawn_blocking(move || read_dir_names(&dir)).await;
        match found {
            Ok(Ok(names)) => {
                let revoked: BTreeSet<NodeName> = names
                    .iter()
                    .filter_map(|name| NodeName::parse(name).ok())
                    .filter(|node| super::registry::is_revoked(&fleet.dir, node))
                    .collect();
                let new: Vec<NodeName> = revoked.difference(&applied).cloned().collect();
                if !new.is_empty() {
                    fleet.revocations.send_modify(|count| *count += 1);
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

/// Turns `node`'s pairs without a result into error results in every run that expects it.
async fn apply(fleet: &Fleet, node: &NodeName) {
    for (number, nodes) in fleet.runs.running_with(node) {
        match nodes.skip(node, REASON).await {
            Ok(()) => tracing::info!(%node, run = number, "a revoked node's results are refused"),
            Err(NodeSetError::Ended(_) | NodeSetError::Final(_)) => {}
            Err(e) => {
                tracing::error!(%node, run = number, "refusing a revoked node's results: {e}")
            }
        }
    }
}

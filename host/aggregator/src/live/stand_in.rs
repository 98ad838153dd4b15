//! Stand-in results: the error result the aggregator commits in place of one that will not
//! come (a node lost or gone, skipped, its agent failed, the run timed out or interrupted),
//! exactly as an agent's result is committed, so the bundle says why for every pair.

use std::sync::Arc;

use factbuoy_protocol::routes::Scope;
use factbuoy_protocol::types::PairStatus;

use super::shared::Shared;
use crate::commit::CommitError;

/// Commits an error result in place of a missing one; nothing if a result came first.
pub(crate) async fn stand_in(
    shared: &Arc<Shared>,
    plugin: &str,
    scope: &Scope,
    status: PairStatus,
    message: &str,
) -> Result<(), CommitError> {
    let pair = shared
        .results
        .staging()
        .lock_pair(plugin, scope.label())
        .await;
    if shared
        .state
        .lock()
        .unwrap()
        .pair(plugin, scope)
        .is_none_or(|p| p.committed.is_some())
    {
        return Ok(()); // a commit came first
    }
    tracing::warn!("{message}");
    let worker = shared.clone();
    let (plugin_name, label, text) = (
        plugin.to_owned(),
        scope.label().to_owned(),
        message.to_owned(),
    );
    // The pair's lock is held until the state records the result (see the commit route).
    let (committed, _pair) = tokio::task::spawn_blocking(move || {
        let committed = worker
            .results
            .synthetic_error(&plugin_name, &label, status, &text);
        (committed, pair)
    })
    .await
    .map_err(|e| CommitError::Io(std::io::Error::other(e.to_string())))?;
    let committed = match committed {
        Ok(committed) => committed,
        // Recorded: it stands; packaging moves it into place first.
        Err(CommitError::Unfinished(committed, _)) => *committed,
        Err(e) => return Err(e),
    };
    shared
        .state
        .lock()
        .unwrap()
        .apply_commit(plugin, scope, status, committed);
    Ok(())
}

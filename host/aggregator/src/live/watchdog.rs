//! The watchdog: what makes every run end. It marks the pairs of silent nodes lost, turns what
//! is missing at the run timeout (or when the operator interrupts the run) into error results,
//! commits the stand-ins the node set calls for that a stop cut short, and closes the run for
//! packaging once every pair has a result.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use factbuoy_protocol::routes::Scope;
use factbuoy_protocol::types::{PairStatus, RunStatus};

use super::package::package;
use super::shared::Shared;
use super::stand_in::stand_in;
use crate::model::state::{RunState, Unheard};

/// How often the watchdog looks for lost nodes, timeouts and a finished run.
const WATCHDOG_TICK: Duration = Duration::from_millis(250);

/// Marks lost nodes and timed-out pairs, and packages the run once every pair has a result.
pub(crate) async fn watchdog(shared: Arc<Shared>) {
    let created: SystemTime = time::OffsetDateTime::parse(
        &shared.config.created,
        &time::format_description::well_known::Rfc3339,
    )
    .map(Into::into)
    .unwrap_or(shared.started_at);
    let window = Duration::from_secs(shared.config.lost_after_seconds);
    let timeout = Duration::from_secs(shared.config.run_timeout_seconds);
    let unheard = if shared.config.dynamic_nodes {
        Unheard::Dispatcher
    } else {
        Unheard::Silent
    };
    // The search for silent nodes looks at every pair: once a tick, not at every commit that
    // wakes the watchdog (thousands of them in a large run).
    let mut next_lost_search = tokio::time::Instant::now();
    loop {
        let status = shared.state.lock().unwrap().status;
        match status {
            RunStatus::Complete | RunStatus::Failed => {
                shared.status.send_replace(status);
                return;
            }
            RunStatus::PostProcessing => {
                package(&shared).await;
                continue;
            }
            RunStatus::Running => {}
        }
        let now = SystemTime::now();
        let timed_out = now.duration_since(created).unwrap_or_default() > timeout;
        let ticked = tokio::time::Instant::now();
        let search_lost = ticked >= next_lost_search;
        if search_lost {
            next_lost_search = ticked + WATCHDOG_TICK;
        }
        let (decided, lost, missing, interrupted) = {
            let state = shared.state.lock().unwrap();
            // Once its grace is over: results being delivered are taken until then.
            let interrupted = state
                .interrupted
                .clone()
                .filter(|_| state.interrupt_grace_until.is_none_or(|until| now >= until));
            (
                // Those a stop cut short, or a node-set change could not write.
                state.disposition_stand_ins(),
                if search_lost {
                    state.lost_pairs(now, shared.started_at, window, unheard)
                } else {
                    Vec::new()
                },
                // Listed only when they are about to become error results.
                if interrupted.is_some() || timed_out {
                    state.missing_pairs()
                } else {
                    Vec::new()
                },
                interrupted,
            )
        };
        let mut stand_ins: Vec<(String, Scope, PairStatus, String)> = decided;
        stand_ins.extend(lost.into_iter().map(|(plugin, scope)| {
            let message = format!(
                "node {:?} sent no heartbeat for {}s and no result of {plugin}; it was marked lost",
                scope.label(),
                window.as_secs()
            );
            (plugin, scope, PairStatus::Lost, message)
        }));
        if let Some(reason) = &interrupted {
            stand_ins.extend(missing.into_iter().map(|(plugin, scope)| {
                let message = format!(
                    "no result of {plugin} for {}: the run was interrupted ({reason})",
                    scope.label()
                );
                (plugin, scope, PairStatus::Interrupted, message)
            }));
        } else if timed_out {
            stand_ins.extend(missing.into_iter().map(|(plugin, scope)| {
                let message = format!(
                    "no result of {plugin} for {} within the run timeout of {}s",
                    scope.label(),
                    timeout.as_secs()
                );
                (plugin, scope, PairStatus::TimedOut, message)
            }));
        }
        for (plugin, scope, status, message) in stand_ins {
            if let Err(e) = stand_in(&shared, &plugin, &scope, status, &message).await {
                // A run must end: one that cannot record an error result ends failed.
                shared.fail_run(format!(
                    "recording the error result of {plugin} for {} failed: {e}{}",
                    scope.label(),
                    shared.disk_full_hint(e.is_disk_full())
                ));
                break;
            }
        }
        // A dynamic run waits for its dispatcher's first listing of nodes, or the timeout.
        let can_end = |state: &RunState| {
            state.all_done()
                && (!shared.config.dynamic_nodes
                    || state.settled
                    || timed_out
                    || state.interrupted.is_some())
        };
        if can_end(&shared.state.lock().unwrap()) {
            // Commits and node-set changes in flight finish first; later ones find the run
            // closed.
            let _closing = shared.open.write().await;
            let mut state = shared.state.lock().unwrap();
            if state.status == RunStatus::Running && can_end(&state) {
                state.status = RunStatus::PostProcessing;
                shared.save_state(&state);
                shared.status.send_replace(RunStatus::PostProcessing);
                continue;
            }
        }
        tokio::select! {
            _ = shared.changed.notified() => {}
            _ = tokio::time::sleep(WATCHDOG_TICK) => {}
        }
    }
}

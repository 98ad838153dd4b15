//! Stopping invocations early, as an interrupted run does: a [`StopSignal`] shared by the
//! invocations of one run ends each at its next epoch tick (or at once, if it waits in a host
//! call), failed as [`Violation::Stopped`](crate::violation::Violation::Stopped), with the
//! artifacts it wrote until then finished and kept, marked as partial by that failure.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// Asks the invocations given it to stop; cloning shares it.
#[derive(Clone, Default)]
pub struct StopSignal(Arc<Inner>);

#[derive(Default)]
struct Inner {
    stopped: AtomicBool,
    notify: Notify,
}

impl StopSignal {
    /// A signal not yet given.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops every invocation given this signal, and those that start later at once.
    pub fn stop(&self) {
        self.0.stopped.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    /// Whether [`stop`](Self::stop) was called.
    pub fn is_stopped(&self) -> bool {
        self.0.stopped.load(Ordering::SeqCst)
    }

    /// Completes once [`stop`](Self::stop) is called.
    pub async fn stopped(&self) {
        let notified = self.0.notify.notified();
        if self.is_stopped() {
            return;
        }
        notified.await;
    }
}

impl std::fmt::Debug for StopSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StopSignal")
            .field(&self.is_stopped())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stopping_wakes_those_waiting_and_those_who_ask_later() {
        let signal = StopSignal::new();
        let waiting = tokio::spawn({
            let signal = signal.clone();
            async move { signal.stopped().await }
        });
        tokio::task::yield_now().await;
        assert!(!signal.is_stopped());
        signal.stop();
        waiting.await.unwrap();
        // Asked after the stop: answered at once.
        signal.stopped().await;
        assert!(signal.is_stopped());
    }
}

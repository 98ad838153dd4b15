//! The signals that end a command: Ctrl-C (SIGINT) and SIGTERM, as systemd and kubelet send it.

use std::future::Future;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// Listens for Ctrl-C (SIGINT) and SIGTERM from the call on, and waits for the first, naming
/// it. A signal that comes before the future is awaited is kept, not lost: a service calls this
/// before it says it serves, since a kubelet or systemd may stop it at once.
pub fn interrupted() -> impl Future<Output = &'static str> {
    let interrupt = signal(SignalKind::interrupt()).ok();
    let terminate = signal(SignalKind::terminate()).ok();
    async move {
        async fn received(signal: Option<Signal>) {
            match signal {
                Some(mut signal) => {
                    signal.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = received(interrupt) => "Ctrl-C",
            () = received(terminate) => "SIGTERM",
        }
    }
}

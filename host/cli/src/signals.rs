//! The signals that end a command: Ctrl-C (SIGINT) and SIGTERM, as systemd and kubelet send it.

/// Waits for Ctrl-C (SIGINT) or SIGTERM and names it.
pub async fn interrupted() -> &'static str {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut terminate) => {
                terminate.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "Ctrl-C",
        () = terminate => "SIGTERM",
    }
}

//! Termination signals: a future that completes on SIGTERM or SIGINT. Does IO (signal handlers).

/// Completes on SIGTERM or SIGINT, the signals a Pod or a terminal sends. The handlers are
/// registered when this is called, not when first polled, so a signal that arrives while the
/// operator is still starting is not lost (nor does it kill the process).
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + Sync + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let terminate = signal(SignalKind::terminate());
    let interrupt = signal(SignalKind::interrupt());
    async move {
        match (terminate, interrupt) {
            (Ok(mut terminate), Ok(mut interrupt)) => tokio::select! {
                _ = terminate.recv() => tracing::info!("SIGTERM received, shutting down"),
                _ = interrupt.recv() => tracing::info!("SIGINT received, shutting down"),
            },
            (Err(error), _) | (_, Err(error)) => {
                tracing::warn!(%error, "cannot listen for termination signals");
                futures::future::pending::<()>().await;
            }
        }
    }
}

//! Shutting down within a bound: a future that completes on SIGTERM or SIGINT, how long each step
//! of the way out may take, and the helper that enforces it. Does IO (signal handlers).
//!
//! The way out, from the signal: no new reconcile starts; reconciles in flight get
//! [`RECONCILE_GRACE`] to finish (a status write already sent lands) and are then dropped, which
//! cancels their AWS and API calls (every write is an idempotent server-side apply, so a
//! cancelled one is simply made again by the next leader); the status writer gets
//! [`WRITER_FLUSH`] for the decisions already made; the Lease is released, for at most
//! [`LEASE_RELEASE_TIMEOUT`]. Whatever still runs at [`SHUTDOWN_BOUND`] (a request to an API
//! server that stopped answering) is abandoned and the process exits. Without these, a reconcile
//! waiting on AWS retries held a SIGTERMed replica, and its Lease, for the 10 s of an AWS
//! operation's timeout, and the kubelet's SIGKILL came before the Lease was released.

use std::future::Future;
use std::time::Duration;

/// From the termination signal to the end of the operator's `run`, at most. A Pod's default
/// termination grace period is 30 s; a replica that takes 1.5 s hands its Lease over long before.
pub const SHUTDOWN_BOUND: Duration = Duration::from_millis(1500);

/// How long reconciles in flight at the signal may go on.
pub const RECONCILE_GRACE: Duration = Duration::from_millis(250);

/// How long decisions already made may go on being written after the reconciles stopped (the
/// status writer works apart from them); what is still unwritten then is dropped, and the next
/// leader decides it again.
pub const WRITER_FLUSH: Duration = Duration::from_millis(200);

/// How long releasing the Lease may take (a GET and a PATCH, normally milliseconds). An API server
/// that does not answer in time keeps the Lease until it expires (`leader::LEASE_SECONDS`).
pub const LEASE_RELEASE_TIMEOUT: Duration = Duration::from_secs(1);

// The graceful steps end before the bound abandons them.
const _: () = assert!(
    RECONCILE_GRACE.as_millis() + WRITER_FLUSH.as_millis() + LEASE_RELEASE_TIMEOUT.as_millis()
        < SHUTDOWN_BOUND.as_millis()
);

/// Completes on SIGTERM or SIGINT, the signals a Pod or a terminal sends. The handlers are
/// registered when this is called, not when first polled, so a signal that arrives while the
/// operator is still starting is not lost (nor does it kill the process).
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + Sync + 'static {
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

/// `work`'s output, or `None` when it is still running `grace` after `stop` completed; it is then
/// dropped, which cancels it. Work that finishes in the same instant wins.
pub async fn unless_stopped<T>(
    work: impl Future<Output = T>,
    stop: impl Future<Output = ()>,
    grace: Duration,
) -> Option<T> {
    tokio::select! {
        biased;
        output = work => Some(output),
        () = async {
            stop.await;
            tokio::time::sleep(grace).await;
        } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_that_outlives_the_grace_after_the_stop_is_dropped() {
        let started = tokio::time::Instant::now();
        let stop = tokio::time::sleep(Duration::from_secs(5));
        let never = futures::future::pending::<u8>();
        let out = unless_stopped(never, stop, Duration::from_millis(250)).await;
        assert_eq!(out, None);
        assert_eq!(started.elapsed(), Duration::from_millis(5250));
    }

    #[tokio::test(start_paused = true)]
    async fn work_that_ends_within_the_grace_keeps_its_output() {
        let stop = futures::future::ready(());
        let work = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            7
        };
        assert_eq!(
            unless_stopped(work, stop, Duration::from_millis(250)).await,
            Some(7)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_stop_work_runs_to_its_end() {
        let stop = futures::future::pending::<()>();
        let work = async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            "done"
        };
        assert_eq!(
            unless_stopped(work, stop, Duration::ZERO).await,
            Some("done")
        );
    }
}

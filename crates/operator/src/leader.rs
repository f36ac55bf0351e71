//! Leader election on a Lease: runs the controller only while this replica holds it, and
//! releases it on the way out; a standby watches the Lease and contends the moment it is
//! released, so a clean hand-over takes a round trip, not a lease period. Does IO (the Lease).

use crate::config::OperatorConfig;
use crate::shutdown::{LEASE_RELEASE_TIMEOUT, unless_stopped};
use futures::future::{BoxFuture, Shared};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};
use std::future::Future;
use std::time::Duration;

/// A stop signal several tasks can wait on.
pub type SharedShutdown = Shared<BoxFuture<'static, ()>>;

/// Makes `future` awaitable by several tasks.
pub fn shared(future: impl Future<Output = ()> + Send + 'static) -> SharedShutdown {
    futures::FutureExt::shared(Box::pin(future) as BoxFuture<'static, ()>)
}

/// This replica's identity in the Lease: the flag (or `$POD_NAME`), else the host name, else one
/// made from the process id.
fn identity(config: &OperatorConfig) -> String {
    config
        .lease_identity
        .clone()
        .ok_or(())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| format!("karpenter-health-{}", std::process::id()))
}

/// Waits for the Lease, then runs `lead` with a stop signal that completes on `shutdown` or when
/// leadership is lost; releases the Lease when `lead` returns. `on_standby` runs once, the first
/// time the Lease is seen held by another replica (not when this one takes a free Lease at once).
pub async fn while_leading<F, Fut>(
    client: Client,
    config: &OperatorConfig,
    shutdown: SharedShutdown,
    on_standby: impl FnOnce() + Send,
    lead: F,
) -> anyhow::Result<()>
where
    F: FnOnce(SharedShutdown) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let identity = identity(config);
    tracing::info!(%identity, lease = %config.lease_name, "waiting to become leader");
    let mut on_standby = Some(on_standby);
    let Some((leader, lease_task)) =
        contend(&client, config, &identity, &shutdown, &mut on_standby).await?
    else {
        return Ok(());
    };
    let proceed = *leader.borrow();
    let mut result = Ok(());
    if proceed {
        tracing::info!(%identity, "became leader");
        let mut watch = leader.clone();
        let lost = async move {
            while *watch.borrow_and_update() {
                if watch.changed().await.is_err() {
                    break;
                }
            }
            tracing::warn!("leadership lost; stopping");
        };
        let stop = shared(async move {
            tokio::select! { _ = shutdown => {}, _ = lost => {} }
        });
        result = lead(stop).await;
    }
    // Closing the channel makes the lease task release the Lease, so a standby takes over at once.
    drop(leader);
    if finish(lease_task).await {
        tracing::info!("lease released");
    }
    result
}

/// The lease manager's task; it releases the Lease (if held) once its receiver is dropped.
type LeaseManagerTask =
    tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>;

/// Contends for the Lease until this replica holds it (`Some`) or `shutdown` (`None`). The lease
/// manager, while another replica holds the Lease, sleeps until that lease would expire; so a
/// watch on the Lease restarts the contention as soon as the holder releases it.
async fn contend(
    client: &Client,
    config: &OperatorConfig,
    identity: &str,
    shutdown: &SharedShutdown,
    on_standby: &mut Option<impl FnOnce()>,
) -> anyhow::Result<Option<(tokio::sync::watch::Receiver<bool>, LeaseManagerTask)>> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), &config.lease_namespace);
    loop {
        // Building reads (or creates) the Lease: an API server that does not answer must not
        // hold a shutdown.
        let building =
            kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &config.lease_name)
                .with_namespace(&config.lease_namespace)
                .with_identity(identity)
                .with_duration(LEASE_SECONDS)
                .with_grace(LEASE_GRACE_SECONDS)
                .build();
        let Some(manager) = unless_stopped(building, shutdown.clone(), Duration::ZERO).await else {
            return Ok(None);
        };
        let manager = manager?;
        let (mut leader, lease_task) = manager.watch().await;
        let became_leader = async {
            while !*leader.borrow_and_update() {
                if leader.changed().await.is_err() {
                    return false;
                }
            }
            true
        };
        tokio::select! {
            leading = became_leader => {
                if leading {
                    return Ok(Some((leader, lease_task)));
                }
                // The lease task ended on an error of its own: start over after a pause.
                finish(lease_task).await;
                let pause = tokio::time::sleep(Duration::from_secs(1));
                if unless_stopped(pause, shutdown.clone(), Duration::ZERO).await.is_none() {
                    return Ok(None);
                }
            }
            () = released_by_its_holder(&leases, &config.lease_name, identity, on_standby) => {
                // Dropping the receiver ends the manager's sleep; a fresh one takes the free Lease.
                drop(leader);
                finish(lease_task).await;
                tracing::debug!("the lease was released; contending at once");
            }
            () = shutdown.clone() => {
                drop(leader);
                finish(lease_task).await;
                return Ok(None);
            }
        }
    }
}

/// How long a Lease is valid after its last renewal, and how long before that the holder renews.
/// A killed leader is replaced within `LEASE_SECONDS` plus a round trip.
pub const LEASE_SECONDS: u64 = 15;
const LEASE_GRACE_SECONDS: u64 = 5;

/// Waits for a lease manager whose receiver was dropped to release the Lease (if it holds it)
/// and end, for at most [`LEASE_RELEASE_TIMEOUT`]: after an API error the manager sleeps its
/// backoff (up to 30 s in kube-lease-manager 0.13's `watch`) before it looks at its channel
/// again, and a release to an API server that does not answer waits for the client's timeout.
/// Whether it ended cleanly.
async fn finish(mut task: LeaseManagerTask) -> bool {
    match tokio::time::timeout(LEASE_RELEASE_TIMEOUT, &mut task).await {
        Ok(Ok(Ok(_))) => true,
        Ok(Ok(Err(error))) => {
            tracing::warn!(%error, "lease manager stopped on an error");
            false
        }
        Ok(Err(error)) => {
            tracing::warn!(%error, "lease manager task failed");
            false
        }
        Err(_) => {
            task.abort();
            tracing::warn!(
                timeout = ?LEASE_RELEASE_TIMEOUT,
                expires_in_s = LEASE_SECONDS,
                "the lease manager did not stop in time; a Lease it held expires on its own"
            );
            false
        }
    }
}

/// Completes once the Lease, after being seen held by another replica, is released (no holder)
/// or deleted. Watch failures only delay it: the lease manager's own expiry check still applies.
async fn released_by_its_holder(
    leases: &Api<Lease>,
    name: &str,
    identity: &str,
    on_standby: &mut Option<impl FnOnce()>,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut seen_held = false;
    let mut events = watcher(leases.clone(), config)
        .default_backoff()
        .touched_objects()
        .boxed();
    loop {
        match events.try_next().await {
            Ok(Some(lease)) => {
                let holder = lease
                    .spec
                    .and_then(|s| s.holder_identity)
                    .filter(|h| !h.is_empty());
                match holder {
                    Some(h) if h != identity => {
                        seen_held = true;
                        if let Some(standing_by) = on_standby.take() {
                            standing_by();
                        }
                    }
                    Some(_) => {}
                    None if seen_held => return,
                    None => {}
                }
            }
            Ok(None) => return futures::future::pending().await,
            Err(error) => tracing::debug!(%error, "lease watch failed; retrying"),
        }
    }
}

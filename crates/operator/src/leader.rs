//! Leader election on a Lease: runs the controller only while this replica holds it, and
//! releases it on the way out so a standby takes over at once. Does IO (the Lease).

use crate::config::OperatorConfig;
use futures::future::{BoxFuture, Shared};
use kube::Client;
use std::future::Future;

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
/// leadership is lost; releases the Lease when `lead` returns.
pub async fn while_leading<F, Fut>(
    client: Client,
    config: &OperatorConfig,
    shutdown: SharedShutdown,
    lead: F,
) -> anyhow::Result<()>
where
    F: FnOnce(SharedShutdown) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let identity = identity(config);
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client, &config.lease_name)
        .with_namespace(&config.lease_namespace)
        .with_identity(&identity)
        .with_duration(15)
        .with_grace(5)
        .build()
        .await?;
    let (mut leader, lease_task) = manager.watch().await;
    tracing::info!(%identity, lease = %config.lease_name, "waiting to become leader");
    let became_leader = async {
        while !*leader.borrow_and_update() {
            if leader.changed().await.is_err() {
                return false;
            }
        }
        true
    };
    let proceed = tokio::select! {
        leading = became_leader => leading,
        _ = shutdown.clone() => false,
    };
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
    match lease_task.await {
        Ok(Ok(_)) => tracing::info!("lease released"),
        Ok(Err(error)) => tracing::warn!(%error, "could not release the lease"),
        Err(error) => tracing::warn!(%error, "lease task failed"),
    }
    result
}

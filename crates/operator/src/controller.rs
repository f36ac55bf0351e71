//! The controller: one reconcile per EC2NodeClass, as a visible pipeline. Does IO.

use crate::config::OperatorConfig;
use crate::error::Error;
use crate::{crd, health_object};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_api::{KarpenterHealth, KarpenterHealthStatus};
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use std::sync::Arc;
use std::time::Duration;

/// Shared state of all reconciles.
pub struct Context {
    pub client: Client,
    pub config: OperatorConfig,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Runs the operator until `shutdown` completes, then lets in-flight reconciles finish.
pub async fn run(
    client: Client,
    config: OperatorConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    if config.install_crd {
        crd::install(&client).await?;
    }
    let node_classes: Api<DeserializeGuard<EC2NodeClass>> = Api::all(client.clone());
    let healths: Api<KarpenterHealth> = Api::all(client.clone());
    let ctx = Arc::new(Context {
        client,
        config: config.clone(),
    });
    tracing::info!("karpenter-health operator started");
    Controller::new(node_classes, watcher::Config::default())
        // A deleted or hand-edited KarpenterHealth is put back at once.
        .owns(healths, watcher::Config::default())
        .with_config(ControllerConfig::default().concurrency(config.concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::debug!(node_class = %object.name, "reconciled"),
                Err(error) => tracing::warn!(%error, "reconcile failed"),
            }
        })
        .await;
    tracing::info!("karpenter-health operator stopped");
    Ok(())
}

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

async fn reconcile(
    guarded: Arc<DeserializeGuard<EC2NodeClass>>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let node_class = match &guarded.0 {
        Ok(node_class) => node_class,
        Err(invalid) => {
            // A malformed object must not stop the watch: report it by name and move on.
            tracing::warn!(
                node_class = invalid.metadata.name.as_deref().unwrap_or("<unnamed>"),
                error = %invalid.error,
                "skipping malformed EC2NodeClass"
            );
            return Ok(Action::await_change());
        }
    };
    let healths: Api<KarpenterHealth> = Api::all(ctx.client.clone());
    let name = node_class.name_any();
    let health = health_object::ensure(&healths, node_class).await?;
    if health
        .status
        .as_ref()
        .is_none_or(|s| s.conditions.is_empty())
    {
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let status = KarpenterHealthStatus::pending(now, node_class.metadata.generation);
        health_object::patch_status(&healths, &name, &status).await?;
    }
    Ok(Action::requeue(ctx.config.refresh_interval))
}

fn error_policy(
    _object: Arc<DeserializeGuard<EC2NodeClass>>,
    error: &Error,
    _ctx: Arc<Context>,
) -> Action {
    tracing::warn!(%error, kind = error.metric_label(), "reconcile error; retrying");
    Action::requeue(Duration::from_secs(5))
}

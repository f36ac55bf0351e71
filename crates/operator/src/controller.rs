//! The controller: one reconcile per EC2NodeClass, written as a visible pipeline
//! (gather → evaluate → render → patch), triggered by the EC2NodeClass itself, by every watched
//! object that affects it, and by a periodic refresh for AWS-side changes. Does IO.

use crate::config::OperatorConfig;
use crate::error::Error;
use crate::events;
use crate::http::{self, Probes};
use crate::metrics::Metrics;
use crate::{crd, health_object};
use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use karpenter_health_api::karpenter::{EC2NodeClass, NODEPOOL_LABEL};
use karpenter_health_api::{KarpenterHealth, KarpenterHealthStatus};
use karpenter_health_aws::{AwsFactsSource, AwsObserver, AwsRequest, ObserverOptions};
use karpenter_health_checks::Facts;
use karpenter_health_kube_facts::{KubeFacts, Overrides};
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type NodeClassRef = ObjectRef<DeserializeGuard<EC2NodeClass>>;

/// The AWS side as the controller sees it: the facts port, and the adapter's call counters when
/// the real adapter is used.
#[derive(Clone)]
pub struct AwsPort {
    pub source: Arc<dyn AwsFactsSource>,
    pub stats: Option<AwsObserver>,
}

impl std::fmt::Debug for AwsPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsPort")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl AwsPort {
    /// The real adapter over a given SDK configuration (tests point it at moto or a proxy).
    pub fn from_sdk_config(sdk_config: &aws_config::SdkConfig, options: ObserverOptions) -> Self {
        let observer = AwsObserver::new(sdk_config, options);
        Self {
            source: Arc::new(observer.clone()),
            stats: Some(observer),
        }
    }

    /// The real adapter over the standard credential chain and endpoint overrides.
    pub async fn from_environment(region: Option<String>) -> Self {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        if let Some(region) = region {
            loader = loader.region(aws_config::Region::new(region));
        }
        Self::from_sdk_config(&loader.load().await, ObserverOptions::default())
    }
}

/// Shared state of all reconciles.
pub struct Context {
    pub client: Client,
    pub config: OperatorConfig,
    pub settings: karpenter_health_checks::Settings,
    pub overrides: Overrides,
    pub kube_facts: KubeFacts,
    pub aws: AwsPort,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    healths: Store<KarpenterHealth>,
    /// The status this process last wrote per EC2NodeClass: fresher than the watch cache right
    /// after a write, so a quick second reconcile neither re-writes nor re-announces it.
    written: Mutex<HashMap<String, KarpenterHealthStatus>>,
    /// When a watched change first asked for each EC2NodeClass, for the latency histogram.
    triggered_at: Arc<Mutex<HashMap<String, Instant>>>,
    /// When this process first saw each EC2NodeClass at its current generation.
    generation_seen: Mutex<HashMap<String, (i64, jiff::Timestamp)>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
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

/// Runs the operator with the real AWS adapter until `shutdown` completes.
pub async fn run(
    client: Client,
    config: OperatorConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    let aws = AwsPort::from_environment(config.region.clone()).await;
    run_with(client, config, aws, shutdown).await
}

/// Runs the operator with the given AWS port until `shutdown` completes; with leader election,
/// reconciles only while holding the Lease and releases it on the way out.
pub async fn run_with(
    client: Client,
    config: OperatorConfig,
    aws: AwsPort,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    if config.install_crd {
        crd::install(&client).await?;
    }
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown) as BoxFuture<'static, ()>);
    if !config.leader_elect {
        return run_controller(client, config, aws, shutdown).await;
    }
    let identity = config
        .lease_identity
        .clone()
        .ok_or(())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| format!("karpenter-health-{}", std::process::id()));
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &config.lease_name)
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
        let stop = futures::FutureExt::shared(Box::pin(async move {
            tokio::select! { _ = shutdown => {}, _ = lost => {} }
        }) as BoxFuture<'static, ()>);
        run_controller(client, config, aws, stop).await?;
    }
    // Closing the channel makes the lease task release the Lease, so a standby takes over at once.
    drop(leader);
    match lease_task.await {
        Ok(Ok(_)) => tracing::info!("lease released"),
        Ok(Err(error)) => tracing::warn!(%error, "could not release the lease"),
        Err(error) => tracing::warn!(%error, "lease task failed"),
    }
    Ok(())
}

type SharedShutdown = futures::future::Shared<BoxFuture<'static, ()>>;

async fn run_controller(
    client: Client,
    config: OperatorConfig,
    aws: AwsPort,
    shutdown: SharedShutdown,
) -> anyhow::Result<()> {
    let (kube_facts, triggers) = KubeFacts::new(&client, &config.watch_targets());
    let metrics = Arc::new(Metrics::default());
    let (healths, health_writer) = reflector::store();
    let health_stream = watcher(
        Api::<KarpenterHealth>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(health_writer)
    .touched_objects();
    let reporter = Reporter {
        controller: "karpenter-health".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let triggered_at: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let ctx = Arc::new(Context {
        recorder: Recorder::new(client.clone(), reporter),
        client: client.clone(),
        settings: config.settings(),
        overrides: config.overrides(),
        config: config.clone(),
        kube_facts: kube_facts.clone(),
        aws: aws.clone(),
        metrics: metrics.clone(),
        healths: healths.clone(),
        written: Mutex::default(),
        triggered_at: triggered_at.clone(),
        generation_seen: Mutex::default(),
    });

    // Every input stream (this one, the health watch and each kube-facts watch) backs off on its
    // own errors. The controller's shared trigger backoff would instead sleep for every error of
    // any input, growing to 30 s per error: after an API-server outage, where each of the nine
    // watches reports a few errors, it held back all triggers (and so every cache update) for
    // minutes while the status looked current. It is therefore switched off.
    let node_classes: Api<DeserializeGuard<EC2NodeClass>> = Api::all(client.clone());
    let (classes, class_writer) = reflector::store();
    let class_stream = watcher(node_classes, watcher::Config::default())
        .default_backoff()
        .reflect(class_writer)
        .applied_objects();
    let controller =
        Controller::for_stream(class_stream, classes.clone()).trigger_backoff(NoSharedBackoff);

    if let Some(address) = config.http_address.0 {
        let ready_facts = kube_facts.clone();
        let ready_classes = classes.clone();
        let stats = aws.stats.clone();
        let probes = Probes {
            metrics: metrics.clone(),
            ready: Arc::new(move || {
                ready_facts.is_ready() && !ready_classes.is_empty_or_unsynced()
            }),
            before_scrape: Arc::new(move |m: &Metrics| {
                if let Some(observer) = &stats {
                    m.sync_aws_calls(&observer.call_stats());
                }
            }),
        };
        let server_shutdown = shutdown.clone();
        tokio::spawn(async move {
            if let Err(error) = http::serve(address, probes, server_shutdown).await {
                tracing::error!(%error, "HTTP endpoints failed");
            }
        });
    }

    // Every watched change names the EC2NodeClasses it affects; the time it arrived is kept for
    // the change-to-status latency.
    let mark = {
        let triggered_at = triggered_at.clone();
        move |names: Vec<String>| -> Vec<NodeClassRef> {
            let now = Instant::now();
            if let Ok(mut map) = triggered_at.lock() {
                for name in &names {
                    map.entry(name.clone()).or_insert(now);
                }
            }
            names.iter().map(|n| ObjectRef::new(n)).collect()
        }
    };
    let all_classes = {
        let classes = classes.clone();
        move || -> Vec<String> { classes.state().iter().map(|c| c.name_any()).collect() }
    };
    let pool_to_class = kube_facts.clone();

    tracing::info!("karpenter-health operator started");
    let (m0, m1, m2, m3, m4, m5, m6) = (
        mark.clone(),
        mark.clone(),
        mark.clone(),
        mark.clone(),
        mark.clone(),
        mark.clone(),
        mark,
    );
    let (a1, a2, a3, a4) = (
        all_classes.clone(),
        all_classes.clone(),
        all_classes.clone(),
        all_classes,
    );
    controller
        // A deleted or hand-edited KarpenterHealth is put back at once (same name as its class).
        .watches_stream(health_stream, {
            let mark = m0;
            move |health: KarpenterHealth| mark(vec![health.name_any()])
        })
        .watches_stream(triggers.node_pools, move |pool| {
            m1(pool
                .0
                .ok()
                .and_then(|p| p.spec.template.spec.node_class_ref.map(|r| r.name))
                .into_iter()
                .collect())
        })
        .watches_stream(triggers.node_claims, move |claim| {
            m2(claim
                .0
                .ok()
                .and_then(|c| c.spec.node_class_ref.map(|r| r.name))
                .into_iter()
                .collect())
        })
        .watches_stream(triggers.aws_auth, move |_| m3(a1()))
        .watches_stream(triggers.karpenter_deployment, move |_| m4(a2()))
        .watches_stream(triggers.service_accounts, move |_| m5(a3()))
        .watches_stream(triggers.pending_pods, move |pod| {
            // A Pod pinned to one NodePool affects only that pool's EC2NodeClass.
            let pinned = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_selector.as_ref())
                .and_then(|s| s.get(NODEPOOL_LABEL))
                .map(|pool| pool.to_string());
            let names = match pinned {
                Some(pool) => pool_to_class
                    .node_class_of_pool(&pool)
                    .into_iter()
                    .collect(),
                None => a4(),
            };
            m6(names)
        })
        .with_config(ControllerConfig::default().concurrency(config.concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => tracing::debug!(node_class = %object.name, "reconciled"),
                Err(error) => tracing::debug!(%error, "reconcile trigger or reconcile failed"),
            }
        })
        .await;
    tracing::info!("karpenter-health operator stopped");
    Ok(())
}

/// The controller's shared trigger backoff, off: each input stream has its own.
#[derive(Debug)]
struct NoSharedBackoff;

impl Iterator for NoSharedBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        // `None` would end the trigger stream; zero lets it go on at once.
        Some(Duration::ZERO)
    }
}

impl kube::runtime::utils::Backoff for NoSharedBackoff {
    fn reset(&mut self) {}
}

trait StoreReady {
    fn is_empty_or_unsynced(&self) -> bool;
}

impl<K: Resource + Clone + 'static> StoreReady for Store<K>
where
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    /// Readiness must not wait for EC2NodeClasses to exist; it only needs the first list done.
    fn is_empty_or_unsynced(&self) -> bool {
        futures::FutureExt::now_or_never(self.wait_until_ready()).is_none()
    }
}

/// The AWS request for one EC2NodeClass: what the checks need read from IAM, EC2 and EKS.
fn aws_request(
    node_class: &EC2NodeClass,
    facts: &karpenter_health_checks::facts::ClusterFacts,
) -> AwsRequest {
    let karpenter_cluster = facts.karpenter.found().and_then(|k| k.cluster_name.clone());
    AwsRequest {
        cluster_name: karpenter_cluster.or_else(|| facts.configured_cluster_name.clone()),
        instance_profile: node_class.spec.instance_profile.clone().or_else(|| {
            node_class
                .status
                .as_ref()
                .and_then(|s| s.instance_profile.clone())
        }),
        role: node_class.spec.role.clone(),
        security_group_selector_terms: node_class.spec.security_group_selector_terms.clone(),
    }
}

impl Context {
    /// 1. gather (IO): the cluster facts from the caches, the AWS facts from the adapter.
    async fn gather(&self, node_class: &EC2NodeClass) -> Facts {
        let mut cluster = self.kube_facts.snapshot(node_class, &self.overrides);
        cluster.node_class_generation_seen_at = self.generation_seen_at(node_class);
        let request = aws_request(node_class, &cluster);
        let aws = self.aws.source.observe(&request).await;
        Facts { cluster, aws }
    }

    fn generation_seen_at(&self, node_class: &EC2NodeClass) -> Option<jiff::Timestamp> {
        let generation = node_class.metadata.generation?;
        let mut seen = self.generation_seen.lock().ok()?;
        let entry = seen
            .entry(node_class.name_any())
            .or_insert((generation, jiff::Timestamp::now()));
        if entry.0 != generation {
            *entry = (generation, jiff::Timestamp::now());
        }
        Some(entry.1)
    }

    /// The status last written for `name`: this process's own write if any, else the cache's.
    fn previous_status(
        &self,
        name: &str,
        stored: Option<&KarpenterHealth>,
    ) -> Option<KarpenterHealthStatus> {
        self.written
            .lock()
            .ok()
            .and_then(|w| w.get(name).cloned())
            .or_else(|| stored.and_then(|h| h.status.clone()))
    }
}

/// Whether `next` must be written: something but `lastEvaluated` changed, or `lastEvaluated` is
/// older than half a refresh (so it moves about once per refresh and a status write never
/// triggers another).
fn needs_write(
    previous: Option<&KarpenterHealthStatus>,
    next: &KarpenterHealthStatus,
    refresh: Duration,
) -> bool {
    let Some(previous) = previous else {
        return true;
    };
    let strip = |s: &KarpenterHealthStatus| KarpenterHealthStatus {
        last_evaluated: None,
        ..s.clone()
    };
    if strip(previous) != strip(next) {
        return true;
    }
    match (&previous.last_evaluated, &next.last_evaluated) {
        (Some(before), Some(now)) => {
            let age = now.0.duration_since(before.0);
            age >= jiff::SignedDuration::try_from(refresh / 2).unwrap_or(jiff::SignedDuration::MAX)
        }
        _ => true,
    }
}

async fn reconcile(
    guarded: Arc<DeserializeGuard<EC2NodeClass>>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let started = Instant::now();
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
    let name = node_class.name_any();
    if node_class.metadata.deletion_timestamp.is_some() {
        ctx.metrics.forget(&name);
        return Ok(Action::await_change());
    }
    let healths: Api<KarpenterHealth> = Api::all(ctx.client.clone());
    let stored = ctx.healths.get(&ObjectRef::new(&name));
    let owned = stored.as_ref().is_some_and(|h| {
        h.owner_references()
            .iter()
            .any(|o| Some(&o.uid) == node_class.metadata.uid.as_ref())
    });
    let stored = match (stored, owned) {
        (Some(health), true) => health.as_ref().clone(),
        _ => health_object::ensure(&healths, node_class).await?,
    };
    let mut previous = ctx.previous_status(&name, Some(&stored));
    if previous.as_ref().is_none_or(|s| s.conditions.is_empty()) {
        // Show every check as Pending at once: the first AWS reads may take seconds.
        let pending = KarpenterHealthStatus::pending(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
            node_class.metadata.generation,
        );
        health_object::patch_status(&healths, &name, &pending).await?;
        previous = Some(pending);
    }

    // 1. gather (IO)
    let facts = ctx.gather(node_class).await;
    // 2. evaluate and 3. render (pure)
    let now = jiff::Timestamp::now();
    let status = karpenter_health_checks::evaluate(&facts, &ctx.settings, previous.as_ref(), now);
    // 4. patch (IO), only when something changed
    if needs_write(previous.as_ref(), &status, ctx.config.refresh_interval) {
        health_object::patch_status(&healths, &name, &status).await?;
        ctx.metrics.status_patched();
        if let Ok(mut written) = ctx.written.lock() {
            written.insert(name.clone(), status.clone());
        }
        let transitions = events::transitions(previous.as_ref(), &status);
        if !transitions.is_empty() {
            let health_ref: ObjectReference = stored.object_ref(&());
            let class_ref: ObjectReference = node_class.object_ref(&());
            events::publish(&ctx.recorder, &health_ref, &class_ref, &transitions).await;
        }
        let triggered = ctx
            .triggered_at
            .lock()
            .ok()
            .and_then(|mut m| m.remove(&name));
        if let Some(since) = triggered {
            ctx.metrics.observe_change_to_status(since.elapsed());
        }
    } else if let Ok(mut map) = ctx.triggered_at.lock() {
        map.remove(&name);
    }
    ctx.metrics.record_status(&name, &status);
    ctx.metrics.observe_reconcile(started.elapsed());
    Ok(Action::requeue(ctx.config.refresh_interval))
}

fn error_policy(
    _object: Arc<DeserializeGuard<EC2NodeClass>>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    tracing::warn!(%error, kind = error.metric_label(), "reconcile error; retrying");
    ctx.metrics.reconcile_error(error.metric_label());
    Action::requeue(Duration::from_secs(5))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn status_at(seconds: i64) -> KarpenterHealthStatus {
        let at = Time(jiff::Timestamp::from_second(seconds).unwrap());
        KarpenterHealthStatus {
            last_evaluated: Some(at.clone()),
            ..KarpenterHealthStatus::pending(at, Some(1))
        }
    }

    #[test]
    fn an_unchanged_status_is_rewritten_only_once_per_half_refresh() {
        let refresh = Duration::from_secs(300);
        let before = status_at(1_000);
        let mut soon = before.clone();
        soon.last_evaluated = status_at(1_010).last_evaluated;
        assert!(!needs_write(Some(&before), &soon, refresh));
        let mut later = before.clone();
        later.last_evaluated = status_at(1_200).last_evaluated;
        assert!(needs_write(Some(&before), &later, refresh));
    }

    #[test]
    fn a_changed_condition_is_always_written() {
        let before = status_at(1_000);
        let mut next = before.clone();
        next.conditions[0].reason = "InstanceProfileValid".into();
        next.conditions[0].status = "True".into();
        assert!(needs_write(Some(&before), &next, Duration::from_secs(300)));
        assert!(needs_write(None, &next, Duration::from_secs(300)));
    }
}

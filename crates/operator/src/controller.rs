//! Wires the controller: one reconcile per EC2NodeClass, triggered by the EC2NodeClass itself,
//! by every watched object that affects it, and by a periodic refresh for AWS-side changes; serves
//! the probes and metrics beside it. Does IO.

use crate::config::OperatorConfig;
use crate::context::{AwsPort, Context};
use crate::crd;
use crate::http::{self, Probes};
use crate::lanes::{aws_changes, bulk_triggers, drain_classes, health_watch, user_changes};
use crate::leader::{self, SharedShutdown};
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use crate::reconcile::write::{StatusWriter, WrittenStatuses};
use crate::reconcile::{Lane, error_policy, reconcile};
use crate::shutdown::{RECONCILE_GRACE, WRITER_FLUSH, unless_stopped};
use crate::triggers::{ClassTriggers, NoSharedBackoff, StoreReady, TriggerTimes};
use futures::StreamExt;
use futures::stream::BoxStream;
use karpenter_health_api::KarpenterHealth;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_kube_facts::KubeFacts;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Runs the operator with the real AWS adapter until `shutdown` completes.
pub async fn run(
    client: Client,
    config: OperatorConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    let aws = AwsPort::from_environment(config.evaluation.region.clone()).await;
    run_with(client, config, aws, shutdown).await
}

/// Runs the operator with the given AWS port until `shutdown` completes; with leader election,
/// reconciles only while holding the Lease and releases it on the way out. The HTTP endpoints
/// serve from the start in every replica, the standby included: `/livez` answers at once,
/// `/readyz` turns ready once this replica's controller has synced its caches, and the
/// `karpenter_health_leader` gauge says which replica reconciles.
pub async fn run_with(
    client: Client,
    config: OperatorConfig,
    aws: AwsPort,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    let shutdown = leader::shared(shutdown);
    // Nothing before the Lease may outlast a signal: the API server may not be answering.
    if config.install_crd
        && let Some(installed) =
            unless_stopped(crd::install(&client), shutdown.clone(), Duration::ZERO).await
    {
        installed?;
    }
    let metrics = Arc::new(Metrics::default());
    let readiness = Readiness::default();
    readiness.set_blocked(Some("checking that the CRDs are served".into()));
    if let Some(address) = config.http_address.0 {
        serve_probes(address, &readiness, &aws, &metrics, &shutdown);
    }
    // A first run before the CRDs are installed says what to do, once a minute, instead of
    // failing every watch every few seconds.
    if !crd::wait_until_served(&client, &readiness, shutdown.clone()).await {
        return Ok(());
    }
    let process = Process { metrics, readiness };
    if !config.leader_elect {
        return run_controller(client, config, aws, process, shutdown).await;
    }
    // A standby keeps caches of its own, so its /readyz says whether it could take over (RBAC,
    // API server reachable). They start only once another replica is seen holding the Lease (a
    // replica that takes a free Lease at once would list everything twice), and are dropped the
    // moment it leads.
    let standby: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>> = Arc::default();
    let start_standby = {
        let (standby, client, config, readiness) = (
            standby.clone(),
            client.clone(),
            config.clone(),
            process.readiness.clone(),
        );
        move || {
            if let Ok(mut slot) = standby.lock() {
                *slot = Some(standby_caches(&client, &config, &readiness));
            }
        }
    };
    let lease_client = client.clone();
    let lease_config = config.clone();
    leader::while_leading(
        lease_client,
        &lease_config,
        shutdown,
        start_standby,
        move |stop| {
            if let Some(caches) = standby.lock().ok().and_then(|mut slot| slot.take()) {
                caches.abort();
            }
            run_controller(client, config, aws, process, stop)
        },
    )
    .await
}

/// Runs the watches a leader would run, without reconciling, and reports their sync to
/// `readiness`; abort the returned task to stop them.
fn standby_caches(
    client: &Client,
    config: &OperatorConfig,
    readiness: &Readiness,
) -> tokio::task::JoinHandle<()> {
    let (kube_facts, inputs) = KubeFacts::new(client, &config.watch_targets());
    let (classes, class_writer) = reflector::store();
    let class_stream = watcher(
        Api::<DeserializeGuard<EC2NodeClass>>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(class_writer)
    .applied_objects();
    readiness.set_caches(move || kube_facts.is_ready() && !classes.is_empty_or_unsynced());
    fn drained<T>(
        stream: impl futures::Stream<Item = T> + Send + 'static,
    ) -> BoxStream<'static, ()> {
        stream.map(|_| ()).boxed()
    }
    let streams = vec![
        drained(class_stream),
        drained(inputs.node_pools),
        drained(inputs.node_claims),
        drained(inputs.pending_pods),
        drained(inputs.disruption_events),
        drained(inputs.config_maps),
        drained(inputs.deployments),
        drained(inputs.service_accounts),
        drained(inputs.node_pool_crd),
        drained(inputs.validating_webhooks),
        drained(inputs.mutating_webhooks),
        drained(inputs.endpoints),
        drained(inputs.daemonsets),
        inputs.inputs_changed,
    ];
    // Polling the streams is what fills the caches; the events themselves are not needed.
    tokio::spawn(futures::stream::select_all(streams).for_each(|()| async {}))
}

/// What lives as long as the process, across the controller's start: metrics and readiness.
struct Process {
    metrics: Arc<Metrics>,
    readiness: Readiness,
}

async fn run_controller(
    client: Client,
    config: OperatorConfig,
    aws: AwsPort,
    process: Process,
    shutdown: SharedShutdown,
) -> anyhow::Result<()> {
    let (kube_facts, inputs) = KubeFacts::new(&client, &config.watch_targets());
    let written = WrittenStatuses::default();
    let (_background, drain_changed, daemonset_pods_changed) =
        spawn_background_reads(&kube_facts, &client, &config, &written);
    let metrics = process.metrics.clone();
    metrics.set_leader(true);
    let (healths, health_writer) = reflector::store();
    let health_stream = health_watch(&client, written.clone(), health_writer);
    let reporter = Reporter {
        controller: "karpenter-health".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let triggered_at = TriggerTimes::default();
    let writer = StatusWriter::new(
        Api::all(client.clone()),
        written.clone(),
        metrics.clone(),
        client.clone(),
        reporter,
        config.refresh_interval,
    );
    // No write may outlive leading: a late one could overwrite the next leader's.
    let _close_writer = CloseWriter(writer.clone());
    let ctx = Arc::new(shared_context(
        &client,
        &config,
        kube_facts.clone(),
        aws.clone(),
        &metrics,
        healths,
        Shared {
            written: written.clone(),
            triggered_at: triggered_at.clone(),
            writer: writer.clone(),
        },
    ));

    let (classes, controller, bulk_controller) = class_controllers(&client);
    let (ready_facts, ready_classes) = (kube_facts.clone(), classes.clone());
    process
        .readiness
        .set_caches(move || ready_facts.is_ready() && !ready_classes.is_empty_or_unsynced());
    tracing::info!("karpenter-health operator started");
    let triggers = ClassTriggers::new(classes, kube_facts, triggered_at);
    let (user_controller, storms) = user_changes(controller, health_stream, inputs, &triggers);
    let user_lane = user_controller
        .with_config(ControllerConfig::default().concurrency(config.concurrency))
        .graceful_shutdown_on(shutdown.clone())
        .run(
            |class, ctx| reconcile(class, ctx, Lane::User),
            error_policy,
            ctx.clone(),
        );
    let bulk_lane = bulk_controller
        // NodeClaims and pending Pods come in storms (a scale-up): their requests are coalesced
        // per class. A NodeClaim change asks for its own class, or for every class when it
        // changes which instances are claimed (the instance sweep of ClusterIdentityUnique).
        .reconcile_on(bulk_triggers(
            storms.node_claims,
            storms.pending_pods,
            storms.disruption_events,
            &triggers,
            config.bulk_trigger_interval,
        ))
        // An AWS answer refreshed in the background that differs from the one a class was
        // evaluated with re-evaluates that class (the fact store's stale-while-revalidate).
        .reconcile_on(aws_changes(&aws, &triggers))
        .reconcile_on(drain_classes(drain_changed, &triggers))
        // A DaemonSet's newest Pod read anew differently: every class counts DaemonSets.
        .reconcile_all_on(daemonset_pods_changed)
        .with_config(ControllerConfig::default().concurrency(config.concurrency))
        .graceful_shutdown_on(shutdown.clone())
        .run(
            |class, ctx| reconcile(class, ctx, Lane::Bulk),
            error_policy,
            ctx,
        );
    reconcile_until_stopped(
        futures::stream::select(user_lane, bulk_lane),
        shutdown,
        &writer,
    )
    .await;
    metrics.set_leader(false);
    tracing::info!("karpenter-health operator stopped");
    Ok(())
}

/// Runs both lanes' reconciles until the shutdown, then cancels those still in flight past the
/// grace and flushes the status writer.
async fn reconcile_until_stopped<S, E>(lanes: S, shutdown: SharedShutdown, writer: &StatusWriter)
where
    S: futures::Stream<
            Item = Result<(ObjectRef<GuardedClass>, kube::runtime::controller::Action), E>,
        >,
    E: std::fmt::Display,
{
    let reconciling = lanes.for_each(|result| async move {
        match result {
            Ok((object, _)) => tracing::debug!(node_class = %object.name, "reconciled"),
            Err(error) => tracing::debug!(%error, "reconcile trigger or reconcile failed"),
        }
    });
    // kube-runtime's graceful shutdown waits for every reconcile in flight, and one waiting on
    // AWS retries takes up to an operation's timeout: past the grace they are cancelled.
    if unless_stopped(reconciling, shutdown, RECONCILE_GRACE)
        .await
        .is_none()
    {
        tracing::info!(grace = ?RECONCILE_GRACE, "reconciles still in flight were cancelled");
    }
    if !writer.flush(WRITER_FLUSH).await {
        tracing::info!(grace = ?WRITER_FLUSH, "status writes still pending were dropped");
    }
}

/// What the reconciles share with the status writer and the triggers.
struct Shared {
    written: WrittenStatuses,
    triggered_at: TriggerTimes,
    writer: Arc<StatusWriter>,
}

/// The context every reconcile of this leader term shares.
fn shared_context(
    client: &Client,
    config: &OperatorConfig,
    kube_facts: KubeFacts,
    aws: AwsPort,
    metrics: &Arc<Metrics>,
    healths: Store<KarpenterHealth>,
    shared: Shared,
) -> Context {
    Context {
        client: client.clone(),
        settings: config.settings(),
        overrides: config.overrides(),
        config: config.clone(),
        kube_facts,
        aws,
        metrics: metrics.clone(),
        healths,
        written: shared.written,
        triggered_at: shared.triggered_at,
        generation_seen: Mutex::default(),
        evidence: Mutex::default(),
        failures: Mutex::default(),
        writer: shared.writer,
        class_locks: Mutex::default(),
    }
}

/// An EC2NodeClass as watched: a malformed one is kept as the error that names it.
pub(crate) type GuardedClass = DeserializeGuard<EC2NodeClass>;
/// A controller over the EC2NodeClasses.
pub(crate) type ClassController = Controller<GuardedClass>;

/// The EC2NodeClass cache and the two lanes' controllers over it: the user lane, fed by the class
/// watch, and the bulk lane, a controller of its own over the same classes, fed only by storms
/// and background AWS refreshes, so a user's change never queues behind them.
///
/// Every input stream (the class watch, the health watch and each kube-facts watch) backs off on
/// its own errors. The controller's shared trigger backoff would instead sleep for every error of
/// any input, growing to 30 s per error: after an API-server outage, where each of the nine
/// watches reports a few errors, it held back all triggers (and so every cache update) for
/// minutes while the status looked current. It is therefore switched off.
fn class_controllers(client: &Client) -> (Store<GuardedClass>, ClassController, ClassController) {
    let node_classes: Api<DeserializeGuard<EC2NodeClass>> = Api::all(client.clone());
    let (classes, class_writer) = reflector::store();
    let class_stream = watcher(node_classes, watcher::Config::default())
        .default_backoff()
        .reflect(class_writer)
        .applied_objects();
    let controller =
        Controller::for_stream(class_stream, classes.clone()).trigger_backoff(NoSharedBackoff);
    let bulk_controller = Controller::for_stream(
        futures::stream::pending::<Result<DeserializeGuard<EC2NodeClass>, watcher::Error>>(),
        classes.clone(),
    )
    .trigger_backoff(NoSharedBackoff);
    (classes, controller, bulk_controller)
}

/// Re-reads the API server's /version, the Kubernetes version where EKS cannot be read. It
/// changes only with a control-plane upgrade, so every ten minutes, not per reconcile.
fn spawn_version_refresh(kube_facts: &KubeFacts, client: &Client) -> AbortOnDrop {
    let (facts, client) = (kube_facts.clone(), client.clone());
    AbortOnDrop(tokio::spawn(async move {
        loop {
            facts.refresh_apiserver_version(&client).await;
            tokio::time::sleep(std::time::Duration::from_secs(600)).await;
        }
    }))
}

/// The reads in the background of the leader: the API server's version, what holds NodeClaims
/// stuck terminating, the newest Pods of the DaemonSets the written verdicts hang on; with the
/// NodeClaims whose drain changed and a tick when a DaemonSet's newest Pod did.
fn spawn_background_reads(
    kube_facts: &KubeFacts,
    client: &Client,
    config: &OperatorConfig,
    written: &WrittenStatuses,
) -> (
    Vec<AbortOnDrop>,
    futures::channel::mpsc::UnboundedReceiver<Vec<String>>,
    futures::channel::mpsc::UnboundedReceiver<()>,
) {
    let (drain_changes, drain_changed) = futures::channel::mpsc::unbounded::<Vec<String>>();
    let (pod_changes, pods_changed) = futures::channel::mpsc::unbounded::<()>();
    let tasks = vec![
        spawn_version_refresh(kube_facts, client),
        spawn_drain_refresh(kube_facts, client, config, drain_changes),
        spawn_daemonset_pod_refresh(kube_facts, client, config, written.clone(), pod_changes),
    ];
    (tasks, drain_changed, pods_changed)
}

/// Reads what holds NodeClaims stuck terminating (their Nodes' Pods and PodDisruptionBudgets)
/// anew every refresh interval while any is (no call otherwise), and sends the NodeClaims whose
/// answer changed, to re-evaluate their classes in the bulk lane.
fn spawn_drain_refresh(
    kube_facts: &KubeFacts,
    client: &Client,
    config: &OperatorConfig,
    drain_changes: futures::channel::mpsc::UnboundedSender<Vec<String>>,
) -> AbortOnDrop {
    let (facts, client) = (kube_facts.clone(), client.clone());
    let (after, every) = (
        config.settings().terminating_long_after,
        config.refresh_interval,
    );
    AbortOnDrop(tokio::spawn(async move {
        loop {
            let Some(changed) = facts
                .refresh_drains(&client, jiff::Timestamp::now() - after)
                .await
            else {
                // The NodeClaims are not listed yet.
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                continue;
            };
            if !changed.is_empty() && drain_changes.unbounded_send(changed).is_err() {
                return;
            }
            tokio::time::sleep(every).await;
        }
    }))
}

/// The DaemonSets the written verdicts hang on: those a `DaemonSetsFillNodes` or
/// `DaemonSetsMayFillNodes` finding of any class names (`namespace/name`).
fn daemonsets_named(written: &WrittenStatuses) -> Vec<String> {
    let Ok(written) = written.lock() else {
        return Vec::new();
    };
    let mut named: Vec<String> = written
        .values()
        .flat_map(|status| status.findings.iter())
        .filter(|f| f.reason == "DaemonSetsFillNodes" || f.reason == "DaemonSetsMayFillNodes")
        .flat_map(|f| f.subjects.iter())
        .filter(|s| s.kind == "DaemonSet")
        .map(|s| format!("{}/{}", s.namespace.as_deref().unwrap_or_default(), s.name))
        .collect();
    named.sort();
    named.dedup();
    named
}

/// Reads the newest Pods of the DaemonSets the written verdicts hang on: a newly named one at
/// once (checked every few seconds), every one again each refresh interval; a changed answer
/// re-evaluates every class (no call while no verdict names a DaemonSet and no read keeps one's
/// verdict away).
fn spawn_daemonset_pod_refresh(
    kube_facts: &KubeFacts,
    client: &Client,
    config: &OperatorConfig,
    written: WrittenStatuses,
    changes: futures::channel::mpsc::UnboundedSender<()>,
) -> AbortOnDrop {
    let (facts, client, every) = (kube_facts.clone(), client.clone(), config.refresh_interval);
    AbortOnDrop(tokio::spawn(async move {
        let mut read: Vec<String> = Vec::new();
        let mut last = std::time::Instant::now();
        loop {
            let wanted = daemonsets_named(&written);
            let due = last.elapsed() >= every || wanted.iter().any(|d| !read.contains(d));
            // Nothing is read while the DaemonSets are not listed yet.
            if due
                && !(wanted.is_empty() && read.is_empty() && !facts.daemonset_pods_held())
                && let Some(changed) = facts.refresh_daemonset_pods(&client, &wanted).await
            {
                (read, last) = (wanted, std::time::Instant::now());
                if !changed.is_empty() && changes.unbounded_send(()).is_err() {
                    return;
                }
            }
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        }
    }))
}

/// Serves /metrics, /livez and /readyz until `shutdown`.
fn serve_probes(
    address: std::net::SocketAddr,
    readiness: &Readiness,
    aws: &AwsPort,
    metrics: &Arc<Metrics>,
    shutdown: &SharedShutdown,
) {
    let readiness = readiness.clone();
    let stats = aws.stats.clone();
    let probes = Probes {
        metrics: metrics.clone(),
        ready: Arc::new(move || readiness.check()),
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

/// Closes the status writer when the controller that started it returns.
struct CloseWriter(Arc<StatusWriter>);

impl Drop for CloseWriter {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Aborts a background task when the controller that started it returns.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

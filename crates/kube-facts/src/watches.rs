//! The watches behind the cluster facts: one reflector cache per kind, trimmed, each also a
//! stream of touched objects that the controller maps onto the EC2NodeClasses to re-check.
//! Does IO (list/watch against the API server).

use crate::api_errors::{cause_of_api_error, cause_of_watch_error};
use crate::changes::changed_objects;
use crate::disruption_events::{DisruptionEventIndex, EventsTouched, SharedDisruptionEvents};
use crate::index::{SharedIndex, WatchIndex};
use crate::inputs::{Input, Inputs, WatchTargets};
use crate::node_claims::{ClaimsTouched, NodeClaimIndex, SharedClaims};
use crate::pending_pods::{PendingPodIndex, PodPins, SharedPendingPods};
use crate::snapshot::{Overrides, Sources, WideMemo, class_facts};
pub use crate::watch_health::WATCH_STALE_AFTER;
use crate::watch_health::WatchHealth;
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_health_api::karpenter::{EC2NodeClass, NodePool};
use karpenter_health_checks::facts::{ClusterFacts, Observed};
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Instant;

/// A stream of objects a watch touched (added, changed in what the checks read, or deleted), for
/// the controller's triggers.
pub type Touched<K> = BoxStream<'static, Result<K, watcher::Error>>;

/// The trigger streams; each must be polled (the controller does) for its cache to fill.
pub struct Triggers {
    pub node_pools: Touched<DeserializeGuard<NodePool>>,
    /// The EC2NodeClasses NodeClaim changes affect (the index is updated before they are sent).
    pub node_claims: BoxStream<'static, Result<ClaimsTouched, watcher::Error>>,
    /// What a pending-Pod change pins (the index is updated before it is sent).
    pub pending_pods: BoxStream<'static, Result<PodPins, watcher::Error>>,
    /// The NodeClaim a `DisruptionBlocked` Event is about (the index is updated first).
    pub disruption_events: BoxStream<'static, Result<EventsTouched, watcher::Error>>,
    /// `kube-system/aws-auth` and `kube-system/cilium-config`.
    pub config_maps: Touched<ConfigMap>,
    /// The Karpenter Deployment and `kube-system/aws-load-balancer-controller`.
    pub deployments: Touched<Deployment>,
    pub service_accounts: Touched<ServiceAccount>,
    /// Karpenter's CRDs (the NodePool's label rules; every one's stored versions, schema fields
    /// and conversion webhook).
    pub node_pool_crd: Touched<CustomResourceDefinition>,
    /// Webhook configurations and the Endpoints in Karpenter's namespace.
    pub validating_webhooks: Touched<ValidatingWebhookConfiguration>,
    pub mutating_webhooks: Touched<MutatingWebhookConfiguration>,
    pub endpoints: Touched<Endpoints>,
    /// Every DaemonSet (the VPC CNI's `kube-system/aws-node` settings; the requests Karpenter
    /// counts on a NodePool's nodes).
    pub daemonsets: Touched<DaemonSet>,
    /// Fires when a watched input became observable (first list done, even an empty one) or
    /// stopped or resumed being so; every class reads some of them, so all are re-evaluated.
    pub inputs_changed: BoxStream<'static, ()>,
}

impl std::fmt::Debug for Triggers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Triggers").finish_non_exhaustive()
    }
}

/// Objects per list page of the indexed watches (kube-runtime's default is 500): a page is
/// decoded whole before its objects are indexed, so smaller pages leave less freed memory behind.
const LIST_PAGE_SIZE: u32 = 100;

/// Starts a trimmed, reflected watch and returns its cache and the stream of objects whose
/// trimmed content changed (see [`changed_objects`]).
fn reflected<K>(api: Api<K>, input: &Input<K>, health: &WatchHealth) -> (Store<K>, Touched<K>)
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let health = health.clone();
    let name = input.watch;
    let events = watcher(api, input.watch_config())
        .default_backoff()
        .modify(input.trim)
        .reflect(writer)
        .inspect(move |event| match event {
            Ok(watcher::Event::InitDone) => health.succeeded(name, true),
            Ok(_) => health.succeeded(name, false),
            Err(error) => {
                tracing::warn!(watch = name, %error, "watch failed; retrying with backoff");
                health.failed(
                    name,
                    cause_of_watch_error(error),
                    error.to_string(),
                    Instant::now(),
                );
            }
        });
    (reader, changed_objects(events).boxed())
}

/// What a reflected watch needs of its kind.
trait Watchable:
    Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static
{
}

impl<K> Watchable for K where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static
{
}

/// Starts reflected watches of inputs, each keeping its health in `health`.
struct Watching<'a> {
    client: &'a Client,
    health: &'a WatchHealth,
}

impl Watching<'_> {
    /// A watch of a namespaced input (in its namespace, else in all).
    fn namespaced<K>(&self, input: &Input<K>) -> (Store<K>, Touched<K>)
    where
        K: Watchable + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    {
        reflected(input.api(self.client), input, self.health)
    }

    /// Watches of two namespaced inputs of one kind, whose changes trigger the same classes: one
    /// stream for both.
    fn namespaced_pair<K>(&self, a: &Input<K>, b: &Input<K>) -> ((Store<K>, Store<K>), Touched<K>)
    where
        K: Watchable + Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    {
        let (a, a_stream) = self.namespaced(a);
        let (b, b_stream) = self.namespaced(b);
        ((a, b), futures::stream::select(a_stream, b_stream).boxed())
    }

    /// A watch of a cluster-scoped input.
    fn cluster<K>(&self, input: &Input<K>) -> (Store<K>, Touched<K>)
    where
        K: Watchable + Resource<Scope = k8s_openapi::ClusterResourceScope>,
    {
        reflected(input.cluster_api(self.client), input, self.health)
    }
}

/// Watches straight into a compact index (no object store): an object is held as the few
/// hundred bytes the checks read of it. Yields what each change affects; changes that affect
/// nothing the checks read yield nothing.
fn indexed<I>(
    api: Api<I::Object>,
    input: &Input<I::Object>,
    health: &WatchHealth,
) -> (
    SharedIndex<I>,
    BoxStream<'static, Result<I::Touched, watcher::Error>>,
)
where
    I: WatchIndex,
    I::Object:
        Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let shared = SharedIndex::<I>::default();
    let index = shared.clone();
    let health = health.clone();
    let name = input.watch;
    let config = input.watch_config().page_size(LIST_PAGE_SIZE);
    let stream = watcher(api, config)
        .default_backoff()
        .filter_map(move |event| {
            let touched = match event {
                Ok(watcher::Event::Init) => {
                    index.relist_started();
                    health.succeeded(name, false);
                    None
                }
                Ok(watcher::Event::InitApply(object)) => {
                    index.relist_apply(&object);
                    health.succeeded(name, false);
                    None
                }
                Ok(watcher::Event::InitDone) => {
                    let touched = index.relist_done();
                    health.succeeded(name, true);
                    Some(Ok(touched))
                }
                Ok(watcher::Event::Apply(object)) => {
                    health.succeeded(name, false);
                    index.apply(&object).map(Ok)
                }
                Ok(watcher::Event::Delete(object)) => {
                    health.succeeded(name, false);
                    index.delete(&object).map(Ok)
                }
                Err(error) => {
                    tracing::warn!(watch = name, %error, "watch failed; retrying with backoff");
                    health.failed(
                        name,
                        cause_of_watch_error(&error),
                        error.to_string(),
                        Instant::now(),
                    );
                    Some(Err(error))
                }
            };
            futures::future::ready(touched)
        })
        .boxed();
    (shared, stream)
}

/// What is read in the background rather than watched, each only where a verdict needs it.
#[derive(Clone, Debug, Default)]
struct BackgroundReads {
    /// What the drains of NodeClaims stuck terminating wait for ([`KubeFacts::refresh_drains`]).
    drains: crate::drain::DrainReads,
    /// The newest Pods of the DaemonSets a verdict hangs on
    /// ([`KubeFacts::refresh_daemonset_pods`]).
    daemonset_pods: crate::daemonset_pods::DaemonSetPodReads,
}

/// The caches of everything the checks read besides the EC2NodeClass itself.
#[derive(Clone)]
pub struct KubeFacts {
    node_pools: Store<DeserializeGuard<NodePool>>,
    node_claims: SharedClaims,
    pending_pods: SharedPendingPods,
    disruption_events: SharedDisruptionEvents,
    /// What is read in the background rather than watched.
    reads: BackgroundReads,
    aws_auth: Store<ConfigMap>,
    cilium_config: Store<ConfigMap>,
    karpenter_deployment: Store<Deployment>,
    load_balancer_controller: Store<Deployment>,
    karpenter_service_account: Store<ServiceAccount>,
    aws_node_service_account: Store<ServiceAccount>,
    node_pool_crd: Store<CustomResourceDefinition>,
    node_claim_crd: Store<CustomResourceDefinition>,
    node_class_crd: Store<CustomResourceDefinition>,
    validating_webhooks: Store<ValidatingWebhookConfiguration>,
    mutating_webhooks: Store<MutatingWebhookConfiguration>,
    endpoints: Store<Endpoints>,
    karpenter_namespace: String,
    /// The API server's `/version`, read by [`KubeFacts::refresh_apiserver_version`].
    apiserver_version: std::sync::Arc<std::sync::RwLock<Observed<String>>>,
    daemonsets: Store<DaemonSet>,
    health: WatchHealth,
    /// The cluster-wide facts, derived once per change of their inputs for every class.
    wide: Arc<WideMemo>,
    /// What is watched, by the names its health is kept under.
    inputs: Inputs,
}

impl std::fmt::Debug for KubeFacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeFacts")
            .field("health", &self.health)
            .finish_non_exhaustive()
    }
}

impl KubeFacts {
    /// Sets up a watch of every input ([`Inputs`]). Nothing is listed until the returned triggers
    /// are polled.
    pub fn new(client: &Client, targets: &WatchTargets) -> (Self, Triggers) {
        let inputs = Inputs::of(targets);
        let health = WatchHealth::default();
        let c = client;
        let i = &inputs;
        let (node_pools, node_pool_stream) =
            reflected(i.node_pools.cluster_api(c), &i.node_pools, &health);
        let (node_claims, node_claim_stream) =
            indexed::<NodeClaimIndex>(i.node_claims.cluster_api(c), &i.node_claims, &health);
        let (pending_pods, pod_stream) =
            indexed::<PendingPodIndex>(i.pending_pods.api(c), &i.pending_pods, &health);
        let (disruption_events, disruption_stream) = indexed::<DisruptionEventIndex>(
            i.disruption_events.api(c),
            &i.disruption_events,
            &health,
        );
        let w = Watching {
            client,
            health: &health,
        };
        let ((aws_auth, cilium_config), config_map_stream) =
            w.namespaced_pair(&i.aws_auth, &i.cilium_config);
        let ((karpenter_deployment, load_balancer_controller), deployment_stream) =
            w.namespaced_pair(&i.karpenter_deployment, &i.load_balancer_controller);
        let ((karpenter_service_account, aws_node_service_account), service_account_stream) =
            w.namespaced_pair(&i.karpenter_service_account, &i.aws_node_service_account);
        let (node_pool_crd, node_pool_crd_stream) = w.cluster(&i.node_pool_crd);
        let (node_claim_crd, node_claim_crd_stream) = w.cluster(&i.node_claim_crd);
        let (node_class_crd, node_class_crd_stream) = w.cluster(&i.node_class_crd);
        let (validating_webhooks, validating_stream) = w.cluster(&i.validating_webhooks);
        let (mutating_webhooks, mutating_stream) = w.cluster(&i.mutating_webhooks);
        let (endpoints, endpoints_stream) = w.namespaced(&i.endpoints);
        let (daemonsets, daemonsets_stream) = w.namespaced(&i.daemonsets);
        let facts = Self {
            node_pools,
            node_claims,
            pending_pods,
            disruption_events,
            reads: BackgroundReads::default(),
            aws_auth,
            cilium_config,
            karpenter_deployment,
            load_balancer_controller,
            karpenter_service_account,
            aws_node_service_account,
            node_pool_crd,
            node_claim_crd,
            node_class_crd,
            validating_webhooks,
            mutating_webhooks,
            endpoints,
            karpenter_namespace: targets.karpenter_namespace.clone(),
            apiserver_version: std::sync::Arc::new(std::sync::RwLock::new(Observed::not_observed(
                "the API server's /version has not been read yet",
            ))),
            daemonsets,
            health,
            wide: Arc::default(),
            inputs,
        };
        let triggers = Triggers {
            node_pools: node_pool_stream,
            node_claims: node_claim_stream,
            pending_pods: pod_stream,
            disruption_events: disruption_stream,
            config_maps: config_map_stream,
            deployments: deployment_stream,
            service_accounts: service_account_stream,
            node_pool_crd: futures::stream::select_all([
                node_pool_crd_stream,
                node_claim_crd_stream,
                node_class_crd_stream,
            ])
            .boxed(),
            validating_webhooks: validating_stream,
            mutating_webhooks: mutating_stream,
            endpoints: endpoints_stream,
            daemonsets: daemonsets_stream,
            inputs_changed: facts.health.changes(),
        };
        (facts, triggers)
    }

    /// Whether every cache has completed its first list.
    pub fn is_ready(&self) -> bool {
        self.health.all_synced(&self.inputs.watch_names())
    }

    /// The cluster facts of one EC2NodeClass from the caches as they are now.
    pub fn snapshot(&self, node_class: &EC2NodeClass, overrides: &Overrides) -> ClusterFacts {
        let single = |store: &Store<ServiceAccount>| store.state().into_iter().next();
        let sources = Sources {
            node_pools: self
                .health
                .observe(self.inputs.node_pools.watch, || self.node_pools.state()),
            node_claims: self
                .health
                .observe(self.inputs.node_claims.watch, || self.node_claims.clone()),
            pending_pods: self
                .health
                .observe(self.inputs.pending_pods.watch, || self.pending_pods.clone()),
            disruption_events: self
                .health
                .observe(self.inputs.disruption_events.watch, || {
                    self.disruption_events.clone()
                }),
            drains: self.reads.drains.clone(),
            daemonset_pods: self.reads.daemonset_pods.clone(),
            aws_auth: self.health.observe(self.inputs.aws_auth.watch, || {
                self.aws_auth.state().into_iter().next()
            }),
            cilium_config: self.health.observe(self.inputs.cilium_config.watch, || {
                self.cilium_config.state().into_iter().next()
            }),
            karpenter_deployment: self
                .health
                .observe(self.inputs.karpenter_deployment.watch, || {
                    self.karpenter_deployment.state().into_iter().next()
                }),
            load_balancer_controller: self
                .health
                .observe(self.inputs.load_balancer_controller.watch, || {
                    self.load_balancer_controller.state().into_iter().next()
                }),
            karpenter_service_account: self
                .health
                .observe(self.inputs.karpenter_service_account.watch, || {
                    single(&self.karpenter_service_account)
                }),
            aws_node_service_account: self
                .health
                .observe(self.inputs.aws_node_service_account.watch, || {
                    single(&self.aws_node_service_account)
                }),
            node_pool_crd: self.health.observe(self.inputs.node_pool_crd.watch, || {
                self.node_pool_crd.state().into_iter().next()
            }),
            karpenter_crds: self.karpenter_crds(),
            webhooks: self.webhooks(),
            endpoints: self
                .health
                .observe(self.inputs.endpoints.watch, || self.endpoints.state()),
            karpenter_namespace: self.karpenter_namespace.clone(),
            apiserver_version: self
                .apiserver_version
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
            daemonsets: self
                .health
                .observe(self.inputs.daemonsets.watch, || self.daemonsets.state()),
        };
        let wide = self.wide.get(&sources, overrides);
        class_facts(node_class, &sources, overrides, &wide)
    }

    /// How many times the cluster-wide facts were derived (once per change of their inputs).
    pub fn wide_derivations(&self) -> u64 {
        self.wide.derivations()
    }

    /// Karpenter's installed CRDs: unknown while any of their watches is.
    fn karpenter_crds(&self) -> Observed<Vec<Arc<CustomResourceDefinition>>> {
        let mut all = Vec::new();
        for (name, store) in [
            (self.inputs.node_pool_crd.watch, &self.node_pool_crd),
            (self.inputs.node_claim_crd.watch, &self.node_claim_crd),
            (self.inputs.node_class_crd.watch, &self.node_class_crd),
        ] {
            match self.health.observe(name, || store.state()) {
                Observed::Found(crds) => all.extend(crds),
                Observed::Absent => {}
                Observed::Unknown(u) => return Observed::Unknown(u),
            }
        }
        Observed::Found(all)
    }

    /// Every webhook of both kinds of configuration: unknown while either watch is.
    fn webhooks(&self) -> Observed<Vec<crate::snapshot::Webhook>> {
        let validating = self
            .health
            .observe(self.inputs.validating_webhooks.watch, || {
                self.validating_webhooks.state()
            });
        let mutating = self
            .health
            .observe(self.inputs.mutating_webhooks.watch, || {
                self.mutating_webhooks.state()
            });
        crate::snapshot::webhooks_of_configurations(validating, mutating)
    }

    /// Reads the API server's `/version` (a non-resource URL every authenticated user may get,
    /// through `system:public-info-viewer`): the Kubernetes version where EKS cannot be read.
    pub async fn refresh_apiserver_version(&self, client: &Client) {
        let observed = match client.apiserver_version().await {
            Ok(info) => Observed::Found(info.git_version),
            Err(error) => {
                Observed::unknown(cause_of_api_error(&error), format!("GET /version: {error}"))
            }
        };
        *self
            .apiserver_version
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = observed;
    }

    /// Reads anew what the drains of NodeClaims terminating since `before` or earlier wait for
    /// and returns the NodeClaims whose drain changed, whose classes are to be re-evaluated;
    /// `None` (and nothing read) while the NodeClaims have not been listed.
    pub async fn refresh_drains(
        &self,
        client: &Client,
        before: jiff::Timestamp,
    ) -> Option<Vec<String>> {
        if !self.health.all_synced(&[self.inputs.node_claims.watch]) {
            return None;
        }
        Some(
            self.reads
                .drains
                .refresh(client, &self.node_claims, before)
                .await,
        )
    }

    /// Whether a DaemonSet's newest Pod is held read.
    pub fn daemonset_pods_held(&self) -> bool {
        self.reads.daemonset_pods.holds_any()
    }

    /// Reads anew the newest Pod of each DaemonSet of `wanted` (`namespace/name`) and returns the
    /// DaemonSets whose answer changed, whose verdicts are to be re-evaluated; `None` (and
    /// nothing read) while the DaemonSets have not been listed.
    pub async fn refresh_daemonset_pods(
        &self,
        client: &Client,
        wanted: &[String],
    ) -> Option<Vec<String>> {
        if !self.health.all_synced(&[self.inputs.daemonsets.watch]) {
            return None;
        }
        let daemonsets = self.daemonsets.state();
        Some(
            self.reads
                .daemonset_pods
                .refresh(client, &daemonsets, wanted)
                .await,
        )
    }

    /// Names of every NodePool in the cache that refers to some EC2NodeClass, with that class.
    /// The EC2NodeClass the NodeClaim `name` launched from, when it is indexed.
    pub fn node_class_of_claim(&self, name: &str) -> Option<String> {
        self.node_claims.read(|index| index.class_of(name))
    }

    pub fn node_class_of_pool(&self, pool: &str) -> Option<String> {
        self.node_pools
            .state()
            .iter()
            .filter_map(|g| g.0.as_ref().ok())
            .find(|p| p.meta().name.as_deref() == Some(pool))
            .and_then(|p| {
                p.spec
                    .template
                    .spec
                    .node_class_ref
                    .as_ref()
                    .map(|r| r.name.clone())
            })
    }
}

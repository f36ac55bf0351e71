//! The watches behind the cluster facts: one reflector cache per kind, trimmed, each also a
//! stream of touched objects that the controller maps onto the EC2NodeClasses to re-check.
//! Does IO (list/watch against the API server).

use crate::changes::changed_objects;
use crate::disruption_events::{DisruptionEventIndex, EventsTouched, SharedDisruptionEvents};
use crate::index::{SharedIndex, WatchIndex};
use crate::node_claims::{ClaimsTouched, NodeClaimIndex, SharedClaims};
use crate::pending_pods::{PendingPodIndex, PodPins, SharedPendingPods};
use crate::snapshot::{Overrides, Sources, WideMemo, class_facts};
use crate::trim;
pub use crate::watch_health::WATCH_STALE_AFTER;
use crate::watch_health::WatchHealth;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_health_api::karpenter::{EC2NodeClass, NodePool};
use karpenter_health_checks::facts::{ClusterFacts, Observed, UnknownCause};
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Instant;

/// Where the Karpenter controller lives; defaults follow Karpenter's Helm chart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchTargets {
    pub karpenter_namespace: String,
    pub karpenter_deployment: String,
    pub karpenter_service_account: String,
}

impl Default for WatchTargets {
    fn default() -> Self {
        Self {
            karpenter_namespace: "kube-system".into(),
            karpenter_deployment: "karpenter".into(),
            karpenter_service_account: "karpenter".into(),
        }
    }
}

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
    pub aws_auth: Touched<ConfigMap>,
    pub karpenter_deployment: Touched<Deployment>,
    pub service_accounts: Touched<ServiceAccount>,
    /// Karpenter's CRDs (the NodePool's label rules; every one's stored versions, schema fields
    /// and conversion webhook).
    pub node_pool_crd: Touched<CustomResourceDefinition>,
    /// Webhook configurations and the Endpoints in Karpenter's namespace.
    pub validating_webhooks: Touched<ValidatingWebhookConfiguration>,
    pub mutating_webhooks: Touched<MutatingWebhookConfiguration>,
    pub endpoints: Touched<Endpoints>,
    /// The VPC CNI's `kube-system/aws-node` DaemonSet (its warm targets).
    pub aws_node_daemonset: Touched<DaemonSet>,
    /// Fires when a watched input became observable (first list done, even an empty one) or
    /// stopped or resumed being so; every class reads some of them, so all are re-evaluated.
    pub inputs_changed: BoxStream<'static, ()>,
}

impl std::fmt::Debug for Triggers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Triggers").finish_non_exhaustive()
    }
}

/// Classifies a watch failure by the API error inside it.
fn cause_of(error: &watcher::Error) -> UnknownCause {
    match error {
        watcher::Error::InitialListFailed(error)
        | watcher::Error::WatchStartFailed(error)
        | watcher::Error::WatchFailed(error) => cause_of_api_error(error),
        watcher::Error::WatchError(status) => cause_of_status_code(status.code),
        _ => UnknownCause::Unavailable,
    }
}

/// Classifies a failed API call: 403 is a permission problem, 404 a kind the server lacks.
pub(crate) fn cause_of_api_error(error: &kube::Error) -> UnknownCause {
    match error {
        kube::Error::Api(status) => cause_of_status_code(status.code),
        _ => UnknownCause::Unavailable,
    }
}

fn cause_of_status_code(code: u16) -> UnknownCause {
    match code {
        403 | 401 => UnknownCause::AccessDenied,
        404 => UnknownCause::Unsupported,
        429 => UnknownCause::Throttled,
        _ => UnknownCause::Unavailable,
    }
}

/// Objects per list page of the indexed watches (kube-runtime's default is 500): a page is
/// decoded whole before its objects are indexed, so smaller pages leave less freed memory behind.
const LIST_PAGE_SIZE: u32 = 100;

const NODE_POOLS: &str = "nodepools";
const NODE_CLAIMS: &str = "nodeclaims";
const PENDING_PODS: &str = "pending pods";
const DISRUPTION_EVENTS: &str = "DisruptionBlocked events";
const AWS_AUTH: &str = "kube-system/aws-auth";
const KARPENTER_DEPLOYMENT: &str = "karpenter deployment";
const KARPENTER_SA: &str = "karpenter serviceaccount";
const AWS_NODE_SA: &str = "kube-system/aws-node serviceaccount";
const NODE_POOL_CRD: &str = "nodepools.karpenter.sh CRD";
const NODE_CLAIM_CRD: &str = "nodeclaims.karpenter.sh CRD";
const NODE_CLASS_CRD: &str = "ec2nodeclasses.karpenter.k8s.aws CRD";
const VALIDATING_WEBHOOKS: &str = "validatingwebhookconfigurations";
const MUTATING_WEBHOOKS: &str = "mutatingwebhookconfigurations";
const KARPENTER_ENDPOINTS: &str = "endpoints in karpenter's namespace";
const AWS_NODE_DAEMONSET: &str = "kube-system/aws-node daemonset";
const ALL_WATCHES: &[&str] = &[
    NODE_POOLS,
    NODE_CLAIMS,
    PENDING_PODS,
    DISRUPTION_EVENTS,
    AWS_AUTH,
    KARPENTER_DEPLOYMENT,
    KARPENTER_SA,
    AWS_NODE_SA,
    NODE_POOL_CRD,
    NODE_CLAIM_CRD,
    NODE_CLASS_CRD,
    VALIDATING_WEBHOOKS,
    MUTATING_WEBHOOKS,
    KARPENTER_ENDPOINTS,
    AWS_NODE_DAEMONSET,
];

/// Starts a trimmed, reflected watch and returns its cache and the stream of objects whose
/// trimmed content changed (see [`changed_objects`]).
fn reflected<K>(
    api: Api<K>,
    config: watcher::Config,
    name: &'static str,
    health: &WatchHealth,
    trim: fn(&mut K),
) -> (Store<K>, Touched<K>)
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let health = health.clone();
    let events = watcher(api, config)
        .default_backoff()
        .modify(trim)
        .reflect(writer)
        .inspect(move |event| match event {
            Ok(watcher::Event::InitDone) => health.succeeded(name, true),
            Ok(_) => health.succeeded(name, false),
            Err(error) => {
                tracing::warn!(watch = name, %error, "watch failed; retrying with backoff");
                health.failed(name, cause_of(error), error.to_string(), Instant::now());
            }
        });
    (reader, changed_objects(events).boxed())
}

/// Guarded objects are trimmed only when they deserialized; a malformed one is kept as the error
/// the snapshot skips, and logged once per change.
pub(crate) fn trim_guarded<K: Resource>(guarded: &mut DeserializeGuard<K>) {
    trim_guarded_with(guarded, trim::metadata);
}

/// Logs a malformed object (kept as the error the snapshot skips) once per change.
fn trim_guarded_with<K: Resource>(guarded: &mut DeserializeGuard<K>, trim: fn(&mut K)) {
    match &mut guarded.0 {
        Ok(object) => trim(object),
        Err(invalid) => tracing::warn!(
            name = invalid.metadata.name.as_deref().unwrap_or("<unnamed>"),
            error = %invalid.error,
            "skipping malformed object"
        ),
    }
}

/// Watches straight into a compact index (no object store): an object is held as the few
/// hundred bytes the checks read of it. Yields what each change affects; changes that affect
/// nothing the checks read yield nothing.
fn indexed<I>(
    api: Api<I::Object>,
    config: watcher::Config,
    name: &'static str,
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
                    health.failed(name, cause_of(&error), error.to_string(), Instant::now());
                    Some(Err(error))
                }
            };
            futures::future::ready(touched)
        })
        .boxed();
    (shared, stream)
}

/// The caches of everything the checks read besides the EC2NodeClass itself.
#[derive(Clone)]
pub struct KubeFacts {
    node_pools: Store<DeserializeGuard<NodePool>>,
    node_claims: SharedClaims,
    pending_pods: SharedPendingPods,
    disruption_events: SharedDisruptionEvents,
    /// What the drains of NodeClaims stuck terminating wait for ([`KubeFacts::refresh_drains`]).
    drains: crate::drain::DrainReads,
    aws_auth: Store<ConfigMap>,
    karpenter_deployment: Store<Deployment>,
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
    aws_node_daemonset: Store<DaemonSet>,
    health: WatchHealth,
    /// The cluster-wide facts, derived once per change of their inputs for every class.
    wide: Arc<WideMemo>,
}

impl std::fmt::Debug for KubeFacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeFacts")
            .field("health", &self.health)
            .finish_non_exhaustive()
    }
}

pub(crate) fn by_name(name: &str) -> watcher::Config {
    watcher::Config::default().fields(&format!("metadata.name={name}"))
}

impl KubeFacts {
    /// Sets up every watch. Nothing is listed until the returned triggers are polled.
    pub fn new(client: &Client, targets: &WatchTargets) -> (Self, Triggers) {
        let health = WatchHealth::default();
        let (node_pools, node_pool_stream) = reflected(
            Api::all(client.clone()),
            watcher::Config::default(),
            NODE_POOLS,
            &health,
            trim_guarded,
        );
        let (node_claims, node_claim_stream) = indexed::<NodeClaimIndex>(
            Api::all(client.clone()),
            watcher::Config::default().page_size(LIST_PAGE_SIZE),
            NODE_CLAIMS,
            &health,
        );
        // Karpenter only provisions for Pods the scheduler could not place: Pending, no node.
        let (pending_pods, pod_stream) = indexed::<PendingPodIndex>(
            Api::all(client.clone()),
            watcher::Config::default()
                .fields("status.phase=Pending,spec.nodeName=")
                .page_size(LIST_PAGE_SIZE),
            PENDING_PODS,
            &health,
        );
        // What keeps NodeClaims from being disrupted, as Karpenter says: few, small Events.
        let (disruption_events, disruption_stream) = indexed::<DisruptionEventIndex>(
            Api::all(client.clone()),
            watcher::Config::default()
                .fields(crate::disruption_events::FIELD_SELECTOR)
                .page_size(LIST_PAGE_SIZE),
            DISRUPTION_EVENTS,
            &health,
        );
        let (aws_auth, aws_auth_stream) = reflected(
            Api::namespaced(client.clone(), "kube-system"),
            by_name("aws-auth"),
            AWS_AUTH,
            &health,
            trim::metadata,
        );
        let (karpenter_deployment, deployment_stream) = reflected(
            Api::namespaced(client.clone(), &targets.karpenter_namespace),
            by_name(&targets.karpenter_deployment),
            KARPENTER_DEPLOYMENT,
            &health,
            trim::deployment,
        );
        let (karpenter_service_account, karpenter_sa_stream) = reflected(
            Api::namespaced(client.clone(), &targets.karpenter_namespace),
            by_name(&targets.karpenter_service_account),
            KARPENTER_SA,
            &health,
            trim::metadata_keep_annotations,
        );
        let (aws_node_service_account, aws_node_sa_stream) = reflected(
            Api::namespaced(client.clone(), "kube-system"),
            by_name("aws-node"),
            AWS_NODE_SA,
            &health,
            trim::metadata_keep_annotations,
        );
        // The NodePool CRD's validation rules decide which label keys Karpenter rejects.
        let (node_pool_crd, node_pool_crd_stream) = reflected(
            Api::all(client.clone()),
            by_name("nodepools.karpenter.sh"),
            NODE_POOL_CRD,
            &health,
            trim::node_pool_crd,
        );
        // The other Karpenter CRDs: stored versions, schema fields, conversion webhook.
        let (node_claim_crd, node_claim_crd_stream) = reflected(
            Api::all(client.clone()),
            by_name("nodeclaims.karpenter.sh"),
            NODE_CLAIM_CRD,
            &health,
            trim::node_pool_crd,
        );
        let (node_class_crd, node_class_crd_stream) = reflected(
            Api::all(client.clone()),
            by_name("ec2nodeclasses.karpenter.k8s.aws"),
            NODE_CLASS_CRD,
            &health,
            trim::node_pool_crd,
        );
        // Webhook configurations are few and small once trimmed to their Services.
        let (validating_webhooks, validating_stream) = reflected(
            Api::all(client.clone()),
            watcher::Config::default(),
            VALIDATING_WEBHOOKS,
            &health,
            trim::validating_webhooks,
        );
        let (mutating_webhooks, mutating_stream) = reflected(
            Api::all(client.clone()),
            watcher::Config::default(),
            MUTATING_WEBHOOKS,
            &health,
            trim::mutating_webhooks,
        );
        // Karpenter's webhooks (and conversion) call a Service in its own namespace.
        let (endpoints, endpoints_stream) = reflected(
            Api::namespaced(client.clone(), &targets.karpenter_namespace),
            watcher::Config::default(),
            KARPENTER_ENDPOINTS,
            &health,
            trim::endpoints,
        );
        let (aws_node_daemonset, aws_node_daemonset_stream) = reflected(
            Api::namespaced(client.clone(), "kube-system"),
            by_name("aws-node"),
            AWS_NODE_DAEMONSET,
            &health,
            trim::daemonset,
        );
        let facts = Self {
            node_pools,
            node_claims,
            pending_pods,
            disruption_events,
            drains: crate::drain::DrainReads::default(),
            aws_auth,
            karpenter_deployment,
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
            aws_node_daemonset,
            health,
            wide: Arc::default(),
        };
        let triggers = Triggers {
            node_pools: node_pool_stream,
            node_claims: node_claim_stream,
            pending_pods: pod_stream,
            disruption_events: disruption_stream,
            aws_auth: aws_auth_stream,
            karpenter_deployment: deployment_stream,
            service_accounts: futures::stream::select(karpenter_sa_stream, aws_node_sa_stream)
                .map_err(|e| e)
                .boxed(),
            node_pool_crd: futures::stream::select_all([
                node_pool_crd_stream,
                node_claim_crd_stream,
                node_class_crd_stream,
            ])
            .boxed(),
            validating_webhooks: validating_stream,
            mutating_webhooks: mutating_stream,
            endpoints: endpoints_stream,
            aws_node_daemonset: aws_node_daemonset_stream,
            inputs_changed: facts.health.changes(),
        };
        (facts, triggers)
    }

    /// Whether every cache has completed its first list.
    pub fn is_ready(&self) -> bool {
        self.health.all_synced(ALL_WATCHES)
    }

    /// The cluster facts of one EC2NodeClass from the caches as they are now.
    pub fn snapshot(&self, node_class: &EC2NodeClass, overrides: &Overrides) -> ClusterFacts {
        let single = |store: &Store<ServiceAccount>| store.state().into_iter().next();
        let sources = Sources {
            node_pools: self.health.observe(NODE_POOLS, || self.node_pools.state()),
            node_claims: self
                .health
                .observe(NODE_CLAIMS, || self.node_claims.clone()),
            pending_pods: self
                .health
                .observe(PENDING_PODS, || self.pending_pods.clone()),
            disruption_events: self
                .health
                .observe(DISRUPTION_EVENTS, || self.disruption_events.clone()),
            drains: self.drains.clone(),
            aws_auth: self
                .health
                .observe(AWS_AUTH, || self.aws_auth.state().into_iter().next()),
            karpenter_deployment: self.health.observe(KARPENTER_DEPLOYMENT, || {
                self.karpenter_deployment.state().into_iter().next()
            }),
            karpenter_service_account: self
                .health
                .observe(KARPENTER_SA, || single(&self.karpenter_service_account)),
            aws_node_service_account: self
                .health
                .observe(AWS_NODE_SA, || single(&self.aws_node_service_account)),
            node_pool_crd: self.health.observe(NODE_POOL_CRD, || {
                self.node_pool_crd.state().into_iter().next()
            }),
            karpenter_crds: self.karpenter_crds(),
            webhooks: self.webhooks(),
            endpoints: self
                .health
                .observe(KARPENTER_ENDPOINTS, || self.endpoints.state()),
            karpenter_namespace: self.karpenter_namespace.clone(),
            apiserver_version: self
                .apiserver_version
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
            aws_node_daemonset: self.health.observe(AWS_NODE_DAEMONSET, || {
                self.aws_node_daemonset.state().into_iter().next()
            }),
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
            (NODE_POOL_CRD, &self.node_pool_crd),
            (NODE_CLAIM_CRD, &self.node_claim_crd),
            (NODE_CLASS_CRD, &self.node_class_crd),
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
            .observe(VALIDATING_WEBHOOKS, || self.validating_webhooks.state());
        let mutating = self
            .health
            .observe(MUTATING_WEBHOOKS, || self.mutating_webhooks.state());
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
        if !self.health.all_synced(&[NODE_CLAIMS]) {
            return None;
        }
        Some(self.drains.refresh(client, &self.node_claims, before).await)
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

//! Every cluster input the checks read, declared once: its kind, where it lives, which objects
//! are selected and how they are trimmed. The operator watches these ([`crate::watches`]) and
//! `karpenter-health check` lists them once ([`crate::listed`]); both build the same
//! [`crate::snapshot::Sources`] from them. Pure data, no IO.
//!
//! A new watched kind is one field here (and its `Sources` field); each reader then has one
//! line that turns the declaration into its cache or its list.

use crate::lean_node_claim::LeanNodeClaim;
use crate::trim;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Event, Pod, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_health_api::karpenter::NodePool;
use kube::api::ListParams;
use kube::core::DeserializeGuard;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};

/// Where the Karpenter controller lives; defaults follow Karpenter's Helm chart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchTargets {
    pub karpenter_namespace: String,
    pub karpenter_deployment: String,
    pub karpenter_service_account: String,
    /// Namespaces whose pending Pods are never read (tenants the platform does not judge).
    pub excluded_pod_namespaces: Vec<String>,
}

impl Default for WatchTargets {
    fn default() -> Self {
        Self {
            karpenter_namespace: "kube-system".into(),
            karpenter_deployment: "karpenter".into(),
            karpenter_service_account: "karpenter".into(),
            excluded_pod_namespaces: Vec::new(),
        }
    }
}

/// Which objects of a kind an input reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// Every object in scope.
    All,
    /// The one object of this name (read as a list by field selector, so the same `list`
    /// permission serves the watch and the one-shot read).
    Named(String),
    /// The objects a field selector picks.
    Fields(String),
}

/// One input: a kind in a scope, a selection, a trim, and the two names it is known by.
#[derive(Clone, Debug)]
pub struct Input<K> {
    /// The watch's name: its health key and the subject of its Unknown messages.
    pub watch: &'static str,
    /// What a one-shot list reads, for its Unknown messages (`listing {listing}: …`).
    pub listing: String,
    /// `None`: cluster-wide.
    pub namespace: Option<String>,
    pub selection: Selection,
    pub trim: fn(&mut K),
}

impl<K: Resource<DynamicType = ()>> Input<K> {
    fn new(
        watch: &'static str,
        listing: impl Into<String>,
        namespace: Option<&str>,
        selection: Selection,
        trim: fn(&mut K),
    ) -> Self {
        Self {
            watch,
            listing: listing.into(),
            namespace: namespace.map(str::to_owned),
            selection,
            trim,
        }
    }

    /// The API a namespaced input is read through: its namespace, else every namespace.
    pub fn api(&self, client: &Client) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    {
        match &self.namespace {
            Some(namespace) => Api::namespaced(client.clone(), namespace),
            None => Api::all(client.clone()),
        }
    }

    /// The API a cluster-scoped input is read through.
    pub fn cluster_api(&self, client: &Client) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::ClusterResourceScope>,
    {
        Api::all(client.clone())
    }

    /// The field selector of the selection; `None` selects every object in scope.
    fn field_selector(&self) -> Option<String> {
        match &self.selection {
            Selection::All => None,
            Selection::Named(name) => Some(format!("metadata.name={name}")),
            Selection::Fields(fields) => Some(fields.clone()),
        }
    }

    /// The one-shot list's parameters.
    pub fn list_params(&self) -> ListParams {
        match self.field_selector() {
            Some(fields) => ListParams::default().fields(&fields),
            None => ListParams::default(),
        }
    }

    /// The watch's configuration.
    pub fn watch_config(&self) -> watcher::Config {
        match self.field_selector() {
            Some(fields) => watcher::Config::default().fields(&fields),
            None => watcher::Config::default(),
        }
    }
}

/// Guarded objects are trimmed only when they deserialized; a malformed one is kept as the error
/// the snapshot skips, and logged once per change.
pub(crate) fn trim_guarded<K: Resource>(guarded: &mut DeserializeGuard<K>) {
    match &mut guarded.0 {
        Ok(object) => trim::metadata(object),
        Err(invalid) => tracing::warn!(
            name = invalid.metadata.name.as_deref().unwrap_or("<unnamed>"),
            error = %invalid.error,
            "skipping malformed object"
        ),
    }
}

/// A NodePool without its metadata's bulk, but for the kubelet settings Karpenter v1.0 reads
/// from its annotation ([`trim::KUBELET_CONVERSION_ANNOTATION`]); a malformed one is logged.
fn trim_node_pool(guarded: &mut DeserializeGuard<NodePool>) {
    let kubelet = guarded.0.as_ref().ok().and_then(|pool| {
        pool.metadata
            .annotations
            .as_ref()?
            .get(trim::KUBELET_CONVERSION_ANNOTATION)
            .cloned()
    });
    trim_guarded(guarded);
    if let (Ok(pool), Some(kubelet)) = (&mut guarded.0, kubelet) {
        pool.metadata.annotations = Some(std::collections::BTreeMap::from([(
            trim::KUBELET_CONVERSION_ANNOTATION.to_owned(),
            kubelet,
        )]));
    }
}

/// A malformed NodeClaim is kept as the error the index skips, and logged.
fn warn_malformed_claim(claim: &mut LeanNodeClaim) {
    if let Err(invalid) = &claim.0 {
        tracing::warn!(
            name = invalid.metadata.name.as_deref().unwrap_or("<unnamed>"),
            error = %invalid.error,
            "skipping malformed NodeClaim"
        );
    }
}

/// Karpenter only provisions for Pods the scheduler could not place: Pending, no node.
pub const PENDING_POD_FIELDS: &str = "status.phase=Pending,spec.nodeName=";

/// The pending Pods' field selector, leaving out the `excluded` namespaces: the API server
/// filters them (every kind's field selectors take `metadata.namespace`), so their Pods cost
/// neither a watch event nor memory.
pub fn pending_pod_fields(excluded: &[String]) -> String {
    let mut fields = PENDING_POD_FIELDS.to_owned();
    for namespace in excluded {
        fields.push_str(",metadata.namespace!=");
        fields.push_str(namespace);
    }
    fields
}

/// Every input the checks read besides the EC2NodeClasses.
#[derive(Clone, Debug)]
pub struct Inputs {
    pub node_pools: Input<DeserializeGuard<NodePool>>,
    pub node_claims: Input<LeanNodeClaim>,
    pub pending_pods: Input<Pod>,
    /// What keeps NodeClaims from being disrupted, as Karpenter says: few, small Events.
    pub disruption_events: Input<Event>,
    pub aws_auth: Input<ConfigMap>,
    /// Cilium's settings, trimmed to whether its operator taints new nodes, and with which key.
    pub cilium_config: Input<ConfigMap>,
    pub karpenter_deployment: Input<Deployment>,
    /// The AWS Load Balancer Controller's Deployment, trimmed to where its Pods run and how it
    /// finds its VPC.
    pub load_balancer_controller: Input<Deployment>,
    pub karpenter_service_account: Input<ServiceAccount>,
    pub aws_node_service_account: Input<ServiceAccount>,
    /// The NodePool CRD's validation rules decide which label keys Karpenter rejects.
    pub node_pool_crd: Input<CustomResourceDefinition>,
    /// The other Karpenter CRDs: stored versions, schema fields, conversion webhook.
    pub node_claim_crd: Input<CustomResourceDefinition>,
    pub node_class_crd: Input<CustomResourceDefinition>,
    /// Webhook configurations are few and small once trimmed to their Services.
    pub validating_webhooks: Input<ValidatingWebhookConfiguration>,
    pub mutating_webhooks: Input<MutatingWebhookConfiguration>,
    /// Karpenter's webhooks (and conversion) call a Service in its own namespace.
    pub endpoints: Input<Endpoints>,
    /// The VPC CNI's DaemonSet, trimmed to its containers' env (its warm targets).
    pub daemonsets: Input<DaemonSet>,
}

impl Inputs {
    /// The inputs of a cluster whose Karpenter is where `targets` says.
    #[allow(clippy::too_many_lines)] // The declaration table: one input per entry.
    pub fn of(targets: &WatchTargets) -> Self {
        use Selection::{All, Fields, Named};
        let karpenter = Some(targets.karpenter_namespace.as_str());
        let kube_system = Some("kube-system");
        let named = |name: &str| Named(name.to_owned());
        Self {
            node_pools: Input::new("nodepools", "NodePools", None, All, trim_node_pool),
            node_claims: Input::new("nodeclaims", "NodeClaims", None, All, warn_malformed_claim),
            pending_pods: Input::new(
                "pending pods",
                "pending Pods",
                None,
                Fields(pending_pod_fields(&targets.excluded_pod_namespaces)),
                |_| {},
            ),
            disruption_events: Input::new(
                "DisruptionBlocked events",
                "DisruptionBlocked Events",
                None,
                Fields(crate::disruption_events::FIELD_SELECTOR.to_owned()),
                |_| {},
            ),
            aws_auth: Input::new(
                "kube-system/aws-auth",
                "ConfigMap kube-system/aws-auth",
                kube_system,
                named("aws-auth"),
                trim::metadata,
            ),
            cilium_config: Input::new(
                "kube-system/cilium-config",
                "ConfigMap kube-system/cilium-config",
                kube_system,
                named(crate::cilium::CONFIG_MAP),
                crate::cilium::trim,
            ),
            karpenter_deployment: Input::new(
                "karpenter deployment",
                "the Karpenter Deployment",
                karpenter,
                named(&targets.karpenter_deployment),
                trim::deployment,
            ),
            load_balancer_controller: Input::new(
                "kube-system/aws-load-balancer-controller deployment",
                "Deployment kube-system/aws-load-balancer-controller",
                Some(crate::load_balancer_controller::NAMESPACE),
                named(crate::load_balancer_controller::DEPLOYMENT),
                crate::load_balancer_controller::trim,
            ),
            karpenter_service_account: Input::new(
                "karpenter serviceaccount",
                "the Karpenter ServiceAccount",
                karpenter,
                named(&targets.karpenter_service_account),
                trim::metadata_keep_annotations,
            ),
            aws_node_service_account: Input::new(
                "kube-system/aws-node serviceaccount",
                "ServiceAccount kube-system/aws-node",
                kube_system,
                named("aws-node"),
                trim::metadata_keep_annotations,
            ),
            node_pool_crd: crd("nodepools.karpenter.sh CRD", "nodepools.karpenter.sh"),
            node_claim_crd: crd("nodeclaims.karpenter.sh CRD", "nodeclaims.karpenter.sh"),
            node_class_crd: crd(
                "ec2nodeclasses.karpenter.k8s.aws CRD",
                "ec2nodeclasses.karpenter.k8s.aws",
            ),
            validating_webhooks: Input::new(
                "validatingwebhookconfigurations",
                "ValidatingWebhookConfigurations",
                None,
                All,
                trim::validating_webhooks,
            ),
            mutating_webhooks: Input::new(
                "mutatingwebhookconfigurations",
                "MutatingWebhookConfigurations",
                None,
                All,
                trim::mutating_webhooks,
            ),
            endpoints: Input::new(
                "endpoints in karpenter's namespace",
                "Endpoints in Karpenter's namespace",
                karpenter,
                All,
                trim::endpoints,
            ),
            daemonsets: Input::new("daemonsets", "DaemonSets", None, All, trim::daemonset),
        }
    }

    /// The watch names of every input, for the readiness gate.
    pub fn watch_names(&self) -> [&'static str; 17] {
        [
            self.node_pools.watch,
            self.node_claims.watch,
            self.pending_pods.watch,
            self.disruption_events.watch,
            self.aws_auth.watch,
            self.cilium_config.watch,
            self.karpenter_deployment.watch,
            self.load_balancer_controller.watch,
            self.karpenter_service_account.watch,
            self.aws_node_service_account.watch,
            self.node_pool_crd.watch,
            self.node_claim_crd.watch,
            self.node_class_crd.watch,
            self.validating_webhooks.watch,
            self.mutating_webhooks.watch,
            self.endpoints.watch,
            self.daemonsets.watch,
        ]
    }
}

/// One of Karpenter's CRDs, trimmed to what the checks read of it.
fn crd(watch: &'static str, name: &str) -> Input<CustomResourceDefinition> {
    Input::new(
        watch,
        format!("CRD {name}"),
        None,
        Selection::Named(name.to_owned()),
        trim::node_pool_crd,
    )
}

//! The facts the checks read, gathered by the adapters (kube-facts, aws) and handed in as plain
//! data. No IO: every type here is built by value, so tests make them in a line.
//!
//! Every fact that comes from a call is tri-state ([`Observed`]): found, proven absent by a
//! successful call, or unknown with a cause. A check may only conclude `False` from `Found` or
//! `Absent`; `Unknown` always yields an `Unknown` condition naming the cause.

use jiff::Timestamp;
use karpenter_health_api::ConditionStatus;
use karpenter_health_api::karpenter::{
    EC2NodeClass, NodeClaim, NodePool, Requirement, find_condition, instance_id_of,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

/// A fact as observed through an API call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed<T> {
    /// The call succeeded and returned this.
    Found(T),
    /// A successful call proved it does not exist (`NoSuchEntity`, `InvalidGroup.NotFound`, 404 of
    /// a named object, an empty filtered result where absence is meaningful).
    Absent,
    /// The fact could not be observed.
    Unknown(Unobserved),
}

impl<T> Observed<T> {
    pub fn unknown(cause: UnknownCause, detail: impl Into<String>) -> Self {
        Observed::Unknown(Unobserved {
            cause,
            detail: detail.into(),
        })
    }

    pub fn not_observed(detail: impl Into<String>) -> Self {
        Self::unknown(UnknownCause::NotObserved, detail)
    }

    pub fn as_ref(&self) -> Observed<&T> {
        match self {
            Observed::Found(t) => Observed::Found(t),
            Observed::Absent => Observed::Absent,
            Observed::Unknown(u) => Observed::Unknown(u.clone()),
        }
    }

    pub fn found(&self) -> Option<&T> {
        match self {
            Observed::Found(t) => Some(t),
            _ => None,
        }
    }

    pub fn found_mut(&mut self) -> Option<&mut T> {
        match self {
            Observed::Found(t) => Some(t),
            _ => None,
        }
    }

    /// Why it was not observed, when it was not.
    pub fn unobserved(&self) -> Option<&Unobserved> {
        match self {
            Observed::Unknown(u) => Some(u),
            _ => None,
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Observed<U> {
        match self {
            Observed::Found(t) => Observed::Found(f(t)),
            Observed::Absent => Observed::Absent,
            Observed::Unknown(u) => Observed::Unknown(u),
        }
    }
}

/// Why a fact could not be observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unobserved {
    pub cause: UnknownCause,
    /// Human detail: the failing call and its error, for the condition message.
    pub detail: String,
}

/// The cause of an unknown fact; each maps onto one shared `Unknown` reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UnknownCause {
    /// `AccessDenied`, `UnauthorizedOperation`, Kubernetes 403.
    AccessDenied,
    /// `Throttling`, `RequestLimitExceeded`, HTTP 429.
    Throttled,
    /// Timeout, connection error, 5xx.
    Unavailable,
    /// The endpoint does not implement the call (e.g. an emulator without access entries).
    Unsupported,
    /// Not observed yet (watch not synced, call not made yet).
    NotObserved,
    /// It lives in another AWS account than the operator's credentials, which IAM does not let
    /// this account read (a controller role or Pod Identity target role of another account).
    OtherAccount,
}

impl fmt::Display for Unobserved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}

/// Everything known about one EC2NodeClass and its surroundings at one instant.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    pub cluster: ClusterFacts,
    pub aws: AwsFacts,
}

/// Facts read from the Kubernetes API.
#[derive(Clone, Debug)]
pub struct ClusterFacts {
    /// The EC2NodeClass under evaluation, with Karpenter's status.
    pub node_class: EC2NodeClass,
    /// NodePools whose nodeClassRef names this EC2NodeClass; unknown until the NodePool watch
    /// has listed them all, or while it keeps failing.
    pub node_pools: Observed<Vec<NodePool>>,
    /// NodeClaims whose nodeClassRef names this EC2NodeClass; unknown likewise.
    pub node_claims: Observed<Vec<NodeClaimFacts>>,
    /// EC2 instance ids of every NodeClaim in the cluster (any EC2NodeClass), from `providerID`;
    /// unknown likewise. An instance is only ever "unclaimed" against a complete list. Shared:
    /// built once per NodeClaim change, read by every EC2NodeClass's evaluation.
    pub claimed_instance_ids: Observed<Arc<BTreeSet<String>>>,
    /// Pending Pods whose scheduling constraints Karpenter would copy into NodeClaims of the
    /// NodePools above; unknown while either watch is. Shared with the other classes that could
    /// take the same Pod.
    pub pending_pods: Observed<Vec<Arc<PodScheduling>>>,
    /// The raw `kube-system/aws-auth` ConfigMap data; parsed by the checks.
    pub aws_auth: Observed<AwsAuthData>,
    /// The Karpenter controller as deployed (or overridden by flags).
    pub karpenter: Observed<KarpenterFacts>,
    /// The label rules of the installed NodePool CRD, which decide over the controller version.
    pub crd_label_rules: CrdLabelRules,
    /// `eks.amazonaws.com/role-arn` of `kube-system/aws-node`: `Found(None)` when the
    /// ServiceAccount has no annotation (the CNI then uses the node role).
    pub aws_node_role_arn: Observed<Option<String>>,
    /// The cluster name the operator was told (flag), which wins over Karpenter's settings.
    pub configured_cluster_name: Option<String>,
    /// When the adapter first saw the EC2NodeClass at its current `metadata.generation` (the
    /// watch event's arrival). `StatusStale` measures how long Karpenter's status has lagged
    /// from the earlier of this and the newest non-status `metadata.managedFields[].time`;
    /// `None` when the adapter does not track it.
    pub node_class_generation_seen_at: Option<Timestamp>,
    /// The API server's `/version` (`gitVersion`, e.g. `v1.31.2-eks-1234`): the Kubernetes
    /// version where EKS DescribeCluster cannot be read.
    pub apiserver_version: Observed<String>,
    /// The installed Karpenter CRDs (`*.karpenter.sh`, `*.karpenter.k8s.aws`), trimmed to what
    /// `KarpenterVersionCompatible` reads; unknown until the CRD watch has listed.
    pub karpenter_crds: Observed<Vec<CrdFacts>>,
    /// The webhooks of validating and mutating webhook configurations that are Karpenter's (their
    /// Service is in Karpenter's namespace or named `karpenter*`); unknown until listed.
    pub karpenter_webhooks: Observed<Vec<WebhookFacts>>,
    /// Ready endpoint addresses of the Services Karpenter's webhooks name, by `namespace/name`:
    /// `Absent` when the Service has no Endpoints object. Only the Services asked for.
    pub service_endpoints: BTreeMap<String, Observed<usize>>,
    /// The environment of the VPC CNI's `kube-system/aws-node` DaemonSet (its `aws-node`
    /// container): `Absent` when the cluster has no such DaemonSet (another CNI), unknown until
    /// its watch has listed it.
    pub vpc_cni: Observed<VpcCniSettings>,
    /// Every DaemonSet of the cluster, as Karpenter counts its Pods against a node's room:
    /// shared by every class (one cluster-wide list), unknown until its watch has listed them.
    pub daemonsets: Observed<Arc<Vec<DaemonSetFacts>>>,
    /// The key of the taint Cilium's operator puts on each new node its agent is scheduled on
    /// until the agent runs (`kube-system/cilium-config`: `set-cilium-node-taints`,
    /// `agent-not-ready-taint-key`); `Absent` when there is no such ConfigMap or it says no.
    pub cilium_node_taint: Observed<String>,
    /// The AWS Load Balancer Controller's Deployment as its chart installs it
    /// (`kube-system/aws-load-balancer-controller`): where its Pods can run and whether it must
    /// read its VPC id from instance metadata; `Absent` when there is no such Deployment.
    pub load_balancer_controller: Observed<LoadBalancerControllerFacts>,
    /// Karpenter's newest `DisruptionBlocked` Event of each NodeClaim of the class that has one
    /// (what keeps it from being disrupted); `Found` and empty when none has.
    pub disruption_blocked: Observed<BTreeMap<String, DisruptionBlocked>>,
    /// What the drain of each NodeClaim of the class terminating longer than
    /// [`Settings::terminating_long_after`] waits for, by NodeClaim; a NodeClaim missing here
    /// has not been read (yet).
    pub drains: BTreeMap<String, Observed<NodeDrain>>,
}

/// What `SubnetsReady` reads of the VPC CNI: the `aws-node` container's literal env values
/// (values from references are left out: they cannot be read here).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VpcCniSettings {
    pub env: BTreeMap<String, String>,
}

impl Default for ClusterFacts {
    fn default() -> Self {
        Self {
            node_class: EC2NodeClass::new("", Default::default()),
            node_pools: Observed::default(),
            node_claims: Observed::default(),
            claimed_instance_ids: Observed::default(),
            pending_pods: Observed::default(),
            aws_auth: Observed::default(),
            karpenter: Observed::default(),
            crd_label_rules: Observed::default(),
            aws_node_role_arn: Observed::default(),
            configured_cluster_name: None,
            node_class_generation_seen_at: None,
            apiserver_version: Observed::default(),
            karpenter_crds: Observed::default(),
            karpenter_webhooks: Observed::default(),
            service_endpoints: BTreeMap::new(),
            vpc_cni: Observed::default(),
            daemonsets: Observed::default(),
            cilium_node_taint: Observed::default(),
            load_balancer_controller: Observed::default(),
            disruption_blocked: Observed::default(),
            drains: BTreeMap::new(),
        }
    }
}

/// One installed Karpenter CRD, as far as `KarpenterVersionCompatible` reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrdFacts {
    /// `nodepools.karpenter.sh`, ...
    pub name: String,
    /// `status.storedVersions`.
    pub stored_versions: Vec<String>,
    /// The versions of `spec.versions` with `served: true`.
    pub served_versions: Vec<String>,
    /// The schema field paths of [`crate::karpenter_versions::CRD_FIELDS`] this CRD's `v1`
    /// schema has (only those: the rest of the schema is not kept).
    pub fields: BTreeSet<String>,
    /// `spec.conversion.webhook.clientConfig.service` as `namespace/name`, when the CRD converts
    /// through a webhook Service.
    pub conversion_service: Option<String>,
}

/// One webhook of a validating or mutating webhook configuration that calls a Service.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WebhookFacts {
    /// `ValidatingWebhookConfiguration` or `MutatingWebhookConfiguration`.
    pub kind: String,
    /// The configuration's name.
    pub configuration: String,
    /// The webhook's name inside it.
    pub webhook: String,
    /// `clientConfig.service` as `namespace/name`.
    pub service: String,
}

/// What the checks read of one NodeClaim: a few hundred bytes instead of the object, so that
/// tens of thousands of them can be held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeClaimFacts {
    pub name: String,
    pub created: Option<Timestamp>,
    /// `metadata.deletionTimestamp` is set: the NodeClaim is on its way out.
    pub deleting: bool,
    /// The EC2 instance id from `status.providerID`.
    pub instance_id: Option<String>,
    pub launched: Option<ClaimCondition>,
    pub registered: Option<ClaimCondition>,
    /// Karpenter's `Drifted` condition.
    pub drifted: Option<ClaimCondition>,
    /// Karpenter's `Initialized` condition.
    pub initialized: Option<ClaimCondition>,
    /// The NodePool that made it (label `karpenter.sh/nodepool`), shared: a cluster has a few
    /// NodePools and thousands of NodeClaims, and every reconcile copies its class's claims.
    pub node_pool: Option<Arc<str>>,
    /// What Karpenter's `Initialized` condition says it waits for (`StartupTaintsExist:
    /// StartupTaint "…" still exists`), kept only while the NodeClaim is registered and not
    /// initialized: the few that wait keep a message, the many others nothing.
    pub initialization_wait: Option<String>,
    /// `metadata.deletionTimestamp`.
    pub deleting_since: Option<Timestamp>,
    /// `status.nodeName`, kept only while the NodeClaim is being deleted (its drain's Pods are
    /// read for those alone).
    pub node_name: Option<String>,
    /// It has a `spec.terminationGracePeriod`, so its termination has a deadline; kept only
    /// while it is being deleted.
    pub has_termination_grace_period: bool,
    /// Its NodePool (label `karpenter.sh/nodepool`) and `spec.expireAfter`, kept only while it
    /// is drifted: whose disruption budgets hold it, and when it expires anyway.
    pub drift: Option<DriftFacts>,
}

/// What the drift check reads of a drifted NodeClaim beyond its conditions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DriftFacts {
    /// The NodePool that made it (`karpenter.sh/nodepool`).
    pub node_pool: Option<String>,
    /// `spec.expireAfter` as written (`720h`, `Never`).
    pub expire_after: Option<String>,
}

/// One of Karpenter's NodeClaim conditions, as far as the checks read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimCondition {
    pub status: ConditionStatus,
    pub last_transition: Option<Timestamp>,
}

impl NodeClaimFacts {
    /// The facts of `claim`: its name, age, instance id and `Launched`/`Registered` conditions.
    pub fn of(claim: &NodeClaim) -> Self {
        let status = claim.status.as_ref();
        let conditions = status.map(|s| s.conditions.as_slice()).unwrap_or_default();
        let condition = |type_: &str| {
            find_condition(conditions, type_).map(|c| ClaimCondition {
                status: ConditionStatus::parse(&c.status),
                last_transition: c.last_transition_time.as_ref().map(|t| t.0),
            })
        };
        let node_pool = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("karpenter.sh/nodepool"));
        Self {
            name: claim.metadata.name.clone().unwrap_or_default(),
            created: claim.metadata.creation_timestamp.as_ref().map(|t| t.0),
            deleting: claim.metadata.deletion_timestamp.is_some(),
            instance_id: status
                .and_then(|s| s.provider_id.as_deref())
                .and_then(instance_id_of)
                .map(str::to_owned),
            launched: condition("Launched"),
            registered: condition("Registered"),
            drifted: condition("Drifted"),
            initialized: condition("Initialized"),
            node_pool: node_pool.map(|p| Arc::from(p.as_str())),
            initialization_wait: initialization_wait(conditions),
            deleting_since: claim.metadata.deletion_timestamp.as_ref().map(|t| t.0),
            node_name: status
                .and_then(|s| s.node_name.clone())
                .filter(|_| claim.metadata.deletion_timestamp.is_some()),
            has_termination_grace_period: claim.metadata.deletion_timestamp.is_some()
                && claim.spec.termination_grace_period.is_some(),
            drift: find_condition(conditions, "Drifted")
                .filter(|c| c.status == "True")
                .map(|_| DriftFacts {
                    node_pool: node_pool.cloned(),
                    expire_after: claim.spec.expire_after.clone(),
                }),
        }
    }
}

/// What Karpenter's `Initialized` condition says a registered NodeClaim waits for, as
/// `reason: message`; `None` once it is initialized, or before it registered (Karpenter sets the
/// reasons in kubernetes-sigs/karpenter `pkg/controllers/nodeclaim/lifecycle/initialization.go`:
/// `NodeNotReady`, `StartupTaintsExist`, `KnownEphemeralTaintsExist`, `ResourceNotRegistered`,
/// ...).
fn initialization_wait(
    conditions: &[karpenter_health_api::karpenter::KarpenterCondition],
) -> Option<String> {
    let registered = find_condition(conditions, "Registered")?;
    let initialized = find_condition(conditions, "Initialized")?;
    if registered.status != "True" || initialized.status == "True" {
        return None;
    }
    let reason = initialized.reason.as_deref().filter(|r| !r.is_empty());
    let message = initialized.message.as_deref().filter(|m| !m.is_empty());
    Some(match (reason, message) {
        (Some(r), Some(m)) => format!("{}: {}", crate::clip(r, 64), crate::clip(m, 256)),
        (Some(one), None) | (None, Some(one)) => crate::clip(one, 256).into_owned(),
        (None, None) => "no reason given".to_owned(),
    })
}

/// `data` of `kube-system/aws-auth`, unparsed (parsing is a check: malformed input is a finding).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AwsAuthData {
    pub map_roles: Option<String>,
    pub map_users: Option<String>,
    /// What the authenticator makes of it, parsed at the first read and shared by every clone:
    /// the operator hands one value per ConfigMap version to every class, so an aws-auth edit is
    /// parsed once, not once per class (issue 23).
    pub parse_cache: ParsedOnce<crate::aws_auth::AwsAuth>,
}

impl AwsAuthData {
    /// `mapRoles` and `mapUsers` as given, not parsed yet.
    pub fn new(map_roles: Option<String>, map_users: Option<String>) -> Self {
        Self {
            map_roles,
            map_users,
            parse_cache: ParsedOnce::default(),
        }
    }

    /// What the authenticator would make of it ([`crate::aws_auth::parse`]), parsed once.
    pub fn parsed(&self) -> &crate::aws_auth::AwsAuth {
        self.parse_cache.0.get_or_init(|| {
            crate::aws_auth::parse(self.map_roles.as_deref(), self.map_users.as_deref())
        })
    }
}

/// A value derived from its owner at the first read and shared by the owner's clones. Derived
/// data: it takes no part in comparing owners.
#[derive(Clone, Default)]
pub struct ParsedOnce<T>(Arc<std::sync::OnceLock<T>>);

impl<T> PartialEq for ParsedOnce<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> Eq for ParsedOnce<T> {}

impl<T> fmt::Debug for ParsedOnce<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "ParsedOnce(parsed)"
        } else {
            "ParsedOnce(not yet)"
        })
    }
}

/// The Karpenter controller's identity and settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KarpenterFacts {
    /// Version from the image tag or a flag, e.g. `1.8.6` (a leading `v` is tolerated).
    pub version: Option<String>,
    /// `CLUSTER_NAME` / `settings.clusterName`.
    pub cluster_name: Option<String>,
    /// IAM role of the controller (`eks.amazonaws.com/role-arn` of its ServiceAccount).
    pub controller_role_arn: Option<String>,
    /// `ISOLATED_VPC` setting.
    pub isolated_vpc: bool,
    /// The controller's ServiceAccount as `namespace/name`, whose Pod Identity role is the
    /// controller role when it has no IRSA annotation.
    pub service_account: Option<String>,
    /// Whether the controller's ServiceAccount was read: `Found` when it exists (its IRSA
    /// annotation, if any, is `controller_role_arn`), `Absent` when it does not, unknown while
    /// its watch has not listed it.
    pub service_account_state: Observed<()>,
    /// `INTERRUPTION_QUEUE` / `--interruption-queue` (the chart's `settings.interruptionQueue`).
    pub interruption_queue: Setting,
    /// `DISABLE_DRY_RUN` / `--disable-dry-run`: Karpenter then sets `ValidationSucceeded=True`
    /// without its dry-run launch calls.
    pub dry_run_disabled: bool,
    /// `eks.amazonaws.com/audience` of the controller's ServiceAccount: the audience of its IRSA
    /// token (`sts.amazonaws.com` without it).
    pub irsa_audience: Option<String>,
    /// `FEATURE_GATES` / `--feature-gates` as written (`ReservedCapacity=true,...`).
    pub feature_gates: Setting,
    /// `MIN_VALUES_POLICY` / `--min-values-policy` as written (`Strict`, `BestEffort`).
    pub min_values_policy: Setting,
    /// `RESERVED_ENIS` / `--reserved-enis` as written: ENIs Karpenter leaves out of its Pod
    /// density (VPC CNI custom networking needs 1).
    pub reserved_enis: Setting,
}

/// One setting of the controller as its Deployment gives it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Setting {
    /// Not set (or empty).
    #[default]
    Unset,
    Value(String),
    /// Set from a reference the operator does not resolve (`valueFrom`), described.
    Unresolved(String),
}

/// One of Karpenter's `DisruptionBlocked` Events on a NodeClaim.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DisruptionBlocked {
    /// What blocks it, as Karpenter says (`Pdb prevents pod evictions (PodDisruptionBudget=[ns/name])`).
    pub message: String,
    /// When Karpenter last said so.
    pub last_seen: Option<Timestamp>,
}

/// The label rules the installed `nodepools.karpenter.sh` CRD enforces: `Found(Some)` from its
/// validation rules, `Found(None)` when the API server serves it without them (before 1.25),
/// `Absent` when no such CRD is installed.
pub type CrdLabelRules = Observed<Option<crate::labels::LabelRules>>;

mod aws;
mod drain;
mod launch;
mod workloads;

pub use aws::*;
pub use drain::*;
pub use launch::*;
pub use workloads::*;

//! What must be read from AWS for one EC2NodeClass ([`AwsRequest`]), derived from the class and
//! the cluster facts, and the names of what is read. Pure, no IO: the AWS adapter answers it.

use crate::facts::{ClusterFacts, Observed, Setting};
use crate::karpenter_permissions::ClassInputs;
use crate::plan::capacity::allows_spot;
use crate::plan::{ami_alias, images, subnets, volume_keys};
use karpenter_health_api::karpenter::{EC2NodeClass, SelectorTerm};

pub use crate::karpenter_permissions::SPOT_SERVICE_LINKED_ROLE;
/// The VPC CNI's ServiceAccount, as a Pod Identity key.
pub const AWS_NODE_SERVICE_ACCOUNT: &str = "kube-system/aws-node";
/// Service Quotas' code of "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances".
pub const ON_DEMAND_STANDARD_QUOTA: &str = "L-1216C47A";
/// Service Quotas' code of "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests".
pub const SPOT_STANDARD_QUOTA: &str = "L-34B43A08";

/// A Kubernetes ServiceAccount by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceAccountRef {
    pub namespace: String,
    pub name: String,
}

impl ServiceAccountRef {
    /// From a `namespace/name` key; `None` when it has no `/`.
    pub fn parse(key: &str) -> Option<Self> {
        let (namespace, name) = key.split_once('/')?;
        Some(Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }
}

impl std::fmt::Display for ServiceAccountRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The queue name Karpenter would look up, or why the setting is not one.
pub fn queue_name(setting: &str) -> Result<&str, &'static str> {
    let s = setting.trim();
    if s.starts_with("arn:") {
        return Err("an ARN");
    }
    if s.contains("://") {
        return Err("a URL");
    }
    Ok(s)
}

/// What the adapter is asked about one EC2NodeClass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AwsRequest {
    /// Karpenter's cluster name (`CLUSTER_NAME`), which names the EKS cluster and tags instances.
    /// `None` when not known: EKS and instance facts are then unknown (not observed).
    pub cluster_name: Option<String>,
    /// `spec.instanceProfile`, else `status.instanceProfile`, as written. A value IAM would
    /// reject as a name is asked anyway (IAM's `ValidationError` is its answer); an ARN is looked
    /// up by the name in it, and the engine reports the ARN itself.
    pub instance_profile: Option<String>,
    /// `spec.role`. When `None`, the node role is the instance profile's role.
    pub role: Option<String>,
    pub security_group_selector_terms: Vec<SelectorTerm>,
    /// ServiceAccounts whose EKS Pod Identity role the checks need (those without an IRSA
    /// annotation: the Karpenter controller's, `kube-system/aws-node`).
    pub pod_identity_service_accounts: Vec<ServiceAccountRef>,
    /// The Karpenter controller, whose role and permissions `ControllerCanLaunch` needs.
    pub controller: Option<ControllerRequest>,
    /// The interruption queue's name, when Karpenter is given one that is a name.
    pub interruption_queue: Option<String>,
    /// Whether a NodePool of the class allows spot (then `AWSServiceRoleForEC2Spot` is read).
    pub spot_service_linked_role: bool,
    /// The subnet ids of Karpenter's `status.subnets`; when empty, `subnet_selector_terms` say
    /// which subnets to read.
    pub subnet_ids: Vec<String>,
    pub subnet_selector_terms: Vec<SelectorTerm>,
    /// Whether the region's instance types, the account's vCPU quotas and its open capacity
    /// reservations are read (a NodePool uses the class).
    pub instance_types: bool,
    /// The class's AMI `alias` term (`al2023@v20240807`), whose SSM parameters are read.
    pub ami_alias: Option<String>,
    /// The API server's version, for the alias's parameters where EKS has no such cluster.
    pub apiserver_version: Option<String>,
    /// The images the class names by id and those Karpenter resolved for it
    /// (`plan::images::image_ids`), described by EC2; none: not asked.
    pub image_ids: Vec<String>,
    /// The KMS keys the class's volumes use; `None` when not asked.
    pub volume_keys: Option<volume_keys::VolumeKeys>,
}

/// What identifies the controller's role and the permission questions about it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControllerRequest {
    /// The IRSA annotation's role ARN; else the role comes from the Pod Identity association of
    /// `service_account` (which must be among `pod_identity_service_accounts`).
    pub irsa_role_arn: Option<String>,
    pub service_account: Option<ServiceAccountRef>,
    /// The cluster side of the permission questions; `None` when not known.
    pub class: Option<ClassInputs>,
}

impl AwsRequest {
    /// What the checks need read from IAM, EC2 and EKS for `node_class`, given the cluster facts.
    pub fn for_class(node_class: &EC2NodeClass, facts: &ClusterFacts) -> Self {
        let karpenter = facts.karpenter.found();
        let karpenter_cluster = karpenter.and_then(|k| k.cluster_name.clone());
        let pools = facts.node_pools.found();
        Self {
            cluster_name: karpenter_cluster.or_else(|| facts.configured_cluster_name.clone()),
            instance_profile: node_class.spec.instance_profile.clone().or_else(|| {
                node_class
                    .status
                    .as_ref()
                    .and_then(|s| s.instance_profile.clone())
            }),
            role: node_class.spec.role.clone(),
            security_group_selector_terms: node_class.spec.security_group_selector_terms.clone(),
            pod_identity_service_accounts: pod_identity_service_accounts(facts),
            controller: ControllerRequest::of(facts),
            interruption_queue: karpenter.and_then(|k| match &k.interruption_queue {
                Setting::Value(v) => queue_name(v).ok().map(str::to_owned),
                _ => None,
            }),
            spot_service_linked_role: pools.is_some_and(|pools| pools.iter().any(allows_spot)),
            instance_types: pools.is_some_and(|pools| !pools.is_empty()),
            ami_alias: ami_alias::Alias::of(node_class).map(|a| a.written),
            apiserver_version: facts.apiserver_version.found().cloned(),
            // Every class asks: a class without block devices still encrypts its root volume with
            // the account's default key (`VolumeEncryptionReady`).
            volume_keys: Some(volume_keys::volume_keys(node_class)),
            image_ids: images::image_ids(node_class),
            subnet_ids: subnets::status_subnet_ids(node_class),
            subnet_selector_terms: node_class.spec.subnet_selector_terms.clone(),
        }
    }
}

impl ControllerRequest {
    /// The controller's role (IRSA, else its Pod Identity association) and the cluster side of
    /// the permission questions about it; `None` while no controller is known.
    fn of(facts: &ClusterFacts) -> Option<Self> {
        let karpenter = facts.karpenter.found()?;
        Some(Self {
            irsa_role_arn: karpenter.controller_role_arn.clone(),
            service_account: karpenter
                .service_account
                .as_deref()
                .and_then(ServiceAccountRef::parse),
            class: ClassInputs::of(facts),
        })
    }
}

/// The ServiceAccounts whose role can only come from EKS Pod Identity: those that exist without
/// an IRSA annotation. Asked only then, so clusters on IRSA make no extra calls.
fn pod_identity_service_accounts(facts: &ClusterFacts) -> Vec<ServiceAccountRef> {
    let mut wanted = Vec::new();
    if facts.aws_node_role_arn == Observed::Found(None) {
        wanted.extend(ServiceAccountRef::parse(AWS_NODE_SERVICE_ACCOUNT));
    }
    if let Some(karpenter) = facts.karpenter.found()
        && karpenter.controller_role_arn.is_none()
    {
        wanted.extend(
            karpenter
                .service_account
                .as_deref()
                .and_then(ServiceAccountRef::parse),
        );
    }
    wanted
}

//! What the observer is asked about one EC2NodeClass ([`AwsRequest`]) and what it answers
//! beyond the facts ([`AwsObservation`]). Plain data, no IO.

use crate::ports::ServiceAccountRef;
use karpenter_health_api::karpenter::SelectorTerm;
use karpenter_health_checks::facts::AwsFacts;
use karpenter_health_checks::karpenter_permissions::ClassInputs;
use std::time::Duration;

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
    /// (`rules::amis::image_ids`), described by EC2; none: not asked.
    pub image_ids: Vec<String>,
    /// The KMS keys the class's volumes use; `None` when not asked.
    pub volume_keys: Option<karpenter_health_checks::rules::volume_encryption::VolumeKeys>,
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

/// One fact whose latest read failed while an older good answer is kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleFact {
    /// The `AwsFacts` field (`node_role.attached_policy_arns` for the nested one).
    pub fact: &'static str,
    /// Age of the kept answer.
    pub age: Duration,
}

/// An observation with the diagnostics the plain [`AwsFacts`] have no room for.
#[derive(Clone, Debug)]
pub struct AwsObservation {
    /// What to evaluate: unknown where the latest read failed.
    pub facts: AwsFacts,
    /// The last found/absent answer of every fact, where one was ever read (best effort for facts
    /// that depend on another: they follow the current answer of what they depend on).
    pub last_good: AwsFacts,
    /// The facts that are unknown now but have an older good answer in `last_good`.
    pub stale: Vec<StaleFact>,
}

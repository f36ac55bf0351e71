//! Read-only mirrors of the Karpenter kinds the checks read: EC2NodeClass (`karpenter.k8s.aws/v1`),
//! NodePool and NodeClaim (`karpenter.sh/v1`). Pure data, no IO.
//!
//! Only the fields the checks use are mirrored. Every field is optional and unknown fields are
//! ignored, so objects written by any Karpenter release from v0.37 to v1.14 deserialize, and the
//! watch caches hold a fraction of each object. The operator never writes these kinds, and they are
//! never rendered into a CRD (`schema = "disabled"`): Karpenter owns their schemas.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `karpenter.k8s.aws/v1 EC2NodeClass`, cluster-scoped.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "karpenter.k8s.aws",
    version = "v1",
    kind = "EC2NodeClass",
    plural = "ec2nodeclasses",
    status = "EC2NodeClassStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassSpec {
    /// IAM role name; Karpenter then manages an instance profile for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// A pre-provisioned instance profile *name* (Karpenter passes it as a name, never an ARN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_group_selector_terms: Vec<SelectorTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnet_selector_terms: Vec<SelectorTerm>,
    /// `spec.amiSelectorTerms`: an `alias` term (then the only one), or terms by id, name,
    /// owner, tags or SSM parameter.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    /// `spec.amiFamily`: required without an `alias` term; decides the user data's format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    /// `None` when the field is absent; the CRD normally defaults it (see `MetadataOptions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_options: Option<MetadataOptions>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// `spec.associatePublicIPAddress`; when unset the subnet's `MapPublicIpOnLaunch` decides.
    #[serde(
        default,
        rename = "associatePublicIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    /// `spec.userData`, read only to notice an HTTP proxy that nodes may reach AWS through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// `spec.blockDeviceMappings`: empty when absent (Karpenter then uses its AMI family's
    /// default, an encrypted root volume).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    /// `spec.capacityReservationSelectorTerms` (Karpenter 1.3+): the class launches into the
    /// capacity reservations they select. Kept as written; only whether there are any is read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservation_selector_terms: Vec<serde_json::Value>,
    /// `spec.kubelet`: what Karpenter writes into its nodes' kubelet configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
}

/// `spec.kubelet`, as far as the checks read it: the Pod density Karpenter gives each node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfiguration {
    /// `maxPods`: every node's Pod limit, whatever its instance type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<i32>,
    /// `podsPerCore`: at most this many Pods per vCPU, below `maxPods` or Karpenter's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_per_core: Option<i32>,
    /// `kubeReserved` (`cpu`, `memory`, ...): replaces Karpenter's computed reservation of each
    /// resource it names. Values as written (a quantity is a string or a number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_reserved: Option<std::collections::BTreeMap<String, serde_json::Value>>,
    /// `systemReserved`: subtracted from every node's allocatable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_reserved: Option<std::collections::BTreeMap<String, serde_json::Value>>,
    /// `evictionHard` (`memory.available`, ...): replaces the 100Mi memory threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_hard: Option<std::collections::BTreeMap<String, serde_json::Value>>,
}

/// One `spec.blockDeviceMappings` entry, as far as the checks read it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
}

/// `blockDeviceMappings[].ebs`: whether the volume is encrypted and with which KMS key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDevice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    /// Key id, key ARN, alias name or alias ARN.
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
}

/// One selector term: fields inside a term are ANDed, terms are ORed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The EC2 group name (security groups only), not the `Name` tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Tag filters; the value `*` matches any value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

/// One `spec.amiSelectorTerms` entry, as far as the checks read it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AmiSelectorTerm {
    /// `family@version` (`al2023@latest`, `al2023@v20240807`, `bottlerocket@1.20.0`): Karpenter
    /// resolves it through the SSM parameters AWS publishes for the cluster's Kubernetes version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
}

/// `spec.metadataOptions`. The CRD default is `httpProtocolIPv6: disabled`, which is still *sent*
/// to EC2 by Karpenter releases before 1.7.0.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_endpoint: Option<String>,
    #[serde(
        default,
        rename = "httpProtocolIPv6",
        skip_serializing_if = "Option::is_none"
    )]
    pub http_protocol_ipv6: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_tokens: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_put_response_hop_limit: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    /// The resolved profile name: generated by Karpenter with `spec.role`, copied with
    /// `spec.instanceProfile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<ResolvedSecurityGroup>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<ResolvedSubnet>,
    /// The images Karpenter resolved from `spec.amiSelectorTerms`, with the requirements an
    /// instance type must meet to boot each (its architecture, GPU or not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amis: Vec<ResolvedAmi>,
    /// The active capacity reservations `spec.capacityReservationSelectorTerms` select (Karpenter
    /// 1.3+, with its ReservedCapacity feature gate on): empty when they select none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservations: Vec<ResolvedCapacityReservation>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<KarpenterCondition>,
}

/// One entry of `status.capacityReservations`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedCapacityReservation {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub availability_zone: String,
    #[serde(default)]
    pub instance_type: String,
    /// `open` or `targeted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<String>,
    /// `default` or `capacity-block`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_type: Option<String>,
    /// `active`, or `expiring` (a capacity block within EC2's reclamation window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
    /// Whether EC2 may interrupt instances in it (an interruptible reservation; Karpenter 1.10
    /// and later write it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruptible: Option<bool>,
}

/// One entry of `status.amis`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedAmi {
    #[serde(default)]
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether EC2 has deprecated the image (in the CRD from the 1.5 releases on; Karpenter
    /// prefers images that are not deprecated and uses one only when nothing else matches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<Requirement>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedSecurityGroup {
    #[serde(default)]
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedSubnet {
    #[serde(default)]
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// A condition as Karpenter writes it (operatorpkg `status.Condition`); every field tolerated
/// missing so that a half-written status still deserializes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KarpenterCondition {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Looks a condition up by type in a Karpenter status.
pub fn find_condition<'a>(
    conditions: &'a [KarpenterCondition],
    type_: &str,
) -> Option<&'a KarpenterCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// `spec.template.spec.nodeClassRef` / `spec.nodeClassRef`. v1 uses `group`; objects written as
/// v1beta1 (Karpenter v0.37) carry `apiVersion` instead, so both are accepted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClassRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default)]
    pub name: String,
}

impl NodeClassRef {
    /// Whether this reference points at the EC2NodeClass `name`. A missing kind or group is taken
    /// as EC2NodeClass, as Karpenter's AWS provider does.
    pub fn refers_to_ec2_node_class(&self, name: &str) -> bool {
        let kind_ok = self.kind.as_deref().is_none_or(|k| k == "EC2NodeClass");
        let group = self.group.as_deref().or_else(|| {
            self.api_version
                .as_deref()
                .map(|v| v.split('/').next().unwrap_or(v))
        });
        let group_ok = group.is_none_or(|g| g == "karpenter.k8s.aws");
        kind_ok && group_ok && self.name == name
    }
}

/// A node selector requirement as Karpenter stores it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Requirement {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// `minValues` (NodePool requirements only): at least this many distinct values of the key
    /// among the instance types Karpenter may launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<u32>,
}

/// `karpenter.sh/v1 NodePool`, cluster-scoped.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodePool",
    plural = "nodepools",
    status = "NodePoolStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolSpec {
    #[serde(default)]
    pub template: NodeClaimTemplate,
    /// `spec.limits`: resource name to quantity, as written (a string or a number).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption: Option<Disruption>,
    /// `spec.replicas`: a static NodePool (Karpenter v1.8 and later, `StaticCapacity` gate) keeps
    /// this many nodes whatever its Pods ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
}

/// `spec.disruption`, as far as the checks read it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// `None`: Karpenter's default, one budget of `nodes: 10%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budgets: Option<Vec<Budget>>,
}

/// One disruption budget: at most `nodes` NodeClaims disrupted at once for `reasons` (all when
/// empty), while `schedule` (a cron) is active for `duration`, or always without one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    #[serde(default)]
    pub nodes: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
}

/// The NodePool status the checks read: its conditions (`NodeRegistrationHealthy` since
/// Karpenter 1.4, kubernetes-sigs/karpenter #1969).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<KarpenterCondition>,
    /// `status.resources`: what the NodePool's nodes provide, summed by Karpenter.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, serde_json::Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplate {
    #[serde(default)]
    pub metadata: TemplateMetadata,
    #[serde(default)]
    pub spec: NodeClaimTemplateSpec,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_ref: Option<NodeClassRef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<Requirement>,
    /// `spec.template.spec.taints`: every NodeClaim of the NodePool carries them, so a Pod that
    /// does not tolerate one is never scheduled to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// `spec.template.spec.startupTaints`: put on each new node and expected to be removed by
    /// an agent; Karpenter ignores them for scheduling until the node initializes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// `spec.template.spec.terminationGracePeriod`: how long Karpenter waits for a NodeClaim's
    /// Pods before deleting it anyway; `None`: it waits forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<String>,
}

/// A node taint as a NodePool's template writes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    #[serde(default)]
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default)]
    pub effect: String,
}

/// `karpenter.sh/v1 NodeClaim`, cluster-scoped.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodeClaim",
    plural = "nodeclaims",
    status = "NodeClaimStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_ref: Option<NodeClassRef>,
    /// `spec.terminationGracePeriod`, copied from its NodePool when it was made: once it is
    /// deleted, Karpenter deletes its Pods at that deadline whatever blocks them; `None`: it
    /// waits for them forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<String>,
    /// `spec.expireAfter` (`720h` by default in the CRD, or `Never`), copied from its NodePool:
    /// Karpenter's expiration controller deletes the NodeClaim that long after its creation,
    /// whatever its NodePool's disruption budgets say (kubernetes-sigs/karpenter
    /// `pkg/controllers/nodeclaim/expiration/controller.go`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<KarpenterCondition>,
}

/// Label Karpenter puts on NodeClaims and Nodes naming their NodePool.
pub const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";

/// The conditions Karpenter sets on an EC2NodeClass, `Ready` last (its root condition over the
/// others; aws/karpenter-provider-aws `pkg/apis/v1/ec2nodeclass_status.go`).
pub const NODE_CLASS_CONDITIONS: [&str; 6] = [
    "AMIsReady",
    "SubnetsReady",
    "SecurityGroupsReady",
    "InstanceProfileReady",
    "ValidationSucceeded",
    "Ready",
];

impl NodePool {
    /// Whether this NodePool's template launches from the EC2NodeClass `name`.
    pub fn uses_ec2_node_class(&self, name: &str) -> bool {
        self.spec
            .template
            .spec
            .node_class_ref
            .as_ref()
            .is_some_and(|r| r.refers_to_ec2_node_class(name))
    }
}

impl NodeClaim {
    /// Whether this NodeClaim was launched from the EC2NodeClass `name`.
    pub fn uses_ec2_node_class(&self, name: &str) -> bool {
        self.spec
            .node_class_ref
            .as_ref()
            .is_some_and(|r| r.refers_to_ec2_node_class(name))
    }
}

/// The EC2 instance id in a NodeClaim `providerID` (`aws:///<az>/<i-…>`, the format of
/// aws/karpenter-provider-aws `pkg/utils/utils.go` `ParseInstanceID`); `None` for other clouds'
/// ids or a truncated one.
pub fn instance_id_of(provider_id: &str) -> Option<&str> {
    provider_id
        .rsplit('/')
        .next()
        .filter(|id| id.starts_with("i-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_yield_instance_ids() {
        assert_eq!(
            instance_id_of("aws:///us-west-2a/i-0123456789abcdef0"),
            Some("i-0123456789abcdef0")
        );
        assert_eq!(instance_id_of("aws:///us-east-1a/i-0abc"), Some("i-0abc"));
        assert_eq!(instance_id_of("aws:///us-west-2a/"), None);
        assert_eq!(instance_id_of("kind://docker/kind/node"), None);
        assert_eq!(instance_id_of("kind://docker/node"), None);
    }

    #[test]
    fn node_class_ref_accepts_v1_group_and_v1beta1_api_version() {
        let v1: NodeClassRef = serde_json::from_value(serde_json::json!(
            {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
        ))
        .unwrap();
        let beta: NodeClassRef = serde_json::from_value(serde_json::json!(
            {"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "name": "default"}
        ))
        .unwrap();
        assert!(v1.refers_to_ec2_node_class("default"));
        assert!(beta.refers_to_ec2_node_class("default"));
        assert!(!v1.refers_to_ec2_node_class("other"));
        let foreign = NodeClassRef {
            kind: Some("AKSNodeClass".into()),
            ..v1
        };
        assert!(!foreign.refers_to_ec2_node_class("default"));
    }

    #[test]
    fn ec2_node_class_with_unknown_and_missing_fields_deserializes() {
        let yaml = r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default, generation: 2}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  kubelet: {maxPods: 110}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: demo}
    - id: sg-0123
  metadataOptions: {httpEndpoint: enabled, httpProtocolIPv6: disabled, httpPutResponseHopLimit: 1}
status:
  instanceProfile: demo_123
  conditions:
    - {type: InstanceProfileReady, status: "True", reason: InstanceProfileReady}
    - {type: ValidationSucceeded, status: Unknown}
"#;
        let nc: EC2NodeClass = serde_yaml::from_str(yaml).unwrap();
        assert_eq!(nc.spec.role.as_deref(), Some("KarpenterNodeRole-demo"));
        assert_eq!(nc.spec.security_group_selector_terms.len(), 2);
        assert_eq!(
            nc.spec
                .metadata_options
                .unwrap()
                .http_protocol_ipv6
                .as_deref(),
            Some("disabled")
        );
        let status = nc.status.unwrap();
        assert_eq!(
            find_condition(&status.conditions, "ValidationSucceeded").map(|c| c.status.as_str()),
            Some("Unknown")
        );
    }
}

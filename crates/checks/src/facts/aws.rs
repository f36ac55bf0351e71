//! The facts read from AWS for one EC2NodeClass ([`AwsFacts`]) and the answer of each call it
//! is made of. Plain data, no IO.

use super::*;

/// Facts read from AWS for one EC2NodeClass. Shared reads are de-duplicated by the adapter.
#[derive(Clone, Debug)]
pub struct AwsFacts {
    /// The operator's AWS region.
    pub region: Option<String>,
    /// Account id and partition of the operator's credentials (STS GetCallerIdentity).
    pub account: Observed<AccountFacts>,
    /// The instance profile the EC2NodeClass launches with (`spec.instanceProfile` or
    /// `status.instanceProfile`). `None` when no profile name is known yet.
    pub instance_profile: Option<Observed<InstanceProfileFacts>>,
    /// The node role (`spec.role`, else the profile's role). `None` when no role name is known.
    pub node_role: Option<Observed<RoleFacts>>,
    /// The EKS cluster named by Karpenter's cluster name.
    pub eks_cluster: Observed<EksClusterFacts>,
    /// Access entries whose principal is the node role (EKS ListAccessEntries/DescribeAccessEntry).
    pub node_role_access_entries: Observed<Vec<AccessEntryFacts>>,
    /// The IAM role EKS Pod Identity gives ServiceAccounts that have no IRSA annotation, by
    /// `namespace/name` (EKS ListPodIdentityAssociations/DescribePodIdentityAssociation):
    /// `Found(None)` when no association exists. Only asked for the ServiceAccounts the checks
    /// need a role of (the Karpenter controller's, `kube-system/aws-node`).
    pub pod_identity_roles: BTreeMap<String, Observed<Option<String>>>,
    /// For a Pod Identity association with a `targetRoleArn`, by `namespace/name`: the
    /// association's own role, which EKS assumes to assume the target. `pod_identity_roles` then
    /// holds the target, whose credentials the Pods get.
    pub pod_identity_via: BTreeMap<String, String>,
    /// What the security-group selector terms resolve to now (an empty list: proven no match).
    pub security_groups: Observed<Vec<SecurityGroupFacts>>,
    /// Instances tagged with this cluster's name (`eks:eks-cluster-name` or
    /// `kubernetes.io/cluster/<name>`) and `karpenter.sh/nodepool`.
    pub cluster_instances: Observed<Vec<InstanceFacts>>,
    /// The Karpenter controller's role (from its IRSA annotation, else its Pod Identity
    /// association); `None` when no role was known to read.
    pub controller_role: Option<Observed<ControllerRoleFacts>>,
    /// ARNs of the account's IAM OIDC providers (ListOpenIDConnectProviders).
    pub oidc_providers: Observed<Vec<String>>,
    /// What the controller role may do; `None` when not asked (no role or node role known).
    pub controller_permissions: Option<PermissionFacts>,
    /// The configured interruption queue; `None` when none is configured (or it is no name).
    pub interruption_queue: Option<Observed<QueueFacts>>,
    /// The `AWSServiceRoleForEC2Spot` role's ARN; `None` when not asked (no spot NodePool).
    pub spot_service_linked_role: Option<Observed<String>>,
    /// The account's EBS encryption defaults in this region; `None` when not asked.
    pub ebs_encryption: Option<Observed<EbsEncryptionFacts>>,
    /// The KMS keys the volumes are encrypted with, by the reference used (as written in
    /// `kmsKeyID`, or the account's default key id). Only the keys asked for.
    pub kms_keys: BTreeMap<String, Observed<KmsKeyFacts>>,
    /// The cluster's VPC: `resourcesVpcConfig.vpcId`, else the VPC of the cluster's own subnets
    /// (emulators leave `vpcId` out). `Absent` when the EKS cluster does not exist.
    pub cluster_vpc: Observed<String>,
    /// The subnets the EC2NodeClass selects: the ids in Karpenter's `status.subnets` when it has
    /// any (a listed id missing here is proven deleted), else what the selector terms match.
    pub subnets: Observed<Vec<SubnetFacts>>,
    /// The network of each VPC the selected subnets are in, by VPC id.
    pub vpc_networks: BTreeMap<String, Observed<VpcNetworkFacts>>,
    /// The region's instance types and the zones each is offered in; `None` when not asked
    /// (no NodePool uses the class).
    pub instance_types: Option<Observed<InstanceTypeCatalog>>,
    /// The account's vCPU quotas for standard instances in the region; `None` when not asked.
    pub vcpu_quotas: Option<VcpuQuotas>,
    /// The SSM parameters the class's `alias` AMI term resolves through, for the cluster's
    /// Kubernetes minor and the next; `None` when not asked (no alias term).
    pub ami_parameters: Option<Observed<AmiParameters>>,
    /// The images the class names by id and those Karpenter resolved for it, as EC2 describes
    /// them (an image EC2 does not return is gone or not shared with the account); `None` when
    /// not asked (no such image).
    pub images: Option<Observed<Vec<ImageFacts>>>,
    /// The account's active open On-Demand Capacity Reservations in the region
    /// (DescribeCapacityReservations); `None` when not asked (no NodePool uses the class).
    pub open_capacity_reservations: Option<Observed<Vec<CapacityReservationFacts>>>,
}

impl Default for AwsFacts {
    fn default() -> Self {
        let pending = || UnknownCause::NotObserved;
        Self {
            region: None,
            account: Observed::unknown(pending(), "not observed yet"),
            instance_profile: None,
            node_role: None,
            eks_cluster: Observed::unknown(pending(), "not observed yet"),
            node_role_access_entries: Observed::unknown(pending(), "not observed yet"),
            pod_identity_roles: BTreeMap::new(),
            pod_identity_via: BTreeMap::new(),
            security_groups: Observed::unknown(pending(), "not observed yet"),
            cluster_instances: Observed::unknown(pending(), "not observed yet"),
            controller_role: None,
            oidc_providers: Observed::unknown(pending(), "not observed yet"),
            controller_permissions: None,
            interruption_queue: None,
            spot_service_linked_role: None,
            ebs_encryption: None,
            kms_keys: BTreeMap::new(),
            cluster_vpc: Observed::unknown(pending(), "not observed yet"),
            subnets: Observed::unknown(pending(), "not observed yet"),
            vpc_networks: BTreeMap::new(),
            instance_types: None,
            vcpu_quotas: None,
            ami_parameters: None,
            open_capacity_reservations: None,
            images: None,
        }
    }
}

impl AwsFacts {
    /// The EKS Pod Identity role of the ServiceAccount `namespace/name`; not observed when it was
    /// not asked for.
    pub fn pod_identity_role(&self, service_account: &str) -> Observed<Option<String>> {
        self.pod_identity_roles
            .get(service_account)
            .cloned()
            .unwrap_or_else(|| {
                Observed::not_observed(format!(
                    "the Pod Identity association of {service_account} was not looked up"
                ))
            })
    }

    /// The Kubernetes minor the alias's parameters were read for, when they were.
    pub fn kubernetes_minor(&self) -> Option<&str> {
        match &self.ami_parameters {
            Some(Observed::Found(p)) => Some(p.kubernetes_minor.as_str()),
            _ => None,
        }
    }
}

impl<T> Default for Observed<T> {
    fn default() -> Self {
        Observed::not_observed("not observed yet")
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccountFacts {
    pub account_id: String,
    /// `aws`, `aws-cn`, `aws-us-gov`, `aws-iso`, ...
    pub partition: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceProfileFacts {
    pub name: String,
    pub arn: String,
    pub path: String,
    /// Roles inside the profile (IAM allows at most one).
    pub roles: Vec<RoleRef>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct RoleRef {
    pub name: String,
    pub arn: String,
    pub path: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleFacts {
    pub name: String,
    pub arn: String,
    /// IAM path, `/` when none.
    pub path: String,
    /// The trust policy document as IAM returned it: percent-encoded JSON (real IAM) or plain
    /// JSON (emulators). Decoding and parsing are checks.
    pub assume_role_policy_document: Option<String>,
    /// ARNs of the managed policies attached to the role.
    pub attached_policy_arns: Observed<Vec<String>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EksClusterFacts {
    pub name: String,
    pub vpc_id: Option<String>,
    /// `CONFIG_MAP`, `API_AND_CONFIG_MAP` or `API`; `None` when DescribeCluster returned no
    /// `accessConfig` (clusters predating access entries behave as `CONFIG_MAP`).
    pub authentication_mode: Option<String>,
    /// `identity.oidc.issuer`, e.g. `https://oidc.eks.us-west-2.amazonaws.com/id/ABC`.
    pub oidc_issuer: Option<String>,
    /// `resourcesVpcConfig.subnetIds`: the cluster's own subnets, whose VPC is the cluster's
    /// when `vpc_id` is missing.
    pub subnet_ids: Vec<String>,
    /// `kubernetesNetworkConfig.ipFamily`: `ipv4` or `ipv6`.
    pub ip_family: Option<String>,
    /// The cluster's Kubernetes version (`1.31`), as DescribeCluster returns it.
    pub version: Option<String>,
}

/// The account's EBS encryption settings in the region (EC2 GetEbsEncryptionByDefault,
/// GetEbsDefaultKmsKeyId).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EbsEncryptionFacts {
    /// New volumes are encrypted even when the launch does not ask for it.
    pub by_default: bool,
    /// The key EC2 uses when a volume is encrypted without a key named (an ARN, often the alias
    /// ARN of `alias/aws/ebs`).
    pub default_kms_key_id: Observed<String>,
}

/// One KMS key (DescribeKey) and its key policy (GetKeyPolicy `default`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KmsKeyFacts {
    pub key_id: String,
    pub arn: String,
    /// `Enabled`, `Disabled`, `PendingDeletion`, `PendingImport`, `Creating`, `Unavailable`, ...
    pub state: String,
    /// `AWS` (an AWS-managed key) or `CUSTOMER`.
    pub manager: String,
    /// The `default` key policy as KMS returned it; unknown when it could not be read (a key
    /// of another account usually).
    pub policy: Observed<String>,
    /// The key's grants to the Karpenter controller's role (ListGrants by grantee), which let
    /// it use the key beyond the key policy; not observed when the role is not known.
    pub controller_grants: Observed<Vec<KmsGrantFacts>>,
    /// IAM's simulator's answers for the controller's role and EC2's uses of this key
    /// (`volume_encryption::EC2_KMS_ACTIONS` on the key ARN through EC2): what decides when the
    /// key policy leaves the key's use to the account's IAM policies. Not observed when the role
    /// is not known or the key is AWS-managed.
    pub controller_iam: Observed<Vec<SimulatedDecision>>,
}

/// One KMS grant (ListGrants): who may use the key for which operations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KmsGrantFacts {
    pub grantee_principal: String,
    /// `Decrypt`, `CreateGrant`, ... (KMS's names, without the `kms:` prefix).
    pub operations: Vec<String>,
    /// Whether the grant applies only under an encryption context constraint.
    pub constrained: bool,
}

/// The Karpenter controller's IAM role (GetRole).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControllerRoleFacts {
    pub name: String,
    pub arn: String,
    /// The trust policy as IAM returned it (percent-encoded or plain JSON).
    pub assume_role_policy_document: Option<String>,
    /// The ARN of the role's permissions boundary, if it has one.
    pub permissions_boundary_arn: Option<String>,
}

/// What IAM's simulator answered for one action on one resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimulatedDecision {
    pub action: String,
    pub resource: String,
    /// `allowed`, `explicitDeny` or `implicitDeny`.
    pub decision: String,
    /// `PermissionsBoundaryDecisionDetail.AllowedByPermissionsBoundary == false`.
    pub denied_by_boundary: bool,
    /// `OrganizationsDecisionDetail.AllowedByOrganizations == false` (an SCP).
    pub denied_by_organizations: bool,
    /// Context keys the policies need that the request did not give.
    pub missing_context: Vec<String>,
    /// `SourcePolicyId`s of the statements that decided it.
    pub matched: Vec<String>,
}

/// A policy document with the name messages use for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyDocument {
    /// `inline policy <name>`, or the managed policy's ARN.
    pub name: String,
    /// As IAM returned it (percent-encoded or plain JSON).
    pub document: String,
}

/// The controller role's own policies, read when IAM's simulator cannot be asked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RolePolicies {
    /// Inline and attached managed policies (their default versions).
    pub identity: Vec<PolicyDocument>,
    /// The permissions boundary's default version, if the role has one.
    pub boundary: Option<PolicyDocument>,
}

/// What decides the controller's permissions: IAM's simulator, else the role's own policies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PermissionFacts {
    pub simulated: Observed<Vec<SimulatedDecision>>,
    /// Read only when `simulated` is unknown; `None` otherwise.
    pub policies: Option<Observed<RolePolicies>>,
}

/// The interruption queue and what feeds it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueFacts {
    pub name: String,
    pub url: String,
    /// `QueueArn` attribute.
    pub arn: String,
    /// `Policy` attribute: `None` when the queue has no policy.
    pub policy: Option<String>,
    /// `KmsMasterKeyId` attribute: the SSE-KMS key as the queue names it (id, ARN, alias name or
    /// alias ARN); `None` when the queue is not encrypted with SSE-KMS (SSE-SQS or none).
    pub kms_master_key_id: Option<String>,
    /// That key (DescribeKey, GetKeyPolicy); `None` when there is none or it was not looked up.
    pub kms_key: Option<Observed<KmsKeyFacts>>,
    /// EventBridge rules on every event bus of the account that target the queue.
    pub rules: Observed<Vec<EventRuleFacts>>,
    /// For each custom event bus whose rules target the queue, by bus name: the default bus's
    /// rules that target that bus (AWS services send their events to the default bus only, so
    /// these are what feeds it).
    pub bus_forwarders: BTreeMap<String, Observed<Vec<EventRuleFacts>>>,
}

/// One EventBridge rule (DescribeRule).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventRuleFacts {
    pub name: String,
    pub arn: String,
    /// `ENABLED`, `DISABLED`, ...
    pub state: String,
    pub event_pattern: Option<String>,
    /// The event bus's name: `default` for the account's default bus (an empty name counts as
    /// the default bus too).
    pub event_bus: String,
}

impl EventRuleFacts {
    /// Whether the rule is on the default bus, where AWS services put their events.
    pub fn on_default_bus(&self) -> bool {
        self.event_bus.is_empty() || self.event_bus == "default"
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessEntryFacts {
    pub principal_arn: String,
    /// `STANDARD`, `EC2_LINUX`, `EC2_WINDOWS`, `FARGATE_LINUX`, ...
    pub type_: String,
    pub username: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecurityGroupFacts {
    pub id: String,
    pub name: String,
    pub vpc_id: Option<String>,
    pub tags: BTreeMap<String, String>,
}

/// One subnet (EC2 DescribeSubnets).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubnetFacts {
    pub id: String,
    pub vpc_id: String,
    /// Availability zone name, e.g. `us-west-2a`.
    pub zone: String,
    /// `AvailableIpAddressCount`; `None` when the answer left it out.
    pub available_ips: Option<u32>,
    /// `MapPublicIpOnLaunch`.
    pub map_public_ip_on_launch: bool,
    pub tags: BTreeMap<String, String>,
    /// `OwnerId`: the account that owns the subnet. Another account than the operator's means a
    /// VPC shared through AWS RAM, whose owner's NAT gateways, endpoints and route tables this
    /// account may not be able to list. `None` when the answer left it out.
    pub owner_id: Option<String>,
}

/// What one VPC's routing, endpoints and DNS look like, each read on its own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VpcNetworkFacts {
    pub vpc_id: String,
    /// Every route table of the VPC (DescribeRouteTables, filter `vpc-id`).
    pub route_tables: Observed<Vec<RouteTableFacts>>,
    /// The VPC's NAT gateways (DescribeNatGateways, filter `vpc-id`), deleted ones included
    /// while EC2 still lists them.
    pub nat_gateways: Observed<Vec<NatGatewayFacts>>,
    /// The VPC's endpoints (DescribeVpcEndpoints, filter `vpc-id`).
    pub endpoints: Observed<Vec<VpcEndpointFacts>>,
    /// DescribeVpcAttribute `enableDnsSupport`.
    pub dns_support: Observed<bool>,
    /// DescribeVpcAttribute `enableDnsHostnames`.
    pub dns_hostnames: Observed<bool>,
}

/// One route table: its associations and routes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteTableFacts {
    pub id: String,
    /// It carries the VPC's main association (used by subnets without an explicit one).
    pub main: bool,
    /// Subnets explicitly associated with it.
    pub subnet_ids: Vec<String>,
    pub routes: Vec<RouteFacts>,
}

/// One route of a route table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteFacts {
    /// `DestinationCidrBlock` or `DestinationIpv6CidrBlock` (empty for prefix-list routes).
    pub destination: String,
    /// What the route sends traffic to.
    pub target: RouteTarget,
    /// `active` or `blackhole`.
    pub state: String,
}

/// A route's target, by the field EC2 filled in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RouteTarget {
    /// The VPC's own range (`GatewayId: local`).
    Local,
    InternetGateway(String),
    EgressOnlyInternetGateway(String),
    NatGateway(String),
    /// A gateway VPC endpoint (`GatewayId: vpce-...`).
    VpcEndpoint(String),
    /// What this check cannot see through: transit gateway, peering, virtual private gateway,
    /// network interface, instance, core network, local or carrier gateway; named as EC2 did.
    Opaque(String),
    #[default]
    Unknown,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NatGatewayFacts {
    pub id: String,
    /// `pending`, `available`, `deleting`, `deleted`, `failed`.
    pub state: String,
    /// `public` or `private` (`None`: public, the default).
    pub connectivity_type: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VpcEndpointFacts {
    pub id: String,
    /// e.g. `com.amazonaws.us-west-2.ecr.dkr`.
    pub service_name: String,
    /// `Interface`, `Gateway`, `GatewayLoadBalancer`, ...
    pub type_: String,
    /// `available`, `pending`, ... (EC2's case varies by call; compare ignoring case).
    pub state: String,
    pub private_dns_enabled: bool,
    /// Route tables a gateway endpoint is associated with.
    pub route_table_ids: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceFacts {
    pub id: String,
    pub vpc_id: Option<String>,
    /// EC2 state name: `pending`, `running`, `stopping`, `stopped`, `shutting-down`, `terminated`.
    pub state: String,
    pub launch_time: Option<Timestamp>,
    pub tags: BTreeMap<String, String>,
    /// `InstanceType`, e.g. `m5.large`; `None` when the answer left it out.
    pub instance_type: Option<String>,
    /// `InstanceLifecycle`: `spot`, `capacity-block`, or `None` for on-demand.
    pub lifecycle: Option<String>,
}

/// Thresholds and knobs of the checks; the operator fills them from flags.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// How long Karpenter's `ValidationSucceeded` may stay Unknown while `InstanceProfileReady`
    /// is True before `ValidationStuck`.
    pub validation_stuck_after: jiff::SignedDuration,
    /// How long a launched NodeClaim may stay unregistered before `NodeClaimsNotRegistering`,
    /// measured like Karpenter's own 15-minute liveness timeout, which deletes the NodeClaim:
    /// it must stay well below that to ever fire.
    pub registration_timeout: jiff::SignedDuration,
    /// How long a registered NodeClaim may stay uninitialized before it counts as stuck
    /// (`NodesFitWorkloads`): Karpenter itself sets no deadline on initialization
    /// (kubernetes-sigs/karpenter `pkg/controllers/nodeclaim/lifecycle/liveness.go` stops at
    /// registration), so a stuck node stays until someone acts.
    pub initialization_timeout: jiff::SignedDuration,
    /// How long Karpenter's status may lag `metadata.generation` before `StatusStale`.
    pub status_stale_after: jiff::SignedDuration,
    /// An unclaimed instance older than this outlives Karpenter's garbage collection and so
    /// belongs to another cluster of the same name.
    pub orphan_instance_after: jiff::SignedDuration,
    /// How long a NodeClaim may be terminating before `NodeClaimTerminatingLong` (and before
    /// the operator reads what holds its drain).
    pub terminating_long_after: jiff::SignedDuration,
    /// How long a pending Pod must have been unschedulable, with no NodeClaim of the class
    /// still registering, before `LimitsLeaveRoom` blames limits or quotas for it: Karpenter
    /// counts a launching NodeClaim against its NodePool's limits while the Pod it is for still
    /// waits (`rules/limits.rs`).
    pub waiting_on_limits_after: jiff::SignedDuration,
    /// How soon the scheduler tries an unschedulable Pod again whatever changed: a Pod beside
    /// room on a node ready more recently than this may not have been tried there yet. The
    /// scheduler moves a Pod back to its active queue once it has sat 5 minutes since its last
    /// attempt, checked every 30 s (`podMaxInUnschedulablePodsDuration`, kubernetes/kubernetes
    /// `pkg/scheduler/backend/queue/scheduling_queue.go`): 6 minutes leaves half a minute for the
    /// queue itself. EKS runs the scheduler with its defaults; a bed whose scheduler flushes
    /// sooner shortens it.
    pub scheduler_retries_within: jiff::SignedDuration,
    /// Compatibility rows given at run time, over the built-in matrix
    /// (`karpenter_versions::first_supporting`).
    pub kubernetes_compatibility: crate::karpenter_versions::CompatibilityOverride,
    /// Where acceptances of findings may come from (`acceptance.rs`).
    pub acceptances: crate::acceptance::AcceptancePolicy,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            validation_stuck_after: jiff::SignedDuration::from_mins(10),
            registration_timeout: jiff::SignedDuration::from_mins(8),
            initialization_timeout: jiff::SignedDuration::from_mins(10),
            status_stale_after: jiff::SignedDuration::from_mins(10),
            orphan_instance_after: jiff::SignedDuration::from_mins(10),
            terminating_long_after: jiff::SignedDuration::from_hours(1),
            waiting_on_limits_after: jiff::SignedDuration::from_mins(2),
            scheduler_retries_within: jiff::SignedDuration::from_mins(6),
            kubernetes_compatibility: crate::karpenter_versions::CompatibilityOverride::new(),
            acceptances: crate::acceptance::AcceptancePolicy::default(),
        }
    }
}

/// `DescribeCluster cluster.accessConfig.authenticationMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthMode {
    ConfigMap,
    ApiAndConfigMap,
    Api,
}

impl AuthMode {
    pub const ALL: [AuthMode; 3] = [
        AuthMode::ConfigMap,
        AuthMode::ApiAndConfigMap,
        AuthMode::Api,
    ];

    /// A missing mode is `CONFIG_MAP`: clusters predating access entries behave that way.
    pub fn parse(mode: Option<&str>) -> Option<Self> {
        match mode {
            None | Some("CONFIG_MAP") => Some(Self::ConfigMap),
            Some("API_AND_CONFIG_MAP") => Some(Self::ApiAndConfigMap),
            Some("API") => Some(Self::Api),
            Some(_) => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConfigMap => "CONFIG_MAP",
            Self::ApiAndConfigMap => "API_AND_CONFIG_MAP",
            Self::Api => "API",
        }
    }
}

//! The closed vocabulary of KarpenterHealth: condition types, the reasons each may carry, and the
//! remediation and docs anchor of every reason. Pure data, no IO.
//!
//! Every reason is declared once, in the table below, together with the condition it belongs to
//! and the status it implies; docs/checks.md is generated from the same table (`karpenter-health
//! docs`), so the documentation cannot drift from the code.

use serde::{Deserialize, Serialize};
use std::fmt;

// The two tables below are written with these macros.
#[macro_use]
mod macros;
mod status;

pub use status::{ConditionStatus, Severity};

condition_types! {
    /// The instance profile nodes launch with exists, is named correctly and holds the node role.
    InstanceProfileReady, "Profile";
    /// The node IAM role exists, trusts EC2 and has the policies a node needs.
    NodeRoleReady, "Role";
    /// Nodes using the node role are allowed to join the cluster (aws-auth or access entry).
    NodeRoleMapped, "Mapped";
    /// The security-group selectors resolve to groups that belong to this cluster.
    SecurityGroupsReady, "SGs";
    /// No other cluster shares this cluster's name, and Karpenter is configured with the real name.
    ClusterIdentityUnique, "Identity";
    /// The instance metadata options Karpenter sends are accepted by EC2 in this region.
    MetadataOptionsSupported, "Metadata";
    /// No NodePool or pending workload uses a label the installed Karpenter rejects.
    LabelsAllowed, "Labels";
    /// Karpenter's own EC2NodeClass status is current and does not contradict itself.
    KarpenterStatusConsistent, "KarpStatus";
    /// Launched NodeClaims of this EC2NodeClass register as nodes in time.
    NodeClaimsRegistered, "Registered";
    /// The Karpenter controller has working credentials and may pass the node role, manage
    /// instance profiles (with spec.role) and launch instances for this EC2NodeClass: run
    /// instances and fleets on what a launch creates and uses (instances, volumes, network
    /// interfaces, launch templates, subnets, security groups, images), with Karpenter's tags and
    /// the class's metadata options, and tag them on create.
    ControllerCanLaunch, "Controller";
    /// Karpenter's interruption queue, when configured, exists, accepts EventBridge's messages
    /// (its policy, and its SSE-KMS key), and is fed by enabled rules for every kind of event this
    /// class's nodes can get.
    InterruptionHandlingReady, "Interruption";
    /// Spot capacity a NodePool of this EC2NodeClass allows can launch (the EC2 Spot service-linked role exists).
    SpotReady, "Spot";
    /// The subnets this EC2NodeClass selects exist, are in the cluster's VPC, and some zone it can
    /// launch into has a subnet with the free addresses a node needs for certain.
    SubnetsReady, "Subnets";
    /// From every selected subnet a node can reach the control plane and AWS (a NAT or internet
    /// gateway route, or the VPC endpoints a private cluster needs), and the VPC resolves DNS.
    NodeNetworkReady, "Network";
    /// The KMS keys that encrypt this EC2NodeClass's EBS volumes (named in its block devices, or
    /// the account's default) exist, are enabled and let EC2 use them on the controller's behalf
    /// (by the key policy, a grant, or the controller role's IAM policies where the key policy
    /// leaves it to them).
    VolumeEncryptionReady, "Volumes";
    /// The installed Karpenter supports the cluster's Kubernetes version, its CRDs are not older
    /// than the controller, no v1beta1 is left stored, and its webhooks reach a Service.
    KarpenterVersionCompatible, "Version";
    /// Every NodePool of this EC2NodeClass allows some instance type that EC2 offers in a zone
    /// of the class's subnets, with an architecture of the class's AMIs.
    InstanceTypesAvailable, "Types";
    /// No Pod that only this EC2NodeClass can take waits while every NodePool of the class is
    /// at its `spec.limits`, has limits smaller than any instance type it allows, or allows only
    /// standard instances the account's vCPU quota no longer has room for.
    LimitsLeaveRoom, "Limits";
    /// Drifted NodeClaims of this EC2NodeClass are replaced as their NodePools' disruption
    /// budgets allow. Its findings are warnings (a budget that switches drift off is a decision;
    /// what holds a drifted or terminating NodeClaim may go at any time), so it is never False.
    DriftCanBeReplaced, "Drift";
    /// The images of this EC2NodeClass resolve and boot nodes that join: an `alias` term is
    /// published for the cluster's Kubernetes version, and `amiFamily` matches the images.
    AmisResolvable, "AMIs";
    /// The capacity reservations this EC2NodeClass selects can take its launches: Karpenter uses
    /// them (its ReservedCapacity feature gate is on), the selector matches an active
    /// reservation, and one is in a zone the class has a subnet in.
    CapacityReservationsUsable, "Reserved";
    /// Summary: every other condition is True.
    Ready, "Ready";
}

impl ConditionType {
    /// The sub-conditions that feed the summary `Ready`: every type but `Ready` itself.
    pub fn sub_conditions() -> &'static [ConditionType] {
        &Self::ALL[..Self::ALL.len() - 1]
    }
}

impl fmt::Display for ConditionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which conditions a reason may be used on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasonScope {
    /// Only on this condition.
    Only(ConditionType),
    /// On any sub-condition (causes of `Unknown` shared by all checks).
    AnySubCondition,
}

/// Everything the docs and the renderer need to know about one reason.
#[derive(Clone, Copy, Debug)]
pub struct ReasonMeta {
    pub scope: ReasonScope,
    pub status: ConditionStatus,
    /// What the reason means, one sentence.
    pub meaning: &'static str,
    /// What to do about it, one sentence.
    pub remediation: &'static str,
}

use ConditionType as C;
use ReasonScope::{AnySubCondition as Any, Only};

reasons! {
    // Causes of Unknown shared by every sub-condition.
    Pending => Any, Unknown,
        "The check has not been evaluated yet.",
        "Wait for the first evaluation; if it stays Pending, read the operator's logs.";
    NotObserved => Any, Unknown,
        "A fact the check needs has not been observed yet (watch not synced or object not readable).",
        "Check the operator's RBAC and logs; the condition resolves once the fact is observed.";
    AwsAccessDenied => Any, Unknown,
        "An AWS call the check needs was denied, so the check could not run.",
        "Grant the operator's IAM role the read permissions listed in deploy/iam-policy.json.";
    AwsThrottled => Any, Unknown,
        "AWS throttled a call the check needs, or the operator's own rate limit for that API held it back; the class is evaluated again within a minute.",
        "Nothing to fix if brief; if persistent, raise the refresh interval or find the account's noisy client.";
    AwsUnavailable => Any, Unknown,
        "AWS could not be reached or failed (timeout, connection error, 5xx).",
        "Check the operator's network path to the AWS endpoints (VPC endpoints, proxies, DNS).";
    AwsUnsupported => Any, Unknown,
        "The AWS endpoint does not support a call the check needs.",
        "Use an endpoint that implements the API, or accept that this check cannot run here.";
    AwsOtherAccount => Any, Unknown,
        "What the check needs lives in another AWS account than the operator's credentials (a controller role, or an EKS Pod Identity target role, of another account), and IAM does not let this account read it, so the check is not made rather than guessed.",
        "Nothing is wrong by itself: check that account's role by hand, or run karpenter-health check with credentials of that account.";
    KarpenterVersionUnknown => Any, Unknown,
        "The Karpenter version could not be determined, and the check depends on it.",
        "Run the operator where it can read the Karpenter Deployment, or set --karpenter-version.";
    ClusterNameUnknown => Any, Unknown,
        "The cluster name could not be determined, and the check depends on it.",
        "Let the operator read Karpenter's settings, or set --cluster-name.";
    PolicyUndecided => Any, Unknown,
        "A policy the check evaluates uses conditions or variables that cannot be decided outside AWS (or IAM's simulator lacked context it needs), so neither allowed nor denied is proven.",
        "Grant the operator iam:SimulatePrincipalPolicy so IAM decides, or check the statements named in the message by hand.";
    RegionUnknown => Any, Unknown,
        "The AWS region could not be determined, and the check depends on it.",
        "Set AWS_REGION (or --region) for the operator.";

    // InstanceProfileReady
    InstanceProfileValid => Only(C::InstanceProfileReady), True,
        "The instance profile exists and holds the node role.",
        "Nothing to do.";
    InstanceProfileNotResolved => Only(C::InstanceProfileReady), Unknown,
        "spec.role is set but Karpenter has not yet written status.instanceProfile.",
        "Wait for Karpenter to reconcile the EC2NodeClass; if it never does, read Karpenter's logs.";
    InstanceProfileIsArn => Only(C::InstanceProfileReady), False,
        "spec.instanceProfile is an ARN; Karpenter passes it as a name, so every launch fails while Karpenter shows InstanceProfileReady=True.",
        "Set spec.instanceProfile to the profile name (the last segment of the ARN).";
    InstanceProfileNameInvalid => Only(C::InstanceProfileReady), False,
        "spec.instanceProfile is not a valid IAM instance profile name.",
        "Use a name of 1 to 128 characters from letters, digits and +=,.@_-.";
    InstanceProfileNotFound => Only(C::InstanceProfileReady), False,
        "IAM has no instance profile of that name.",
        "Create the instance profile, or point spec.instanceProfile at an existing one.";
    InstanceProfileHasNoRole => Only(C::InstanceProfileReady), False,
        "The instance profile holds no role, so nodes get no credentials.",
        "Add the node role to the profile (aws iam add-role-to-instance-profile).";
    InstanceProfileRoleMismatch => Only(C::InstanceProfileReady), False,
        "The instance profile holds a different role than the EC2NodeClass asks for.",
        "Put spec.role's role into the profile, or fix spec.role.";

    // NodeRoleReady
    NodeRoleValid => Only(C::NodeRoleReady), True,
        "The node role exists, trusts ec2.amazonaws.com and has the required policies.",
        "Nothing to do.";
    NodeRoleNotResolved => Only(C::NodeRoleReady), Unknown,
        "The node role is not known yet (it comes from spec.role or from the instance profile).",
        "Resolve InstanceProfileReady first.";
    NodeRoleNotFound => Only(C::NodeRoleReady), False,
        "IAM has no role of that name.",
        "Create the node role, or fix spec.role.";
    NodeRoleIsArn => Only(C::NodeRoleReady), False,
        "spec.role is an IAM role ARN; Karpenter uses it as a role name when it creates the instance profile, which IAM refuses.",
        "Set spec.role to the role's name: the part after role/ and any path.";
    NodeRoleNameTooLong => Only(C::NodeRoleReady), False,
        "The role name is longer than IAM's 64-character limit.",
        "Use a shorter role name (the default KarpenterNodeRole-<cluster> overflows with long cluster names).";
    NodeRoleTrustPolicyInvalid => Only(C::NodeRoleReady), False,
        "The role's trust policy does not let ec2.amazonaws.com assume it, so instances get no credentials.",
        "Allow sts:AssumeRole for the service principal ec2.amazonaws.com in the trust policy.";
    NodeRoleMissingPolicies => Only(C::NodeRoleReady), False,
        "The role lacks managed policies every node needs.",
        "Attach AmazonEKSWorkerNodePolicy, AmazonEKS_CNI_Policy (unless aws-node has its own role) and AmazonEC2ContainerRegistryPullOnly.";

    // NodeRoleMapped
    NodeRoleMappedInAwsAuth => Only(C::NodeRoleMapped), True,
        "aws-auth maps the node role with the node username and groups.",
        "Nothing to do.";
    NodeRoleHasAccessEntry => Only(C::NodeRoleMapped), True,
        "An EC2_LINUX or EC2_WINDOWS access entry exists for the node role.",
        "Nothing to do.";
    AwsAuthMissing => Only(C::NodeRoleMapped), False,
        "The cluster authenticates through aws-auth, but kube-system/aws-auth does not exist.",
        "Create kube-system/aws-auth with a mapRoles entry for the node role, or create an access entry.";
    AwsAuthMalformed => Only(C::NodeRoleMapped), False,
        "The node role's own mapping in kube-system/aws-auth cannot be read: mapRoles is not a YAML list, or the node role's entry has a field of the wrong type, so the authenticator does not map the node role as written.",
        "Fix mapRoles or the entry at the position named in the message (groups must be a list of strings).";
    NodeRoleNotMapped => Only(C::NodeRoleMapped), False,
        "Neither aws-auth nor an access entry maps the node role, so nodes launch but never join.",
        "Map the node role: an EC2_LINUX access entry, or a mapRoles entry with the node username and groups.";
    ControllerRoleMappedInstead => Only(C::NodeRoleMapped), False,
        "aws-auth maps the Karpenter controller's role as a node role instead of the node role itself.",
        "Change the entry's rolearn to the node role's ARN.";
    NodeRoleMappedWithPath => Only(C::NodeRoleMapped), False,
        "aws-auth maps the node role by an ARN with an IAM path, which the authenticator never matches.",
        "Write the role ARN without its path, as the message shows.";
    NodeRoleMappingMissingGroups => Only(C::NodeRoleMapped), False,
        "The node role's mapping lacks system:bootstrappers or system:nodes.",
        "Add both groups to the mapRoles entry.";
    NodeRoleMappingWrongUsername => Only(C::NodeRoleMapped), False,
        "The node role's mapping does not use the username system:node:{{EC2PrivateDNSName}}.",
        "Set the entry's username to system:node:{{EC2PrivateDNSName}}.";
    AccessEntryWrongType => Only(C::NodeRoleMapped), False,
        "The node role's access entry is not of type EC2_LINUX or EC2_WINDOWS, so nodes lack node permissions.",
        "Recreate the access entry with type EC2_LINUX (or EC2_WINDOWS).";

    // SecurityGroupsReady
    SecurityGroupsValid => Only(C::SecurityGroupsReady), True,
        "The selectors resolve to security groups of this cluster.",
        "Nothing to do.";
    SecurityGroupsNotFound => Only(C::SecurityGroupsReady), False,
        "The security-group selector terms match no security group.",
        "Fix spec.securityGroupSelectorTerms or tag the intended groups.";
    SecurityGroupInOtherVpc => Only(C::SecurityGroupsReady), False,
        "A selected security group is in another VPC than the cluster's, so every launch with it fails.",
        "Select security groups of the cluster's VPC (fix spec.securityGroupSelectorTerms or the groups' tags).";
    SecurityGroupTaggedForOtherCluster => Only(C::SecurityGroupsReady), False,
        "A selected security group is tagged for another cluster and not for this one.",
        "Narrow the selector so it only matches this cluster's groups.";

    // ClusterIdentityUnique
    ClusterIdentityVerified => Only(C::ClusterIdentityUnique), True,
        "Karpenter uses the real cluster name and no foreign instance carries it.",
        "Nothing to do.";
    KarpenterClusterNameMismatch => Only(C::ClusterIdentityUnique), False,
        "Karpenter is configured with a cluster name that differs from the EKS cluster's name.",
        "Set Karpenter's settings.clusterName to the EKS cluster's name.";
    ClusterNameSharedWithOtherCluster => Only(C::ClusterIdentityUnique), False,
        "Instances of another cluster carry this cluster's name; the two Karpenters will drift and terminate each other's nodes.",
        "Give one of the clusters a different name (Karpenter's settings.clusterName and the EKS cluster).";

    // MetadataOptionsSupported
    MetadataOptionsAccepted => Only(C::MetadataOptionsSupported), True,
        "EC2 in this region accepts the metadata options Karpenter sends.",
        "Nothing to do.";
    HttpProtocolIPv6UnsupportedInRegion => Only(C::MetadataOptionsSupported), False,
        "This isolated region rejects httpProtocolIPv6, which this Karpenter version always sends; no node launches.",
        "Upgrade Karpenter to 1.7.0 or later, or remove the httpProtocolIPv6 default from the EC2NodeClass CRD.";

    // LabelsAllowed
    NoRestrictedLabels => Only(C::LabelsAllowed), True,
        "No NodePool or pending workload uses a label domain Karpenter rejects.",
        "Nothing to do.";
    RestrictedLabelDomain => Only(C::LabelsAllowed), False,
        "A NodePool or pending workload uses a label key in a domain this Karpenter version rejects, so NodeClaims cannot be created.",
        "Use a label outside the restricted domain, or upgrade Karpenter to 1.9.0 or later for kubernetes.io labels.";

    // KarpenterStatusConsistent
    KarpenterStatusCurrent => Only(C::KarpenterStatusConsistent), True,
        "Karpenter's EC2NodeClass status is current and self-consistent.",
        "Nothing to do.";
    ValidationStuck => Only(C::KarpenterStatusConsistent), False,
        "Karpenter shows InstanceProfileReady=True while ValidationSucceeded has stayed Unknown too long.",
        "Look for an ARN or missing instance profile; after an IAM fix, add an annotation to refresh Karpenter's cache.";
    ReadyContradictsDependents => Only(C::KarpenterStatusConsistent), False,
        "Karpenter shows Ready=True while one of its own dependent conditions is False.",
        "Restart or upgrade Karpenter; its status is not being recomputed.";
    StatusStale => Only(C::KarpenterStatusConsistent), False,
        "Karpenter has not reconciled the latest generation of the EC2NodeClass for too long.",
        "Check that the Karpenter controller is running and its logs.";

    // NodeClaimsRegistered
    NodeClaimsRegistering => Only(C::NodeClaimsRegistered), True,
        "Every launched NodeClaim registered within the threshold (or none is waiting).",
        "Nothing to do.";
    NodeClaimsNotRegistering => Only(C::NodeClaimsRegistered), False,
        "NodeClaims launched instances that did not register as nodes within the threshold.",
        "Fix the cause named in the message (often NodeRoleMapped or the security groups), then delete the stuck NodeClaims.";

    // ControllerCanLaunch
    ControllerPermissionsVerified => Only(C::ControllerCanLaunch), True,
        "The controller's role exists, trusts the controller's ServiceAccount and may pass the node role, manage instance profiles and launch instances.",
        "Nothing to do.";
    ControllerIdentityNotFound => Only(C::ControllerCanLaunch), Unknown,
        "Neither an IRSA annotation nor an EKS Pod Identity association gives the Karpenter ServiceAccount a role; the controller then uses whatever credentials its node has, which this check cannot see.",
        "Annotate the Karpenter ServiceAccount with eks.amazonaws.com/role-arn, or create a Pod Identity association for it.";
    ControllerRoleNotFound => Only(C::ControllerCanLaunch), False,
        "The IAM role the controller's ServiceAccount names (IRSA annotation or Pod Identity association) does not exist, so the controller gets no credentials.",
        "Create the controller role, or point the annotation or association at the existing role.";
    OidcProviderMissing => Only(C::ControllerCanLaunch), False,
        "IAM has no OpenID Connect provider for the cluster's issuer, so IRSA credentials never work.",
        "Create the IAM OIDC provider for the cluster (eksctl utils associate-iam-oidc-provider --approve, or aws iam create-open-id-connect-provider).";
    ControllerTrustMismatch => Only(C::ControllerCanLaunch), False,
        "The controller role's trust policy does not let the Karpenter ServiceAccount assume it through the cluster's OIDC provider (another ServiceAccount, audience or provider in its conditions).",
        "Let the cluster's OIDC provider call sts:AssumeRoleWithWebIdentity with sub system:serviceaccount:<namespace>:<name> and aud sts.amazonaws.com, as the message shows.";
    PodIdentityTrustMissing => Only(C::ControllerCanLaunch), False,
        "The controller role comes from EKS Pod Identity, but its trust policy does not let pods.eks.amazonaws.com call sts:AssumeRole and sts:TagSession.",
        "Allow the service principal pods.eks.amazonaws.com the actions sts:AssumeRole and sts:TagSession in the role's trust policy.";
    ControllerCannotPassNodeRole => Only(C::ControllerCanLaunch), False,
        "The controller may not iam:PassRole the node role to EC2, so every launch fails (Karpenter shows it only after a launch attempt).",
        "Allow iam:PassRole on the node role's exact ARN (path included) with iam:PassedToService ec2.amazonaws.com; if the message names a permissions boundary or SCP, lift the denial there.";
    ControllerCannotManageInstanceProfiles => Only(C::ControllerCanLaunch), False,
        "spec.role is used, but the controller may not create, tag or fill the instance profile Karpenter makes for it.",
        "Allow iam:CreateInstanceProfile, iam:TagInstanceProfile and iam:AddRoleToInstanceProfile as Karpenter's IAM policy does; if the message names a permissions boundary or SCP, lift the denial there.";
    ControllerCannotLaunchInstances => Only(C::ControllerCanLaunch), False,
        "The controller may not run instances, create fleets or create launch templates with the tags Karpenter sends.",
        "Allow ec2:RunInstances, ec2:CreateFleet and ec2:CreateLaunchTemplate as Karpenter's IAM policy does (check its cluster-name tag conditions); if the message names a permissions boundary or SCP, lift the denial there.";
    ControllerCannotReadAmiParameters => Only(C::ControllerCanLaunch), False,
        "The class selects its images by alias, but the controller may not ssm:GetParameter the public parameter the alias resolves through, and Karpenter holds no image resolved for the class's current generation, so it resolves none and launches nothing; its EC2NodeClass status does not say why (the error is only in its log). While it holds images from before, this is the warning ControllerImageReadsDeniedWhileImagesKept.",
        "Allow ssm:GetParameter on arn:<partition>:ssm:<region>::parameter/aws/service/* as Karpenter's IAM policy does (AllowSSMReadActions); if the message names a permissions boundary or SCP, lift the denial there.";
    ControllerCannotDescribeImages => Only(C::ControllerCanLaunch), False,
        "The controller may not ec2:DescribeImages, which Karpenter calls to resolve every image of a class (an alias's image id too), and Karpenter holds no image resolved for the class's current generation, so it resolves none and launches nothing; its EC2NodeClass status does not say why (the error is only in its log). While it holds images from before, this is the warning ControllerImageReadsDeniedWhileImagesKept.",
        "Allow ec2:DescribeImages in the cluster's region as Karpenter's IAM policy does (AllowRegionalReadActions); if the message names a permissions boundary or SCP, lift the denial there.";

    // InterruptionHandlingReady
    InterruptionHandlingConfigured => Only(C::InterruptionHandlingReady), True,
        "The interruption queue exists, accepts EventBridge's messages and is fed by enabled rules for every kind of event this class's nodes can get (kinds they cannot get yet are warnings).",
        "Nothing to do.";
    InterruptionHandlingDisabled => Only(C::InterruptionHandlingReady), True,
        "Karpenter has no interruption queue configured, so there is nothing to check (spot NodePools get a warning).",
        "Nothing to do, unless you use spot: then set Karpenter's settings.interruptionQueue.";
    InterruptionQueueNotAName => Only(C::InterruptionHandlingReady), False,
        "Karpenter's interruption queue setting is an ARN or URL; Karpenter looks it up as a queue name, so interruption handling never starts.",
        "Set settings.interruptionQueue (INTERRUPTION_QUEUE) to the queue's name, the last part of the ARN or URL.";
    InterruptionQueueNotFound => Only(C::InterruptionHandlingReady), False,
        "SQS has no queue of the configured name in this region, so Karpenter handles no interruption.",
        "Create the queue (Karpenter's CloudFormation template does), or fix settings.interruptionQueue.";
    InterruptionQueuePolicyMissing => Only(C::InterruptionHandlingReady), False,
        "The interruption queue's policy does not let events.amazonaws.com and sqs.amazonaws.com send messages to it, so EventBridge's events never arrive.",
        "Add the queue policy statement of Karpenter's CloudFormation template (Allow sqs:SendMessage to the services events.amazonaws.com and sqs.amazonaws.com).";
    InterruptionRulesMissing => Only(C::InterruptionHandlingReady), False,
        "No enabled EventBridge rule sends some of the events this EC2NodeClass's nodes can get (instance state change and scheduled change always; spot interruption and rebalance when a NodePool allows spot; capacity-reservation interruption, Karpenter 1.10+, when the class selects an interruptible capacity reservation or a NodePool asks for one) to the queue.",
        "Create the missing rules of Karpenter's CloudFormation template on the default event bus with the queue as their target.";
    InterruptionQueueKeyUnusable => Only(C::InterruptionHandlingReady), False,
        "The interruption queue is encrypted with a KMS key EventBridge cannot use (the AWS managed key alias/aws/sqs, a key that is missing or disabled, or one whose key policy does not let events.amazonaws.com call kms:GenerateDataKey and kms:Decrypt), so EventBridge drops every event it sends.",
        "Encrypt the queue with SSE-SQS (SqsManagedSseEnabled), or with a customer managed key whose key policy allows the service principal events.amazonaws.com kms:GenerateDataKey and kms:Decrypt.";

    // SpotReady
    SpotNotUsed => Only(C::SpotReady), True,
        "No NodePool of this EC2NodeClass allows spot capacity.",
        "Nothing to do.";
    SpotServiceLinkedRoleExists => Only(C::SpotReady), True,
        "A NodePool allows spot and the AWSServiceRoleForEC2Spot service-linked role exists.",
        "Nothing to do.";
    SpotServiceLinkedRoleMissing => Only(C::SpotReady), False,
        "A NodePool allows spot, but the account has no AWSServiceRoleForEC2Spot service-linked role, so spot launches fail and Karpenter silently falls back to on-demand.",
        "Create it once per account: aws iam create-service-linked-role --aws-service-name spot.amazonaws.com.";

    // SubnetsReady
    SubnetsValid => Only(C::SubnetsReady), True,
        "The selected subnets exist, are in the cluster's VPC, and a zone the class launches into has one with room for a node (zones without, or short of the VPC CNI's warm pool, are warnings).",
        "Nothing to do.";
    SubnetsNotFound => Only(C::SubnetsReady), False,
        "The subnet selector terms match no subnet, or a subnet in Karpenter's status.subnets no longer exists.",
        "Fix spec.subnetSelectorTerms or tag the intended subnets; recreate or deselect a deleted subnet.";
    SubnetInOtherVpc => Only(C::SubnetsReady), False,
        "A selected subnet is in another VPC than the cluster's, so nodes launched there cannot join (Karpenter reports SecurityGroupSubnetVPCMismatch only after a failed launch).",
        "Select subnets of the cluster's VPC only (fix spec.subnetSelectorTerms or the subnets' tags).";
    SubnetsOutOfAddresses => Only(C::SubnetsReady), False,
        "In every zone the class can launch into, no selected subnet has what a node needs for certain: one free address for the launch (else InsufficientFreeAddressesInSubnet), and one more for a Pod where the VPC CNI gives Pods addresses from the node's subnet (not with custom networking, IPv6 or another CNI).",
        "Free addresses (delete unused ENIs), add larger subnets (or a secondary CIDR) and tag them for the selector, or move Pod addresses off the node subnets (VPC CNI custom networking).";

    // NodeNetworkReady
    NodeNetworkValid => Only(C::NodeNetworkReady), True,
        "Every selected subnet routes to a NAT or internet gateway, or the VPC has the endpoints a private cluster needs, and the VPC resolves DNS.",
        "Nothing to do.";
    NodeEgressNotInspected => Only(C::NodeNetworkReady), True,
        "A selected subnet's default route leads to a target this check cannot see through (transit gateway, peering, virtual private gateway, network interface, core network, private NAT, a Gateway Load Balancer or Network Firewall endpoint), or the subnet is in a VPC another account shares through AWS RAM, whose NAT gateways and endpoints this account cannot list; the rest is healthy.",
        "Nothing to do if that path reaches the EKS endpoint and the AWS APIs; the message names what was not checked.";
    SubnetNoEgressRoute => Only(C::NodeNetworkReady), False,
        "A selected subnet's route table has no default route and the VPC has none of the endpoints a private cluster needs, so nodes cannot reach the control plane or AWS and never join.",
        "Add a default route to a NAT gateway (or an internet gateway for public subnets), or create the VPC endpoints ec2, ecr.api, ecr.dkr, sts, ssm and the s3 gateway endpoint.";
    SubnetEgressBlackholed => Only(C::NodeNetworkReady), False,
        "A selected subnet's default route points at a NAT or internet gateway that is deleted, failed or blackholed, and the VPC endpoints do not make up for it.",
        "Point the default route at a working NAT gateway (or internet gateway), or create the missing VPC endpoints.";
    InternetGatewayWithoutPublicIp => Only(C::NodeNetworkReady), False,
        "A selected subnet routes to an internet gateway, but nodes get no public IPv4 address there (the subnet does not map one and spec.associatePublicIPAddress is not true), so they cannot reach anything beyond the VPC.",
        "Set spec.associatePublicIPAddress: true, enable MapPublicIpOnLaunch on the subnet, or route it through a NAT gateway.";
    VpcEndpointsMissing => Only(C::NodeNetworkReady), False,
        "A selected subnet has no default route to a gateway and the VPC lacks some of the endpoints a private cluster needs (or an interface endpoint has private DNS off).",
        "Create the endpoints the message names (interface endpoints with private DNS on; the s3 gateway endpoint associated with the subnet's route table).";
    VpcDnsDisabled => Only(C::NodeNetworkReady), False,
        "The VPC has enableDnsSupport or enableDnsHostnames off, so nodes cannot resolve the cluster endpoint or register with their DNS names.",
        "Turn on both attributes: aws ec2 modify-vpc-attribute --enable-dns-support and --enable-dns-hostnames.";
    // VolumeEncryptionReady
    VolumeEncryptionNotUsed => Only(C::VolumeEncryptionReady), True,
        "No volume of this EC2NodeClass is encrypted with a KMS key (no key named, no encrypted volume, default encryption off), so there is nothing to check.",
        "Nothing to do.";
    VolumeEncryptionKeysUsable => Only(C::VolumeEncryptionReady), True,
        "Every KMS key the volumes are encrypted with exists, is enabled and lets EC2 use it (or is the AWS-managed aws/ebs key).",
        "Nothing to do.";
    KmsKeyNotFound => Only(C::VolumeEncryptionReady), False,
        "KMS has no key of the id, ARN or alias the volumes are encrypted with, so every launch fails and the node terminates at once (Client.InternalError).",
        "Point blockDeviceMappings[].ebs.kmsKeyID (or the account's default EBS key) at an existing key.";
    KmsKeyDisabled => Only(C::VolumeEncryptionReady), False,
        "The KMS key the volumes are encrypted with is disabled, so EC2 cannot create the volumes and the node terminates seconds after launch.",
        "Enable the key (aws kms enable-key), or use another key.";
    KmsKeyPendingDeletion => Only(C::VolumeEncryptionReady), False,
        "The KMS key the volumes are encrypted with is scheduled for deletion, so EC2 cannot use it and nodes terminate seconds after launch.",
        "Cancel the deletion (aws kms cancel-key-deletion, then enable the key), or use another key.";
    KmsKeyPendingImport => Only(C::VolumeEncryptionReady), False,
        "The KMS key the volumes are encrypted with has no key material imported yet, so EC2 cannot use it.",
        "Import the key material (aws kms import-key-material), or use another key.";
    KmsKeyStateTransient => Only(C::VolumeEncryptionReady), Unknown,
        "The KMS key is in a state other than Enabled, Disabled, PendingDeletion or PendingImport (Creating, Updating, Unavailable), so whether EC2 can use it is not decided.",
        "Wait for the key to settle; if it stays Unavailable, reconnect its custom key store.";
    KmsKeyPolicyDeniesEc2 => Only(C::VolumeEncryptionReady), False,
        "Neither the key policy nor a grant to the Karpenter controller's role lets EC2 use the key: the policy does not delegate to the account (its root), and the actions EC2 needs (kms:CreateGrant, kms:Decrypt, kms:GenerateDataKeyWithoutPlaintext, kms:ReEncrypt*, kms:DescribeKey) are allowed neither to the controller's role nor through ec2.<region>.amazonaws.com, so nodes terminate seconds after launch.",
        "Add a key policy statement allowing those actions to the Karpenter controller's role (or to the account root, and then in the role's IAM policies), or with kms:ViaService ec2.<region>.amazonaws.com and kms:CallerAccount of the account.";
    KmsKeyNotAllowedForController => Only(C::VolumeEncryptionReady), False,
        "The key's policy leaves its use to the account's IAM policies (it allows the account root), and the Karpenter controller role's own policies (or a boundary or SCP) do not allow EC2 to use it on the controller's behalf (kms:CreateGrant, kms:Decrypt, kms:GenerateDataKeyWithoutPlaintext, kms:ReEncrypt*, kms:DescribeKey through ec2.<region>.amazonaws.com), so every node terminates seconds after launch (aws/karpenter-provider-aws #3767).",
        "Allow the controller role those actions on the key's ARN with the condition kms:ViaService ec2.<region>.amazonaws.com, or name the role in the key policy; if the message names a boundary or SCP, lift the denial there.";

    // KarpenterVersionCompatible
    KarpenterVersionSupported => Only(C::KarpenterVersionCompatible), True,
        "Karpenter supports the cluster's Kubernetes version, its CRDs match the controller, no v1beta1 is stored and every webhook reaches a ready Service.",
        "Nothing to do.";
    KubernetesVersionUnsupported => Only(C::KarpenterVersionCompatible), False,
        "The installed Karpenter is older than the first release that supports the cluster's Kubernetes version (karpenter.sh compatibility matrix).",
        "Upgrade Karpenter (controller and CRDs) to at least the version the message names, before or with the cluster upgrade.";
    KubernetesVersionNotInMatrix => Only(C::KarpenterVersionCompatible), Unknown,
        "The cluster's Kubernetes version is newer (or older) than the compatibility matrix this karpenter-health knows, so it cannot say whether Karpenter supports it.",
        "Check the karpenter.sh compatibility page by hand, and upgrade karpenter-health.";
    CrdsOlderThanController => Only(C::KarpenterVersionCompatible), False,
        "The installed Karpenter CRDs lack schema fields the controller's release writes or reads, so the API server prunes them: the CRDs were not upgraded with the controller.",
        "Apply the CRDs of the controller's release (the karpenter-crd chart, or the chart's crds/ directory: helm does not upgrade CRDs).";
    StoredVersionsStale => Only(C::KarpenterVersionCompatible), False,
        "A Karpenter CRD still lists v1beta1 in status.storedVersions on Karpenter 1.1 or later, which dropped v1beta1 and its conversion webhook, so applying the new CRDs fails.",
        "Migrate stored objects to v1 (re-write them), then remove v1beta1 from status.storedVersions of the CRD named.";
    WebhookServiceMissing => Only(C::KarpenterVersionCompatible), False,
        "A Karpenter webhook (admission, or the conversion webhook of a CRD that serves or stores more than one version) points at a Service that does not exist or has no ready endpoints, so the API server fails the requests it sends there.",
        "Delete the leftover webhook configuration (or the CRD's spec.conversion webhook), or restore the Service the message names.";

    // InstanceTypesAvailable
    InstanceTypesOffered => Only(C::InstanceTypesAvailable), True,
        "Every NodePool of this EC2NodeClass allows instance types EC2 offers in the zones of the class's subnets (or no NodePool uses the class).",
        "Nothing to do.";
    NoInstanceTypeMatchesRequirements => Only(C::InstanceTypesAvailable), False,
        "A NodePool's requirements (instance type, family, category, generation, size, vCPUs, memory, architecture, capacity type) leave no instance type that EC2 offers in the zones of the class's subnets (reserved capacity only where the class has a reservation), or fewer distinct values of a key than its minValues under Karpenter's Strict policy, so Karpenter can launch nothing for it and only emits a NoCompatibleInstanceTypes Event per Pod (aws/karpenter-provider-aws #6884, #7713, #8535).",
        "Widen or correct the requirement the message names (a family or size that does not exist in this region, bounds that exclude every type, a capacity type no allowed type has, a minValues above what is left).";
    RequiredZonesWithoutSubnets => Only(C::InstanceTypesAvailable), False,
        "A NodePool requires zones (topology.kubernetes.io/zone) in which the EC2NodeClass selects no subnet, so no node of it can launch.",
        "Tag a subnet in a required zone for the class's subnetSelectorTerms, or require a zone the class's subnets are in.";
    NoInstanceTypeForAmiArchitecture => Only(C::InstanceTypesAvailable), False,
        "Every instance type a NodePool allows has an architecture none of the class's AMIs (status.amis) is built for, so Karpenter cannot pair an image with any of them.",
        "Allow the AMIs' architecture in the NodePool (kubernetes.io/arch), or select AMIs of the architecture the NodePool asks for.";

    // LimitsLeaveRoom
    NodePoolsHaveRoom => Only(C::LimitsLeaveRoom), True,
        "Some NodePool of this EC2NodeClass can still launch an instance type it allows under its spec.limits, or no Pod waits for one (a NodePool at its limits is a warning then).",
        "Nothing to do.";
    NodePoolLimitsReached => Only(C::LimitsLeaveRoom), False,
        "Pods that only this EC2NodeClass can take wait, and every NodePool of the class has used up a limit of its spec.limits (cpu or memory, in status.resources), so Karpenter launches nothing for them.",
        "Raise the NodePool's spec.limits, add a NodePool with room, or free capacity (consolidation, fewer replicas).";
    NodePoolLimitsBelowSmallestInstance => Only(C::LimitsLeaveRoom), False,
        "Pods that only this EC2NodeClass can take wait, and the cpu left under each NodePool's spec.limits is smaller than every instance type the NodePool allows, so no launch fits.",
        "Raise limits.cpu to at least the vCPUs of the smallest instance type the NodePool allows, or allow smaller instance types.";
    VcpuQuotaExhausted => Only(C::LimitsLeaveRoom), False,
        "Pods that only this EC2NodeClass can take wait, and every NodePool of the class allows only standard (A, C, D, H, I, M, R, T, Z) instances, none of which fits under the account's vCPU quota for its capacity types in this region (Service Quotas L-1216C47A on-demand, L-34B43A08 spot) given what this cluster's own instances already run, so EC2 refuses every launch (VcpuLimitExceeded, MaxSpotInstanceCountExceeded).",
        "Request a quota increase in Service Quotas (EC2, the quota the message names), free vCPUs, or allow instance types of another quota or capacity type.";

    // DriftCanBeReplaced
    DriftReplaceable => Only(C::DriftCanBeReplaced), True,
        "No NodeClaim of this EC2NodeClass is drifted, or Karpenter replaces drifted NodeClaims as their NodePools' budgets allow; NodeClaims held by a budget that switches drift off (a decision) are the warning DriftHeldByBudget, never False.",
        "Nothing to do.";

    // AmisResolvable
    AmisResolved => Only(C::AmisResolvable), True,
        "The EC2NodeClass's alias is published for the cluster's Kubernetes version, or the images Karpenter resolved are of the family amiFamily writes user data for (or not official EKS builds, which are not judged).",
        "Nothing to do.";
    AmiAliasNotPublished => Only(C::AmisResolvable), False,
        "The EC2NodeClass's alias (amiSelectorTerms[].alias, family@version) resolves through SSM parameters AWS has not published for the cluster's Kubernetes version (for a pinned release: it was never built for that version), so Karpenter resolves no image and launches no node for the class (aws/karpenter-provider-aws #7457, #8564).",
        "Pin a release AWS published for the cluster's Kubernetes version (aws ssm get-parameters-by-path --path /aws/service/eks/optimized-ami/<version>/ lists them), or use @latest.";
    AmiAliasUnsupported => Only(C::AmisResolvable), False,
        "Karpenter refuses the EC2NodeClass's alias at the cluster's Kubernetes version before resolving anything: al2 aliases from 1.33 (Karpenter 1.6 and later; AWS builds no Amazon Linux 2 image for 1.33), windows2025 aliases before 1.35 (Karpenter 1.9 and later). It sets AMIsReady=False UnsupportedAlias and launches no node for the class (aws/karpenter-provider-aws pkg/providers/amifamily/ami.go).",
        "Move an al2 class to al2023@latest or bottlerocket@latest (and its userData to that family's format); use windows2022@latest until the cluster runs 1.35.";
    AmiUnavailable => Only(C::AmisResolvable), False,
        "The selector terms name images by id only, and EC2 has none of them that can launch: each is deregistered, no longer shared with this account, or disabled, so Karpenter resolves no image and launches nothing.",
        "Select images that exist (a current id, an alias, or tags and names); or share the image with this account again, or re-enable it (aws ec2 enable-image).";
    AmiFamilyMismatch => Only(C::AmisResolvable), False,
        "spec.amiFamily makes Karpenter write user data for one family (nodeadm for AL2023, bootstrap.sh for AL2, TOML for Bottlerocket, PowerShell for Windows), but every image the selector terms resolve is an official EKS build of another family, so nodes boot, cannot read their user data, and never join (aws/karpenter-provider-aws #5940).",
        "Set amiFamily to the images' family, or change amiSelectorTerms to select images of amiFamily's family (an alias selects both at once).";

    // CapacityReservationsUsable
    NoCapacityReservationsSelected => Only(C::CapacityReservationsUsable), True,
        "The EC2NodeClass selects no capacity reservation (capacityReservationSelectorTerms is empty).",
        "Nothing to do.";
    CapacityReservationsSelected => Only(C::CapacityReservationsUsable), True,
        "The EC2NodeClass selects active capacity reservations in zones it has subnets in, or no NodePool of it needs reserved capacity (see the warnings).",
        "Nothing to do.";
    ReservedCapacityDisabled => Only(C::CapacityReservationsUsable), False,
        "The EC2NodeClass selects capacity reservations and every NodePool of it allows only reserved capacity (karpenter.sh/capacity-type In [reserved]), but the Karpenter controller runs with its ReservedCapacity feature gate off (off by default before 1.6), so it offers no reserved capacity and launches nothing for the class.",
        "Turn the gate on (the chart's settings.featureGates.reservedCapacity, FEATURE_GATES=ReservedCapacity=true), or allow on-demand capacity in the NodePools.";
    CapacityReservationsNotFound => Only(C::CapacityReservationsUsable), False,
        "The EC2NodeClass selects no capacity reservation Karpenter can launch into: it has no capacityReservationSelectorTerms, its terms match no active reservation (Karpenter's status.capacityReservations is empty while its CapacityReservationsReady is True, which it is even when nothing matches), or every match is an expiring capacity block. Every NodePool of the class allows only reserved capacity, which Karpenter offers only for the class's reservations that are not expiring (aws/karpenter-provider-aws pkg/providers/instancetype/offering/reserved_capacity_resolver.go), so it launches nothing (#8514).",
        "Select an active reservation that is not ending (fix the selector terms: id, tags, ownerID, instanceMatchCriteria), renew it, or allow on-demand capacity in the NodePools.";
    CapacityReservationsOnlyInZonesWithoutSubnets => Only(C::CapacityReservationsUsable), False,
        "Every capacity reservation the EC2NodeClass selects is in an availability zone the class has no subnet in, and every NodePool of the class allows only reserved capacity, so Karpenter can launch into none of them and launches nothing.",
        "Select a subnet in the reservations' zones, or reservations in the subnets' zones.";

    // Ready (summary)
    AllChecksPassed => Only(C::Ready), True,
        "Every sub-condition is True.",
        "Nothing to do.";
    MultipleChecksFailed => Only(C::Ready), False,
        "Sub-conditions are False for more than one reason (one reason alone is named instead).",
        "Fix the False conditions listed in the message and in `notReady`.";
    MultipleChecksUnknown => Only(C::Ready), Unknown,
        "No sub-condition is False, and the Unknown ones have more than one reason.",
        "See the Unknown conditions listed in the message and in `notReady`.";
}

impl Reason {
    /// Whether this reason may be used on `condition` (the closed list per condition). `Ready`
    /// carries its own reasons, or the one reason of the sub-conditions that keep it from `True`,
    /// so `kubectl get` names the problem rather than a category.
    pub fn applies_to(self, condition: ConditionType) -> bool {
        let meta = self.meta();
        match meta.scope {
            ReasonScope::Only(c) if c == condition => true,
            _ if condition == ConditionType::Ready => meta.status != ConditionStatus::True,
            ReasonScope::Only(_) => false,
            ReasonScope::AnySubCondition => true,
        }
    }

    /// The anchor of this reason in docs/checks.md.
    pub fn docs_anchor(self) -> String {
        format!("docs/checks.md#{}", self.as_str().to_ascii_lowercase())
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests;

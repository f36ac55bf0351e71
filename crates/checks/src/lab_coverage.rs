//! Which reasons the lab proves against the real Karpenter controller (`e2e/tests/lab_*.rs`:
//! a scenario in which the controller is seen doing what the reason's message says, and its
//! healthy twin), and for each other reason that can be False, why the lab cannot. Pure data,
//! rendered into docs/checks.md; a test fails when a reason that can be False has no entry.

use karpenter_health_api::Reason;

/// What the lab says of one reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lab {
    /// Proven by this e2e test (`file::function`).
    Proven(&'static str),
    /// Not proven against the real controller, for this reason.
    NotProven(&'static str),
}

const NO_IAM: &str = "moto enforces no IAM policy and keeps no permissions boundary or SCP, so \
    the real controller is never refused; the verdict is proven against IAM's documented \
    evaluation by the gap proxy's simulator (operator_controller_wiring) instead.";
const KUBELET: &str = "what the instance and its kubelet do with this setup (join, authenticate, \
    pull images) is the node stand-in's to say, not the real kubelet's; the lab can only be told \
    that a node never joins, which the aws-auth scenario shows.";
const NETWORK: &str = "moto launches instances whatever their subnet's routes, endpoints, DNS or \
    free addresses, and the stand-in makes their Nodes regardless: the failure happens on the \
    node, which the lab does not run.";
const KMS: &str = "moto launches instances whose volumes use any key and never terminates them \
    with Client.InternalError; EC2's key checks are not emulated.";
const INTERRUPTION: &str = "moto's EventBridge does not deliver EC2's events to the queue, so \
    what Karpenter misses without them cannot be observed; a missing queue is proven instead \
    (InterruptionQueueNotFound).";
const SPOT: &str = "moto launches spot capacity without the service-linked role; EC2's refusal \
    and Karpenter's fallback to on-demand are not emulated.";
const VERSIONS: &str = "the lab runs the CRDs of the release it builds on one Kubernetes version; \
    older CRDs, stored versions and webhooks of earlier releases are not reproduced.";
const STATUS_TIMING: &str = "a contradiction or lag in Karpenter's status needs a controller \
    that misbehaves or stops; the real one in the lab does neither.";
const AMI_CATALOGUE: &str = "the gap proxy publishes the current EKS image parameters only; \
    releases AWS never built, and the images of another family, are not in its catalogue.";
const RESERVATIONS: &str = "moto has no capacity reservations; the gap proxy answers \
    DescribeCapacityReservations from test data, which Karpenter reads but cannot launch into.";
const SUMMARY: &str = "a summary of other conditions, not a claim about Karpenter.";

/// Every reason that can be False, with what the lab says of it.
pub const LAB: &[(Reason, Lab)] = &[
    (
        Reason::InstanceProfileIsArn,
        Lab::Proven(
            "lab_classic_failures::an_instance_profile_arn_leaves_validation_unknown_and_karpenter_launches_nothing",
        ),
    ),
    (
        Reason::ValidationStuck,
        Lab::Proven(
            "lab_classic_failures::an_instance_profile_arn_leaves_validation_unknown_and_karpenter_launches_nothing",
        ),
    ),
    (
        Reason::ControllerRoleMappedInstead,
        Lab::Proven(
            "lab_classic_failures::aws_auth_mapping_the_controller_role_leaves_launched_nodes_unregistered",
        ),
    ),
    (
        Reason::NodeClaimsNotRegistering,
        Lab::Proven(
            "lab_classic_failures::aws_auth_mapping_the_controller_role_leaves_launched_nodes_unregistered",
        ),
    ),
    (
        Reason::RestrictedLabelDomain,
        Lab::Proven(
            "lab_classic_failures::a_node_role_label_is_refused_where_karpenter_restricts_it_and_launched_where_not (refused on v1.8.6, launched on v1.14.1)",
        ),
    ),
    (
        Reason::ClusterNameSharedWithOtherCluster,
        Lab::Proven(
            "lab_classic_failures::another_clusters_instances_under_the_same_name_are_terminated_by_karpenter",
        ),
    ),
    (
        Reason::HttpProtocolIPv6UnsupportedInRegion,
        Lab::NotProven(
            "only its True side: lab_classic_failures::in_an_isolated_region_karpenter_1_7_and_later_launches_and_the_check_agrees shows 1.7 and later launching there while the bed refuses the option as EC2 does. The False side needs Karpenter before 1.7, which the Go module proxy does not serve.",
        ),
    ),
    (
        Reason::SubnetsNotFound,
        Lab::Proven("lab_reasons::a_subnet_selector_matching_nothing_launches_nothing"),
    ),
    (
        Reason::SecurityGroupsNotFound,
        Lab::Proven("lab_reasons::a_security_group_selector_matching_nothing_launches_nothing"),
    ),
    (
        Reason::NoInstanceTypeMatchesRequirements,
        Lab::Proven("lab_reasons::requirements_no_instance_type_meets_launch_nothing"),
    ),
    (
        Reason::RequiredZonesWithoutSubnets,
        Lab::Proven("lab_reasons::a_required_zone_without_a_subnet_launches_nothing"),
    ),
    (
        Reason::NoInstanceTypeForAmiArchitecture,
        Lab::Proven("lab_reasons::an_architecture_the_images_are_not_built_for_launches_nothing"),
    ),
    (
        Reason::AmiUnavailable,
        Lab::Proven("lab_reasons::an_image_ec2_no_longer_has_launches_nothing"),
    ),
    (
        Reason::NodePoolLimitsReached,
        Lab::Proven(
            "lab_reasons::pods_beyond_the_node_pools_limit_wait_and_the_scale_up_to_it_is_never_false",
        ),
    ),
    (
        Reason::InterruptionQueueNotFound,
        Lab::Proven("lab_reasons::an_interruption_queue_sqs_does_not_have_is_never_read"),
    ),
    (
        Reason::InstanceProfileNameInvalid,
        Lab::NotProven(
            "the CRD's own rules refuse most such names before Karpenter sees them; the ARN case is proven (InstanceProfileIsArn).",
        ),
    ),
    (
        Reason::InstanceProfileNotFound,
        Lab::NotProven(
            "EC2's refusal of a profile that does not exist is not emulated (only a name that is no IAM name is); Karpenter from 1.x does not ask IAM for a named profile.",
        ),
    ),
    (Reason::InstanceProfileHasNoRole, Lab::NotProven(KUBELET)),
    (Reason::InstanceProfileRoleMismatch, Lab::NotProven(KUBELET)),
    (Reason::NodeRoleNotFound, Lab::NotProven(NO_IAM)),
    (
        Reason::NodeRoleIsArn,
        Lab::NotProven(
            "the CRD's own rules refuse an ARN in spec.role on the releases the lab runs.",
        ),
    ),
    (Reason::NodeRoleNameTooLong, Lab::NotProven(NO_IAM)),
    (Reason::NodeRoleTrustPolicyInvalid, Lab::NotProven(KUBELET)),
    (Reason::NodeRoleMissingPolicies, Lab::NotProven(KUBELET)),
    (Reason::AwsAuthMissing, Lab::NotProven(KUBELET)),
    (Reason::AwsAuthMalformed, Lab::NotProven(KUBELET)),
    (Reason::NodeRoleNotMapped, Lab::NotProven(KUBELET)),
    (Reason::NodeRoleMappedWithPath, Lab::NotProven(KUBELET)),
    (
        Reason::NodeRoleMappingMissingGroups,
        Lab::NotProven(KUBELET),
    ),
    (
        Reason::NodeRoleMappingWrongUsername,
        Lab::NotProven(KUBELET),
    ),
    (Reason::AccessEntryWrongType, Lab::NotProven(KUBELET)),
    (
        Reason::SecurityGroupInOtherVpc,
        Lab::NotProven(
            "EC2 refuses a launch with a security group of another VPC; moto does not, and the gap proxy does not emulate it yet.",
        ),
    ),
    (
        Reason::SecurityGroupTaggedForOtherCluster,
        Lab::NotProven("a claim about the other cluster's controller, which the lab does not run."),
    ),
    (
        Reason::KarpenterClusterNameMismatch,
        Lab::NotProven(
            "a mismatch with the operator's own setting, not a claim about Karpenter's behaviour.",
        ),
    ),
    (
        Reason::ReadyContradictsDependents,
        Lab::NotProven(STATUS_TIMING),
    ),
    (Reason::StatusStale, Lab::NotProven(STATUS_TIMING)),
    (Reason::ControllerRoleNotFound, Lab::NotProven(NO_IAM)),
    (Reason::OidcProviderMissing, Lab::NotProven(NO_IAM)),
    (Reason::ControllerTrustMismatch, Lab::NotProven(NO_IAM)),
    (Reason::PodIdentityTrustMissing, Lab::NotProven(NO_IAM)),
    (Reason::ControllerCannotPassNodeRole, Lab::NotProven(NO_IAM)),
    (
        Reason::ControllerCannotManageInstanceProfiles,
        Lab::NotProven(NO_IAM),
    ),
    (
        Reason::ControllerCannotLaunchInstances,
        Lab::NotProven(NO_IAM),
    ),
    (
        Reason::ControllerCannotReadAmiParameters,
        Lab::NotProven(NO_IAM),
    ),
    (
        Reason::ControllerCannotDescribeImages,
        Lab::NotProven(NO_IAM),
    ),
    (
        Reason::InterruptionQueueNotAName,
        Lab::NotProven(INTERRUPTION),
    ),
    (
        Reason::InterruptionQueuePolicyMissing,
        Lab::NotProven(INTERRUPTION),
    ),
    (
        Reason::InterruptionRulesMissing,
        Lab::NotProven(INTERRUPTION),
    ),
    (
        Reason::InterruptionQueueKeyUnusable,
        Lab::NotProven(INTERRUPTION),
    ),
    (Reason::SpotServiceLinkedRoleMissing, Lab::NotProven(SPOT)),
    (Reason::SubnetInOtherVpc, Lab::NotProven(NETWORK)),
    (Reason::SubnetsOutOfAddresses, Lab::NotProven(NETWORK)),
    (Reason::SubnetNoEgressRoute, Lab::NotProven(NETWORK)),
    (Reason::SubnetEgressBlackholed, Lab::NotProven(NETWORK)),
    (
        Reason::InternetGatewayWithoutPublicIp,
        Lab::NotProven(NETWORK),
    ),
    (Reason::VpcEndpointsMissing, Lab::NotProven(NETWORK)),
    (Reason::VpcDnsDisabled, Lab::NotProven(NETWORK)),
    (Reason::KmsKeyNotFound, Lab::NotProven(KMS)),
    (Reason::KmsKeyDisabled, Lab::NotProven(KMS)),
    (Reason::KmsKeyPendingDeletion, Lab::NotProven(KMS)),
    (Reason::KmsKeyPendingImport, Lab::NotProven(KMS)),
    (Reason::KmsKeyPolicyDeniesEc2, Lab::NotProven(KMS)),
    (Reason::KmsKeyNotAllowedForController, Lab::NotProven(KMS)),
    (
        Reason::KubernetesVersionUnsupported,
        Lab::NotProven(
            "the lab runs one Kubernetes version (1.34), which both releases it builds support.",
        ),
    ),
    (Reason::CrdsOlderThanController, Lab::NotProven(VERSIONS)),
    (Reason::StoredVersionsStale, Lab::NotProven(VERSIONS)),
    (Reason::WebhookServiceMissing, Lab::NotProven(VERSIONS)),
    (
        Reason::NodePoolLimitsBelowSmallestInstance,
        Lab::NotProven(
            "not scripted yet: the same refusal as NodePoolLimitsReached with a limit below one node.",
        ),
    ),
    (
        Reason::VcpuQuotaExhausted,
        Lab::NotProven("moto keeps no vCPU quota and never answers VcpuLimitExceeded."),
    ),
    (Reason::AmiAliasNotPublished, Lab::NotProven(AMI_CATALOGUE)),
    (
        Reason::AmiAliasUnsupported,
        Lab::Proven(
            "lab_reasons::an_al2_alias_is_refused_from_kubernetes_1_33_and_launches_nothing",
        ),
    ),
    (Reason::AmiFamilyMismatch, Lab::NotProven(AMI_CATALOGUE)),
    (
        Reason::ReservedCapacityDisabled,
        Lab::NotProven(RESERVATIONS),
    ),
    (
        Reason::CapacityReservationsNotFound,
        Lab::NotProven(RESERVATIONS),
    ),
    (
        Reason::CapacityReservationsOnlyInZonesWithoutSubnets,
        Lab::NotProven(RESERVATIONS),
    ),
    (Reason::MultipleChecksFailed, Lab::NotProven(SUMMARY)),
];

/// What the lab says of `reason`, if it can be False.
pub fn lab(reason: Reason) -> Option<Lab> {
    LAB.iter().find(|(r, _)| *r == reason).map(|(_, lab)| *lab)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_that_can_be_false_says_whether_the_lab_proves_it() {
        for &reason in Reason::ALL {
            if reason.meta().status == karpenter_health_api::ConditionStatus::False {
                assert!(
                    lab(reason).is_some(),
                    "{reason} has no lab entry in lab_coverage.rs"
                );
            }
        }
        let proven = LAB
            .iter()
            .filter(|(_, l)| matches!(l, Lab::Proven(_)))
            .count();
        assert!(
            proven >= 13,
            "the five classic failures and at least eight more: {proven}"
        );
    }

    #[test]
    fn each_reason_is_listed_once() {
        let mut seen = std::collections::BTreeSet::new();
        for (reason, _) in LAB {
            assert!(seen.insert(reason.as_str()), "{reason} listed twice");
        }
    }
}

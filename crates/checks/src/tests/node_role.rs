//! Scenarios of `NodeRoleReady`: the CNI policy is not required of the node role when aws-node
//! has its own role, through IRSA or EKS Pod Identity, and an unread association is Unknown. Pure.

use super::reasons::status;
use super::{failures, pair};
use crate::facts::{Facts, Observed, UnknownCause};
use crate::testing::*;
use karpenter_health_api::{ConditionType, Reason};

#[test]
fn the_cni_policy_is_not_required_when_aws_node_has_its_own_role() {
    let facts = Facts::healthy().with(|f| {
        f.cluster.aws_node_role_arn = Observed::Found(Some(role_arn("AmazonEKSVPCCNIRole")));
        if let Some(Observed::Found(r)) = &mut f.aws.node_role {
            r.attached_policy_arns = Observed::Found(vec![
                managed_policy_arn("AmazonEKSWorkerNodePolicy"),
                managed_policy_arn("AmazonEC2ContainerRegistryPullOnly"),
                managed_policy_arn("AmazonSSMManagedInstanceCore"),
            ]);
        }
    });
    assert!(failures(&status(&facts)).is_empty());
    let unknown_cni = facts
        .with(|f| f.cluster.aws_node_role_arn = unknown(crate::facts::UnknownCause::AccessDenied));
    let c = status(&unknown_cni)
        .condition(ConditionType::NodeRoleReady)
        .cloned()
        .expect("present");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("Unknown", "AwsAccessDenied"),
        "{}",
        c.message
    );
    let without_irsa = unknown_cni.with(|f| f.cluster.aws_node_role_arn = Observed::Found(None));
    assert_eq!(
        failures(&status(&without_irsa)),
        vec![pair(
            ConditionType::NodeRoleReady,
            Reason::NodeRoleMissingPolicies
        )]
    );
}

/// Karpenter's getting-started guide gives the VPC CNI and the controller their roles through EKS
/// Pod Identity, with no IRSA annotation on their ServiceAccounts.
#[test]
fn roles_from_eks_pod_identity_count_like_irsa_and_unknown_associations_never_fail() {
    let without_cni_policy = |f: &mut Facts| {
        if let Some(Observed::Found(role)) = &mut f.aws.node_role
            && let Observed::Found(arns) = &mut role.attached_policy_arns
        {
            arns.retain(|a| !a.ends_with("AmazonEKS_CNI_Policy"));
        }
    };
    let cni_role = |answer: Observed<Option<String>>| {
        Facts::healthy().with(without_cni_policy).with(move |f| {
            f.aws
                .pod_identity_roles
                .insert("kube-system/aws-node".into(), answer.clone());
        })
    };
    // No association: the node role must carry the CNI policy itself.
    assert_eq!(
        failures(&status(&cni_role(Observed::Found(None)))),
        vec![pair(
            ConditionType::NodeRoleReady,
            Reason::NodeRoleMissingPolicies
        )]
    );
    // The CNI has its own role through Pod Identity: nothing is missing.
    let pod_identity = Observed::Found(Some(role_arn("AmazonEKSPodIdentityAmazonVPCCNIRole")));
    assert!(failures(&status(&cni_role(pod_identity))).is_empty());
    // The association could not be read: Unknown with the cause, never False.
    let denied = status(&cni_role(Observed::unknown(
        UnknownCause::AccessDenied,
        "403",
    )));
    assert!(failures(&denied).is_empty(), "{:?}", failures(&denied));
    let c = denied.condition(ConditionType::NodeRoleReady).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("Unknown", "AwsAccessDenied")
    );

    // The controller's role from Pod Identity is recognised where aws-auth maps it as a node.
    let controller = role_arn("KarpenterControllerRole-demo");
    let mapped_controller = Facts::healthy()
        .with_authentication_mode(None)
        .with_map_roles(&node_mapping(&controller))
        .with(|f| {
            if let Observed::Found(k) = &mut f.cluster.karpenter {
                k.controller_role_arn = None;
            }
            f.aws.pod_identity_roles.insert(
                KARPENTER_SERVICE_ACCOUNT.into(),
                Observed::Found(Some(controller.clone())),
            );
            // A role for Pod Identity trusts pods.eks.amazonaws.com.
            if let Some(Observed::Found(r)) = &mut f.aws.controller_role {
                r.assume_role_policy_document = Some(pod_identity_trust_policy());
            }
        });
    assert_eq!(
        failures(&status(&mapped_controller)),
        vec![pair(
            ConditionType::NodeRoleMapped,
            Reason::ControllerRoleMappedInstead
        )]
    );
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        a_role_trusting_ec2_with_all_policies_is_node_role_valid:
            Facts::healthy() => NodeRoleReady is True because NodeRoleValid;
        a_profile_without_a_role_leaves_the_node_role_not_resolved:
            Facts::healthy().with_instance_profile_spec("KarpenterNodeInstanceProfile", true)
                .with(|f| { f.aws.node_role = None; if let Some(Observed::Found(p)) = &mut f.aws.instance_profile { p.roles.clear() } })
            => NodeRoleReady is Unknown because NodeRoleNotResolved;
        a_role_absent_from_iam_is_node_role_not_found:
            Facts::healthy().with(|f| f.aws.node_role = Some(Observed::Absent))
            => NodeRoleReady is False because NodeRoleNotFound;
        a_role_given_as_an_arn_is_node_role_is_arn:
            Facts::healthy().with(|f| f.cluster.node_class.spec.role = Some(role_arn(NODE_ROLE)))
            => NodeRoleReady is False because NodeRoleIsArn;
        a_role_name_of_65_characters_is_node_role_name_too_long:
            Facts::healthy().with(|f| { f.cluster.node_class.spec.role = Some(format!("KarpenterNodeRole-{}", "c".repeat(47))); f.aws.node_role = Some(Observed::Absent) })
            => NodeRoleReady is False because NodeRoleNameTooLong;
        a_role_trusting_only_lambda_is_node_role_trust_policy_invalid:
            Facts::healthy().with(|f| if let Some(Observed::Found(r)) = &mut f.aws.node_role { r.assume_role_policy_document = Some(trust_policy_for("lambda.amazonaws.com")) })
            => NodeRoleReady is False because NodeRoleTrustPolicyInvalid;
        a_role_with_an_unreadable_trust_policy_is_node_role_trust_policy_invalid:
            Facts::healthy().with(|f| if let Some(Observed::Found(r)) = &mut f.aws.node_role { r.assume_role_policy_document = Some("%7B%7D".into()) })
            => NodeRoleReady is False because NodeRoleTrustPolicyInvalid;
        a_role_without_the_worker_node_policy_is_node_role_missing_policies:
            Facts::healthy().with(|f| if let Some(Observed::Found(r)) = &mut f.aws.node_role {
                r.attached_policy_arns = Observed::Found(vec![managed_policy_arn("AmazonEKS_CNI_Policy"), managed_policy_arn("AmazonEC2ContainerRegistryReadOnly")]) })
            => NodeRoleReady is False because NodeRoleMissingPolicies;
    }
}

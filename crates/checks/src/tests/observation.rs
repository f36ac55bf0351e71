//! What the operator sees and when, as whole setups: nothing judged from unlisted caches, Karpenter's
//! own registration timers and evidence, which Pods and CRD rules count, and roles from EKS Pod
//! Identity. Pure.

use super::reasons::status;
use super::scenarios::{failures, message, pair};
use crate::facts::PodScheduling;
use crate::facts::{Facts, Observed, UnknownCause};
use crate::testing::*;
use karpenter_health_api::{ConditionType, Reason};

/// At every start and leader change the operator evaluates before its caches have listed
/// everything. Nothing may be judged from a list that was never read.
#[test]
fn before_the_cluster_caches_are_listed_nothing_is_judged_from_them() {
    let cold = |f: &mut Facts| {
        let unlisted = || UnknownCause::NotObserved;
        f.cluster.node_pools = Observed::unknown(unlisted(), "nodepools cache not synced yet");
        f.cluster.node_claims = Observed::unknown(unlisted(), "nodeclaims cache not synced yet");
        f.cluster.claimed_instance_ids =
            Observed::unknown(unlisted(), "nodeclaims cache not synced yet");
        f.cluster.pending_pods = Observed::unknown(unlisted(), "pending pods cache not synced yet");
    };
    // Hours-old instances of this cluster: claimed by NodeClaims the cache has not listed yet.
    let facts = Facts::healthy()
        .with_cluster_instance(instance("i-0old1", CLUSTER, VPC, 300))
        .with_cluster_instance(instance("i-0old2", CLUSTER, VPC, 600))
        .with(cold);
    let cold_status = status(&facts);
    assert!(
        failures(&cold_status).is_empty(),
        "{:?}",
        failures(&cold_status)
    );
    for ty in [
        ConditionType::ClusterIdentityUnique,
        ConditionType::LabelsAllowed,
        ConditionType::NodeClaimsRegistered,
    ] {
        let c = cold_status.condition(ty).unwrap();
        assert_eq!(c.status, "Unknown", "{ty}: {}", c.message);
        assert_eq!(c.reason, "NotObserved", "{ty}: {}", c.message);
        assert!(c.message.contains("not synced yet"), "{ty}: {}", c.message);
    }
    // Once listed, the same instances are judged: unclaimed and old, they are another cluster's.
    let listed = Facts::healthy()
        .with_cluster_instance(instance("i-0old1", CLUSTER, VPC, 300))
        .with_cluster_instance(instance("i-0old2", CLUSTER, VPC, 600));
    assert!(failures(&status(&listed)).contains(&pair(
        ConditionType::ClusterIdentityUnique,
        Reason::ClusterNameSharedWithOtherCluster
    )));
}

#[test]
fn a_restricted_label_proven_in_a_listed_nodepool_fails_even_while_pods_are_unlisted() {
    let facts = Facts::healthy().with(|f| {
        f.cluster.node_pools.found_mut().unwrap()[0]
            .spec
            .template
            .metadata
            .labels
            .insert("karpenter.sh/team".into(), "a".into());
        f.cluster.pending_pods = Observed::unknown(UnknownCause::AccessDenied, "403");
    });
    assert_eq!(
        failures(&status(&facts)),
        vec![pair(
            ConditionType::LabelsAllowed,
            Reason::RestrictedLabelDomain
        )]
    );
}

#[test]
fn karpenters_node_registration_healthy_false_on_a_nodepool_is_proof_after_the_claims_are_gone() {
    use karpenter_health_api::karpenter::NodePoolStatus;
    let with_pool_condition = |status: &str| {
        let status = status.to_owned();
        Facts::healthy().with(move |f| {
            f.cluster.node_claims = Observed::Found(Vec::new());
            let pool = &mut f.cluster.node_pools.found_mut().unwrap()[0];
            pool.status = Some(NodePoolStatus {
                conditions: vec![karpenter_health_api::karpenter::KarpenterCondition {
                    reason: Some("RegistrationFailed".into()),
                    message: Some("Failed to register 3 nodes".into()),
                    ..karpenter_condition("NodeRegistrationHealthy", &status, mins_ago(3))
                }],
                ..Default::default()
            });
        })
    };
    let status = status(&with_pool_condition("False"));
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::NodeClaimsRegistered,
            Reason::NodeClaimsNotRegistering
        )]
    );
    let m = message(&status, ConditionType::NodeClaimsRegistered);
    assert!(
        m.contains(NODE_POOL) && m.contains("RegistrationFailed") && m.contains("3 nodes"),
        "{m}"
    );
    assert!(failures(&self::status(&with_pool_condition("True"))).is_empty());
    assert!(failures(&self::status(&with_pool_condition("Unknown"))).is_empty());
}

#[test]
fn registration_is_timed_from_the_registered_condition_and_deleting_claims_are_skipped() {
    let claim_with = |registered_mins_ago: i64, deleting: bool| {
        let mut claim = node_claim("slow", "i-0slow", 60, false);
        if let Some(registered) = claim.registered.as_mut() {
            registered.last_transition = Some(mins_ago(registered_mins_ago));
        }
        claim.deleting = deleting;
        Facts::healthy().with_node_claim(claim)
    };
    // Launched an hour ago, but Registered changed 5 minutes ago (a retry): not late yet.
    assert!(failures(&status(&claim_with(5, false))).is_empty());
    assert_eq!(
        failures(&status(&claim_with(9, false))),
        vec![pair(
            ConditionType::NodeClaimsRegistered,
            Reason::NodeClaimsNotRegistering
        )]
    );
    assert!(failures(&status(&claim_with(9, true))).is_empty());
    let late = status(&claim_with(9, false));
    let m = message(&late, ConditionType::NodeClaimsRegistered);
    assert!(
        m.contains("waiting since 20"),
        "an absolute time, never an age: {m}"
    );
}

/// Issue 22 point 8: whichever NodePool Karpenter picks, a rejected key in the Pod's node selector
/// reaches the NodeClaim, so every class that could take the Pod fails, naming it. This test
/// replaces one that made it a warning on every class (the failure was invisible with two
/// classes).
#[test]
fn a_restricted_node_selector_key_on_a_pod_several_classes_could_take_fails_each() {
    let shared = PodScheduling {
        only_this_class: false,
        ..pending_pod("shop", "web-1", &[("node-role.kubernetes.io/web", "")])
    };
    let status = status(&Facts::healthy().with_pending_pod(shared));
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::LabelsAllowed,
            Reason::RestrictedLabelDomain
        )]
    );
    assert!(
        message(&status, ConditionType::LabelsAllowed).contains("shop/web-1"),
        "{}",
        message(&status, ConditionType::LabelsAllowed)
    );
}

#[test]
fn a_restricted_key_in_only_some_terms_of_a_shared_pod_is_a_warning_the_true_message_admits() {
    use karpenter_health_api::karpenter::Requirement;
    let restricted = Requirement {
        key: "node-role.kubernetes.io/web".into(),
        operator: "Exists".into(),
        values: Vec::new(),
        min_values: None,
    };
    let other = Requirement {
        key: "team".into(),
        operator: "In".into(),
        values: vec!["web".into()],
        min_values: None,
    };
    let shared = PodScheduling {
        only_this_class: false,
        required_affinity: vec![vec![restricted.clone()], vec![other]],
        preferred_affinity: vec![vec![restricted]],
        ..pending_pod("shop", "web-3", &[])
    };
    let status = status(&Facts::healthy().with_pending_pod(shared.clone()));
    assert!(failures(&status).is_empty(), "{:?}", failures(&status));
    assert!(
        status
            .findings
            .iter()
            .any(|f| f.reason == "RestrictedLabelOnSharedPod" && f.message.contains("shop/web-3")),
        "{:?}",
        status.findings
    );
    let ok = message(&status, ConditionType::LabelsAllowed);
    assert!(
        !ok.starts_with("No NodePool or pending Pod uses"),
        "the True message contradicts the warning beside it: {ok}"
    );
    // The same Pod only this class could take fails it.
    let pinned = PodScheduling {
        only_this_class: true,
        ..shared
    };
    assert_eq!(
        failures(&super::reasons::status(
            &Facts::healthy().with_pending_pod(pinned)
        )),
        vec![pair(
            ConditionType::LabelsAllowed,
            Reason::RestrictedLabelDomain
        )]
    );
}

#[test]
fn the_installed_crds_rules_win_over_the_controller_version() {
    use crate::labels::LabelRules;
    let pod = pending_pod("shop", "web-2", &[("node-role.kubernetes.io/web", "")]);
    // A 1.9 controller with 1.8 CRDs left behind by `helm upgrade`: the CRD still rejects it.
    let old_crds = Facts::healthy()
        .with_karpenter_version("1.9.0")
        .with_pending_pod(pod.clone())
        .with(|f| f.cluster.crd_label_rules = Observed::Found(Some(LabelRules::UpTo1_8)));
    let status = status(&old_crds);
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::LabelsAllowed,
            Reason::RestrictedLabelDomain
        )]
    );
    let m = message(&status, ConditionType::LabelsAllowed);
    assert!(
        m.contains("the installed NodePool CRD"),
        "says which rules were used: {m}"
    );
    // A 1.8 controller whose CRDs were already upgraded: the CRD accepts it.
    let new_crds = Facts::healthy()
        .with_pending_pod(pod)
        .with(|f| f.cluster.crd_label_rules = Observed::Found(Some(LabelRules::From1_9)));
    assert!(failures(&super::reasons::status(&new_crds)).is_empty());
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

#[test]
fn an_unreadable_crd_leaves_only_what_every_rule_set_rejects_proven() {
    let unreadable = |f: &mut Facts| {
        f.cluster.crd_label_rules = Observed::unknown(UnknownCause::AccessDenied, "403 on the CRD")
    };
    // Karpenter 1.8.6 would reject this key, but 1.9 CRDs may be installed beside it: unknown.
    let kubernetes_io = Facts::healthy()
        .with_pending_pod(pending_pod(
            "shop",
            "web-3",
            &[("node-role.kubernetes.io/web", "")],
        ))
        .with(unreadable);
    let status = status(&kubernetes_io);
    assert!(failures(&status).is_empty(), "{:?}", failures(&status));
    let c = status.condition(ConditionType::LabelsAllowed).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("Unknown", "AwsAccessDenied"),
        "{}",
        c.message
    );
    assert!(c.message.contains("CRD"), "{}", c.message);
    // Every Karpenter rejects karpenter.sh keys: still proven.
    let karpenter_sh = Facts::healthy()
        .with_pending_pod(pending_pod("shop", "web-4", &[("karpenter.sh/team", "a")]))
        .with(unreadable);
    assert_eq!(
        failures(&super::reasons::status(&karpenter_sh)),
        vec![pair(
            ConditionType::LabelsAllowed,
            Reason::RestrictedLabelDomain
        )]
    );
}

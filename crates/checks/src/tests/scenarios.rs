//! The known field failures (README "Why", docs/checks.md), each as a whole setup that must come out
//! with exactly the right condition and reason, and nothing else False. Pure.

use super::reasons::status;
use crate::facts::{Facts, Observed, Settings};
use crate::testing::*;
use crate::{evaluate, facts::PodScheduling};
use karpenter_health_api::{ConditionType, KarpenterHealthStatus, Reason, Severity};

/// The (condition, reason) of every False condition, Ready excluded.
pub(super) fn failures(status: &KarpenterHealthStatus) -> Vec<(String, String)> {
    status
        .conditions
        .iter()
        .filter(|c| c.status == "False" && c.type_ != "Ready")
        .map(|c| (c.type_.clone(), c.reason.clone()))
        .collect()
}

pub(super) fn pair(ty: ConditionType, reason: Reason) -> (String, String) {
    (ty.as_str().to_owned(), reason.as_str().to_owned())
}

pub(super) fn message(status: &KarpenterHealthStatus, ty: ConditionType) -> &str {
    status
        .condition(ty)
        .map(|c| c.message.as_str())
        .unwrap_or_default()
}

#[test]
fn a_healthy_setup_comes_out_all_true_with_no_findings() {
    let status = status(&Facts::healthy());
    for c in &status.conditions {
        assert_eq!(c.status, "True", "{}: {} {}", c.type_, c.reason, c.message);
        assert_eq!(c.observed_generation, Some(1));
        assert_eq!(c.last_transition_time.0, now());
    }
    assert!(status.findings.is_empty(), "{:#?}", status.findings);
    assert_eq!(status.node_class_generation, Some(1));
    let detected = status.detected.expect("detected");
    assert_eq!(detected.cluster_name.as_deref(), Some(CLUSTER));
    assert_eq!(detected.karpenter_version.as_deref(), Some("1.8.6"));
    assert_eq!(detected.region.as_deref(), Some(REGION));
    assert_eq!(
        detected.authentication_mode.as_deref(),
        Some("API_AND_CONFIG_MAP")
    );
}

#[test]
fn the_isolated_region_ipv6_option_with_karpenter_1_0_fails_metadata_options_only() {
    // Issue #7667: Karpenter 1.0.1 in us-iso-east-1 with the CRD-defaulted option.
    let facts = Facts::healthy()
        .with_region("us-iso-east-1")
        .with_karpenter_version("1.0.1")
        .with(|f| f.cluster.node_class.spec.metadata_options = None);
    let status = status(&facts);
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::MetadataOptionsSupported,
            Reason::HttpProtocolIPv6UnsupportedInRegion
        )]
    );
    let m = message(&status, ConditionType::MetadataOptionsSupported);
    assert!(m.contains("us-iso-east-1") && m.contains("1.7.0"), "{m}");
}

#[test]
fn the_isolated_region_ipv6_option_is_fine_from_karpenter_1_7_and_in_eu_isoe() {
    for (region, version) in [("us-isof-south-1", "1.7.0"), ("eu-isoe-west-1", "1.0.1")] {
        let facts = Facts::healthy()
            .with_region(region)
            .with_karpenter_version(version);
        assert!(failures(&status(&facts)).is_empty(), "{region} {version}");
    }
}

#[test]
fn the_isolated_region_without_a_known_version_is_unknown_not_false() {
    let facts = Facts::healthy()
        .with_region("us-iso-west-1")
        .with(|f| f.cluster.karpenter = unknown(crate::facts::UnknownCause::AccessDenied));
    let status = status(&facts);
    let c = status
        .condition(ConditionType::MetadataOptionsSupported)
        .expect("present");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("Unknown", "AwsAccessDenied")
    );
}

#[test]
fn the_arn_instance_profile_fails_instance_profile_ready_with_the_name_to_use() {
    // Issues #8072/#8312: Karpenter shows InstanceProfileReady=True, validation stays Unknown.
    let facts = Facts::healthy()
        .with_instance_profile_spec(
            "arn:aws:iam::111122223333:instance-profile/KarpenterNodeInstanceProfile-demo",
            false,
        )
        .with(|f| f.aws.node_role = None)
        .with_karpenter_condition(karpenter_condition(
            "ValidationSucceeded",
            "Unknown",
            mins_ago(3),
        ))
        .with_karpenter_condition(karpenter_condition("Ready", "Unknown", mins_ago(3)));
    let status = status(&facts);
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::InstanceProfileReady,
            Reason::InstanceProfileIsArn
        )]
    );
    let m = message(&status, ConditionType::InstanceProfileReady);
    assert!(m.contains("\"KarpenterNodeInstanceProfile-demo\""), "{m}");
    assert!(
        m.contains("although Karpenter reports InstanceProfileReady=True"),
        "{m}"
    );
}

#[test]
fn the_arn_instance_profile_left_for_long_also_flags_validation_stuck_naming_the_arn() {
    let facts = Facts::healthy()
        .with_instance_profile_spec("arn:aws:iam::111122223333:instance-profile/P", false)
        .with_karpenter_condition(karpenter_condition(
            "ValidationSucceeded",
            "Unknown",
            mins_ago(45),
        ));
    let status = status(&facts);
    assert_eq!(
        failures(&status),
        vec![
            pair(
                ConditionType::InstanceProfileReady,
                Reason::InstanceProfileIsArn
            ),
            pair(
                ConditionType::KarpenterStatusConsistent,
                Reason::ValidationStuck
            ),
        ]
    );
    assert!(message(&status, ConditionType::KarpenterStatusConsistent).contains("is an ARN"));
}

#[test]
fn the_controller_role_mapped_instead_of_the_node_role_fails_mapping_and_explains_registration() {
    // Issue #6659: nodes launch but never join.
    let facts = Facts::healthy()
        .with_map_roles(&node_mapping(&role_arn(CONTROLLER_ROLE)))
        .with_node_claim(node_claim("default-x7k2p", "i-0stuck", 25, false));
    let status = status(&facts);
    assert_eq!(
        failures(&status),
        vec![
            pair(
                ConditionType::NodeRoleMapped,
                Reason::ControllerRoleMappedInstead
            ),
            pair(
                ConditionType::NodeClaimsRegistered,
                Reason::NodeClaimsNotRegistering
            ),
        ]
    );
    let m = message(&status, ConditionType::NodeRoleMapped);
    assert!(
        m.contains(CONTROLLER_ROLE) && m.contains(&role_arn(NODE_ROLE)),
        "{m}"
    );
    let m = message(&status, ConditionType::NodeClaimsRegistered);
    assert!(m.contains("default-x7k2p"), "{m}");
    assert!(
        m.contains("Likely cause: NodeRoleMapped=False (ControllerRoleMappedInstead)"),
        "{m}"
    );
}

#[test]
fn a_node_role_kubernetes_io_selector_fails_labels_on_1_8_naming_pod_and_key() {
    // Issues #7069/#8022: `label domain "kubernetes.io" is restricted`.
    let pod = pending_pod("batch", "etl-0", &[("node-role.kubernetes.io/worker", "")]);
    let facts = Facts::healthy().with_pending_pod(pod.clone());
    let status = status(&facts);
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::LabelsAllowed,
            Reason::RestrictedLabelDomain
        )]
    );
    let m = message(&status, ConditionType::LabelsAllowed);
    assert!(
        m.contains("batch/etl-0") && m.contains("node-role.kubernetes.io/worker"),
        "{m}"
    );
    assert!(
        m.contains("label domain \"kubernetes.io\" is restricted"),
        "{m}"
    );

    let fixed = Facts::healthy()
        .with_karpenter_version("1.9.0")
        .with_pending_pod(pod);
    assert!(failures(&crate::tests::reasons::status(&fixed)).is_empty());
}

#[test]
fn a_node_role_key_in_not_in_affinity_counts_too() {
    let pod = PodScheduling {
        required_affinity: vec![vec![requirement(
            "node-role.kubernetes.io/control-plane",
            "DoesNotExist",
            &[],
        )]],
        ..pending_pod("kube-system", "dns-0", &[])
    };
    let status = status(&Facts::healthy().with_pending_pod(pod));
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::LabelsAllowed,
            Reason::RestrictedLabelDomain
        )]
    );
}

#[test]
fn many_replicas_with_the_same_bad_key_make_one_finding() {
    let mut facts = Facts::healthy();
    for i in 0..200 {
        facts = facts.with_pending_pod(pending_pod(
            "web",
            &format!("web-{i:03}"),
            &[("kubernetes.io/role", "web")],
        ));
    }
    let status = status(&facts);
    let labels: Vec<_> = status
        .findings
        .iter()
        .filter(|f| f.condition_type == ConditionType::LabelsAllowed)
        .collect();
    assert_eq!(labels.len(), 1);
    assert!(
        labels[0].message.contains("and 197 more"),
        "{}",
        labels[0].message
    );
    assert!(labels[0].subjects.len() <= 10);
}

#[test]
fn two_clusters_sharing_one_name_fail_cluster_identity() {
    // Issue #7356: another cluster named "demo" in another VPC, its nodes tagged like ours.
    let facts = Facts::healthy()
        .with_cluster_instance(instance("i-0b1", CLUSTER, "vpc-0twin", 4))
        .with_cluster_instance(instance("i-0b2", CLUSTER, "vpc-0twin", 600));
    let status = status(&facts);
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::ClusterIdentityUnique,
            Reason::ClusterNameSharedWithOtherCluster
        )]
    );
    let m = message(&status, ConditionType::ClusterIdentityUnique);
    assert!(m.contains("i-0b1") && m.contains("vpc-0twin"), "{m}");
}

#[test]
fn a_fresh_unclaimed_instance_in_the_cluster_vpc_is_a_launch_in_flight_not_a_twin() {
    let facts = Facts::healthy().with_cluster_instance(instance("i-0new", CLUSTER, VPC, 1));
    assert!(failures(&status(&facts)).is_empty());
}

#[test]
fn terminated_twins_and_claimed_instances_are_ignored() {
    let facts = Facts::healthy().with_cluster_instance(crate::facts::InstanceFacts {
        state: "terminated".into(),
        ..instance("i-0gone", CLUSTER, "vpc-0twin", 600)
    });
    assert!(failures(&status(&facts)).is_empty());
}

#[test]
fn an_unclaimed_young_instance_with_the_eks_vpc_unknown_is_unknown() {
    let facts = Facts::healthy()
        .with_cluster_instance(instance("i-0new", CLUSTER, "vpc-0maybe", 1))
        .with(|f| f.aws.eks_cluster = unknown(crate::facts::UnknownCause::Throttled));
    let status = status(&facts);
    let c = status
        .condition(ConditionType::ClusterIdentityUnique)
        .expect("present");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("Unknown", "AwsThrottled")
    );
}

#[test]
fn warnings_never_change_a_condition() {
    let facts = Facts::healthy().with(|f| {
        if let Some(Observed::Found(r)) = &mut f.aws.node_role {
            r.attached_policy_arns = Observed::Found(
                [
                    "AmazonEKSWorkerNodePolicy",
                    "AmazonEKS_CNI_Policy",
                    "AmazonEC2ContainerRegistryReadOnly",
                ]
                .iter()
                .map(|p| managed_policy_arn(p))
                .collect(),
            );
        }
        f.aws.security_groups = Observed::Found(vec![
            security_group(
                "sg-0a",
                &[
                    ("karpenter.sh/discovery", CLUSTER),
                    ("kubernetes.io/cluster/demo", "owned"),
                ],
            ),
            security_group(
                "sg-0b",
                &[
                    ("karpenter.sh/discovery", CLUSTER),
                    ("kubernetes.io/cluster/demo", "shared"),
                ],
            ),
        ]);
    });
    let status = status(&facts);
    assert!(
        status.conditions.iter().all(|c| c.status == "True"),
        "{:#?}",
        status.conditions
    );
    let codes: Vec<&str> = status.findings.iter().map(|f| f.reason.as_str()).collect();
    assert_eq!(
        codes,
        [
            "NodeRoleMissingSsmPolicy",
            "MultipleSecurityGroupsTaggedForCluster",
            "SecurityGroupStatusStale"
        ]
    );
    assert!(
        status
            .findings
            .iter()
            .all(|f| f.severity == Severity::Warning)
    );
}

#[test]
fn no_cluster_tagged_group_is_a_warning_only() {
    let facts = Facts::healthy().with(|f| {
        f.aws.security_groups = Observed::Found(vec![security_group(
            SECURITY_GROUP,
            &[("karpenter.sh/discovery", CLUSTER)],
        )])
    });
    let status = status(&facts);
    assert!(status.conditions.iter().all(|c| c.status == "True"));
    assert_eq!(status.findings[0].reason, "NoSecurityGroupTaggedForCluster");
}

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

#[test]
fn with_the_authentication_mode_unknown_only_agreement_between_modes_concludes() {
    let eks_unknown =
        |f: &mut Facts| f.aws.eks_cluster = unknown(crate::facts::UnknownCause::Throttled);
    // aws-auth and an access entry both admit the node: True in every mode.
    let both = Facts::healthy()
        .with_access_entry("EC2_LINUX")
        .with(eks_unknown);
    assert_eq!(
        status(&both)
            .condition(ConditionType::NodeRoleMapped)
            .map(|c| c.status.clone()),
        Some("True".into())
    );
    // Only aws-auth admits it: API mode would refuse, so Unknown.
    let only_aws_auth = Facts::healthy().with(eks_unknown);
    let status = status(&only_aws_auth);
    let c = status
        .condition(ConditionType::NodeRoleMapped)
        .expect("present");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("Unknown", "AwsThrottled")
    );
}

#[test]
fn status_stale_needs_evidence_of_how_long_the_lag_lasted() {
    let lagging = Facts::healthy().with(|f| f.cluster.node_class.metadata.generation = Some(2));
    assert!(
        failures(&status(&lagging)).is_empty(),
        "no time evidence, no verdict"
    );
    let recent = lagging
        .clone()
        .with(|f| f.cluster.node_class_generation_seen_at = Some(mins_ago(2)));
    assert!(failures(&status(&recent)).is_empty());
    let never = Facts::healthy().with(|f| f.cluster.node_class.status = None);
    assert_eq!(
        failures(&status(&never)),
        vec![pair(
            ConditionType::KarpenterStatusConsistent,
            Reason::StatusStale
        ),]
    );
}

#[test]
fn last_transition_time_is_kept_while_the_status_holds_and_moves_when_it_flips() {
    let settings = Settings::default();
    let first = evaluate(&Facts::healthy(), &settings, None, mins_ago(10));
    let same = evaluate(&Facts::healthy(), &settings, Some(&first), now());
    assert_eq!(first.conditions, same.conditions);
    assert_eq!(same.last_evaluated.as_ref().map(|t| t.0), Some(now()));
    let broken = Facts::healthy().with(|f| f.aws.node_role = Some(Observed::Absent));
    let flipped = evaluate(&broken, &settings, Some(&same), now());
    for c in &flipped.conditions {
        // The controller's permissions name the node role: unknown without it.
        let moved =
            c.type_ == "NodeRoleReady" || c.type_ == "Ready" || c.type_ == "ControllerCanLaunch";
        let want = if moved { now() } else { mins_ago(10) };
        assert_eq!(c.last_transition_time.0, want, "{}", c.type_);
    }
}

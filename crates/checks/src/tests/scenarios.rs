//! The known field failures (README "Why", docs/checks.md), each as a whole setup that must come out
//! with exactly the right condition and reason, and nothing else False. Pure.

use super::reasons::status;
use crate::facts::{Facts, Observed, Settings, UnknownCause};
use crate::testing::*;
use crate::{evaluate, facts::PodScheduling};
use karpenter_health_api::{ConditionType, KarpenterHealthStatus, Reason, Severity};

/// The (condition, reason) of every False condition, Ready excluded.
fn failures(status: &KarpenterHealthStatus) -> Vec<(String, String)> {
    status
        .conditions
        .iter()
        .filter(|c| c.status == "False" && c.type_ != "Ready")
        .map(|c| (c.type_.clone(), c.reason.clone()))
        .collect()
}

fn pair(ty: ConditionType, reason: Reason) -> (String, String) {
    (ty.as_str().to_owned(), reason.as_str().to_owned())
}

fn message(status: &KarpenterHealthStatus, ty: ConditionType) -> &str {
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
    assert_eq!(status.observed_generation, Some(1));
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

const NODE_ENTRY: &str = "- rolearn: arn:aws:iam::111122223333:role/KarpenterNodeRole-demo
  username: system:node:{{EC2PrivateDNSName}}
  groups: [system:bootstrappers, system:nodes]
";

#[test]
fn an_unreadable_map_roles_is_reported_with_its_position_and_the_rest_still_runs() {
    let facts = Facts::healthy()
        .with_authentication_mode(None)
        .with_map_roles("- rolearn: arn:aws:iam::111122223333:role/x\n  groups: [system:nodes\n")
        .with(|f| f.aws.node_role = Some(Observed::Absent));
    let status = status(&facts);
    let m = message(&status, ConditionType::NodeRoleMapped);
    assert!(m.contains("mapRoles line 3 column"), "{m}");
    assert_eq!(
        failures(&status),
        vec![
            pair(ConditionType::NodeRoleReady, Reason::NodeRoleNotFound),
            pair(ConditionType::NodeRoleMapped, Reason::AwsAuthMalformed),
        ]
    );
}

#[test]
fn a_broken_unrelated_entry_is_a_warning_and_the_node_roles_own_entry_decides() {
    // As the authenticator does: the broken entry loses its groups, every other entry is kept.
    let map_roles = format!(
        "- rolearn: arn:aws:iam::111122223333:role/admins\n  username: admin\n  groups: \
         system:masters\n{NODE_ENTRY}"
    );
    let facts = Facts::healthy()
        .with_authentication_mode(None)
        .with_map_roles(&map_roles);
    let status = status(&facts);
    assert!(failures(&status).is_empty(), "{:?}", failures(&status));
    assert_eq!(status.findings[0].reason, "AwsAuthUnparsable");
    assert!(
        status.findings[0]
            .message
            .contains("mapRoles entry 1: groups is a string"),
        "{}",
        status.findings[0].message
    );
}

#[test]
fn a_broken_map_users_never_fails_the_node_role() {
    let facts = Facts::healthy()
        .with_authentication_mode(None)
        .with_map_roles(NODE_ENTRY)
        .with(|f| {
            if let Observed::Found(data) = &mut f.cluster.aws_auth {
                data.map_users = Some("- userarn: [\n".into());
            }
        });
    let status = status(&facts);
    assert!(failures(&status).is_empty(), "{:?}", failures(&status));
    assert_eq!(status.findings[0].reason, "AwsAuthUnparsable");
    assert!(status.findings[0].message.contains("mapUsers"));
}

#[test]
fn the_node_roles_own_entry_read_only_in_part_is_aws_auth_malformed_naming_it() {
    let map_roles = "- rolearn: arn:aws:iam::111122223333:role/KarpenterNodeRole-demo\n  \
                     username: system:node:{{EC2PrivateDNSName}}\n  groups: system:nodes\n";
    let facts = Facts::healthy()
        .with_authentication_mode(None)
        .with_map_roles(map_roles);
    let status = status(&facts);
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::NodeRoleMapped,
            Reason::AwsAuthMalformed
        )]
    );
    let m = message(&status, ConditionType::NodeRoleMapped);
    assert!(
        m.contains("mapRoles entry 1") && m.contains("groups is a string"),
        "{m}"
    );
    assert!(
        status
            .findings
            .iter()
            .all(|f| f.reason != "AwsAuthUnparsable")
    );
}

#[test]
fn the_last_entry_for_the_node_role_is_the_one_in_force() {
    let wrong_then_right = format!(
        "- rolearn: arn:aws:iam::111122223333:role/karpenternoderole-demo\n  username: x\n  \
         groups: [system:nodes]\n{NODE_ENTRY}"
    );
    let right_then_wrong = format!(
        "{NODE_ENTRY}- RoleArn: arn:aws:iam::111122223333:role/KARPENTERNODEROLE-DEMO\n  \
         username: x\n  groups: [system:nodes]\n"
    );
    let healthy = Facts::healthy().with_authentication_mode(None);
    let status_of = |map_roles: &str| status(&healthy.clone().with_map_roles(map_roles));
    assert!(failures(&status_of(&wrong_then_right)).is_empty());
    assert_eq!(
        failures(&status_of(&right_then_wrong)),
        vec![pair(
            ConditionType::NodeRoleMapped,
            Reason::NodeRoleMappingWrongUsername
        )]
    );
}

#[test]
fn in_api_and_config_map_mode_unknown_access_entries_never_let_aws_auth_make_it_true() {
    let facts = Facts::healthy()
        .with_authentication_mode(Some("API_AND_CONFIG_MAP"))
        .with_map_roles(NODE_ENTRY)
        .with(|f| {
            f.aws.node_role_access_entries = Observed::unknown(UnknownCause::Unsupported, "404")
        });
    let status = status(&facts);
    let c = status.condition(ConditionType::NodeRoleMapped).unwrap();
    assert_eq!(c.status, "Unknown", "{}", c.message);
}

#[test]
fn a_malformed_aws_auth_beside_a_working_access_entry_is_a_warning() {
    let facts = Facts::healthy()
        .with_access_entry("EC2_LINUX")
        .with_map_roles("{{{");
    let status = status(&facts);
    assert!(failures(&status).is_empty());
    assert_eq!(status.findings[0].reason, "AwsAuthUnparsable");
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
        let moved = c.type_ == "NodeRoleReady" || c.type_ == "Ready";
        let want = if moved { now() } else { mins_ago(10) };
        assert_eq!(c.last_transition_time.0, want, "{}", c.type_);
    }
}

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
        if let Some(status) = claim.status.as_mut() {
            for c in &mut status.conditions {
                if c.type_ == "Registered" {
                    c.last_transition_time =
                        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                            mins_ago(registered_mins_ago),
                        ));
                }
            }
        }
        if deleting {
            claim.metadata.deletion_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(mins_ago(1)),
            );
        }
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

#[test]
fn a_restricted_key_on_a_pod_other_classes_could_take_is_a_warning_not_a_failure() {
    let shared = PodScheduling {
        only_this_class: false,
        ..pending_pod("shop", "web-1", &[("node-role.kubernetes.io/web", "")])
    };
    let status = status(&Facts::healthy().with_pending_pod(shared.clone()));
    assert!(failures(&status).is_empty(), "{:?}", failures(&status));
    let warning = status
        .findings
        .iter()
        .find(|f| f.reason == "RestrictedLabelOnSharedPod")
        .expect("a warning on the candidate class");
    assert!(
        warning.message.contains("shop/web-1"),
        "{}",
        warning.message
    );
    // Pinned to this class's NodePool, the same Pod fails it.
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
        });
    assert_eq!(
        failures(&status(&mapped_controller)),
        vec![pair(
            ConditionType::NodeRoleMapped,
            Reason::ControllerRoleMappedInstead
        )]
    );
}

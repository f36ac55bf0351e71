//! Scenarios of `NodeRoleMapped`: aws-auth read as EKS's authenticator reads it (what a broken
//! entry, a broken mapUsers, or several entries for the node role do), the controller role mapped
//! instead of the node role, and an unknown authentication mode. Pure.

use super::reasons::status;
use super::{failures, message, pair};
use crate::facts::{AwsAuthData, Facts, Observed, UnknownCause};
use crate::testing::*;
use karpenter_health_api::{ConditionType, Reason};

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
                *data = AwsAuthData::new(data.map_roles.clone(), Some("- userarn: [\n".into()));
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

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        an_aws_auth_entry_with_node_username_and_groups_is_node_role_mapped_in_aws_auth:
            Facts::healthy() => NodeRoleMapped is True because NodeRoleMappedInAwsAuth;
        an_ec2_linux_access_entry_in_api_mode_is_node_role_has_access_entry:
            Facts::healthy().with_authentication_mode(Some("API")).with_access_entry("EC2_LINUX")
            => NodeRoleMapped is True because NodeRoleHasAccessEntry;
        a_config_map_cluster_without_aws_auth_is_aws_auth_missing:
            Facts::healthy().with_authentication_mode(None).with(|f| f.cluster.aws_auth = Observed::Absent)
            => NodeRoleMapped is False because AwsAuthMissing;
        an_aws_auth_with_broken_yaml_is_aws_auth_malformed:
            Facts::healthy().with_authentication_mode(Some("CONFIG_MAP")).with_map_roles("- rolearn: [unclosed\n")
            => NodeRoleMapped is False because AwsAuthMalformed;
        an_aws_auth_mapping_only_other_roles_is_node_role_not_mapped:
            Facts::healthy().with_map_roles(&node_mapping(&role_arn("SomeOtherRole")))
            => NodeRoleMapped is False because NodeRoleNotMapped;
        api_mode_ignores_a_correct_aws_auth_and_is_node_role_not_mapped:
            Facts::healthy().with_authentication_mode(Some("API"))
            => NodeRoleMapped is False because NodeRoleNotMapped;
        the_controller_role_mapped_as_a_node_is_controller_role_mapped_instead:
            Facts::healthy().with_map_roles(&node_mapping(&role_arn(CONTROLLER_ROLE)))
            => NodeRoleMapped is False because ControllerRoleMappedInstead;
        the_node_role_mapped_with_its_iam_path_is_node_role_mapped_with_path:
            Facts::healthy().with_map_roles(&node_mapping(&format!("arn:aws:iam::{ACCOUNT}:role/karpenter/{NODE_ROLE}")))
            => NodeRoleMapped is False because NodeRoleMappedWithPath;
        a_node_mapping_without_system_nodes_is_node_role_mapping_missing_groups:
            Facts::healthy().with_map_roles(&format!("- rolearn: {}\n  username: {NODE_USERNAME}\n  groups: [system:bootstrappers]\n", role_arn(NODE_ROLE)))
            => NodeRoleMapped is False because NodeRoleMappingMissingGroups;
        a_node_mapping_with_a_fixed_username_is_node_role_mapping_wrong_username:
            Facts::healthy().with_map_roles(&format!("- rolearn: {}\n  username: karpenter-node\n  groups: [system:bootstrappers, system:nodes]\n", role_arn(NODE_ROLE)))
            => NodeRoleMapped is False because NodeRoleMappingWrongUsername;
        a_standard_access_entry_for_the_node_role_is_access_entry_wrong_type:
            Facts::healthy().with_access_entry("STANDARD")
            => NodeRoleMapped is False because AccessEntryWrongType;
    }
}

/// The authenticator's `Map` (aws-iam-authenticator v0.7.8 `pkg/mapper/configmap/mapper.go`) and
/// the Node authorizer, against the places a stricter reading would raise a false alarm.
mod as_the_authenticator_maps {
    use super::*;
    use karpenter_health_api::KarpenterHealthStatus;

    fn node_role_mapped(map_roles: &str, map_users: Option<&str>) -> KarpenterHealthStatus {
        let facts = Facts::healthy()
            .with_authentication_mode(None)
            .with_map_roles(map_roles)
            .with(|f| {
                if let Observed::Found(data) = &mut f.cluster.aws_auth {
                    *data = AwsAuthData::new(data.map_roles.clone(), map_users.map(str::to_owned));
                }
            });
        status(&facts)
    }

    fn warnings(status: &KarpenterHealthStatus) -> Vec<&str> {
        status.findings.iter().map(|f| f.reason.as_str()).collect()
    }

    #[test]
    fn without_system_bootstrappers_nodes_join_and_it_is_a_warning() {
        let status = node_role_mapped(
            &format!("- rolearn: {}\n  username: {NODE_USERNAME}\n  groups: [system:nodes]\n", role_arn(NODE_ROLE)),
            None,
        );
        assert!(failures(&status).is_empty(), "{:?}", failures(&status));
        assert_eq!(warnings(&status), ["NodeRoleMappingWithoutBootstrappers"]);
        let m = message(&status, ConditionType::NodeRoleMapped);
        assert!(m.contains("groups system:nodes") && !m.contains("bootstrappers"), "{m}");
    }

    #[test]
    fn the_node_role_under_map_users_is_mapped() {
        let entry = format!(
            "- userarn: {}\n  username: {NODE_USERNAME}\n  groups: [system:bootstrappers, system:nodes]\n",
            role_arn(NODE_ROLE)
        );
        let status = node_role_mapped("", Some(&entry));
        assert!(failures(&status).is_empty(), "{:?}", failures(&status));
        let m = message(&status, ConditionType::NodeRoleMapped);
        assert!(m.contains("under mapUsers, entry 1"), "{m}");
    }

    #[test]
    fn a_map_roles_entry_wins_over_map_users() {
        let users = format!("- userarn: {}\n  username: {NODE_USERNAME}\n  groups: [system:nodes]\n", role_arn(NODE_ROLE));
        let roles = format!("- rolearn: {}\n  username: admin\n  groups: [system:nodes]\n", role_arn(NODE_ROLE));
        let status = node_role_mapped(&roles, Some(&users));
        assert_eq!(
            failures(&status),
            vec![pair(ConditionType::NodeRoleMapped, Reason::NodeRoleMappingWrongUsername)]
        );
    }

    #[test]
    fn an_entry_merged_from_an_anchor_is_read_with_its_merged_keys() {
        let map_roles = format!(
            "- &node\n  rolearn: arn:aws:iam::{ACCOUNT}:role/other\n  username: {NODE_USERNAME}\n  groups: [system:bootstrappers, system:nodes]\n- <<: *node\n  rolearn: {}\n",
            role_arn(NODE_ROLE)
        );
        let status = node_role_mapped(&map_roles, None);
        assert!(failures(&status).is_empty(), "{:?}", failures(&status));
        assert!(warnings(&status).is_empty(), "{:?}", warnings(&status));
    }

    #[test]
    fn damage_that_leaves_the_username_and_system_nodes_is_a_warning() {
        // A stray item and a number among the groups: Go keeps the entry with "" in their place.
        let map_roles = format!(
            "- rolearn: {}\n  username: {NODE_USERNAME}\n  groups:\n  - system:bootstrappers\n  - system:nodes\n  -\n  - 7\n",
            role_arn(NODE_ROLE)
        );
        let status = node_role_mapped(&map_roles, None);
        assert!(failures(&status).is_empty(), "{:?}", failures(&status));
        assert_eq!(warnings(&status), ["AwsAuthUnparsable"]);
        assert!(status.findings[0].message.contains("a number"), "{}", status.findings[0].message);
    }

    #[test]
    fn an_entry_with_rolearn_and_sso_is_dropped_as_the_authenticator_drops_it() {
        let map_roles = format!(
            "{}- rolearn: {}\n  sso: {{permissionSetName: Admin, accountID: \"{ACCOUNT}\"}}\n  username: {NODE_USERNAME}\n  groups: [system:nodes]\n",
            node_mapping(&role_arn(NODE_ROLE)).replace("system:node:{{EC2PrivateDNSName}}", "admin"),
            role_arn(NODE_ROLE)
        );
        let status = node_role_mapped(&map_roles, None);
        // The earlier entry, with its wrong username, is the one in force.
        assert_eq!(
            failures(&status),
            vec![pair(ConditionType::NodeRoleMapped, Reason::NodeRoleMappingWrongUsername)]
        );
    }

    #[test]
    fn a_role_arn_with_spaces_around_it_matches_nothing() {
        let map_roles = format!(
            "- rolearn: \" {} \"\n  username: {NODE_USERNAME}\n  groups: [system:bootstrappers, system:nodes]\n",
            role_arn(NODE_ROLE)
        );
        let status = node_role_mapped(&map_roles, None);
        assert_eq!(
            failures(&status),
            vec![pair(ConditionType::NodeRoleMapped, Reason::NodeRoleNotMapped)]
        );
        assert!(status.findings.iter().any(|f| f.message.contains("has white space around it")));
    }

    fn failure_of(map_roles: &str, map_users: Option<&str>) -> Vec<(String, String)> {
        failures(&node_role_mapped(map_roles, map_users))
    }

    #[test]
    fn a_merge_key_applies_in_document_order_as_go_yaml_does() {
        let node = role_arn(NODE_ROLE);
        // After the entry's own keys, the merged username replaces them: the node is refused.
        let merged_last = format!(
            "- &admin\n  rolearn: arn:aws:iam::{ACCOUNT}:role/admins\n  username: admin\n  groups: [system:masters]\n- rolearn: {node}\n  username: {NODE_USERNAME}\n  groups: [system:nodes]\n  <<: *admin\n"
        );
        assert_eq!(
            failure_of(&merged_last, None),
            vec![pair(ConditionType::NodeRoleMapped, Reason::NodeRoleNotMapped)],
            "the merged rolearn replaced the node's too"
        );
        // Of a list of sources the earlier wins; the entry's own keys after them win over both.
        let listed = format!(
            "- &a\n  rolearn: arn:aws:iam::{ACCOUNT}:role/a\n  username: {NODE_USERNAME}\n  groups: [system:nodes]\n- &b\n  rolearn: arn:aws:iam::{ACCOUNT}:role/b\n  username: admin\n- <<: [*a, *b]\n  rolearn: {node}\n"
        );
        assert!(failure_of(&listed, None).is_empty());
        // A merge of a scalar fails the whole value in Go.
        let scalar = format!("{NODE_ENTRY}- <<: oops\n  rolearn: x\n");
        assert_eq!(
            failure_of(&scalar, None),
            vec![pair(ConditionType::NodeRoleMapped, Reason::AwsAuthMalformed)]
        );
    }

    #[test]
    fn an_sso_of_the_wrong_type_still_drops_the_entry() {
        let map_roles = format!(
            "- rolearn: {}\n  sso: admins\n  username: {NODE_USERNAME}\n  groups: [system:nodes]\n",
            role_arn(NODE_ROLE)
        );
        assert_eq!(
            failure_of(&map_roles, None),
            vec![pair(ConditionType::NodeRoleMapped, Reason::NodeRoleNotMapped)]
        );
    }

    #[test]
    fn an_unreadable_map_roles_leaves_the_node_role_under_map_users_mapped() {
        let users = format!("- userarn: {}\n  username: {NODE_USERNAME}\n  groups: [system:bootstrappers, system:nodes]\n", role_arn(NODE_ROLE));
        assert!(failure_of("- rolearn: [\n", Some(&users)).is_empty());
    }

    #[test]
    fn map_users_spellings_of_one_arn_are_all_in_force_and_a_bad_one_decides() {
        let node = role_arn(NODE_ROLE);
        let users = format!(
            "- userarn: {}\n  username: admin\n  groups: [system:nodes]\n- userarn: {node}\n  username: {NODE_USERNAME}\n  groups: [system:nodes]\n",
            node.to_uppercase().replace("ARN:AWS:IAM", "arn:aws:iam")
        );
        assert_eq!(
            failure_of("", Some(&users)),
            vec![pair(ConditionType::NodeRoleMapped, Reason::NodeRoleMappingWrongUsername)]
        );
    }

    #[test]
    fn a_map_users_entry_with_the_roles_path_is_named() {
        let users = format!("- userarn: arn:aws:iam::{ACCOUNT}:role/team/{NODE_ROLE}\n  username: {NODE_USERNAME}\n  groups: [system:nodes]\n");
        assert_eq!(
            failure_of("", Some(&users)),
            vec![pair(ConditionType::NodeRoleMapped, Reason::NodeRoleMappedWithPath)]
        );
    }

    #[test]
    fn of_keys_differing_in_case_the_one_go_writes_last_wins() {
        // Go's json.Marshal writes `UserName` before `username`; the decoder keeps the later.
        let map_roles = format!(
            "- rolearn: {}\n  username: admin\n  UserName: {NODE_USERNAME}\n  groups: [system:nodes]\n",
            role_arn(NODE_ROLE)
        );
        assert_eq!(
            failure_of(&map_roles, None),
            vec![pair(ConditionType::NodeRoleMapped, Reason::NodeRoleMappingWrongUsername)]
        );
    }

    #[test]
    fn single_empty_quotes_are_no_list() {
        let status = node_role_mapped("''", None);
        assert_eq!(
            failures(&status),
            vec![pair(ConditionType::NodeRoleMapped, Reason::NodeRoleNotMapped)]
        );
    }
}

//! aws-auth read as EKS's authenticator reads it, as whole setups: what a broken entry, a broken
//! mapUsers, or several entries for the node role do to NodeRoleMapped. Pure.

use super::reasons::status;
use super::scenarios::{failures, message, pair};
use crate::facts::{AwsAuthData, Facts, Observed, UnknownCause};
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

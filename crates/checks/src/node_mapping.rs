//! What an aws-auth entry does for the node role, as aws-iam-authenticator reads it: whether it
//! is meant to admit nodes, and what is wrong with the one entry in force (a path in the ARN, the
//! username, the groups, the controller's role in the node role's place). Worded as
//! `NodeRoleMapped` words it; shared by that check and the offline `lint`. Pure, no IO.

use crate::arn::IamArn;
use crate::aws_auth::{self, RoleMapping};
use crate::{clip, wording::list_bounded};
use karpenter_health_api::Reason;

/// The username the authenticator must give a node; kubelet registers as this user.
pub const NODE_USERNAME: &str = "system:node:{{EC2PrivateDNSName}}";
pub const NODE_GROUPS: [&str; 2] = ["system:bootstrappers", "system:nodes"];

/// Whether an entry is meant to admit nodes (so mapping the wrong role there is the mistake).
pub fn is_node_mapping(entry: &RoleMapping) -> bool {
    entry
        .username
        .as_deref()
        .is_some_and(|u| u.starts_with("system:node:"))
        || entry
            .groups
            .iter()
            .any(|g| NODE_GROUPS.contains(&g.as_str()))
}

/// The node role's entry names it with an IAM path (`mapped` is `entry.rolearn` parsed).
pub fn mapped_with_path(entry: &RoleMapping, mapped: &IamArn) -> (Reason, String) {
    (
        Reason::NodeRoleMappedWithPath,
        format!(
            "aws-auth maps the node role as {} with the IAM path {}, which the authenticator \
             never matches; write {} instead.",
            clip(&entry.rolearn, 256),
            clip(&mapped.path, 128),
            mapped.without_path()
        ),
    )
}

/// `entries` map the controller's role as a node while `node_shown` is not mapped.
pub fn controller_mapped_instead(entries: &[&RoleMapping], node_shown: &str) -> (Reason, String) {
    let arns: Vec<String> = entries
        .iter()
        .map(|e| clip(&e.rolearn, 256).into_owned())
        .collect();
    (
        Reason::ControllerRoleMappedInstead,
        format!(
            "aws-auth maps the Karpenter controller's role {} as a node, but not the node role \
             {node_shown}; change that entry's rolearn to {node_shown}.",
            list_bounded(&arns, 3)
        ),
    )
}

/// What is wrong with the one entry the authenticator uses for the node role (read only in
/// part, wrong username, missing groups), if anything. Shared with the offline lint.
pub fn node_entry_problem(
    parsed: &aws_auth::AwsAuth,
    entry: &RoleMapping,
    node_shown: &str,
) -> Option<(Reason, String)> {
    let problems: Vec<String> = parsed
        .problems_of_role_entry(entry.entry)
        .map(|p| clip(&p.message, 256).into_owned())
        .collect();
    if !problems.is_empty() {
        return Some((
            Reason::AwsAuthMalformed,
            format!(
                "mapRoles entry {} of kube-system/aws-auth, the one the authenticator uses for \
                 {node_shown}, is read only in part: {}.",
                entry.entry,
                list_bounded(&problems, 3)
            ),
        ));
    }
    if entry.username.as_deref() != Some(NODE_USERNAME) {
        return Some((
            Reason::NodeRoleMappingWrongUsername,
            format!(
                "aws-auth maps {node_shown} (mapRoles entry {}) with username {:?}; nodes need \
                 {NODE_USERNAME}.",
                entry.entry,
                clip(entry.username.as_deref().unwrap_or_default(), 128)
            ),
        ));
    }
    let missing: Vec<&str> = NODE_GROUPS
        .iter()
        .copied()
        .filter(|g| !entry.groups.iter().any(|h| h == g))
        .collect();
    if !missing.is_empty() {
        return Some((
            Reason::NodeRoleMappingMissingGroups,
            format!(
                "aws-auth maps {node_shown} (mapRoles entry {}) without the groups {}.",
                entry.entry,
                missing.join(", ")
            ),
        ));
    }
    None
}

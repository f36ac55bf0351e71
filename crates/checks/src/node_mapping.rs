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
/// The groups AWS's documentation gives a node role's aws-auth entry.
pub const NODE_GROUPS: [&str; 2] = [BOOTSTRAPPERS_GROUP, NODES_GROUP];
/// The group the Node authorizer requires of a kubelet.
pub const NODES_GROUP: &str = "system:nodes";
pub const BOOTSTRAPPERS_GROUP: &str = "system:bootstrappers";

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

/// What is wrong with the one entry the authenticator uses for the node role (`key`'s entry:
/// `mapRoles`, or `mapUsers` when no `mapRoles` entry maps it), if anything: a username or
/// groups that keep nodes out, and the parse problems that made them so. Damage that leaves the
/// node's username and `system:nodes` as they must be keeps nodes in; the rule warns of it
/// (`AwsAuthUnparsable`). Shared with the offline lint.
pub fn node_entry_problem(
    parsed: &aws_auth::AwsAuth,
    key: &'static str,
    entry: &RoleMapping,
    node_shown: &str,
) -> Option<(Reason, String)> {
    let admits = entry.username.as_deref() == Some(NODE_USERNAME)
        && entry.groups.iter().any(|g| g == NODES_GROUP);
    let problems: Vec<String> = parsed
        .problems_of_entry(key, entry.entry)
        .map(|p| clip(&p.message, 256).into_owned())
        .collect();
    if !problems.is_empty() && !admits {
        return Some((
            Reason::AwsAuthMalformed,
            format!(
                "{key} entry {} of kube-system/aws-auth, the one the authenticator uses for \
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
                "aws-auth maps {node_shown} ({key} entry {}) with username {:?}; nodes need \
                 {NODE_USERNAME}.",
                entry.entry,
                clip(entry.username.as_deref().unwrap_or_default(), 128)
            ),
        ));
    }
    if !entry.groups.iter().any(|g| g == NODES_GROUP) {
        // The Node authorizer admits a kubelet only as system:node:<name> in system:nodes
        // (kubernetes `pkg/auth/nodeidentifier/default.go`).
        return Some((
            Reason::NodeRoleMappingMissingGroups,
            format!(
                "aws-auth maps {node_shown} ({key} entry {}) without the group {NODES_GROUP}, \
                 which the Node authorizer requires of a kubelet.",
                entry.entry
            ),
        ));
    }
    None
}

/// The node role's entry lacks `system:bootstrappers`: AWS's documentation lists it for nodes,
/// but the Node authorizer admits a kubelet in `system:nodes` without it, so nodes join. A
/// warning, never a False (what EKS's own bindings give the group is not known here).
pub fn without_bootstrappers(key: &str, entry: &RoleMapping, node_shown: &str) -> Option<String> {
    (!entry.groups.iter().any(|g| g == BOOTSTRAPPERS_GROUP)).then(|| {
        format!(
            "aws-auth maps {node_shown} ({key} entry {}) without the group {BOOTSTRAPPERS_GROUP}, \
             which AWS's documentation lists for nodes; nodes join without it (the Node \
             authorizer needs only {NODES_GROUP}).",
            entry.entry
        )
    })
}

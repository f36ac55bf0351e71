//! `NodeRoleMapped`: nodes with the node role may join the cluster, through aws-auth or an EKS
//! access entry as the cluster's authentication mode allows (EKS `DescribeCluster`
//! `accessConfig.authenticationMode`; kubernetes-sigs/aws-iam-authenticator `pkg/mapper/configmap`).
//! Pure: no IO.
//!
//! Each path (aws-auth, access entries) gets its own verdict; the mode decides which count.
//! With the mode unknown, the verdict is kept only if every mode agrees.

use crate::arn::{self, IamArn};
use crate::aws_auth::{self, RoleMapping};
use crate::facts::{AuthMode, Observed};
use crate::node_mapping::{
    NODE_USERNAME, NODES_GROUP, controller_mapped_instead, is_node_mapping, mapped_with_path,
    node_entry_problem, without_bootstrappers,
};
use crate::plan::{Context, RoleName};
use crate::verdict::{Check, Outcome, Rule, Why};
use crate::warnings::Warning;
use crate::{clip, wording::list_bounded};
use karpenter_health_api::{ConditionStatus, ConditionType, Reason, SubjectRef};

const NODE_ACCESS_ENTRY_TYPES: [&str; 2] = ["EC2_LINUX", "EC2_WINDOWS"];

/// One path's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Verdict {
    Mapped(Reason, String),
    Problem(Reason, String),
    Unknown(Why),
}

impl Verdict {
    fn status(&self) -> ConditionStatus {
        match self {
            Verdict::Mapped(..) => ConditionStatus::True,
            Verdict::Problem(..) => ConditionStatus::False,
            Verdict::Unknown(_) => ConditionStatus::Unknown,
        }
    }
}

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::NodeRoleMapped, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::NodeRoleMapped, "node-role-mapping");
    let node = node_role_identity(ctx);
    let node_shown = match &node {
        Ok(arn) => arn.to_string(),
        Err(_) => "the node role".to_owned(),
    };
    let parsed = match &ctx.facts.cluster.aws_auth {
        Observed::Found(data) => Some(data.parsed()),
        _ => None,
    };
    let config_map = aws_auth_verdict(ctx, &node, &node_shown, parsed);
    let access = access_entry_verdict(ctx, &node_shown);

    let mode = auth_mode(ctx);
    let verdict = verdict_in_mode(&mode, &config_map, &access, &node_shown);

    let mut subjects = vec![ctx.node_class_subject()];
    if let Ok(arn) = &node {
        subjects.push(SubjectRef::new("IAMRole", arn.to_string()));
    }
    let (mut ok_reason, mut ok_message) = (Reason::NodeRoleMappedInAwsAuth, String::new());
    match &verdict {
        Verdict::Mapped(reason, how) => (ok_reason, ok_message) = (*reason, how.clone()),
        Verdict::Problem(reason, message) => {
            let about_aws_auth = matches!(
                reason,
                Reason::AwsAuthMalformed
                    | Reason::ControllerRoleMappedInstead
                    | Reason::NodeRoleMappedWithPath
                    | Reason::NodeRoleMappingMissingGroups
                    | Reason::NodeRoleMappingWrongUsername
            );
            if about_aws_auth {
                subjects.push(SubjectRef::namespaced(
                    "ConfigMap",
                    "kube-system",
                    "aws-auth",
                ));
            }
            c.fail(*reason, message.clone(), subjects);
        }
        Verdict::Unknown(why) => c.unknown(why.clone()),
    }
    warn_aws_auth_skipped(&mut c, &node, parsed, &verdict, &mode);
    if ok_reason == Reason::NodeRoleMappedInAwsAuth
        && matches!(verdict, Verdict::Mapped(..))
        && let Some((key, entry)) = parsed.and_then(|p| node_entry_in_force(&node, p))
        && let Some(message) = without_bootstrappers(key, &entry, &node_shown)
    {
        c.warn(
            Warning::NodeRoleMappingWithoutBootstrappers,
            message,
            vec![SubjectRef::namespaced("ConfigMap", "kube-system", "aws-auth")],
        );
    }
    c.finish(ok_reason, ok_message)
}

/// The verdict under the cluster's authentication mode; when that mode is not known, the one
/// every mode agrees on, else Unknown.
fn verdict_in_mode(
    mode: &Result<AuthMode, Why>,
    config_map: &Verdict,
    access: &Verdict,
    node_shown: &str,
) -> Verdict {
    match mode {
        Ok(mode) => combine(*mode, config_map, access, node_shown),
        Err(why) => {
            let all: Vec<Verdict> = AuthMode::ALL
                .iter()
                .map(|m| combine(*m, config_map, access, node_shown))
                .collect();
            if all.iter().all(|v| v.status() == all[0].status())
                && all[0].status() != ConditionStatus::Unknown
            {
                // Every mode agrees; API_AND_CONFIG_MAP (the eksctl default) words the message.
                all[1].clone()
            } else {
                Verdict::Unknown(why.clone())
            }
        }
    }
}

/// A warning for what the authenticator skips in aws-auth beyond what the condition reports,
/// unless EKS ignores aws-auth altogether.
fn warn_aws_auth_skipped(
    c: &mut Check,
    node: &Result<IamArn, Why>,
    parsed: Option<&aws_auth::AwsAuth>,
    verdict: &Verdict,
    mode: &Result<AuthMode, Why>,
) {
    // What the authenticator skips in aws-auth still hurts the identities mapped there, unless EKS
    // ignores aws-auth altogether; the node role's own entry was judged above.
    if let Some(parsed) = parsed {
        // What the condition itself reports is not repeated: all of mapRoles unreadable, or the
        // node role's own entry read only in part.
        let reported = matches!(verdict, Verdict::Problem(Reason::AwsAuthMalformed, _));
        let node_entry = node_entry_in_force(node, parsed).map(|(key, e)| (key, e.entry));
        let others: Vec<String> = parsed
            .problems
            .iter()
            .filter(|p| {
                let whole = p.key == aws_auth::MAP_ROLES && p.entry.is_none();
                let own = p.entry.is_some_and(|e| node_entry == Some((p.key, e)));
                !(reported && (whole || own))
            })
            .map(|p| clip(&p.to_string(), 256).into_owned())
            .collect();
        if !others.is_empty() && *mode != Ok(AuthMode::Api) {
            c.warn(
                Warning::AwsAuthUnparsable,
                format!(
                    "The authenticator skips part of kube-system/aws-auth: {}.",
                    list_bounded(&others, 5)
                ),
                vec![SubjectRef::namespaced(
                    "ConfigMap",
                    "kube-system",
                    "aws-auth",
                )],
            );
        }
    }
}

fn combine(mode: AuthMode, config_map: &Verdict, access: &Verdict, node: &str) -> Verdict {
    match mode {
        AuthMode::ConfigMap => config_map.clone(),
        AuthMode::Api => match (access, config_map) {
            (Verdict::Problem(Reason::NodeRoleNotMapped, m), Verdict::Mapped(..)) => {
                Verdict::Problem(
                    Reason::NodeRoleNotMapped,
                    format!("{m} aws-auth maps it, but authentication mode API ignores aws-auth."),
                )
            }
            _ => access.clone(),
        },
        // Either path admits the node; an access entry, when one exists, takes priority.
        AuthMode::ApiAndConfigMap => match (access, config_map) {
            (Verdict::Mapped(..), _) => access.clone(),
            (Verdict::Problem(Reason::AccessEntryWrongType, _), _) => access.clone(),
            // An access entry the answer did not show might shadow aws-auth (a STANDARD entry
            // for the node role does), so aws-auth alone cannot make it True here.
            (Verdict::Unknown(_), _) => access.clone(),
            (Verdict::Problem(..), Verdict::Problem(Reason::AwsAuthMissing, _)) => {
                Verdict::Problem(
                    Reason::NodeRoleNotMapped,
                    format!(
                        "Neither an access entry nor kube-system/aws-auth (which does not exist) maps \
                     {node}, so nodes launch but never join."
                    ),
                )
            }
            (Verdict::Problem(..), Verdict::Problem(reason, m)) => Verdict::Problem(
                *reason,
                format!("{m} No access entry exists for it either."),
            ),
            (Verdict::Problem(..), _) => config_map.clone(),
        },
    }
}

fn auth_mode(ctx: &Context) -> Result<AuthMode, Why> {
    match &ctx.facts.aws.eks_cluster {
        Observed::Found(cluster) => AuthMode::parse(cluster.authentication_mode.as_deref())
            .ok_or_else(|| {
                Why::new(
                    Reason::AwsUnsupported,
                    format!(
                        "EKS reports the unrecognised authentication mode {:?}.",
                        clip(
                            cluster.authentication_mode.as_deref().unwrap_or_default(),
                            64
                        )
                    ),
                )
            }),
        Observed::Unknown(u) => Err(Why::unobserved("The EKS cluster's authentication mode", u)),
        Observed::Absent => Err(Why::new(
            Reason::ClusterNameUnknown,
            "No EKS cluster has Karpenter's cluster name, so the authentication mode is unknown.",
        )),
    }
}

/// The node role as aws-auth must name it: path-less, in the role's partition and account.
fn node_role_identity(ctx: &Context) -> Result<IamArn, Why> {
    let name = match &ctx.node_role {
        RoleName::Known(name) => name.clone(),
        RoleName::Unobserved(why) => return Err(why.clone()),
        RoleName::Unresolvable(message) => {
            return Err(Why::new(
                Reason::NotObserved,
                format!("{message} Which role must be mapped is therefore unknown."),
            ));
        }
    };
    if let Some(Observed::Found(role)) = &ctx.facts.aws.node_role
        && let Ok(found) = arn::parse_iam(&role.arn)
    {
        return Ok(IamArn {
            path: "/".into(),
            name,
            ..found
        });
    }
    match &ctx.facts.aws.account {
        Observed::Found(account) => Ok(IamArn {
            partition: account.partition.clone(),
            account: account.account_id.clone(),
            resource_type: "role".into(),
            path: "/".into(),
            name,
        }),
        Observed::Unknown(u) => Err(Why::unobserved("The AWS account of the node role", u)),
        Observed::Absent => Err(Why::new(
            Reason::NotObserved,
            "The AWS account of the node role is not known.",
        )),
    }
}

/// The controller's role: its ServiceAccount's IRSA annotation, else its EKS Pod Identity role.
fn controller_role(ctx: &Context) -> Option<IamArn> {
    let karpenter = ctx.facts.cluster.karpenter.found()?;
    let from_pod_identity = || {
        let sa = karpenter.service_account.as_deref()?;
        ctx.facts
            .aws
            .pod_identity_role(sa)
            .found()
            .cloned()
            .flatten()
    };
    let arn = karpenter
        .controller_role_arn
        .clone()
        .or_else(from_pod_identity)?;
    arn::parse_iam(&arn).ok()
}

/// The entry the authenticator uses for the node role and the key it is under: the last
/// `mapRoles` entry for its ARN, else a `mapUsers` one (its `Map` looks roles up first, then
/// users, by the same canonical ARN; `pkg/mapper/configmap/mapper.go`).
fn node_entry_in_force(
    node: &Result<IamArn, Why>,
    parsed: &aws_auth::AwsAuth,
) -> Option<(&'static str, RoleMapping)> {
    let arn = node.as_ref().ok()?.to_string();
    if let Some(role) = parsed.role_in_force(&arn) {
        return Some((aws_auth::MAP_ROLES, role.clone()));
    }
    // Of several spellings the authenticator may use any: one that keeps nodes out decides.
    let users: Vec<RoleMapping> = parsed
        .users_in_force(&arn)
        .into_iter()
        .map(RoleMapping::from)
        .collect();
    let keeps_out = users
        .iter()
        .find(|u| node_entry_problem(parsed, aws_auth::MAP_USERS, u, "").is_some());
    keeps_out
        .or(users.last())
        .map(|u| (aws_auth::MAP_USERS, u.clone()))
}

fn aws_auth_verdict(
    ctx: &Context,
    node: &Result<IamArn, Why>,
    node_shown: &str,
    parsed: Option<&aws_auth::AwsAuth>,
) -> Verdict {
    let parsed = match (&ctx.facts.cluster.aws_auth, parsed) {
        (Observed::Unknown(u), _) => {
            return Verdict::Unknown(Why::unobserved("ConfigMap kube-system/aws-auth", u));
        }
        (Observed::Absent, _) | (_, None) => {
            return Verdict::Problem(
                Reason::AwsAuthMissing,
                format!(
                    "ConfigMap kube-system/aws-auth does not exist, so nothing maps {node_shown}."
                ),
            );
        }
        (Observed::Found(_), Some(parsed)) => parsed,
    };
    // Users are read even when mapRoles is not (`ParseMap` keeps each key's good part).
    let users_map = node
        .as_ref()
        .ok()
        .is_some_and(|n| !parsed.users_in_force(&n.to_string()).is_empty());
    if let Some(e) = parsed.map_roles_unreadable()
        && !users_map
    {
        return Verdict::Problem(
            Reason::AwsAuthMalformed,
            format!(
                "kube-system/aws-auth cannot be read ({e}), so the authenticator maps no role from \
                 it, {node_shown} included."
            ),
        );
    }
    let node = match node {
        Ok(node) => node,
        Err(why) => return Verdict::Unknown(why.clone()),
    };
    // The authenticator looks the node's path-less ARN up, lower-cased, in mapRoles and then in
    // mapUsers; the last entry wins.
    if let Some((key, entry)) = node_entry_in_force(&Ok(node.clone()), parsed) {
        return in_force_verdict(parsed, key, &entry, node_shown);
    }
    unmapped_verdict(ctx, parsed, node, node_shown)
}

/// The verdict when no entry maps the node role: an entry naming it with its IAM path, the
/// controller's role mapped as a node in its place, or nothing at all.
fn unmapped_verdict(
    ctx: &Context,
    parsed: &aws_auth::AwsAuth,
    node: &IamArn,
    node_shown: &str,
) -> Verdict {
    let controller = controller_role(ctx);
    let (mut with_path, mut controller_instead) = (Vec::new(), Vec::new());
    for entry in &parsed.map_roles {
        // Entries that are not IAM ARNs map nothing; they are the authenticator's problem.
        let Ok(mapped) = arn::parse_iam(&entry.rolearn) else {
            continue;
        };
        if mapped.same_principal(node) {
            if mapped.has_path() {
                with_path.push((entry.clone(), mapped));
            }
        } else if controller
            .as_ref()
            .is_some_and(|c| c.same_principal(&mapped))
            && is_node_mapping(entry)
        {
            controller_instead.push(entry);
        }
    }
    // A mapUsers entry for the role with its path matches no more than a mapRoles one.
    let mut users_with_path = Vec::new();
    for user in &parsed.map_users {
        if let Ok(mapped) = arn::parse_iam(&user.userarn)
            && mapped.same_principal(node)
            && mapped.has_path()
        {
            let entry = RoleMapping::from(user);
            users_with_path.push((entry, mapped));
        }
    }
    if let Some((entry, mapped)) = with_path.last().or(users_with_path.last()) {
        let (reason, message) = mapped_with_path(entry, mapped);
        return Verdict::Problem(reason, message);
    }
    if !controller_instead.is_empty() {
        let (reason, message) = controller_mapped_instead(&controller_instead, node_shown);
        return Verdict::Problem(reason, message);
    }
    Verdict::Problem(
        Reason::NodeRoleNotMapped,
        format!(
            "aws-auth has no mapRoles or mapUsers entry for {node_shown}, so nodes launch but \
             never join."
        ),
    )
}

/// The verdict on the one entry the authenticator uses for the node role (under `key`).
fn in_force_verdict(
    parsed: &aws_auth::AwsAuth,
    key: &'static str,
    entry: &RoleMapping,
    node_shown: &str,
) -> Verdict {
    match node_entry_problem(parsed, key, entry, node_shown) {
        Some((reason, message)) => Verdict::Problem(reason, message),
        None => {
            // system:nodes, which the verdict rests on, first; the others after it.
            let mut groups: Vec<String> = entry
                .groups
                .iter()
                .filter(|g| !g.is_empty())
                .map(|g| clip(g, 64).into_owned())
                .collect();
            groups.sort_by_key(|g| g != NODES_GROUP);
            groups.dedup();
            let under = if key == aws_auth::MAP_USERS {
                format!(" (under mapUsers, entry {})", entry.entry)
            } else {
                String::new()
            };
            Verdict::Mapped(
                Reason::NodeRoleMappedInAwsAuth,
                format!(
                    "aws-auth maps {node_shown}{under} with username {NODE_USERNAME} and groups {}.",
                    list_bounded(&groups, 5)
                ),
            )
        }
    }
}

fn access_entry_verdict(ctx: &Context, node_shown: &str) -> Verdict {
    let entries = match &ctx.facts.aws.node_role_access_entries {
        Observed::Unknown(u) => {
            return Verdict::Unknown(Why::unobserved("The node role's EKS access entries", u));
        }
        Observed::Absent => &[][..],
        Observed::Found(entries) => &entries[..],
    };
    if let Some(entry) = entries
        .iter()
        .find(|e| NODE_ACCESS_ENTRY_TYPES.contains(&e.type_.as_str()))
    {
        return Verdict::Mapped(
            Reason::NodeRoleHasAccessEntry,
            format!(
                "{node_shown} has an access entry of type {}.",
                clip(&entry.type_, 32)
            ),
        );
    }
    match entries.first() {
        None => Verdict::Problem(
            Reason::NodeRoleNotMapped,
            format!("No EKS access entry exists for {node_shown}, so nodes launch but never join."),
        ),
        Some(entry) => Verdict::Problem(
            Reason::AccessEntryWrongType,
            format!(
                "The access entry for {node_shown} is of type {}; nodes need EC2_LINUX or \
                 EC2_WINDOWS.",
                clip(&entry.type_, 32)
            ),
        ),
    }
}

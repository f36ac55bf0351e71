//! `ControllerCanLaunch`: the Karpenter controller's credentials work and its role may do what a
//! launch for this EC2NodeClass needs. Pure: no IO.
//!
//! 1. The principal: the controller ServiceAccount's IRSA annotation, else its EKS Pod Identity
//!    association (neither: `Unknown`, the controller may be using its node's role).
//! 2. The role exists and trusts the controller: IRSA needs the cluster's OIDC provider in IAM
//!    and a trust statement whose `sub`/`aud` conditions admit the ServiceAccount; Pod Identity
//!    needs `pods.eks.amazonaws.com` with `sts:AssumeRole` and `sts:TagSession`.
//! 3. The permissions of [`crate::karpenter_permissions`]: IAM's simulator's answers, which see
//!    permissions boundaries and SCPs; where it could not be asked, the role's own policies and
//!    boundary evaluated locally ([`crate::iam_policy`]), `Unknown` where that cannot decide.
//!
//! The failure classes: aws/karpenter-provider-aws #5444 #6036 #6298 #6659 (PassRole),
//! #1666 #2636 #5784 (credentials).

use super::{Check, Context, Outcome, Why};
use crate::arn;
use crate::facts::{ControllerRoleFacts, KarpenterFacts, Observed};
use crate::iam_policy::{self, Decision, Named, Principal, Request, RequestContext};
use crate::karpenter_permissions::ClassInputs;
use crate::warnings::Warning;
use crate::{clip, rules::list_bounded};
use karpenter_health_api::{ConditionType, Reason, SubjectRef};
use permissions::check_permissions;

mod permissions;

const WEB_IDENTITY: &str = "sts:AssumeRoleWithWebIdentity";
const POD_IDENTITY_SERVICE: &str = "pods.eks.amazonaws.com";

/// How the controller gets its role.
enum Identity {
    Irsa(String),
    PodIdentity(String),
}

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::ControllerCanLaunch, "controller-permissions");
    let karpenter = match &ctx.facts.cluster.karpenter {
        Observed::Found(k) => k,
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved("The Karpenter controller", u));
            return c.finish(Reason::ControllerPermissionsVerified, "");
        }
        Observed::Absent => {
            c.unknown(Why::new(
                Reason::NotObserved,
                "No Karpenter controller was found, so its credentials cannot be checked.",
            ));
            return c.finish(Reason::ControllerPermissionsVerified, "");
        }
    };
    if karpenter.dry_run_disabled {
        c.warn(
            Warning::DryRunDisabled,
            "The Karpenter controller runs with DISABLE_DRY_RUN: its ValidationSucceeded=True no \
             longer proves that it can launch.",
            vec![ctx.node_class_subject()],
        );
    }
    let Some(identity) = identity(ctx, karpenter, &mut c) else {
        return c.finish(Reason::ControllerPermissionsVerified, "");
    };
    let (role_arn, how) = match &identity {
        Identity::Irsa(arn) => (arn.as_str(), "IRSA"),
        Identity::PodIdentity(arn) => (arn.as_str(), "EKS Pod Identity"),
    };
    let sa = karpenter
        .service_account
        .clone()
        .unwrap_or_else(|| "the Karpenter ServiceAccount".into());
    let mut subjects = vec![
        ctx.node_class_subject(),
        SubjectRef::new("IAMRole", clip(role_arn, 256)),
    ];
    let role = match &ctx.facts.aws.controller_role {
        None => {
            c.unknown(Why::new(
                Reason::NotObserved,
                format!(
                    "The controller role {} has not been looked up yet.",
                    clip(role_arn, 256)
                ),
            ));
            return c.finish(Reason::ControllerPermissionsVerified, "");
        }
        Some(Observed::Unknown(u)) => {
            c.unknown(Why::unobserved(
                &format!("Controller role {}", clip(role_arn, 256)),
                u,
            ));
            return c.finish(Reason::ControllerPermissionsVerified, "");
        }
        Some(Observed::Absent) => {
            c.fail(
                Reason::ControllerRoleNotFound,
                format!(
                    "{how} gives {sa} the role {}, which IAM does not have, so the controller \
                     gets no credentials.",
                    clip(role_arn, 256)
                ),
                subjects,
            );
            return c.finish(Reason::ControllerPermissionsVerified, "");
        }
        Some(Observed::Found(role)) => role,
    };
    subjects[1] = SubjectRef::new("IAMRole", clip(&role.arn, 256));
    match identity {
        Identity::Irsa(_) => check_irsa_trust(ctx, &mut c, role, &sa, &subjects),
        Identity::PodIdentity(_) => check_pod_identity_trust(ctx, &mut c, role, &sa, &subjects),
    }
    let decided_by = check_permissions(ctx, &mut c, role, &subjects);
    c.finish(
        Reason::ControllerPermissionsVerified,
        format!(
            "Role {} ({how} for {sa}) trusts the controller and may pass the node role and launch \
             instances{} ({decided_by}).",
            clip(&role.arn, 256),
            if ClassInputs::of(&ctx.facts.cluster).is_some_and(|i| i.manages_instance_profile) {
                " and manage its instance profile"
            } else {
                ""
            },
        ),
    )
}

fn identity(ctx: &Context, karpenter: &KarpenterFacts, c: &mut Check) -> Option<Identity> {
    if let Some(arn) = karpenter
        .controller_role_arn
        .as_deref()
        .filter(|a| !a.is_empty())
    {
        return Some(Identity::Irsa(arn.to_owned()));
    }
    let sa = karpenter.service_account.as_deref();
    let shown = sa.unwrap_or("the Karpenter ServiceAccount");
    match &karpenter.service_account_state {
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved(&format!("ServiceAccount {shown}"), u));
            return None;
        }
        Observed::Absent => {
            c.unknown(Why::new(
                Reason::ControllerIdentityNotFound,
                format!(
                    "ServiceAccount {shown} does not exist, so no IRSA annotation or Pod Identity \
                     association names the controller's role."
                ),
            ));
            return None;
        }
        Observed::Found(()) => {}
    }
    let Some(sa) = sa else {
        c.unknown(Why::new(
            Reason::NotObserved,
            "The Karpenter ServiceAccount is not known.",
        ));
        return None;
    };
    match ctx.facts.aws.pod_identity_role(sa) {
        Observed::Found(Some(arn)) => Some(Identity::PodIdentity(arn)),
        Observed::Found(None) => {
            c.unknown(Why::new(
                Reason::ControllerIdentityNotFound,
                format!(
                    "ServiceAccount {sa} has no eks.amazonaws.com/role-arn annotation and no EKS \
                     Pod Identity association, so the controller uses whatever credentials its \
                     node has, which this check cannot see."
                ),
            ));
            None
        }
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved(
                &format!("The Pod Identity association of {sa}"),
                &u,
            ));
            None
        }
        Observed::Absent => {
            c.unknown(Why::new(
                Reason::NotObserved,
                format!("The Pod Identity association of {sa} is not known."),
            ));
            None
        }
    }
}

fn trust_policy(
    c: &mut Check,
    role: &ControllerRoleFacts,
    subjects: &[SubjectRef],
) -> Option<iam_policy::Policy> {
    let document = role
        .assume_role_policy_document
        .as_deref()
        .unwrap_or_default();
    match iam_policy::parse(document) {
        Ok(p) => Some(p),
        Err(e) => {
            c.fail(
                Reason::ControllerTrustMismatch,
                format!(
                    "The trust policy of role {} cannot be read ({e}), so nobody may assume it.",
                    clip(&role.arn, 256)
                ),
                subjects.to_vec(),
            );
            None
        }
    }
}

/// `https://oidc.eks.r.amazonaws.com/id/X` -> `oidc.eks.r.amazonaws.com/id/X`.
fn issuer_host_path(issuer: &str) -> &str {
    issuer
        .trim()
        .trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_end_matches('/')
}

fn check_irsa_trust(
    ctx: &Context,
    c: &mut Check,
    role: &ControllerRoleFacts,
    sa: &str,
    subjects: &[SubjectRef],
) {
    let Some(policy) = trust_policy(c, role, subjects) else {
        return;
    };
    let role_arn = arn::parse_iam(&role.arn).ok();
    let (partition, account) = role_arn
        .as_ref()
        .map(|a| (a.partition.clone(), a.account.clone()))
        .unwrap_or_else(|| ("aws".into(), String::new()));
    let trusted_providers: Vec<String> = policy
        .statements
        .iter()
        .filter(|s| s.allow)
        .filter_map(|s| s.principals.as_ref())
        .flat_map(|p| p.federated.iter().cloned())
        .filter(|f| f.contains(":oidc-provider/"))
        .collect();
    // The provider the cluster's issuer needs, when DescribeCluster told the issuer.
    let issuer = ctx
        .facts
        .aws
        .eks_cluster
        .found()
        .and_then(|e| e.oidc_issuer.as_deref())
        .map(issuer_host_path)
        .filter(|i| !i.is_empty());
    let candidates: Vec<(String, String)> = match issuer {
        Some(host_path) => vec![(
            format!("arn:{partition}:iam::{account}:oidc-provider/{host_path}"),
            host_path.to_owned(),
        )],
        None => trusted_providers
            .iter()
            .filter_map(|p| {
                let (_, host_path) = p.split_once(":oidc-provider/")?;
                Some((p.clone(), host_path.to_owned()))
            })
            .collect(),
    };
    if candidates.is_empty() {
        c.fail(
            Reason::ControllerTrustMismatch,
            format!(
                "The trust policy of role {} names no OIDC provider, so IRSA cannot give {sa} \
                 its credentials.",
                clip(&role.arn, 256)
            ),
            subjects.to_vec(),
        );
        return;
    }
    match &ctx.facts.aws.oidc_providers {
        Observed::Found(providers) => {
            let missing: Vec<&str> = candidates
                .iter()
                .map(|(arn, _)| arn.as_str())
                .filter(|arn| !providers.iter().any(|p| p == arn))
                .collect();
            if missing.len() == candidates.len() {
                c.fail(
                    Reason::OidcProviderMissing,
                    format!(
                        "IAM has no OIDC provider {}, so the IRSA credentials of {sa} never work.",
                        list_bounded(&missing, 2)
                    ),
                    subjects.to_vec(),
                );
                return;
            }
        }
        Observed::Unknown(u) => c.unknown(Why::unobserved("The account's IAM OIDC providers", u)),
        Observed::Absent => {}
    }
    let wanted_sub = format!("system:serviceaccount:{}", sa.replace('/', ":"));
    let mut undecided = Vec::new();
    for (provider, host_path) in &candidates {
        let context = RequestContext::new()
            .with_value(&format!("{host_path}:sub"), &wanted_sub)
            .with_value(&format!("{host_path}:aud"), "sts.amazonaws.com");
        let principal = Principal::Federated(provider.clone());
        match iam_policy::evaluate(
            &[Named {
                name: "the trust policy",
                policy: &policy,
            }],
            &Request {
                principal: Some(&principal),
                action: WEB_IDENTITY,
                resource: &role.arn,
                context: &context,
            },
        ) {
            Decision::Allowed(_) => return,
            Decision::Undecided(why) => undecided.extend(why),
            Decision::ExplicitDeny(_) | Decision::ImplicitDeny => {}
        }
    }
    if !undecided.is_empty() {
        c.unknown(Why::new(
            Reason::PolicyUndecided,
            format!(
                "Whether the trust policy of role {} admits {sa} cannot be decided: {}.",
                clip(&role.arn, 256),
                clip(&list_bounded(&undecided, 2), 512)
            ),
        ));
        return;
    }
    // Say what the trust admits instead: its `sub` conditions and providers.
    let subs: Vec<String> = policy
        .statements
        .iter()
        .flat_map(|s| s.conditions.iter())
        .filter(|cond| cond.key.to_ascii_lowercase().ends_with(":sub"))
        .flat_map(|cond| cond.values.iter().map(|v| clip(v, 128).into_owned()))
        .collect();
    let admits = if subs.is_empty() {
        format!("trusts {}", list_bounded(&trusted_providers, 2))
    } else {
        format!("admits only {}", list_bounded(&subs, 3))
    };
    c.fail(
        Reason::ControllerTrustMismatch,
        format!(
            "The trust policy of role {} {admits}, not {wanted_sub} (aud sts.amazonaws.com) \
             through {}, so the controller's IRSA credentials never work.",
            clip(&role.arn, 256),
            candidates[0].0
        ),
        subjects.to_vec(),
    );
}

fn check_pod_identity_trust(
    ctx: &Context,
    c: &mut Check,
    role: &ControllerRoleFacts,
    sa: &str,
    subjects: &[SubjectRef],
) {
    let Some(policy) = trust_policy(c, role, subjects) else {
        return;
    };
    let mut context = RequestContext::new();
    if let Ok(role_arn) = arn::parse_iam(&role.arn) {
        context = context.with_value("aws:SourceAccount", &role_arn.account);
        if let (Ok(cluster), Some(region)) = (
            ctx.karpenter_cluster_name.as_ref(),
            ctx.facts.aws.region.as_deref(),
        ) {
            let cluster_arn = format!(
                "arn:{}:eks:{region}:{}:cluster/{cluster}",
                role_arn.partition, role_arn.account
            );
            context = context
                .with_value("aws:SourceArn", &cluster_arn)
                .with_value("aws:RequestTag/eks-cluster-arn", &cluster_arn)
                .with_value("aws:RequestTag/eks-cluster-name", cluster);
        }
    }
    if let Some((namespace, name)) = sa.split_once('/') {
        context = context
            .with_value("aws:RequestTag/kubernetes-namespace", namespace)
            .with_value("aws:RequestTag/kubernetes-service-account", name);
    }
    let principal = Principal::Service(POD_IDENTITY_SERVICE.into());
    let mut missing = Vec::new();
    for action in ["sts:AssumeRole", "sts:TagSession"] {
        match iam_policy::evaluate(
            &[Named {
                name: "the trust policy",
                policy: &policy,
            }],
            &Request {
                principal: Some(&principal),
                action,
                resource: &role.arn,
                context: &context,
            },
        ) {
            Decision::Allowed(_) => {}
            Decision::Undecided(why) => c.unknown(Why::new(
                Reason::PolicyUndecided,
                format!(
                    "Whether the trust policy of role {} lets {POD_IDENTITY_SERVICE} call {action} \
                     cannot be decided: {}.",
                    clip(&role.arn, 256),
                    clip(&list_bounded(&why, 2), 512)
                ),
            )),
            Decision::ExplicitDeny(_) | Decision::ImplicitDeny => missing.push(action),
        }
    }
    if !missing.is_empty() {
        c.fail(
            Reason::PodIdentityTrustMissing,
            format!(
                "EKS Pod Identity gives {sa} role {}, but its trust policy does not let \
                 {POD_IDENTITY_SERVICE} call {}, so the controller gets no credentials.",
                clip(&role.arn, 256),
                missing.join(" and ")
            ),
            subjects.to_vec(),
        );
    }
}

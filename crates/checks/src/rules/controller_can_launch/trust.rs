//! Whether the controller role trusts the controller: IRSA (the cluster's OIDC provider, with the
//! ServiceAccount's `sub` and the token's audience), EKS Pod Identity (`pods.eks.amazonaws.com`),
//! or a Pod Identity association with a target role (the target trusts the association's role).
//! Pure: no IO.
//!
//! The audience of an IRSA token is `sts.amazonaws.com` unless the ServiceAccount's
//! `eks.amazonaws.com/audience` annotation names another (amazon-eks-pod-identity-webhook
//! `README.md`); the trust's `aud` condition is checked against that one. A Pod Identity
//! association may name a `targetRoleArn`: EKS assumes the association's role, then the target
//! role with it (EKS user guide, "Access AWS resources in other accounts with Pod Identity"),
//! so the target's trust must let the association's role call `sts:AssumeRole` and
//! `sts:TagSession`.

use crate::arn;
use crate::clip;
use crate::facts::{ControllerRoleFacts, Observed};
use crate::iam_policy::{self, Decision, Named, Principal, Request, RequestContext};
use crate::plan::Context;
use crate::verdict::{Check, Why};
use crate::wording::list_bounded;
use karpenter_health_api::{Reason, SubjectRef};

const WEB_IDENTITY: &str = "sts:AssumeRoleWithWebIdentity";
pub const POD_IDENTITY_SERVICE: &str = "pods.eks.amazonaws.com";
/// The audience of an IRSA token without an `eks.amazonaws.com/audience` annotation.
pub const DEFAULT_AUDIENCE: &str = "sts.amazonaws.com";

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

pub fn check_irsa_trust(
    ctx: &Context,
    c: &mut Check,
    role: &ControllerRoleFacts,
    sa: &str,
    audience: &str,
    subjects: &[SubjectRef],
) {
    let Some(policy) = trust_policy(c, role, subjects) else {
        return;
    };
    let trusted_providers = trusted_oidc_providers(&policy);
    let candidates = oidc_candidates(ctx, role, &trusted_providers);
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
    if oidc_providers_missing(ctx, c, &candidates, sa, subjects) {
        return;
    }
    let wanted_sub = format!("system:serviceaccount:{}", sa.replace('/', ":"));
    let Some(undecided) = web_identity_undecided(&policy, role, &candidates, &wanted_sub, audience)
    else {
        return;
    };
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
    let admits = what_trust_admits(&policy, &trusted_providers);
    c.fail(
        Reason::ControllerTrustMismatch,
        format!(
            "The trust policy of role {} {admits}, not {wanted_sub} (aud {audience}) through {}, \
             so the controller's IRSA credentials never work.",
            clip(&role.arn, 256),
            candidates[0].0
        ),
        subjects.to_vec(),
    );
}

/// The OIDC providers the trust policy's Allow statements name as federated principals.
fn trusted_oidc_providers(policy: &iam_policy::Policy) -> Vec<String> {
    policy
        .statements
        .iter()
        .filter(|s| s.allow)
        .filter_map(|s| s.principals.as_ref())
        .flat_map(|p| p.federated.iter().cloned())
        .filter(|f| f.contains(":oidc-provider/"))
        .collect()
}

/// The OIDC providers (ARN, issuer host and path) IRSA may come through: the one the cluster's
/// issuer needs when DescribeCluster told it, else those the trust policy names.
fn oidc_candidates(
    ctx: &Context,
    role: &ControllerRoleFacts,
    trusted_providers: &[String],
) -> Vec<(String, String)> {
    let role_arn = arn::parse_iam(&role.arn).ok();
    let (partition, account) = role_arn
        .as_ref()
        .map(|a| (a.partition.clone(), a.account.clone()))
        .unwrap_or_else(|| ("aws".into(), String::new()));
    // The provider the cluster's issuer needs, when DescribeCluster told the issuer.
    let issuer = ctx
        .facts
        .aws
        .eks_cluster
        .found()
        .and_then(|e| e.oidc_issuer.as_deref())
        .map(issuer_host_path)
        .filter(|i| !i.is_empty());
    match issuer {
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
    }
}

/// False when IAM has none of the candidate OIDC providers; true when it failed.
fn oidc_providers_missing(
    ctx: &Context,
    c: &mut Check,
    candidates: &[(String, String)],
    sa: &str,
    subjects: &[SubjectRef],
) -> bool {
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
                return true;
            }
        }
        Observed::Unknown(u) => c.unknown(Why::unobserved("The account's IAM OIDC providers", u)),
        Observed::Absent => {}
    }
    false
}

/// Whether the trust policy lets the service account assume the role through a candidate
/// provider: `None` when one allows it, else why it is undecided (empty when denied).
fn web_identity_undecided(
    policy: &iam_policy::Policy,
    role: &ControllerRoleFacts,
    candidates: &[(String, String)],
    wanted_sub: &str,
    audience: &str,
) -> Option<Vec<String>> {
    let mut undecided = Vec::new();
    for (provider, host_path) in candidates {
        let context = RequestContext::new()
            .with_value(&format!("{host_path}:sub"), wanted_sub)
            .with_value(&format!("{host_path}:aud"), audience);
        let principal = Principal::Federated(provider.clone());
        match iam_policy::evaluate(
            &[Named {
                name: "the trust policy",
                policy,
            }],
            &Request {
                principal: Some(&principal),
                action: WEB_IDENTITY,
                resource: &role.arn,
                context: &context,
            },
        ) {
            Decision::Allowed(_) => return None,
            Decision::Undecided(why) => undecided.extend(why),
            Decision::ExplicitDeny(_) | Decision::ImplicitDeny => {}
        }
    }
    Some(undecided)
}

/// What the trust policy admits instead, for a message: its `sub` conditions, else its
/// providers.
fn what_trust_admits(policy: &iam_policy::Policy, trusted_providers: &[String]) -> String {
    // Say what the trust admits instead: its `sub` conditions and providers.
    let subs: Vec<String> = policy
        .statements
        .iter()
        .flat_map(|s| s.conditions.iter())
        .filter(|cond| cond.key.to_ascii_lowercase().ends_with(":sub"))
        .flat_map(|cond| cond.values.iter().map(|v| clip(v, 128).into_owned()))
        .collect();
    if subs.is_empty() {
        format!("trusts {}", list_bounded(trusted_providers, 2))
    } else {
        format!("admits only {}", list_bounded(&subs, 3))
    }
}

pub fn check_pod_identity_trust(
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
    let missing = not_admitted(c, &policy, role, &principal, &context);
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

/// A Pod Identity association with a target role: the target (`role`) must let the association's
/// role `via` call `sts:AssumeRole` and `sts:TagSession`.
pub fn check_chained_trust(
    c: &mut Check,
    role: &ControllerRoleFacts,
    via: &str,
    sa: &str,
    subjects: &[SubjectRef],
) {
    let Some(policy) = trust_policy(c, role, subjects) else {
        return;
    };
    let principal = Principal::Aws(via.to_owned());
    let missing = not_admitted(c, &policy, role, &principal, &RequestContext::new());
    if !missing.is_empty() {
        c.fail(
            Reason::ControllerTrustMismatch,
            format!(
                "EKS Pod Identity gives {sa} role {} with target role {}, but the target's trust \
                 policy does not let {} call {}, so the controller gets no credentials.",
                clip(via, 256),
                clip(&role.arn, 256),
                clip(via, 256),
                missing.join(" and ")
            ),
            subjects.to_vec(),
        );
    }
}

/// Which of `sts:AssumeRole` and `sts:TagSession` the trust policy does not let `principal` call
/// on `role`; an undecidable one is recorded as unknown instead.
fn not_admitted(
    c: &mut Check,
    policy: &iam_policy::Policy,
    role: &ControllerRoleFacts,
    principal: &Principal,
    context: &RequestContext,
) -> Vec<&'static str> {
    let mut missing = Vec::new();
    for action in ["sts:AssumeRole", "sts:TagSession"] {
        match iam_policy::evaluate(
            &[Named {
                name: "the trust policy",
                policy,
            }],
            &Request {
                principal: Some(principal),
                action,
                resource: &role.arn,
                context,
            },
        ) {
            Decision::Allowed(_) => {}
            Decision::Undecided(why) => c.unknown(Why::new(
                Reason::PolicyUndecided,
                format!(
                    "Whether the trust policy of role {} lets {} call {action} cannot be \
                     decided: {}.",
                    clip(&role.arn, 256),
                    principal_name(principal),
                    clip(&list_bounded(&why, 2), 512)
                ),
            )),
            Decision::ExplicitDeny(_) | Decision::ImplicitDeny => missing.push(action),
        }
    }
    missing
}

fn principal_name(principal: &Principal) -> String {
    match principal {
        Principal::Service(name) => name.clone(),
        Principal::Aws(arn) | Principal::Federated(arn) => clip(arn, 256).into_owned(),
    }
}

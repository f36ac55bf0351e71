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

use crate::arn;
use crate::clip;
use crate::facts::{KarpenterFacts, Observed};
use crate::plan::Context;
use crate::verdict::{Check, Outcome, Rule, Why};
use crate::warnings::Warning;
use karpenter_health_api::{ConditionType, Reason, SubjectRef};
use permissions::check_permissions;
use trust::{DEFAULT_AUDIENCE, check_chained_trust, check_irsa_trust, check_pod_identity_trust};

mod permissions;
mod trust;

/// How the controller gets its role.
enum CredentialSource {
    /// The ServiceAccount's IRSA annotation, and the token's audience.
    Irsa {
        role: String,
        audience: String,
    },
    PodIdentity(String),
    /// A Pod Identity association with a target role: EKS assumes `via`, then `target` with it.
    PodIdentityChained {
        via: String,
        target: String,
    },
}

impl CredentialSource {
    /// The role whose credentials the controller ends up with.
    fn role(&self) -> &str {
        match self {
            CredentialSource::Irsa { role, .. } | CredentialSource::PodIdentity(role) => role,
            CredentialSource::PodIdentityChained { target, .. } => target,
        }
    }

    fn how(&self) -> &'static str {
        match self {
            CredentialSource::Irsa { .. } => "IRSA",
            CredentialSource::PodIdentity(_) => "EKS Pod Identity",
            CredentialSource::PodIdentityChained { .. } => "EKS Pod Identity with a target role",
        }
    }
}

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::ControllerCanLaunch, check);

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
    let how = identity.how();
    let sa = karpenter
        .service_account
        .clone()
        .unwrap_or_else(|| "the Karpenter ServiceAccount".into());
    let mut subjects = vec![
        ctx.node_class_subject(),
        SubjectRef::new("IAMRole", clip(identity.role(), 256)),
    ];
    let Some(role) = controller_role(ctx, &mut c, &identity, &sa, &subjects) else {
        return c.finish(Reason::ControllerPermissionsVerified, "");
    };
    subjects[1] = SubjectRef::new("IAMRole", clip(&role.arn, 256));
    match &identity {
        CredentialSource::Irsa { audience, .. } => {
            check_irsa_trust(ctx, &mut c, role, &sa, audience, &subjects);
        }
        CredentialSource::PodIdentity(_) => {
            check_pod_identity_trust(ctx, &mut c, role, &sa, &subjects)
        }
        CredentialSource::PodIdentityChained { via, .. } => {
            check_chained_trust(&mut c, role, via, &sa, &subjects);
        }
    }
    let verified = check_permissions(ctx, &mut c, role, &subjects);
    c.finish(
        Reason::ControllerPermissionsVerified,
        format!(
            "Role {} ({how} for {sa}) trusts the controller and may do what a launch for this \
             EC2NodeClass asks: {} ({}). Not asked: keys of the launch the operator cannot know \
             (instance types, the image's owner), which IAM would have reported missing.",
            clip(&role.arn, 256),
            verified.what,
            verified.decided_by,
        ),
    )
}

/// The controller's role as IAM answered it; `None` (and the finding why) when it was not
/// read, is in another account, or does not exist.
fn controller_role<'a>(
    ctx: &Context<'a>,
    c: &mut Check,
    identity: &CredentialSource,
    sa: &str,
    subjects: &[SubjectRef],
) -> Option<&'a crate::facts::ControllerRoleFacts> {
    let (role_arn, how) = (identity.role(), identity.how());
    match &ctx.facts.aws.controller_role {
        None => {
            c.unknown(Why::new(
                Reason::NotObserved,
                format!(
                    "The controller role {} has not been looked up yet.",
                    clip(role_arn, 256)
                ),
            ));
            None
        }
        Some(Observed::Unknown(u)) => {
            c.unknown(Why::unobserved(
                &format!("Controller role {}", clip(role_arn, 256)),
                u,
            ));
            None
        }
        // GetRole looks the name up in the operator's own account: a role of another account
        // is never "not found" from that answer.
        Some(Observed::Absent) if in_other_account(ctx, role_arn).is_some() => {
            c.unknown(Why::new(
                Reason::AwsOtherAccount,
                format!(
                    "The controller role {} is in account {}, which the operator's credentials \
                     cannot read, so its trust and permissions are not checked.",
                    clip(role_arn, 256),
                    in_other_account(ctx, role_arn).unwrap_or_default()
                ),
            ));
            None
        }
        // Nor is it proven missing while the operator's own account is not known: the ARN may
        // name another account.
        Some(Observed::Absent) if ctx.facts.aws.account.found().is_none() => {
            let why = match &ctx.facts.aws.account {
                Observed::Unknown(u) => Why::unobserved(
                    &format!(
                        "IAM has no role {} in the operator's account, but that account",
                        clip(role_arn, 256)
                    ),
                    u,
                ),
                _ => Why::new(
                    Reason::NotObserved,
                    format!(
                        "IAM has no role {} in the operator's account, but that account is not                          known, so the role may be of another account.",
                        clip(role_arn, 256)
                    ),
                ),
            };
            c.unknown(why);
            None
        }
        Some(Observed::Absent) => {
            c.fail(
                Reason::ControllerRoleNotFound,
                format!(
                    "{how} gives {sa} the role {}, which IAM does not have, so the controller \
                     gets no credentials.",
                    clip(role_arn, 256)
                ),
                subjects.to_vec(),
            );
            None
        }
        Some(Observed::Found(role)) => Some(role),
    }
}

fn identity(ctx: &Context, karpenter: &KarpenterFacts, c: &mut Check) -> Option<CredentialSource> {
    if let Some(arn) = karpenter
        .controller_role_arn
        .as_deref()
        .filter(|a| !a.is_empty())
    {
        return Some(CredentialSource::Irsa {
            role: arn.to_owned(),
            audience: karpenter
                .irsa_audience
                .clone()
                .unwrap_or_else(|| DEFAULT_AUDIENCE.to_owned()),
        });
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
        Observed::Found(Some(arn)) => Some(match ctx.facts.aws.pod_identity_via.get(sa) {
            Some(via) => CredentialSource::PodIdentityChained {
                via: via.clone(),
                target: arn,
            },
            None => CredentialSource::PodIdentity(arn),
        }),
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

/// The account of `role_arn` when it is another than the operator's (both known).
fn in_other_account(ctx: &Context, role_arn: &str) -> Option<String> {
    let account = ctx.facts.aws.account.found()?;
    let role = arn::parse_iam(role_arn).ok()?;
    (role.account != account.account_id).then_some(role.account)
}

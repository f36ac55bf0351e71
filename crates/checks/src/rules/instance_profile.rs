//! `InstanceProfileReady`: the instance profile nodes launch with is a valid name, exists and
//! holds the node role. Pure: no IO.
//!
//! Karpenter itself sets its `InstanceProfileReady=True` without any IAM call when
//! `spec.instanceProfile` is used (aws/karpenter-provider-aws `pkg/controllers/nodeclass/
//! instanceprofile.go`; #8072, #8312), so an ARN or a missing profile
//! shows up there as healthy while every launch fails.

use crate::arn;
use crate::clip;
use crate::facts::Observed;
use crate::plan::Context;
use crate::verdict::{Check, Outcome, Rule, Why};
use karpenter_health_api::{ConditionStatus, ConditionType, Reason, SubjectRef};

/// IAM's pattern for instance profile names: `^[\w+=,.@-]{1,128}$`.
pub fn is_valid_profile_name(name: &str) -> bool {
    arn::is_valid_iam_name(name, 128)
}

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::InstanceProfileReady, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::InstanceProfileReady, "instance-profile");
    let Some(profile) = profile_in_use(ctx, &mut c) else {
        return c.finish(Reason::InstanceProfileValid, "");
    };
    let ok_message = judge_profile(ctx, &mut c, profile);
    c.finish(Reason::InstanceProfileValid, ok_message)
}

/// The instance profile nodes launch with: spec.instanceProfile when it is a valid name (False
/// for an ARN or an invalid name), else the one Karpenter resolved for spec.role; `None` (and
/// the finding why) when there is none to look up.
fn profile_in_use<'a>(ctx: &Context<'a>, c: &mut Check) -> Option<&'a str> {
    let spec = &ctx.facts.cluster.node_class.spec;
    let node_class = ctx.node_class_subject();
    if let Some(given) = spec.instance_profile.as_deref() {
        let shown = clip(given, 256);
        if given.trim_start().starts_with("arn:") {
            let name = arn::parse_iam(given.trim())
                .ok()
                .filter(|a| a.resource_type == "instance-profile" && !a.name.is_empty())
                .map(|a| a.name)
                .unwrap_or_else(|| arn::name_of(given.trim()).to_owned());
            let karpenter_says = if ctx.karpenter_condition_status("InstanceProfileReady")
                == Some(ConditionStatus::True)
            {
                ", although Karpenter reports InstanceProfileReady=True"
            } else {
                ""
            };
            c.fail(
                Reason::InstanceProfileIsArn,
                format!(
                    "spec.instanceProfile is the ARN {shown}; Karpenter passes it to EC2 as a \
                     name, so every launch fails{karpenter_says}. Set spec.instanceProfile to \
                     {:?}.",
                    clip(&name, 128)
                ),
                vec![node_class, SubjectRef::new("IAMInstanceProfile", shown)],
            );
            return None;
        }
        if !is_valid_profile_name(given) {
            c.fail(
                Reason::InstanceProfileNameInvalid,
                format!(
                    "spec.instanceProfile {shown:?} is not a valid instance profile name (1 to 128 \
                     characters from letters, digits and +=,.@_-)."
                ),
                vec![node_class],
            );
            return None;
        }
        Some(given)
    } else if spec.role.is_some() {
        match ctx
            .facts
            .cluster
            .node_class
            .status
            .as_ref()
            .and_then(|s| s.instance_profile.as_deref())
        {
            Some(resolved) if !resolved.is_empty() => Some(resolved),
            _ => {
                c.unknown(Why::new(
                    Reason::InstanceProfileNotResolved,
                    "Karpenter has not written status.instanceProfile for spec.role yet.",
                ));
                None
            }
        }
    } else {
        c.unknown(Why::new(
            Reason::NotObserved,
            "The EC2NodeClass names neither spec.role nor spec.instanceProfile.",
        ));
        None
    }
}

/// Whether the profile exists and holds the node role (spec.role's, when given); the True
/// message when it does.
fn judge_profile(ctx: &Context, c: &mut Check, profile: &str) -> String {
    let spec = &ctx.facts.cluster.node_class.spec;
    let node_class = ctx.node_class_subject();
    let profile_shown = clip(profile, 256);
    let subjects = || {
        vec![
            node_class.clone(),
            SubjectRef::new("IAMInstanceProfile", profile),
        ]
    };
    let mut ok_message = String::new();
    match &ctx.facts.aws.instance_profile {
        None => c.unknown(Why::new(
            Reason::NotObserved,
            format!("Instance profile {profile_shown} has not been looked up yet."),
        )),
        Some(Observed::Unknown(u)) => c.unknown(Why::unobserved(
            &format!("Instance profile {profile_shown}"),
            u,
        )),
        Some(Observed::Absent) => c.fail(
            Reason::InstanceProfileNotFound,
            format!("IAM has no instance profile named {profile_shown}, so no node can launch."),
            subjects(),
        ),
        Some(Observed::Found(found)) => match found.roles.first() {
            None => c.fail(
                Reason::InstanceProfileHasNoRole,
                format!(
                    "Instance profile {profile_shown} holds no role, so nodes get no credentials."
                ),
                subjects(),
            ),
            Some(role) => {
                let wanted = spec.role.as_deref().map(arn::name_of);
                match wanted {
                    Some(wanted) if !wanted.eq_ignore_ascii_case(&role.name) => c.fail(
                        Reason::InstanceProfileRoleMismatch,
                        format!(
                            "Instance profile {profile_shown} holds role {}, but spec.role is {}.",
                            clip(&role.name, 128),
                            clip(wanted, 128)
                        ),
                        subjects(),
                    ),
                    _ => {
                        ok_message = format!(
                            "Instance profile {profile_shown} exists and holds role {}.",
                            clip(&role.name, 128)
                        )
                    }
                }
            }
        },
    }
    ok_message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_names_follow_the_iam_pattern() {
        assert!(is_valid_profile_name(
            "KarpenterNodeInstanceProfile-demo_1+=,.@"
        ));
        assert!(!is_valid_profile_name(""));
        assert!(!is_valid_profile_name("has space"));
        assert!(!is_valid_profile_name("slash/name"));
        assert!(!is_valid_profile_name("ünï"));
        assert!(!is_valid_profile_name(&"a".repeat(129)));
    }
}

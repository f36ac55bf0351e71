//! The permission half of `ControllerCanLaunch`: the questions of
//! [`crate::karpenter_permissions`] answered by IAM's simulator, or, where it could not be asked,
//! by evaluating the role's own policies and boundary locally ([`crate::plan::permissions`]), and
//! what the denials mean for a launch. Pure: no IO.

use crate::facts::{ControllerRoleFacts, Observed, PermissionFacts};
use crate::karpenter_permissions::{Group, Inputs, PASS_ROLE, Question};
use crate::plan::Context;
use crate::plan::permissions::{
    Answer, DECIDED_BY_SIMULATOR, DECIDED_LOCALLY, inputs, local, simulated,
};
use crate::verdict::{Check, Why};
use crate::warnings::Warning;
use crate::{arn, clip};
use karpenter_health_api::{Reason, SubjectRef};

/// What the permission half verified, for the True message: the questions and who answered.
pub(super) struct Verified {
    pub what: String,
    pub decided_by: &'static str,
}

pub(super) fn check_permissions(
    ctx: &Context,
    c: &mut Check,
    role: &ControllerRoleFacts,
    subjects: &[SubjectRef],
) -> Verified {
    let inputs = match inputs(ctx) {
        Ok(i) => i,
        Err(why) => {
            c.unknown(why);
            return Verified {
                what: String::new(),
                decided_by: "",
            };
        }
    };
    let decided_by = check_answers(ctx, c, role, subjects, &inputs);
    let what = inputs.verified(!c.warned(Warning::ControllerImageReadsDeniedWhileImagesKept));
    Verified { what, decided_by }
}

/// Asks each question of the controller's role and reports the denied and undecided ones;
/// what decided the answers, empty when none could be had.
fn check_answers(
    ctx: &Context,
    c: &mut Check,
    role: &ControllerRoleFacts,
    subjects: &[SubjectRef],
    inputs: &Inputs,
) -> &'static str {
    // The spot service-linked role's question is SpotReady's.
    let questions: Vec<Question> = inputs
        .questions()
        .into_iter()
        .filter(|q| q.group != Group::SpotServiceLinkedRole)
        .collect();
    let Some((answers, decided_by)) = answers_of(ctx, c, role, subjects, inputs, &questions) else {
        return "";
    };
    let denied = denied_of(c, role, &questions, answers);
    report_denied(ctx, c, role, subjects, &denied, decided_by);
    decided_by
}

/// The answers to the questions, from IAM's policy simulator or else from the role's own
/// policies, with what decided them; `None` (and the finding why) when there are none.
fn answers_of(
    ctx: &Context,
    c: &mut Check,
    role: &ControllerRoleFacts,
    subjects: &[SubjectRef],
    inputs: &Inputs,
    questions: &[Question],
) -> Option<(Vec<Answer>, &'static str)> {
    match &ctx.facts.aws.controller_permissions {
        None => {
            c.unknown(Why::new(
                Reason::NotObserved,
                "The controller role's permissions have not been asked about yet.",
            ));
            None
        }
        Some(PermissionFacts {
            simulated: Observed::Found(decisions),
            ..
        }) => Some((
            questions.iter().map(|q| simulated(q, decisions)).collect(),
            DECIDED_BY_SIMULATOR,
        )),
        Some(PermissionFacts {
            simulated,
            policies,
        }) => {
            let sim_why = match simulated {
                Observed::Unknown(u) => format!(
                    "IAM's policy simulator could not be asked ({})",
                    clip(&u.detail, 256)
                ),
                _ => "IAM's policy simulator gave no answer".into(),
            };
            match policies {
                Some(Observed::Found(policies)) => {
                    Some((local(inputs, questions, policies), DECIDED_LOCALLY))
                }
                Some(Observed::Unknown(u)) => {
                    let why = Why::unobserved(
                        &format!("The policies of role {}", clip(&role.arn, 256)),
                        u,
                    );
                    c.unknown(Why::new(
                        why.reason,
                        format!("{sim_why}, and {}", why.message),
                    ));
                    None
                }
                Some(Observed::Absent) => {
                    c.fail(
                        Reason::ControllerRoleNotFound,
                        format!(
                            "Role {} vanished while its policies were read.",
                            clip(&role.arn, 256)
                        ),
                        subjects.to_vec(),
                    );
                    None
                }
                None => {
                    let why = match simulated {
                        Observed::Unknown(u) => Why::unobserved("IAM's policy simulation", u),
                        _ => Why::new(
                            Reason::NotObserved,
                            "IAM's policy simulation has no answer yet.",
                        ),
                    };
                    c.unknown(why);
                    None
                }
            }
        }
    }
}

/// The reason a denied answer to `q` is reported under.
fn group_reason(q: &Question) -> Reason {
    match (q.group, q.action) {
        (_, PASS_ROLE) => Reason::ControllerCannotPassNodeRole,
        (Group::InstanceProfile, _) => Reason::ControllerCannotManageInstanceProfiles,
        // The spot service-linked role's question is never asked here (`check_answers`).
        (Group::Launch | Group::SpotServiceLinkedRole, _) => {
            Reason::ControllerCannotLaunchInstances
        }
        (Group::AmiParameters, _) => Reason::ControllerCannotReadAmiParameters,
        (Group::Images, _) => Reason::ControllerCannotDescribeImages,
    }
}

/// The denied answers, each worded with its reason; Unknown for each undecided or unasked one.
fn denied_of(
    c: &mut Check,
    role: &ControllerRoleFacts,
    questions: &[Question],
    answers: Vec<Answer>,
) -> Vec<(Reason, String)> {
    let mut denied: Vec<(Reason, String)> = Vec::new();
    for (q, a) in questions.iter().zip(answers) {
        match a {
            Answer::Allowed => {}
            Answer::Denied(by) => {
                let mut text = format!("{} on {} ({by})", q.action, clip(&q.resource, 256));
                if q.action == PASS_ROLE
                    && let Ok(node) = arn::parse_iam(&q.resource)
                    && node.has_path()
                {
                    text.push_str(&format!(
                        "; note the node role's path {}: a grant on {} does not cover it",
                        node.path,
                        node.without_path()
                    ));
                }
                denied.push((group_reason(q), text));
            }
            Answer::Undecided(why) => c.unknown(Why::new(
                Reason::PolicyUndecided,
                format!(
                    "Whether role {} may {} on {} cannot be decided: {}.",
                    clip(&role.arn, 256),
                    q.action,
                    clip(&q.resource, 256),
                    clip(&why, 512)
                ),
            )),
            Answer::Unasked(why) => c.unknown(why),
        }
    }
    denied
}

/// False for each reason with denied actions, in a fixed order; a warning instead for image
/// reads while Karpenter keeps launching from the images it resolved before.
fn report_denied(
    ctx: &Context,
    c: &mut Check,
    role: &ControllerRoleFacts,
    subjects: &[SubjectRef],
    denied: &[(Reason, String)],
    decided_by: &str,
) {
    for reason in [
        Reason::ControllerCannotPassNodeRole,
        Reason::ControllerCannotManageInstanceProfiles,
        Reason::ControllerCannotLaunchInstances,
        Reason::ControllerCannotReadAmiParameters,
        Reason::ControllerCannotDescribeImages,
    ] {
        let texts: Vec<&str> = denied
            .iter()
            .filter(|(r, _)| *r == reason)
            .map(|(_, t)| t.as_str())
            .collect();
        if texts.is_empty() {
            continue;
        }
        // Karpenter resolves images only in its EC2NodeClass controller; when that read fails
        // it returns before touching the status, keeps status.amis and AMIsReady, and launches
        // from them (aws/karpenter-provider-aws pkg/controllers/nodeclass/ami.go,
        // pkg/providers/amifamily/resolver.go): nothing fails until the class is edited or a new
        // class resolves, so a warning while it holds images for this generation.
        if matches!(
            reason,
            Reason::ControllerCannotReadAmiParameters | Reason::ControllerCannotDescribeImages
        ) && let Some(kept) = crate::plan::images::images_karpenter_keeps(ctx)
        {
            c.warn(
                Warning::ControllerImageReadsDeniedWhileImagesKept,
                format!(
                    "Role {} may not {}; {decided_by}. Karpenter keeps launching from the \
                     image(s) it resolved before ({kept}), but the next edit of this \
                     EC2NodeClass, or a new class, resolves nothing.",
                    clip(&role.arn, 256),
                    texts.join("; ")
                ),
                subjects.to_vec(),
            );
            continue;
        }
        c.fail(
            reason,
            format!(
                "Role {} may not {}; {decided_by}.",
                clip(&role.arn, 256),
                texts.join("; ")
            ),
            subjects.to_vec(),
        );
    }
}


//! The permission half of `ControllerCanLaunch`: the questions of
//! [`crate::karpenter_permissions`] answered by IAM's simulator, or, where it could not be asked,
//! by evaluating the role's own policies and boundary locally. Pure: no IO.

use crate::facts::{ControllerRoleFacts, Observed, PermissionFacts, RolePolicies};
use crate::iam_policy::{self, Decision, Named, Request};
use crate::karpenter_permissions::{
    ClassInputs, Group, Inputs, PASS_ROLE, Question, Verdict, verdict,
};
use crate::plan::{Context, RoleName};
use crate::verdict::{Check, Why};
use crate::warnings::Warning;
use crate::wording::list_bounded;
use crate::{arn, clip};
use karpenter_health_api::{Reason, SubjectRef};

/// The answer to one question, from the simulator or the local evaluation.
enum Answer {
    Allowed,
    /// Denied, with who denied it.
    Denied(String),
    Undecided(String),
    Unasked(Why),
}

/// The inputs of the permission questions, as the facts give them.
fn inputs(ctx: &Context) -> Result<Inputs, Why> {
    let class = ClassInputs::of(&ctx.facts.cluster).ok_or_else(|| {
        ctx.karpenter_cluster_name.clone().err().unwrap_or_else(|| {
            Why::new(
                Reason::ClusterNameUnknown,
                "Karpenter's cluster name is not known.",
            )
        })
    })?;
    let account = match &ctx.facts.aws.account {
        Observed::Found(a) => a,
        Observed::Unknown(u) => return Err(Why::unobserved("The AWS account", u)),
        Observed::Absent => {
            return Err(Why::new(
                Reason::NotObserved,
                "The AWS account is not known.",
            ));
        }
    };
    let region = ctx.facts.aws.region.as_deref().ok_or_else(|| {
        Why::new(
            Reason::RegionUnknown,
            "The AWS region is not known, so launch permissions cannot be asked.",
        )
    })?;
    let node_role = match &ctx.facts.aws.node_role {
        Some(Observed::Found(role)) => role.arn.clone(),
        Some(Observed::Unknown(u)) => return Err(Why::unobserved("The node role", u)),
        Some(Observed::Absent) | None => {
            let what = match &ctx.node_role {
                RoleName::Known(name) => format!("Node role {}", clip(name, 64)),
                _ => "The node role".into(),
            };
            return Err(Why::new(
                Reason::NotObserved,
                format!("{what} is not known in IAM, so passing it cannot be asked about."),
            ));
        }
    };
    // The minor the adapter named the alias's parameter with: the one its SSM reads were for.
    let minor = ctx.facts.aws.kubernetes_minor();
    Ok(class.complete(
        &account.partition,
        &account.account_id,
        region,
        &node_role,
        minor,
    ))
}

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

/// Who decided the permissions, as the messages say it.
const DECIDED_BY_SIMULATOR: &str = "decided by IAM's policy simulator";
const DECIDED_LOCALLY: &str = "evaluated from the role's own policies, as IAM's simulator could \
    not be asked; service control policies are not visible this way";

/// Whether the controller's role may have EC2 create the spot service-linked role
/// ([`Group::SpotServiceLinkedRole`]), for `SpotReady`: `Ok(Ok(()))` when IAM's simulator allows
/// it, `Ok(Err(by))` when denied (by what), `Err` with the cause when it is not known. The role's
/// own policies can prove a denial but not an allowance: service control policies, which
/// organizations often use to deny creating roles, are visible only to the simulator.
pub(crate) fn spot_service_linked_role_creation(ctx: &Context) -> Result<Result<(), String>, Why> {
    let inputs = inputs(ctx)?;
    let Some(question) = inputs
        .questions()
        .into_iter()
        .find(|q| q.group == Group::SpotServiceLinkedRole)
    else {
        return Err(Why::new(
            Reason::NotObserved,
            "No NodePool of this EC2NodeClass was seen allowing spot, so creating the spot \
             service-linked role was not asked about.",
        ));
    };
    let questions = std::slice::from_ref(&question);
    let (answer, locally) = match &ctx.facts.aws.controller_permissions {
        None => {
            return Err(Why::new(
                Reason::NotObserved,
                "The permissions of Karpenter's role were not read (ControllerCanLaunch says why).",
            ));
        }
        Some(PermissionFacts {
            simulated: Observed::Found(decisions),
            ..
        }) => (simulated(&question, decisions), false),
        Some(PermissionFacts {
            policies: Some(Observed::Found(policies)),
            ..
        }) => (
            local(&inputs, questions, policies)
                .into_iter()
                .next()
                .unwrap_or(Answer::Unasked(Why::new(Reason::NotObserved, "No answer."))),
            true,
        ),
        Some(PermissionFacts {
            simulated,
            policies,
        }) => {
            return Err(match (policies, simulated) {
                (Some(Observed::Unknown(u)), _) => {
                    Why::unobserved("The controller role's policies", u)
                }
                (_, Observed::Unknown(u)) => Why::unobserved("IAM's policy simulation", u),
                _ => Why::new(
                    Reason::NotObserved,
                    "Neither IAM's policy simulator nor the controller role's policies answered.",
                ),
            });
        }
    };
    match answer {
        Answer::Allowed if locally => Err(Why::new(
            Reason::PolicyUndecided,
            format!(
                "The role's own policies allow {} on {}, but IAM's policy simulator could not be \
                 asked, and a service control policy denying it would be visible only to it.",
                question.action,
                clip(&question.resource, 256)
            ),
        )),
        Answer::Allowed => Ok(Ok(())),
        Answer::Denied(by) if locally => Ok(Err(format!("{by}; {DECIDED_LOCALLY}"))),
        Answer::Denied(by) => Ok(Err(by)),
        Answer::Undecided(why) => Err(Why::new(
            Reason::PolicyUndecided,
            format!(
                "Whether the controller's role may {} on {} cannot be decided: {}.",
                question.action,
                clip(&question.resource, 256),
                clip(&why, 512)
            ),
        )),
        Answer::Unasked(why) => Err(why),
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

fn simulated(q: &Question, decisions: &[crate::facts::SimulatedDecision]) -> Answer {
    let Some(d) = decisions
        .iter()
        .find(|d| d.action.eq_ignore_ascii_case(q.action) && d.resource == q.resource)
    else {
        return Answer::Unasked(Why::new(
            Reason::NotObserved,
            format!(
                "IAM's simulator gave no answer for {} on {}.",
                q.action,
                clip(&q.resource, 256)
            ),
        ));
    };
    match verdict(d) {
        Verdict::Allowed => Answer::Allowed,
        Verdict::Denied(by) => Answer::Denied(by),
        Verdict::Undecided(why) => Answer::Undecided(why),
    }
}

fn parsed(
    docs: &[crate::facts::PolicyDocument],
) -> (Vec<(String, iam_policy::Policy)>, Vec<String>) {
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    for d in docs {
        match iam_policy::parse(&d.document) {
            Ok(p) => ok.push((d.name.clone(), p)),
            Err(e) => bad.push(format!("{} cannot be read ({e})", clip(&d.name, 256))),
        }
    }
    (ok, bad)
}

fn local(inputs: &Inputs, questions: &[Question], policies: &RolePolicies) -> Vec<Answer> {
    let (identity, mut unreadable) = parsed(&policies.identity);
    let (boundary, bad_boundary) = parsed(policies.boundary.as_slice());
    unreadable.extend(bad_boundary);
    let identity: Vec<Named> = identity
        .iter()
        .map(|(name, policy)| Named { name, policy })
        .collect();
    let boundary: Vec<Named> = boundary
        .iter()
        .map(|(name, policy)| Named { name, policy })
        .collect();
    questions
        .iter()
        .map(|q| {
            let context = inputs.context(q.group);
            let request = Request {
                principal: None,
                action: q.action,
                resource: &q.resource,
                context: &context,
            };
            let by_identity = iam_policy::evaluate(&identity, &request);
            let by_boundary = policies
                .boundary
                .as_ref()
                .map(|_| iam_policy::evaluate(&boundary, &request));
            let explicit = |d: &Decision| match d {
                Decision::ExplicitDeny(by) => Some(
                    by.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
                _ => None,
            };
            if let Some(by) = explicit(&by_identity) {
                return Answer::Denied(format!("an explicit Deny in {by}"));
            }
            if let Some(by) = by_boundary.as_ref().and_then(explicit) {
                return Answer::Denied(format!(
                    "an explicit Deny in the permissions boundary {by}"
                ));
            }
            if by_boundary == Some(Decision::ImplicitDeny) {
                return Answer::Denied("the role's permissions boundary does not allow it".into());
            }
            if by_identity == Decision::ImplicitDeny {
                if !unreadable.is_empty() {
                    return Answer::Undecided(list_bounded(&unreadable, 2));
                }
                return Answer::Denied("no policy of the role allows it".into());
            }
            let mut open = Vec::new();
            for d in std::iter::once(&by_identity).chain(by_boundary.as_ref()) {
                if let Decision::Undecided(why) = d {
                    open.extend(why.iter().cloned());
                }
            }
            if open.is_empty() {
                Answer::Allowed
            } else {
                Answer::Undecided(list_bounded(&open, 2))
            }
        })
        .collect()
}

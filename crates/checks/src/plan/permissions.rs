//! The controller role's answers to the permission questions of
//! [`crate::karpenter_permissions`], shared by `ControllerCanLaunch` (every question but the spot
//! service-linked role's) and `SpotReady` (that one): IAM's simulator's answers, or, where it
//! could not be asked, the role's own policies and boundary evaluated locally. Pure: no IO.

use crate::clip;
use crate::facts::{Observed, PermissionFacts, RolePolicies};
use crate::iam_policy::{self, Decision, Named, Request};
use crate::karpenter_permissions::{ClassInputs, Group, Inputs, Question, Verdict, verdict};
use crate::plan::{Context, RoleName};
use crate::verdict::Why;
use crate::wording::list_bounded;
use karpenter_health_api::Reason;

/// Who decided the permissions, as the messages say it.
pub(crate) const DECIDED_BY_SIMULATOR: &str = "decided by IAM's policy simulator";
pub(crate) const DECIDED_LOCALLY: &str = "evaluated from the role's own policies, as IAM's simulator could \
    not be asked; service control policies are not visible this way";

/// The answer to one question, from the simulator or the local evaluation.
pub(crate) enum Answer {
    Allowed,
    /// Denied, with who denied it.
    Denied(String),
    Undecided(String),
    Unasked(Why),
}

/// The inputs of the permission questions, as the facts give them.
pub(crate) fn inputs(ctx: &Context) -> Result<Inputs, Why> {
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

pub(crate) fn simulated(q: &Question, decisions: &[crate::facts::SimulatedDecision]) -> Answer {
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

pub(crate) fn local(
    inputs: &Inputs,
    questions: &[Question],
    policies: &RolePolicies,
) -> Vec<Answer> {
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

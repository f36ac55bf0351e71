//! Which permission questions of two EC2NodeClasses may share one simulation's answer: the same
//! shape, differing only in values Karpenter derives from object names, and an answer that allows
//! every pair the rule reads; and the shared answer renamed to the second class's resources.
//! Pure: no IO.

use crate::ports::Simulation;
use karpenter_health_checks::facts::SimulatedDecision;

/// Whether two simulations ask the same actions of the same number of resources, with the same
/// context keys, so that they can differ only in values.
pub(super) fn same_shape(a: &Simulation, b: &Simulation) -> bool {
    a.policy_source_arn == b.policy_source_arn
        && a.actions == b.actions
        && a.resources.len() == b.resources.len()
        && a.context.len() == b.context.len()
        && a.context
            .iter()
            .zip(&b.context)
            .all(|((ka, va), (kb, vb))| ka == kb && va.len() == vb.len())
}

/// The tags whose values Karpenter derives from its objects' names, and the resources whose ARN
/// it derives from the EC2NodeClass's uid: the only places where two classes' questions may
/// differ and still share an answer. The tags a user gives (`spec.tags`), the node role and the
/// metadata options must be equal: SCP guardrails, which the operator cannot read, commonly
/// require exactly those (a cost-center tag, a role path, IMDSv2).
const NAME_DERIVED_TAGS: [&str; 2] = ["karpenter.sh/nodepool", "karpenter.k8s.aws/ec2nodeclass"];

fn name_derived(key: &str) -> bool {
    NAME_DERIVED_TAGS
        .iter()
        .any(|tag| key.strip_suffix(tag).is_some_and(|k| k.ends_with('/')))
}

/// The values two simulations of the same shape differ in, position by position; `None` when
/// they differ anywhere but in name-derived tags and instance-profile ARNs.
pub(super) fn differing_values<'a>(
    a: &'a Simulation,
    b: &'a Simulation,
) -> Option<Vec<(&'a str, &'a str)>> {
    let mut pairs = Vec::new();
    for (x, y) in a.resources.iter().zip(&b.resources) {
        if x != y {
            if !(x.contains(":instance-profile/") && y.contains(":instance-profile/")) {
                return None;
            }
            pairs.push((x.as_str(), y.as_str()));
        }
    }
    for ((key, xs), (_, ys)) in a.context.iter().zip(&b.context) {
        for (x, y) in xs.iter().zip(ys) {
            if x != y {
                if !name_derived(key) {
                    return None;
                }
                pairs.push((x.as_str(), y.as_str()));
            }
        }
    }
    Some(pairs)
}

/// Whether every pair of `read` that `simulation` asks has an answer in `decisions`, and it is
/// "allowed". Denials of pairs no question reads (a simulation asks every action on every
/// resource of its group) change no verdict, so they do not keep an answer from being shared;
/// a denial of a pair the rule reads is never shared, since an SCP keyed on a class's name could
/// make it the first class's alone.
pub(super) fn reads_only_allowed(
    decisions: &[SimulatedDecision],
    simulation: &Simulation,
    read: &[(&'static str, String)],
) -> bool {
    let asked: Vec<&(&'static str, String)> = read
        .iter()
        .filter(|(action, resource)| {
            simulation.actions.iter().any(|a| a == action)
                && simulation.resources.iter().any(|r| r == resource)
        })
        .collect();
    !asked.is_empty()
        && asked.iter().all(|(action, resource)| {
            decisions.iter().any(|d| {
                d.action.eq_ignore_ascii_case(action)
                    && d.resource == *resource
                    && d.decision == "allowed"
            })
        })
}

/// `decisions` about `asked`'s resources, renamed to the resources of `simulation` at the same
/// positions (the rule matches each question by action and resource).
pub(super) fn renamed(
    decisions: Vec<SimulatedDecision>,
    asked: &Simulation,
    simulation: &Simulation,
) -> Vec<SimulatedDecision> {
    decisions
        .into_iter()
        .map(|mut d| {
            if let Some(i) = asked.resources.iter().position(|r| *r == d.resource) {
                d.resource = simulation.resources[i].clone();
            }
            d
        })
        .collect()
}

//! `KarpenterStatusConsistent`: Karpenter's own EC2NodeClass status is current and does not
//! contradict itself. Pure: no IO.
//!
//! Three patterns from the field (aws/karpenter-provider-aws #8072, #8312, PR #8074):
//! `InstanceProfileReady=True` with
//! `ValidationSucceeded` stuck Unknown (ARN profile, missing profile, stale validation cache);
//! `Ready=True` next to a False dependent; and a status that stopped following the spec.

use crate::clip;
use crate::facts::Observed;
use crate::plan::Context;
use crate::verdict::{Check, Outcome, Rule};
use crate::wording::{at, list_bounded};
use karpenter_health_api::{ConditionStatus, ConditionType, Reason};

/// The conditions Karpenter's `Ready` summarises (operatorpkg root condition).
pub const KARPENTER_DEPENDENTS: &[&str] = &[
    "AMIsReady",
    "SubnetsReady",
    "SecurityGroupsReady",
    "InstanceProfileReady",
    "ValidationSucceeded",
    "PlacementGroupReady",
    "CapacityReservationsReady",
];

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::KarpenterStatusConsistent, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::KarpenterStatusConsistent, "karpenter-status");
    fail_validation_stuck(ctx, &mut c);
    fail_ready_contradicts_dependents(ctx, &mut c);
    fail_status_stale(ctx, &mut c);
    c.finish(
        Reason::KarpenterStatusCurrent,
        "Karpenter's EC2NodeClass status is current and self-consistent.",
    )
}

/// False when Karpenter reports InstanceProfileReady=True while validation never concludes,
/// with the likely causes.
fn fail_validation_stuck(ctx: &Context, c: &mut Check) {
    let node_class = &ctx.facts.cluster.node_class;
    // InstanceProfileReady=True while validation never concludes.
    if ctx.karpenter_condition_status("InstanceProfileReady") == Some(ConditionStatus::True)
        && let Some(validation) = ctx.karpenter_condition("ValidationSucceeded")
        && ConditionStatus::parse(&validation.status) == ConditionStatus::Unknown
        && let Some(since) = &validation.last_transition_time
        && ctx.age(since.0) > ctx.settings.validation_stuck_after
    {
        let spec = &node_class.spec;
        let mut causes = Vec::new();
        if spec
            .instance_profile
            .as_deref()
            .is_some_and(|p| p.trim_start().starts_with("arn:"))
        {
            causes.push("spec.instanceProfile is an ARN, not a name");
        }
        if matches!(ctx.facts.aws.instance_profile, Some(Observed::Absent)) {
            causes.push("the instance profile does not exist");
        }
        causes.push(
            "a stale cached validation result (after fixing IAM, add any annotation to the \
             EC2NodeClass to force a refresh)",
        );
        let said = validation
            .message
            .as_deref()
            .filter(|m| !m.is_empty())
            .map(|m| format!(" ({})", clip(m, 256)))
            .unwrap_or_default();
        c.fail(
            Reason::ValidationStuck,
            format!(
                "Karpenter reports InstanceProfileReady=True, but ValidationSucceeded has been \
                 Unknown since {}{said}. Likely causes: {}.",
                at(since.0),
                causes.join("; ")
            ),
            vec![ctx.node_class_subject()],
        );
    }
}

/// False when Karpenter reports Ready=True next to a False dependent.
fn fail_ready_contradicts_dependents(ctx: &Context, c: &mut Check) {
    // Ready=True next to a False dependent.
    if ctx.karpenter_condition_status("Ready") == Some(ConditionStatus::True) {
        let false_dependents: Vec<&str> = KARPENTER_DEPENDENTS
            .iter()
            .copied()
            .filter(|d| ctx.karpenter_condition_status(d) == Some(ConditionStatus::False))
            .collect();
        if !false_dependents.is_empty() {
            c.fail(
                Reason::ReadyContradictsDependents,
                format!(
                    "Karpenter reports Ready=True while {} is False.",
                    list_bounded(&false_dependents, 7)
                ),
                vec![ctx.node_class_subject()],
            );
        }
    }
}

/// False when the status stopped following the spec: no conditions long after creation, or an
/// observed generation behind the spec's for too long.
fn fail_status_stale(ctx: &Context, c: &mut Check) {
    let node_class = &ctx.facts.cluster.node_class;
    let conditions = node_class
        .status
        .as_ref()
        .map(|s| &s.conditions[..])
        .unwrap_or_default();
    // A status that stopped following the spec.
    let generation = node_class.metadata.generation;
    let observed = ctx
        .karpenter_condition("Ready")
        .and_then(|c| c.observed_generation)
        .or_else(|| {
            conditions
                .iter()
                .filter_map(|c| c.observed_generation)
                .max()
        });
    if conditions.is_empty() {
        // Never reconciled: measured from creation.
        if let Some(created) = &node_class.metadata.creation_timestamp
            && ctx.age(created.0) > ctx.settings.status_stale_after
        {
            c.fail(
                Reason::StatusStale,
                format!(
                    "Karpenter has written no status conditions on this EC2NodeClass, created at \
                     {}.",
                    at(created.0)
                ),
                vec![ctx.node_class_subject()],
            );
        }
    } else if let (Some(generation), Some(observed)) = (generation, observed)
        && observed < generation
        && let Some(since) = generation_written_at(ctx)
        && ctx.age(since) > ctx.settings.status_stale_after
    {
        c.fail(
            Reason::StatusStale,
            format!(
                "Karpenter's status reflects generation {observed}, but the EC2NodeClass has been \
                 at generation {generation} since {} at the latest.",
                at(since)
            ),
            vec![ctx.node_class_subject()],
        );
    }
}

/// The earliest evidence of when the current generation was written: the adapter's first sight
/// of it, or the newest write outside `/status` in `managedFields`. Both are at or after the
/// real change, so the lag is never overstated.
fn generation_written_at(ctx: &Context) -> Option<jiff::Timestamp> {
    let meta = &ctx.facts.cluster.node_class.metadata;
    let managed = meta
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.subresource.as_deref().is_none_or(str::is_empty))
        .filter_map(|m| m.time.as_ref().map(|t| t.0))
        .max();
    match (ctx.facts.cluster.node_class_generation_seen_at, managed) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

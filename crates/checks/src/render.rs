//! Renders the rules' outcomes, the previous status and `now` into a KarpenterHealth status:
//! the `Ready` fold, `lastTransitionTime` bookkeeping, bounded sorted findings and the detected
//! environment. Pure: no IO, and `now` is an argument.

use crate::facts::{Facts, Observed};
use crate::rules::{MAX_SUBJECTS, Outcome, node_role_mapped::AuthMode};
use crate::{clip, clip_bytes, version};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use karpenter_health_api::health::MAX_FINDINGS;
use karpenter_health_api::{
    ConditionStatus, ConditionType, DetectedEnvironment, Finding, KarpenterHealthStatus, Reason,
};

/// `metav1.Condition.message` is limited to 32768 bytes.
const MAX_CONDITION_MESSAGE: usize = 32_768;
/// Findings are for reading; a finding message longer than this is cut.
const MAX_FINDING_MESSAGE: usize = 2_048;

/// The summary: `True` only if every sub-condition is True, `False` if any is False, otherwise
/// `Unknown`; the message lists the failing or unknown sub-conditions.
pub fn fold_ready(outcomes: &[Outcome]) -> (ConditionStatus, Reason, String) {
    let subs = ConditionType::sub_conditions();
    let status_of = |ty: ConditionType| -> (ConditionStatus, Reason) {
        outcomes
            .iter()
            .find(|o| o.condition == ty)
            .map_or((ConditionStatus::Unknown, Reason::Pending), |o| {
                (o.status, o.reason)
            })
    };
    let listed = |wanted: ConditionStatus| -> Vec<String> {
        subs.iter()
            .map(|&ty| (ty, status_of(ty)))
            .filter(|(_, (status, _))| *status == wanted)
            .map(|(ty, (_, reason))| format!("{ty} ({reason})"))
            .collect()
    };
    let failed = listed(ConditionStatus::False);
    let unknown = listed(ConditionStatus::Unknown);
    if !failed.is_empty() {
        let mut message = format!("False: {}.", failed.join(", "));
        if !unknown.is_empty() {
            message.push_str(&format!(" Unknown: {}.", unknown.join(", ")));
        }
        (ConditionStatus::False, Reason::ChecksFailed, message)
    } else if !unknown.is_empty() {
        (
            ConditionStatus::Unknown,
            Reason::ChecksUnknown,
            format!("Unknown: {}.", unknown.join(", ")),
        )
    } else {
        (
            ConditionStatus::True,
            Reason::AllChecksPassed,
            "Every check passed.".to_owned(),
        )
    }
}

/// Builds the full status. Conditions come in `ConditionType::ALL` order; a condition keeps its
/// previous `lastTransitionTime` unless its status changed.
pub fn render(
    facts: &Facts,
    outcomes: &[Outcome],
    previous: Option<&KarpenterHealthStatus>,
    now: Timestamp,
) -> KarpenterHealthStatus {
    let generation = facts.cluster.node_class.metadata.generation;
    let ready = fold_ready(outcomes);
    let conditions = ConditionType::ALL
        .iter()
        .map(|&ty| {
            let (status, reason, message) = if ty == ConditionType::Ready {
                ready.clone()
            } else {
                outcomes.iter().find(|o| o.condition == ty).map_or_else(
                    || {
                        (
                            ConditionStatus::Unknown,
                            Reason::Pending,
                            "Not evaluated.".to_owned(),
                        )
                    },
                    |o| (o.status, o.reason, o.message.clone()),
                )
            };
            debug_assert!(reason.applies_to(ty), "{reason} on {ty}");
            let last_transition_time = previous
                .and_then(|p| p.condition(ty))
                .filter(|c| c.status == status.as_str())
                .map_or(Time(now), |c| c.last_transition_time.clone());
            Condition {
                type_: ty.as_str().to_owned(),
                status: status.as_str().to_owned(),
                reason: reason.as_str().to_owned(),
                message: clip_bytes(&message, MAX_CONDITION_MESSAGE).into_owned(),
                last_transition_time,
                observed_generation: generation,
            }
        })
        .collect();

    let (findings, findings_omitted) = bound_findings(outcomes);
    KarpenterHealthStatus {
        observed_generation: generation,
        last_evaluated: Some(Time(now)),
        conditions,
        findings,
        findings_omitted,
        detected: Some(detected(facts)),
    }
}

/// Sorts (most severe first, then by condition order) and de-duplicates findings, keeps the first
/// `MAX_FINDINGS` and counts the rest.
fn bound_findings(outcomes: &[Outcome]) -> (Vec<Finding>, u32) {
    let order = |ty: ConditionType| ConditionType::ALL.iter().position(|&t| t == ty);
    let mut all: Vec<Finding> = outcomes
        .iter()
        .flat_map(|o| o.findings.iter().cloned())
        .map(|mut f| {
            f.message = clip_bytes(&f.message, MAX_FINDING_MESSAGE).into_owned();
            f.subjects.sort();
            f.subjects.dedup();
            f.subjects.truncate(MAX_SUBJECTS);
            f
        })
        .collect();
    all.sort_by(|a, b| {
        (
            a.severity,
            order(a.condition_type),
            &a.check,
            &a.reason,
            &a.subjects,
            &a.message,
        )
            .cmp(&(
                b.severity,
                order(b.condition_type),
                &b.check,
                &b.reason,
                &b.subjects,
                &b.message,
            ))
    });
    all.dedup();
    let omitted = all.len().saturating_sub(MAX_FINDINGS);
    all.truncate(MAX_FINDINGS);
    (all, u32::try_from(omitted).unwrap_or(u32::MAX))
}

fn detected(facts: &Facts) -> DetectedEnvironment {
    let karpenter = facts.cluster.karpenter.found();
    let cluster_name = facts
        .cluster
        .configured_cluster_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .or_else(|| karpenter.and_then(|k| k.cluster_name.as_deref()))
        .map(|n| clip(n, 256).into_owned());
    let karpenter_version = karpenter.and_then(|k| k.version.as_deref()).map(|raw| {
        version::parse(raw).map_or_else(|_| clip(raw.trim(), 64).into_owned(), |v| v.to_string())
    });
    let authentication_mode = match &facts.aws.eks_cluster {
        Observed::Found(eks) => Some(match AuthMode::parse(eks.authentication_mode.as_deref()) {
            Some(mode) => mode.as_str().to_owned(),
            None => clip(eks.authentication_mode.as_deref().unwrap_or_default(), 64).into_owned(),
        }),
        _ => None,
    };
    DetectedEnvironment {
        cluster_name,
        karpenter_version,
        region: facts
            .aws
            .region
            .as_deref()
            .map(|r| clip(r, 64).into_owned()),
        authentication_mode,
    }
}

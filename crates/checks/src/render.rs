//! Renders the rules' outcomes, the previous status and `now` into a KarpenterHealth status:
//! the `Ready` fold, `lastTransitionTime` bookkeeping, bounded sorted findings and the detected
//! environment. Pure: no IO, and `now` is an argument.

use crate::facts::AuthMode;
use crate::facts::{Facts, Observed};
use crate::verdict::{MAX_SUBJECTS, Outcome};
use crate::{clip, clip_bytes, version};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use karpenter_health_api::health::MAX_FINDINGS;
use karpenter_health_api::{
    AcceptedFinding, ConditionStatus, ConditionType, DetectedEnvironment, Finding,
    KarpenterHealthStatus, Reason,
};

/// `metav1.Condition.message` is limited to 32768 bytes.
const MAX_CONDITION_MESSAGE: usize = 32_768;
/// Findings are for reading; a finding message longer than this is cut.
const MAX_FINDING_MESSAGE: usize = 2_048;

/// The summary: `True` only if every sub-condition is True, `False` if any is False, otherwise
/// `Unknown`. The reason is the one reason of the sub-conditions that decide the status when they
/// share one (so `kubectl get` names the problem), else `MultipleChecksFailed`/`…Unknown`; the
/// message lists the failing or unknown sub-conditions.
pub fn fold_ready(outcomes: &[Outcome]) -> (ConditionStatus, Reason, String) {
    let failed = not_true(outcomes, ConditionStatus::False);
    let unknown = not_true(outcomes, ConditionStatus::Unknown);
    let listed = |conditions: &[(ConditionType, Reason)]| -> String {
        conditions
            .iter()
            .map(|(ty, reason)| format!("{ty} ({reason})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let the_one_reason = |conditions: &[(ConditionType, Reason)], several: Reason| {
        let mut reasons = conditions.iter().map(|(_, reason)| *reason);
        let first = reasons.next().unwrap_or(several);
        if reasons.all(|r| r == first) {
            first
        } else {
            several
        }
    };
    if !failed.is_empty() {
        let mut message = format!("False: {}.", listed(&failed));
        if !unknown.is_empty() {
            message.push_str(&format!(" Unknown: {}.", listed(&unknown)));
        }
        let reason = the_one_reason(&failed, Reason::MultipleChecksFailed);
        (ConditionStatus::False, reason, message)
    } else if !unknown.is_empty() {
        (
            ConditionStatus::Unknown,
            the_one_reason(&unknown, Reason::MultipleChecksUnknown),
            format!("Unknown: {}.", listed(&unknown)),
        )
    } else {
        let accepted: Vec<String> = outcomes
            .iter()
            .filter(|o| o.reason == Reason::FindingAccepted)
            .map(|o| o.condition.to_string())
            .collect();
        if accepted.is_empty() {
            (
                ConditionStatus::True,
                Reason::AllChecksPassed,
                "Every check passed.".to_owned(),
            )
        } else {
            (
                ConditionStatus::True,
                Reason::PassedWithAcceptedFindings,
                format!(
                    "Every check passed but for accepted findings of {} (status.accepted).",
                    accepted.join(", ")
                ),
            )
        }
    }
}

/// The sub-conditions with status `wanted`, with their reasons, in condition order; a missing
/// outcome counts as `Unknown` (`Pending`).
fn not_true(outcomes: &[Outcome], wanted: ConditionStatus) -> Vec<(ConditionType, Reason)> {
    ConditionType::sub_conditions()
        .iter()
        .map(|&ty| {
            outcomes
                .iter()
                .find(|o| o.condition == ty)
                .map_or((ty, ConditionStatus::Unknown, Reason::Pending), |o| {
                    (ty, o.status, o.reason)
                })
        })
        .filter(|(_, status, _)| *status == wanted)
        .map(|(ty, _, reason)| (ty, reason))
        .collect()
}

/// The `notReady` column: the short names of the False sub-conditions, then of the Unknown ones
/// marked `?`, cut to fit a `kubectl get` column (`+N` counts the rest). Empty when Ready.
pub fn not_ready_summary(outcomes: &[Outcome]) -> String {
    let names: Vec<String> = not_true(outcomes, ConditionStatus::False)
        .into_iter()
        .map(|(ty, _)| ty.column().to_owned())
        .chain(
            not_true(outcomes, ConditionStatus::Unknown)
                .into_iter()
                .map(|(ty, _)| format!("{}?", ty.column())),
        )
        .collect();
    karpenter_health_api::health::summarize_not_ready(&names)
}

/// Builds the full status. Conditions come in `ConditionType::ALL` order; a condition keeps its
/// previous `lastTransitionTime` unless its status changed.
pub fn render(
    facts: &Facts,
    outcomes: &[Outcome],
    accepted: Vec<AcceptedFinding>,
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

    let (mut findings, findings_omitted) = bound_findings(outcomes);
    date_findings(&mut findings, previous, now);
    KarpenterHealthStatus {
        // The KarpenterHealth's own generation is the operator's to set when it writes.
        observed_generation: None,
        node_class_generation: generation,
        last_evaluated: Some(Time(now)),
        conditions,
        findings,
        findings_omitted,
        accepted: accepted.into_iter().take(MAX_FINDINGS).collect(),
        detected: Some(detected(facts)),
        not_ready: Some(not_ready_summary(outcomes)).filter(|s| !s.is_empty()),
    }
}

/// Dates each finding: the time the previous status first saw the same finding, else `now`
/// (a finding that went away and came back starts again).
fn date_findings(
    findings: &mut [Finding],
    previous: Option<&KarpenterHealthStatus>,
    now: Timestamp,
) {
    let before = previous.map_or(&[][..], |p| p.findings.as_slice());
    for finding in findings {
        finding.first_seen = Some(
            before
                .iter()
                .find(|b| b.same_finding(finding))
                .and_then(|b| b.first_seen.clone())
                .unwrap_or(Time(now)),
        );
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

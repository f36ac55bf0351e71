//! Reading a KarpenterHealth status in tests: a one-line summary for failure messages, whether a
//! condition has a given status and reason, its message, a finding's message, the findings'
//! subjects, and the assertion that exactly the expected conditions failed. Pure, no IO.

use karpenter_health_api::{ConditionType, KarpenterHealthStatus, Reason};
use std::collections::BTreeSet;

/// `Type=Status(Reason)` of every condition, space-separated.
pub fn summary(status: &KarpenterHealthStatus) -> String {
    let mut text = status
        .conditions
        .iter()
        .map(|c| format!("{}={}({})", c.type_, c.status, c.reason))
        .collect::<Vec<_>>()
        .join(" ");
    // The condition messages and findings say why, when a wait ends on the wrong status.
    for c in status.conditions.iter().filter(|c| c.type_ != "Ready") {
        if !c.message.is_empty() {
            text.push_str(&format!("\n  {}: {}", c.type_, c.message));
        }
    }
    for f in &status.findings {
        text.push_str(&format!("\n  finding {}: {}", f.reason, f.message));
    }
    text
}

/// The message of the finding (a warning, or the error of a False) with `reason`, empty when the
/// status has none.
pub fn finding_message<'a>(status: &'a KarpenterHealthStatus, reason: &str) -> &'a str {
    status
        .findings
        .iter()
        .find(|f| f.reason == reason)
        .map(|f| f.message.as_str())
        .unwrap_or_default()
}

/// Whether the status carries a finding with `reason`.
pub fn has_finding(status: &KarpenterHealthStatus, reason: &str) -> bool {
    status.findings.iter().any(|f| f.reason == reason)
}

/// Whether no condition is False.
pub fn nothing_false(status: &KarpenterHealthStatus) -> bool {
    status.conditions.iter().all(|c| c.status != "False")
}

/// Whether condition `ty` has status `want` (`True`, `False`, `Unknown`) with `reason`.
pub fn condition_is(
    status: &KarpenterHealthStatus,
    ty: ConditionType,
    want: &str,
    reason: Reason,
) -> bool {
    status
        .condition(ty)
        .is_some_and(|c| c.status == want && c.reason == reason.as_str())
}

/// The message of condition `ty`, empty when it is missing.
pub fn message(status: &KarpenterHealthStatus, ty: ConditionType) -> &str {
    status
        .condition(ty)
        .map(|c| c.message.as_str())
        .unwrap_or("")
}

/// The sub-conditions that are False.
fn false_conditions(status: &KarpenterHealthStatus) -> BTreeSet<&str> {
    status
        .conditions
        .iter()
        .filter(|c| c.status == "False" && c.type_ != ConditionType::Ready.as_str())
        .map(|c| c.type_.as_str())
        .collect()
}

/// Asserts that exactly `expected` failed (others may be Unknown when they depend on the broken
/// fact, never False) and that Ready says so.
pub fn assert_only_failed(status: &KarpenterHealthStatus, expected: &[ConditionType]) {
    let want: BTreeSet<&str> = expected.iter().map(|c| c.as_str()).collect();
    assert_eq!(false_conditions(status), want, "{}", summary(status));
    // Ready names the one reason of the failing conditions, or says there are several.
    let reasons: BTreeSet<&str> = status
        .conditions
        .iter()
        .filter(|c| c.status == "False" && c.type_ != ConditionType::Ready.as_str())
        .map(|c| c.reason.as_str())
        .collect();
    let ready_reason = match reasons.iter().collect::<Vec<_>>().as_slice() {
        [only] => Reason::parse(only).unwrap_or(Reason::MultipleChecksFailed),
        _ => Reason::MultipleChecksFailed,
    };
    assert!(
        condition_is(status, ConditionType::Ready, "False", ready_reason),
        "{}",
        summary(status)
    );
    for ty in expected {
        assert!(
            message(status, ConditionType::Ready).contains(ty.as_str()),
            "Ready must name {ty}: {}",
            message(status, ConditionType::Ready)
        );
    }
}

/// Whether a finding of condition `ty` names the object `kind`/`name` among its subjects.
pub fn finding_names(
    status: &KarpenterHealthStatus,
    ty: ConditionType,
    kind: &str,
    name: &str,
) -> bool {
    status
        .findings
        .iter()
        .filter(|f| f.condition_type == ty)
        .flat_map(|f| &f.subjects)
        .any(|s| s.kind == kind && s.name == name)
}

/// The zone of the class's one subnet, as `InstanceTypesAvailable`'s True message names it.
pub fn subnet_zone(status: &KarpenterHealthStatus) -> anyhow::Result<String> {
    let text = message(status, ConditionType::InstanceTypesAvailable);
    let zone = text
        .split_once("offered in ")
        .and_then(|(_, rest)| rest.split_once(" ("))
        .map(|(zone, _)| zone.to_owned())
        .ok_or_else(|| anyhow::anyhow!("no zone in {text:?}"))?;
    anyhow::ensure!(!zone.contains(','), "one subnet, one zone: {zone}");
    Ok(zone)
}

//! Accepted findings (`acceptance.rs`) through the whole evaluation: what an acceptance takes out
//! of counting, and the warnings about acceptances that accept nothing. Pure.

use crate::acceptance::{AcceptancePolicy, Accepted, parse_fleet};
use crate::facts::{Facts, Settings, UnknownCause};
use crate::testing::*;
use crate::evaluate;
use karpenter_health_api::{ConditionType, KarpenterHealthStatus, Reason};

/// A NodePool label in `karpenter.sh`: LabelsAllowed False (RestrictedLabelDomain).
fn restricted_label() -> Facts {
    Facts::healthy().with_node_pool_label("karpenter.sh/team", "a")
}

fn with(policy: AcceptancePolicy, f: &Facts) -> KarpenterHealthStatus {
    let settings = Settings {
        acceptances: policy,
        ..Settings::default()
    };
    evaluate(f, &settings, None, now())
}

fn condition(s: &KarpenterHealthStatus, ty: ConditionType) -> (String, String, String) {
    let c = s.condition(ty).unwrap();
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

fn warnings(s: &KarpenterHealthStatus) -> Vec<(String, String)> {
    s.findings
        .iter()
        .filter(|f| f.reason.starts_with("Acceptance"))
        .map(|f| (f.reason.clone(), f.message.clone()))
        .collect()
}

#[test]
fn an_accepted_false_stays_listed_and_stops_counting_until_its_date() {
    let f = restricted_label().with_acceptance("RestrictedLabelDomain", "2099-01-31: the label goes with the next release");
    let s = evaluate(&f, &Settings::default(), None, now());
    let (status, reason, message) = condition(&s, ConditionType::LabelsAllowed);
    assert_eq!((status.as_str(), reason.as_str()), ("True", "FindingAccepted"), "{message}");
    assert!(message.contains("until 2099-01-31") && message.contains("karpenter.sh/team"), "{message}");
    assert_eq!(condition(&s, ConditionType::Ready).1, "PassedWithAcceptedFindings");
    assert_eq!(s.accepted.len(), 1);
    let a = &s.accepted[0];
    assert_eq!((a.condition_type, a.reason.as_str()), (ConditionType::LabelsAllowed, "RestrictedLabelDomain"));
    assert_eq!(a.source, "annotation accept.karpenter-health.io/RestrictedLabelDomain");
    assert_eq!(a.why, "the label goes with the next release");
    assert!(a.until.is_some());
    assert!(s.findings.iter().all(|x| x.reason != "RestrictedLabelDomain"), "moved out of findings");
    assert!(warnings(&s).is_empty(), "{:?}", warnings(&s));
}

#[test]
fn at_its_date_the_finding_counts_again_and_a_warning_says_so() {
    // The fixture's now is in 2026 or later: a 2020 date has passed.
    let f = restricted_label().with_acceptance("RestrictedLabelDomain", "2020-01-31: was to be fixed");
    let s = evaluate(&f, &Settings::default(), None, now());
    let (_, reason, message) = condition(&s, ConditionType::LabelsAllowed);
    assert_eq!(reason, "RestrictedLabelDomain");
    assert!(message.starts_with("annotation accept.karpenter-health.io/RestrictedLabelDomain accepted RestrictedLabelDomain until 2020-01-31; that has passed"), "{message}");
    assert_eq!(condition(&s, ConditionType::Ready).0, "False");
    assert!(s.accepted.is_empty());
    let w = warnings(&s);
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].0, "AcceptanceExpired");
    assert!(w[0].1.contains("until 2020-01-31") && w[0].1.contains("counts again"), "{w:?}");
}

#[test]
fn what_cannot_be_read_accepts_nothing_and_is_a_warning_naming_it() {
    for (what, value, says) in [
        ("RestrictedLabelDomian", "2099-01-31: typo", "no reason or warning"),
        ("RestrictedLabelDomain", "2099-01-31", "is not \"<until>: <why>\""),
        ("RestrictedLabelDomain", "soon: one day", "not a date"),
        ("RestrictedLabelDomain", "2099-01-31:  ", "gives no reason"),
        ("AwsAccessDenied", "2099-01-31: cannot see", "only the reason of a False"),
    ] {
        let s = evaluate(&restricted_label().with_acceptance(what, value), &Settings::default(), None, now());
        assert_eq!(condition(&s, ConditionType::LabelsAllowed).0, "False", "{what}: {value}");
        let w = warnings(&s);
        assert!(
            w.len() == 1 && w[0].0 == "AcceptanceInvalid" && w[0].1.contains(says)
                && w[0].1.contains(&format!("accept.karpenter-health.io/{what}")),
            "{what}: {value}: {w:?}"
        );
    }
}

#[test]
fn a_central_switch_turns_annotations_into_warnings() {
    let f = restricted_label().with_acceptance("RestrictedLabelDomain", "2099-01-31: ours");
    let s = with(AcceptancePolicy { annotations_allowed: false, ..AcceptancePolicy::default() }, &f);
    assert_eq!(condition(&s, ConditionType::LabelsAllowed).0, "False");
    let w = warnings(&s);
    assert!(w[0].0 == "AcceptanceInvalid" && w[0].1.contains("--accept-annotations=false"), "{w:?}");
}

#[test]
fn fleet_rules_accept_for_the_classes_their_pattern_matches() {
    let rules = |pattern: &str| {
        parse_fleet(&format!(
            r#"[{{"nodeClasses": "{pattern}", "reason": "RestrictedLabelDomain", "until": "2099-06-30T12:00:00Z", "why": "platform decision"}}]"#
        ))
        .unwrap()
    };
    let name = restricted_label().cluster.node_class.metadata.name.clone().unwrap();
    let matching = format!("{}*", &name[..1]);
    let s = with(AcceptancePolicy { fleet: rules(&matching), ..AcceptancePolicy::default() }, &restricted_label());
    assert_eq!(condition(&s, ConditionType::LabelsAllowed).1, "FindingAccepted");
    assert_eq!(s.accepted[0].source, format!("fleet rule 1 ({matching})"));
    let s = with(AcceptancePolicy { fleet: rules("zzz-*"), ..AcceptancePolicy::default() }, &restricted_label());
    assert_eq!(condition(&s, ConditionType::LabelsAllowed).0, "False");
}

#[test]
fn an_acceptance_its_check_did_not_find_is_unused_but_not_while_the_check_cannot_see() {
    let f = Facts::healthy().with_acceptance("SecurityGroupsNotFound", "2099-01-31: old");
    let w = warnings(&evaluate(&f, &Settings::default(), None, now()));
    assert!(w.len() == 1 && w[0].0 == "AcceptanceUnused", "{w:?}");
    let blind = f.with(|f| f.aws.security_groups = unknown(UnknownCause::Throttled));
    let s = evaluate(&blind, &Settings::default(), None, now());
    assert!(warnings(&s).is_empty(), "an Unknown may hide it: {:?}", warnings(&s));
    assert_eq!(condition(&s, ConditionType::SecurityGroupsReady).0, "Unknown");
}

#[test]
fn one_accepted_failure_of_two_leaves_the_condition_false_for_the_other() {
    // CRDs older than the controller and a stored v1beta1: two failures of one check.
    let f = Facts::healthy()
        .with_crd("nodepools.karpenter.sh", |c| {
            c.fields.remove("status.nodes");
        })
        .with_crd("nodeclaims.karpenter.sh", |c| c.stored_versions.push("v1beta1".into()));
    let before = evaluate(&f, &Settings::default(), None, now());
    assert_eq!(
        condition(&before, ConditionType::KarpenterVersionCompatible).1,
        "CrdsOlderThanController"
    );
    let s = evaluate(
        &f.with_acceptance("CrdsOlderThanController", "2099-01-31: CRDs follow next week"),
        &Settings::default(),
        None,
        now(),
    );
    let (status, reason, message) = condition(&s, ConditionType::KarpenterVersionCompatible);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "StoredVersionsStale"),
        "{message}"
    );
    assert!(
        message.contains("CrdsOlderThanController accepted until 2099-01-31")
            && message.contains("v1beta1"),
        "{message}"
    );
    assert_eq!(s.accepted.len(), 1);
    assert_eq!(condition(&s, ConditionType::Ready).0, "False");
}

#[test]
fn check_accept_takes_a_finding_out_for_one_run() {
    let policy = AcceptancePolicy {
        one_shot: vec![Accepted::Reason(Reason::RestrictedLabelDomain)],
        ..AcceptancePolicy::default()
    };
    let s = with(policy, &restricted_label());
    assert_eq!(condition(&s, ConditionType::Ready).0, "True");
    assert_eq!(s.accepted[0].source, "check --accept");
    assert!(s.accepted[0].until.is_none());
}

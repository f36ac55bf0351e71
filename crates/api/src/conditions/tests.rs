//! Unit tests of the condition and reason tables: names, scopes and the texts docs/checks.md
//! shows. Pure.

use super::*;

#[test]
fn every_reason_matches_the_metav1_condition_reason_pattern() {
    for reason in Reason::ALL {
        let s = reason.as_str();
        assert!(s.len() <= 1024);
        assert!(s.starts_with(|c: char| c.is_ascii_alphabetic()), "{s}");
        assert!(
            s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_,:".contains(c)),
            "{s}"
        );
    }
}

/// Conditions whose every finding is a warning, so they are never False: DriftCanBeReplaced's
/// findings are decisions (a budget that switches drift off) or holds that may go at any time.
const NEVER_FALSE: &[ConditionType] = &[ConditionType::DriftCanBeReplaced];

#[test]
fn every_condition_has_a_true_reason_and_a_false_reason_unless_it_is_never_false() {
    for &condition in ConditionType::ALL {
        let own: Vec<_> = Reason::ALL
            .iter()
            .filter(|r| r.meta().scope == ReasonScope::Only(condition))
            .collect();
        let trues = own
            .iter()
            .filter(|r| r.meta().status == ConditionStatus::True)
            .count();
        let falses = own
            .iter()
            .filter(|r| r.meta().status == ConditionStatus::False)
            .count();
        assert!(trues >= 1, "{condition} must have a True reason");
        if NEVER_FALSE.contains(&condition) {
            assert_eq!(falses, 0, "{condition} is listed as never False");
        } else {
            assert!(falses >= 1, "{condition} must have a False reason");
        }
    }
}

#[test]
fn names_round_trip_through_parse() {
    for &r in Reason::ALL {
        assert_eq!(Reason::parse(r.as_str()), Some(r));
    }
    for &c in ConditionType::ALL {
        assert_eq!(ConditionType::parse(c.as_str()), Some(c));
        assert!(!c.meaning().is_empty());
    }
    assert_eq!(
        ConditionType::sub_conditions().len(),
        ConditionType::ALL.len() - 1
    );
    assert!(!ConditionType::sub_conditions().contains(&ConditionType::Ready));
}

#[test]
fn the_summary_may_carry_any_reason_that_keeps_a_sub_condition_from_true() {
    assert!(Reason::AwsThrottled.applies_to(ConditionType::NodeRoleReady));
    assert!(Reason::AwsThrottled.applies_to(ConditionType::Ready));
    assert!(Reason::InstanceProfileIsArn.applies_to(ConditionType::Ready));
    assert!(!Reason::InstanceProfileValid.applies_to(ConditionType::Ready));
    assert!(!Reason::InstanceProfileIsArn.applies_to(ConditionType::NodeRoleReady));
    assert!(!Reason::MultipleChecksFailed.applies_to(ConditionType::NodeRoleReady));
}

//! Consistency as tested properties, over arbitrary facts: the healthy fixture bent by a random
//! list of mutations (unknown, absent and odd facts, hostile strings). Pure.
//!
//! Each property runs [`CASES`] cases; the closing note of the issue reports that number.

use crate::evaluate;
use crate::facts::{AccessEntryFacts, Facts, Observed, Settings};
use crate::render::fold_ready;
use crate::rules;
use crate::testing::*;
use crate::verdict::MAX_SUBJECTS;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_health_api::health::MAX_FINDINGS;
use karpenter_health_api::{ConditionStatus, ConditionType, KarpenterHealthStatus, Reason};
use proptest::prelude::*;

/// Cases per property.
pub const CASES: u32 = 2_000;

use super::strategies::*;

fn eval(f: &Facts) -> KarpenterHealthStatus {
    evaluate(f, &Settings::default(), None, now())
}

fn status_of(s: &KarpenterHealthStatus, ty: ConditionType) -> ConditionStatus {
    s.condition(ty).map_or(ConditionStatus::Unknown, |c| {
        ConditionStatus::parse(&c.status)
    })
}

/// Reasons a check may conclude from Kubernetes objects alone, with every observed fact unknown.
const DECIDABLE_WITHOUT_OBSERVED_FACTS: &[Reason] = &[
    Reason::InstanceProfileIsArn,
    Reason::InstanceProfileNameInvalid,
    Reason::NodeRoleNameTooLong,
    Reason::NodeRoleIsArn,
    Reason::RestrictedLabelDomain,
    Reason::ValidationStuck,
    Reason::ReadyContradictsDependents,
    Reason::StatusStale,
    Reason::NodeClaimsNotRegistering,
    // From the EC2NodeClass alone: its amiFamily against the names of the images in its status.
    Reason::AmiFamilyMismatch,
];

/// What a True message says only when its check found nothing at all, by condition: with a
/// warning of the same check beside it, the message would contradict it (issue 22, point 8: a
/// `LabelsAllowed=True` "no Pod uses a rejected key" next to a warning naming such a Pod).
const CLAIMS_OF_NOTHING_FOUND: &[(ConditionType, &str)] = &[
    (
        ConditionType::LabelsAllowed,
        "No NodePool or pending Pod uses a label key",
    ),
    (ConditionType::NodeRoleReady, "has the policies nodes need."),
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn a_true_message_never_contradicts_a_warning_of_its_own_check(f in facts()) {
        for o in rules::evaluate_all(&f, &Settings::default(), now()) {
            if o.status != ConditionStatus::True {
                continue;
            }
            let warned: Vec<&str> = o
                .findings
                .iter()
                .filter(|x| x.severity == karpenter_health_api::Severity::Warning)
                .map(|x| x.reason.as_str())
                .collect();
            if warned.is_empty() {
                continue;
            }
            for (ty, claim) in CLAIMS_OF_NOTHING_FOUND {
                prop_assert!(
                    o.condition != *ty || !o.message.contains(claim),
                    "{} True says {:?} beside warnings {:?}",
                    o.condition,
                    o.message,
                    warned
                );
            }
        }
    }

    #[test]
    fn ready_is_the_fold_of_the_sub_conditions_and_the_status_is_well_formed(f in facts()) {
        let status = eval(&f);
        let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
        let want: Vec<&str> = ConditionType::ALL.iter().map(|t| t.as_str()).collect();
        prop_assert_eq!(types, want);
        let (outcomes, _) = crate::evaluate_outcomes(&f, &Settings::default(), now());
        let (ready, ready_reason, _) = fold_ready(&outcomes);
        prop_assert_eq!(status_of(&status, ConditionType::Ready), ready);
        let subs: Vec<ConditionStatus> = ConditionType::sub_conditions().iter().map(|&t| status_of(&status, t)).collect();
        let folded = if subs.iter().all(|s| *s == ConditionStatus::True) {
            ConditionStatus::True
        } else if subs.contains(&ConditionStatus::False) {
            ConditionStatus::False
        } else {
            ConditionStatus::Unknown
        };
        prop_assert_eq!(ready, folded);
        prop_assert_eq!(status.condition(ConditionType::Ready).map(|c| c.reason.as_str()), Some(ready_reason.as_str()));
        let generation = f.cluster.node_class.metadata.generation;
        prop_assert_eq!(status.node_class_generation, generation);
        prop_assert_eq!(status.observed_generation, None, "the operator sets it when it writes");
        prop_assert_eq!(status.last_evaluated.as_ref().map(|t| t.0), Some(now()));
        for c in &status.conditions {
            let ty = ConditionType::parse(&c.type_).expect("known type");
            let reason = Reason::parse(&c.reason).expect("reason from the closed list");
            prop_assert!(reason.applies_to(ty), "{} on {}", reason, ty);
            prop_assert_eq!(reason.meta().status.as_str(), c.status.as_str());
            prop_assert_eq!(c.observed_generation, generation);
            prop_assert!(!c.message.is_empty() && c.message.len() <= 32_768);
        }
    }

    #[test]
    fn unknown_facts_never_make_a_condition_false(
        f in facts(),
        forgotten in prop::collection::vec((fact(), cause()), 1..6),
    ) {
        let mut partial = f.clone();
        for (fact, cause) in &forgotten {
            degrade(&mut partial, *fact, Some(*cause));
        }
        let (full, partial) = (eval(&f), eval(&partial));
        for &ty in ConditionType::ALL {
            if status_of(&partial, ty) == ConditionStatus::False {
                prop_assert_eq!(
                    status_of(&full, ty), ConditionStatus::False,
                    "{} is False only once {:?} became unknown: {:?}", ty, forgotten, partial.condition(ty)
                );
            }
        }
    }

    #[test]
    fn with_every_observed_fact_unknown_only_object_decidable_reasons_are_false(
        f in facts(),
        cause in cause(),
    ) {
        let mut blind = f;
        for fact in ALL_FACTS {
            degrade(&mut blind, fact, Some(cause));
        }
        let status = eval(&blind);
        for c in status.conditions.iter().filter(|c| c.status == "False" && c.type_ != "Ready") {
            let reason = Reason::parse(&c.reason).expect("closed list");
            prop_assert!(DECIDABLE_WITHOUT_OBSERVED_FACTS.contains(&reason), "{} False with {}: {}", c.type_, reason, c.message);
        }
    }

    #[test]
    fn last_transition_time_changes_iff_the_status_changes(
        first in facts(),
        second in facts(),
        minutes in 1i64..10_000,
    ) {
        let settings = Settings::default();
        let earlier: Timestamp = now() - SignedDuration::from_mins(minutes);
        let before = evaluate(&first, &settings, None, earlier);
        for c in &before.conditions {
            prop_assert_eq!(c.last_transition_time.0, earlier);
        }
        let after = evaluate(&second, &settings, Some(&before), now());
        for (b, a) in before.conditions.iter().zip(&after.conditions) {
            prop_assert_eq!(&b.type_, &a.type_);
            let want: Time = if a.status == b.status { b.last_transition_time.clone() } else { Time(now()) };
            prop_assert_eq!(&a.last_transition_time, &want, "{} {} -> {}", a.type_, b.status, a.status);
        }
    }

    #[test]
    fn evaluation_is_deterministic_sorted_and_independent_of_input_order(f in facts()) {
        let once = eval(&f);
        prop_assert_eq!(&once, &eval(&f));
        let mut reversed = f.clone();
        if let Some(pools) = reversed.cluster.node_pools.found_mut() { pools.reverse(); }
        if let Some(claims) = reversed.cluster.node_claims.found_mut() { claims.reverse(); }
        if let Some(pods) = reversed.cluster.pending_pods.found_mut() { pods.reverse(); }
        if let Observed::Found(groups) = &mut reversed.aws.security_groups { groups.reverse(); }
        if let Observed::Found(instances) = &mut reversed.aws.cluster_instances { instances.reverse(); }
        prop_assert_eq!(&once, &eval(&reversed));
        let order = |ty: ConditionType| ConditionType::ALL.iter().position(|&t| t == ty);
        for pair in once.findings.windows(2) {
            let key = |x: &karpenter_health_api::Finding| (x.severity, order(x.condition_type), x.check.clone(), x.reason.clone(), x.subjects.clone(), x.message.clone());
            prop_assert!(key(&pair[0]) < key(&pair[1]), "findings out of order or duplicated");
        }
        for finding in &once.findings {
            prop_assert!(finding.subjects.windows(2).all(|s| s[0] < s[1]));
        }
    }

    #[test]
    fn findings_stay_within_their_bound(f in facts(), extra in 0usize..120) {
        let f = f.with(|f| for i in 0..extra {
            if let Some(pods) = f.cluster.pending_pods.found_mut() {
                pods.push(std::sync::Arc::new(pending_pod("bulk", &format!("q{i}"), &[(&format!("karpenter.sh/q{i}"), "x")])));
            }
        });
        let status = eval(&f);
        prop_assert!(status.findings.len() <= MAX_FINDINGS);
        if status.findings_omitted > 0 {
            prop_assert_eq!(status.findings.len(), MAX_FINDINGS);
        }
        let produced: usize = crate::evaluate_outcomes(&f, &Settings::default(), now()).0.iter().map(|o| o.findings.len()).sum();
        prop_assert!(status.findings.len() + status.findings_omitted as usize <= produced);
        for finding in &status.findings {
            prop_assert!(finding.subjects.len() <= MAX_SUBJECTS);
            prop_assert!(finding.message.len() <= 2_048);
        }
    }
}

#[test]
fn the_mutation_generator_reaches_every_reason() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..6_000 {
        let f = facts().new_tree(&mut runner).expect("tree").current();
        for c in eval(&f).conditions {
            seen.insert(c.reason);
        }
    }
    let unseen: Vec<&str> = Reason::ALL
        .iter()
        .map(|r| r.as_str())
        .filter(|r| !seen.contains(*r) && *r != "Pending")
        .collect();
    assert!(unseen.is_empty(), "the generator never produces {unseen:?}");
}

#[test]
fn access_entries_are_facts_too() {
    let f = Facts::healthy().with(|f| {
        f.aws.node_role_access_entries = Observed::Found(vec![AccessEntryFacts::default()])
    });
    assert_eq!(
        status_of(&eval(&f), ConditionType::NodeRoleMapped),
        ConditionStatus::False
    );
}


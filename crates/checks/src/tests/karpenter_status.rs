//! Scenarios of `KarpenterStatusConsistent`: validation stuck behind an instance profile given
//! as an ARN, and a stale status judged only on evidence of how long it lagged. Pure.

use super::reasons::status;
use super::{failures, message, pair};
use crate::facts::Facts;
use crate::testing::*;
use karpenter_health_api::{ConditionType, Reason};

#[test]
fn the_arn_instance_profile_left_for_long_also_flags_validation_stuck_naming_the_arn() {
    let facts = Facts::healthy()
        .with_instance_profile_spec("arn:aws:iam::111122223333:instance-profile/P", false)
        .with_karpenter_condition(karpenter_condition(
            "ValidationSucceeded",
            "Unknown",
            mins_ago(45),
        ));
    let status = status(&facts);
    assert_eq!(
        failures(&status),
        vec![
            pair(
                ConditionType::InstanceProfileReady,
                Reason::InstanceProfileIsArn
            ),
            pair(
                ConditionType::KarpenterStatusConsistent,
                Reason::ValidationStuck
            ),
        ]
    );
    assert!(message(&status, ConditionType::KarpenterStatusConsistent).contains("is an ARN"));
}

#[test]
fn status_stale_needs_evidence_of_how_long_the_lag_lasted() {
    let lagging = Facts::healthy().with(|f| f.cluster.node_class.metadata.generation = Some(2));
    assert!(
        failures(&status(&lagging)).is_empty(),
        "no time evidence, no verdict"
    );
    let recent = lagging
        .clone()
        .with(|f| f.cluster.node_class_generation_seen_at = Some(mins_ago(2)));
    assert!(failures(&status(&recent)).is_empty());
    let never = Facts::healthy().with(|f| f.cluster.node_class.status = None);
    assert_eq!(
        failures(&status(&never)),
        vec![pair(
            ConditionType::KarpenterStatusConsistent,
            Reason::StatusStale
        ),]
    );
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        a_reconciled_consistent_karpenter_status_is_karpenter_status_current:
            Facts::healthy() => KarpenterStatusConsistent is True because KarpenterStatusCurrent;
        validation_unknown_for_an_hour_under_instance_profile_ready_true_is_validation_stuck:
            Facts::healthy().with_karpenter_condition(karpenter_condition("ValidationSucceeded", "Unknown", mins_ago(60)))
            => KarpenterStatusConsistent is False because ValidationStuck;
        ready_true_beside_subnets_ready_false_is_ready_contradicts_dependents:
            Facts::healthy().with_karpenter_condition(karpenter_condition("SubnetsReady", "False", mins_ago(5)))
            => KarpenterStatusConsistent is False because ReadyContradictsDependents;
        a_status_two_generations_behind_for_an_hour_is_status_stale:
            Facts::healthy().with(|f| { f.cluster.node_class.metadata.generation = Some(3); f.cluster.node_class_generation_seen_at = Some(mins_ago(60)); })
            => KarpenterStatusConsistent is False because StatusStale;
    }
}

//! Scenarios of `NodeClaimsRegistered`: Karpenter's own NodeRegistrationHealthy on a NodePool as
//! proof once the claims are gone, and registration timed from the Registered condition with
//! deleting claims skipped. Pure.

use super::reasons::status;
use super::{failures, message, pair};
use crate::facts::{Facts, Observed};
use crate::testing::*;
use karpenter_health_api::{ConditionType, Reason};

#[test]
fn karpenters_node_registration_healthy_false_on_a_nodepool_is_proof_after_the_claims_are_gone() {
    use karpenter_health_api::karpenter::NodePoolStatus;
    let with_pool_condition = |status: &str| {
        let status = status.to_owned();
        Facts::healthy().with(move |f| {
            f.cluster.node_claims = Observed::Found(Vec::new());
            let pool = &mut f.cluster.node_pools.found_mut().unwrap()[0];
            pool.status = Some(NodePoolStatus {
                conditions: vec![karpenter_health_api::karpenter::KarpenterCondition {
                    reason: Some("RegistrationFailed".into()),
                    message: Some("Failed to register 3 nodes".into()),
                    ..karpenter_condition("NodeRegistrationHealthy", &status, mins_ago(3))
                }],
                ..Default::default()
            });
        })
    };
    let status = status(&with_pool_condition("False"));
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::NodeClaimsRegistered,
            Reason::NodeClaimsNotRegistering
        )]
    );
    let m = message(&status, ConditionType::NodeClaimsRegistered);
    assert!(
        m.contains(NODE_POOL) && m.contains("RegistrationFailed") && m.contains("3 nodes"),
        "{m}"
    );
    assert!(failures(&self::status(&with_pool_condition("True"))).is_empty());
    assert!(failures(&self::status(&with_pool_condition("Unknown"))).is_empty());
}

#[test]
fn registration_is_timed_from_the_registered_condition_and_deleting_claims_are_skipped() {
    let claim_with = |registered_mins_ago: i64, deleting: bool| {
        let mut claim = node_claim("slow", "i-0slow", 60, false);
        if let Some(registered) = claim.registered.as_mut() {
            registered.last_transition = Some(mins_ago(registered_mins_ago));
        }
        claim.deleting = deleting;
        Facts::healthy().with_node_claim(claim)
    };
    // Launched an hour ago, but Registered changed 5 minutes ago (a retry): not late yet.
    assert!(failures(&status(&claim_with(5, false))).is_empty());
    assert_eq!(
        failures(&status(&claim_with(9, false))),
        vec![pair(
            ConditionType::NodeClaimsRegistered,
            Reason::NodeClaimsNotRegistering
        )]
    );
    assert!(failures(&status(&claim_with(9, true))).is_empty());
    let late = status(&claim_with(9, false));
    let m = message(&late, ConditionType::NodeClaimsRegistered);
    assert!(
        m.contains("waiting since 20"),
        "an absolute time, never an age: {m}"
    );
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        a_registered_nodeclaim_is_nodeclaims_registering:
            Facts::healthy() => NodeClaimsRegistered is True because NodeClaimsRegistering;
        a_nodeclaim_launched_an_hour_ago_and_still_unregistered_is_nodeclaims_not_registering:
            Facts::healthy().with_node_claim(node_claim("default-stuck", "i-0stuck", 60, false))
            => NodeClaimsRegistered is False because NodeClaimsNotRegistering;
    }
}

//! The scenarios of `rules/spot_ready.rs`: its sentences, one per reason. Pure.

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        on_demand_node_pools_are_spot_not_used:
            Facts::healthy() => SpotReady is True because SpotNotUsed;
        a_spot_node_pool_with_the_service_linked_role_is_spot_service_linked_role_exists:
            Facts::healthy().with_spot(Some(Observed::Found("arn:aws:iam::111122223333:role/aws-service-role/spot.amazonaws.com/AWSServiceRoleForEC2Spot".into())))
            => SpotReady is True because SpotServiceLinkedRoleExists;
        a_spot_node_pool_without_the_service_linked_role_is_spot_service_linked_role_missing:
            Facts::healthy().with_spot(Some(Observed::Absent))
            => SpotReady is False because SpotServiceLinkedRoleMissing;
    }
}

//! What the operator sees and when, across the conditions: nothing is judged from a cache that was
//! never listed. Pure.

use super::reasons::status;
use super::{failures, pair};
use crate::facts::{Facts, Observed, UnknownCause};
use crate::testing::*;
use karpenter_health_api::{ConditionType, Reason};

/// At every start and leader change the operator evaluates before its caches have listed
/// everything. Nothing may be judged from a list that was never read.
#[test]
fn before_the_cluster_caches_are_listed_nothing_is_judged_from_them() {
    let cold = |f: &mut Facts| {
        let unlisted = || UnknownCause::NotObserved;
        f.cluster.node_pools = Observed::unknown(unlisted(), "nodepools cache not synced yet");
        f.cluster.node_claims = Observed::unknown(unlisted(), "nodeclaims cache not synced yet");
        f.cluster.claimed_instance_ids =
            Observed::unknown(unlisted(), "nodeclaims cache not synced yet");
        f.cluster.pending_pods = Observed::unknown(unlisted(), "pending pods cache not synced yet");
    };
    // Hours-old instances of this cluster: claimed by NodeClaims the cache has not listed yet.
    let facts = Facts::healthy()
        .with_cluster_instance(instance("i-0old1", CLUSTER, VPC, 300))
        .with_cluster_instance(instance("i-0old2", CLUSTER, VPC, 600))
        .with(cold);
    let cold_status = status(&facts);
    assert!(
        failures(&cold_status).is_empty(),
        "{:?}",
        failures(&cold_status)
    );
    for ty in [
        ConditionType::ClusterIdentityUnique,
        ConditionType::LabelsAllowed,
        ConditionType::NodeClaimsRegistered,
    ] {
        let c = cold_status.condition(ty).unwrap();
        assert_eq!(c.status, "Unknown", "{ty}: {}", c.message);
        assert_eq!(c.reason, "NotObserved", "{ty}: {}", c.message);
        assert!(c.message.contains("not synced yet"), "{ty}: {}", c.message);
    }
    // Once listed, the same instances are judged: unclaimed and old, they are another cluster's.
    let listed = Facts::healthy()
        .with_cluster_instance(instance("i-0old1", CLUSTER, VPC, 300))
        .with_cluster_instance(instance("i-0old2", CLUSTER, VPC, 600));
    assert!(failures(&status(&listed)).contains(&pair(
        ConditionType::ClusterIdentityUnique,
        Reason::ClusterNameSharedWithOtherCluster
    )));
}

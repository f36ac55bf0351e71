//! Scenarios of `ClusterIdentityUnique`: two clusters sharing one name fail it, while launches in
//! flight, terminated and claimed instances do not, and an unknown EKS VPC is Unknown. Pure.

use super::reasons::status;
use super::{failures, message, pair};
use crate::facts::Facts;
use crate::testing::*;
use karpenter_health_api::{ConditionType, Reason};

#[test]
fn two_clusters_sharing_one_name_fail_cluster_identity() {
    // Issue #7356: another cluster named "demo" in another VPC, its nodes tagged like ours.
    let facts = Facts::healthy()
        .with_cluster_instance(instance("i-0b1", CLUSTER, "vpc-0twin", 4))
        .with_cluster_instance(instance("i-0b2", CLUSTER, "vpc-0twin", 600));
    let status = status(&facts);
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::ClusterIdentityUnique,
            Reason::ClusterNameSharedWithOtherCluster
        )]
    );
    let m = message(&status, ConditionType::ClusterIdentityUnique);
    assert!(m.contains("i-0b1") && m.contains("vpc-0twin"), "{m}");
}

#[test]
fn a_fresh_unclaimed_instance_in_the_cluster_vpc_is_a_launch_in_flight_not_a_twin() {
    let facts = Facts::healthy().with_cluster_instance(instance("i-0new", CLUSTER, VPC, 1));
    assert!(failures(&status(&facts)).is_empty());
}

#[test]
fn terminated_twins_and_claimed_instances_are_ignored() {
    let facts = Facts::healthy().with_cluster_instance(crate::facts::InstanceFacts {
        state: "terminated".into(),
        ..instance("i-0gone", CLUSTER, "vpc-0twin", 600)
    });
    assert!(failures(&status(&facts)).is_empty());
}

#[test]
fn an_unclaimed_young_instance_with_the_eks_vpc_unknown_is_unknown() {
    let facts = Facts::healthy()
        .with_cluster_instance(instance("i-0new", CLUSTER, "vpc-0maybe", 1))
        .with(|f| f.aws.eks_cluster = unknown(crate::facts::UnknownCause::Throttled));
    let status = status(&facts);
    let c = status
        .condition(ConditionType::ClusterIdentityUnique)
        .expect("present");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("Unknown", "AwsThrottled")
    );
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        a_matching_name_and_only_claimed_instances_are_cluster_identity_verified:
            Facts::healthy() => ClusterIdentityUnique is True because ClusterIdentityVerified;
        no_eks_cluster_with_karpenters_cluster_name_is_karpenter_cluster_name_mismatch:
            Facts::healthy().with(|f| f.aws.eks_cluster = Observed::Absent)
            => ClusterIdentityUnique is False because KarpenterClusterNameMismatch;
        an_operator_told_another_cluster_name_than_karpenter_is_karpenter_cluster_name_mismatch:
            Facts::healthy().with(|f| f.cluster.configured_cluster_name = Some("demo-prod".into()))
            => ClusterIdentityUnique is False because KarpenterClusterNameMismatch;
        an_unclaimed_instance_with_this_name_in_another_vpc_is_cluster_name_shared_with_other_cluster:
            Facts::healthy().with_cluster_instance(instance("i-0foreign", CLUSTER, "vpc-0other", 3))
            => ClusterIdentityUnique is False because ClusterNameSharedWithOtherCluster;
        an_unclaimed_instance_older_than_garbage_collection_is_cluster_name_shared_with_other_cluster:
            Facts::healthy().with_cluster_instance(instance("i-0survivor", CLUSTER, VPC, 90))
            => ClusterIdentityUnique is False because ClusterNameSharedWithOtherCluster;
    }
}

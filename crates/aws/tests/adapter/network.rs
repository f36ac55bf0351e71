//! The observer's network reads (issue 12) against the fake: the subnets a class selects, the
//! cluster's VPC when EKS leaves it out, each VPC's network read once however many classes share
//! it, and a denied call leaving only its own part unknown. No IO.

use crate::common::{CLUSTER, cause, observer, options, request, world};
use karpenter_health_api::karpenter::SelectorTerm;
use karpenter_health_aws::AwsRequest;
use karpenter_health_aws::fake::FakeAws;
use karpenter_health_aws::ports::{CallError, ErrorKind, VpcAttribute};
use karpenter_health_checks::facts::{Observed, UnknownCause};
use std::collections::BTreeMap;

fn network_request() -> AwsRequest {
    AwsRequest {
        subnet_selector_terms: vec![SelectorTerm {
            tags: BTreeMap::from([("karpenter.sh/discovery".into(), CLUSTER.into())]),
            ..Default::default()
        }],
        ..request()
    }
}

#[tokio::test]
async fn selected_subnets_and_their_vpc_network_are_read() {
    let mut state = world();
    state
        .vpc_attributes
        .insert(("vpc-a".into(), VpcAttribute::EnableDnsHostnames), false);
    let fake = FakeAws::new(state);
    let obs = observer(&fake, options());
    let facts = obs.observe(&network_request()).await;
    let subnets = facts.subnets.found().expect("subnets read");
    let ids: Vec<&str> = subnets.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["subnet-a1", "subnet-a2"]);
    assert_eq!(facts.cluster_vpc, Observed::Found("vpc-a".into()));
    let network = facts.vpc_networks["vpc-a"].found().expect("network read");
    assert_eq!(network.route_tables.found().map(Vec::len), Some(1));
    assert_eq!(network.nat_gateways.found().map(Vec::len), Some(1));
    assert_eq!(network.dns_support, Observed::Found(true));
    assert_eq!(network.dns_hostnames, Observed::Found(false));
}

#[tokio::test]
async fn status_ids_are_asked_by_id_and_a_missing_one_is_simply_not_returned() {
    let fake = FakeAws::new(world());
    let obs = observer(&fake, options());
    let facts = obs
        .observe(&AwsRequest {
            subnet_ids: vec!["subnet-a2".into(), "subnet-gone".into()],
            ..network_request()
        })
        .await;
    let ids: Vec<String> = facts
        .subnets
        .found()
        .expect("read")
        .iter()
        .map(|s| s.id.clone())
        .collect();
    assert_eq!(ids, ["subnet-a2"]);
}

#[tokio::test]
async fn the_cluster_vpc_comes_from_the_cluster_subnets_when_eks_leaves_it_out() {
    let mut state = world();
    state.clusters.get_mut(CLUSTER).expect("cluster").vpc_id = None;
    let fake = FakeAws::new(state);
    let obs = observer(&fake, options());
    let facts = obs.observe(&network_request()).await;
    assert_eq!(facts.cluster_vpc, Observed::Found("vpc-a".into()));
}

#[tokio::test]
async fn classes_sharing_selectors_and_a_vpc_share_every_network_call() {
    let fake = FakeAws::new(world());
    let obs = observer(&fake, options());
    for _ in 0..5 {
        obs.observe(&network_request()).await;
    }
    // A second selector set in the same VPC reads its subnets and route tables, but not the rest
    // of the VPC again.
    obs.observe(&AwsRequest {
        subnet_ids: vec!["subnet-a1".into()],
        ..network_request()
    })
    .await;
    assert_eq!(fake.calls("DescribeSubnets"), 2);
    for op in ["DescribeNatGateways", "DescribeVpcEndpoints"] {
        assert_eq!(fake.calls(op), 1, "{op}");
    }
    // Route tables are read per VPC and subnet set, so a changed set never meets an answer
    // older than its subnets.
    assert_eq!(fake.calls("DescribeRouteTables"), 2);
    assert_eq!(fake.calls("DescribeVpcAttribute"), 2);
}

#[tokio::test]
async fn a_denied_network_call_leaves_only_its_part_unknown() {
    let fake = FakeAws::new(world());
    fake.fail(
        "DescribeRouteTables",
        CallError::new(ErrorKind::AccessDenied, "denied").with_code("UnauthorizedOperation"),
    );
    let obs = observer(&fake, options());
    let facts = obs.observe(&network_request()).await;
    let network = facts.vpc_networks["vpc-a"].found().expect("network");
    assert_eq!(cause(&network.route_tables), UnknownCause::AccessDenied);
    assert!(network.nat_gateways.found().is_some());
    assert!(facts.subnets.found().is_some());

    let fake = FakeAws::new(world());
    fake.fail(
        "DescribeSubnets",
        CallError::new(ErrorKind::AccessDenied, "denied").with_code("UnauthorizedOperation"),
    );
    let obs = observer(&fake, options());
    let facts = obs.observe(&network_request()).await;
    assert_eq!(cause(&facts.subnets), UnknownCause::AccessDenied);
    assert!(facts.vpc_networks.is_empty());
}

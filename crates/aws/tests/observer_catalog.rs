//! The observer's instance-type reads against the fake: every page of both calls is read, the
//! catalog is one read for every class, a failed call of either makes it unknown with its cause
//! (never half a catalog), and it is read only when asked. No IO (the fake).

// This test uses only part of the shared fixture.
#[allow(dead_code)]
mod common;

use common::{observer, options, request, world};
use karpenter_health_aws::AwsRequest;
use karpenter_health_aws::fake::FakeAws;
use karpenter_health_aws::ports::{CallError, ErrorKind};
use karpenter_health_checks::facts::{InstanceTypeFacts, Observed, UnknownCause};

/// 250 types (three pages of 100), each offered in two of three zones.
fn fake() -> FakeAws {
    let mut s = world();
    let zones = ["us-west-2a", "us-west-2b", "us-west-2c"];
    for i in 0..250 {
        let name = format!("m{}.large", i + 1);
        s.instance_types.push(InstanceTypeFacts {
            name: name.clone(),
            vcpus: Some(2),
            memory_mib: Some(8192),
            architectures: vec!["x86_64".into()],
            usage_classes: vec!["on-demand".into(), "spot".into()],
        });
        for zone in [zones[i % 3], zones[(i + 1) % 3]] {
            s.instance_type_offerings.push((name.clone(), zone.into()));
        }
    }
    FakeAws::new(s)
}

fn asking(class: &str) -> AwsRequest {
    AwsRequest {
        instance_types: true,
        cluster_name: Some(class.into()),
        ..request()
    }
}

#[tokio::test]
async fn every_page_of_types_and_offerings_is_read_once_for_all_classes() {
    let fake = fake();
    let obs = observer(&fake, options());
    let a = obs.observe(&asking("a")).await;
    let b = obs.observe(&asking("b")).await;
    let catalog = a
        .instance_types
        .as_ref()
        .and_then(|c| c.found())
        .expect("catalog");
    assert_eq!(catalog.types.len(), 250);
    assert_eq!(catalog.zones.len(), 250);
    assert_eq!(
        catalog.zones["m1.large"].iter().collect::<Vec<_>>(),
        ["us-west-2a", "us-west-2b"]
    );
    assert_eq!(a.instance_types, b.instance_types);
    // 250 types at 100 a page; 500 offerings at 100 a page; once for both classes.
    assert_eq!(fake.calls("DescribeInstanceTypes"), 3);
    assert_eq!(fake.calls("DescribeInstanceTypeOfferings"), 5);
}

#[tokio::test]
async fn a_failed_read_of_either_call_makes_the_catalog_unknown_not_half() {
    let fake = fake();
    fake.fail_next(
        "DescribeInstanceTypes",
        CallError::new(ErrorKind::AccessDenied, "not authorized")
            .with_code("UnauthorizedOperation"),
    );
    let obs = observer(&fake, options());
    let facts = obs.observe(&asking("a")).await;
    match facts.instance_types {
        Some(Observed::Unknown(u)) => {
            assert_eq!(u.cause, UnknownCause::AccessDenied);
            assert!(
                u.detail.contains("EC2 DescribeInstanceTypes"),
                "{}",
                u.detail
            );
        }
        other => panic!("expected unknown, got {other:?}"),
    }

    let fake = self::fake();
    let obs = observer(&fake, options());
    // The types answer and the offerings are throttled: no catalog of types without zones.
    fake.fail_next(
        "DescribeInstanceTypeOfferings",
        CallError::new(ErrorKind::Throttled, "slow down").with_code("RequestLimitExceeded"),
    );
    let facts = obs.observe(&asking("a")).await;
    assert!(
        matches!(&facts.instance_types, Some(Observed::Unknown(u)) if u.cause == UnknownCause::Throttled),
        "{:?}",
        facts.instance_types.map(|o| o.map(|c| c.types.len()))
    );
}

#[tokio::test]
async fn a_class_without_node_pools_does_not_read_the_catalog() {
    let fake = fake();
    let obs = observer(&fake, options());
    let facts = obs.observe(&request()).await;
    assert_eq!(facts.instance_types, None);
    assert_eq!(fake.calls("DescribeInstanceTypes"), 0);
    assert_eq!(fake.calls("DescribeInstanceTypeOfferings"), 0);
}

#[tokio::test]
async fn vcpu_quotas_are_read_once_for_all_classes_absent_without_a_value_unknown_when_denied() {
    let fake = fake();
    fake.with(|s| {
        s.service_quotas
            .insert(("ec2".into(), "L-1216C47A".into()), 32.0);
    });
    let obs = observer(&fake, options());
    let a = obs.observe(&asking("a")).await;
    let b = obs.observe(&asking("b")).await;
    let quotas = a.vcpu_quotas.clone().expect("asked");
    assert_eq!(quotas.on_demand, Observed::Found(32.0));
    // No value for the spot quota: absent, a proof of nothing to judge.
    assert_eq!(quotas.spot, Observed::Absent);
    assert_eq!(a.vcpu_quotas, b.vcpu_quotas);
    assert_eq!(fake.calls("GetServiceQuota"), 2);

    let fake = self::fake();
    fake.fail(
        "GetServiceQuota",
        CallError::new(ErrorKind::AccessDenied, "no").with_code("AccessDeniedException"),
    );
    let obs = observer(&fake, options());
    let quotas = obs.observe(&asking("a")).await.vcpu_quotas.expect("asked");
    assert!(
        matches!(&quotas.on_demand, Observed::Unknown(u) if u.cause == UnknownCause::AccessDenied
            && u.detail.contains("Service Quotas GetServiceQuota ec2 L-1216C47A")),
        "{quotas:?}"
    );
}

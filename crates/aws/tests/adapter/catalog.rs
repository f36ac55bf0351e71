//! The observer's instance-type reads against the fake: every page of both calls is read, the
//! catalog is one read for every class, a failed call of either makes it unknown with its cause
//! (never half a catalog), and it is read only when asked; the vCPU quotas; an AMI alias's SSM
//! parameters for the cluster's Kubernetes minor and the next; the class's images. No IO (the fake).

use crate::common::{observer, options, request, world};
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
            network_interfaces: Some(3),
            ipv4_per_interface: Some(10),
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

const PINNED_1_31: &str = "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.31-v20241024/image_id";

fn with_alias(alias: &str) -> AwsRequest {
    AwsRequest {
        ami_alias: Some(alias.into()),
        ..request()
    }
}

#[tokio::test]
async fn an_alias_reads_its_parameters_for_the_eks_minor_and_the_next_once_for_all_classes() {
    let fake = FakeAws::new(world());
    fake.with(|s| {
        s.ssm_parameters
            .insert(PINNED_1_31.into(), "ami-0pinned".into());
    });
    let obs = observer(&fake, options());
    let a = obs.observe(&with_alias("al2023@v20241024")).await;
    let b = obs.observe(&with_alias("al2023@v20241024")).await;
    let Some(Observed::Found(parameters)) = &a.ami_parameters else {
        panic!("{:?}", a.ami_parameters);
    };
    // EKS says 1.31: five parameters for 1.31, five for 1.32, five of @latest for 1.32.
    assert_eq!(parameters.kubernetes_minor, "1.31");
    assert_eq!(parameters.values.len(), 15);
    assert_eq!(
        parameters.values[PINNED_1_31],
        Observed::Found("ami-0pinned".into())
    );
    assert_eq!(
        parameters
            .values
            .values()
            .filter(|v| **v == Observed::Absent)
            .count(),
        14,
        "ParameterNotFound is an answer: absent"
    );
    assert_eq!(a.ami_parameters, b.ami_parameters);
    assert_eq!(fake.calls("GetParameter"), 15, "shared by every class");
    // `@latest` follows AWS: only this minor's five.
    let latest = obs.observe(&with_alias("al2023@latest")).await;
    let Some(Observed::Found(latest)) = latest.ami_parameters else {
        panic!("asked");
    };
    assert_eq!(latest.values.len(), 5);
    // No alias: nothing asked.
    assert_eq!(obs.observe(&request()).await.ami_parameters, None);
}

#[tokio::test]
async fn the_minor_falls_back_to_the_api_server_and_a_denied_read_is_unknown() {
    let fake = FakeAws::new(world());
    fake.fail(
        "GetParameter",
        CallError::new(ErrorKind::AccessDenied, "no").with_code("AccessDeniedException"),
    );
    let obs = observer(&fake, options());
    let asked = AwsRequest {
        cluster_name: Some("no-such-cluster".into()),
        apiserver_version: Some("v1.30.4-eks-a737599".into()),
        ..with_alias("al2@latest")
    };
    let Some(Observed::Found(parameters)) = obs.observe(&asked).await.ami_parameters else {
        panic!("asked");
    };
    assert_eq!(parameters.kubernetes_minor, "1.30");
    assert!(
        parameters.values.values().all(|v| matches!(v,
            Observed::Unknown(u) if u.cause == UnknownCause::AccessDenied
                && u.detail.contains("SSM GetParameter /aws/service/eks/optimized-ami/1.30/"))),
        "{parameters:?}"
    );
    // Neither EKS nor the API server says the version: unknown, with the cause.
    let blind = AwsRequest {
        apiserver_version: None,
        ..asked
    };
    let facts = obs.observe(&blind).await.ami_parameters;
    assert!(
        matches!(&facts, Some(Observed::Unknown(u)) if u.detail.contains("Kubernetes version")),
        "{facts:?}"
    );
}

#[tokio::test]
async fn the_minor_is_not_guessed_from_the_api_server_while_eks_cannot_be_read() {
    let fake = FakeAws::new(world());
    fake.fail(
        "DescribeCluster",
        CallError::new(ErrorKind::Throttled, "slow down").with_code("ThrottlingException"),
    );
    let obs = observer(&fake, options());
    let asked = AwsRequest {
        apiserver_version: Some("v1.20.2".into()),
        ..with_alias("al2023@latest")
    };
    let facts = obs.observe(&asked).await.ami_parameters;
    assert!(
        matches!(&facts, Some(Observed::Unknown(u)) if u.cause == UnknownCause::Throttled
            && u.detail.contains("EKS DescribeCluster")),
        "{facts:?}"
    );
    assert_eq!(fake.calls("GetParameter"), 0);
}

#[tokio::test]
async fn open_capacity_reservations_are_read_once_for_all_classes_only_when_node_pools_use_them() {
    let fake = fake();
    fake.with(|s| {
        s.open_capacity_reservations.push(
            karpenter_health_checks::facts::CapacityReservationFacts {
                id: "cr-0open".into(),
                instance_type: "m5.large".into(),
                zone: "us-west-2a".into(),
                available: Some(2),
                platform: Some("Linux/UNIX".into()),
                tenancy: Some("default".into()),
            },
        );
    });
    let obs = observer(&fake, options());
    let a = obs.observe(&asking("a")).await;
    let b = obs.observe(&asking("b")).await;
    let Some(Observed::Found(open)) = &a.open_capacity_reservations else {
        panic!("{:?}", a.open_capacity_reservations);
    };
    assert_eq!(open[0].id, "cr-0open");
    assert_eq!(a.open_capacity_reservations, b.open_capacity_reservations);
    assert_eq!(fake.calls("DescribeCapacityReservations"), 1);
    assert_eq!(
        obs.observe(&request()).await.open_capacity_reservations,
        None
    );
}

#[tokio::test(start_paused = true)]
async fn a_classs_images_are_described_once_for_every_class_with_the_same_ids() {
    use karpenter_health_checks::facts::ImageFacts;
    let mut s = world();
    s.images.push(ImageFacts {
        id: "ami-0a".into(),
        name: Some("team-image".into()),
        state: "disabled".into(),
        deprecation_time: None,
    });
    let fake = FakeAws::new(s);
    let obs = observer(&fake, options());
    let ids = vec!["ami-0a".to_owned(), "ami-0gone".to_owned()];
    let mut answers = Vec::new();
    for class in ["a", "b", "c"] {
        let facts = obs
            .observe(&AwsRequest {
                image_ids: ids.clone(),
                cluster_name: Some(class.into()),
                ..request()
            })
            .await;
        answers.push(facts.images);
    }
    assert_eq!(fake.calls("DescribeImages"), 1);
    for answer in answers {
        let Some(Observed::Found(images)) = answer else {
            panic!("described: {answer:?}");
        };
        // The gone image is simply not in the answer; the disabled one says so.
        assert_eq!(images.len(), 1);
        assert_eq!(images[0].state, "disabled");
    }
    // Without images nothing is asked.
    let facts = obs.observe(&request()).await;
    assert_eq!(facts.images, None);
    assert_eq!(fake.calls("DescribeImages"), 1);

    // A denied read is unknown with its cause.
    let fake = FakeAws::new(world());
    fake.fail_next(
        "DescribeImages",
        CallError::new(ErrorKind::AccessDenied, "denied").with_code("UnauthorizedOperation"),
    );
    let facts = observer(&fake, options())
        .observe(&AwsRequest {
            image_ids: ids,
            ..request()
        })
        .await;
    assert!(
        matches!(
            &facts.images,
            Some(Observed::Unknown(u)) if u.cause == UnknownCause::AccessDenied
        ),
        "{:?}",
        facts.images
    );
}

#[tokio::test(start_paused = true)]
async fn more_images_than_one_filter_takes_are_described_in_calls_of_200() {
    use karpenter_health_checks::facts::ImageFacts;
    let ids: Vec<String> = (0..450).map(|i| format!("ami-{i:05}")).collect();
    let mut s = world();
    // One page per call, as EC2's MaxResults of 1000 gives.
    s.instance_type_page_size = 1000;
    for id in &ids {
        s.images.push(ImageFacts {
            id: id.clone(),
            name: None,
            state: "available".into(),
            deprecation_time: None,
        });
    }
    let fake = FakeAws::new(s);
    let facts = observer(&fake, options())
        .observe(&AwsRequest {
            image_ids: ids,
            ..request()
        })
        .await;
    let Some(Observed::Found(images)) = &facts.images else {
        panic!("described: {:?}", facts.images);
    };
    assert_eq!(images.len(), 450);
    assert_eq!(fake.calls("DescribeImages"), 3);
}

//! Fixtures shared by the observer tests: a small fake AWS account with one cluster, its node
//! role, access entries, security groups and instances, and the observer and request over it.
//! No IO.

use karpenter_health_api::karpenter::SelectorTerm;
use karpenter_health_aws::fake::{FakeAws, FakeState};
use karpenter_health_aws::ports::QueueAttributes;
use karpenter_health_aws::ports::RoleData;
use karpenter_health_aws::{
    AwsObserver, AwsRequest, ControllerRequest, ObserverOptions, RateLimits, ServiceAccountRef,
};
use karpenter_health_checks::facts::EventRuleFacts;
use karpenter_health_checks::facts::{
    AccessEntryFacts, EksClusterFacts, InstanceFacts, InstanceProfileFacts, Observed, RoleRef,
    SecurityGroupFacts, UnknownCause,
};
use karpenter_health_checks::facts::{
    NatGatewayFacts, RouteFacts, RouteTableFacts, RouteTarget, SubnetFacts,
};
use karpenter_health_checks::karpenter_permissions::ClassInputs;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub const ACCOUNT: &str = "123456789012";
pub const CLUSTER: &str = "demo";

fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn role_arn(path: &str, name: &str) -> String {
    format!("arn:aws:iam::{ACCOUNT}:role{path}{name}")
}

pub fn instance(n: usize, cluster: &str) -> InstanceFacts {
    InstanceFacts {
        id: format!("i-{n:017x}"),
        vpc_id: Some(
            if n.is_multiple_of(2) {
                "vpc-a"
            } else {
                "vpc-b"
            }
            .into(),
        ),
        state: "running".into(),
        launch_time: None,
        tags: tags(&[
            (&format!("kubernetes.io/cluster/{cluster}"), "owned"),
            ("eks:eks-cluster-name", cluster),
            ("karpenter.sh/nodepool", "default"),
        ]),
        instance_type: Some("m5.large".into()),
        lifecycle: None,
    }
}

pub fn world() -> FakeState {
    let node_role = RoleData {
        name: "KarpenterNodeRole-demo".into(),
        arn: role_arn("/nodes/", "KarpenterNodeRole-demo"),
        path: "/nodes/".into(),
        assume_role_policy_document: Some("%7B%22Version%22%3A%222012-10-17%22%7D".into()),
        permissions_boundary_arn: None,
    };
    let mut s = FakeState::default();
    s.instance_profiles.insert(
        "demo_profile".into(),
        InstanceProfileFacts {
            name: "demo_profile".into(),
            arn: format!("arn:aws:iam::{ACCOUNT}:instance-profile/demo_profile"),
            path: "/".into(),
            roles: vec![RoleRef {
                name: node_role.name.clone(),
                arn: node_role.arn.clone(),
                path: node_role.path.clone(),
            }],
        },
    );
    s.instance_profiles.insert(
        "empty_profile".into(),
        InstanceProfileFacts {
            name: "empty_profile".into(),
            ..Default::default()
        },
    );
    s.attached_policies.insert(
        node_role.name.clone(),
        vec![
            "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy".into(),
            "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy".into(),
        ],
    );
    s.roles.insert(node_role.name.clone(), node_role);
    s.clusters.insert(
        CLUSTER.into(),
        EksClusterFacts {
            name: CLUSTER.into(),
            vpc_id: Some("vpc-a".into()),
            authentication_mode: Some("API_AND_CONFIG_MAP".into()),
            oidc_issuer: None,
            version: Some("1.31".into()),
            subnet_ids: vec!["subnet-a1".into()],
            ip_family: Some("ipv4".into()),
        },
    );
    s.access_entries.insert(
        CLUSTER.into(),
        vec![
            AccessEntryFacts {
                principal_arn: role_arn("/", "someone-else"),
                type_: "STANDARD".into(),
                username: None,
            },
            // Written without the role's path, as EKS users usually do.
            AccessEntryFacts {
                principal_arn: role_arn("/", "KarpenterNodeRole-demo"),
                type_: "EC2_LINUX".into(),
                username: Some("system:node:{{EC2PrivateDNSName}}".into()),
            },
        ],
    );
    s.security_groups = vec![
        SecurityGroupFacts {
            id: "sg-1".into(),
            name: "nodes".into(),
            vpc_id: Some("vpc-a".into()),
            tags: tags(&[
                ("karpenter.sh/discovery", CLUSTER),
                ("kubernetes.io/cluster/demo", "owned"),
            ]),
        },
        SecurityGroupFacts {
            id: "sg-2".into(),
            name: "extra".into(),
            vpc_id: Some("vpc-a".into()),
            tags: tags(&[("team", "x")]),
        },
        SecurityGroupFacts {
            id: "sg-3".into(),
            name: "other".into(),
            vpc_id: Some("vpc-a".into()),
            tags: tags(&[("karpenter.sh/discovery", "other")]),
        },
    ];
    // Two subnets of vpc-a behind a NAT gateway, and the VPC's endpoints (none needed).
    s.subnets = ["subnet-a1", "subnet-a2"]
        .iter()
        .enumerate()
        .map(|(i, id)| SubnetFacts {
            id: (*id).into(),
            vpc_id: "vpc-a".into(),
            zone: format!("us-west-2{}", ["a", "b"][i]),
            available_ips: Some(200),
            map_public_ip_on_launch: false,
            tags: tags(&[("karpenter.sh/discovery", CLUSTER)]),
            owner_id: Some(ACCOUNT.into()),
        })
        .collect();
    s.route_tables.insert(
        "vpc-a".into(),
        vec![RouteTableFacts {
            id: "rtb-a".into(),
            main: true,
            subnet_ids: Vec::new(),
            routes: vec![RouteFacts {
                destination: "0.0.0.0/0".into(),
                target: RouteTarget::NatGateway("nat-a".into()),
                state: "active".into(),
            }],
        }],
    );
    s.nat_gateways.insert(
        "vpc-a".into(),
        vec![NatGatewayFacts {
            id: "nat-a".into(),
            state: "available".into(),
            connectivity_type: None,
        }],
    );
    s.vpc_endpoints.insert("vpc-a".into(), Vec::new());
    s.instances = (0..4).map(|n| instance(n, CLUSTER)).collect();
    s.instances.push(instance(99, "other-cluster"));
    // The controller: its role with an inline and an attached policy, the OIDC provider, the
    // interruption queue with a rule, and the spot service-linked role.
    s.roles.insert(
        CONTROLLER_ROLE.into(),
        RoleData {
            name: CONTROLLER_ROLE.into(),
            arn: role_arn("/", CONTROLLER_ROLE),
            path: "/".into(),
            assume_role_policy_document: Some("{}".into()),
            permissions_boundary_arn: Some(BOUNDARY.into()),
        },
    );
    s.role_policies.insert(
        CONTROLLER_ROLE.into(),
        vec![(
            "pass".into(),
            r#"{"Statement":[{"Effect":"Allow","Action":"iam:PassRole","Resource":"*"}]}"#.into(),
        )],
    );
    s.attached_policies
        .insert(CONTROLLER_ROLE.into(), vec![LAUNCH_POLICY.into()]);
    s.managed_policies.insert(
        LAUNCH_POLICY.into(),
        r#"{"Statement":[{"Effect":"Allow","Action":"ec2:*","Resource":"*"}]}"#.into(),
    );
    s.managed_policies.insert(
        BOUNDARY.into(),
        r#"{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#.into(),
    );
    s.oidc_providers = vec![format!(
        "arn:aws:iam::{ACCOUNT}:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/X"
    )];
    let queue_arn = format!("arn:aws:sqs:us-west-2:{ACCOUNT}:{QUEUE}");
    s.queues.insert(
        QUEUE.into(),
        (
            format!("https://sqs.us-west-2.amazonaws.com/{ACCOUNT}/{QUEUE}"),
            QueueAttributes {
                arn: queue_arn.clone(),
                policy: Some("{}".into()),
                kms_master_key_id: None,
            },
        ),
    );
    s.rules.push((
        EventRuleFacts {
            name: "spot".into(),
            arn: format!("arn:aws:events:us-west-2:{ACCOUNT}:rule/spot"),
            state: "ENABLED".into(),
            event_pattern: Some(r#"{"source":["aws.ec2"]}"#.into()),
            event_bus: "default".into(),
        },
        vec![queue_arn],
    ));
    s.roles.insert(
        "AWSServiceRoleForEC2Spot".into(),
        RoleData {
            name: "AWSServiceRoleForEC2Spot".into(),
            arn: role_arn(
                "/aws-service-role/spot.amazonaws.com/",
                "AWSServiceRoleForEC2Spot",
            ),
            path: "/aws-service-role/spot.amazonaws.com/".into(),
            ..Default::default()
        },
    );
    s
}

pub const CONTROLLER_ROLE: &str = "KarpenterControllerRole-demo";
pub const QUEUE: &str = "demo-interruptions";
pub const LAUNCH_POLICY: &str = "arn:aws:iam::123456789012:policy/KarpenterLaunch";
pub const BOUNDARY: &str = "arn:aws:iam::123456789012:policy/Boundary";

/// The request with every controller read asked for: IRSA role, queue and spot role.
pub fn wiring_request() -> AwsRequest {
    AwsRequest {
        controller: Some(ControllerRequest {
            irsa_role_arn: Some(role_arn("/", CONTROLLER_ROLE)),
            service_account: Some(ServiceAccountRef {
                namespace: "kube-system".into(),
                name: "karpenter".into(),
            }),
            class: Some(ClassInputs {
                cluster: CLUSTER.into(),
                node_class: "default".into(),
                node_pool: "default".into(),
                manages_instance_profile: true,
                ..Default::default()
            }),
        }),
        interruption_queue: Some(QUEUE.into()),
        spot_service_linked_role: true,
        instance_types: true,
        subnet_selector_terms: vec![tag_term("karpenter.sh/discovery", CLUSTER)],
        ..request()
    }
}

/// No client-side limits, every due answer read afresh (no stale-while-revalidate), a one-minute
/// TTL and ten for permissions: these tests count the calls each read makes per TTL;
/// `observer_staleness.rs` tests the production settings.
pub fn options() -> ObserverOptions {
    ObserverOptions {
        rate_limits: RateLimits::UNLIMITED,
        stale: Duration::ZERO,
        ttl: Duration::from_secs(60),
        permissions_ttl: Duration::from_secs(600),
        ..Default::default()
    }
}

pub fn observer(fake: &FakeAws, options: ObserverOptions) -> AwsObserver {
    let f = Arc::new(fake.clone());
    AwsObserver::with_ports(
        f.clone(),
        f.clone(),
        f.clone(),
        f.clone(),
        f.clone(),
        f.clone(),
        f.clone(),
        f.clone(),
        f,
        Some("us-west-2".into()),
        options,
    )
}

pub fn tag_term(k: &str, v: &str) -> SelectorTerm {
    SelectorTerm {
        tags: tags(&[(k, v)]),
        ..Default::default()
    }
}

pub fn id_term(id: &str) -> SelectorTerm {
    SelectorTerm {
        id: Some(id.into()),
        ..Default::default()
    }
}

pub fn request() -> AwsRequest {
    AwsRequest {
        cluster_name: Some(CLUSTER.into()),
        instance_profile: Some("demo_profile".into()),
        role: None,
        security_group_selector_terms: vec![
            tag_term("karpenter.sh/discovery", CLUSTER),
            tag_term("team", "*"),
        ],
        pod_identity_service_accounts: Vec::new(),
        ..Default::default()
    }
}

pub fn cause<T: std::fmt::Debug>(o: &Observed<T>) -> UnknownCause {
    match o {
        Observed::Unknown(u) => u.cause,
        other => panic!("expected unknown, got {other:?}"),
    }
}

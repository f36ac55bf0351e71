//! The AWS half of the healthy fixture: the account, IAM, EKS, EC2, SQS and KMS answers of a
//! setup where every check passes, and builders for keys, subnets, routes and trust policies.
//! Pure data, no IO.

use super::*;
use crate::facts::{AmiParameters, ImageFacts, InstanceTypeCatalog, InstanceTypeFacts, VcpuQuotas};

/// An enabled customer-managed key whose policy delegates to the account (the KMS default).
pub fn kms_key(id: &str, state: &str, policy: &str) -> KmsKeyFacts {
    KmsKeyFacts {
        key_id: id.into(),
        arn: format!("arn:aws:kms:{REGION}:{ACCOUNT}:key/{id}"),
        state: state.into(),
        manager: "CUSTOMER".into(),
        policy: Observed::Found(policy.into()),
        controller_grants: Observed::Found(Vec::new()),
        // IAM allows the controller's role every EC2 use of the key.
        controller_iam: Observed::Found(
            crate::plan::volume_keys::EC2_KMS_ACTIONS
                .iter()
                .map(|action| crate::facts::SimulatedDecision {
                    action: (*action).into(),
                    resource: format!("arn:aws:kms:{REGION}:{ACCOUNT}:key/{id}"),
                    decision: "allowed".into(),
                    denied_by_boundary: false,
                    denied_by_organizations: false,
                    missing_context: Vec::new(),
                    matched: Vec::new(),
                })
                .collect(),
        ),
    }
}

/// The key policy KMS gives a key created without one: the account root may do everything.
pub fn default_key_policy() -> String {
    format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Sid":"Enable IAM User Permissions","Effect":"Allow","Principal":{{"AWS":"arn:aws:iam::{ACCOUNT}:root"}},"Action":"kms:*","Resource":"*"}}]}}"#
    )
}

/// The AWS facts of a healthy class. A fact not named here is as `AwsFacts::default()` has it
/// (an `Option` fact: not asked), so a new fact's own test file sets it where it matters.
#[allow(clippy::needless_update)]
pub(super) fn healthy_aws() -> AwsFacts {
    AwsFacts {
        region: Some(REGION.into()),
        account: Observed::Found(AccountFacts {
            account_id: ACCOUNT.into(),
            partition: "aws".into(),
        }),
        instance_profile: Some(Observed::Found(InstanceProfileFacts {
            name: GENERATED_PROFILE.into(),
            arn: format!(
                "arn:aws:iam::{ACCOUNT}:instance-profile/karpenter/{REGION}/{CLUSTER}/uid/{GENERATED_PROFILE}"
            ),
            path: format!("/karpenter/{REGION}/{CLUSTER}/uid/"),
            roles: vec![RoleRef {
                name: NODE_ROLE.into(),
                arn: role_arn(NODE_ROLE),
                path: "/".into(),
            }],
        })),
        node_role: Some(Observed::Found(RoleFacts {
            name: NODE_ROLE.into(),
            arn: role_arn(NODE_ROLE),
            path: "/".into(),
            assume_role_policy_document: Some(trust_policy_for("ec2.amazonaws.com")),
            attached_policy_arns: Observed::Found(
                [
                    "AmazonEKSWorkerNodePolicy",
                    "AmazonEKS_CNI_Policy",
                    "AmazonEC2ContainerRegistryPullOnly",
                    "AmazonSSMManagedInstanceCore",
                ]
                .iter()
                .map(|p| managed_policy_arn(p))
                .collect(),
            ),
        })),
        eks_cluster: Observed::Found(EksClusterFacts {
            name: CLUSTER.into(),
            vpc_id: Some(VPC.into()),
            authentication_mode: Some("API_AND_CONFIG_MAP".into()),
            oidc_issuer: Some(format!("https://{OIDC_ISSUER}")),
            version: Some("1.29".into()),
            subnet_ids: vec![SUBNET_A.into(), SUBNET_B.into()],
            ip_family: Some("ipv4".into()),
        }),
        node_role_access_entries: Observed::Found(Vec::new()),
        // Neither ServiceAccount has a Pod Identity association (IRSA or the node role instead).
        pod_identity_roles: BTreeMap::from([
            ("kube-system/aws-node".to_owned(), Observed::Found(None)),
            (KARPENTER_SERVICE_ACCOUNT.to_owned(), Observed::Found(None)),
        ]),
        pod_identity_via: BTreeMap::new(),
        security_groups: Observed::Found(vec![SecurityGroupFacts {
            name: "demo-nodes".into(),
            ..security_group(
                SECURITY_GROUP,
                &[
                    ("karpenter.sh/discovery", CLUSTER),
                    ("kubernetes.io/cluster/demo", "owned"),
                ],
            )
        }]),
        cluster_instances: Observed::Found(vec![instance(HEALTHY_INSTANCE, CLUSTER, VPC, 120)]),
        controller_role: Some(Observed::Found(ControllerRoleFacts {
            name: CONTROLLER_ROLE.into(),
            arn: role_arn(CONTROLLER_ROLE),
            assume_role_policy_document: Some(irsa_trust_policy(KARPENTER_SERVICE_ACCOUNT)),
            permissions_boundary_arn: None,
        })),
        oidc_providers: Observed::Found(vec![oidc_provider_arn()]),
        controller_permissions: Some(PermissionFacts {
            simulated: Observed::Found(simulated_all("allowed")),
            policies: None,
        }),
        interruption_queue: None,
        spot_service_linked_role: None,
        // The class has no block devices, so its root volume uses the account's default key,
        // the AWS-managed one.
        ebs_encryption: Some(Observed::Found(EbsEncryptionFacts {
            by_default: false,
            default_kms_key_id: Observed::Found(format!(
                "arn:aws:kms:{REGION}:{ACCOUNT}:alias/aws/ebs"
            )),
        })),
        kms_keys: BTreeMap::new(),
        cluster_vpc: Observed::Found(VPC.into()),
        subnets: Observed::Found(vec![
            subnet(SUBNET_A, "us-west-2a", 4000),
            subnet(SUBNET_B, "us-west-2b", 4000),
        ]),
        vpc_networks: BTreeMap::from([(VPC.to_owned(), Observed::Found(vpc_network()))]),
        instance_types: Some(Observed::Found(instance_catalog(
            &[
                ("m5.large", 2, 8192, "x86_64"),
                ("m5.xlarge", 4, 16384, "x86_64"),
                ("c6g.large", 2, 4096, "arm64"),
                ("r7i.2xlarge", 8, 65536, "x86_64"),
            ],
            &["us-west-2a", "us-west-2b", "us-west-2c"],
        ))),
        // A new account's quotas are lower; these leave room for the one m5.large running.
        vcpu_quotas: Some(VcpuQuotas {
            on_demand: Observed::Found(64.0),
            spot: Observed::Found(64.0),
        }),
        ami_parameters: Some(Observed::Found(ami_parameters(
            HEALTHY_ALIAS,
            "1.29",
            |_| Observed::Found("ami-0healthy".into()),
        ))),
        open_capacity_reservations: Some(Observed::Found(Vec::new())),
        // The images Karpenter resolved for the healthy class (`healthy_cluster`), available.
        images: Some(Observed::Found(
            ["amd64", "arm64"]
                .iter()
                .map(|arch| image(&format!("ami-0{arch}"), "available", None))
                .collect(),
        )),
        ..AwsFacts::default()
    }
}

/// An image as DescribeImages answers it.
pub fn image(id: &str, state: &str, deprecation_time: Option<Timestamp>) -> ImageFacts {
    ImageFacts {
        id: id.into(),
        name: Some(format!("image-{id}")),
        state: state.into(),
        deprecation_time,
    }
}

/// What the adapter asks when the class's images change: every image of
/// [`crate::plan::images::image_ids`], as answered before, or available when it was not asked.
pub fn reask_images(f: &mut Facts) {
    let before = match &f.aws.images {
        Some(Observed::Found(images)) => images.clone(),
        _ => Vec::new(),
    };
    let ids = crate::plan::images::image_ids(&f.cluster.node_class);
    f.aws.images = (!ids.is_empty()).then(|| {
        Observed::Found(
            ids.iter()
                .map(|id| {
                    before
                        .iter()
                        .find(|i| &i.id == id)
                        .cloned()
                        .unwrap_or_else(|| image(id, "available", None))
                })
                .collect(),
        )
    });
}

/// The healthy class's AMI alias.
pub const HEALTHY_ALIAS: &str = "al2023@latest";

/// SSM's answers for every parameter `alias` needs at Kubernetes `minor`, each from `answer`.
pub fn ami_parameters(
    alias: &str,
    minor: &str,
    answer: impl Fn(&str) -> Observed<String>,
) -> AmiParameters {
    // An alias the CRD would reject has no parameters.
    let names = crate::plan::ami_alias::Alias::parse(alias)
        .map(|a| a.parameters_to_read(minor))
        .unwrap_or_default();
    AmiParameters {
        kubernetes_minor: minor.into(),
        values: names
            .into_iter()
            .map(|name| {
                let value = answer(&name);
                (name, value)
            })
            .collect(),
    }
}

/// `(ENIs, IPv4 addresses per ENI)` of the types the fixtures use, as EC2 documents them
/// ("Maximum IP addresses per network interface"); `None` for a made-up type.
pub fn network_of(name: &str) -> Option<(u32, u32)> {
    match name {
        "t3.micro" => Some((2, 2)),
        "m5.large" | "c6g.large" | "c5.large" => Some((3, 10)),
        "m5.xlarge" | "r7i.2xlarge" | "c5.xlarge" => Some((4, 15)),
        "m5.4xlarge" => Some((8, 30)),
        _ => None,
    }
}

/// A catalog of `(name, vCPUs, MiB, EC2 architecture)` types, each offered on demand and as spot
/// in every one of `zones`.
pub fn instance_catalog(types: &[(&str, u32, u64, &str)], zones: &[&str]) -> InstanceTypeCatalog {
    let mut facts: Vec<InstanceTypeFacts> = types
        .iter()
        .map(|(name, vcpus, mib, arch)| InstanceTypeFacts {
            name: (*name).into(),
            vcpus: Some(*vcpus),
            memory_mib: Some(*mib),
            architectures: vec![(*arch).into()],
            usage_classes: vec!["on-demand".into(), "spot".into()],
            network_interfaces: network_of(name).map(|(enis, _)| enis),
            ipv4_per_interface: network_of(name).map(|(_, ips)| ips),
        })
        .collect();
    facts.sort_by(|a, b| a.name.cmp(&b.name));
    InstanceTypeCatalog {
        types: Arc::new(facts),
        zones: Arc::new(
            types
                .iter()
                .map(|(name, ..)| {
                    (
                        (*name).to_owned(),
                        zones.iter().map(|z| (*z).to_owned()).collect(),
                    )
                })
                .collect(),
        ),
        judged: Default::default(),
    }
}

/// A private subnet of the healthy VPC tagged for the selector, with `free` addresses.
pub fn subnet(id: &str, zone: &str, free: u32) -> SubnetFacts {
    SubnetFacts {
        id: id.into(),
        vpc_id: VPC.into(),
        zone: zone.into(),
        available_ips: Some(free),
        map_public_ip_on_launch: false,
        tags: BTreeMap::from([("karpenter.sh/discovery".into(), CLUSTER.into())]),
        owner_id: Some(ACCOUNT.into()),
    }
}

/// A default route to `target`.
pub fn default_route(target: RouteTarget) -> RouteFacts {
    RouteFacts {
        destination: "0.0.0.0/0".into(),
        target,
        state: "active".into(),
    }
}

/// The healthy VPC: the subnets' route table sends the default route to an available NAT
/// gateway, DNS is on, and there are no endpoints.
pub fn vpc_network() -> VpcNetworkFacts {
    VpcNetworkFacts {
        vpc_id: VPC.into(),
        route_tables: Observed::Found(vec![
            RouteTableFacts {
                id: "rtb-0main".into(),
                main: true,
                subnet_ids: Vec::new(),
                routes: vec![RouteFacts {
                    destination: "10.0.0.0/16".into(),
                    target: RouteTarget::Local,
                    state: "active".into(),
                }],
            },
            RouteTableFacts {
                id: ROUTE_TABLE.into(),
                main: false,
                subnet_ids: vec![SUBNET_A.into(), SUBNET_B.into()],
                routes: vec![
                    RouteFacts {
                        destination: "10.0.0.0/16".into(),
                        target: RouteTarget::Local,
                        state: "active".into(),
                    },
                    default_route(RouteTarget::NatGateway(NAT_GATEWAY.into())),
                ],
            },
        ]),
        nat_gateways: Observed::Found(vec![NatGatewayFacts {
            id: NAT_GATEWAY.into(),
            state: "available".into(),
            connectivity_type: Some("public".into()),
        }]),
        endpoints: Observed::Found(Vec::new()),
        dns_support: Observed::Found(true),
        dns_hostnames: Observed::Found(true),
    }
}

/// Every endpoint a private subnet behind `route_table` needs, available with private DNS.
pub fn private_cluster_endpoints(route_table: &str) -> Vec<VpcEndpointFacts> {
    let mut endpoints: Vec<VpcEndpointFacts> = crate::rules::node_network::INTERFACE_ENDPOINTS
        .iter()
        .map(|service| VpcEndpointFacts {
            id: format!("vpce-{}", service.replace('.', "")),
            service_name: format!("com.amazonaws.{REGION}.{service}"),
            type_: "Interface".into(),
            state: "available".into(),
            private_dns_enabled: true,
            route_table_ids: Vec::new(),
        })
        .collect();
    endpoints.push(VpcEndpointFacts {
        id: "vpce-s3".into(),
        service_name: format!("com.amazonaws.{REGION}.s3"),
        type_: "Gateway".into(),
        state: "available".into(),
        private_dns_enabled: false,
        route_table_ids: vec![route_table.into()],
    });
    endpoints
}

pub fn oidc_provider_arn() -> String {
    format!("arn:aws:iam::{ACCOUNT}:oidc-provider/{OIDC_ISSUER}")
}

/// A percent-encoded IRSA trust policy admitting `service_account` (`namespace/name`) through
/// the cluster's OIDC provider.
pub fn irsa_trust_policy(service_account: &str) -> String {
    let sub = format!(
        "system:serviceaccount:{}",
        service_account.replace('/', ":")
    );
    let json = format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":{{"Federated":"{}"}},"Action":"sts:AssumeRoleWithWebIdentity","Condition":{{"StringEquals":{{"{OIDC_ISSUER}:sub":"{sub}","{OIDC_ISSUER}:aud":"sts.amazonaws.com"}}}}}}]}}"#,
        oidc_provider_arn()
    );
    percent_encoding::utf8_percent_encode(&json, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// A trust policy letting EKS Pod Identity assume the role.
pub fn pod_identity_trust_policy() -> String {
    r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"pods.eks.amazonaws.com"},"Action":["sts:AssumeRole","sts:TagSession"]}]}"#.to_owned()
}

/// The permission questions of the healthy facts.
pub fn permission_inputs(facts: &Facts) -> crate::karpenter_permissions::Inputs {
    let class =
        crate::karpenter_permissions::ClassInputs::of(&facts.cluster).expect("class inputs");
    class.complete(
        "aws",
        ACCOUNT,
        REGION,
        &role_arn(NODE_ROLE),
        facts.aws.kubernetes_minor(),
    )
}

/// What the adapter does when the facts' questions change: IAM's simulator is asked exactly the
/// questions of `f`, each answered as its action was before (`allowed` for a new action).
pub fn reask_simulator(f: &mut Facts) {
    let node_role = match &f.aws.node_role {
        Some(Observed::Found(r)) => r.arn.clone(),
        _ => return,
    };
    let (Some(class), Some(region)) = (
        crate::karpenter_permissions::ClassInputs::of(&f.cluster),
        f.aws.region.clone(),
    ) else {
        return;
    };
    let inputs = class.complete(
        "aws",
        ACCOUNT,
        &region,
        &node_role,
        f.aws.kubernetes_minor(),
    );
    if let Some(crate::facts::PermissionFacts {
        simulated: Observed::Found(list),
        ..
    }) = f.aws.controller_permissions.as_mut()
    {
        let old = std::mem::take(list);
        for q in inputs.questions() {
            let template = old.iter().find(|d| d.action == q.action).cloned();
            list.push(SimulatedDecision {
                action: q.action.into(),
                resource: q.resource,
                ..template.unwrap_or(SimulatedDecision {
                    action: String::new(),
                    resource: String::new(),
                    decision: "allowed".into(),
                    denied_by_boundary: false,
                    denied_by_organizations: false,
                    missing_context: Vec::new(),
                    matched: Vec::new(),
                })
            });
        }
    }
}

/// IAM's simulator answering `decision` to every question of the healthy facts.
pub fn simulated_all(decision: &str) -> Vec<SimulatedDecision> {
    permission_inputs(&Facts {
        cluster: healthy_cluster(),
        aws: AwsFacts::default(),
    })
    .questions()
    .into_iter()
    .map(|q| SimulatedDecision {
        action: q.action.into(),
        resource: q.resource,
        decision: decision.into(),
        denied_by_boundary: false,
        denied_by_organizations: false,
        missing_context: Vec::new(),
        matched: Vec::new(),
    })
    .collect()
}

/// A healthy interruption queue named [`QUEUE`] with Karpenter's policy and rules.
pub fn healthy_queue() -> QueueFacts {
    let arn = format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{QUEUE}");
    let policy = format!(
        r#"{{"Id":"EC2InterruptionPolicy","Statement":[{{"Effect":"Allow","Principal":{{"Service":["events.amazonaws.com","sqs.amazonaws.com"]}},"Action":"sqs:SendMessage","Resource":"{arn}"}},{{"Sid":"DenyHTTP","Effect":"Deny","Action":"sqs:*","Resource":"{arn}","Condition":{{"Bool":{{"aws:SecureTransport":false}}}},"Principal":"*"}}]}}"#
    );
    let rule = |name: &str, source: &str, detail: &str| EventRuleFacts {
        name: name.into(),
        arn: format!("arn:aws:events:{REGION}:{ACCOUNT}:rule/{name}"),
        state: "ENABLED".into(),
        event_pattern: Some(format!(
            r#"{{"source":["{source}"],"detail-type":["{detail}"]}}"#
        )),
        event_bus: "default".into(),
    };
    QueueFacts {
        name: QUEUE.into(),
        url: format!("https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{QUEUE}"),
        arn,
        policy: Some(policy),
        kms_master_key_id: None,
        kms_key: None,
        bus_forwarders: BTreeMap::new(),
        rules: Observed::Found(vec![
            rule("spot", "aws.ec2", "EC2 Spot Instance Interruption Warning"),
            rule(
                "rebalance",
                "aws.ec2",
                "EC2 Instance Rebalance Recommendation",
            ),
            rule("state", "aws.ec2", "EC2 Instance State-change Notification"),
            rule("health", "aws.health", "AWS Health Event"),
            rule(
                "odcr",
                "aws.ec2",
                "EC2 Capacity Reservation Instance Interruption Warning",
            ),
        ]),
    }
}

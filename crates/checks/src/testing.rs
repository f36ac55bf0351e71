//! Fixture builders: a healthy set of facts and small helpers to break it one fact at a time.
//! For tests here and, through the cargo feature `testing`, in the operator, CLI and e2e crates.
//! Pure data, no IO; time is the fixed [`now`].

use crate::facts::{
    AccessEntryFacts, AccountFacts, AwsAuthData, AwsFacts, ClusterFacts, ControllerRoleFacts,
    CrdFacts, EbsEncryptionFacts, EksClusterFacts, EventRuleFacts, Facts, InstanceFacts,
    InstanceProfileFacts, KarpenterFacts, KmsKeyFacts, NodeClaimFacts, Observed, PermissionFacts,
    PodScheduling, QueueFacts, RoleFacts, RoleRef, SecurityGroupFacts, Setting, SimulatedDecision,
    UnknownCause,
};
use crate::facts::{
    NatGatewayFacts, RouteFacts, RouteTableFacts, RouteTarget, SubnetFacts, VpcCniSettings,
    VpcEndpointFacts, VpcNetworkFacts,
};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_health_api::karpenter::{
    EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus, KarpenterCondition, MetadataOptions,
    NodeClaim, NodeClaimSpec, NodeClaimStatus, NodeClaimTemplate, NodeClaimTemplateSpec,
    NodeClassRef, NodePool, NodePoolSpec, Requirement, ResolvedSecurityGroup, SelectorTerm,
    TemplateMetadata,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub const CLUSTER: &str = "demo";
pub const ACCOUNT: &str = "111122223333";
pub const REGION: &str = "us-west-2";
pub const VPC: &str = "vpc-0demo";
pub const NODE_CLASS: &str = "default";
pub const NODE_POOL: &str = "default";
/// The Karpenter controller's ServiceAccount, as a Pod Identity key.
pub const KARPENTER_SERVICE_ACCOUNT: &str = "kube-system/karpenter";
pub const NODE_ROLE: &str = "KarpenterNodeRole-demo";
pub const CONTROLLER_ROLE: &str = "KarpenterControllerRole-demo";
/// The profile Karpenter generated for `spec.role` (`<cluster>_<hash>`).
pub const GENERATED_PROFILE: &str = "demo_4213869151371224917";
pub const SECURITY_GROUP: &str = "sg-0nodes";
pub const HEALTHY_INSTANCE: &str = "i-0healthy";
/// The cluster's OIDC issuer (host and path).
pub const OIDC_ISSUER: &str = "oidc.eks.us-west-2.amazonaws.com/id/DEMO0123456789";
pub const QUEUE: &str = "demo-interruptions";
pub const KMS_KEY: &str = "1234abcd-12ab-34cd-56ef-1234567890ab";
/// A key policy that lets only Lambda use the key: nothing for EC2, no delegation to the account.
pub const LAMBDA_ONLY_KEY_POLICY: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":["kms:Decrypt","kms:GenerateDataKey*","kms:CreateGrant","kms:DescribeKey"],"Resource":"*","Condition":{"StringEquals":{"kms:ViaService":"lambda.us-west-2.amazonaws.com","kms:CallerAccount":"111122223333"}}}]}"#;
pub const NODE_USERNAME: &str = "system:node:{{EC2PrivateDNSName}}";
/// The healthy subnets, one per zone, and the private route table they use (to a NAT gateway).
pub const SUBNET_A: &str = "subnet-0a";
pub const SUBNET_B: &str = "subnet-0b";
pub const ROUTE_TABLE: &str = "rtb-0private";
pub const NAT_GATEWAY: &str = "nat-0demo";
pub const INTERNET_GATEWAY: &str = "igw-0demo";

/// The fixed evaluation time of every fixture: 2026-08-21T12:00:00Z.
pub fn now() -> Timestamp {
    Timestamp::constant(1_787_313_600, 0)
}

/// `minutes` before [`now`].
pub fn mins_ago(minutes: i64) -> Timestamp {
    now() - SignedDuration::from_mins(minutes)
}

pub fn role_arn(name: &str) -> String {
    format!("arn:aws:iam::{ACCOUNT}:role/{name}")
}

pub fn managed_policy_arn(name: &str) -> String {
    format!("arn:aws:iam::aws:policy/{name}")
}

/// A percent-encoded trust policy, as IAM returns it, letting `service` assume the role.
pub fn trust_policy_for(service: &str) -> String {
    let json = format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":{{"Service":"{service}"}},"Action":"sts:AssumeRole"}}]}}"#
    );
    percent_encoding::utf8_percent_encode(&json, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// A `mapRoles` entry admitting `rolearn` as a node.
pub fn node_mapping(rolearn: &str) -> String {
    format!(
        "- rolearn: {rolearn}\n  username: {NODE_USERNAME}\n  groups:\n    - system:bootstrappers\n    - system:nodes\n"
    )
}

pub fn unknown<T>(cause: UnknownCause) -> Observed<T> {
    Observed::unknown(cause, format!("fixture: {cause:?}"))
}

pub fn karpenter_condition(type_: &str, status: &str, since: Timestamp) -> KarpenterCondition {
    KarpenterCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(type_.into()),
        message: None,
        last_transition_time: Some(Time(since)),
        observed_generation: Some(1),
    }
}

fn node_class_ref() -> NodeClassRef {
    NodeClassRef {
        group: Some("karpenter.k8s.aws".into()),
        api_version: None,
        kind: Some("EC2NodeClass".into()),
        name: NODE_CLASS.into(),
    }
}

pub fn requirement(key: &str, operator: &str, values: &[&str]) -> Requirement {
    Requirement {
        key: key.into(),
        operator: operator.into(),
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}

/// A healthy EC2NodeClass using `spec.role`, reconciled by Karpenter at generation 1.
pub fn node_class() -> EC2NodeClass {
    let spec = EC2NodeClassSpec {
        role: Some(NODE_ROLE.into()),
        instance_profile: None,
        security_group_selector_terms: vec![SelectorTerm {
            tags: BTreeMap::from([("karpenter.sh/discovery".into(), CLUSTER.into())]),
            ..SelectorTerm::default()
        }],
        subnet_selector_terms: vec![SelectorTerm {
            tags: BTreeMap::from([("karpenter.sh/discovery".into(), CLUSTER.into())]),
            ..SelectorTerm::default()
        }],
        ami_family: None,
        metadata_options: Some(MetadataOptions {
            http_endpoint: Some("enabled".into()),
            http_protocol_ipv6: Some("disabled".into()),
            http_tokens: Some("required".into()),
            http_put_response_hop_limit: Some(1),
        }),
        tags: BTreeMap::new(),
        associate_public_ip_address: None,
        user_data: None,
        block_device_mappings: Vec::new(),
        capacity_reservation_selector_terms: Vec::new(),
    };
    let mut nc = EC2NodeClass::new(NODE_CLASS, spec);
    nc.metadata.generation = Some(1);
    nc.metadata.creation_timestamp = Some(Time(mins_ago(24 * 60)));
    let conditions = karpenter_health_api::karpenter::NODE_CLASS_CONDITIONS
        .iter()
        .map(|t| karpenter_condition(t, "True", mins_ago(23 * 60)))
        .collect();
    nc.status = Some(EC2NodeClassStatus {
        instance_profile: Some(GENERATED_PROFILE.into()),
        security_groups: vec![ResolvedSecurityGroup {
            id: SECURITY_GROUP.into(),
            name: Some("demo-nodes".into()),
        }],
        subnets: Vec::new(),
        conditions,
    });
    nc
}

pub fn node_pool(name: &str) -> NodePool {
    NodePool::new(
        name,
        NodePoolSpec {
            template: NodeClaimTemplate {
                metadata: TemplateMetadata {
                    labels: BTreeMap::from([("team".into(), "platform".into())]),
                },
                spec: NodeClaimTemplateSpec {
                    node_class_ref: Some(node_class_ref()),
                    requirements: vec![
                        requirement("karpenter.sh/capacity-type", "In", &["on-demand"]),
                        requirement("kubernetes.io/arch", "In", &["amd64"]),
                    ],
                },
            },
        },
    )
}

/// A NodeClaim of [`NODE_CLASS`] launched `launched_mins_ago`, registered or not.
pub fn node_claim(
    name: &str,
    instance: &str,
    launched_mins_ago: i64,
    registered: bool,
) -> NodeClaimFacts {
    NodeClaimFacts::of(&node_claim_object(
        name,
        instance,
        launched_mins_ago,
        registered,
    ))
}

/// The NodeClaim object behind [`node_claim`].
pub fn node_claim_object(
    name: &str,
    instance: &str,
    launched_mins_ago: i64,
    registered: bool,
) -> NodeClaim {
    let mut claim = NodeClaim::new(
        name,
        NodeClaimSpec {
            node_class_ref: Some(node_class_ref()),
        },
    );
    claim.metadata.creation_timestamp = Some(Time(mins_ago(launched_mins_ago + 1)));
    let registered = if registered {
        karpenter_condition("Registered", "True", mins_ago(launched_mins_ago - 1))
    } else {
        KarpenterCondition {
            reason: Some("NodeNotFound".into()),
            message: Some("Node not registered with cluster".into()),
            ..karpenter_condition("Registered", "Unknown", mins_ago(launched_mins_ago + 1))
        }
    };
    claim.status = Some(NodeClaimStatus {
        provider_id: Some(format!("aws:///{REGION}a/{instance}")),
        node_name: None,
        conditions: vec![
            karpenter_condition("Launched", "True", mins_ago(launched_mins_ago)),
            registered,
        ],
    });
    claim
}

pub fn pending_pod(namespace: &str, name: &str, selector: &[(&str, &str)]) -> PodScheduling {
    PodScheduling {
        namespace: namespace.into(),
        name: name.into(),
        node_selector: selector
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        required_affinity: Vec::new(),
        preferred_affinity: Vec::new(),
        only_this_class: true,
    }
}

pub fn security_group(id: &str, tags: &[(&str, &str)]) -> SecurityGroupFacts {
    SecurityGroupFacts {
        id: id.into(),
        name: format!("{id}-name"),
        vpc_id: Some(VPC.into()),
        tags: tags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

/// An instance tagged the way Karpenter tags its launches for `cluster`.
pub fn instance(id: &str, cluster: &str, vpc: &str, launched_mins_ago: i64) -> InstanceFacts {
    InstanceFacts {
        id: id.into(),
        vpc_id: Some(vpc.into()),
        state: "running".into(),
        launch_time: Some(mins_ago(launched_mins_ago)),
        tags: BTreeMap::from([
            (format!("kubernetes.io/cluster/{cluster}"), "owned".into()),
            ("eks:eks-cluster-name".into(), cluster.into()),
            ("karpenter.sh/nodepool".into(), NODE_POOL.into()),
            ("karpenter.k8s.aws/ec2nodeclass".into(), NODE_CLASS.into()),
        ]),
    }
}

fn healthy_cluster() -> ClusterFacts {
    ClusterFacts {
        node_class: node_class(),
        node_pools: Observed::Found(vec![node_pool(NODE_POOL)]),
        node_claims: Observed::Found(vec![node_claim(
            "default-abcde",
            HEALTHY_INSTANCE,
            120,
            true,
        )]),
        claimed_instance_ids: Observed::Found(Arc::new(BTreeSet::from([
            HEALTHY_INSTANCE.to_owned()
        ]))),
        pending_pods: Observed::Found(vec![Arc::new(PodScheduling {
            required_affinity: vec![vec![requirement(
                "topology.kubernetes.io/zone",
                "In",
                &["us-west-2a"],
            )]],
            ..pending_pod("shop", "web-0", &[("kubernetes.io/arch", "amd64")])
        })]),
        aws_auth: Observed::Found(AwsAuthData {
            map_roles: Some(node_mapping(&role_arn(NODE_ROLE))),
            map_users: None,
        }),
        karpenter: Observed::Found(KarpenterFacts {
            version: Some("1.8.6".into()),
            cluster_name: Some(CLUSTER.into()),
            controller_role_arn: Some(role_arn(CONTROLLER_ROLE)),
            isolated_vpc: false,
            service_account: Some(KARPENTER_SERVICE_ACCOUNT.into()),
            service_account_state: Observed::Found(()),
            interruption_queue: Setting::Unset,
            dry_run_disabled: false,
            irsa_audience: None,
        }),
        // Served without validation rules (an API server before 1.25): the version decides.
        crd_label_rules: Observed::Found(None),
        aws_node_role_arn: Observed::Found(None),
        configured_cluster_name: None,
        node_class_generation_seen_at: None,
        apiserver_version: Observed::Found("v1.29.15-eks-1234".into()),
        karpenter_crds: Observed::Found(current_crds()),
        karpenter_webhooks: Observed::Found(Vec::new()),
        service_endpoints: BTreeMap::new(),
        vpc_cni: Observed::Found(VpcCniSettings {
            env: BTreeMap::from([("WARM_ENI_TARGET".to_owned(), "1".to_owned())]),
        }),
    }
}

/// Karpenter's three CRDs as a current release installs them: v1 stored, every field of the
/// version table present, no conversion webhook.
pub fn current_crds() -> Vec<CrdFacts> {
    [
        "nodepools.karpenter.sh",
        "nodeclaims.karpenter.sh",
        "ec2nodeclasses.karpenter.k8s.aws",
    ]
    .iter()
    .map(|name| CrdFacts {
        name: (*name).into(),
        stored_versions: vec!["v1".into()],
        served_versions: vec!["v1".into()],
        fields: crate::karpenter_versions::CRD_FIELDS
            .iter()
            .filter(|f| f.crd == *name)
            .map(|f| f.path.to_owned())
            .collect(),
        conversion_service: None,
    })
    .collect()
}

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
            crate::rules::volume_encryption::EC2_KMS_ACTIONS
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

fn healthy_aws() -> AwsFacts {
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
    class.complete("aws", ACCOUNT, REGION, &role_arn(NODE_ROLE))
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

impl Facts {
    /// A Karpenter 1.8.6 setup in us-west-2 where every check passes.
    pub fn healthy() -> Self {
        Facts {
            cluster: healthy_cluster(),
            aws: healthy_aws(),
        }
    }

    /// Applies any change; the escape hatch for facts without a dedicated builder.
    pub fn with(mut self, change: impl FnOnce(&mut Facts)) -> Self {
        change(&mut self);
        self
    }

    /// Uses `spec.instanceProfile` (Karpenter then copies it into status unchanged); when IAM
    /// has a profile of that name, pass it in `found`.
    pub fn with_instance_profile_spec(self, profile: &str, found: bool) -> Self {
        self.with(|f| {
            let spec = &mut f.cluster.node_class.spec;
            spec.role = None;
            spec.instance_profile = Some(profile.into());
            if let Some(status) = f.cluster.node_class.status.as_mut() {
                status.instance_profile = Some(profile.into());
            }
            f.aws.instance_profile = if profile.starts_with("arn:") {
                None
            } else if found {
                Some(Observed::Found(InstanceProfileFacts {
                    name: profile.into(),
                    arn: format!("arn:aws:iam::{ACCOUNT}:instance-profile/{profile}"),
                    path: "/".into(),
                    roles: vec![RoleRef {
                        name: NODE_ROLE.into(),
                        arn: role_arn(NODE_ROLE),
                        path: "/".into(),
                    }],
                }))
            } else {
                Some(Observed::Absent)
            };
        })
    }

    pub fn with_region(self, region: &str) -> Self {
        self.with(|f| f.aws.region = Some(region.into()))
    }

    pub fn with_karpenter_version(self, version: &str) -> Self {
        self.with(|f| {
            if let Observed::Found(k) = &mut f.cluster.karpenter {
                k.version = Some(version.into());
            }
        })
    }

    pub fn with_map_roles(self, map_roles: &str) -> Self {
        self.with(|f| {
            f.cluster.aws_auth = Observed::Found(AwsAuthData {
                map_roles: Some(map_roles.into()),
                map_users: None,
            })
        })
    }

    pub fn with_authentication_mode(self, mode: Option<&str>) -> Self {
        self.with(|f| {
            if let Observed::Found(eks) = &mut f.aws.eks_cluster {
                eks.authentication_mode = mode.map(Into::into);
            }
        })
    }

    pub fn with_access_entry(self, type_: &str) -> Self {
        self.with(|f| {
            f.aws.node_role_access_entries = Observed::Found(vec![AccessEntryFacts {
                principal_arn: role_arn(NODE_ROLE),
                type_: type_.into(),
                username: None,
            }])
        })
    }

    pub fn with_pending_pod(self, pod: PodScheduling) -> Self {
        self.with(|f| {
            if let Some(pods) = f.cluster.pending_pods.found_mut() {
                pods.push(Arc::new(pod));
            }
        })
    }

    pub fn with_node_claim(self, claim: NodeClaimFacts) -> Self {
        self.with(|f| {
            if let Some(claims) = f.cluster.node_claims.found_mut() {
                claims.push(claim);
            }
        })
    }

    /// Sets one of Karpenter's own EC2NodeClass conditions.
    pub fn with_karpenter_condition(self, condition: KarpenterCondition) -> Self {
        self.with(|f| {
            if let Some(status) = f.cluster.node_class.status.as_mut() {
                status.conditions.retain(|c| c.type_ != condition.type_);
                status.conditions.push(condition);
            }
        })
    }

    /// Configures the interruption queue `setting` and what AWS says about it.
    pub fn with_interruption_queue(
        self,
        setting: &str,
        queue: Option<Observed<QueueFacts>>,
    ) -> Self {
        self.with(|f| {
            if let Observed::Found(k) = &mut f.cluster.karpenter {
                k.interruption_queue = Setting::Value(setting.into());
            }
            f.aws.interruption_queue = queue;
        })
    }

    /// Lets the NodePool of the fixture allow spot, with the spot service-linked role `role`.
    pub fn with_spot(self, role: Option<Observed<String>>) -> Self {
        self.with(|f| {
            if let Some(pools) = f.cluster.node_pools.found_mut() {
                for pool in pools {
                    for r in &mut pool.spec.template.spec.requirements {
                        if r.key == "karpenter.sh/capacity-type" {
                            r.values = vec!["spot".into(), "on-demand".into()];
                        }
                    }
                }
            }
            f.aws.spot_service_linked_role = role;
        })
    }

    /// Answers `decision` for `action` from IAM's simulator, `allowed` for the rest.
    pub fn with_simulated(self, action: &str, change: impl Fn(&mut SimulatedDecision)) -> Self {
        self.with(|f| {
            if let Some(PermissionFacts {
                simulated: Observed::Found(list),
                ..
            }) = &mut f.aws.controller_permissions
            {
                for d in list.iter_mut().filter(|d| d.action == action) {
                    change(d);
                }
            }
        })
    }

    /// Adds an instance of the cluster-name collision kind.
    pub fn with_cluster_instance(self, instance: InstanceFacts) -> Self {
        self.with(|f| {
            if let Observed::Found(list) = &mut f.aws.cluster_instances {
                list.push(instance);
            }
        })
    }
}

impl Facts {
    /// The class's one volume names `key`, which KMS answered as `found`.
    pub fn with_volume_key(self, key: &str, found: Observed<KmsKeyFacts>) -> Self {
        self.with(|f| {
            f.cluster.node_class.spec.block_device_mappings =
                vec![karpenter_health_api::karpenter::BlockDeviceMapping {
                    device_name: Some("/dev/xvda".into()),
                    ebs: Some(karpenter_health_api::karpenter::BlockDevice {
                        encrypted: Some(true),
                        kms_key_id: Some(key.into()),
                    }),
                }];
            f.aws.kms_keys.insert(key.into(), found);
        })
    }

    /// Changes the CRD named `name` (one of [`current_crds`]).
    pub fn with_crd(self, name: &str, change: impl FnOnce(&mut CrdFacts)) -> Self {
        self.with(|f| {
            if let Observed::Found(crds) = &mut f.cluster.karpenter_crds
                && let Some(crd) = crds.iter_mut().find(|c| c.name == name)
            {
                change(crd);
            }
        })
    }
}

/// One way to break (or vary) where nodes land: one per `SubnetsReady`/`NodeNetworkReady` reason,
/// plus unknowns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetworkChange {
    /// The selector terms match no subnet.
    NoSubnets,
    /// Subnet B is in another VPC.
    OtherVpc,
    /// Both zones' subnets have fewer free addresses than a node takes.
    AllZonesFull,
    /// Only zone b's subnet is full (a warning).
    OneZoneFull,
    /// The default route goes to a transit gateway.
    TransitGateway,
    /// The private route table loses its default route; no endpoints.
    NoEgress,
    /// No default route, but every endpoint a private cluster needs.
    PrivateWithEndpoints,
    /// The NAT gateway failed.
    NatFailed,
    /// The default route goes to an internet gateway, and the subnets map no public IPs.
    IgwWithoutPublicIp,
    /// No default route and every endpoint but `ssm`.
    SomeEndpoints,
    /// DNS host names off.
    DnsHostnamesOff,
    /// The route tables could not be read.
    RouteTablesDenied,
    /// The subnets could not be read.
    SubnetsDenied,
}

impl NetworkChange {
    pub const ALL: [NetworkChange; 13] = [
        Self::NoSubnets,
        Self::OtherVpc,
        Self::AllZonesFull,
        Self::OneZoneFull,
        Self::TransitGateway,
        Self::NoEgress,
        Self::PrivateWithEndpoints,
        Self::NatFailed,
        Self::IgwWithoutPublicIp,
        Self::SomeEndpoints,
        Self::DnsHostnamesOff,
        Self::RouteTablesDenied,
        Self::SubnetsDenied,
    ];
}

/// The healthy VPC's network, to edit in place.
pub fn network_mut(f: &mut Facts) -> &mut VpcNetworkFacts {
    f.aws
        .vpc_networks
        .get_mut(VPC)
        .and_then(Observed::found_mut)
        .expect("the healthy facts read the VPC's network")
}

/// The private route table's routes, to edit in place.
pub fn private_routes(f: &mut Facts) -> &mut Vec<RouteFacts> {
    let tables = network_mut(f)
        .route_tables
        .found_mut()
        .expect("route tables");
    &mut tables
        .iter_mut()
        .find(|t| t.id == ROUTE_TABLE)
        .expect("the private route table")
        .routes
}

impl Facts {
    /// Applies one [`NetworkChange`]; a no-op where the facts it edits are not found (a
    /// generator may have degraded them first).
    pub fn with_network(mut self, change: NetworkChange) -> Self {
        fn network(f: &mut Facts) -> Option<&mut VpcNetworkFacts> {
            f.aws
                .vpc_networks
                .get_mut(VPC)
                .and_then(Observed::found_mut)
        }
        fn routes(f: &mut Facts) -> Option<&mut Vec<RouteFacts>> {
            let tables = network(f)?.route_tables.found_mut()?;
            Some(&mut tables.iter_mut().find(|t| t.id == ROUTE_TABLE)?.routes)
        }
        let is_default = |r: &RouteFacts| r.destination == "0.0.0.0/0";
        let replace_default = |f: &mut Facts, target: Option<RouteTarget>| {
            if let Some(routes) = routes(f) {
                routes.retain(|r| !is_default(r));
                routes.extend(target.map(default_route));
            }
        };
        match change {
            NetworkChange::NoSubnets => self.aws.subnets = Observed::Found(Vec::new()),
            NetworkChange::OtherVpc => {
                if let Some(s) = self.aws.subnets.found_mut().and_then(|s| s.get_mut(1)) {
                    s.vpc_id = "vpc-0other".into();
                }
                self.aws.vpc_networks.insert(
                    "vpc-0other".into(),
                    Observed::Found(VpcNetworkFacts {
                        vpc_id: "vpc-0other".into(),
                        ..vpc_network()
                    }),
                );
            }
            NetworkChange::AllZonesFull | NetworkChange::OneZoneFull => {
                if let Some(s) = self.aws.subnets.found_mut() {
                    for (i, subnet) in s.iter_mut().enumerate() {
                        if i == 1 || change == NetworkChange::AllZonesFull {
                            subnet.available_ips = Some(0);
                        }
                    }
                }
            }
            NetworkChange::TransitGateway => {
                replace_default(&mut self, Some(RouteTarget::Opaque("tgw-0hub".into())));
            }
            NetworkChange::NoEgress => replace_default(&mut self, None),
            NetworkChange::PrivateWithEndpoints | NetworkChange::SomeEndpoints => {
                replace_default(&mut self, None);
                let mut endpoints = private_cluster_endpoints(ROUTE_TABLE);
                if change == NetworkChange::SomeEndpoints {
                    endpoints.retain(|e| !e.service_name.ends_with(".ssm"));
                }
                if let Some(n) = network(&mut self) {
                    n.endpoints = Observed::Found(endpoints);
                }
            }
            NetworkChange::NatFailed => {
                if let Some(n) = network(&mut self).and_then(|n| n.nat_gateways.found_mut()) {
                    for nat in n {
                        nat.state = "failed".into();
                    }
                }
            }
            NetworkChange::IgwWithoutPublicIp => replace_default(
                &mut self,
                Some(RouteTarget::InternetGateway(INTERNET_GATEWAY.into())),
            ),
            NetworkChange::DnsHostnamesOff => {
                if let Some(n) = network(&mut self) {
                    n.dns_hostnames = Observed::Found(false);
                }
            }
            NetworkChange::RouteTablesDenied => {
                if let Some(n) = network(&mut self) {
                    n.route_tables = unknown(UnknownCause::AccessDenied);
                }
            }
            NetworkChange::SubnetsDenied => {
                self.aws.subnets = unknown(UnknownCause::AccessDenied);
            }
        }
        self
    }
}

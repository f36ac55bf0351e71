//! Fixture builders: a healthy set of facts and small helpers to break it one fact at a time.
//! For tests here and, through the cargo feature `testing`, in the operator, CLI and e2e crates.
//! Pure data, no IO; time is the fixed [`now`].

use crate::facts::{
    AccessEntryFacts, AccountFacts, AwsAuthData, AwsFacts, ClusterFacts, ControllerRoleFacts,
    CrdFacts, DaemonSetFacts, EbsEncryptionFacts, EksClusterFacts, EventRuleFacts, Facts,
    InstanceFacts, InstanceProfileFacts, KarpenterFacts, KmsKeyFacts, NodeClaimFacts, Observed,
    PermissionFacts, PodScheduling, QueueFacts, RoleFacts, RoleRef, SecurityGroupFacts, Setting,
    SimulatedDecision, UnknownCause,
};
use crate::facts::{
    NatGatewayFacts, ResourceClaims, RouteFacts, RouteTableFacts, RouteTarget, SubnetFacts,
    VpcCniSettings, VpcEndpointFacts, VpcNetworkFacts,
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
        min_values: None,
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
        ami_selector_terms: vec![karpenter_health_api::karpenter::AmiSelectorTerm {
            alias: Some(HEALTHY_ALIAS.into()),
            ..Default::default()
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
        kubelet: None,
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
        // What Karpenter resolves for the `al2023@latest` alias: one image per architecture.
        amis: ["amd64", "arm64"]
            .iter()
            .map(|arch| karpenter_health_api::karpenter::ResolvedAmi {
                id: format!("ami-0{arch}"),
                name: Some(format!("amazon-eks-node-al2023-{arch}-standard-1.29")),
                deprecated: Some(false),
                requirements: vec![requirement("kubernetes.io/arch", "In", &[arch])],
            })
            .collect(),
        capacity_reservations: Vec::new(),
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
                    taints: Vec::new(),
                    startup_taints: Vec::new(),
                    termination_grace_period: None,
                },
            },
            // Karpenter's getting-started NodePool caps cpu at 1000.
            limits: BTreeMap::from([("cpu".into(), serde_json::json!("1000"))]),
            disruption: None,
            replicas: None,
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
            termination_grace_period: None,
            // The CRD's default.
            expire_after: Some("720h".into()),
        },
    );
    claim.metadata.labels = Some([("karpenter.sh/nodepool".into(), NODE_POOL.into())].into());
    claim.metadata.creation_timestamp = Some(Time(mins_ago(launched_mins_ago + 1)));
    let registered_now = registered;
    let registered = if registered {
        karpenter_condition("Registered", "True", mins_ago(launched_mins_ago - 1))
    } else {
        KarpenterCondition {
            reason: Some("NodeNotFound".into()),
            message: Some("Node not registered with cluster".into()),
            ..karpenter_condition("Registered", "Unknown", mins_ago(launched_mins_ago + 1))
        }
    };
    let mut conditions = vec![
        karpenter_condition("Launched", "True", mins_ago(launched_mins_ago)),
        registered,
    ];
    if registered_now {
        // Karpenter v1 initializes a NodeClaim whose Node is Ready with no startup taint left.
        conditions.push(karpenter_condition(
            "Initialized",
            "True",
            mins_ago(launched_mins_ago - 2),
        ));
    }
    claim.status = Some(NodeClaimStatus {
        provider_id: Some(format!("aws:///{REGION}a/{instance}")),
        node_name: None,
        conditions,
    });
    claim
}

/// A NodeClaim of [`NODE_CLASS`] and [`NODE_POOL`] that registered `registered_mins_ago` and
/// has not initialized since, Karpenter's `Initialized` condition saying why (`reason`,
/// `message`, as kubernetes-sigs/karpenter `lifecycle/initialization.go` sets them).
pub fn node_claim_uninitialized(
    name: &str,
    instance: &str,
    registered_mins_ago: i64,
    reason: &str,
    message: &str,
) -> NodeClaimFacts {
    let mut claim = node_claim_object(name, instance, registered_mins_ago + 1, true);
    if let Some(status) = claim.status.as_mut() {
        status.conditions.retain(|c| c.type_ != "Initialized");
        status.conditions.push(KarpenterCondition {
            reason: Some(reason.into()),
            message: Some(message.into()),
            ..karpenter_condition("Initialized", "Unknown", mins_ago(registered_mins_ago))
        });
    }
    NodeClaimFacts::of(&claim)
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
        tolerations: Vec::new(),
        only_this_class: true,
        // Long enough that limits may be blamed for it (Settings::waiting_on_limits_after).
        unschedulable_since: Some(mins_ago(10)),
        nominated: false,
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
        instance_type: Some("m5.large".into()),
        lifecycle: None,
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
        aws_auth: Observed::Found(AwsAuthData::new(
            Some(node_mapping(&role_arn(NODE_ROLE))),
            None,
        )),
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
            feature_gates: Setting::Unset,
            min_values_policy: Setting::Unset,
            reserved_enis: Setting::Unset,
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
        // EKS's add-ons: the VPC CNI and kube-proxy request 25m and 100m CPU.
        daemonsets: Observed::Found(Arc::new(vec![
            daemonset("kube-system", "aws-node", 25, 0),
            daemonset("kube-system", "kube-proxy", 100, 0),
        ])),
        // The VPC CNI's cluster: no Cilium, so no agent taint on new nodes.
        cilium_node_taint: Observed::Absent,
        // No AWS Load Balancer Controller: nothing here needs instance metadata.
        load_balancer_controller: Observed::Absent,
        disruption_blocked: Observed::Found(BTreeMap::new()),
        drains: BTreeMap::new(),
    }
}

/// A DaemonSet of `namespace` whose Pod requests `cpu_millis` and `memory_bytes` and may run on
/// every Linux node (no selector, no affinity, no toleration), with Pods whose newest asks the
/// same (read, as the operator reads it).
pub fn daemonset(
    namespace: &str,
    name: &str,
    cpu_millis: u64,
    memory_bytes: u64,
) -> DaemonSetFacts {
    DaemonSetFacts {
        pod: PodScheduling {
            namespace: namespace.into(),
            name: name.into(),
            node_selector: BTreeMap::new(),
            required_affinity: Vec::new(),
            preferred_affinity: Vec::new(),
            tolerations: Vec::new(),
            only_this_class: false,
            unschedulable_since: None,
            nominated: false,
        },
        cpu_millis,
        memory_bytes,
        constraints_unjudged: false,
        has_pods: Some(true),
        newest_pod: Some((cpu_millis, memory_bytes)),
        generation: Some(1),
        resource_claims: ResourceClaims::None,
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

mod amis;
mod aws;
mod changes;
mod infrastructure_changes;

pub use aws::*;
pub use infrastructure_changes::*;

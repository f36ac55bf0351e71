//! The property tests' generators: the healthy fixture bent by a random list of mutations
//! (unknown, absent and odd facts, hostile strings), normalised to what the adapters can report.
//! Pure.

use crate::arn;
use crate::facts::{Facts, InstanceFacts, Observed, PodScheduling, UnknownCause};
use crate::testing::*;
use proptest::prelude::*;

mod controller_and_volumes;

pub(super) use controller_and_volumes::{
    Beyond, Wiring, apply_beyond, apply_wiring, beyond, wiring,
};

/// An observed fact that a mutation can make unknown or absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fact {
    AwsAuth,
    Karpenter,
    AwsNodeRole,
    Account,
    InstanceProfile,
    NodeRole,
    AttachedPolicies,
    Eks,
    AccessEntries,
    SecurityGroups,
    ClusterInstances,
    NodePools,
    /// The NodeClaim watch: this class's NodeClaims and every claimed instance id.
    NodeClaims,
    PendingPods,
    /// The EKS Pod Identity roles of aws-node and the Karpenter controller.
    PodIdentity,
    /// The account's EBS encryption defaults.
    EbsEncryption,
    /// Every KMS key looked up.
    KmsKeys,
    /// The API server's /version.
    ApiserverVersion,
    KarpenterCrds,
    Webhooks,
    /// Every webhook Service's endpoints.
    ServiceEndpoints,
    /// The selected subnets (issue 12).
    Subnets,
    ClusterVpc,
    /// The route tables, NAT gateways, endpoints and DNS attributes of every VPC.
    VpcNetwork,
    /// The VPC CNI's settings on aws-node.
    VpcCni,
    /// Cilium's node taint setting (`kube-system/cilium-config`).
    CiliumConfig,
    /// The AWS Load Balancer Controller's Deployment.
    LoadBalancerController,
    /// The region's instance types and their offerings (issue 25).
    InstanceTypes,
    /// Every SSM parameter of the class's AMI alias (issue 25).
    AmiParameters,
    /// EC2's answer about the class's images (issue 25).
    Images,
}

pub(super) const ALL_FACTS: [Fact; 30] = [
    Fact::AwsAuth,
    Fact::Karpenter,
    Fact::AwsNodeRole,
    Fact::Account,
    Fact::InstanceProfile,
    Fact::NodeRole,
    Fact::AttachedPolicies,
    Fact::Eks,
    Fact::AccessEntries,
    Fact::SecurityGroups,
    Fact::ClusterInstances,
    Fact::NodePools,
    Fact::NodeClaims,
    Fact::PendingPods,
    Fact::PodIdentity,
    Fact::EbsEncryption,
    Fact::KmsKeys,
    Fact::ApiserverVersion,
    Fact::KarpenterCrds,
    Fact::Webhooks,
    Fact::ServiceEndpoints,
    Fact::Subnets,
    Fact::ClusterVpc,
    Fact::VpcNetwork,
    Fact::VpcCni,
    Fact::CiliumConfig,
    Fact::LoadBalancerController,
    Fact::InstanceTypes,
    Fact::AmiParameters,
    Fact::Images,
];

/// Makes `fact` unknown (`cause = Some`) or absent (`None`; for a list, listed and empty).
pub(super) fn degrade(f: &mut Facts, fact: Fact, cause: Option<UnknownCause>) {
    fn to<T>(cause: Option<UnknownCause>) -> Observed<T> {
        cause.map_or(Observed::Absent, unknown)
    }
    fn list<T: Default>(cause: Option<UnknownCause>) -> Observed<T> {
        cause.map_or(Observed::Found(T::default()), unknown)
    }
    match fact {
        Fact::AwsAuth => f.cluster.aws_auth = to(cause),
        Fact::Karpenter => f.cluster.karpenter = to(cause),
        Fact::AwsNodeRole => f.cluster.aws_node_role_arn = to(cause),
        Fact::Account => f.aws.account = to(cause),
        Fact::InstanceProfile => {
            if f.aws.instance_profile.is_some() {
                f.aws.instance_profile = Some(to(cause));
            }
        }
        Fact::NodeRole => {
            if f.aws.node_role.is_some() {
                f.aws.node_role = Some(to(cause));
            }
        }
        Fact::AttachedPolicies => {
            if let Some(Observed::Found(role)) = &mut f.aws.node_role {
                role.attached_policy_arns = to(cause);
            }
        }
        Fact::Eks => f.aws.eks_cluster = to(cause),
        Fact::AccessEntries => f.aws.node_role_access_entries = to(cause),
        Fact::SecurityGroups => f.aws.security_groups = to(cause),
        Fact::ClusterInstances => f.aws.cluster_instances = to(cause),
        Fact::NodePools => f.cluster.node_pools = list(cause),
        Fact::NodeClaims => {
            f.cluster.node_claims = list(cause);
            f.cluster.claimed_instance_ids = list(cause);
        }
        Fact::PendingPods => f.cluster.pending_pods = list(cause),
        Fact::PodIdentity => {
            for role in f.aws.pod_identity_roles.values_mut() {
                *role = cause.map_or(Observed::Found(None), unknown);
            }
        }
        Fact::EbsEncryption => {
            if f.aws.ebs_encryption.is_some() {
                f.aws.ebs_encryption = Some(to(cause));
            }
        }
        Fact::KmsKeys => {
            for key in f.aws.kms_keys.values_mut() {
                *key = to(cause);
            }
        }
        Fact::ApiserverVersion => f.cluster.apiserver_version = to(cause),
        Fact::AmiParameters => {
            if let Some(Observed::Found(parameters)) = &mut f.aws.ami_parameters {
                for value in parameters.values.values_mut() {
                    *value = to(cause);
                }
            }
        }
        Fact::Images => {
            if f.aws.images.is_some() {
                f.aws.images = Some(list(cause));
            }
        }
        Fact::KarpenterCrds => f.cluster.karpenter_crds = list(cause),
        Fact::Webhooks => f.cluster.karpenter_webhooks = list(cause),
        Fact::ServiceEndpoints => {
            for endpoints in f.cluster.service_endpoints.values_mut() {
                *endpoints = to(cause);
            }
        }
        Fact::Subnets => f.aws.subnets = list(cause),
        Fact::ClusterVpc => f.aws.cluster_vpc = to(cause),
        Fact::VpcNetwork => {
            for network in f.aws.vpc_networks.values_mut() {
                *network = to(cause);
            }
        }
        Fact::VpcCni => f.cluster.vpc_cni = to(cause),
        Fact::CiliumConfig => f.cluster.cilium_node_taint = to(cause),
        Fact::LoadBalancerController => f.cluster.load_balancer_controller = to(cause),
        Fact::InstanceTypes => f.aws.instance_types = Some(to(cause)),
    }
}

#[derive(Clone, Debug)]
pub(super) enum Mutation {
    Degrade(Fact, Option<UnknownCause>),
    InstanceProfileSpec(String, bool),
    ProfileRoles(Vec<String>),
    RoleName(String),
    Region(String),
    Version(Option<String>),
    MapRoles(String),
    AuthMode(Option<String>),
    AccessEntry(String),
    TrustPolicy(Option<String>),
    Policies(Vec<String>),
    SecurityGroup(String, Vec<(String, String)>),
    Instance {
        id: String,
        vpc: String,
        age_mins: i64,
        claimed: bool,
        state: String,
    },
    /// A pending Pod with a key: its operator, whether other classes could take the Pod too, and
    /// whether the key is in its node selector (else only a preference).
    PodKey(String, String, bool, bool),
    PoolLabel(String),
    PoolRequirement(String),
    KarpenterCondition(String, String, i64),
    DropKarpenterStatus,
    NodeClaim(String, i64, bool),
    Generation(i64, Option<i64>),
    ConfiguredClusterName(Option<String>),
    KarpenterClusterName(Option<String>),
    EksName(String),
    EksVpc(Option<String>),
    ControllerRole(String),
    MetadataIpv6(Option<Option<String>>),
    ManyBadPods(usize),
    /// The controller's wiring (issue 11).
    Wiring(Wiring),
    /// Volume encryption and version skew (issue 12).
    Beyond(Beyond),
}

pub(super) fn cause() -> impl Strategy<Value = UnknownCause> {
    prop::sample::select(vec![
        UnknownCause::AccessDenied,
        UnknownCause::Throttled,
        UnknownCause::Unavailable,
        UnknownCause::Unsupported,
        UnknownCause::NotObserved,
        UnknownCause::OtherAccount,
    ])
}

pub(super) fn fact() -> impl Strategy<Value = Fact> {
    prop::sample::select(ALL_FACTS.to_vec())
}

/// Interesting strings, plus arbitrary Unicode.
pub(super) fn text(samples: &[&str]) -> impl Strategy<Value = String> + use<> {
    let samples: Vec<String> = samples.iter().map(|s| s.to_string()).collect();
    prop_oneof![4 => prop::sample::select(samples), 1 => "\\PC{0,40}"]
}

pub(super) const LABEL_KEYS: &[&str] = &[
    "node-role.kubernetes.io/worker",
    "kubernetes.io/role",
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "topology.kubernetes.io/zone",
    "node.kubernetes.io/instance-type",
    "example.k8s.io/x",
    "kops.k8s.io/instancegroup",
    "karpenter.sh/capacity-type",
    "karpenter.sh/nodepool",
    "karpenter.sh/custom",
    "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/unknown",
    "team",
    "example.com/team",
];

pub(super) fn mutation() -> impl Strategy<Value = Mutation> {
    let names = [
        "KarpenterNodeRole-demo",
        "Other",
        "",
        "x",
        "Role/With/Slash",
    ];
    prop_oneof![
        6 => (fact(), prop::option::of(cause())).prop_map(|(f, c)| Mutation::Degrade(f, c)),
        1 => (text(&["KarpenterNodeInstanceProfile", "arn:aws:iam::111122223333:instance-profile/P", "bad name", "arn:", ""]), any::<bool>())
            .prop_map(|(p, found)| Mutation::InstanceProfileSpec(p, found)),
        1 => prop::collection::vec(text(&names), 0..2).prop_map(Mutation::ProfileRoles),
        1 => text(&[NODE_ROLE, "Other", "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo", &"R".repeat(70)]).prop_map(Mutation::RoleName),
        1 => text(&["us-west-2", "us-iso-east-1", "us-isob-east-1", "eu-isoe-west-1", "us-isof-south-1", ""]).prop_map(Mutation::Region),
        1 => prop::option::of(text(&["1.8.6", "v1.0.1", "1.7.0-rc.1", "1.9.0", "0.37.0", "latest", "1.6.0"])).prop_map(Mutation::Version),
        1 => text(&[
            &node_mapping(&role_arn(NODE_ROLE)),
            &node_mapping(&role_arn(CONTROLLER_ROLE)),
            &node_mapping(&format!("arn:aws:iam::{ACCOUNT}:role/path/{NODE_ROLE}")),
            &format!("- rolearn: {}\n  username: x\n  groups: [system:nodes]\n", role_arn(NODE_ROLE)),
            &format!("- rolearn: {}\n  username: {NODE_USERNAME}\n", role_arn(NODE_ROLE)),
            "- rolearn: [\n",
            "groups: 3",
            "",
            "- rolearn: not-an-arn\n",
        ]).prop_map(Mutation::MapRoles),
        1 => prop::option::of(text(&["CONFIG_MAP", "API_AND_CONFIG_MAP", "API", "FUTURE"])).prop_map(Mutation::AuthMode),
        1 => text(&["EC2_LINUX", "EC2_WINDOWS", "STANDARD", "FARGATE_LINUX"]).prop_map(Mutation::AccessEntry),
        1 => prop::option::of(text(&[&trust_policy_for("ec2.amazonaws.com"), &trust_policy_for("lambda.amazonaws.com"), "{}", "%7B"]))
            .prop_map(Mutation::TrustPolicy),
        1 => prop::collection::vec(text(&["AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly", "AmazonSSMManagedInstanceCore"]), 0..4)
            .prop_map(|ps| Mutation::Policies(ps.iter().map(|p| managed_policy_arn(p)).collect())),
        1 => (text(&["sg-0a", "sg-0b", SECURITY_GROUP]), prop::collection::vec((text(&["karpenter.sh/discovery", "kubernetes.io/cluster/demo", "kubernetes.io/cluster/prod"]), text(&["demo", "owned", "*"])), 0..3))
            .prop_map(|(id, tags)| Mutation::SecurityGroup(id, tags)),
        1 => (text(&["i-0a", "i-0b", HEALTHY_INSTANCE]), text(&[VPC, "vpc-0twin"]), 0i64..600, any::<bool>(), text(&["running", "terminated", "pending"]))
            .prop_map(|(id, vpc, age_mins, claimed, state)| Mutation::Instance { id, vpc, age_mins, claimed, state }),
        1 => (text(LABEL_KEYS), text(&["In", "NotIn", "DoesNotExist", "Exists"]), any::<bool>(), any::<bool>()).prop_map(|(k, op, shared, selector)| Mutation::PodKey(k, op, shared, selector)),
        1 => text(LABEL_KEYS).prop_map(Mutation::PoolLabel),
        1 => text(LABEL_KEYS).prop_map(Mutation::PoolRequirement),
        1 => (text(&["Ready", "ValidationSucceeded", "InstanceProfileReady", "SubnetsReady"]), text(&["True", "False", "Unknown", "Garbage"]), 0i64..120)
            .prop_map(|(t, s, a)| Mutation::KarpenterCondition(t, s, a)),
        1 => Just(Mutation::DropKarpenterStatus),
        1 => (text(&["a", "b", "c"]), 0i64..120, any::<bool>()).prop_map(|(n, a, r)| Mutation::NodeClaim(n, a, r)),
        1 => (1i64..5, prop::option::of(0i64..120)).prop_map(|(g, s)| Mutation::Generation(g, s)),
        1 => prop::option::of(text(&[CLUSTER, "demo-prod", ""])).prop_map(Mutation::ConfiguredClusterName),
        1 => prop::option::of(text(&[CLUSTER, "demo-prod", ""])).prop_map(Mutation::KarpenterClusterName),
        1 => text(&[CLUSTER, "demo-prod"]).prop_map(Mutation::EksName),
        1 => prop::option::of(text(&[VPC, "vpc-0twin"])).prop_map(Mutation::EksVpc),
        1 => text(&[&role_arn(CONTROLLER_ROLE), &role_arn(NODE_ROLE), "garbage"]).prop_map(Mutation::ControllerRole),
        1 => prop::option::of(prop::option::of(text(&["disabled", "enabled"]))).prop_map(Mutation::MetadataIpv6),
        1 => (0usize..80).prop_map(Mutation::ManyBadPods),
        3 => wiring().prop_map(Mutation::Wiring),
        2 => beyond().prop_map(Mutation::Beyond),
    ]
}

pub(super) fn apply(f: &mut Facts, m: &Mutation) {
    match m {
        Mutation::Degrade(fact, cause) => degrade(f, *fact, *cause),
        Mutation::InstanceProfileSpec(p, found) => {
            *f = f.clone().with_instance_profile_spec(p, *found)
        }
        Mutation::ProfileRoles(roles) => {
            if let Some(Observed::Found(p)) = &mut f.aws.instance_profile {
                p.roles = roles
                    .iter()
                    .map(|r| crate::facts::RoleRef {
                        name: r.clone(),
                        arn: role_arn(r),
                        path: "/".into(),
                    })
                    .collect();
            }
        }
        Mutation::RoleName(r) => {
            if f.cluster.node_class.spec.instance_profile.is_none() {
                f.cluster.node_class.spec.role = Some(r.clone());
            }
        }
        Mutation::Region(r) => f.aws.region = Some(r.clone()),
        Mutation::Version(v) => {
            if let Observed::Found(k) = &mut f.cluster.karpenter {
                k.version = v.clone();
            }
        }
        Mutation::MapRoles(y) => *f = f.clone().with_map_roles(y),
        Mutation::AuthMode(mode) => *f = f.clone().with_authentication_mode(mode.as_deref()),
        Mutation::AccessEntry(t) => *f = f.clone().with_access_entry(t),
        Mutation::TrustPolicy(doc) => {
            if let Some(Observed::Found(r)) = &mut f.aws.node_role {
                r.assume_role_policy_document = doc.clone();
            }
        }
        Mutation::Policies(ps) => {
            if let Some(Observed::Found(r)) = &mut f.aws.node_role {
                r.attached_policy_arns = Observed::Found(ps.clone());
            }
        }
        Mutation::SecurityGroup(id, tags) => {
            if let Observed::Found(groups) = &mut f.aws.security_groups {
                let tags: Vec<(&str, &str)> =
                    tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                groups.push(security_group(id, &tags));
            }
        }
        Mutation::Instance {
            id,
            vpc,
            age_mins,
            claimed,
            state,
        } => {
            if let (true, Some(ids)) = (*claimed, f.cluster.claimed_instance_ids.found_mut()) {
                std::sync::Arc::make_mut(ids).insert(id.clone());
            }
            *f = f.clone().with_cluster_instance(InstanceFacts {
                state: state.clone(),
                ..instance(id, CLUSTER, vpc, *age_mins)
            });
        }
        Mutation::PodKey(key, op, shared, in_selector) => {
            if let Some(pods) = f.cluster.pending_pods.found_mut() {
                let name = format!("pod-{}", pods.len());
                let pod = if *in_selector {
                    PodScheduling {
                        only_this_class: !shared,
                        ..pending_pod("ns", &name, &[(key, "x")])
                    }
                } else {
                    PodScheduling {
                        preferred_affinity: vec![vec![requirement(key, op, &[])]],
                        only_this_class: !shared,
                        ..pending_pod("ns", &name, &[])
                    }
                };
                pods.push(std::sync::Arc::new(pod));
            }
        }
        Mutation::PoolLabel(key) => {
            if let Some(pool) = f.cluster.node_pools.found_mut().and_then(|p| p.first_mut()) {
                pool.spec
                    .template
                    .metadata
                    .labels
                    .insert(key.clone(), "x".into());
            }
        }
        Mutation::PoolRequirement(key) => {
            if let Some(pools) = f.cluster.node_pools.found_mut() {
                let mut pool = node_pool(&format!("pool-{}", pools.len()));
                pool.spec
                    .template
                    .spec
                    .requirements
                    .push(requirement(key, "Exists", &[]));
                pools.push(pool);
            }
        }
        Mutation::KarpenterCondition(t, s, age) => {
            *f = f
                .clone()
                .with_karpenter_condition(karpenter_condition(t, s, mins_ago(*age)))
        }
        Mutation::DropKarpenterStatus => f.cluster.node_class.status = None,
        Mutation::NodeClaim(name, age, registered) => {
            let id = format!("i-0claim{name}");
            if let Some(ids) = f.cluster.claimed_instance_ids.found_mut() {
                std::sync::Arc::make_mut(ids).insert(id.clone());
            }
            if let Some(claims) = f.cluster.node_claims.found_mut() {
                claims.push(node_claim(name, &id, *age, *registered));
            }
        }
        Mutation::Generation(g, seen) => {
            f.cluster.node_class.metadata.generation = Some(*g);
            f.cluster.node_class_generation_seen_at = seen.map(mins_ago);
        }
        Mutation::ConfiguredClusterName(n) => f.cluster.configured_cluster_name = n.clone(),
        Mutation::KarpenterClusterName(n) => {
            if let Observed::Found(k) = &mut f.cluster.karpenter {
                k.cluster_name = n.clone();
            }
        }
        Mutation::EksName(n) => {
            if let Observed::Found(e) = &mut f.aws.eks_cluster {
                e.name = n.clone();
            }
        }
        Mutation::EksVpc(v) => {
            if let Observed::Found(e) = &mut f.aws.eks_cluster {
                e.vpc_id = v.clone();
            }
        }
        Mutation::ControllerRole(a) => {
            if let Observed::Found(k) = &mut f.cluster.karpenter {
                k.controller_role_arn = Some(a.clone());
            }
        }
        Mutation::MetadataIpv6(v) => {
            f.cluster.node_class.spec.metadata_options =
                v.as_ref()
                    .map(|ipv6| karpenter_health_api::karpenter::MetadataOptions {
                        http_protocol_ipv6: ipv6.clone(),
                        ..Default::default()
                    })
        }
        Mutation::Wiring(w) => apply_wiring(f, w),
        Mutation::Beyond(b) => apply_beyond(f, b),
        Mutation::ManyBadPods(n) => {
            if let Some(pods) = f.cluster.pending_pods.found_mut() {
                for i in 0..*n {
                    pods.push(std::sync::Arc::new(pending_pod(
                        "bulk",
                        &format!("p{i}"),
                        &[(&format!("karpenter.sh/k{i}"), "x")],
                    )));
                }
            }
        }
    }
}

/// The adapters' contract: the node role fact is the role of `spec.role`, else the profile's.
pub(super) fn normalize(f: &mut Facts) {
    let wanted = match f.cluster.node_class.spec.role.as_deref() {
        Some(role) => Some(arn::name_of(role).to_owned()),
        None => match &f.aws.instance_profile {
            Some(Observed::Found(p)) => p.roles.first().map(|r| r.name.clone()),
            _ => None,
        },
    };
    match wanted {
        None => f.aws.node_role = None,
        Some(name) => {
            if let Some(Observed::Found(role)) = &mut f.aws.node_role {
                role.arn = role_arn(&name);
                role.name = name;
            }
        }
    }
    crate::testing::reask_simulator(f);
}

/// The facts of every sentence of every test file.
fn sentences() -> Vec<fn() -> Facts> {
    crate::tests::SENTENCE_FACTS
        .iter()
        .flat_map(|file| file.iter().copied())
        .collect()
}

/// `base`'s facts with `mutations` applied.
fn mutated(base: fn() -> Facts, mutations: &[Mutation]) -> Facts {
    let mut f = base();
    for m in mutations {
        apply(&mut f, m);
    }
    normalize(&mut f);
    f
}

/// Healthy facts with mutations, or the facts of a sentence of some test file, as they are or
/// with mutations: every reason a sentence proves is reached, and its facts are held to the
/// properties too.
pub(super) fn facts() -> impl Strategy<Value = Facts> {
    let mutations = || prop::collection::vec(mutation(), 0..10);
    prop_oneof![
        2 => mutations().prop_map(|m| mutated(Facts::healthy, &m)),
        1 => prop::sample::select(sentences()).prop_map(|s| mutated(s, &[])),
        1 => (prop::sample::select(sentences()), mutations()).prop_map(|(s, m)| mutated(s, &m)),
    ]
}

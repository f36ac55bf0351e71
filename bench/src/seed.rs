//! Seeds the bench's cluster: the AWS side in moto (roles, instance profile, network, EKS
//! cluster, through the e2e crate's one seeder) and the Kubernetes side (Karpenter's Deployment
//! and ServiceAccount, aws-auth, EC2NodeClasses and NodePools with Karpenter-like status). The
//! NodeClaims are in `node_claims`. Does IO (moto and the API server).

use anyhow::{Context, Result};
use karpenter_health_api::karpenter::NodePool;
use karpenter_health_e2e::aws_seed::{AwsSeeder, NODE_POLICIES};
use karpenter_health_e2e::fixture::{CONTROLLER_POLICY, controller_policy, irsa_trust};
use karpenter_health_e2e::{Bed, apply_json, karpenter};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

pub const CLUSTER: &str = "bench";
pub const REGION: &str = "us-east-1";
pub const ACCOUNT: &str = "123456789012";
pub const NODE_ROLE: &str = "KarpenterNodeRole-bench";
pub const CONTROLLER_ROLE: &str = "KarpenterControllerRole-bench";
/// Where Karpenter runs (its Deployment and ServiceAccount).
const KARPENTER_NAMESPACE: &str = "kube-system";
pub const INSTANCE_PROFILE: &str = "bench_6312480287093215146";
/// The version in the image tag Karpenter's Helm chart writes; the operator reads it from there.
pub const KARPENTER_VERSION: &str = "1.8.6";
/// The field manager of what Karpenter writes.
pub const FIELD_MANAGER: &str = "karpenter";
pub const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

pub fn role_arn(name: &str) -> String {
    format!("arn:aws:iam::{ACCOUNT}:role/{name}")
}

pub fn node_class_name(i: usize) -> String {
    format!("bench-{i:02}")
}

pub fn node_pool_name(i: usize) -> String {
    format!("bench-pool-{i:02}")
}

/// What the AWS seed created that the Kubernetes side refers to.
#[derive(Clone, Debug)]
pub struct AwsSeed {
    pub security_group: String,
    pub subnets: Vec<(String, &'static str)>,
}

/// The AWS side of a healthy Karpenter install in moto: node and controller roles, the instance
/// profile Karpenter would have created, a VPC with a subnet per zone behind a NAT gateway, the
/// node security group, the EKS cluster, its OIDC provider, the interruption queue and the spot
/// service-linked role.
pub async fn aws(bed: &Bed) -> Result<AwsSeed> {
    let seeder = AwsSeeder::new(bed, REGION).await?;
    seeder.node_role(NODE_ROLE, "/", &NODE_POLICIES).await?;
    seeder
        .instance_profile(INSTANCE_PROFILE, Some(NODE_ROLE))
        .await?;

    let vpc = seeder.vpc("10.20.0.0/16", &[("Name", CLUSTER)]).await?;
    let mut subnets = Vec::new();
    for (i, zone) in ZONES.iter().enumerate() {
        let id = seeder
            .subnet(
                &vpc,
                &format!("10.20.{}.0/20", i * 16),
                Some(zone),
                &[("karpenter.sh/discovery", CLUSTER)],
            )
            .await?;
        subnets.push((id, *zone));
    }
    // A healthy node network: the node subnets' default route goes to a NAT gateway in a public
    // subnet, and the VPC resolves DNS.
    let public_subnet = seeder
        .subnet(&vpc, "10.20.128.0/24", Some(ZONES[0]), &[])
        .await?;
    let route_table = seeder
        .nat_egress(&vpc, &public_subnet, &subnets[0].0)
        .await?;
    for (subnet, _) in &subnets[1..] {
        seeder.associate_route_table(&route_table, subnet).await?;
    }
    seeder.enable_vpc_dns(&vpc, true).await?;
    let cluster_tag = format!("kubernetes.io/cluster/{CLUSTER}");
    let security_group = seeder
        .security_group(
            &vpc,
            &format!("{CLUSTER}-nodes"),
            &[
                ("karpenter.sh/discovery", CLUSTER),
                (cluster_tag.as_str(), "owned"),
            ],
        )
        .await?;
    seeder
        .eks_cluster(
            CLUSTER,
            &role_arn("bench-cluster"),
            &vpc,
            Some(&subnets[0].0),
            "1.29",
        )
        .await?;
    // The controller's wiring, all healthy: the cluster's OIDC provider, a controller role that
    // trusts Karpenter's ServiceAccount and may pass the node role and launch, the interruption
    // queue with its rules, and the spot service-linked role (the NodePools allow spot).
    let issuer = seeder.cluster_issuer(CLUSTER).await?;
    let provider = seeder.oidc_provider(&issuer).await?;
    let host_path = issuer.trim_start_matches("https://");
    seeder
        .role(
            CONTROLLER_ROLE,
            "/",
            &irsa_trust(&provider, host_path, KARPENTER_NAMESPACE),
        )
        .await?;
    seeder
        .put_role_policy(
            CONTROLLER_ROLE,
            CONTROLLER_POLICY,
            &controller_policy(CLUSTER, &role_arn(NODE_ROLE)),
        )
        .await?;
    seeder.interruption_queue(CLUSTER).await?;
    seeder.ensure_spot_service_linked_role().await?;
    Ok(AwsSeed {
        security_group,
        subnets,
    })
}

/// aws-auth as users keep it: the node role mapped for nodes, plus a few human and CI roles.
/// `broken` maps the controller role as the node role instead (a mistake seen in the field).
pub fn aws_auth(broken: bool) -> Value {
    let node = if broken { CONTROLLER_ROLE } else { NODE_ROLE };
    let map_roles = format!(
        "- rolearn: {}\n  username: system:node:{{{{EC2PrivateDNSName}}}}\n  groups:\n  - system:bootstrappers\n  - system:nodes\n\
         - rolearn: {}\n  username: admin:{{{{SessionName}}}}\n  groups:\n  - system:masters\n\
         - rolearn: {}\n  username: ci-deployer\n  groups:\n  - deployers\n\
         - rolearn: {}\n  username: readonly:{{{{SessionName}}}}\n  groups:\n  - view-only\n",
        role_arn(node),
        role_arn("PlatformAdmins"),
        role_arn("GitHubActionsDeploy"),
        role_arn("ReadOnlyEngineers"),
    );
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "aws-auth", "namespace": "kube-system"},
        "data": {"mapRoles": map_roles},
    })
}

fn karpenter_install() -> Vec<Value> {
    vec![
        karpenter::service_account(KARPENTER_NAMESPACE, &role_arn(CONTROLLER_ROLE)),
        karpenter::deployment(
            KARPENTER_NAMESPACE,
            KARPENTER_VERSION,
            &[
                ("CLUSTER_NAME", CLUSTER),
                ("INTERRUPTION_QUEUE", CLUSTER),
                ("BATCH_MAX_DURATION", "10s"),
            ],
        ),
        aws_auth(false),
    ]
}

fn node_class(i: usize) -> Value {
    let selector = json!([{"tags": {"karpenter.sh/discovery": CLUSTER}}]);
    json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": node_class_name(i)},
        "spec": {
            "role": NODE_ROLE,
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": selector,
            "securityGroupSelectorTerms": selector,
            "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
                                "httpPutResponseHopLimit": 1, "httpTokens": "required"},
            "blockDeviceMappings": [{"deviceName": "/dev/xvda",
                                     "ebs": {"volumeSize": "100Gi", "volumeType": "gp3", "encrypted": true}}],
            "tags": {"team": format!("team-{}", i % 5)},
        },
    })
}

/// The status Karpenter writes on a healthy EC2NodeClass.
fn node_class_status(aws: &AwsSeed, generation: i64, now: &str) -> Value {
    let conditions: Vec<Value> = karpenter::NODE_CLASS_CONDITIONS
        .iter()
        .map(|t| karpenter::condition(t, "True", t, now, Some(generation)))
        .collect();
    let subnets: Vec<Value> = aws
        .subnets
        .iter()
        .map(|(id, zone)| json!({"id": id, "zone": zone}))
        .collect();
    json!({"status": {
        "instanceProfile": INSTANCE_PROFILE,
        "securityGroups": [{"id": aws.security_group, "name": format!("{CLUSTER}-nodes")}],
        "subnets": subnets,
        "amis": [{"id": "ami-0a1b2c3d4e5f60718", "name": "amazon-eks-node-al2023-x86_64-standard-1.33-v20250920",
                  "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}],
        "conditions": conditions,
    }})
}

fn node_pool(i: usize, classes: usize) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": node_pool_name(i)},
        "spec": {
            "template": {
                "metadata": {"labels": {"team": format!("team-{}", i % 5)}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                     "name": node_class_name(i % classes)},
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
                        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                    ],
                    "expireAfter": "720h",
                },
            },
            "limits": {"cpu": "10000"},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m"},
        },
    })
}

/// Server-side applies a document (as the Karpenter field manager) through `api`.
async fn apply(api: &Api<DynamicObject>, value: &Value) -> Result<DynamicObject> {
    let name = value["metadata"]["name"]
        .as_str()
        .context("object without a name")?;
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(value),
    )
    .await
    .with_context(|| format!("applying {name}"))
}

/// Karpenter's install, aws-auth, the EC2NodeClasses (with Karpenter's status) and the NodePools.
/// Returns each NodePool's uid, for the NodeClaims' owner references.
pub async fn kubernetes(
    client: &kube::Client,
    aws: &AwsSeed,
    classes: usize,
    pools: usize,
) -> Result<Vec<(String, String)>> {
    apply_json(client, &karpenter_install()).await?;
    let now = jiff::Timestamp::now().to_string();
    let class_api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<karpenter_health_api::karpenter::EC2NodeClass>(&()),
    );
    for i in 0..classes {
        let applied = apply(&class_api, &node_class(i)).await?;
        let generation = applied.metadata.generation.unwrap_or(1);
        class_api
            .patch_status(
                &node_class_name(i),
                &PatchParams::default(),
                &Patch::Merge(node_class_status(aws, generation, &now)),
            )
            .await?;
    }
    let pool_api: Api<DynamicObject> =
        Api::all_with(client.clone(), &ApiResource::erase::<NodePool>(&()));
    let mut uids = Vec::new();
    for i in 0..pools {
        let applied = apply(&pool_api, &node_pool(i, classes)).await?;
        uids.push((
            node_pool_name(i),
            applied.metadata.uid.context("NodePool without uid")?,
        ));
    }
    Ok(uids)
}

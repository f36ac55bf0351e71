//! Seeds the bench's cluster: the AWS side in moto (roles, instance profile, network, EKS
//! cluster, through the e2e crate's one seeder) and the Kubernetes side (Karpenter's Deployment
//! and ServiceAccount, aws-auth, EC2NodeClasses and NodePools with Karpenter-like status). The
//! NodeClaims are in `node_claims`. With [`Variety`], every few classes have a node role, an
//! instance profile and a KMS key of their own, so the IAM and KMS questions differ among
//! classes as in accounts with several teams. Does IO (moto and the API server).

use anyhow::{Context, Result};
use karpenter_health_api::karpenter::NodePool;
use karpenter_health_e2e::aws_seed::{AwsSeeder, NODE_POLICIES};
use karpenter_health_e2e::fixture::{
    CONTROLLER_POLICY, controller_policy, irsa_trust, kms_for_ebs_policy,
};
use karpenter_health_e2e::{Bed, apply_json, karpenter};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use std::collections::BTreeMap;

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

/// Which classes have a node role, an instance profile and a KMS key of their own: every
/// `every`th (`0`: none, every class shares the node role and the account's default EBS key).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Variety {
    pub every: usize,
}

impl Variety {
    /// Whether class `i` has a role and a key of its own.
    pub fn distinct(self, i: usize) -> bool {
        self.every > 0 && i % self.every == self.every - 1
    }

    pub fn node_role(self, i: usize) -> String {
        if self.distinct(i) {
            format!("{NODE_ROLE}-{i:02}")
        } else {
            NODE_ROLE.to_owned()
        }
    }

    /// The instance profile Karpenter would have created for class `i`'s role.
    pub fn instance_profile(self, i: usize) -> String {
        if self.distinct(i) {
            format!("{INSTANCE_PROFILE}_{i:02}")
        } else {
            INSTANCE_PROFILE.to_owned()
        }
    }

    /// Every node role of `classes` classes, the shared one first: what aws-auth maps.
    pub fn node_roles(self, classes: usize) -> Vec<String> {
        let mut roles = vec![NODE_ROLE.to_owned()];
        roles.extend(
            (0..classes)
                .filter(|i| self.distinct(*i))
                .map(|i| self.node_role(i)),
        );
        roles
    }
}

/// What the AWS seed created that the Kubernetes side refers to.
#[derive(Clone, Debug)]
pub struct AwsSeed {
    pub security_group: String,
    pub subnets: Vec<(String, &'static str)>,
    pub variety: Variety,
    /// The KMS key of each class that has one of its own, by class index.
    pub kms_keys: BTreeMap<usize, String>,
}

/// The AWS side of a healthy Karpenter install in moto: node and controller roles, the instance
/// profile Karpenter would have created, a VPC with a subnet per zone behind a NAT gateway, the
/// node security group, the EKS cluster, its OIDC provider, the interruption queue and the spot
/// service-linked role. With `variety`, the distinct classes' roles, profiles and keys (each
/// key with KMS's default policy, which leaves its use to IAM: the controller's policies allow
/// EC2's uses of customer managed keys, as Karpenter's users write for #3767).
pub async fn aws(bed: &Bed, classes: usize, variety: Variety) -> Result<AwsSeed> {
    let seeder = AwsSeeder::new(bed, REGION).await?;
    seeder.node_role(NODE_ROLE, "/", &NODE_POLICIES).await?;
    seeder
        .instance_profile(INSTANCE_PROFILE, Some(NODE_ROLE))
        .await?;
    let mut kms_keys = BTreeMap::new();
    for i in (0..classes).filter(|i| variety.distinct(*i)) {
        let role = variety.node_role(i);
        seeder.node_role(&role, "/", &NODE_POLICIES).await?;
        seeder
            .instance_profile(&variety.instance_profile(i), Some(&role))
            .await?;
        kms_keys.insert(i, seeder.kms_key(None).await?);
    }

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
    // One ARN pattern passes every node role, as a policy for several teams' roles is written.
    let passed = if variety.every > 0 {
        role_arn(&format!("{NODE_ROLE}*"))
    } else {
        role_arn(NODE_ROLE)
    };
    seeder
        .put_role_policy(
            CONTROLLER_ROLE,
            CONTROLLER_POLICY,
            &controller_policy(CLUSTER, &passed),
        )
        .await?;
    if !kms_keys.is_empty() {
        seeder
            .put_role_policy(CONTROLLER_ROLE, "KarpenterKms", &kms_for_ebs_policy(REGION))
            .await?;
    }
    seeder.interruption_queue(CLUSTER).await?;
    seeder.ensure_spot_service_linked_role().await?;
    Ok(AwsSeed {
        security_group,
        subnets,
        variety,
        kms_keys,
    })
}

/// aws-auth as users keep it: every node role mapped for nodes, plus a few human and CI roles.
/// `broken` maps the controller role as the node role instead of them all (a mistake seen in
/// the field), so every class's `NodeRoleMapped` turns False, each naming its own role.
pub fn aws_auth(broken: bool, node_roles: &[String]) -> Value {
    let node_entry = |role: &str| {
        format!(
            "- rolearn: {}\n  username: system:node:{{{{EC2PrivateDNSName}}}}\n  groups:\n  - system:bootstrappers\n  - system:nodes\n",
            role_arn(role)
        )
    };
    let nodes: String = if broken {
        node_entry(CONTROLLER_ROLE)
    } else {
        node_roles.iter().map(|r| node_entry(r)).collect()
    };
    let map_roles = format!(
        "{nodes}\
         - rolearn: {}\n  username: admin:{{{{SessionName}}}}\n  groups:\n  - system:masters\n\
         - rolearn: {}\n  username: ci-deployer\n  groups:\n  - deployers\n\
         - rolearn: {}\n  username: readonly:{{{{SessionName}}}}\n  groups:\n  - view-only\n",
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

fn karpenter_install(node_roles: &[String]) -> Vec<Value> {
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
        aws_auth(false, node_roles),
    ]
}

fn node_class(i: usize, aws: &AwsSeed) -> Value {
    let selector = json!([{"tags": {"karpenter.sh/discovery": CLUSTER}}]);
    let mut ebs = json!({"volumeSize": "100Gi", "volumeType": "gp3", "encrypted": true});
    if let Some(key) = aws.kms_keys.get(&i) {
        ebs["kmsKeyID"] = json!(key);
    }
    json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
        "metadata": {"name": node_class_name(i)},
        "spec": {
            "role": aws.variety.node_role(i),
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": selector,
            "securityGroupSelectorTerms": selector,
            "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
                                "httpPutResponseHopLimit": 1, "httpTokens": "required"},
            "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": ebs}],
            "tags": {"team": format!("team-{}", i % 5)},
        },
    })
}

/// The status Karpenter writes on a healthy EC2NodeClass.
fn node_class_status(i: usize, aws: &AwsSeed, generation: i64, now: &str) -> Value {
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
        "instanceProfile": aws.variety.instance_profile(i),
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
    apply_json(client, &karpenter_install(&aws.variety.node_roles(classes))).await?;
    let now = jiff::Timestamp::now().to_string();
    let class_api: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<karpenter_health_api::karpenter::EC2NodeClass>(&()),
    );
    for i in 0..classes {
        let applied = apply(&class_api, &node_class(i, aws)).await?;
        let generation = applied.metadata.generation.unwrap_or(1);
        class_api
            .patch_status(
                &node_class_name(i),
                &PatchParams::default(),
                &Patch::Merge(node_class_status(i, aws, generation, &now)),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fourth_class_has_a_role_of_its_own_and_aws_auth_maps_them_all() {
        let variety = Variety { every: 4 };
        let distinct: Vec<usize> = (0..20).filter(|i| variety.distinct(*i)).collect();
        assert_eq!(distinct, [3, 7, 11, 15, 19]);
        assert_eq!(variety.node_role(3), format!("{NODE_ROLE}-03"));
        assert_eq!(variety.node_role(4), NODE_ROLE);
        assert_eq!(variety.instance_profile(4), INSTANCE_PROFILE);
        let roles = variety.node_roles(20);
        assert_eq!(roles.len(), 6);
        let map_roles = |broken| {
            aws_auth(broken, &roles)["data"]["mapRoles"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_default()
        };
        let healthy = map_roles(false);
        assert!(
            roles
                .iter()
                .all(|r| healthy.contains(&format!("role/{r}\n"))),
            "{healthy}"
        );
        let broken = map_roles(true);
        assert!(
            roles
                .iter()
                .all(|r| !broken.contains(&format!("role/{r}\n"))),
            "{broken}"
        );
        assert!(broken.contains(&format!("role/{CONTROLLER_ROLE}\n")));
        assert_eq!(Variety::default().node_roles(20), [NODE_ROLE]);
    }
}

//! Seeds the bench's cluster: the AWS side in moto (roles, instance profile, network, EKS
//! cluster) and the Kubernetes side (Karpenter's Deployment and ServiceAccount, aws-auth,
//! EC2NodeClasses and NodePools with Karpenter-like status, NodeClaims as Karpenter writes them).
//! Does IO (moto and the API server).

use anyhow::{Context, Result, ensure};
use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use futures::{StreamExt, TryStreamExt};
use http_body_util::{BodyExt, Full};
use karpenter_health_api::karpenter::{NodeClaim, NodePool};
use karpenter_health_e2e::Bed;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

pub const CLUSTER: &str = "bench";
pub const REGION: &str = "us-east-1";
pub const ACCOUNT: &str = "123456789012";
pub const NODE_ROLE: &str = "KarpenterNodeRole-bench";
pub const CONTROLLER_ROLE: &str = "KarpenterControllerRole-bench";
pub const INSTANCE_PROFILE: &str = "bench_6312480287093215146";
/// What Karpenter's Helm chart writes; the operator reads the version from the image tag.
pub const KARPENTER_IMAGE: &str = "public.ecr.aws/karpenter/controller:1.8.6";
const FIELD_MANAGER: &str = "karpenter";
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];
const EC2_TRUST: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
const NODE_POLICIES: [&str; 4] = [
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
];
/// A realistic spread of instance types in a NodeClaim's requirements.
const INSTANCE_TYPES: [&str; 16] = [
    "m5.large",
    "m5.xlarge",
    "m5.2xlarge",
    "m5a.large",
    "m5a.xlarge",
    "m6i.large",
    "m6i.xlarge",
    "m6i.2xlarge",
    "c5.large",
    "c5.xlarge",
    "c6i.large",
    "c6i.xlarge",
    "r5.large",
    "r5.xlarge",
    "r6i.large",
    "r6i.xlarge",
];

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

fn tag(k: &str, v: &str) -> Tag {
    Tag::builder().key(k).value(v).build()
}

fn tags(resource: ResourceType, pairs: &[(&str, &str)]) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(resource)
        .set_tags(Some(pairs.iter().map(|(k, v)| tag(k, v)).collect()))
        .build()
}

/// The AWS side of a healthy Karpenter install in moto: node and controller roles, the instance
/// profile Karpenter would have created, a VPC with a subnet per zone, the node security group
/// and the EKS cluster.
pub async fn aws(bed: &Bed) -> Result<AwsSeed> {
    let config = bed.aws_config(REGION).await?;
    let iam = aws_sdk_iam::Client::new(&config);
    let ec2 = aws_sdk_ec2::Client::new(&config);

    iam.create_role()
        .role_name(NODE_ROLE)
        .assume_role_policy_document(EC2_TRUST)
        .send()
        .await
        .context("creating the node role")?;
    for arn in NODE_POLICIES {
        iam.attach_role_policy()
            .role_name(NODE_ROLE)
            .policy_arn(arn)
            .send()
            .await
            .with_context(|| format!("attaching {arn}"))?;
    }
    let oidc_trust = json!({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Federated": format!("arn:aws:iam::{ACCOUNT}:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/BENCH")}, "Action": "sts:AssumeRoleWithWebIdentity"}],
    });
    iam.create_role()
        .role_name(CONTROLLER_ROLE)
        .assume_role_policy_document(oidc_trust.to_string())
        .send()
        .await
        .context("creating the controller role")?;
    iam.create_instance_profile()
        .instance_profile_name(INSTANCE_PROFILE)
        .send()
        .await?;
    iam.add_role_to_instance_profile()
        .instance_profile_name(INSTANCE_PROFILE)
        .role_name(NODE_ROLE)
        .send()
        .await?;

    let vpc = ec2
        .create_vpc()
        .cidr_block("10.20.0.0/16")
        .tag_specifications(tags(ResourceType::Vpc, &[("Name", CLUSTER)]))
        .send()
        .await?;
    let vpc = vpc
        .vpc()
        .and_then(|v| v.vpc_id())
        .context("vpc id")?
        .to_owned();
    let mut subnets = Vec::new();
    for (i, zone) in ZONES.iter().enumerate() {
        let subnet = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(format!("10.20.{}.0/20", i * 16))
            .availability_zone(*zone)
            .tag_specifications(tags(
                ResourceType::Subnet,
                &[("karpenter.sh/discovery", CLUSTER)],
            ))
            .send()
            .await?;
        let id = subnet
            .subnet()
            .and_then(|s| s.subnet_id())
            .context("subnet id")?
            .to_owned();
        subnets.push((id, *zone));
    }
    let cluster_tag = format!("kubernetes.io/cluster/{CLUSTER}");
    let sg = ec2
        .create_security_group()
        .group_name(format!("{CLUSTER}-nodes"))
        .description("nodes")
        .vpc_id(&vpc)
        .tag_specifications(tags(
            ResourceType::SecurityGroup,
            &[
                ("karpenter.sh/discovery", CLUSTER),
                (cluster_tag.as_str(), "owned"),
            ],
        ))
        .send()
        .await?;
    let security_group = sg.group_id().context("group id")?.to_owned();
    eks_cluster(bed, &vpc, &subnets[0].0).await?;
    Ok(AwsSeed {
        security_group,
        subnets,
    })
}

/// EKS CreateCluster as raw JSON: the SDK's request shape has no `vpcId`, which moto stores as
/// sent and the cluster-identity check compares.
async fn eks_cluster(bed: &Bed, vpc: &str, subnet: &str) -> Result<()> {
    let body = json!({
        "name": CLUSTER,
        "roleArn": role_arn("bench-cluster"),
        "resourcesVpcConfig": {"subnetIds": [subnet], "vpcId": vpc},
    });
    let auth = format!(
        "AWS4-HMAC-SHA256 Credential=testing/20240101/{REGION}/eks/aws4_request, SignedHeaders=host, Signature=0"
    );
    let request = hyper::Request::post(format!("{}/clusters", bed.moto_url()?))
        .header("content-type", "application/json")
        .header("authorization", auth)
        .body(Full::new(bytes::Bytes::from(body.to_string())))?;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http();
    let response = client.request(request).await?;
    let status = response.status();
    let text = response.into_body().collect().await?.to_bytes();
    ensure!(
        status.is_success(),
        "EKS CreateCluster: {status} {}",
        String::from_utf8_lossy(&text)
    );
    Ok(())
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
        json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "karpenter", "namespace": "kube-system",
                         "annotations": {"eks.amazonaws.com/role-arn": role_arn(CONTROLLER_ROLE)}},
        }),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "karpenter", "namespace": "kube-system"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "karpenter"}},
                "template": {
                    "metadata": {"labels": {"app": "karpenter"}},
                    "spec": {"serviceAccountName": "karpenter", "containers": [{
                        "name": "controller", "image": KARPENTER_IMAGE,
                        "env": [{"name": "CLUSTER_NAME", "value": CLUSTER},
                                {"name": "INTERRUPTION_QUEUE", "value": CLUSTER},
                                {"name": "BATCH_MAX_DURATION", "value": "10s"}],
                    }]},
                },
            },
        }),
        aws_auth(false),
    ]
}

fn condition(type_: &str, now: &str, generation: i64) -> Value {
    json!({"type": type_, "status": "True", "reason": type_, "message": "",
           "lastTransitionTime": now, "observedGeneration": generation})
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
    let conditions: Vec<Value> = [
        "AMIsReady",
        "SubnetsReady",
        "SecurityGroupsReady",
        "InstanceProfileReady",
        "ValidationSucceeded",
        "Ready",
    ]
    .iter()
    .map(|t| condition(t, now, generation))
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
    karpenter_health_e2e::apply_yaml(
        client,
        &karpenter_install()
            .iter()
            .map(|v| serde_json::to_string(v).map_err(anyhow::Error::from))
            .collect::<Result<Vec<_>>>()?
            .join("\n---\n"),
    )
    .await?;
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

/// A deterministic pseudo-random 64-bit value (splitmix64), so runs seed the same objects.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// NodeClaim number `n` as Karpenter 1.x creates it (labels, hash annotations, finalizer, owner
/// reference, requirements, resources) and the status it writes once the node joined.
fn node_claim(n: usize, pool: &(String, String), class: &str, now: &str) -> (String, Value, Value) {
    let h = mix(n as u64);
    let name = format!("{}-{:05x}", pool.0, h & 0xfffff);
    let name = format!("{name}-{n}");
    let zone = ZONES[(h % 3) as usize];
    let instance_type = INSTANCE_TYPES[((h >> 8) % INSTANCE_TYPES.len() as u64) as usize];
    let (family, size) = instance_type.split_once('.').unwrap_or((instance_type, ""));
    let capacity_type = if h & 0x100 == 0 { "on-demand" } else { "spot" };
    let ip = format!("10.20.{}.{}", (h >> 16) % 48, (h >> 24) % 250 + 2);
    let node_name = format!("ip-{}.ec2.internal", ip.replace('.', "-"));
    let instance_id = format!("i-0{:016x}", mix(h ^ 7));
    let generation: String = family.chars().filter(char::is_ascii_digit).collect();
    let claim = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {
                "karpenter.sh/nodepool": pool.0,
                "karpenter.k8s.aws/ec2nodeclass": class,
                "karpenter.sh/capacity-type": capacity_type,
                "node.kubernetes.io/instance-type": instance_type,
                "topology.kubernetes.io/zone": zone,
                "topology.kubernetes.io/region": REGION,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "karpenter.k8s.aws/instance-category": &family[..1],
                "karpenter.k8s.aws/instance-family": family,
                "karpenter.k8s.aws/instance-generation": generation,
                "karpenter.k8s.aws/instance-size": size,
                "karpenter.k8s.aws/instance-hypervisor": "nitro",
                "team": format!("team-{}", n % 5),
            },
            "annotations": {
                "karpenter.k8s.aws/ec2nodeclass-hash": format!("{}", mix(h)),
                "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4",
                "karpenter.sh/nodepool-hash": format!("{}", mix(h ^ 1)),
                "karpenter.sh/nodepool-hash-version": "v3",
                "karpenter.k8s.aws/tagged": "true",
            },
            "finalizers": ["karpenter.sh/termination"],
            "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": pool.0,
                                 "uid": pool.1, "blockOwnerDeletion": true}],
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class},
            "requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool.0]},
                {"key": "karpenter.k8s.aws/ec2nodeclass", "operator": "In", "values": [class]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": INSTANCE_TYPES},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ZONES},
            ],
            "resources": {"requests": {"cpu": "1510m", "memory": "3472Mi", "pods": "11"}},
            "expireAfter": "720h",
        },
    });
    let conditions: Vec<Value> = [
        "Launched",
        "Registered",
        "Initialized",
        "ConsistentStateFound",
        "Ready",
    ]
    .iter()
    .map(|t| condition(t, now, 1))
    .collect();
    let status = json!({"status": {
        "providerID": format!("aws:///{zone}/{instance_id}"),
        "nodeName": node_name,
        "imageID": "ami-0a1b2c3d4e5f60718",
        "capacity": {"cpu": "2", "ephemeral-storage": "100Gi", "memory": "7910Mi", "pods": "29"},
        "allocatable": {"cpu": "1930m", "ephemeral-storage": "95551679124", "memory": "7220Mi", "pods": "29"},
        "lastPodEventTime": now,
        "conditions": conditions,
    }});
    (name, claim, status)
}

/// Creates NodeClaims `from..to` (`n` is spread over the NodePools round-robin) and writes their
/// status through the status subresource, `concurrency` at a time. Returns how long it took.
pub async fn node_claims(
    client: &kube::Client,
    pools: &[(String, String)],
    classes: usize,
    from: usize,
    to: usize,
    concurrency: usize,
) -> Result<Duration> {
    let api: Api<DynamicObject> =
        Api::all_with(client.clone(), &ApiResource::erase::<NodeClaim>(&()));
    let now = jiff::Timestamp::now().to_string();
    let started = Instant::now();
    futures::stream::iter(from..to)
        .map(|n| {
            let api = api.clone();
            let pool = &pools[n % pools.len()];
            let class = node_class_name((n % pools.len()) % classes);
            let now = now.clone();
            async move {
                let (name, claim, status) = node_claim(n, pool, &class, &now);
                let object: DynamicObject = serde_json::from_value(claim)?;
                let params = PostParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..PostParams::default()
                };
                api.create(&params, &object)
                    .await
                    .with_context(|| format!("creating NodeClaim {name}"))?;
                api.patch_status(
                    &name,
                    &PatchParams {
                        field_manager: Some(FIELD_MANAGER.into()),
                        ..PatchParams::default()
                    },
                    &Patch::Merge(status),
                )
                .await
                .with_context(|| format!("writing the status of NodeClaim {name}"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<()>()
        .await?;
    Ok(started.elapsed())
}

/// Bytes on the wire and NodeClaims of a full list, 500 per page as the operator's watch reads
/// it, and how long the list took (the API server's share of a cold start).
pub async fn node_claim_list(client: &kube::Client) -> Result<(usize, usize, Duration)> {
    let started = Instant::now();
    let mut bytes = 0;
    let mut count = 0;
    let mut continue_token: Option<String> = None;
    loop {
        let mut uri = "/apis/karpenter.sh/v1/nodeclaims?limit=500".to_owned();
        if let Some(token) = &continue_token {
            uri.push_str("&continue=");
            uri.push_str(
                &percent_encoding::utf8_percent_encode(token, percent_encoding::NON_ALPHANUMERIC)
                    .to_string(),
            );
        }
        let request = hyper::Request::get(uri).body(Vec::new())?;
        let text = client.request_text(request).await?;
        bytes += text.len();
        let page: Value = serde_json::from_str(&text)?;
        count += page["items"].as_array().map_or(0, Vec::len);
        continue_token = page["metadata"]["continue"]
            .as_str()
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        if continue_token.is_none() {
            break;
        }
    }
    Ok((bytes, count, started.elapsed()))
}

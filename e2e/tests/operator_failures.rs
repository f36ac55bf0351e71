//! The operator end to end on the real kube-apiserver and moto, one test per failure users hit:
//! each starts from a healthy seeded setup (every condition True), breaks one thing the way users
//! break it, waits for exactly the expected condition and reason, repairs it and waits for True
//! again. The operator runs in-process as the bed's non-admin user, bound to the roles shipped in
//! deploy/rbac.yaml, so those roles are proven sufficient; a last test proves them minimal. Does IO
//! (API server, moto, fault proxy, restarts the bed's API server).
//!
//! Isolation on the shared bed: every test has its own EC2/EKS region, unique IAM and cluster
//! names, its own namespace holding its Karpenter Deployment and ServiceAccount (the operator's
//! `--karpenter-namespace`), and prefixed cluster-scoped objects, all removed at the end. The
//! singleton kube-system/aws-auth is shared: a test adds its own entries and removes them again.

use anyhow::{Context, Result, bail, ensure};
use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use karpenter_health_api::karpenter::{EC2NodeClass, NodeClaim, NodePool};
use karpenter_health_api::{ConditionType, KarpenterHealth, KarpenterHealthStatus, Reason};
use karpenter_health_aws::{ObserverOptions, RateLimits, SdkOptions, Timeouts};
use karpenter_health_e2e::fault_proxy::{Fault, FaultProxy};
use karpenter_health_e2e::{Bed, OperatorHandle, apply_yaml, install_health_crd, wait_for};
use karpenter_health_operator::{AwsPort, OperatorConfig};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The RBAC the project ships; the operator under test runs with exactly these rules.
const SHIPPED_RBAC: &str = include_str!("../../deploy/rbac.yaml");
/// The shipped Role that lives in Karpenter's namespace (kube-system by default).
const KARPENTER_NAMESPACE_ROLE: &str = "karpenter-health-karpenter";
/// The bed's token user without any permission of its own.
const OPERATOR_USER: &str = "karpenter-health-operator";
const BED_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/bed/bed.sh");
const DEADLINE: Duration = Duration::from_secs(60);
/// Re-evaluation period of the operator under test: AWS-side changes show within about two.
const REFRESH: Duration = Duration::from_secs(2);
const TRUST: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
const NODE_POLICIES: [&str; 4] = [
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
];
const NODE_USERNAME: &str = "system:node:{{EC2PrivateDNSName}}";
/// The conditions whose facts come from AWS calls.
const AWS_CONDITIONS: [ConditionType; 5] = [
    ConditionType::InstanceProfileReady,
    ConditionType::NodeRoleReady,
    ConditionType::NodeRoleMapped,
    ConditionType::SecurityGroupsReady,
    ConditionType::ClusterIdentityUnique,
];
/// The conditions computed from Kubernetes objects and the region alone.
const KUBE_CONDITIONS: [ConditionType; 4] = [
    ConditionType::MetadataOptionsSupported,
    ConditionType::LabelsAllowed,
    ConditionType::KarpenterStatusConsistent,
    ConditionType::NodeClaimsRegistered,
];

/// A suffix no other test (or earlier run against the same bed) uses, valid in DNS names.
fn unique_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{:x}{:x}", std::process::id(), nanos >> 8)
}

fn rfc3339_ago(ago: SignedDuration) -> String {
    (Timestamp::now() - ago).to_string()
}

/// Adapter options for tests: answers live one second, so AWS-side changes (and outages) show
/// at the next refresh; no client-side limits; one quick retry.
fn fast_aws_options() -> ObserverOptions {
    let timeouts = Timeouts {
        connect: Duration::from_secs(2),
        attempt: Duration::from_secs(10),
        operation: Duration::from_secs(20),
    };
    ObserverOptions {
        ttl: Duration::from_secs(1),
        account_ttl: Duration::from_secs(1),
        error_ttl: Duration::from_secs(1),
        rate_limits: RateLimits::UNLIMITED,
        sdk: SdkOptions {
            timeouts,
            sweep_timeouts: timeouts,
            max_attempts: 2,
            initial_backoff: Duration::from_millis(50),
        },
        ..ObserverOptions::default()
    }
}

fn tag(k: &str, v: &str) -> Tag {
    Tag::builder().key(k).value(v).build()
}

fn tag_spec(kind: ResourceType, tags: &[(&str, &str)]) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .set_tags(Some(tags.iter().map(|(k, v)| tag(k, v)).collect()))
        .build()
}

/// Seeds moto with the Rust SDK, in one region.
#[derive(Debug)]
struct Seeder {
    iam: aws_sdk_iam::Client,
    ec2: aws_sdk_ec2::Client,
    moto: String,
    region: String,
}

impl Seeder {
    async fn new(bed: &Bed, region: &str) -> Result<Self> {
        let config = bed.aws_config(region).await?;
        Ok(Self {
            iam: aws_sdk_iam::Client::new(&config),
            ec2: aws_sdk_ec2::Client::new(&config),
            moto: bed.moto_url()?.to_owned(),
            region: region.to_owned(),
        })
    }

    /// A node role trusting EC2 with every policy a node needs; returns its ARN (whose partition
    /// follows the region: moto keeps `aws-iso` IAM apart from `aws`).
    async fn node_role(&self, name: &str) -> Result<String> {
        let role = self
            .iam
            .create_role()
            .role_name(name)
            .assume_role_policy_document(TRUST)
            .send()
            .await?;
        let arn = role.role().context("created role")?.arn().to_owned();
        let partition = arn.split(':').nth(1).unwrap_or("aws").to_owned();
        for policy in NODE_POLICIES {
            self.iam
                .attach_role_policy()
                .role_name(name)
                .policy_arn(format!("arn:{partition}:iam::aws:policy/{policy}"))
                .send()
                .await
                .with_context(|| format!("attaching {policy}"))?;
        }
        Ok(arn)
    }

    async fn instance_profile(&self, name: &str, role: &str) -> Result<()> {
        self.iam
            .create_instance_profile()
            .instance_profile_name(name)
            .send()
            .await?;
        self.iam
            .add_role_to_instance_profile()
            .instance_profile_name(name)
            .role_name(role)
            .send()
            .await?;
        Ok(())
    }

    async fn vpc(&self, cidr: &str) -> Result<String> {
        let vpc = self.ec2.create_vpc().cidr_block(cidr).send().await?;
        Ok(vpc
            .vpc()
            .and_then(|v| v.vpc_id())
            .context("vpc id")?
            .to_owned())
    }

    /// A subnet, where moto knows the region's zones (it knows none in the isolated regions).
    async fn subnet(&self, vpc: &str, cidr: &str) -> Result<String> {
        let subnet = self
            .ec2
            .create_subnet()
            .vpc_id(vpc)
            .cidr_block(cidr)
            .send()
            .await?;
        Ok(subnet
            .subnet()
            .and_then(|s| s.subnet_id())
            .context("subnet id")?
            .to_owned())
    }

    async fn security_group(&self, vpc: &str, name: &str, tags: &[(&str, &str)]) -> Result<String> {
        let sg = self
            .ec2
            .create_security_group()
            .group_name(name)
            .description(name)
            .vpc_id(vpc)
            .tag_specifications(tag_spec(ResourceType::SecurityGroup, tags))
            .send()
            .await?;
        Ok(sg.group_id().context("group id")?.to_owned())
    }

    async fn run_instances(
        &self,
        subnet: &str,
        count: i32,
        tags: &[(&str, &str)],
    ) -> Result<Vec<String>> {
        let out = self
            .ec2
            .run_instances()
            .image_id("ami-12c6146b")
            .instance_type(aws_sdk_ec2::types::InstanceType::T3Micro)
            .min_count(count)
            .max_count(count)
            .subnet_id(subnet)
            .tag_specifications(tag_spec(ResourceType::Instance, tags))
            .send()
            .await?;
        Ok(out
            .instances()
            .iter()
            .filter_map(|i| i.instance_id().map(str::to_owned))
            .collect())
    }

    async fn terminate(&self, ids: &[String]) -> Result<()> {
        self.ec2
            .terminate_instances()
            .set_instance_ids(Some(ids.to_vec()))
            .send()
            .await?;
        Ok(())
    }

    /// EKS CreateCluster as raw JSON: the SDK's request shape has no `vpcId` (real EKS derives it
    /// from the subnets), and moto stores `resourcesVpcConfig` exactly as sent.
    async fn eks_cluster(
        &self,
        name: &str,
        role_arn: &str,
        vpc: &str,
        subnet: Option<&str>,
    ) -> Result<()> {
        let body = json!({
            "name": name,
            "roleArn": role_arn,
            "resourcesVpcConfig": { "subnetIds": subnet.into_iter().collect::<Vec<_>>(), "vpcId": vpc },
        });
        let auth = format!(
            "AWS4-HMAC-SHA256 Credential=testing/20240101/{}/eks/aws4_request, SignedHeaders=host, Signature=0",
            self.region
        );
        let req = hyper::Request::post(format!("{}/clusters", self.moto))
            .header("content-type", "application/json")
            .header("authorization", auth)
            .body(Full::new(bytes::Bytes::from(body.to_string())))?;
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http();
        let resp = client.request(req).await?;
        let status = resp.status();
        let text = resp.into_body().collect().await?.to_bytes();
        ensure!(
            status.is_success(),
            "CreateCluster: {status} {}",
            String::from_utf8_lossy(&text)
        );
        Ok(())
    }
}

/// Applies JSON objects by server-side apply (JSON is YAML).
async fn apply(client: &kube::Client, objects: &[Value]) -> Result<()> {
    let docs: Vec<String> = objects.iter().map(Value::to_string).collect();
    apply_yaml(client, &docs.join("\n---\n")).await?;
    Ok(())
}

/// The shipped RBAC documents.
fn shipped_rbac() -> Result<Vec<Value>> {
    use serde::Deserialize;
    let mut docs = Vec::new();
    for document in serde_yaml::Deserializer::from_str(SHIPPED_RBAC) {
        let value = Value::deserialize(document)?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Installs the shipped RBAC as is, and binds the bed's operator user to the same roles: a twin
/// of every shipped binding with the user as subject. The Role meant for Karpenter's namespace is
/// copied, rules unchanged, into `karpenter_namespace` with its twin binding. Returns the twin
/// bindings outside that namespace, for removal.
async fn bind_operator_user(
    admin: &kube::Client,
    prefix: &str,
    karpenter_namespace: &str,
) -> Result<Vec<(Option<String>, String)>> {
    let docs = shipped_rbac()?;
    apply(admin, &docs).await?;
    let mut extra = Vec::new();
    let mut created = Vec::new();
    for doc in &docs {
        let kind = str_at(doc, "/kind");
        if kind == "Role" && str_at(doc, "/metadata/name") == KARPENTER_NAMESPACE_ROLE {
            let mut role = doc.clone();
            role["metadata"]["namespace"] = json!(karpenter_namespace);
            extra.push(role);
        }
        if kind != "RoleBinding" && kind != "ClusterRoleBinding" {
            continue;
        }
        let mut twin = doc.clone();
        let name = format!("{prefix}-{}", str_at(doc, "/metadata/name"));
        twin["metadata"]["name"] = json!(name);
        twin["subjects"] = json!([{
            "kind": "User", "name": OPERATOR_USER, "apiGroup": "rbac.authorization.k8s.io"
        }]);
        let namespace = if str_at(doc, "/roleRef/name") == KARPENTER_NAMESPACE_ROLE {
            twin["metadata"]["namespace"] = json!(karpenter_namespace);
            None
        } else {
            doc.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        if namespace.is_some() || kind == "ClusterRoleBinding" {
            created.push((namespace, name));
        }
        extra.push(twin);
    }
    apply(admin, &extra).await?;
    Ok(created)
}

async fn unbind_operator_user(
    admin: &kube::Client,
    bindings: &[(Option<String>, String)],
) -> Result<()> {
    for (namespace, name) in bindings {
        let deleted = match namespace {
            Some(ns) => Api::<RoleBinding>::namespaced(admin.clone(), ns)
                .delete(name, &DeleteParams::default())
                .await
                .map(|_| ()),
            None => Api::<ClusterRoleBinding>::all(admin.clone())
                .delete(name, &DeleteParams::default())
                .await
                .map(|_| ()),
        };
        match deleted {
            Ok(()) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Deletes the operator's Lease once the operator under test has released it. The shipped RBAC
/// itself stays installed (identical for every test, like the CRD): on a cluster running the real
/// operator, removing it would break that install.
async fn remove_released_lease(admin: &kube::Client) -> Result<()> {
    let leases: Api<Lease> = Api::namespaced(admin.clone(), "kube-system");
    let held = leases.get_opt("karpenter-health").await?.map(|lease| {
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .is_some_and(|h| !h.is_empty())
    });
    if held == Some(false) {
        leases
            .delete("karpenter-health", &DeleteParams::default())
            .await?;
    }
    Ok(())
}

fn summary(status: &KarpenterHealthStatus) -> String {
    status
        .conditions
        .iter()
        .map(|c| format!("{}={}({})", c.type_, c.status, c.reason))
        .collect::<Vec<_>>()
        .join(" ")
}

fn condition_is(
    status: &KarpenterHealthStatus,
    ty: ConditionType,
    want: &str,
    reason: Reason,
) -> bool {
    status
        .condition(ty)
        .is_some_and(|c| c.status == want && c.reason == reason.as_str())
}

fn message(status: &KarpenterHealthStatus, ty: ConditionType) -> &str {
    status
        .condition(ty)
        .map(|c| c.message.as_str())
        .unwrap_or("")
}

/// The sub-conditions that are False.
fn false_conditions(status: &KarpenterHealthStatus) -> BTreeSet<&str> {
    status
        .conditions
        .iter()
        .filter(|c| c.status == "False" && c.type_ != ConditionType::Ready.as_str())
        .map(|c| c.type_.as_str())
        .collect()
}

/// Asserts that exactly `expected` failed (others may be Unknown when they depend on the broken
/// fact, never False) and that Ready says so.
fn assert_only_failed(status: &KarpenterHealthStatus, expected: &[ConditionType]) {
    let want: BTreeSet<&str> = expected.iter().map(|c| c.as_str()).collect();
    assert_eq!(false_conditions(status), want, "{}", summary(status));
    assert!(
        condition_is(status, ConditionType::Ready, "False", Reason::ChecksFailed),
        "{}",
        summary(status)
    );
    for ty in expected {
        assert!(
            message(status, ConditionType::Ready).contains(ty.as_str()),
            "Ready must name {ty}: {}",
            message(status, ConditionType::Ready)
        );
    }
}

/// Whether a finding of condition `ty` names the object `kind`/`name` among its subjects.
fn finding_names(
    status: &KarpenterHealthStatus,
    ty: ConditionType,
    kind: &str,
    name: &str,
) -> bool {
    status
        .findings
        .iter()
        .filter(|f| f.condition_type == ty)
        .flat_map(|f| &f.subjects)
        .any(|s| s.kind == kind && s.name == name)
}

/// One test's healthy seeded setup: AWS side in its region, Kubernetes side in its namespace.
struct Fixture {
    bed: Bed,
    admin: kube::Client,
    /// Namespace (the Karpenter namespace), EC2NodeClass, NodePool and KarpenterHealth name.
    name: String,
    region: String,
    cluster: String,
    aws: Seeder,
    node_role_arn: String,
    profile: String,
    profile_arn: String,
    controller_role_arn: String,
    /// The role of an older node group, which nothing launches with any more.
    retired_role_arn: String,
    vpc: String,
    subnet: Option<String>,
    security_group: String,
    /// aws-auth did not exist before this test created it.
    created_aws_auth: bool,
    bindings: Vec<(Option<String>, String)>,
}

impl Fixture {
    /// Seeds a setup whose every condition is True: a node role with its policies in an
    /// instance profile, a VPC with a security group tagged for the cluster, the EKS cluster,
    /// Karpenter `version` configured with the cluster's name and annotated with its controller
    /// role, aws-auth mapping the node role, a NodePool and an EC2NodeClass whose Karpenter
    /// status is Ready.
    async fn seed(test: &str, region: &str, version: &str) -> Result<Self> {
        let bed = Bed::from_env()?;
        let admin = bed.admin_client().await?;
        install_health_crd(&admin).await?;
        let suffix = unique_suffix();
        let name = format!("kh-{test}-{suffix}");
        let cluster = format!("kh-{test}-{suffix}");
        let aws = Seeder::new(&bed, region).await?;
        let node_role = format!("KarpenterNodeRole-{test}-{suffix}");
        let node_role_arn = aws.node_role(&node_role).await?;
        let partition = node_role_arn.split(':').nth(1).unwrap_or("aws").to_owned();
        let account = node_role_arn
            .split(':')
            .nth(4)
            .unwrap_or_default()
            .to_owned();
        let profile = format!("KarpenterNodeInstanceProfile-{test}-{suffix}");
        aws.instance_profile(&profile, &node_role).await?;
        let profile_arn = format!("arn:{partition}:iam::{account}:instance-profile/{profile}");
        let controller_role_arn =
            format!("arn:{partition}:iam::{account}:role/KarpenterControllerRole-{test}-{suffix}");
        let retired_role_arn =
            format!("arn:{partition}:iam::{account}:role/NodeGroupRole-{test}-{suffix}");
        let vpc = aws.vpc("10.40.0.0/16").await?;
        let subnet = if region.starts_with("us-iso") {
            None
        } else {
            Some(aws.subnet(&vpc, "10.40.1.0/24").await?)
        };
        let cluster_tag = format!("kubernetes.io/cluster/{cluster}");
        let security_group = aws
            .security_group(
                &vpc,
                &format!("{cluster}-nodes"),
                &[
                    ("karpenter.sh/discovery", &cluster),
                    (&cluster_tag, "owned"),
                ],
            )
            .await?;
        aws.eks_cluster(
            &cluster,
            &format!("arn:{partition}:iam::{account}:role/{cluster}-cluster"),
            &vpc,
            subnet.as_deref(),
        )
        .await?;

        let mut fixture = Self {
            bed,
            admin,
            name,
            region: region.to_owned(),
            cluster,
            aws,
            node_role_arn,
            profile,
            profile_arn,
            controller_role_arn,
            retired_role_arn,
            vpc,
            subnet,
            security_group,
            created_aws_auth: false,
            bindings: Vec::new(),
        };
        fixture.seed_kubernetes(version).await?;
        Ok(fixture)
    }

    async fn seed_kubernetes(&mut self, version: &str) -> Result<()> {
        let ns = self.name.clone();
        apply(
            &self.admin,
            &[json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})],
        )
        .await?;
        self.bindings = bind_operator_user(&self.admin, &self.name, &ns).await?;
        apply(
            &self.admin,
            &[json!({
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "karpenter", "namespace": ns,
                             "annotations": {"eks.amazonaws.com/role-arn": self.controller_role_arn}},
            })],
        )
        .await?;
        self.set_karpenter_version(version).await?;
        self.created_aws_auth = Api::<ConfigMap>::namespaced(self.admin.clone(), "kube-system")
            .get_opt("aws-auth")
            .await?
            .is_none();
        let node_role_arn = self.node_role_arn.clone();
        self.map_roles(&[&node_role_arn]).await?;
        apply(
            &self.admin,
            &[
                json!({
                    "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                    "metadata": {"name": self.name},
                    "spec": {"template": {"spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": self.name},
                        "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                    }}},
                }),
                json!({
                    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                    "metadata": {"name": self.name},
                    "spec": {
                        "instanceProfile": self.profile,
                        "amiSelectorTerms": [{"alias": "al2023@latest"}],
                        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": self.cluster}}],
                        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": self.cluster}}],
                    },
                }),
            ],
        )
        .await?;
        self.karpenter_reports_ready().await
    }

    /// Removes everything this test created, and its entries from aws-auth.
    async fn teardown(self) -> Result<()> {
        let mut errors = Vec::new();
        let claims: Api<NodeClaim> = Api::all(self.admin.clone());
        let selector = format!("kh-e2e/test={}", self.name);
        match claims
            .delete_collection(
                &DeleteParams::default(),
                &ListParams::default().labels(&selector),
            )
            .await
        {
            Ok(_) => {}
            Err(e) => errors.push(format!("nodeclaims: {e}")),
        }
        let deleted = [
            Api::<EC2NodeClass>::all(self.admin.clone())
                .delete(&self.name, &DeleteParams::default())
                .await
                .map(|_| ()),
            Api::<NodePool>::all(self.admin.clone())
                .delete(&self.name, &DeleteParams::default())
                .await
                .map(|_| ()),
            Api::<Namespace>::all(self.admin.clone())
                .delete(&self.name, &DeleteParams::default())
                .await
                .map(|_| ()),
        ];
        errors.extend(
            deleted
                .into_iter()
                .filter_map(|r| r.err().map(|e| e.to_string())),
        );
        if let Err(e) = self.map_roles(&[]).await {
            errors.push(format!("aws-auth: {e:#}"));
        }
        if let Err(e) = unbind_operator_user(&self.admin, &self.bindings).await {
            errors.push(format!("bindings: {e:#}"));
        }
        if let Err(e) = remove_released_lease(&self.admin).await {
            errors.push(format!("lease: {e:#}"));
        }
        ensure!(errors.is_empty(), "teardown: {}", errors.join("; "));
        Ok(())
    }

    /// Runs the test body, then tears down whatever the body's outcome; the body's error wins.
    async fn finish(self, outcome: Result<()>) -> Result<()> {
        let teardown = self.teardown().await;
        outcome.and(teardown)
    }

    /// The operator as the bed's non-admin user, watching this test's Karpenter namespace and
    /// reading AWS at `endpoint` (moto, or a fault proxy before it) in this test's region.
    async fn start_operator(
        &self,
        endpoint: Option<&str>,
        leader_elect: bool,
    ) -> Result<OperatorHandle> {
        let endpoint = match endpoint {
            Some(e) => e.to_owned(),
            None => self.bed.moto_url()?.to_owned(),
        };
        let sdk = self.bed.aws_config_at(&endpoint, &self.region).await?;
        let aws = AwsPort::from_sdk_config(&sdk, fast_aws_options());
        let config = OperatorConfig {
            karpenter_namespace: self.name.clone(),
            refresh_interval: REFRESH,
            leader_elect,
            ..OperatorConfig::for_tests()
        };
        Ok(OperatorHandle::start(
            self.bed.operator_client().await?,
            config,
            aws,
        ))
    }

    async fn set_karpenter_version(&self, version: &str) -> Result<()> {
        apply(
            &self.admin,
            &[json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "karpenter", "namespace": self.name},
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": {"app": "karpenter"}},
                    "template": {
                        "metadata": {"labels": {"app": "karpenter"}},
                        "spec": {
                            "serviceAccountName": "karpenter",
                            "containers": [{
                                "name": "controller",
                                "image": format!("public.ecr.aws/karpenter/controller:{version}"),
                                "env": [{"name": "CLUSTER_NAME", "value": self.cluster}],
                            }],
                        },
                    },
                },
            })],
        )
        .await
    }

    /// Makes this test's entries in kube-system/aws-auth exactly node mappings of `role_arns`,
    /// keeping every other entry as it is (the ConfigMap is shared with other tests).
    async fn map_roles(&self, role_arns: &[&str]) -> Result<()> {
        let api: Api<ConfigMap> = Api::namespaced(self.admin.clone(), "kube-system");
        let current = api.get_opt("aws-auth").await?;
        let text = current
            .as_ref()
            .and_then(|cm| cm.data.as_ref())
            .and_then(|d| d.get("mapRoles"))
            .cloned()
            .unwrap_or_default();
        let mut entries: Vec<serde_yaml::Value> = if text.trim().is_empty() {
            Vec::new()
        } else {
            serde_yaml::from_str(&text).context("parsing aws-auth mapRoles")?
        };
        let ours = [
            self.node_role_arn.as_str(),
            self.controller_role_arn.as_str(),
            self.retired_role_arn.as_str(),
        ];
        entries.retain(|e| {
            !e.get("rolearn")
                .and_then(serde_yaml::Value::as_str)
                .is_some_and(|arn| ours.contains(&arn))
        });
        for arn in role_arns {
            entries.push(serde_yaml::to_value(json!({
                "rolearn": arn,
                "username": NODE_USERNAME,
                "groups": ["system:bootstrappers", "system:nodes"],
            }))?);
        }
        if entries.is_empty() && self.created_aws_auth {
            if current.is_some() {
                api.delete("aws-auth", &DeleteParams::default()).await?;
            }
            return Ok(());
        }
        let map_roles = serde_yaml::to_string(&entries)?;
        match current {
            Some(_) => {
                api.patch(
                    "aws-auth",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"mapRoles": map_roles}})),
                )
                .await?;
            }
            None => {
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": "aws-auth", "namespace": "kube-system"},
                    "data": {"mapRoles": map_roles},
                }))?;
                api.create(&PostParams::default(), &cm).await?;
            }
        }
        Ok(())
    }

    async fn node_class(&self) -> Result<EC2NodeClass> {
        Ok(Api::<EC2NodeClass>::all(self.admin.clone())
            .get(&self.name)
            .await?)
    }

    async fn patch_node_class_spec(&self, spec: Value) -> Result<()> {
        Api::<EC2NodeClass>::all(self.admin.clone())
            .patch(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": spec})),
            )
            .await?;
        Ok(())
    }

    /// Writes the EC2NodeClass status the way Karpenter does, for the current generation.
    async fn write_karpenter_status(
        &self,
        conditions: &[(&str, &str, &str, SignedDuration)],
    ) -> Result<()> {
        let generation = self.node_class().await?.metadata.generation;
        let conditions: Vec<Value> = conditions
            .iter()
            .map(|(ty, status, reason, ago)| {
                json!({
                    "type": ty, "status": status, "reason": reason,
                    "message": if *status == "True" { "" } else { "object is awaiting reconciliation" },
                    "lastTransitionTime": rfc3339_ago(*ago),
                    "observedGeneration": generation,
                })
            })
            .collect();
        let subnets: Vec<Value> = self
            .subnet
            .iter()
            .map(|s| json!({"id": s, "zone": format!("{}a", self.region)}))
            .collect();
        Api::<EC2NodeClass>::all(self.admin.clone())
            .patch_status(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                    "instanceProfile": self.profile,
                    "securityGroups": [{"id": self.security_group, "name": format!("{}-nodes", self.cluster)}],
                    "subnets": subnets,
                    "conditions": conditions,
                }})),
            )
            .await?;
        Ok(())
    }

    async fn karpenter_reports_ready(&self) -> Result<()> {
        let ready = SignedDuration::from_mins(1);
        self.write_karpenter_status(&[
            ("AMIsReady", "True", "AMIsReady", ready),
            ("SubnetsReady", "True", "SubnetsReady", ready),
            ("SecurityGroupsReady", "True", "SecurityGroupsReady", ready),
            (
                "InstanceProfileReady",
                "True",
                "InstanceProfileReady",
                ready,
            ),
            ("ValidationSucceeded", "True", "ValidationSucceeded", ready),
            ("Ready", "True", "Ready", ready),
        ])
        .await
    }

    /// A NodeClaim of this EC2NodeClass with the given status conditions (Karpenter's shapes).
    async fn node_claim(
        &self,
        suffix: &str,
        provider_id: &str,
        conditions: Value,
    ) -> Result<String> {
        let name = format!("{}-{suffix}", self.name);
        apply(
            &self.admin,
            &[json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": self.name, "kh-e2e/test": self.name}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": self.name},
                    "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                },
            })],
        )
        .await?;
        Api::<NodeClaim>::all(self.admin.clone())
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"status": {"providerID": provider_id, "conditions": conditions}}),
                ),
            )
            .await?;
        Ok(name)
    }

    /// Waits until this test's KarpenterHealth status satisfies `accept`; on timeout the error
    /// carries the last status seen.
    async fn wait_status(
        &self,
        what: &str,
        accept: impl Fn(&KarpenterHealthStatus) -> bool,
    ) -> Result<KarpenterHealthStatus> {
        let api: Api<KarpenterHealth> = Api::all(self.admin.clone());
        let last = Mutex::new(String::from("no status yet"));
        let (api, last_ref, accept) = (&api, &last, &accept);
        let found = wait_for(what, DEADLINE, || async move {
            let Some(status) = api.get_opt(&self.name).await?.and_then(|h| h.status) else {
                return Ok(None);
            };
            *last_ref.lock().unwrap_or_else(PoisonError::into_inner) = summary(&status);
            Ok(accept(&status).then_some(status))
        })
        .await;
        let last = last.into_inner().unwrap_or_else(PoisonError::into_inner);
        found.with_context(|| format!("last status of {}: {last}", self.name))
    }

    /// Waits until every condition is True for the EC2NodeClass's current generation.
    async fn wait_healthy(&self, when: &str) -> Result<KarpenterHealthStatus> {
        let generation = self.node_class().await?.metadata.generation;
        let status = self
            .wait_status(&format!("every condition True {when}"), |s| {
                s.conditions.len() == ConditionType::ALL.len()
                    && s.conditions.iter().all(|c| c.status == "True")
                    && s.observed_generation == generation
            })
            .await?;
        assert!(
            condition_is(
                &status,
                ConditionType::Ready,
                "True",
                Reason::AllChecksPassed
            ),
            "{}",
            summary(&status)
        );
        Ok(status)
    }

    /// Waits until each of `expected` is False with its reason.
    async fn wait_failed(
        &self,
        expected: &[(ConditionType, Reason)],
    ) -> Result<KarpenterHealthStatus> {
        let what: Vec<String> = expected
            .iter()
            .map(|(ty, reason)| format!("{ty}=False({reason})"))
            .collect();
        self.wait_status(&what.join(" and "), |s| {
            expected
                .iter()
                .all(|(ty, reason)| condition_is(s, *ty, "False", *reason))
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_profile_arn_fails_the_profile_check_and_karpenters_stuck_validation_is_named()
-> Result<()> {
    let fx = Fixture::seed("arn", "us-west-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        fx.wait_healthy("for the seeded setup").await?;

        // The user pastes the profile's ARN where Karpenter wants its name.
        fx.patch_node_class_spec(json!({"instanceProfile": fx.profile_arn}))
            .await?;
        let status = fx
            .wait_failed(&[(
                ConditionType::InstanceProfileReady,
                Reason::InstanceProfileIsArn,
            )])
            .await?;
        assert_only_failed(&status, &[ConditionType::InstanceProfileReady]);
        let text = message(&status, ConditionType::InstanceProfileReady);
        assert!(
            text.contains(&fx.profile_arn) && text.contains(&format!("{:?}", fx.profile)),
            "names the ARN and the name to use instead: {text}"
        );

        // Karpenter then reports the profile ready while validation never concludes.
        let long = SignedDuration::from_mins(45);
        let now = SignedDuration::ZERO;
        fx.write_karpenter_status(&[
            ("InstanceProfileReady", "True", "InstanceProfileReady", now),
            (
                "ValidationSucceeded",
                "Unknown",
                "AwaitingReconciliation",
                long,
            ),
            ("Ready", "Unknown", "UnhealthyDependents", long),
        ])
        .await?;
        let status = fx
            .wait_failed(&[
                (
                    ConditionType::InstanceProfileReady,
                    Reason::InstanceProfileIsArn,
                ),
                (
                    ConditionType::KarpenterStatusConsistent,
                    Reason::ValidationStuck,
                ),
            ])
            .await?;
        assert_only_failed(
            &status,
            &[
                ConditionType::InstanceProfileReady,
                ConditionType::KarpenterStatusConsistent,
            ],
        );
        let stuck = message(&status, ConditionType::KarpenterStatusConsistent);
        assert!(
            stuck.contains("ValidationSucceeded has been Unknown for 45m")
                && stuck.contains("spec.instanceProfile is an ARN"),
            "{stuck}"
        );
        assert!(
            message(&status, ConditionType::InstanceProfileReady)
                .contains("although Karpenter reports InstanceProfileReady=True"),
            "{}",
            message(&status, ConditionType::InstanceProfileReady)
        );

        // The fix: the name again, and Karpenter validates.
        fx.patch_node_class_spec(json!({"instanceProfile": fx.profile}))
            .await?;
        fx.karpenter_reports_ready().await?;
        fx.wait_healthy("after the profile name is restored")
            .await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_role_mapped_instead_of_the_node_role_and_the_nodeclaim_stuck_unregistered_are_named()
-> Result<()> {
    let fx = Fixture::seed("map", "eu-west-1", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        let long_ago = rfc3339_ago(SignedDuration::from_mins(40));
        let registered = fx
            .node_claim(
                "registered",
                "aws:///eu-west-1a/i-0aaaaaaaaaaaaaaa1",
                json!([
                    {"type": "Launched", "status": "True", "reason": "Launched", "lastTransitionTime": long_ago},
                    {"type": "Registered", "status": "True", "reason": "Registered", "lastTransitionTime": long_ago},
                ]),
            )
            .await?;
        let status = fx.wait_healthy("with a registered NodeClaim").await?;
        assert!(
            message(&status, ConditionType::NodeClaimsRegistered).contains("None of the 1 NodeClaim"),
            "{}",
            message(&status, ConditionType::NodeClaimsRegistered)
        );

        // aws-auth gets the controller's role where the node role belongs, and the next node
        // launches but never joins.
        fx.map_roles(&[&fx.controller_role_arn]).await?;
        let stuck = fx
            .node_claim(
                "stuck",
                "aws:///eu-west-1a/i-0bbbbbbbbbbbbbbb2",
                json!([
                    {"type": "Launched", "status": "True", "reason": "Launched", "lastTransitionTime": rfc3339_ago(SignedDuration::from_mins(20))},
                    {"type": "Registered", "status": "Unknown", "reason": "NodeNotFound", "message": "Node not registered with cluster", "lastTransitionTime": rfc3339_ago(SignedDuration::from_mins(20))},
                ]),
            )
            .await?;
        let status = fx
            .wait_failed(&[
                (ConditionType::NodeRoleMapped, Reason::ControllerRoleMappedInstead),
                (ConditionType::NodeClaimsRegistered, Reason::NodeClaimsNotRegistering),
            ])
            .await?;
        assert_only_failed(
            &status,
            &[ConditionType::NodeRoleMapped, ConditionType::NodeClaimsRegistered],
        );
        let mapped = message(&status, ConditionType::NodeRoleMapped);
        assert!(
            mapped.contains(&fx.controller_role_arn) && mapped.contains(&fx.node_role_arn),
            "{mapped}"
        );
        let registration = message(&status, ConditionType::NodeClaimsRegistered);
        assert!(
            registration.contains(&stuck)
                && !registration.contains(&registered)
                && registration.contains("NodeRoleMapped=False (ControllerRoleMappedInstead)"),
            "names the stuck NodeClaim and the likely cause: {registration}"
        );
        assert!(finding_names(&status, ConditionType::NodeClaimsRegistered, "NodeClaim", &stuck));
        assert!(finding_names(&status, ConditionType::NodeRoleMapped, "ConfigMap", "aws-auth"));

        // The fix: map the node role; the waiting node then registers.
        fx.map_roles(&[&fx.node_role_arn]).await?;
        Api::<NodeClaim>::all(fx.admin.clone())
            .patch_status(
                &stuck,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": [
                    {"type": "Launched", "status": "True", "reason": "Launched", "lastTransitionTime": rfc3339_ago(SignedDuration::from_mins(21))},
                    {"type": "Registered", "status": "True", "reason": "Registered", "lastTransitionTime": rfc3339_ago(SignedDuration::ZERO)},
                ]}})),
            )
            .await?;
        fx.wait_healthy("after the node role is mapped and the node registered")
            .await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_pod_selecting_a_node_role_label_is_named_up_to_karpenter_1_8_and_allowed_from_1_9()
-> Result<()> {
    let fx = Fixture::seed("labels", "eu-west-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        fx.wait_healthy("under Karpenter 1.8.6").await?;

        // A workload asks for nodes labelled node-role.kubernetes.io/web; it stays Pending.
        let pods: Api<Pod> = Api::namespaced(fx.admin.clone(), &fx.name);
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": fx.name},
            "spec": {
                "nodeSelector": {"node-role.kubernetes.io/web": "", "karpenter.sh/nodepool": fx.name},
                "automountServiceAccountToken": false,
                "containers": [{"name": "web", "image": "nginx"}],
            },
        }))?;
        // Pods need their ServiceAccount; the bed's controller-manager creates `default` late
        // after an API server restart, so the test does not wait for it.
        let default_sa: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": "default", "namespace": fx.name}}))?;
        match Api::<ServiceAccount>::namespaced(fx.admin.clone(), &fx.name)
            .create(&PostParams::default(), &default_sa)
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        pods.create(&PostParams::default(), &pod).await?;
        let status = fx
            .wait_failed(&[(ConditionType::LabelsAllowed, Reason::RestrictedLabelDomain)])
            .await?;
        assert_only_failed(&status, &[ConditionType::LabelsAllowed]);
        let text = message(&status, ConditionType::LabelsAllowed);
        assert!(
            text.contains(&format!("{}/web", fx.name))
                && text.contains("node-role.kubernetes.io/web")
                && text.contains("Karpenter 1.8.6"),
            "names the Pod, the key and the version: {text}"
        );
        assert!(finding_names(&status, ConditionType::LabelsAllowed, "Pod", "web"));

        // Karpenter 1.9 accepts the label: upgrading is the fix, the Pod unchanged.
        fx.set_karpenter_version("1.9.0").await?;
        let status = fx.wait_healthy("under Karpenter 1.9.0").await?;
        assert!(
            message(&status, ConditionType::LabelsAllowed).contains("1.9.0"),
            "{}",
            message(&status, ConditionType::LabelsAllowed)
        );
        let pending = pods.get("web").await?;
        assert_eq!(
            pending.status.and_then(|s| s.phase).as_deref(),
            Some("Pending")
        );
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_cluster_of_the_same_name_and_a_security_group_of_another_cluster_are_caught()
-> Result<()> {
    let fx = Fixture::seed("identity", "eu-central-1", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        fx.wait_healthy("for the seeded setup").await?;

        // A second cluster, created from the same template, runs Karpenter nodes with this
        // cluster's name in its own VPC.
        let other_vpc = fx.aws.vpc("10.41.0.0/16").await?;
        let other_subnet = fx.aws.subnet(&other_vpc, "10.41.1.0/24").await?;
        let cluster_tag = format!("kubernetes.io/cluster/{}", fx.cluster);
        let foreign = fx
            .aws
            .run_instances(
                &other_subnet,
                2,
                &[
                    (cluster_tag.as_str(), "owned"),
                    ("eks:eks-cluster-name", fx.cluster.as_str()),
                    ("karpenter.sh/nodepool", "default"),
                ],
            )
            .await?;
        let status = fx
            .wait_failed(&[(
                ConditionType::ClusterIdentityUnique,
                Reason::ClusterNameSharedWithOtherCluster,
            )])
            .await?;
        assert_only_failed(&status, &[ConditionType::ClusterIdentityUnique]);
        let text = message(&status, ConditionType::ClusterIdentityUnique);
        for id in &foreign {
            assert!(
                text.contains(id.as_str()) && text.contains(&other_vpc),
                "{text}"
            );
            assert!(finding_names(
                &status,
                ConditionType::ClusterIdentityUnique,
                "EC2Instance",
                id
            ));
        }
        fx.aws.terminate(&foreign).await?;
        fx.wait_healthy("after the other cluster's instances are gone")
            .await?;

        // A selector term added for a shared group picks a group tagged for another cluster.
        let team = format!("shared-{}", unique_suffix());
        let other_cluster = format!("{}-other", fx.cluster);
        let shared = fx
            .aws
            .security_group(
                &fx.vpc,
                &team,
                &[
                    ("team", &team),
                    (&format!("kubernetes.io/cluster/{other_cluster}"), "owned"),
                ],
            )
            .await?;
        let own_term = json!({"tags": {"karpenter.sh/discovery": fx.cluster}});
        fx.patch_node_class_spec(
            json!({"securityGroupSelectorTerms": [own_term, {"tags": {"team": team}}]}),
        )
        .await?;
        let status = fx
            .wait_failed(&[(
                ConditionType::SecurityGroupsReady,
                Reason::SecurityGroupTaggedForOtherCluster,
            )])
            .await?;
        assert_only_failed(&status, &[ConditionType::SecurityGroupsReady]);
        let text = message(&status, ConditionType::SecurityGroupsReady);
        assert!(
            text.contains(&shared) && text.contains(&other_cluster),
            "{text}"
        );
        assert!(finding_names(
            &status,
            ConditionType::SecurityGroupsReady,
            "SecurityGroup",
            &shared
        ));

        fx.patch_node_class_spec(json!({"securityGroupSelectorTerms": [own_term]}))
            .await?;
        fx.wait_healthy("after the shared group's term is removed")
            .await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karpenter_before_1_7_in_an_isolated_region_fails_metadata_options_and_1_7_passes()
-> Result<()> {
    let fx = Fixture::seed("iso", "us-iso-east-1", "1.7.0").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        let status = fx
            .wait_healthy("under Karpenter 1.7.0 in us-iso-east-1")
            .await?;
        assert!(
            message(&status, ConditionType::MetadataOptionsSupported)
                .contains("no longer sends httpProtocolIPv6 in us-iso-east-1"),
            "{}",
            message(&status, ConditionType::MetadataOptionsSupported)
        );

        // Rolled back to a release that still sends httpProtocolIPv6.
        fx.set_karpenter_version("1.0.1").await?;
        let status = fx
            .wait_failed(&[(
                ConditionType::MetadataOptionsSupported,
                Reason::HttpProtocolIPv6UnsupportedInRegion,
            )])
            .await?;
        assert_only_failed(&status, &[ConditionType::MetadataOptionsSupported]);
        let text = message(&status, ConditionType::MetadataOptionsSupported);
        assert!(
            text.contains("us-iso-east-1") && text.contains("1.0.1") && text.contains("1.7.0"),
            "{text}"
        );

        fx.set_karpenter_version("1.7.0").await?;
        fx.wait_healthy("after upgrading to 1.7.0 again").await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

/// Every KarpenterHealth status the API server held for one object while it ran, from a watch
/// (a watch delivers every write).
#[derive(Debug)]
struct StatusLog {
    seen: Arc<Mutex<Vec<KarpenterHealthStatus>>>,
    task: tokio::task::JoinHandle<()>,
}

impl StatusLog {
    fn start(client: &kube::Client, name: &str) -> Self {
        let seen: Arc<Mutex<Vec<KarpenterHealthStatus>>> = Arc::default();
        let api: Api<KarpenterHealth> = Api::all(client.clone());
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let sink = seen.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, config)
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(event) = stream.next().await {
                if let Ok(health) = event
                    && let Some(status) = health.status
                {
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(status);
                }
            }
        });
        Self { seen, task }
    }

    fn stop(self) -> Vec<KarpenterHealthStatus> {
        self.task.abort();
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Whether every AWS-derived condition is Unknown with `reason` (the cause) and every
/// Kubernetes-derived one still True.
fn aws_unknown_because(status: &KarpenterHealthStatus, reason: Reason) -> bool {
    AWS_CONDITIONS
        .iter()
        .all(|ty| condition_is(status, *ty, "Unknown", reason))
        && KUBE_CONDITIONS
            .iter()
            .all(|ty| status.condition(*ty).is_some_and(|c| c.status == "True"))
}

/// Holds an AWS outage (every service answers `fault`) until the AWS-derived conditions are
/// Unknown with `reason` and stay so over two more refreshes, with the cause in each message.
async fn hold_outage(
    fx: &Fixture,
    proxy: &FaultProxy,
    fault: Fault,
    reason: Reason,
    cause: &str,
) -> Result<()> {
    for service in ["sts", "iam", "ec2", "eks"] {
        proxy.inject(service, None, fault);
    }
    let status = fx
        .wait_status(&format!("AWS conditions Unknown({reason})"), |s| {
            aws_unknown_because(s, reason)
        })
        .await?;
    for ty in AWS_CONDITIONS {
        assert!(
            message(&status, ty).contains(cause),
            "{ty}: {}",
            message(&status, ty)
        );
    }
    assert!(
        condition_is(
            &status,
            ConditionType::Ready,
            "Unknown",
            Reason::ChecksUnknown
        ),
        "{}",
        summary(&status)
    );
    let since = status.last_evaluated.context("lastEvaluated")?.0;
    let calls_before: usize = proxy.counts().values().sum();
    let status = fx
        .wait_status("two more evaluations during the outage", |s| {
            s.last_evaluated.as_ref().is_some_and(|t| {
                t.0.duration_since(since)
                    >= SignedDuration::try_from(REFRESH * 2).unwrap_or(SignedDuration::ZERO)
            })
        })
        .await?;
    ensure!(
        aws_unknown_because(&status, reason),
        "still Unknown({reason}) as the outage goes on: {}",
        summary(&status)
    );
    let calls_during: usize = proxy.counts().values().sum::<usize>() - calls_before;
    ensure!(
        calls_during > 0,
        "the operator kept asking AWS during the outage"
    );
    proxy.clear_faults();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_throttled_or_unreachable_makes_the_aws_checks_unknown_with_the_cause_and_never_false()
-> Result<()> {
    let fx = Fixture::seed("outage", "ap-southeast-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        let proxy = FaultProxy::start(fx.bed.moto_url()?).await?;
        let operator = fx.start_operator(Some(&proxy.url()), true).await?;
        fx.wait_healthy("through the fault proxy").await?;
        let log = StatusLog::start(&fx.admin, &fx.name);

        hold_outage(
            &fx,
            &proxy,
            Fault::Throttle,
            Reason::AwsThrottled,
            "throttled",
        )
        .await?;
        fx.wait_healthy("once AWS stops throttling").await?;
        hold_outage(
            &fx,
            &proxy,
            Fault::Reset,
            Reason::AwsUnavailable,
            "endpoint unavailable",
        )
        .await?;
        fx.wait_healthy("once AWS is reachable again").await?;

        let seen = log.stop();
        let false_at: Vec<String> = seen
            .iter()
            .filter(|s| s.conditions.iter().any(|c| c.status == "False"))
            .map(summary)
            .collect();
        assert!(
            false_at.is_empty(),
            "no condition may be False while AWS is out; saw {false_at:#?}"
        );
        for reason in [Reason::AwsThrottled, Reason::AwsUnavailable] {
            assert!(
                seen.iter().any(|s| aws_unknown_because(s, reason)),
                "the watch saw the {reason} outage ({} statuses)",
                seen.len()
            );
        }
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

/// Restarts the bed's API server (same port, same etcd) and waits until it serves again.
async fn restart_api_server(bed: &Bed) -> Result<()> {
    let dir = bed.dir.clone();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("bash")
            .arg(BED_SCRIPT)
            .arg("restart-apiserver")
            .arg(dir)
            .output()
    })
    .await??;
    ensure!(
        output.status.success(),
        "restart-apiserver failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_rides_out_an_api_server_restart_and_keeps_status_correct() -> Result<()> {
    let fx = Fixture::seed("restart", "ca-central-1", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        let before = fx.wait_healthy("before the restart").await?;
        let healths: Api<KarpenterHealth> = Api::all(fx.admin.clone());
        let uid = healths.get(&fx.name).await?.metadata.uid;
        let log = StatusLog::start(&fx.admin, &fx.name);

        restart_api_server(&fx.bed).await?;
        let restarted = Timestamp::now();

        // The operator evaluates again, without being restarted, and the status is unchanged:
        // nothing it wrote around the outage flipped a condition (its caches were kept).
        let after = fx
            .wait_status("an evaluation after the restart", |s| {
                s.last_evaluated.as_ref().is_some_and(|t| t.0 > restarted)
            })
            .await?;
        assert_eq!(summary(&after), summary(&before));
        let seen = log.stop();
        let changed: Vec<String> = seen
            .iter()
            .map(summary)
            .filter(|s| *s != summary(&before))
            .collect();
        assert!(
            changed.is_empty(),
            "status changed around the restart: {changed:#?}"
        );

        // Each watch is back: aws-auth (cluster facts) ...
        // (aws-auth is edited to map an old node group's role only)
        fx.map_roles(&[&fx.retired_role_arn]).await?;
        let status = fx
            .wait_failed(&[(ConditionType::NodeRoleMapped, Reason::NodeRoleNotMapped)])
            .await?;
        assert_only_failed(&status, &[ConditionType::NodeRoleMapped]);
        fx.map_roles(&[&fx.node_role_arn]).await?;
        fx.wait_healthy("after aws-auth maps the node role again")
            .await?;
        // ... the EC2NodeClass itself ...
        fx.patch_node_class_spec(json!({"instanceProfile": fx.profile_arn}))
            .await?;
        fx.wait_failed(&[(
            ConditionType::InstanceProfileReady,
            Reason::InstanceProfileIsArn,
        )])
        .await?;
        fx.patch_node_class_spec(json!({"instanceProfile": fx.profile}))
            .await?;
        fx.karpenter_reports_ready().await?;
        fx.wait_healthy("after the profile name is restored")
            .await?;
        // ... and the KarpenterHealth: a deleted one is put back.
        healths.delete(&fx.name, &DeleteParams::default()).await?;
        wait_for("the KarpenterHealth to be recreated", DEADLINE, || async {
            Ok(healths
                .get_opt(&fx.name)
                .await?
                .filter(|h| h.metadata.uid != uid && h.status.is_some())
                .map(|_| ()))
        })
        .await?;
        fx.wait_healthy("for the recreated KarpenterHealth").await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

/// What `user` (with `groups`) may do, asked of the API server's authorizer.
async fn allowed(
    admin: &kube::Client,
    user: &str,
    groups: &[&str],
    attributes: ResourceAttributes,
) -> Result<bool> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            groups: Some(groups.iter().map(|g| g.to_string()).collect()),
            resource_attributes: Some(attributes),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let answer = Api::<SubjectAccessReview>::all(admin.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// `verb group/resource[/subresource]` in `namespace` on `name`.
fn attributes(
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
    name: Option<&str>,
) -> ResourceAttributes {
    let (group, rest) = resource.split_once(':').unwrap_or(("", resource));
    let (resource, subresource) = match rest.split_once('/') {
        Some((r, s)) => (r, Some(s.to_owned())),
        None => (rest, None),
    };
    ResourceAttributes {
        verb: Some(verb.to_owned()),
        group: Some(group.to_owned()),
        resource: Some(resource.to_owned()),
        subresource,
        namespace: namespace.map(str::to_owned),
        name: name.map(str::to_owned),
        ..ResourceAttributes::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_identity_is_not_admin_and_the_shipped_rbac_grants_only_what_it_uses()
-> Result<()> {
    let bed = Bed::from_env()?;
    let admin = bed.admin_client().await?;
    install_health_crd(&admin).await?;
    let name = format!("kh-rbac-{}", unique_suffix());
    apply(
        &admin,
        &[json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})],
    )
    .await?;
    let bindings = bind_operator_user(&admin, &name, &name).await?;
    let outcome: Result<()> = async {
        // The real calls: no Secrets, no other ConfigMaps in kube-system (once the new
        // bindings have reached the authorizer's cache).
        let operator = bed.operator_client().await?;
        let aws_auth: Api<ConfigMap> = Api::namespaced(operator.clone(), "kube-system");
        wait_for("the bindings to take effect", DEADLINE, || async {
            let by_name = ListParams::default().fields("metadata.name=aws-auth");
            Ok(aws_auth.list(&by_name).await.ok().map(|_| ()))
        })
        .await?;
        match Api::<Secret>::all(operator.clone())
            .list(&ListParams::default())
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 403 => {}
            other => bail!("listing Secrets must be forbidden, got {other:?}"),
        }
        match Api::<ConfigMap>::namespaced(operator.clone(), "kube-system")
            .list(&ListParams::default())
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 403 => {}
            other => {
                bail!("listing every ConfigMap in kube-system must be forbidden, got {other:?}")
            }
        }
        Api::<ConfigMap>::namespaced(operator.clone(), "kube-system")
            .list(&ListParams::default().fields("metadata.name=aws-auth"))
            .await
            .context("listing aws-auth by name is allowed")?;
        Api::<ServiceAccount>::namespaced(operator.clone(), &name)
            .list(&ListParams::default().fields("metadata.name=karpenter"))
            .await
            .context("listing Karpenter's ServiceAccount by name is allowed")?;

        let ks = Some("kube-system");
        // (the test user's Karpenter namespace, the ServiceAccount's Karpenter namespace)
        let subjects = [
            (
                OPERATOR_USER.to_owned(),
                vec!["system:authenticated"],
                name.clone(),
            ),
            (
                "system:serviceaccount:kube-system:karpenter-health".to_owned(),
                vec![
                    "system:serviceaccounts",
                    "system:serviceaccounts:kube-system",
                    "system:authenticated",
                ],
                "kube-system".to_owned(),
            ),
        ];
        for (user, groups, karpenter_ns) in &subjects {
            let kns = Some(karpenter_ns.as_str());
            let must_allow = [
                attributes("watch", "karpenter.k8s.aws:ec2nodeclasses", None, None),
                attributes("list", "karpenter.sh:nodepools", None, None),
                attributes("watch", "karpenter.sh:nodeclaims", None, None),
                attributes("list", "pods", None, None),
                attributes("watch", "configmaps", ks, Some("aws-auth")),
                attributes("list", "serviceaccounts", ks, Some("aws-node")),
                attributes("watch", "apps:deployments", kns, Some("karpenter")),
                attributes("list", "serviceaccounts", kns, Some("karpenter")),
                attributes("create", "karpenter-health.io:karpenterhealths", None, None),
                attributes(
                    "patch",
                    "karpenter-health.io:karpenterhealths/status",
                    None,
                    Some("x"),
                ),
                attributes("create", "events.k8s.io:events", Some("default"), None),
                attributes("create", "coordination.k8s.io:leases", ks, None),
                attributes(
                    "patch",
                    "coordination.k8s.io:leases",
                    ks,
                    Some("karpenter-health"),
                ),
            ];
            for attrs in must_allow {
                ensure!(
                    allowed(&admin, user, groups, attrs.clone()).await?,
                    "{user} must be allowed {attrs:?}"
                );
            }
            let must_deny = [
                attributes("list", "secrets", None, None),
                attributes("get", "secrets", ks, Some("aws-auth")),
                attributes("list", "configmaps", ks, None),
                attributes("get", "configmaps", ks, Some("kube-proxy")),
                attributes("patch", "configmaps", ks, Some("aws-auth")),
                attributes("list", "apps:deployments", None, None),
                attributes("get", "apps:deployments", ks, Some("coredns")),
                attributes("patch", "apps:deployments", kns, Some("karpenter")),
                attributes("get", "serviceaccounts", ks, Some("default")),
                attributes("create", "serviceaccounts/token", kns, Some("karpenter")),
                attributes("patch", "karpenter.k8s.aws:ec2nodeclasses", None, Some("x")),
                attributes(
                    "update",
                    "karpenter.k8s.aws:ec2nodeclasses/status",
                    None,
                    Some("x"),
                ),
                attributes("delete", "karpenter.sh:nodeclaims", None, Some("x")),
                attributes("create", "karpenter.sh:nodepools", None, None),
                attributes("delete", "pods", Some("default"), Some("x")),
                attributes("create", "pods/exec", Some("default"), Some("x")),
                attributes(
                    "delete",
                    "karpenter-health.io:karpenterhealths",
                    None,
                    Some("x"),
                ),
                attributes(
                    "patch",
                    "coordination.k8s.io:leases",
                    ks,
                    Some("kube-controller-manager"),
                ),
                attributes("list", "nodes", None, None),
                attributes(
                    "create",
                    "apiextensions.k8s.io:customresourcedefinitions",
                    None,
                    None,
                ),
                attributes(
                    "bind",
                    "rbac.authorization.k8s.io:clusterroles",
                    None,
                    Some("cluster-admin"),
                ),
            ];
            for attrs in must_deny {
                ensure!(
                    !allowed(&admin, user, groups, attrs.clone()).await?,
                    "{user} must not be allowed {attrs:?}"
                );
            }
        }
        Ok(())
    }
    .await;
    let cleanup = async {
        unbind_operator_user(&admin, &bindings).await?;
        Api::<Namespace>::all(admin.clone())
            .delete(&name, &DeleteParams::default())
            .await?;
        Ok::<(), anyhow::Error>(())
    }
    .await;
    outcome.and(cleanup)
}

//! The AWS facts adapter against the bed's real moto server, through the project's fault proxy:
//! the facts that come out of seeded IAM/EC2/EKS state, each fault as unknown-with-cause with the
//! last good answer kept and recovery on the next refresh, the call budget of 20 EC2NodeClasses
//! over 2,000 instances, and endpoint overrides from the environment. Does IO (moto, proxy).
//!
//! Isolation on a shared moto: each test has its own EC2/EKS region and unique IAM names.

use anyhow::{Context, Result, bail, ensure};
use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use http_body_util::{BodyExt, Full};
use karpenter_health_api::karpenter::SelectorTerm;
use karpenter_health_aws::{
    AwsObserver, AwsRequest, ObserverOptions, RateLimits, SdkOptions, Timeouts,
};
use karpenter_health_checks::facts::{AwsFacts, Observed, UnknownCause};
use karpenter_health_e2e::Bed;
use karpenter_health_e2e::fault_proxy::{AccessEntry, Fault, FaultProxy};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const ACCOUNT: &str = "123456789012";
const TRUST: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
const NODE_POLICIES: [&str; 4] = [
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
];

/// A name no other test (or earlier run against the same moto) uses.
fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{nanos:x}", std::process::id())
}

fn tag(k: &str, v: &str) -> Tag {
    Tag::builder().key(k).value(v).build()
}

fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn tag_term(k: &str, v: &str) -> SelectorTerm {
    SelectorTerm {
        tags: tags(&[(k, v)]),
        ..Default::default()
    }
}

fn cause<T: std::fmt::Debug>(o: &Observed<T>) -> Result<(UnknownCause, String)> {
    match o {
        Observed::Unknown(u) => Ok((u.cause, u.detail.clone())),
        other => bail!("expected unknown, got {other:?}"),
    }
}

/// Options for tests: no client-side limits, two attempts, every observe a refresh (TTL 0), and
/// timeouts generous enough for a moto that other tests keep busy.
fn test_options() -> ObserverOptions {
    with_timeouts(Duration::from_secs(20), Duration::from_secs(60))
}

fn with_timeouts(attempt: Duration, operation: Duration) -> ObserverOptions {
    let timeouts = Timeouts {
        connect: Duration::from_secs(3),
        attempt,
        operation,
    };
    ObserverOptions {
        ttl: Duration::ZERO,
        account_ttl: Duration::ZERO,
        error_ttl: Duration::ZERO,
        rate_limits: RateLimits::UNLIMITED,
        sdk: SdkOptions {
            timeouts,
            // moto answers a 1,000-instance page in several seconds.
            sweep_timeouts: Timeouts {
                attempt: Duration::from_secs(60),
                operation: Duration::from_secs(120),
                ..timeouts
            },
            max_attempts: 2,
            initial_backoff: Duration::from_millis(50),
        },
        ..Default::default()
    }
}

struct Seeder {
    iam: aws_sdk_iam::Client,
    ec2: aws_sdk_ec2::Client,
    moto: String,
    region: String,
}

struct Network {
    vpc: String,
    subnet: String,
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

    /// A node role with a path, the trust policy and the four managed policies; returns its ARN.
    async fn node_role(&self, name: &str, path: &str) -> Result<String> {
        let role = self
            .iam
            .create_role()
            .role_name(name)
            .path(path)
            .assume_role_policy_document(TRUST)
            .send()
            .await?;
        for arn in NODE_POLICIES {
            self.iam
                .attach_role_policy()
                .role_name(name)
                .policy_arn(arn)
                .send()
                .await?;
        }
        Ok(role.role().context("role")?.arn().to_owned())
    }

    async fn instance_profile(&self, name: &str, role: Option<&str>) -> Result<()> {
        self.iam
            .create_instance_profile()
            .instance_profile_name(name)
            .send()
            .await?;
        if let Some(role) = role {
            self.iam
                .add_role_to_instance_profile()
                .instance_profile_name(name)
                .role_name(role)
                .send()
                .await?;
        }
        Ok(())
    }

    async fn network(&self, cidr: &str) -> Result<Network> {
        let vpc = self.ec2.create_vpc().cidr_block(cidr).send().await?;
        let vpc = vpc
            .vpc()
            .and_then(|v| v.vpc_id())
            .context("vpc id")?
            .to_owned();
        let subnet = self
            .ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(cidr)
            .send()
            .await?;
        let subnet = subnet
            .subnet()
            .and_then(|s| s.subnet_id())
            .context("subnet id")?
            .to_owned();
        Ok(Network { vpc, subnet })
    }

    async fn security_group(&self, vpc: &str, name: &str, tags: &[(&str, &str)]) -> Result<String> {
        let spec = TagSpecification::builder()
            .resource_type(ResourceType::SecurityGroup)
            .set_tags(Some(tags.iter().map(|(k, v)| tag(k, v)).collect()))
            .build();
        let sg = self
            .ec2
            .create_security_group()
            .group_name(name)
            .description(name)
            .vpc_id(vpc)
            .tag_specifications(spec)
            .send()
            .await?;
        Ok(sg.group_id().context("group id")?.to_owned())
    }

    /// `count` instances in `subnet` with `tags`, in batches of at most 1,000 per RunInstances.
    async fn instances(
        &self,
        subnet: &str,
        count: i32,
        tags: &[(&str, &str)],
    ) -> Result<Vec<String>> {
        let mut ids = Vec::new();
        let mut left = count;
        while left > 0 {
            let n = left.min(1000);
            let spec = TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .set_tags(Some(tags.iter().map(|(k, v)| tag(k, v)).collect()))
                .build();
            let out = self
                .ec2
                .run_instances()
                .image_id("ami-12c6146b")
                .instance_type(aws_sdk_ec2::types::InstanceType::T3Micro)
                .min_count(n)
                .max_count(n)
                .subnet_id(subnet)
                .tag_specifications(spec)
                .send()
                .await?;
            ids.extend(
                out.instances()
                    .iter()
                    .filter_map(|i| i.instance_id().map(str::to_owned)),
            );
            left -= n;
        }
        Ok(ids)
    }

    /// `count` instances with one RunInstances each (8 at a time). moto pages DescribeInstances
    /// by reservation, EC2 by instance: one instance per reservation makes moto page like EC2.
    async fn single_instances(
        &self,
        subnet: &str,
        count: usize,
        tags: &[(&str, &str)],
    ) -> Result<()> {
        use futures::StreamExt;
        let results: Vec<Result<Vec<String>>> = futures::stream::iter(0..count)
            .map(|_| self.instances(subnet, 1, tags))
            .buffer_unordered(8)
            .collect()
            .await;
        for r in results {
            r?;
        }
        Ok(())
    }

    /// EKS CreateCluster sent as raw JSON: the SDK's request shape has no `vpcId` (real EKS
    /// derives it from the subnets), and moto stores `resourcesVpcConfig` exactly as sent.
    async fn eks_cluster(&self, name: &str, role_arn: &str, net: &Network) -> Result<()> {
        let body = serde_json::json!({
            "name": name,
            "roleArn": role_arn,
            "resourcesVpcConfig": { "subnetIds": [net.subnet], "vpcId": net.vpc },
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

fn bed() -> Result<Bed> {
    Bed::from_env()
}

async fn observer(
    bed: &Bed,
    proxy: &FaultProxy,
    region: &str,
    options: ObserverOptions,
) -> Result<AwsObserver> {
    let config = bed.aws_config_at(&proxy.url(), region).await?;
    Ok(AwsObserver::new(&config, options))
}

fn instance_vpcs(facts: &AwsFacts) -> Result<BTreeMap<String, usize>> {
    let instances = facts
        .cluster_instances
        .found()
        .context("instances not found")?;
    let mut by_vpc = BTreeMap::new();
    for i in instances {
        *by_vpc
            .entry(i.vpc_id.clone().unwrap_or_default())
            .or_default() += 1;
    }
    Ok(by_vpc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_iam_ec2_and_eks_state_comes_out_as_facts() -> Result<()> {
    let bed = bed()?;
    let region = "eu-south-1";
    let seed = Seeder::new(&bed, region).await?;
    let cluster = unique("kh-facts");
    let role = unique("kh-facts-node");
    let profile = unique("kh-facts-profile");
    let empty_profile = unique("kh-facts-empty");

    let role_arn = seed.node_role(&role, "/karpenter/nodes/").await?;
    seed.instance_profile(&profile, Some(&role)).await?;
    seed.instance_profile(&empty_profile, None).await?;
    let a = seed.network("10.10.0.0/16").await?;
    let b = seed.network("10.20.0.0/16").await?;
    let cluster_tag = format!("kubernetes.io/cluster/{cluster}");
    let sg_nodes = seed
        .security_group(
            &a.vpc,
            "nodes",
            &[
                ("karpenter.sh/discovery", &cluster),
                (&cluster_tag, "owned"),
            ],
        )
        .await?;
    let sg_extra = seed
        .security_group(&a.vpc, "extra", &[("team", "x")])
        .await?;
    seed.security_group(&b.vpc, "other", &[("karpenter.sh/discovery", "other")])
        .await?;
    let karpenter_tags = [
        (cluster_tag.as_str(), "owned"),
        ("eks:eks-cluster-name", cluster.as_str()),
        ("karpenter.sh/nodepool", "default"),
    ];
    seed.instances(&a.subnet, 3, &karpenter_tags).await?;
    // Same cluster name in another VPC: the collision the engine looks for.
    seed.instances(&b.subnet, 2, &karpenter_tags).await?;
    seed.instances(&a.subnet, 1, &[(cluster_tag.as_str(), "owned")])
        .await?; // not Karpenter's
    seed.instances(
        &a.subnet,
        1,
        &[
            ("kubernetes.io/cluster/another", "owned"),
            ("karpenter.sh/nodepool", "x"),
        ],
    )
    .await?;
    seed.eks_cluster(&cluster, &role_arn, &a).await?;

    let proxy = FaultProxy::start(bed.moto_url()?).await?;
    let obs = observer(&bed, &proxy, region, test_options()).await?;
    let request = AwsRequest {
        cluster_name: Some(cluster.clone()),
        instance_profile: Some(profile.clone()),
        role: None,
        security_group_selector_terms: vec![
            tag_term("karpenter.sh/discovery", &cluster),
            tag_term("team", "*"),
        ],
    };
    let facts = obs.observe(&request).await;

    assert_eq!(facts.region.as_deref(), Some(region));
    let account = facts.account.found().context("account")?;
    assert_eq!(
        (account.account_id.as_str(), account.partition.as_str()),
        (ACCOUNT, "aws")
    );
    let p = facts
        .instance_profile
        .as_ref()
        .and_then(|p| p.found())
        .context("profile")?;
    assert_eq!(p.name, profile);
    assert_eq!(p.roles.len(), 1);
    assert_eq!(p.roles[0].name, role);
    let r = facts
        .node_role
        .as_ref()
        .and_then(|r| r.found())
        .context("node role")?;
    assert_eq!(
        (r.name.as_str(), r.arn.as_str(), r.path.as_str()),
        (role.as_str(), role_arn.as_str(), "/karpenter/nodes/")
    );
    let trust = r
        .assume_role_policy_document
        .as_deref()
        .context("trust policy")?;
    let trust = percent_encoding::percent_decode_str(trust).decode_utf8()?;
    assert!(trust.contains("ec2.amazonaws.com"), "{trust}");
    let attached: BTreeSet<&str> = r
        .attached_policy_arns
        .found()
        .context("attached")?
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(attached, NODE_POLICIES.into_iter().collect());
    let eks = facts.eks_cluster.found().context("eks cluster")?;
    assert_eq!(eks.name, cluster);
    assert_eq!(eks.vpc_id.as_deref(), Some(a.vpc.as_str()));
    assert_eq!(
        eks.authentication_mode, None,
        "moto returns no accessConfig"
    );
    // moto's real 404 for ListAccessEntries: unknown (unsupported), never "no access entry".
    let (why, detail) = cause(&facts.node_role_access_entries)?;
    assert_eq!(why, UnknownCause::Unsupported, "{detail}");
    assert!(
        detail.contains("ListAccessEntries") && detail.contains("404"),
        "{detail}"
    );
    assert_eq!(proxy.count("eks", "ListAccessEntries"), 1);
    let sgs: BTreeSet<&str> = facts
        .security_groups
        .found()
        .context("sgs")?
        .iter()
        .map(|g| g.id.as_str())
        .collect();
    assert_eq!(sgs, BTreeSet::from([sg_nodes.as_str(), sg_extra.as_str()]));
    let nodes = facts
        .security_groups
        .found()
        .into_iter()
        .flatten()
        .find(|g| g.id == sg_nodes)
        .context("sg")?;
    assert_eq!(
        nodes.tags.get(&cluster_tag).map(String::as_str),
        Some("owned")
    );
    assert_eq!(nodes.vpc_id.as_deref(), Some(a.vpc.as_str()));
    assert_eq!(
        instance_vpcs(&facts)?,
        BTreeMap::from([(a.vpc.clone(), 3), (b.vpc.clone(), 2)])
    );
    for i in facts.cluster_instances.found().into_iter().flatten() {
        assert_eq!(i.state, "running");
        assert!(i.launch_time.is_some());
        assert_eq!(
            i.tags.get("karpenter.sh/nodepool").map(String::as_str),
            Some("default")
        );
    }

    // An ARN is not a name: absent, and IAM is not asked.
    let before = proxy.count("iam", "GetInstanceProfile");
    let arn = format!("arn:aws:iam::{ACCOUNT}:instance-profile/{profile}");
    let facts = obs
        .observe(&AwsRequest {
            instance_profile: Some(arn),
            ..request.clone()
        })
        .await;
    assert_eq!(facts.instance_profile, Some(Observed::Absent));
    assert_eq!(facts.node_role, None);
    assert_eq!(proxy.count("iam", "GetInstanceProfile"), before);

    // A profile without a role names no node role.
    let facts = obs
        .observe(&AwsRequest {
            instance_profile: Some(empty_profile),
            ..request.clone()
        })
        .await;
    let p = facts
        .instance_profile
        .as_ref()
        .and_then(|p| p.found())
        .context("empty profile")?;
    assert!(p.roles.is_empty());
    assert_eq!(facts.node_role, None);

    // What does not exist is proven absent (or an empty match).
    let missing = AwsRequest {
        cluster_name: Some(unique("kh-nope")),
        instance_profile: Some(unique("kh-no-profile")),
        role: Some(unique("kh-no-role")),
        security_group_selector_terms: vec![
            SelectorTerm {
                id: Some("sg-0123456789abcdef0".into()),
                ..Default::default()
            },
            SelectorTerm {
                name: Some("no-such-group".into()),
                ..Default::default()
            },
        ],
    };
    let facts = obs.observe(&missing).await;
    assert_eq!(facts.instance_profile, Some(Observed::Absent));
    assert_eq!(facts.node_role, Some(Observed::Absent));
    assert_eq!(facts.eks_cluster, Observed::Absent);
    assert_eq!(facts.security_groups, Observed::Found(vec![]));
    assert_eq!(facts.cluster_instances, Observed::Found(vec![]));
    assert_eq!(
        cause(&facts.node_role_access_entries)?.0,
        UnknownCause::NotObserved
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_authentication_mode_reads_the_node_roles_access_entry() -> Result<()> {
    let bed = bed()?;
    let region = "ap-northeast-3";
    let seed = Seeder::new(&bed, region).await?;
    let cluster = unique("kh-api");
    let role = unique("kh-api-node");
    let role_arn = seed.node_role(&role, "/team/").await?;
    let other_role = unique("kh-api-other");
    seed.node_role(&other_role, "/").await?;
    let net = seed.network("10.30.0.0/16").await?;
    seed.eks_cluster(&cluster, &role_arn, &net).await?;

    let proxy = FaultProxy::start(bed.moto_url()?).await?;
    proxy.set_authentication_mode(&cluster, "API");
    // Entries name roles without their path, as EKS users write them.
    let stripped = format!("arn:aws:iam::{ACCOUNT}:role/{role}");
    proxy.set_access_entries(
        &cluster,
        vec![
            AccessEntry {
                principal_arn: format!("arn:aws:iam::{ACCOUNT}:role/admin"),
                type_: "STANDARD".into(),
                username: None,
            },
            AccessEntry {
                principal_arn: stripped.clone(),
                type_: "EC2_LINUX".into(),
                username: Some("system:node:{{EC2PrivateDNSName}}".into()),
            },
        ],
    );
    let obs = observer(&bed, &proxy, region, test_options()).await?;
    let request = AwsRequest {
        cluster_name: Some(cluster.clone()),
        instance_profile: None,
        role: Some(role.clone()),
        security_group_selector_terms: vec![],
    };
    let facts = obs.observe(&request).await;
    let eks = facts.eks_cluster.found().context("cluster")?;
    assert_eq!(eks.authentication_mode.as_deref(), Some("API"));
    let entries = facts
        .node_role_access_entries
        .found()
        .context("access entries")?;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0].principal_arn, stripped);
    assert_eq!(entries[0].type_, "EC2_LINUX");
    assert_eq!(
        entries[0].username.as_deref(),
        Some("system:node:{{EC2PrivateDNSName}}")
    );
    assert_eq!(proxy.count("eks", "DescribeAccessEntry"), 1);

    // A role without an entry: proven none by a successful listing.
    let facts = obs
        .observe(&AwsRequest {
            role: Some(other_role),
            ..request
        })
        .await;
    assert_eq!(facts.node_role_access_entries, Observed::Found(vec![]));
    Ok(())
}

/// One fault scenario: where it is injected and which fact it must make unknown with which cause.
struct Scenario {
    service: &'static str,
    operation: &'static str,
    fault: Fault,
    cause: UnknownCause,
    fact: fn(&AwsFacts) -> Option<String>,
    /// Whether the SDK retries it (so the proxy sees max_attempts requests).
    retried: bool,
}

fn account_fact(f: &AwsFacts) -> Option<String> {
    f.account.found().map(|a| a.account_id.clone())
}
fn profile_fact(f: &AwsFacts) -> Option<String> {
    f.instance_profile.as_ref()?.found().map(|p| p.name.clone())
}
fn role_fact(f: &AwsFacts) -> Option<String> {
    f.node_role.as_ref()?.found().map(|r| r.name.clone())
}
fn attached_fact(f: &AwsFacts) -> Option<String> {
    f.node_role
        .as_ref()?
        .found()?
        .attached_policy_arns
        .found()
        .map(|a| a.len().to_string())
}
fn cluster_fact(f: &AwsFacts) -> Option<String> {
    f.eks_cluster.found().map(|c| c.name.clone())
}
fn sg_fact(f: &AwsFacts) -> Option<String> {
    f.security_groups.found().map(|g| g.len().to_string())
}
fn instances_fact(f: &AwsFacts) -> Option<String> {
    f.cluster_instances.found().map(|i| i.len().to_string())
}

/// The fact's value, or its unknown cause.
fn fact_state(
    f: &AwsFacts,
    get: fn(&AwsFacts) -> Option<String>,
    name: &str,
) -> Result<std::result::Result<String, (UnknownCause, String)>> {
    if let Some(v) = get(f) {
        return Ok(Ok(v));
    }
    let unknown = match name {
        "account" => cause(&f.account),
        "instance_profile" => cause(f.instance_profile.as_ref().context("profile")?),
        "node_role" => cause(f.node_role.as_ref().context("role")?),
        "node_role.attached_policy_arns" => {
            let role = f
                .node_role
                .as_ref()
                .and_then(|r| r.found())
                .context("role")?;
            cause(&role.attached_policy_arns)
        }
        "eks_cluster" => cause(&f.eks_cluster),
        "security_groups" => cause(&f.security_groups),
        "cluster_instances" => cause(&f.cluster_instances),
        other => bail!("unknown fact {other}"),
    }?;
    Ok(Err(unknown))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fault_is_unknown_with_cause_keeps_last_good_and_recovers_without_restart()
-> Result<()> {
    let bed = bed()?;
    let region = "sa-east-1";
    let seed = Seeder::new(&bed, region).await?;
    let cluster = unique("kh-faults");
    let role = unique("kh-faults-node");
    let profile = unique("kh-faults-profile");
    let role_arn = seed.node_role(&role, "/").await?;
    seed.instance_profile(&profile, Some(&role)).await?;
    let net = seed.network("10.40.0.0/16").await?;
    seed.security_group(&net.vpc, "nodes", &[("karpenter.sh/discovery", &cluster)])
        .await?;
    let cluster_tag = format!("kubernetes.io/cluster/{cluster}");
    seed.instances(
        &net.subnet,
        2,
        &[
            (cluster_tag.as_str(), "owned"),
            ("karpenter.sh/nodepool", "a"),
        ],
    )
    .await?;
    seed.eks_cluster(&cluster, &role_arn, &net).await?;

    let proxy = FaultProxy::start(bed.moto_url()?).await?;
    // Short enough to see a hang end, long enough for a busy moto.
    let options = with_timeouts(Duration::from_secs(3), Duration::from_secs(8));
    let attempts = options.sdk.max_attempts as usize;
    let operation_timeout = options.sdk.timeouts.operation;
    let obs = observer(&bed, &proxy, region, options).await?;
    let request = AwsRequest {
        cluster_name: Some(cluster.clone()),
        instance_profile: Some(profile.clone()),
        role: None,
        security_group_selector_terms: vec![tag_term("karpenter.sh/discovery", &cluster)],
    };
    let good = obs.observe_detailed(&request).await;
    assert!(good.stale.is_empty(), "{:?}", good.stale);

    let scenarios = [
        (
            "account",
            Scenario {
                service: "sts",
                operation: "GetCallerIdentity",
                fault: Fault::Throttle,
                cause: UnknownCause::Throttled,
                fact: account_fact,
                retried: true,
            },
        ),
        (
            "instance_profile",
            Scenario {
                service: "iam",
                operation: "GetInstanceProfile",
                fault: Fault::Throttle,
                cause: UnknownCause::Throttled,
                fact: profile_fact,
                retried: true,
            },
        ),
        (
            "cluster_instances",
            Scenario {
                service: "ec2",
                operation: "DescribeInstances",
                fault: Fault::Throttle,
                cause: UnknownCause::Throttled,
                fact: instances_fact,
                retried: true,
            },
        ),
        (
            "eks_cluster",
            Scenario {
                service: "eks",
                operation: "DescribeCluster",
                fault: Fault::Throttle,
                cause: UnknownCause::Throttled,
                fact: cluster_fact,
                retried: true,
            },
        ),
        (
            "security_groups",
            Scenario {
                service: "ec2",
                operation: "DescribeSecurityGroups",
                fault: Fault::ServerError,
                cause: UnknownCause::Unavailable,
                fact: sg_fact,
                retried: true,
            },
        ),
        (
            "eks_cluster",
            Scenario {
                service: "eks",
                operation: "DescribeCluster",
                fault: Fault::ServerError,
                cause: UnknownCause::Unavailable,
                fact: cluster_fact,
                retried: true,
            },
        ),
        (
            "node_role",
            Scenario {
                service: "iam",
                operation: "GetRole",
                fault: Fault::Hang,
                cause: UnknownCause::Unavailable,
                fact: role_fact,
                retried: true,
            },
        ),
        (
            "eks_cluster",
            Scenario {
                service: "eks",
                operation: "DescribeCluster",
                fault: Fault::Reset,
                cause: UnknownCause::Unavailable,
                fact: cluster_fact,
                retried: true,
            },
        ),
        (
            "cluster_instances",
            Scenario {
                service: "ec2",
                operation: "DescribeInstances",
                fault: Fault::Reset,
                cause: UnknownCause::Unavailable,
                fact: instances_fact,
                retried: true,
            },
        ),
        (
            "security_groups",
            Scenario {
                service: "ec2",
                operation: "DescribeSecurityGroups",
                fault: Fault::AccessDenied,
                cause: UnknownCause::AccessDenied,
                fact: sg_fact,
                retried: false,
            },
        ),
        (
            "node_role.attached_policy_arns",
            Scenario {
                service: "iam",
                operation: "ListAttachedRolePolicies",
                fault: Fault::AccessDenied,
                cause: UnknownCause::AccessDenied,
                fact: attached_fact,
                retried: false,
            },
        ),
    ];
    for (name, s) in scenarios {
        let label = format!("{:?} on {} {}", s.fault, s.service, s.operation);
        let expected = fact_state(&good.facts, s.fact, name)?
            .map_err(|e| anyhow::anyhow!("{label}: not good before the fault: {e:?}"))?;

        proxy.reset_counts();
        proxy.inject(s.service, Some(s.operation), s.fault);
        let started = Instant::now();
        let bad = obs.observe_detailed(&request).await;
        let took = started.elapsed();
        match fact_state(&bad.facts, s.fact, name)? {
            Ok(v) => bail!("{label}: {name} still found ({v})"),
            Err((why, detail)) => {
                eprintln!("{label}: {why:?}: {detail}");
                assert_eq!(why, s.cause, "{label}: {detail}");
                assert!(
                    detail.contains(s.operation),
                    "{label}: detail names the call: {detail}"
                );
            }
        }
        // The last good answer is kept, with its age.
        assert_eq!(
            fact_state(&bad.last_good, s.fact, name)?.ok().as_ref(),
            Some(&expected),
            "{label}"
        );
        assert!(
            bad.stale.iter().any(|f| f.fact == name),
            "{label}: {:?}",
            bad.stale
        );
        let sent = proxy.count(s.service, s.operation);
        let want = if s.retried { attempts } else { 1 };
        assert_eq!(sent, want, "{label}: bounded retries");
        assert!(
            took < operation_timeout + Duration::from_secs(3),
            "{label}: took {took:?}"
        );

        // AWS recovers: the next refresh sees it, same observer, no restart.
        proxy.clear_faults();
        let healed = obs.observe_detailed(&request).await;
        assert_eq!(
            fact_state(&healed.facts, s.fact, name)?.ok(),
            Some(expected),
            "{label}: recovered"
        );
        assert!(healed.stale.is_empty(), "{label}: {:?}", healed.stale);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_node_classes_over_2000_instances_stay_within_the_call_budget() -> Result<()> {
    let bed = bed()?;
    let region = "me-south-1";
    let seed = Seeder::new(&bed, region).await?;
    let cluster = unique("kh-budget");
    let role = unique("kh-budget-node");
    let role_arn = seed.node_role(&role, "/").await?;
    let a = seed.network("10.50.0.0/16").await?;
    let b = seed.network("10.60.0.0/16").await?;
    let sg_disc = seed
        .security_group(&a.vpc, "nodes", &[("karpenter.sh/discovery", &cluster)])
        .await?;
    seed.security_group(&a.vpc, "team", &[("team", "x")])
        .await?;
    let cluster_tag = format!("kubernetes.io/cluster/{cluster}");
    let karpenter_tags = [
        (cluster_tag.as_str(), "owned"),
        ("eks:eks-cluster-name", cluster.as_str()),
        ("karpenter.sh/nodepool", "default"),
    ];
    let seeding = Instant::now();
    seed.single_instances(&a.subnet, 1000, &karpenter_tags)
        .await?;
    seed.single_instances(&b.subnet, 1000, &karpenter_tags)
        .await?;
    eprintln!("seeded 2,000 instances in {:?}", seeding.elapsed());
    seed.eks_cluster(&cluster, &role_arn, &a).await?;

    // Three distinct selector sets; the third shares a term with the first (3 distinct terms).
    let sets = [
        vec![tag_term("karpenter.sh/discovery", &cluster)],
        vec![SelectorTerm {
            id: Some(sg_disc.clone()),
            ..Default::default()
        }],
        vec![
            tag_term("karpenter.sh/discovery", &cluster),
            tag_term("team", "*"),
        ],
    ];
    let requests: Vec<AwsRequest> = (0..20)
        .map(|n| AwsRequest {
            cluster_name: Some(cluster.clone()),
            instance_profile: None,
            role: Some(role.clone()),
            security_group_selector_terms: sets[n % 3].clone(),
        })
        .collect();

    let proxy = FaultProxy::start(bed.moto_url()?).await?;
    // The production defaults (TTLs, rate limits), with timeouts that fit moto's speed.
    let options = ObserverOptions {
        sdk: test_options().sdk,
        ..ObserverOptions::default()
    };
    let mut walls = Vec::new();
    for run in 0..3 {
        // A fresh observer: a cold refresh of all 20 EC2NodeClasses, reconciled concurrently.
        let obs = observer(&bed, &proxy, region, options.clone()).await?;
        proxy.reset_counts();
        let started = Instant::now();
        let all = futures::future::join_all(requests.iter().map(|r| obs.observe(r))).await;
        let wall = started.elapsed();
        walls.push(wall);
        for facts in &all {
            assert_eq!(facts.cluster_instances.found().map(Vec::len), Some(2000));
            assert_eq!(instance_vpcs(facts)?.len(), 2);
            assert!(facts.security_groups.found().is_some_and(|g| !g.is_empty()));
        }
        let sg_calls = proxy.count("ec2", "DescribeSecurityGroups");
        let pages = proxy.count("ec2", "DescribeInstances");
        eprintln!(
            "run {run}: refresh of 20 EC2NodeClasses over 2,000 instances took {wall:?}; \
             DescribeSecurityGroups={sg_calls} DescribeInstances pages={pages} all calls={:?}",
            proxy.counts()
        );
        assert!(
            sg_calls <= 3,
            "at most 3 DescribeSecurityGroups per refresh, got {sg_calls}"
        );
        assert!(
            pages <= 2,
            "at most 2 DescribeInstances pages per sweep, got {pages}"
        );
        assert_eq!(
            pages, 2,
            "one instance per reservation: moto pages like EC2"
        );
        assert_eq!(obs.call_stats().calls_of("DescribeInstances"), pages as u64);

        if run == 0 {
            // Within the TTL the next refresh costs no call at all.
            proxy.reset_counts();
            futures::future::join_all(requests.iter().map(|r| obs.observe(r))).await;
            assert!(proxy.counts().is_empty(), "{:?}", proxy.counts());
        }
    }
    walls.sort();
    eprintln!(
        "median refresh wall time at 2,000 instances on moto: {:?}",
        walls[walls.len() / 2]
    );
    Ok(())
}

/// The environment's endpoint overrides reach the adapter: `AWS_ENDPOINT_URL` for all services
/// and `AWS_ENDPOINT_URL_EC2` above it. Environment variables are per process, so the check runs
/// in a child process of this test binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_overrides_from_the_environment_are_honoured() -> Result<()> {
    let bed = bed()?;
    let proxy = FaultProxy::start(bed.moto_url()?).await?;
    let exe = std::env::current_exe()?;
    let out = tokio::process::Command::new(exe)
        .args([
            "endpoint_override_child",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("KH_AWS_ENDPOINT_CHILD", "1")
        .env("AWS_ENDPOINT_URL", bed.moto_url()?)
        .env("AWS_ENDPOINT_URL_EC2", proxy.url())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "af-south-1")
        .env("AWS_CONFIG_FILE", "/nonexistent/kh-aws-config")
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/kh-aws-credentials",
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
        .output()
        .await?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(
        out.status.success() && log.contains("1 passed"),
        "child failed:\n{log}"
    );
    // EC2 went through the proxy (its own override), STS and IAM straight to moto (the global one).
    assert!(
        proxy.count("ec2", "DescribeInstances") >= 1,
        "{:?}",
        proxy.counts()
    );
    assert!(
        proxy.count("ec2", "DescribeSecurityGroups") >= 1,
        "{:?}",
        proxy.counts()
    );
    assert_eq!(
        proxy.count("sts", "GetCallerIdentity"),
        0,
        "{:?}",
        proxy.counts()
    );
    assert_eq!(proxy.count("iam", "GetRole"), 0, "{:?}", proxy.counts());
    Ok(())
}

/// Runs only as the child of the test above.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "child process of endpoint_overrides_from_the_environment_are_honoured"]
async fn endpoint_override_child() -> Result<()> {
    if std::env::var_os("KH_AWS_ENDPOINT_CHILD").is_none() {
        return Ok(());
    }
    let config = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let obs = AwsObserver::new(&config, test_options());
    let facts = obs
        .observe(&AwsRequest {
            cluster_name: Some("kh-env".into()),
            instance_profile: None,
            role: Some(unique("kh-env-missing-role")),
            security_group_selector_terms: vec![tag_term("kh-env", "*")],
        })
        .await;
    assert_eq!(facts.region.as_deref(), Some("af-south-1"));
    assert_eq!(
        facts.account.found().map(|a| a.account_id.as_str()),
        Some(ACCOUNT),
        "{:?}",
        facts.account
    );
    assert_eq!(facts.node_role, Some(Observed::Absent));
    assert_eq!(facts.cluster_instances, Observed::Found(vec![]));
    assert_eq!(facts.security_groups, Observed::Found(vec![]));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_instance_sweep_follows_next_tokens_page_by_page() -> Result<()> {
    let bed = bed()?;
    let region = "ap-southeast-3";
    let seed = Seeder::new(&bed, region).await?;
    let cluster = unique("kh-pages");
    let net = seed.network("10.70.0.0/16").await?;
    let cluster_tag = format!("kubernetes.io/cluster/{cluster}");
    let karpenter_tags = [
        (cluster_tag.as_str(), "owned"),
        ("karpenter.sh/nodepool", "p"),
    ];
    seed.single_instances(&net.subnet, 12, &karpenter_tags)
        .await?;

    let proxy = FaultProxy::start(bed.moto_url()?).await?;
    // EC2's smallest page, so a dozen instances take three pages.
    let options = ObserverOptions {
        instance_page_size: 5,
        ..test_options()
    };
    let obs = observer(&bed, &proxy, region, options).await?;
    let request = AwsRequest {
        cluster_name: Some(cluster),
        ..Default::default()
    };
    let facts = obs.observe(&request).await;
    let ids: BTreeSet<&str> = facts
        .cluster_instances
        .found()
        .context("instances")?
        .iter()
        .map(|i| i.id.as_str())
        .collect();
    assert_eq!(ids.len(), 12);
    assert_eq!(proxy.count("ec2", "DescribeInstances"), 3);

    // A throttled second page makes the whole sweep unknown, never a partial list.
    proxy.reset_counts();
    proxy.inject_after("ec2", Some("DescribeInstances"), Fault::Throttle, 1);
    let bad = obs.observe_detailed(&request).await;
    assert_eq!(
        cause(&bad.facts.cluster_instances)?.0,
        UnknownCause::Throttled
    );
    assert_eq!(
        bad.last_good.cluster_instances.found().map(Vec::len),
        Some(12)
    );
    proxy.clear_faults();
    assert_eq!(
        obs.observe(&request)
            .await
            .cluster_instances
            .found()
            .map(Vec::len),
        Some(12)
    );
    Ok(())
}

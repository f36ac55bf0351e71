//! The AWS facts adapter against the bed's real moto server, through the project's fault proxy:
//! the facts that come out of seeded IAM/EC2/EKS state (the access entries of an API-mode cluster
//! from the proxy, which moto lacks), and endpoint overrides from the environment. Faults are in
//! `faults`, the instance sweep's paging and call budget in `sweep`. Does IO (moto, proxy,
//! a child process).
//!
//! Isolation on a shared moto: each test has its own EC2/EKS region and unique IAM names.

use anyhow::{Context, Result, ensure};
use karpenter_health_api::karpenter::SelectorTerm;
use karpenter_health_aws::{AwsObserver, AwsRequest};
use karpenter_health_checks::facts::{Observed, UnknownCause};
use karpenter_health_e2e::Bed;
use karpenter_health_e2e::aws_observer::{
    MOTO_ACCOUNT, cause, instance_vpcs, observer, tag_term, test_options,
};
use karpenter_health_e2e::aws_seed::{AwsSeeder, NODE_POLICIES, managed_policy_arn};
use karpenter_health_e2e::fault_proxy::{AccessEntry, FaultProxy};
use karpenter_health_e2e::names::unique;
use std::collections::{BTreeMap, BTreeSet};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_iam_ec2_and_eks_state_comes_out_as_facts() -> Result<()> {
    let bed = Bed::from_env()?;
    let region = "eu-south-1";
    let seed = AwsSeeder::new(&bed, region).await?;
    let cluster = unique("kh-facts");
    let role = unique("kh-facts-node");
    let profile = unique("kh-facts-profile");
    let empty_profile = unique("kh-facts-empty");

    let role_arn = seed
        .node_role(&role, "/karpenter/nodes/", &NODE_POLICIES)
        .await?;
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
    // A tag key of this run's own: the bed keeps earlier runs' groups (make e2e-repeat).
    let team = unique("kh-facts-team");
    let sg_extra = seed
        .security_group(&a.vpc, "extra", &[(team.as_str(), "x")])
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
    seed.eks_cluster(&cluster, &role_arn, &a.vpc, Some(&a.subnet), "1.29")
        .await?;

    let proxy = FaultProxy::start(bed.moto_url()?).await?;
    let obs = observer(&bed, &proxy, region, test_options()).await?;
    let request = AwsRequest {
        cluster_name: Some(cluster.clone()),
        instance_profile: Some(profile.clone()),
        role: None,
        security_group_selector_terms: vec![
            tag_term("karpenter.sh/discovery", &cluster),
            tag_term(&team, "*"),
        ],
        pod_identity_service_accounts: Vec::new(),
        ..Default::default()
    };
    let facts = obs.observe(&request).await;

    assert_eq!(facts.region.as_deref(), Some(region));
    let account = facts.account.found().context("account")?;
    assert_eq!(
        (account.account_id.as_str(), account.partition.as_str()),
        (MOTO_ACCOUNT, "aws")
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
    let node_policies: Vec<String> = NODE_POLICIES
        .iter()
        .map(|p| managed_policy_arn("aws", p))
        .collect();
    assert_eq!(attached, node_policies.iter().map(String::as_str).collect());
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

    // An ARN where Karpenter wants a name is looked up by the name in it: the engine reports
    // the ARN, and the facts about the profile it names are IAM's (never "does not exist").
    let before = proxy.count("iam", "GetInstanceProfile");
    let arn = format!("arn:aws:iam::{MOTO_ACCOUNT}:instance-profile/{profile}");
    let facts = obs
        .observe(&AwsRequest {
            instance_profile: Some(arn),
            ..request.clone()
        })
        .await;
    let found = facts
        .instance_profile
        .as_ref()
        .and_then(|p| p.found())
        .context("the profile the ARN names")?;
    assert_eq!(found.name, profile);
    assert!(matches!(facts.node_role, Some(Observed::Found(_))));
    assert!(
        proxy.count("iam", "GetInstanceProfile") <= before + 1,
        "at most one call (cached)"
    );

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
        pod_identity_service_accounts: Vec::new(),
        ..Default::default()
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
    let bed = Bed::from_env()?;
    let region = "ap-northeast-3";
    let seed = AwsSeeder::new(&bed, region).await?;
    let cluster = unique("kh-api");
    let role = unique("kh-api-node");
    let role_arn = seed.node_role(&role, "/team/", &NODE_POLICIES).await?;
    let other_role = unique("kh-api-other");
    seed.node_role(&other_role, "/", &NODE_POLICIES).await?;
    let net = seed.network("10.30.0.0/16").await?;
    seed.eks_cluster(&cluster, &role_arn, &net.vpc, Some(&net.subnet), "1.29")
        .await?;

    let proxy = FaultProxy::start(bed.moto_url()?).await?;
    proxy.set_authentication_mode(&cluster, "API");
    // Entries name roles without their path, as EKS users write them.
    let stripped = format!("arn:aws:iam::{MOTO_ACCOUNT}:role/{role}");
    proxy.set_access_entries(
        &cluster,
        vec![
            AccessEntry {
                principal_arn: format!("arn:aws:iam::{MOTO_ACCOUNT}:role/admin"),
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
        pod_identity_service_accounts: Vec::new(),
        ..Default::default()
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

/// The environment's endpoint overrides reach the adapter: `AWS_ENDPOINT_URL` for all services
/// and `AWS_ENDPOINT_URL_EC2` above it. Environment variables are per process, so the check runs
/// in a child process of this test binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_overrides_from_the_environment_are_honoured() -> Result<()> {
    let bed = Bed::from_env()?;
    let proxy = FaultProxy::start(bed.moto_url()?).await?;
    let exe = std::env::current_exe()?;
    let out = tokio::process::Command::new(exe)
        .args([
            // The test's full name in the `aws` binary: its module, then its function.
            "facts::endpoint_override_child",
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
            pod_identity_service_accounts: Vec::new(),
            ..Default::default()
        })
        .await;
    assert_eq!(facts.region.as_deref(), Some("af-south-1"));
    assert_eq!(
        facts.account.found().map(|a| a.account_id.as_str()),
        Some(MOTO_ACCOUNT),
        "{:?}",
        facts.account
    );
    assert_eq!(facts.node_role, Some(Observed::Absent));
    assert_eq!(facts.cluster_instances, Observed::Found(vec![]));
    assert_eq!(facts.security_groups, Observed::Found(vec![]));
    Ok(())
}

/// The gap proxy serves Service Quotas' EC2 values (moto knows only the `vpc` service's): a value
/// set is read over the real wire, one not set is absent (moto's NoSuchResourceException), and
/// both are read once however many classes ask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vcpu_quotas_are_read_through_the_gap_proxy_and_absent_without_a_value() -> Result<()> {
    let bed = karpenter_health_e2e::Bed::from_env()?;
    let proxy = karpenter_health_e2e::fault_proxy::FaultProxy::start(bed.moto_url()?).await?;
    proxy.set_ec2_quota("L-1216C47A", Some(0.0));
    let obs = karpenter_health_e2e::aws_observer::observer(
        &bed,
        &proxy,
        "ca-central-1",
        // The first catalogue page carries moto's whole listing: five times the slowest one
        // measured per attempt, two attempts and their backoff per operation.
        karpenter_health_e2e::aws_observer::with_timeouts(
            karpenter_health_e2e::aws_observer::SLOWEST_CALL * 5,
            karpenter_health_e2e::aws_observer::SLOWEST_CALL * 12,
        ),
    )
    .await?;
    let request = karpenter_health_aws::AwsRequest {
        instance_types: true,
        ..Default::default()
    };
    let facts = obs.observe(&request).await;
    let quotas = facts.vcpu_quotas.context("asked")?;
    assert_eq!(quotas.on_demand, Observed::Found(0.0), "{quotas:?}");
    assert_eq!(quotas.spot, Observed::Absent, "{quotas:?}");
    let catalog = facts
        .instance_types
        .as_ref()
        .and_then(|c| c.found())
        .context("moto's instance types")?;
    assert!(catalog.types.len() > 100 && !catalog.zones.is_empty());
    assert!(catalog.types.windows(2).all(|w| w[0].name < w[1].name));
    Ok(())
}

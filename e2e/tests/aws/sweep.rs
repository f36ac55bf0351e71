//! The instance sweep of the AWS facts adapter against the bed's moto: it follows next tokens
//! page by page (a throttled page makes the whole sweep unknown, never partial), and 20
//! EC2NodeClasses over 2,000 instances stay within the call budget. Does IO (moto, proxy).
//!
//! Isolation on a shared moto: each test has its own EC2/EKS region and unique IAM names.

use anyhow::{Context, Result};
use karpenter_health_api::karpenter::SelectorTerm;
use karpenter_health_aws::{AwsRequest, ObserverOptions};
use karpenter_health_checks::facts::UnknownCause;
use karpenter_health_e2e::Bed;
use karpenter_health_e2e::aws_observer::{cause, instance_vpcs, observer, tag_term, test_options};
use karpenter_health_e2e::aws_seed::{AwsSeeder, NODE_POLICIES};
use karpenter_health_e2e::fault_proxy::{Fault, FaultProxy};
use karpenter_health_e2e::names::unique;
use std::collections::BTreeSet;
use std::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_instance_sweep_follows_next_tokens_page_by_page() -> Result<()> {
    let bed = Bed::from_env()?;
    let region = "ap-southeast-3";
    let seed = AwsSeeder::new(&bed, region).await?;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_node_classes_over_2000_instances_stay_within_the_call_budget() -> Result<()> {
    let bed = Bed::from_env()?;
    let region = "me-south-1";
    let seed = AwsSeeder::new(&bed, region).await?;
    let cluster = unique("kh-budget");
    let role = unique("kh-budget-node");
    let role_arn = seed.node_role(&role, "/", &NODE_POLICIES).await?;
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
    seed.eks_cluster(&cluster, &role_arn, &a.vpc, Some(&a.subnet), "1.29")
        .await?;

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
            pod_identity_service_accounts: Vec::new(),
            ..Default::default()
        })
        .collect();

    let proxy = FaultProxy::start(bed.moto_url()?).await?;
    // The production defaults (TTLs, rate limits), with timeouts that fit moto's speed.
    let options = ObserverOptions {
        sdk: test_options().sdk,
        ..ObserverOptions::default()
    };
    // A fresh observer: a cold refresh of all 20 EC2NodeClasses, reconciled concurrently. One
    // cold refresh decides the budget (the calls do not vary between fresh observers); its wall
    // time is printed only, since performance is measured in the benchmarks (docs/benchmarks.md).
    let obs = observer(&bed, &proxy, region, options).await?;
    proxy.reset_counts();
    let started = Instant::now();
    let all = futures::future::join_all(requests.iter().map(|r| obs.observe(r))).await;
    let wall = started.elapsed();
    for facts in &all {
        assert_eq!(facts.cluster_instances.found().map(Vec::len), Some(2000));
        assert_eq!(instance_vpcs(facts)?.len(), 2);
        assert!(facts.security_groups.found().is_some_and(|g| !g.is_empty()));
    }
    let sg_calls = proxy.count("ec2", "DescribeSecurityGroups");
    let pages = proxy.count("ec2", "DescribeInstances");
    eprintln!(
        "refresh of 20 EC2NodeClasses over 2,000 instances took {wall:?}; \
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

    // Within the TTL the next refresh costs no call at all.
    proxy.reset_counts();
    futures::future::join_all(requests.iter().map(|r| obs.observe(r))).await;
    assert!(proxy.counts().is_empty(), "{:?}", proxy.counts());
    Ok(())
}

/// EC2 answers a permitted dry run with DryRunOperation and lists nothing; moto lists
/// everything, so the proxy answers as EC2 does (Karpenter's start makes this call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_listing_is_answered_dry_run_operation_as_ec2_does() -> Result<()> {
    let bed = Bed::from_env()?;
    let proxy = FaultProxy::start(bed.moto_url()?).await?;
    let ec2 = aws_sdk_ec2::Client::new(&bed.aws_config_at(&proxy.url(), "sa-east-1").await?);
    let error = ec2
        .describe_instance_types()
        .dry_run(true)
        .send()
        .await
        .expect_err("a dry run is answered with an error");
    let code = aws_sdk_ec2::error::ProvideErrorMetadata::code(&error);
    assert_eq!(code, Some("DryRunOperation"), "{error:?}");
    // Without the flag, the listing itself.
    let listed = ec2.describe_instance_types().max_results(5).send().await?;
    assert_eq!(listed.instance_types().len(), 5);
    Ok(())
}

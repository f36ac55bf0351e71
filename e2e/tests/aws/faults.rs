//! Each AWS fault, injected by the fault proxy in front of the bed's moto, makes exactly the fact
//! it touches unknown with the right cause, bounded in retries and time, keeps the last good answer
//! with its age, and heals on the next refresh of the same observer. Does IO (moto, proxy).
//!
//! Isolation on a shared moto: each test has its own EC2/EKS region and unique IAM names.

use anyhow::{Context, Result, bail};
use karpenter_health_aws::AwsRequest;
use karpenter_health_checks::facts::{AwsFacts, UnknownCause};
use karpenter_health_e2e::Bed;
use karpenter_health_e2e::aws_observer::{
    SLOWEST_OTHER_CALL, cause, observer, tag_term, with_timeouts,
};
use karpenter_health_e2e::aws_seed::{AwsSeeder, NODE_POLICIES};
use karpenter_health_e2e::fault_proxy::{Fault, FaultProxy};
use karpenter_health_e2e::names::unique;
use std::time::{Duration, Instant};

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
    let bed = Bed::from_env()?;
    let region = "sa-east-1";
    let seed = AwsSeeder::new(&bed, region).await?;
    let cluster = unique("kh-faults");
    let role = unique("kh-faults-node");
    let profile = unique("kh-faults-profile");
    let role_arn = seed.node_role(&role, "/", &NODE_POLICIES).await?;
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
    seed.eks_cluster(&cluster, &role_arn, &net.vpc, Some(&net.subnet), "1.29")
        .await?;

    let proxy = FaultProxy::start(bed.moto_url()?).await?;
    // Short enough to see a hang end; each attempt four times the slowest of the calls this
    // test makes (no catalogue), the operation ten.
    let options = with_timeouts(SLOWEST_OTHER_CALL * 4, SLOWEST_OTHER_CALL * 10);
    let attempts = options.sdk.max_attempts as usize;
    let operation_timeout = options.sdk.timeouts.operation;
    let obs = observer(&bed, &proxy, region, options).await?;
    let request = AwsRequest {
        cluster_name: Some(cluster.clone()),
        instance_profile: Some(profile.clone()),
        role: None,
        security_group_selector_terms: vec![tag_term("karpenter.sh/discovery", &cluster)],
        pod_identity_service_accounts: Vec::new(),
        ..Default::default()
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

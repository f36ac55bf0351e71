//! The IAM policy `karpenter-health iam-policy` prints is all the operator needs: the built
//! binary prints it for the seeded cluster, the gap proxy holds the operator's requests to it
//! as IAM would (`aws-gaps/src/simulator/enforce.rs`), and every condition turns True with no
//! request refused. Its Pod Identity variant serves a cluster its session tag names, and a
//! session naming another cluster is refused that cluster's reads: Unknown, never False.

use anyhow::{Context as _, Result, bail};
use karpenter_health_api::ConditionType;
use karpenter_health_e2e::fixture::Fixture;
use karpenter_health_e2e::karpenter_health_binary;
use karpenter_health_e2e::status_log::StatusLog;
use std::collections::BTreeMap;

/// moto's account, which owns everything the bed seeds.
const ACCOUNT: &str = "123456789012";
/// The access key the operator signs with here: the one the proxy holds to the policy.
const OPERATOR_KEY: &str = "AKIAKARPENTERHEALTH1";

/// What `karpenter-health iam-policy` prints for the fixture's account and region with `more`.
async fn printed_policy(fx: &Fixture, more: &[&str]) -> Result<String> {
    let output = tokio::process::Command::new(karpenter_health_binary()?)
        .args([
            "iam-policy",
            "--account-id",
            ACCOUNT,
            "--region",
            &fx.region,
        ])
        .args(["--controller-role", &fx.controller_role])
        .args(more)
        .output()
        .await?;
    if !output.status.success() {
        bail!(
            "iam-policy exited {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8(output.stdout)?)
}

/// Karpenter's interruption queue and rules, the queue named after the cluster as Karpenter's
/// getting-started template and the community EKS module name it (the policy's default).
async fn interruption_queue_named_after_the_cluster(fx: &Fixture) -> Result<()> {
    fx.aws.interruption_queue(&fx.cluster).await?;
    fx.set_karpenter_env("1.8.6", &[("INTERRUPTION_QUEUE", &fx.cluster)])
        .await
}

/// Fails unless the operator asked each service the healthy class needs and nothing was refused.
fn nothing_refused_and_every_service_asked(fx: &Fixture) -> Result<()> {
    let refused = fx.proxy.refused();
    if !refused.is_empty() {
        bail!("the policy refused the operator: {refused:?}");
    }
    // The reads of a healthy class; each action is scoped to a resource in the policy, so
    // each must have been decided by its scoped statement.
    for (service, operation) in [
        ("iam", "GetInstanceProfile"),
        ("iam", "GetRole"),
        ("iam", "SimulatePrincipalPolicy"),
        ("eks", "DescribeCluster"),
        ("ec2", "DescribeSubnets"),
        ("ssm", "GetParameter"),
        ("sqs", "GetQueueUrl"),
        ("sqs", "GetQueueAttributes"),
        ("events", "ListRuleNamesByTarget"),
        ("events", "DescribeRule"),
    ] {
        if fx.proxy.count(service, operation) == 0 {
            bail!("the operator never called {service}:{operation}");
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_works_under_the_cluster_policy_it_prints() -> Result<()> {
    let fx = Fixture::seed("iampol", "us-west-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        interruption_queue_named_after_the_cluster(&fx).await?;
        let policy = printed_policy(&fx, &["--cluster-name", &fx.cluster]).await?;
        assert!(!policy.contains("PrincipalTag"), "{policy}");
        fx.proxy
            .enforce_identity_policy(OPERATOR_KEY, &policy, &BTreeMap::new())?;
        let operator = fx.start_operator_signed_as(OPERATOR_KEY).await?;
        fx.wait_healthy("under the printed policy").await?;
        nothing_refused_and_every_service_asked(&fx)?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_identity_session_sees_its_own_cluster_only() -> Result<()> {
    let fx = Fixture::seed("iampod", "us-west-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        interruption_queue_named_after_the_cluster(&fx).await?;
        let policy = printed_policy(&fx, &["--pod-identity"]).await?;
        let tags = |cluster: &str| BTreeMap::from([("eks-cluster-name".into(), cluster.into())]);
        fx.proxy
            .enforce_identity_policy(OPERATOR_KEY, &policy, &tags(&fx.cluster))?;
        let operator = fx.start_operator_signed_as(OPERATOR_KEY).await?;
        fx.wait_healthy("with a session tagged with this cluster")
            .await?;
        nothing_refused_and_every_service_asked(&fx)?;
        operator.stop().await?;

        // The same role's session on another cluster: this cluster's reads are refused.
        fx.proxy
            .enforce_identity_policy(OPERATOR_KEY, &policy, &tags("another-cluster"))?;
        let log = StatusLog::start(&fx.admin, &fx.name);
        let operator = fx.start_operator_signed_as(OPERATOR_KEY).await?;
        let status = fx
            .wait_status("a condition Unknown with AwsAccessDenied", |s| {
                s.conditions
                    .iter()
                    .any(|c| c.status == "Unknown" && c.reason == "AwsAccessDenied")
            })
            .await?;
        let refused = fx.proxy.refused();
        let cluster_arn = format!("arn:aws:eks:{}:{ACCOUNT}:cluster/{}", fx.region, fx.cluster);
        assert!(
            refused
                .iter()
                .any(|(action, resource)| action == "eks:DescribeCluster"
                    && *resource == cluster_arn),
            "{refused:?}"
        );
        assert!(
            refused
                .iter()
                .all(|(action, _)| action.starts_with("eks:") || action.starts_with("sqs:")),
            "only the cluster's own resources are refused: {refused:?}"
        );
        operator.stop().await?;
        for held in log.stop().await.iter().chain([&status]) {
            for ty in ConditionType::ALL {
                let c = held.condition(*ty);
                assert!(
                    c.is_none_or(|c| c.status != "False"),
                    "{ty} False while AWS refused the reads: {c:?}"
                );
            }
        }
        Ok(())
    }
    .await;
    fx.finish(outcome).await.context("a Pod Identity session")
}

//! The operator end to end when its surroundings fail, on the real kube-apiserver and moto: an
//! AWS outage (throttling, then an unreachable endpoint, through the fault proxy) makes the
//! AWS-derived conditions Unknown with the cause and never False; an API server restart leaves the
//! status unchanged and every watch working. Each test starts from the healthy seeded setup of
//! `karpenter_health_e2e::fixture`. Does IO (API server, moto, fault proxy, restarts the bed's API
//! server).
//!
//! Karpenter's state is written by hand here, not produced by the lab's real controller: what is
//! checked is the operator through API server and AWS outages; Karpenter's status only has to
//! exist.

use anyhow::{Context, Result, ensure};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use karpenter_health_api::{ConditionType, KarpenterHealth, KarpenterHealthStatus, Reason};
use karpenter_health_e2e::fault_proxy::{Fault, FaultProxy};
use karpenter_health_e2e::fixture::{DEADLINE, Fixture, REFRESH};
use karpenter_health_e2e::health_status::{condition_is, message, summary};
use karpenter_health_e2e::status_log::StatusLog;
use karpenter_health_e2e::wait_for;
use kube::api::{Api, DeleteParams};
use serde_json::json;
use std::time::Duration;

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
        condition_is(&status, ConditionType::Ready, "Unknown", reason),
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

        let seen = log.stop().await;
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

/// A class left Unknown by throttling runs again within a minute, not at the next refresh: the
/// first evaluation finds IAM throttling (as a cold start with many distinct IAM questions
/// spends the operator's own IAM budget), and with a refresh of ten minutes the class is
/// healthy within a minute of IAM answering again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_unknown_from_throttling_runs_again_soon_not_at_the_next_refresh() -> Result<()> {
    let fx = Fixture::seed("soon", "eu-south-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        let proxy = FaultProxy::start(fx.bed.moto_url()?).await?;
        proxy.inject("iam", None, Fault::Throttle);
        let operator = fx
            .start_operator_with(Some(&proxy.url()), |config| {
                config.refresh_interval = Duration::from_secs(600);
            })
            .await?;
        fx.wait_status("NodeRoleReady Unknown because IAM throttles", |s| {
            condition_is(
                s,
                ConditionType::NodeRoleReady,
                "Unknown",
                Reason::AwsThrottled,
            )
        })
        .await?;
        proxy.clear_faults();
        // `wait_healthy` gives up after a minute, far before the refresh.
        fx.wait_healthy("within a minute of IAM answering again")
            .await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
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

        fx.bed.restart_api_server(None).await?;
        let restarted = Timestamp::now();

        // The operator evaluates again, without being restarted, and the status is unchanged:
        // nothing it wrote around the outage flipped a condition (its caches were kept).
        let after = fx
            .wait_status("an evaluation after the restart", |s| {
                s.last_evaluated.as_ref().is_some_and(|t| t.0 > restarted)
            })
            .await?;
        assert_eq!(summary(&after), summary(&before));
        let seen = log.stop().await;
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
        fx.wait_only_failed(ConditionType::NodeRoleMapped, Reason::NodeRoleNotMapped)
            .await?;
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

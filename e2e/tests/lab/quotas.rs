//! Verdict against behaviour, the account's vCPU quota: the real Karpenter controller on the bed
//! (see `classic_failures.rs`) launching against the gap proxy, which holds launches to the
//! Service Quotas value a test sets as EC2 does (`aws-gaps/src/vcpu_quotas.rs`). Does IO (the
//! bed, moto, Karpenter's process).

use anyhow::{Result, ensure};
use karpenter_health_api::{ConditionType, Reason};
use karpenter_health_aws_gaps::vcpu_quotas::ON_DEMAND_STANDARD;
use karpenter_health_e2e::health_status::message;
use karpenter_health_e2e::lab::{LAUNCH, Lab};
use std::time::Duration;

/// How long a Pod waits before LimitsLeaveRoom counts it (2 minutes by default).
const WAITING_ON_LIMITS_AFTER: Duration = Duration::from_secs(20);

/// LimitsLeaveRoom, VcpuQuotaExhausted: the account's on-demand standard vCPU quota
/// (`L-1216C47A`) is what this cluster's own node takes. The healthy half first: with a quota of
/// 4, Karpenter launches a 2-vCPU node for the first Pod and every condition is True. With the
/// quota at 2, a second Pod needs a second node: EC2 refuses every override of Karpenter's fleet
/// (`VcpuLimitExceeded`), which Karpenter takes for insufficient capacity: it marks the offerings
/// unavailable, deletes the NodeClaim and logs the failure (aws/karpenter-provider-aws
/// `pkg/errors/errors.go` unfulfillableCapacityErrorCodes, kubernetes-sigs/karpenter
/// `pkg/controllers/nodeclaim/lifecycle/launch.go`), and no second instance runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vcpu_quota_the_clusters_own_node_takes_refuses_the_next_launch() -> Result<()> {
    let lab = Lab::start("lab-vcpu-quota", "ca-central-1").await?;
    let outcome: Result<()> = async {
        lab.only_instance_types(&["m5.large", "c5.large"]).await?;
        lab.fx.proxy.set_ec2_quota(ON_DEMAND_STANDARD, Some(4.0));
        let operator = lab
            .fx
            .start_operator_with(None, |config| {
                config.evaluation.waiting_on_limits_after = WAITING_ON_LIMITS_AFTER;
            })
            .await?;
        // The twin: room for the first node.
        lab.workload("first", "1500m").await?;
        lab.wait_node_claim("Initialized", LAUNCH).await?;
        lab.wait_pod_bound("first", LAUNCH).await?;
        lab.fx.wait_healthy("with room in the vCPU quota").await?;

        // The quota at what that node takes: a second node does not fit.
        lab.fx.proxy.set_ec2_quota(ON_DEMAND_STANDARD, Some(2.0));
        let mark = lab.karpenter.mark();
        lab.workload("second", "1500m").await?;
        let status = lab
            .fx
            .wait_only_failed(ConditionType::LimitsLeaveRoom, Reason::VcpuQuotaExhausted)
            .await?;
        let text = message(&status, ConditionType::LimitsLeaveRoom);
        ensure!(
            text.contains("second") && text.contains("2 of the account's 2 vCPU quota"),
            "names the Pod and the quota: {text}"
        );
        // What Karpenter does: its fleet refused for the quota, taken for insufficient capacity.
        let failed = lab
            .wait_logged_since(
                &mark,
                "failed launching nodeclaim",
                &["VcpuLimitExceeded"],
                LAUNCH,
            )
            .await?;
        eprintln!("lab: Karpenter's launch: {failed}");
        let refused = lab.fx.proxy.fleets_refused("VcpuLimitExceeded");
        ensure!(refused >= 1, "no fleet was refused for the quota");
        let running = lab.launched_instances().await?;
        ensure!(
            running.len() == 1,
            "one instance within the quota, not {running:?}"
        );
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

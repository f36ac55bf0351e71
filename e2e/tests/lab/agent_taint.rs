//! Verdict against behaviour for an agent's taint the NodePool does not declare as a startup
//! taint (NodesFitWorkloads, AgentTaintNotStartupTaint). Cilium's settings say its operator taints
//! new nodes (`set-cilium-node-taints`), and the node stand-in does what that operator does while
//! the agent is not running yet: it puts `node.cilium.io/agent-not-ready` on each new Node
//! (cilium/cilium `operator/watchers/node_taint.go`). The real Karpenter launches a node for one
//! Pod; the node carries a taint the Pod does not tolerate and that Karpenter does not hide (it
//! hides only startup and well-known ephemeral taints, kubernetes-sigs/karpenter
//! `pkg/controllers/state/statenode.go` `Taints()`), so it launches more nodes for the same Pod.
//! karpenter-health warns and turns nothing False. The healthy twin declares the taint in
//! `startupTaints`: one node, counted as room until the agent runs, then the Pod runs on it.
//! Does IO (the bed, moto, Karpenter's process).

use anyhow::{Result, ensure};
use karpenter_health_api::KarpenterHealthStatus;
use karpenter_health_e2e::health_status::{finding_message, has_finding, nothing_false};
use karpenter_health_e2e::lab::Lab;
use karpenter_health_e2e::node_stand_in::AGENT_TAINT;
use karpenter_health_e2e::wait_for;
use serde_json::json;
use std::time::Duration;

/// Launches, registrations and Karpenter's re-evaluation of a pending Pod (every 10 s,
/// `pkg/controllers/provisioning/controller.go`).
const SETTLE: Duration = Duration::from_secs(120);
/// How long the twin is watched for a launch beyond the first: several of Karpenter's
/// re-evaluations of the pending Pod.
const QUIET: Duration = Duration::from_secs(40);

fn warned(s: &KarpenterHealthStatus) -> bool {
    has_finding(s, "AgentTaintNotStartupTaint")
}

async fn claims(lab: &Lab) -> Result<usize> {
    Ok(lab.node_claims().await?.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ciliums_taint_outside_startup_taints_makes_karpenter_launch_nodes_for_nothing()
-> Result<()> {
    let lab = Lab::start("lab-agent", "eu-west-1").await?;
    let outcome: Result<()> = async {
        lab.fx.install_cilium().await?;
        lab.steer_nodes(Some("agent-not-running")).await?;
        let operator = lab.fx.start_operator(None, false).await?;
        let status = lab
            .fx
            .wait_status("AgentTaintNotStartupTaint, nothing False", |s| {
                warned(s) && nothing_false(s) && s.conditions.iter().all(|c| c.reason != "Pending")
            })
            .await?;
        let warning = finding_message(&status, "AgentTaintNotStartupTaint");
        ensure!(
            warning.contains(&format!("NodePool {}", lab.fx.name))
                && warning.contains(AGENT_TAINT.0),
            "{warning}"
        );

        // What the real Karpenter does: a node for the Pod, then more for the same Pod.
        lab.workload("app", "100m").await?;
        let launched = wait_for("a second NodeClaim for one Pod", SETTLE, || async {
            let n = claims(&lab).await?;
            Ok((n >= 2).then_some(n))
        })
        .await;
        if launched.is_err() {
            return launched.map(|_| ()).map_err(|e| {
                e.context(format!(
                    "Karpenter's log ends:\n{}",
                    lab.karpenter.log_tail(20)
                ))
            });
        }
        let status = lab.fx.wait_status("still warned", warned).await?;
        ensure!(
            nothing_false(&status),
            "a condition turned False: {status:?}"
        );

        // The healthy twin: the NodePool declares the taint as a startup taint.
        lab.delete_pod("app").await?;
        lab.delete_node_claims().await?;
        wait_for("the NodeClaims gone", SETTLE, || async {
            Ok((claims(&lab).await? == 0).then_some(()))
        })
        .await?;
        lab.patch_node_pool(json!({"spec": {"template": {"spec": {
            "startupTaints": [{"key": AGENT_TAINT.0, "effect": "NoExecute"}],
        }}}}))
        .await?;
        lab.fx
            .wait_status("the warning gone", |s| !warned(s) && nothing_false(s))
            .await?;
        lab.workload("app-twin", "100m").await?;
        lab.wait_node_claim("Registered", SETTLE).await?;
        // Karpenter counts the node as room for the Pod until its agent runs: no other launch.
        tokio::time::sleep(QUIET).await;
        let n = claims(&lab).await?;
        ensure!(
            n == 1,
            "Karpenter launched {n} NodeClaims for one Pod with the startup taint declared"
        );
        // The agent runs: its operator lifts the taint, the node initializes, the Pod runs.
        lab.agents_run_and_pod_binds("app-twin", "with Cilium's taint a startup taint", SETTLE)
            .await?;
        operator.stop().await
    }
    .await;
    let cleanup = lab.fx.remove_cilium().await;
    lab.finish(outcome.and(cleanup)).await
}

/// How long an agent's Pod takes to run on a new node decides what its taint costs when the
/// NodePool does not declare it: the stand-in's agent lifts Cilium's taint 5 s, then 30 s, after
/// the Node appears (an image already cached, then one pulled). Karpenter may launch more nodes
/// for the Pod meanwhile; how many it launched is printed (`lab: an agent after ...`, with
/// `LAB_TEST_ARGS=--nocapture`) and is what docs/checks.md records (one at 5 s and five at 30 s
/// on v1.8.6 and v1.14.1, measured 2026-11-30), not asserted: it depends on Karpenter's batching
/// and the bed's pace.
/// Asserted: the warning holds, nothing turns False, and the Pod runs once the agent does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_starts_late_decides_what_its_taint_outside_startup_taints_costs()
-> Result<()> {
    let lab = Lab::start("lab-agent-late", "eu-west-1").await?;
    let outcome: Result<()> = async {
        lab.fx.install_cilium().await?;
        let operator = lab.fx.start_operator(None, false).await?;
        lab.fx
            .wait_status("AgentTaintNotStartupTaint, nothing False", |s| {
                warned(s) && nothing_false(s) && s.conditions.iter().all(|c| c.reason != "Pending")
            })
            .await?;
        for after in [5_u64, 30] {
            lab.steer_nodes(Some(&format!("agent-starts-after-{after}s")))
                .await?;
            let pod = format!("app-after-{after}");
            lab.workload(&pod, "100m").await?;
            lab.wait_pod_bound(&pod, SETTLE + Duration::from_secs(after))
                .await?;
            let launched = claims(&lab).await?;
            eprintln!(
                "lab: an agent after {after} s: {launched} NodeClaim(s) launched for one Pod ({})",
                std::env::var("KH_KARPENTER_RELEASE").unwrap_or_default()
            );
            let status = lab.fx.wait_status("still warned", warned).await?;
            ensure!(
                nothing_false(&status),
                "a condition turned False with the agent after {after} s: {status:?}"
            );
            lab.delete_pod(&pod).await?;
            lab.delete_node_claims().await?;
            wait_for("the NodeClaims gone", SETTLE, || async {
                Ok((claims(&lab).await? == 0).then_some(()))
            })
            .await?;
        }
        operator.stop().await
    }
    .await;
    let cleanup = lab.fx.remove_cilium().await;
    lab.finish(outcome.and(cleanup)).await
}

//! Verdict against behaviour for nodes that register and never initialize (NodesFitWorkloads,
//! NodesNotInitializing): the NodePool declares a startup taint that no agent on its nodes
//! removes. The real Karpenter launches one node, registers it and puts the startup taint on it;
//! the node is Ready, but Karpenter's Initialized condition waits ("StartupTaintsExist") and no
//! deadline ends the wait (kubernetes-sigs/karpenter `pkg/controllers/nodeclaim/lifecycle/
//! initialization.go`, `liveness.go`). The Pod it launched the node for stays pending, and
//! Karpenter launches no other node for it. The healthy twin: the agent removes the taint, the
//! node initializes, the Pod runs and every condition is True. Does IO (the bed, moto,
//! Karpenter's process).

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use karpenter_health_api::{ConditionType, Reason};
use karpenter_health_e2e::lab::{LAUNCH, Lab};
use kube::api::Api;
use serde_json::json;
use std::time::Duration;

/// The startup taint the NodePool declares and the stand-in's agent never removes.
const AGENT_TAINT: &str = "example.com/agent-not-ready";

/// Karpenter's `Initialized` condition of NodeClaim `name`: its status, reason and message.
async fn initialized_of(lab: &Lab, name: &str) -> Result<(String, String, String)> {
    let claim = lab
        .node_claims()
        .await?
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .with_context(|| format!("NodeClaim {name} is gone"))?;
    let condition = karpenter_health_e2e::lab::condition(&claim, "Initialized")
        .with_context(|| format!("NodeClaim {name} has no Initialized condition"))?;
    let field = |f: &str| condition[f].as_str().unwrap_or_default().to_owned();
    Ok((field("status"), field("reason"), field("message")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_startup_taint_nobody_removes_leaves_the_node_uninitialized_and_its_pods_pending()
-> Result<()> {
    let lab = Lab::start("lab-init", "eu-west-1").await?;
    let outcome: Result<()> = async {
        lab.patch_node_pool(json!({"spec": {"template": {"spec": {
            "startupTaints": [{"key": AGENT_TAINT, "effect": "NoSchedule"}],
        }}}}))
        .await?;
        lab.steer_nodes(Some("keep-startup-taints")).await?;
        let operator = lab
            .fx
            .start_operator_with(None, |config| {
                // The default, 10 minutes, cannot be waited out on the bed.
                config.evaluation.initialization_timeout = Duration::from_secs(20);
            })
            .await?;
        lab.fx.wait_healthy("before any node").await?;

        lab.workload("app", "100m").await?;
        let registered = lab.wait_node_claim("Registered", LAUNCH).await?;
        let name = registered.metadata.name.clone().unwrap_or_default();
        let status = lab
            .fx
            .wait_only_failed(
                ConditionType::NodesFitWorkloads,
                Reason::NodesNotInitializing,
            )
            .await?;
        let message =
            karpenter_health_e2e::health_status::message(&status, ConditionType::NodesFitWorkloads)
                .to_owned();
        ensure!(
            message.contains(&name)
                && message.contains("StartupTaintsExist")
                && message.contains(AGENT_TAINT),
            "names the NodeClaim and the taint Karpenter waits for: {message}"
        );

        // What the real Karpenter does: it says what it waits for, and waits.
        let (initialized, reason, said) = initialized_of(&lab, &name).await?;
        ensure!(
            initialized != "True" && reason == "StartupTaintsExist" && said.contains(AGENT_TAINT),
            "Karpenter's Initialized: {initialized} {reason} {said}"
        );
        // The Pod it launched the node for waits, and no other node is launched for it.
        let pod = Api::<Pod>::namespaced(lab.fx.admin.clone(), &lab.fx.name)
            .get("app")
            .await?;
        ensure!(
            pod.spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_none(),
            "the Pod was bound to a node that keeps its startup taint"
        );
        let claims = lab.node_claims().await?.len();
        ensure!(
            claims == 1,
            "Karpenter launched {claims} NodeClaims; it counts the uninitialized node as room"
        );

        // The healthy twin: the agent starts and removes its taint.
        lab.agents_run_and_pod_binds("app", "once the agent removed its startup taint", LAUNCH)
            .await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

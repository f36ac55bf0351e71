//! Verdict against behaviour for DaemonSets that leave a NodePool's nodes no room
//! (NodesFitWorkloads, DaemonSetsFillNodes), probed at the edge: the NodePool allows only
//! m5.large, whose nodes Karpenter models with 1930m for Pods (2 vCPUs less 70m kube-reserved;
//! aws/karpenter-provider-aws `pkg/providers/instancetype/types.go`), and a DaemonSet selecting
//! the test's NodePool requests 1931m, one millicore more. The real Karpenter adds the
//! DaemonSet's requests to the Pod's (kubernetes-sigs/karpenter `scheduling/scheduler.go`
//! `getDaemonOverhead`), finds no type with room even for a Pod that requests nothing, launches
//! nothing, and says so on the Pod. The healthy twin: the DaemonSet asks exactly 1930m, Karpenter
//! launches one node for the same Pod, the Pod is bound and every condition is True. Does IO (the
//! bed, moto, Karpenter's process).

use anyhow::{Result, ensure};
use k8s_openapi::api::apps::v1::DaemonSet;
use karpenter_health_api::{ConditionType, Reason};
use karpenter_health_e2e::lab::{LAUNCH, Lab, PROVISIONER_PASS};
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};

const DAEMONSET: &str = "node-agent";

/// The DaemonSet, on the test's NodePool only, its one container requesting `cpu`.
fn daemonset(lab: &Lab, cpu: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": DAEMONSET, "namespace": lab.fx.name},
        "spec": {
            "selector": {"matchLabels": {"app": DAEMONSET}},
            "template": {
                "metadata": {"labels": {"app": DAEMONSET}},
                "spec": {
                    "nodeSelector": {"karpenter.sh/nodepool": lab.fx.name},
                    "containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": cpu}}}],
                },
            },
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonsets_larger_than_every_allowed_type_leave_the_node_pool_launching_nothing()
-> Result<()> {
    let lab = Lab::start("lab-ds", "eu-west-1").await?;
    let outcome: Result<()> = async {
        lab.only_instance_types(&["m5.large"]).await?;
        let operator = lab.fx.start_operator(None, false).await?;
        lab.fx.wait_healthy("before the DaemonSet").await?;

        karpenter_health_e2e::apply_json(&lab.fx.admin, &[daemonset(&lab, "1931m")]).await?;
        let status = lab
            .fx
            .wait_only_failed(
                ConditionType::NodesFitWorkloads,
                Reason::DaemonSetsFillNodes,
            )
            .await?;
        let message =
            karpenter_health_e2e::health_status::message(&status, ConditionType::NodesFitWorkloads)
                .to_owned();
        ensure!(
            message.contains(&format!("{}/{DAEMONSET} (1931m", lab.fx.name))
                && message.contains("on m5.large, the one instance type it allows")
                && message.contains("1931m CPU, more than the 1930m it can give Pods"),
            "names the DaemonSet and the room: {message}"
        );

        // What the real Karpenter does: no type has room for the DaemonSet, even beside a Pod
        // that requests nothing.
        lab.workload("app", "0").await?;
        lab.wait_events_of_pod("app", "FailedScheduling", "enough resources")
            .await?;
        tokio::time::sleep(PROVISIONER_PASS).await;
        let claims = lab.node_claims().await?.len();
        ensure!(
            claims == 0,
            "Karpenter launched {claims} NodeClaims with no room for the Pod"
        );

        // The healthy twin: the DaemonSet takes exactly the room, and the Pod needs none.
        karpenter_health_e2e::apply_json(&lab.fx.admin, &[daemonset(&lab, "1930m")]).await?;
        lab.fx
            .wait_healthy("once the DaemonSet leaves room")
            .await?;
        lab.wait_node_claim("Initialized", LAUNCH).await?;
        lab.wait_pod_bound("app", LAUNCH).await?;
        let claims = lab.node_claims().await?.len();
        ensure!(claims == 1, "{claims} NodeClaims for one Pod");
        operator.stop().await
    }
    .await;
    let cleanup = Api::<DaemonSet>::namespaced(lab.fx.admin.clone(), &lab.fx.name)
        .delete(DAEMONSET, &DeleteParams::default())
        .await
        .map(|_| ())
        .or_else(|e| match e {
            kube::Error::Api(r) if r.code == 404 => Ok(()),
            e => Err(e.into()),
        });
    lab.finish(outcome.and(cleanup)).await
}

//! Verdict against behaviour for the Pods a node is promised against the addresses the VPC CNI
//! can give it (NodesFitWorkloads, MaxPodsAboveAddresses): with `spec.kubelet.maxPods: 110` on a
//! NodePool of m5.large only, the real Karpenter puts 32 small Pods on one node (it promises 110),
//! where the CNI stand-in has 27 Pod addresses (3 ENIs × 9), so 5 Pods stay ContainerCreating
//! with the CNI's error; karpenter-health warns, and turns nothing False. The healthy twin (no
//! maxPods): Karpenter's own count, 3 × (10 − 1) + 2 = 29 (aws/karpenter-provider-aws
//! `pkg/providers/instancetype/types.go` `ENILimitedPods`), makes it launch a second node, every
//! Pod runs, and the warning is gone. Does IO (the bed, moto, Karpenter's process).

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use karpenter_health_api::KarpenterHealthStatus;
use karpenter_health_e2e::health_status::{finding_message, has_finding, nothing_false};
use karpenter_health_e2e::lab::Lab;
use karpenter_health_e2e::node_stand_in::NO_ADDRESS_MESSAGE;
use karpenter_health_e2e::wait_for;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;
use std::time::Duration;

/// Small Pods, more than one m5.large can address (27) and fewer than Karpenter's own count
/// for two nodes (2 × 29).
const PODS: usize = 32;
/// Karpenter's batching, the launches, the stand-in's Nodes and its sweeps (every 3 s).
const SETTLE: Duration = Duration::from_secs(180);

fn warned(s: &KarpenterHealthStatus) -> bool {
    has_finding(s, "MaxPodsAboveAddresses")
}

async fn create_pods(lab: &Lab) -> Result<()> {
    for i in 0..PODS {
        lab.workload(&format!("small-{i:02}"), "10m").await?;
    }
    Ok(())
}

/// How many of the test's Pods run, and how many wait for an address (ContainerCreating).
async fn running_and_waiting(lab: &Lab) -> Result<(usize, usize)> {
    let pods = Api::<Pod>::namespaced(lab.fx.admin.clone(), &lab.fx.name)
        .list(&ListParams::default())
        .await?;
    let phase = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.clone());
    let creating = |p: &Pod| {
        p.status
            .iter()
            .flat_map(|s| s.container_statuses.iter().flatten())
            .any(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.waiting.as_ref())
                    .is_some_and(|w| w.reason.as_deref() == Some("ContainerCreating"))
            })
    };
    let running = pods
        .iter()
        .filter(|p| phase(p).as_deref() == Some("Running"))
        .count();
    let waiting = pods
        .iter()
        .filter(|p| phase(p).as_deref() == Some("Pending") && creating(p))
        .count();
    Ok((running, waiting))
}

async fn wait_pods(lab: &Lab, what: &str, want: (usize, usize)) -> Result<()> {
    let waited = wait_for(what, SETTLE, || async {
        let now = running_and_waiting(lab).await?;
        Ok((now == want).then_some(()))
    })
    .await;
    if waited.is_err() {
        let (running, creating) = running_and_waiting(lab).await?;
        let claims = lab.node_claims().await?.len();
        return waited.with_context(|| {
            format!(
                "{running} running, {creating} without an address, {claims} NodeClaims;                  Karpenter's log ends:\n{}",
                lab.karpenter.log_tail(20)
            )
        });
    }
    waited
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_pods_above_the_addresses_leaves_pods_without_one_and_karpenters_own_count_does_not()
-> Result<()> {
    let lab = Lab::start_with_class(
        "lab-maxpods",
        "eu-west-1",
        |_| json!({"kubelet": {"maxPods": 110}}),
    )
    .await?;
    let outcome: Result<()> = async {
        lab.fx.install_aws_node(&[("WARM_ENI_TARGET", "1")]).await?;
        // EKS runs kube-proxy on every node beside aws-node: the 2 host-network Pods the CNI's
        // max-Pods formula leaves room for. Without it Karpenter packs a 28th addressed Pod into
        // that room on the twin's first node, which EKS never would.
        lab.fx.install_kube_proxy().await?;
        lab.only_instance_types(&["m5.large"]).await?;
        let operator = lab.fx.start_operator(None, false).await?;
        let status = lab
            .fx
            .wait_status("MaxPodsAboveAddresses, nothing False", |s| {
                warned(s) && nothing_false(s) && s.conditions.iter().all(|c| c.reason != "Pending")
            })
            .await?;
        let warning = finding_message(&status, "MaxPodsAboveAddresses");
        ensure!(
            warning.contains("m5.large runs up to 110 Pods but can address 29"),
            "{warning}"
        );

        // What Karpenter does with maxPods 110: one node for all of them; 27 get an address.
        create_pods(&lab).await?;
        wait_pods(
            &lab,
            "27 Pods running, 5 without an address",
            (27, PODS - 27),
        )
        .await?;
        ensure!(
            lab.node_claims().await?.len() == 1,
            "Karpenter launched more than one node for Pods it promised one node could run"
        );
        // The scheduler binds them in its own order; the CNI serves them in that order.
        let stuck = Api::<Pod>::namespaced(lab.fx.admin.clone(), &lab.fx.name)
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending"))
            .and_then(|p| p.metadata.name)
            .context("no Pod waits for an address")?;
        let events = lab.events(&stuck, "FailedCreatePodSandBox").await?;
        ensure!(
            events.iter().any(|e| e
                .message
                .as_deref()
                .is_some_and(|m| m.contains(NO_ADDRESS_MESSAGE))),
            "the Pod beyond the addresses has no CNI error: {events:?}"
        );
        let status = lab.fx.wait_status("still nothing False", warned).await?;
        ensure!(
            nothing_false(&status),
            "a condition turned False: {status:?}"
        );

        // The healthy twin: no maxPods, Karpenter's own count (29 for m5.large).
        Api::<Pod>::namespaced(lab.fx.admin.clone(), &lab.fx.name)
            .delete_collection(
                &DeleteParams::default().grace_period(0),
                &ListParams::default(),
            )
            .await?;
        lab.delete_node_claims().await?;
        wait_for("the NodeClaims gone", SETTLE, || async {
            Ok(lab.node_claims().await?.is_empty().then_some(()))
        })
        .await?;
        lab.fx
            .patch_node_class_spec(json!({"kubelet": null}))
            .await?;
        lab.fx
            .wait_status("the warning gone", |s| !warned(s) && nothing_false(s))
            .await?;
        create_pods(&lab).await?;
        wait_pods(&lab, "every Pod running on two nodes", (PODS, 0)).await?;
        ensure!(
            lab.node_claims().await?.len() == 2,
            "Karpenter's own count should need two m5.large nodes for {PODS} Pods"
        );
        lab.fx
            .wait_healthy("with Karpenter's own Pod count")
            .await?;
        operator.stop().await
    }
    .await;
    let cleanup = lab
        .fx
        .remove_aws_node()
        .await
        .and(lab.fx.remove_kube_proxy().await);
    lab.finish(outcome.and(cleanup)).await
}

//! A NodeClaim stuck terminating names what holds it, read from the Pods on its Node and their
//! PodDisruptionBudgets as the bed's real API server and disruption controller keep them: a
//! budget that allows no eviction (which the API server's eviction refuses too), Pods that only
//! wait once it allows one (and the eviction goes through), a `karpenter.sh/do-not-disrupt` Pod,
//! and an empty Node; `check` says the same. DriftCanBeReplaced stays True throughout: these are
//! warnings. Does IO (API server, controller-manager, moto).
//!
//! Karpenter's state is written by hand here, not produced by the lab's real controller: a
//! NodeClaim stuck terminating for an hour, which the bed cannot age; the eviction API's refusal
//! itself is real.

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use karpenter_health_api::{ConditionType, KarpenterHealthStatus};
use karpenter_health_e2e::fixture::{DEADLINE, Fixture};
use karpenter_health_e2e::status_log::StatusLog;
use karpenter_health_e2e::{apply_json, wait_for};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, EvictParams, GroupVersionKind};
use kube::api::{Patch, PatchParams};
use serde_json::json;
use std::time::Duration;

/// The bed's API server (1.34) serves PodDisruptionBudgets as `policy/v1` only (v1beta1 was
/// removed in 1.25).
fn budgets(fx: &Fixture) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("policy", "v1", "PodDisruptionBudget"),
        "poddisruptionbudgets",
    );
    Api::namespaced_with(fx.admin.clone(), &fx.name, &resource)
}

/// Sets the budget's `minAvailable` and waits for the disruption controller to process it.
async fn min_available(fx: &Fixture, min: i64, healthy: i64) -> Result<()> {
    let api = budgets(fx);
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"minAvailable": min}})),
    )
    .await?;
    wait_for("the disruption controller's answer", DEADLINE, || async {
        let budget = api.get("web").await?;
        let status = &budget.data["status"];
        let processed = status["observedGeneration"].as_i64() == budget.metadata.generation;
        let settled = status["currentHealthy"].as_i64() == Some(healthy)
            && status["desiredHealthy"].as_i64() == Some(min);
        Ok((processed && settled).then_some(()))
    })
    .await
}

fn terminating_warning(status: &KarpenterHealthStatus) -> Option<&str> {
    status
        .findings
        .iter()
        .find(|f| f.reason == "NodeClaimTerminatingLong")
        .map(|f| f.message.as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_claim_stuck_terminating_names_the_budget_or_pod_that_holds_it() -> Result<()> {
    let fx = Fixture::seed("drain", "eu-west-3", "1.8.6").await?;
    let node = format!("{}-node", fx.name);
    let outcome: Result<()> = async {
        // A threshold of zero: the bed cannot age a deletion by an hour.
        let operator = fx
            .start_operator_with(None, |config| {
                config.evaluation.terminating_long_after = Duration::ZERO;
            })
            .await?;
        fx.wait_healthy("before any NodeClaim terminates").await?;
        let log = StatusLog::start(&fx.admin, &fx.name);

        // Two Ready Pods on the Node, and a budget that wants both.
        fx.running_pod("web-1", &node, json!({})).await?;
        fx.running_pod("web-2", &node, json!({})).await?;
        apply_json(
            &fx.admin,
            &[json!({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "web", "namespace": fx.name},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
            })],
        )
        .await?;
        min_available(&fx, 2, 2).await?;
        // The API server's own eviction refuses it: the verdict below is reality's.
        let pods: Api<Pod> =
            Api::namespaced(fx.bed.admin_client_without_retries().await?, &fx.name);
        match pods.evict("web-1", &EvictParams::default()).await {
            Err(kube::Error::Api(status)) if status.code == 429 => {}
            other => anyhow::bail!("the eviction must be refused with 429, got {other:?}"),
        }

        // A NodeClaim on that Node, deleted, held by Karpenter's finalizer.
        let claim = fx.terminating_node_claim("stuck", &node).await?;
        let ns = &fx.name;
        let budget_holds =
            format!("PodDisruptionBudget {ns}/web allows no eviction of Pod {ns}/web-1");
        let status = fx
            .wait_status("the warning naming the budget", |s| {
                terminating_warning(s).is_some_and(|m| m.contains(&budget_holds))
            })
            .await?;
        let message = terminating_warning(&status).context("the warning")?;
        ensure!(
            message.contains(&claim) && message.contains(&format!("{ns}/web-2")),
            "{message}"
        );

        // `check` reads the same and says the same.
        let config = karpenter_health_operator::EvaluationConfig {
            karpenter_namespace: fx.name.clone(),
            terminating_long_after: Duration::ZERO,
            ..karpenter_health_operator::EvaluationConfig::defaults()
        };
        let aws = fx.bed.aws_port_at(&fx.proxy.url(), &fx.region).await?;
        let reports = karpenter_health_operator::one_shot::evaluate_once(
            &fx.admin,
            &aws,
            &config,
            std::slice::from_ref(&fx.name),
            &|_| {},
        )
        .await?;
        let said = format!("{:?}", reports[0].outcome);
        ensure!(said.contains(&budget_holds), "check: {said}");

        // The budget lowered to one: each eviction is allowed, the Pods only wait, and the API
        // server's eviction goes through.
        min_available(&fx, 1, 2).await?;
        fx.wait_status("the Pods named as waiting only", |s| {
            terminating_warning(s).is_some_and(|m| {
                m.contains("wait to be evicted") && !m.contains("allows no eviction")
            })
        })
        .await?;
        pods.evict("web-1", &EvictParams::default())
            .await
            .context("the eviction the budget now allows")?;
        fx.pod_gone("web-1").await?;

        // The last Pod annotated do-not-disrupt: Karpenter v1 does not evict it.
        pods.patch(
            "web-2",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
            ),
        )
        .await?;
        fx.wait_status("the warning naming the do-not-disrupt Pod", |s| {
            terminating_warning(s).is_some_and(|m| {
                m.contains(&format!(
                    "Pod {ns}/web-2 is annotated karpenter.sh/do-not-disrupt"
                ))
            })
        })
        .await?;

        // Repaired: the Pod gone, the Node holds nothing; then Karpenter's finalizer goes and
        // so does the warning.
        fx.pod_gone("web-2").await?;
        fx.wait_status("an empty Node said so", |s| {
            terminating_warning(s).is_some_and(|m| m.contains(&format!("no Pod on Node {node}")))
        })
        .await?;
        fx.release_node_claim(&claim).await?;
        fx.wait_status("no warning once the NodeClaim is gone", |s| {
            terminating_warning(s).is_none()
        })
        .await?;
        fx.wait_healthy("once the NodeClaim is gone").await?;
        for held in log.stop().await {
            let c = held.condition(ConditionType::DriftCanBeReplaced);
            ensure!(
                c.is_none_or(|c| c.status == "True"),
                "DriftCanBeReplaced left True: {c:?}"
            );
        }
        budgets(&fx).delete("web", &DeleteParams::default()).await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

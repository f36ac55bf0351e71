//! The newest Pod of a DaemonSet, whose requests Karpenter counts in place of its template's
//! (kubernetes-sigs/karpenter `provisioning/provisioner.go` `getDaemonSetPods`), read by the
//! operator on the real API server. A DaemonSet asking 1000 CPUs whose template was edited is a
//! warning while no Pod of it was read (Karpenter may count what an earlier Pod asked); a Pod of
//! it asking as much is DaemonSetsFillNodes once read; a newer Pod asking 100m (as a Vertical Pod
//! Autoscaler's admission would have it) is what Karpenter counts then: every condition True,
//! and it stays True across refreshes, since the read that keeps the finding away is kept.
//! Does IO (API server, moto through the fault proxy).

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use karpenter_health_api::{ConditionType, KarpenterHealthStatus, Reason, Severity};
use karpenter_health_e2e::fixture::{Fixture, REFRESH};
use karpenter_health_e2e::status_log::StatusLog;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::time::Duration;

const DAEMONSET: &str = "node-agent";
/// The operator's DaemonSet reads look for work every 5 s; three of its rounds.
const READ_ROUNDS: Duration = Duration::from_secs(15);

fn daemonset(fx: &Fixture) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": DAEMONSET, "namespace": fx.name},
        "spec": {
            "selector": {"matchLabels": {"app": DAEMONSET}},
            "template": {
                "metadata": {"labels": {"app": DAEMONSET}},
                "spec": {
                    // No node of the bed is of this NodePool: the DaemonSet controller makes no Pod.
                    "nodeSelector": {"karpenter.sh/nodepool": fx.name},
                    "containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "1000"}}}],
                },
            },
        },
    })
}

/// The reasons of NodesFitWorkloads' warnings.
fn nodes_fit_warnings(status: &KarpenterHealthStatus) -> Vec<&str> {
    status
        .findings
        .iter()
        .filter(|f| {
            f.condition_type == ConditionType::NodesFitWorkloads && f.severity == Severity::Warning
        })
        .map(|f| f.reason.as_str())
        .collect()
}

/// A Pod the DaemonSet controls (its controller reference), asking `cpu`; it names no node, so
/// the DaemonSet controller leaves it alone (it finds no node to hold it to) and no scheduler
/// binds it.
fn pod_of(fx: &Fixture, daemonset: &DaemonSet, suffix: &str, cpu: &str) -> Result<Pod> {
    let uid = daemonset
        .metadata
        .uid
        .clone()
        .context("the DaemonSet's uid")?;
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{DAEMONSET}-{suffix}"), "namespace": fx.name,
                     "labels": {"app": DAEMONSET},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                          "name": DAEMONSET, "uid": uid, "controller": true}]},
        "spec": {"nodeSelector": {"karpenter.sh/nodepool": fx.name},
                 "containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": {"cpu": cpu}}}]},
    }))?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karpenter_counts_a_daemonsets_newest_pod_and_so_does_the_operator() -> Result<()> {
    let fx = Fixture::seed("dspods", "us-west-2", "1.8.6").await?;
    let daemonsets: Api<DaemonSet> = Api::namespaced(fx.admin.clone(), &fx.name);
    let pods: Api<Pod> = Api::namespaced(fx.admin.clone(), &fx.name);
    let outcome: Result<()> = async {
        karpenter_health_e2e::apply_json(&fx.admin, &[daemonset(&fx)]).await?;
        // An edit of the template: generation 2, so the template alone is no proof of what its
        // Pods ask.
        let edited = daemonsets
            .patch(
                DAEMONSET,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"template": {"metadata": {
                    "annotations": {"edited": "once"}}}}})),
            )
            .await?;
        ensure!(
            edited.metadata.generation == Some(2),
            "generation {:?}",
            edited.metadata.generation
        );
        let operator = fx.start_operator(None, false).await?;

        // Its Pods were never read: Karpenter may count what an earlier Pod asked.
        fx.wait_status("DaemonSetsMayFillNodes while no Pod of it was read", |s| {
            nodes_fit_warnings(s) == ["DaemonSetsMayFillNodes"]
                && s.condition(ConditionType::NodesFitWorkloads)
                    .is_some_and(|c| c.status == "True" && !c.message.contains("leave room"))
        })
        .await?;

        // A Pod asking what the template asks: what Karpenter counts, read.
        pods.create(
            &Default::default(),
            &pod_of(&fx, &edited, "as-written", "1000")?,
        )
        .await?;
        let status = fx
            .wait_only_failed(
                ConditionType::NodesFitWorkloads,
                Reason::DaemonSetsFillNodes,
            )
            .await?;
        let message =
            karpenter_health_e2e::health_status::message(&status, ConditionType::NodesFitWorkloads)
                .to_owned();
        ensure!(
            message.contains(&format!("{}/{DAEMONSET} (1000000m", fx.name)),
            "names the DaemonSet and what Karpenter counts: {message}"
        );

        // A newer Pod asking 100m (creation timestamps have whole seconds).
        tokio::time::sleep(Duration::from_millis(1100)).await;
        pods.create(
            &Default::default(),
            &pod_of(&fx, &edited, "resized", "100m")?,
        )
        .await?;
        fx.wait_healthy("once the DaemonSet's newest Pod asks 100m")
            .await?;
        let log = StatusLog::start(&fx.admin, &fx.name);
        tokio::time::sleep(READ_ROUNDS.max(REFRESH * 3)).await;
        for held in log.stop().await {
            let fits = held.condition(ConditionType::NodesFitWorkloads);
            ensure!(
                fits.is_some_and(|c| c.status == "True") && nodes_fit_warnings(&held).is_empty(),
                "the Pod's read is kept: no finding comes back on a refresh: {fits:?} {:?}",
                held.findings
            );
        }
        operator.stop().await
    }
    .await;
    let cleanup = async {
        for deleted in [
            pods.delete(&format!("{DAEMONSET}-as-written"), &DeleteParams::default())
                .await
                .map(|_| ()),
            pods.delete(&format!("{DAEMONSET}-resized"), &DeleteParams::default())
                .await
                .map(|_| ()),
            daemonsets
                .delete(DAEMONSET, &DeleteParams::default())
                .await
                .map(|_| ()),
        ] {
            match deleted {
                Err(kube::Error::Api(r)) if r.code == 404 => {}
                other => other?,
            }
        }
        Ok(())
    }
    .await;
    fx.finish(outcome.and(cleanup)).await
}

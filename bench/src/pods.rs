//! The bench's Pending Pods for the Pod storm: benign workloads the scheduler found no node for
//! (the bed has neither), half of them pinned to a NodePool so they spread over the classes;
//! creating them with the scheduler's verdict written through the status subresource, and
//! deleting them. Does IO (API server).

use crate::transient::{created, gone, retried};
use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The namespace of the storm's Pods, the bench's alone.
pub const NAMESPACE: &str = "kh-bench-storm";

/// The name of Pod number `n`: a replica of Deployment `storm-<n % 50>`.
fn pod_name(n: usize) -> String {
    format!("storm-{:02}-{n}", n % 50)
}

/// Pod number `n`: a replica of one of 50 Deployments, with requests and no constraint on a
/// restricted label key (so no condition should change); every other Pod pins a NodePool by
/// `karpenter.sh/nodepool`, which Karpenter allows.
fn pod(n: usize, pools: &[String]) -> Value {
    let app = format!("storm-{:02}", n % 50);
    let name = pod_name(n);
    let mut spec = json!({
        "automountServiceAccountToken": false,
        "containers": [{
            "name": "app",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}},
        }],
    });
    if n.is_multiple_of(2) && !pools.is_empty() {
        spec["nodeSelector"] = json!({"karpenter.sh/nodepool": pools[(n / 2) % pools.len()]});
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app": app},
        },
        "spec": spec,
    })
}

/// What kube-scheduler writes on a Pod it found no node for: the one shape Karpenter provisions
/// for (`PodScheduled=False`, reason `Unschedulable`).
fn unschedulable(now: &str) -> Value {
    json!({"status": {
        "phase": "Pending",
        "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/0 nodes are available: no nodes available to schedule pods.",
            "lastTransitionTime": now,
        }],
    }})
}

/// The storm's namespace and its default ServiceAccount (Pods need it; the bed's
/// controller-manager may not have made it yet).
pub async fn prepare_namespace(client: &kube::Client) -> Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    created(namespaces.create(&PostParams::default(), &namespace).await)
        .context("creating the storm namespace")?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "default", "namespace": NAMESPACE}}))?;
    created(accounts.create(&PostParams::default(), &account).await)
        .context("creating the storm namespace's default ServiceAccount")
}

/// Creates Pods `0..count` and writes each one's scheduler verdict, `concurrency` at a time;
/// `pools` are the NodePools half of them pin. Returns how long it took.
pub async fn create_pending(
    client: kube::Client,
    pools: Vec<String>,
    count: usize,
    concurrency: usize,
) -> Result<Duration> {
    let api: Api<Pod> = Api::namespaced(client, NAMESPACE);
    let now = jiff::Timestamp::now().to_string();
    let started = Instant::now();
    futures::stream::iter(0..count)
        .map(|n| {
            let (api, pools, now) = (&api, &pools, &now);
            async move {
                let object: Pod = serde_json::from_value(pod(n, pools))?;
                let name = object.metadata.name.clone().unwrap_or_default();
                let params = PostParams {
                    field_manager: Some("kube-controller-manager".into()),
                    ..PostParams::default()
                };
                created(retried(|| api.create(&params, &object)).await)
                    .with_context(|| format!("creating Pod {name}"))?;
                let status_params = PatchParams {
                    field_manager: Some("kube-scheduler".into()),
                    ..PatchParams::default()
                };
                let status = Patch::Merge(unschedulable(now));
                retried(|| api.patch_status(&name, &status_params, &status))
                    .await
                    .with_context(|| format!("writing the scheduler's verdict on Pod {name}"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await?;
    Ok(started.elapsed())
}

/// Deletes Pods `0..count`, `concurrency` at a time (a Pod on no node goes at once). Returns how
/// long it took.
pub async fn delete(client: kube::Client, count: usize, concurrency: usize) -> Result<Duration> {
    let api: Api<Pod> = Api::namespaced(client, NAMESPACE);
    let started = Instant::now();
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    futures::stream::iter(0..count)
        .map(|n| {
            let (api, params) = (&api, &params);
            let name = pod_name(n);
            async move {
                gone(retried(|| api.delete(&name, params)).await)
                    .with_context(|| format!("deleting Pod {name}"))
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<()>()
        .await?;
    Ok(started.elapsed())
}

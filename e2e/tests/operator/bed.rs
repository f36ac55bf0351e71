//! What the bed itself must do for the lab's verdicts to mean what they say on EKS: a Pod on a
//! Node with a NoExecute taint it does not tolerate is evicted by the controller manager's
//! taint-eviction controller (`e2e/bed/bed.sh` runs it; kubernetes/kubernetes
//! `pkg/controller/tainteviction`), and a Pod that tolerates the taint stays. Does IO (API server).

use anyhow::Result;
use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_health_e2e::{Bed, wait_for};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use std::time::Duration;

/// The controller deletes a Pod without a toleration at once; a few informer syncs on 2 cores.
const DEADLINE: Duration = Duration::from_secs(30);
const NODE: &str = "bed-taint-eviction";
const TAINT: &str = "example.com/evicting";

fn pod(name: &str, tolerates: bool) -> Result<Pod> {
    let tolerations = if tolerates {
        json!([{"key": TAINT, "operator": "Exists", "effect": "NoExecute"}])
    } else {
        json!([])
    };
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "tolerations": tolerations,
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
        },
    }))?)
}

#[tokio::test]
async fn a_pod_that_does_not_tolerate_a_no_execute_taint_is_evicted_and_one_that_does_stays()
-> Result<()> {
    let bed = Bed::from_env()?;
    let client = bed.admin_client().await?;
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": NODE},
        "spec": {"taints": [{"key": TAINT, "effect": "NoExecute"}]},
    }))?;
    let now = DeleteParams::default().grace_period(0);
    let _ = nodes.delete(NODE, &now).await;
    nodes.create(&PostParams::default(), &node).await?;
    for (name, tolerates) in [("bed-evicted", false), ("bed-tolerating", true)] {
        let _ = pods.delete(name, &now).await;
        wait_for("the previous run's Pod gone", DEADLINE, || async {
            Ok(pods.get_opt(name).await?.is_none().then_some(()))
        })
        .await?;
        pods.create(&PostParams::default(), &pod(name, tolerates)?)
            .await?;
    }
    let outcome = async {
        // No kubelet finishes the deletion: the eviction shows as the Pod's deletion timestamp.
        wait_for("the Pod without a toleration evicted", DEADLINE, || async {
            Ok(pods
                .get_opt("bed-evicted")
                .await?
                .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
                .then_some(()))
        })
        .await?;
        let tolerating = pods.get("bed-tolerating").await?;
        anyhow::ensure!(
            tolerating.metadata.deletion_timestamp.is_none(),
            "the Pod that tolerates the taint was evicted too"
        );
        Ok(())
    }
    .await;
    for name in ["bed-evicted", "bed-tolerating"] {
        let _ = pods.delete(name, &now).await;
    }
    let _ = nodes.delete(NODE, &now).await;
    outcome
}

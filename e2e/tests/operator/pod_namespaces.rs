//! Namespaces whose pending Pods are never judged (`--exclude-pod-namespaces`), on the real API
//! server and kube-scheduler: a tenant's Pod selecting a restricted label makes LabelsAllowed
//! False (RestrictedLabelDomain) while its namespace is judged, and the same Pod, still pending,
//! leaves the class healthy once the operator excludes its namespace. Does IO (API server, moto
//! through the fault proxy).

use anyhow::Result;
use karpenter_health_api::{ConditionType, Reason};
use karpenter_health_e2e::fixture::Fixture;
use karpenter_health_e2e::health_status::message;
use kube::api::DeleteParams;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_pod_of_an_excluded_namespace_is_not_judged() -> Result<()> {
    let fx = Fixture::seed("podns", "us-west-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        let judging = fx.start_operator(None, false).await?;
        fx.wait_healthy("before the tenant's Pod").await?;
        // The test's namespace stands for a tenant's: its workload selects a restricted label.
        let pods = fx
            .pending_pod("tenant-web", json!({"node-role.kubernetes.io/web": ""}))
            .await?;
        let status = fx
            .wait_only_failed(ConditionType::LabelsAllowed, Reason::RestrictedLabelDomain)
            .await?;
        let text = message(&status, ConditionType::LabelsAllowed);
        anyhow::ensure!(text.contains(&format!("{}/tenant-web", fx.name)), "{text}");
        judging.stop().await?;

        // The platform excludes the tenant's namespace: the Pod, still pending, is not judged.
        let excluded = vec![fx.name.clone()];
        let operator = fx
            .start_operator_with(None, |config| {
                config.evaluation.exclude_pod_namespaces =
                    karpenter_health_operator::config::Namespaces(excluded);
            })
            .await?;
        fx.wait_healthy("with the tenant's namespace excluded")
            .await?;
        pods.delete("tenant-web", &DeleteParams::default().grace_period(0))
            .await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

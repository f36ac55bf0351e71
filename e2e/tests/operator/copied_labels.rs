//! Labels copied from an EC2NodeClass onto its KarpenterHealth (`--copy-labels team`) on the real
//! API server: the KarpenterHealth takes the class's `team` label, follows a change of it, and
//! drops it when the class drops it, while a label not named is never copied. Does IO (API
//! server, moto through the fault proxy).

use anyhow::Result;
use karpenter_health_api::KarpenterHealth;
use karpenter_health_e2e::fixture::Fixture;
use karpenter_health_e2e::wait_for;
use karpenter_health_operator::copied_labels::parse_copied_labels;
use kube::api::Api;
use serde_json::json;
use std::time::Duration;

/// Waits until the KarpenterHealth's `team` and `env` labels are as given.
async fn wait_labels(fx: &Fixture, what: &str, team: Option<&str>) -> Result<()> {
    let healths: Api<KarpenterHealth> = Api::all(fx.admin.clone());
    let name = fx.name.clone();
    let team = team.map(str::to_owned);
    wait_for(what, Duration::from_secs(60), || {
        let (healths, name, team) = (healths.clone(), name.clone(), team.clone());
        async move {
            let Some(health) = healths.get_opt(&name).await? else {
                return Ok(None);
            };
            let labels = health.metadata.labels.unwrap_or_default();
            let as_wanted = labels.get("team") == team.as_ref()
                && !labels.contains_key("env")
                && labels
                    .get("app.kubernetes.io/managed-by")
                    .map(String::as_str)
                    == Some("karpenter-health");
            Ok(as_wanted.then_some(()))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_object_carries_the_named_labels_of_its_class_as_they_change() -> Result<()> {
    let fx = Fixture::seed("copylabels", "us-west-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        fx.patch_node_class_metadata(json!({"labels": {"team": "payments", "env": "prod"}}))
            .await?;
        let copied = parse_copied_labels("team").map_err(anyhow::Error::msg)?;
        let operator = fx
            .start_operator_with(None, |config| config.copy_labels = copied)
            .await?;
        wait_labels(&fx, "team=payments copied, env not", Some("payments")).await?;
        fx.patch_node_class_metadata(json!({"labels": {"team": "search"}}))
            .await?;
        wait_labels(&fx, "team=search after the class's change", Some("search")).await?;
        fx.patch_node_class_metadata(json!({"labels": {"team": null}}))
            .await?;
        wait_labels(&fx, "team gone after the class dropped it", None).await?;
        fx.wait_healthy("with its labels copied").await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

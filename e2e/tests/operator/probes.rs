//! The operator's HTTP endpoints on a real API server: `/livez` answers at once, `/readyz` once
//! every watch has synced, and `/metrics` carries the condition gauges of each EC2NodeClass. Does
//! IO (API server, moto, the operator's HTTP port).

use anyhow::Result;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_e2e::{
    Bed, OperatorHandle, apply_yaml, free_port, http_get as get, install_health_crd, wait_for,
};
use karpenter_health_operator::config::ListenAddress;
use kube::api::{Api, DeleteParams};
use std::time::Duration;

#[tokio::test]
async fn livez_readyz_and_metrics_tell_the_operators_state() -> Result<()> {
    let bed = Bed::from_env()?;
    let client = bed.admin_client().await?;
    install_health_crd(&client).await?;
    let port = free_port()?;
    let mut config = karpenter_health_operator::OperatorConfig::for_tests();
    config.http_address = ListenAddress(Some(([127, 0, 0, 1], port).into()));
    let operator = OperatorHandle::start(client.clone(), config, bed.aws_port("ap-south-1").await?);
    let deadline = Duration::from_secs(30);

    let (code, body) = wait_for("/livez to answer", deadline, || async {
        Ok(get(port, "/livez").await.ok())
    })
    .await?;
    assert_eq!((code, body.as_str()), (200, "ok"));
    wait_for("/readyz to turn ready", deadline, || async {
        Ok(get(port, "/readyz")
            .await
            .ok()
            .filter(|(code, _)| *code == 200))
    })
    .await?;

    apply_yaml(
        &client,
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: probes-one}\n\
         spec: {role: KarpenterNodeRole-probes, securityGroupSelectorTerms: [{tags: {a: b}}], \
         subnetSelectorTerms: [{tags: {a: b}}], amiSelectorTerms: [{alias: al2023@latest}]}\n",
    )
    .await?;
    let metrics = wait_for("the condition gauges of probes-one", deadline, || async {
        let (_, body) = get(port, "/metrics").await?;
        Ok(body
            .contains(r#"node_class="probes-one",type="Ready""#)
            .then_some(body))
    })
    .await?;
    assert!(metrics.contains("karpenter_health_reconcile_duration_seconds_count"));
    assert!(metrics.contains("karpenter_health_status_patches_total"));
    assert!(
        metrics.contains("karpenter_health_aws_calls_total{service="),
        "AWS calls are counted"
    );

    Api::<EC2NodeClass>::all(client)
        .delete("probes-one", &DeleteParams::default())
        .await?;
    operator.stop().await
}

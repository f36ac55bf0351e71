//! Two replicas on a real API server: only the Lease holder reconciles, and when it stops on
//! SIGTERM-style shutdown it releases the Lease so the standby takes over at once. Does IO (API
//! server, moto).

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use karpenter_health_api::KarpenterHealth;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_e2e::{
    Bed, OperatorHandle, apply_yaml, free_port, http_get, install_health_crd, wait_for,
};
use karpenter_health_operator::OperatorConfig;
use karpenter_health_operator::config::ListenAddress;
use kube::api::{Api, DeleteParams};
use std::time::{Duration, Instant};

const LEASE: &str = "kh-e2e-leader";

/// One replica with leader election and its HTTP endpoints on `port`.
fn replica(identity: &str, port: u16) -> OperatorConfig {
    let mut config = OperatorConfig::for_tests();
    config.leader_elect = true;
    config.lease_name = LEASE.into();
    config.lease_namespace = "default".into();
    config.lease_identity = Some(identity.into());
    config.http_address = ListenAddress(Some(([127, 0, 0, 1], port).into()));
    config
}

/// The value of an unlabelled metric in a replica's `/metrics`.
async fn metric(port: u16, name: &str) -> Result<f64> {
    let (_, body) = http_get(port, "/metrics").await?;
    body.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .with_context(|| format!("{name} in /metrics of port {port}"))
}

/// Total AWS calls a replica's adapter made.
fn aws_calls(port: &karpenter_health_operator::AwsPort) -> u64 {
    port.stats
        .as_ref()
        .map_or(0, |s| s.call_stats().calls.iter().map(|c| c.count).sum())
}

fn node_class(name: &str) -> String {
    format!(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: {name}}}\n\
         spec: {{role: KarpenterNodeRole-le, securityGroupSelectorTerms: [{{tags: {{a: b}}}}], \
         subnetSelectorTerms: [{{tags: {{a: b}}}}], amiSelectorTerms: [{{alias: al2023@latest}}]}}\n"
    )
}

async fn holder(leases: &Api<Lease>) -> Result<Option<String>> {
    Ok(leases
        .get_opt(LEASE)
        .await?
        .and_then(|l| l.spec?.holder_identity))
}

#[tokio::test]
async fn only_the_lease_holder_reconciles_and_a_standby_takes_over_when_it_stops() -> Result<()> {
    let bed = Bed::from_env()?;
    let client = bed.admin_client().await?;
    install_health_crd(&client).await?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let healths: Api<KarpenterHealth> = Api::all(client.clone());
    let deadline = Duration::from_secs(30);

    let (port_a, port_b) = (free_port()?, free_port()?);
    let aws_a = bed.aws_port("us-east-2").await?;
    let first = OperatorHandle::start(client.clone(), replica("replica-a", port_a), aws_a.clone());
    wait_for("replica-a to hold the lease", deadline, || async {
        Ok(holder(&leases).await?.filter(|h| h == "replica-a"))
    })
    .await?;
    let aws_b = bed.aws_port("us-east-2").await?;
    let second = OperatorHandle::start(client.clone(), replica("replica-b", port_b), aws_b.clone());

    apply_yaml(&client, &node_class("le-one")).await?;
    wait_for("the leader to write le-one's status", deadline, || async {
        Ok(healths
            .get_opt("le-one")
            .await?
            .filter(|h| h.status.is_some()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        holder(&leases).await?.as_deref(),
        Some("replica-a"),
        "the standby must not take the lease"
    );
    // The standby serves its probes from the start and wrote nothing: no status patch, no AWS
    // read (so no reconcile), while the leader did both.
    wait_for("the standby's /livez", deadline, || async {
        Ok(http_get(port_b, "/livez")
            .await
            .ok()
            .filter(|(code, _)| *code == 200))
    })
    .await?;
    ensure!(metric(port_a, "karpenter_health_leader").await? == 1.0);
    ensure!(metric(port_b, "karpenter_health_leader").await? == 0.0);
    ensure!(metric(port_a, "karpenter_health_status_patches_total").await? > 0.0);
    ensure!(
        metric(port_b, "karpenter_health_status_patches_total").await? == 0.0,
        "the standby must not write any status"
    );
    ensure!(aws_calls(&aws_a) > 0, "the leader reads AWS");
    ensure!(aws_calls(&aws_b) == 0, "the standby must not reconcile");

    // Stopping the leader releases the Lease; the standby takes it without waiting for expiry.
    let stopped_at = Instant::now();
    first.stop().await?;
    wait_for("replica-b to hold the lease", deadline, || async {
        Ok(holder(&leases).await?.filter(|h| h == "replica-b"))
    })
    .await?;
    let failover = stopped_at.elapsed();
    wait_for("the new leader's gauge", deadline, || async {
        Ok((metric(port_b, "karpenter_health_leader").await? == 1.0).then_some(()))
    })
    .await?;
    eprintln!("failover after a clean stop took {failover:?}");
    assert!(
        failover < Duration::from_secs(15),
        "failover took {failover:?}, longer than a lease"
    );

    apply_yaml(&client, &node_class("le-two")).await?;
    wait_for(
        "the new leader to write le-two's status",
        deadline,
        || async {
            Ok(healths
                .get_opt("le-two")
                .await?
                .filter(|h| h.status.is_some()))
        },
    )
    .await?;

    ensure!(
        metric(port_b, "karpenter_health_status_patches_total").await? > 0.0,
        "the new leader writes"
    );

    let node_classes: Api<EC2NodeClass> = Api::all(client);
    for name in ["le-one", "le-two"] {
        node_classes.delete(name, &DeleteParams::default()).await?;
    }
    second.stop().await?;
    wait_for("the lease to be released", deadline, || async {
        Ok(holder(&leases).await?.is_none().then_some(()))
    })
    .await?;
    Ok(())
}

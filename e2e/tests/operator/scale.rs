//! No false alarm at scale: 10,000 NodeClaims claim the cluster's instances, which are all older
//! than the orphan threshold. Until the operator has listed every NodeClaim, an instance is
//! claimed by nobody it has seen, so any judgement before that would call it another cluster's
//! (`ClusterNameSharedWithOtherCluster`). A watch on the KarpenterHealth, started before the
//! operator, proves that no status ever held a False condition through a cold start, a leader
//! change and an API-server restart. Does IO (API server, moto).
//!
//! Karpenter's state is written by hand here, not produced by the lab's real controller: 10,000
//! NodeClaims would be 10,000 instances launched by the real controller.

use anyhow::{Context, Result, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use karpenter_health_api::karpenter::NodeClaim;
use karpenter_health_e2e::fixture::{DEADLINE, Fixture};
use karpenter_health_e2e::status_log::StatusLog;
use karpenter_health_e2e::wait_for;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::Duration;

const NODE_CLAIMS: usize = 10_000;
/// Real instances in moto (a fraction: moto answers about 100 instances a second); the other
/// NodeClaims point at instances that do not exist, which changes nothing for the sweep.
const INSTANCES: i32 = 200;
const LABEL: &str = "karpenter-health.io/e2e-scale";

/// Creates `NodeClaims` of the fixture's class, the first claiming `instances`, with the status
/// Karpenter writes once a node joined.
async fn seed_node_claims(fx: &Fixture, instances: &[String]) -> Result<()> {
    // Dynamic objects: the read-only mirror would drop the fields the CRD requires.
    let api: Api<DynamicObject> =
        Api::all_with(fx.admin.clone(), &ApiResource::erase::<NodeClaim>(&()));
    let now = jiff::Timestamp::now().to_string();
    futures::stream::iter(0..NODE_CLAIMS)
        .map(|n| {
            let api = api.clone();
            let instance = instances
                .get(n)
                .cloned()
                .unwrap_or_else(|| format!("i-0{n:016x}"));
            let now = now.clone();
            async move {
                let name = format!("{}-{n}", fx.name);
                let claim: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                    "metadata": {"name": name, "labels": {LABEL: fx.name, "karpenter.sh/nodepool": fx.name}},
                    "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": fx.name},
                             "requirements": []},
                }))?;
                api.create(&PostParams::default(), &claim)
                    .await
                    .with_context(|| format!("creating NodeClaim {name}"))?;
                let condition = |t: &str| json!({"type": t, "status": "True", "reason": t, "lastTransitionTime": now});
                api.patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {
                        "providerID": format!("aws:///{}a/{instance}", fx.region),
                        "conditions": [condition("Launched"), condition("Registered")],
                    }})),
                )
                .await
                .with_context(|| format!("writing the status of NodeClaim {name}"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .try_collect::<()>()
        .await
        .context("seeding NodeClaims")
}

async fn holder(leases: &Api<Lease>) -> Result<Option<String>> {
    Ok(leases
        .get_opt("karpenter-health")
        .await?
        .and_then(|l| l.spec?.holder_identity))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_node_claims_never_read_as_unclaimed_instances_through_start_handover_and_restart()
-> Result<()> {
    let fx = Fixture::seed("scale", "sa-east-1", "1.8.6").await?;
    let node_claims: Api<NodeClaim> = Api::all(fx.admin.clone());
    let outcome: Result<()> = async {
        let subnet = fx.subnet.clone().context("the fixture's subnet")?;
        let cluster_tag = format!("kubernetes.io/cluster/{}", fx.cluster);
        let instances = fx
            .aws
            .instances(
                &subnet,
                INSTANCES,
                &[
                    (cluster_tag.as_str(), "owned"),
                    ("eks:eks-cluster-name", fx.cluster.as_str()),
                    ("karpenter.sh/nodepool", fx.name.as_str()),
                ],
            )
            .await?;
        seed_node_claims(&fx, &instances).await?;
        // Every instance is older than the orphan threshold from here on.
        tokio::time::sleep(Duration::from_secs(2)).await;

        let log = StatusLog::start(&fx.admin, &fx.name);
        let replica = |identity: &'static str| {
            move |config: &mut karpenter_health_operator::OperatorConfig| {
                config.leader_elect = true;
                config.lease_identity = Some(identity.into());
                config.evaluation.orphan_instance_after = Duration::from_secs(1);
            }
        };
        // Cold start.
        let first = fx.start_operator_with(None, replica("scale-a")).await?;
        fx.wait_healthy("after a cold start over 10,000 NodeClaims")
            .await?;

        // Leader change: the standby starts cold and takes over.
        let second = fx.start_operator_with(None, replica("scale-b")).await?;
        tokio::time::sleep(Duration::from_secs(3)).await;
        first.stop().await?;
        let leases: Api<Lease> = Api::namespaced(fx.admin.clone(), "kube-system");
        wait_for("scale-b to lead", DEADLINE, || async {
            Ok(holder(&leases).await?.filter(|h| h == "scale-b"))
        })
        .await?;
        fx.wait_healthy("after the leader change").await?;

        // The API server restarts under the new leader: every watch relists.
        fx.bed.restart_api_server(None).await?;
        fx.wait_healthy("after the API server restart").await?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        second.stop().await?;

        let statuses = log.stop().await;
        ensure!(!statuses.is_empty(), "the watch saw no status");
        for status in &statuses {
            let held_false: Vec<String> = status
                .conditions
                .iter()
                .filter(|c| c.status == "False")
                .map(|c| format!("{}={} ({}): {}", c.type_, c.status, c.reason, c.message))
                .collect();
            ensure!(
                held_false.is_empty(),
                "a False condition was written: {held_false:?}"
            );
        }
        eprintln!(
            "{} statuses watched, none with a False condition",
            statuses.len()
        );
        Ok(())
    }
    .await;
    let cleanup =
        karpenter_health_e2e::delete_all_labelled(&node_claims, &format!("{LABEL}={}", fx.name))
            .await;
    let outcome = outcome.and(cleanup);
    fx.finish(outcome).await
}

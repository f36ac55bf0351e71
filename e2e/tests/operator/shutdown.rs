//! The real binary under SIGTERM in every state a replica can be in: starting with caches that
//! cannot list, standby, leading, just after taking a killed leader's Lease over, with a
//! reconcile waiting on AWS, while every watch lists again after an API server restart, and with
//! the API server unreachable. Each exits 0 within `EXIT_BOUND`, and a Lease it holds is released
//! on the way out wherever the API server can be reached. Does IO (API server, moto through the
//! fault proxy, a TCP relay, child processes; restarts the bed's API server).

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_e2e::fault_proxy::{Fault, FaultProxy};
use karpenter_health_e2e::process::{OperatorProcess, Replica};
use karpenter_health_e2e::tcp_relay::TcpRelay;
use karpenter_health_e2e::{Bed, apply_yaml, free_port, http_get, install_health_crd, wait_for};
use kube::api::{Api, DeleteParams};
use std::time::Duration;

/// From SIGTERM to the exit, at most: the operator's own bound
/// (`karpenter_health_operator::shutdown::SHUTDOWN_BOUND`, 1.5 s) with room for the process's
/// teardown on a loaded machine.
const EXIT_BOUND: Duration = Duration::from_secs(2);
const DEADLINE: Duration = Duration::from_secs(30);
/// Every AWS service the operator reads.
const AWS_SERVICES: [&str; 7] = ["iam", "ec2", "eks", "sts", "sqs", "events", "kms"];

/// One test's Lease, its AWS proxy in front of moto, and the bed.
struct Scene {
    bed: Bed,
    client: kube::Client,
    lease: &'static str,
    leases: Api<Lease>,
    aws: FaultProxy,
}

impl Scene {
    async fn new(lease: &'static str) -> Result<Self> {
        let bed = Bed::from_env()?;
        let client = bed.admin_client().await?;
        install_health_crd(&client).await?;
        let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
        if leases.get_opt(lease).await?.is_some() {
            leases.delete(lease, &DeleteParams::default()).await?;
        }
        let aws = FaultProxy::start(bed.moto_url()?).await?;
        Ok(Self {
            bed,
            client,
            lease,
            leases,
            aws,
        })
    }

    /// A replica reading AWS through this scene's proxy.
    fn replica(&self, identity: &'static str) -> Result<Replica<'static>> {
        let mut replica = Replica::on(&self.bed, self.lease, identity, free_port()?)?;
        replica.aws_url = self.aws.url();
        Ok(replica)
    }

    async fn holder(&self) -> Result<Option<String>> {
        Ok(self
            .leases
            .get_opt(self.lease)
            .await?
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty()))
    }

    /// Waits until `replica` holds the Lease and its caches are synced.
    async fn leading(&self, replica: &Replica<'_>) -> Result<()> {
        wait_for(
            &format!("{} to lead", replica.identity),
            DEADLINE,
            || async {
                Ok(self
                    .holder()
                    .await?
                    .filter(|h| h == replica.identity)
                    .map(|_| ()))
            },
        )
        .await?;
        ready(replica.port).await
    }

    /// Fails unless the Lease has no holder: released on the way out, not left to expire.
    async fn released(&self) -> Result<()> {
        let holder = self.holder().await?;
        ensure!(
            holder.is_none(),
            "the Lease is still held by {holder:?} after its holder exited"
        );
        Ok(())
    }

    async fn with_node_class(&self, name: &str) -> Result<()> {
        apply_yaml(
            &self.client,
            &format!(
                "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: {name}}}\n\
                 spec: {{role: KarpenterNodeRole-sd, securityGroupSelectorTerms: [{{tags: {{a: b}}}}], \
                 subnetSelectorTerms: [{{tags: {{a: b}}}}], amiSelectorTerms: [{{alias: al2023@latest}}]}}\n"
            ),
        )
        .await?;
        Ok(())
    }

    async fn without_node_class(&self, name: &str) -> Result<()> {
        let classes: Api<EC2NodeClass> = Api::all(self.client.clone());
        if classes.get_opt(name).await?.is_some() {
            classes.delete(name, &DeleteParams::default()).await?;
        }
        Ok(())
    }
}

async fn answers(port: u16, path: &str) -> Result<Option<()>> {
    Ok(http_get(port, path)
        .await
        .ok()
        .filter(|(code, _)| *code == 200)
        .map(|_| ()))
}

async fn ready(port: u16) -> Result<()> {
    wait_for(&format!("/readyz on port {port}"), DEADLINE, || {
        answers(port, "/readyz")
    })
    .await
}

/// Sends SIGTERM and fails unless the process exits 0 within [`EXIT_BOUND`].
async fn terminate_within_bound(process: &mut OperatorProcess, state: &str) -> Result<Duration> {
    process.terminate()?;
    let (code, took) = process
        .wait_exit(Duration::from_secs(15))
        .await
        .with_context(|| format!("{state}: no exit after SIGTERM\n{}", process.log_text()))?;
    eprintln!("{state}: exited {code:?} {took:?} after SIGTERM");
    ensure!(
        code == Some(0),
        "{state}: exit code {code:?}\n{}",
        process.log_text()
    );
    ensure!(
        took <= EXIT_BOUND,
        "{state}: exited {took:?} after SIGTERM, more than {EXIT_BOUND:?}\n{}",
        process.log_text()
    );
    Ok(took)
}

#[tokio::test]
async fn starting_with_caches_that_cannot_list_the_api_server_silent() -> Result<()> {
    let scene = Scene::new("kh-sd-starting").await?;
    let relay = TcpRelay::start(scene.bed.api_server_address()?).await?;
    relay.stall();
    let mut replica = scene.replica("starting")?;
    replica.kubeconfig = scene.bed.admin_kubeconfig_via(relay.port())?;
    let mut process = replica.spawn(&scene.bed)?;
    // The probes serve from the start; readiness waits for the CRD check that cannot answer.
    wait_for("/livez", DEADLINE, || answers(replica.port, "/livez")).await?;
    ensure!(answers(replica.port, "/readyz").await?.is_none());
    terminate_within_bound(&mut process, "starting").await?;
    ensure!(
        scene.holder().await?.is_none(),
        "nothing may have taken the Lease"
    );
    Ok(())
}

#[tokio::test]
async fn starting_against_an_answering_api_server() -> Result<()> {
    let scene = Scene::new("kh-sd-early").await?;
    let replica = scene.replica("early")?;
    let mut process = replica.spawn(&scene.bed)?;
    wait_for("/livez", DEADLINE, || answers(replica.port, "/livez")).await?;
    terminate_within_bound(&mut process, "starting").await?;
    // Whether or not it had taken the Lease yet, none is left held.
    scene.released().await
}

#[tokio::test]
async fn standby_then_leading_each_exits_and_only_the_leader_releases() -> Result<()> {
    let scene = Scene::new("kh-sd-standby").await?;
    scene.with_node_class("sd-standby").await?;
    let (first, second) = (scene.replica("first")?, scene.replica("second")?);
    let mut leader = first.spawn(&scene.bed)?;
    scene.leading(&first).await?;
    let mut standby = second.spawn(&scene.bed)?;
    ready(second.port).await?;

    terminate_within_bound(&mut standby, "standby").await?;
    ensure!(
        scene.holder().await?.as_deref() == Some("first"),
        "a standby's exit must leave the leader's Lease alone"
    );
    terminate_within_bound(&mut leader, "leading").await?;
    scene.released().await?;
    scene.without_node_class("sd-standby").await
}

#[tokio::test]
async fn just_after_taking_a_killed_leaders_lease_over() -> Result<()> {
    let scene = Scene::new("kh-sd-takeover").await?;
    scene.with_node_class("sd-takeover").await?;
    let (first, second) = (scene.replica("first")?, scene.replica("second")?);
    let mut killed = first.spawn(&scene.bed)?;
    scene.leading(&first).await?;
    let mut successor = second.spawn(&scene.bed)?;
    ready(second.port).await?;
    killed.kill().await?;
    // Within a poll of the take-over: its controller is starting, its first reconciles in flight.
    wait_for("second to take the Lease over", DEADLINE, || async {
        Ok(scene.holder().await?.filter(|h| h == "second"))
    })
    .await?;
    terminate_within_bound(&mut successor, "just taken over").await?;
    scene.released().await?;
    scene.without_node_class("sd-takeover").await
}

#[tokio::test]
async fn with_a_reconcile_waiting_on_aws() -> Result<()> {
    let scene = Scene::new("kh-sd-aws").await?;
    let replica = scene.replica("waiting")?;
    let mut process = replica.spawn(&scene.bed)?;
    scene.leading(&replica).await?;
    for service in AWS_SERVICES {
        scene.aws.inject(service, None, Fault::Hang);
    }
    scene.aws.reset_counts();
    scene.with_node_class("sd-aws").await?;
    wait_for("a reconcile's AWS call to hang", DEADLINE, || async {
        Ok((!scene.aws.counts().is_empty()).then_some(()))
    })
    .await?;
    terminate_within_bound(&mut process, "reconcile waiting on AWS").await?;
    ensure!(
        process
            .log_text()
            .contains("reconciles still in flight were cancelled"),
        "the hanging reconcile was not what was cancelled:\n{}",
        process.log_text()
    );
    scene.released().await?;
    scene.without_node_class("sd-aws").await
}

#[tokio::test]
async fn while_every_watch_lists_again_after_an_api_server_restart() -> Result<()> {
    let scene = Scene::new("kh-sd-relist").await?;
    scene.with_node_class("sd-relist").await?;
    let replica = scene.replica("relisting")?;
    let mut process = replica.spawn(&scene.bed)?;
    scene.leading(&replica).await?;
    // The restart returns once the new server answers; the watches reconnect and list again.
    scene.bed.restart_api_server(None).await?;
    terminate_within_bound(&mut process, "relisting").await?;
    let client = scene.bed.admin_client().await?;
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let holder = leases
        .get_opt(scene.lease)
        .await?
        .and_then(|l| l.spec?.holder_identity);
    ensure!(holder.is_none(), "the Lease is still held by {holder:?}");
    scene.without_node_class("sd-relist").await
}

#[tokio::test]
async fn with_the_api_server_unreachable_while_leading() -> Result<()> {
    let scene = Scene::new("kh-sd-partition").await?;
    let relay = TcpRelay::start(scene.bed.api_server_address()?).await?;
    let mut replica = scene.replica("partitioned")?;
    replica.kubeconfig = scene.bed.admin_kubeconfig_via(relay.port())?;
    let mut process = replica.spawn(&scene.bed)?;
    scene.leading(&replica).await?;
    relay.stall();
    terminate_within_bound(&mut process, "API server unreachable").await?;
    // The release could not reach the API server: the Lease stays held until it expires.
    ensure!(
        scene.holder().await?.as_deref() == Some("partitioned"),
        "the test must not see a release that could not have happened"
    );
    scene
        .leases
        .delete(scene.lease, &DeleteParams::default())
        .await?;
    Ok(())
}

//! Verdict against behaviour, reasons beyond the classic five whose message says what Karpenter
//! does ("launches nothing", "Pods wait"): each scenario shows the real Karpenter (the release
//! `KH_KARPENTER_RELEASE` names) doing exactly that on the bed, then the healthy twin (the same
//! setup, the fault fixed) in which it launches and every condition is True. Does IO (the bed,
//! moto, Karpenter's process).

use anyhow::{Context as _, Result, ensure};
use karpenter_health_api::{ConditionType, Reason};
use karpenter_health_e2e::fault_proxy::public_parameters::al2023_recommended;
use karpenter_health_e2e::health_status::condition_is;
use karpenter_health_e2e::lab::{LAUNCH, Lab, PROVISIONER_PASS};
use karpenter_health_e2e::status_log::StatusLog;
use serde_json::{Value, json};
use std::time::Duration;

/// How long a Pod waits on NodePool limits before it counts (the operator's
/// `waiting_on_limits_after`, 2 minutes by default): shortened for the bed, still past several
/// of Karpenter's provisioner passes.
const WAITING_ON_LIMITS: Duration = Duration::from_secs(45);

fn requirements(extra: Value) -> Value {
    let mut all = vec![
        json!({"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}),
        json!({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"]}),
    ];
    if let Value::Array(extra) = extra {
        all.extend(extra);
    }
    json!({"spec": {"template": {"spec": {"requirements": all}}}})
}

/// The broken half: the verdict, then Karpenter seen not launching: `evidence` logged for this
/// test's NodePool and no NodeClaim. Returns the status with the verdict.
async fn launches_nothing(
    lab: &Lab,
    verdict: (ConditionType, Reason),
    evidence: &str,
) -> Result<karpenter_health_api::KarpenterHealthStatus> {
    // Only what Karpenter logs once the Pod waits: a healthy class warming up logs the same.
    let mark = lab.karpenter.mark();
    lab.workload("web", "500m").await?;
    let status = lab.fx.wait_failed(&[verdict]).await?;
    lab.wait_logged_since(&mark, evidence, &[&lab.fx.name], PROVISIONER_PASS)
        .await?;
    ensure!(
        lab.node_claims().await?.is_empty() && lab.launched_instances().await?.is_empty(),
        "Karpenter launched while {:?} says it launches nothing",
        verdict
    );
    Ok(status)
}

/// The healthy twin: Karpenter launches for the waiting Pod, and every condition is True.
async fn launches(lab: &Lab, when: &str) -> Result<()> {
    lab.wait_node_claim("Initialized", LAUNCH).await?;
    lab.fx.wait_healthy(when).await?;
    Ok(())
}

/// SubnetsReady: a subnet selector that matches nothing. Karpenter marks its own SubnetsReady
/// False and the provisioner ignores the NodePool (`pkg/controllers/nodeclass/subnet.go`,
/// kubernetes-sigs/karpenter `provisioner.go`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subnet_selector_matching_nothing_launches_nothing() -> Result<()> {
    let lab = Lab::start_with_class("lab-subnets", "ap-northeast-1", |_| {
        json!({"subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "no-such-subnets"}}]})
    })
    .await?;
    let outcome: Result<()> = async {
        let operator = lab.fx.start_operator(None, false).await?;
        launches_nothing(&lab, (ConditionType::SubnetsReady, Reason::SubnetsNotFound), "ignoring nodepool, not ready").await?;
        lab.karpenter_condition("SubnetsReady", "False").await?;
        lab.fx
            .patch_node_class_spec(json!({"subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": lab.fx.cluster}}]}))
            .await?;
        launches(&lab, "with the subnets selected").await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// SecurityGroupsReady: a security group selector that matches nothing
/// (`pkg/controllers/nodeclass/securitygroup.go`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_security_group_selector_matching_nothing_launches_nothing() -> Result<()> {
    let lab = Lab::start_with_class("lab-sgs", "ap-northeast-2", |_| {
        json!({"securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "no-such-groups"}}]})
    })
    .await?;
    let outcome: Result<()> = async {
        let operator = lab.fx.start_operator(None, false).await?;
        launches_nothing(&lab, (ConditionType::SecurityGroupsReady, Reason::SecurityGroupsNotFound), "ignoring nodepool, not ready").await?;
        lab.karpenter_condition("SecurityGroupsReady", "False").await?;
        lab.fx
            .patch_node_class_spec(json!({"securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": lab.fx.cluster}}]}))
            .await?;
        launches(&lab, "with the security groups selected").await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// InstanceTypesAvailable: a NodePool whose requirements leave no instance type. Karpenter says so
/// in a NoCompatibleInstanceTypes Event on the NodePool and launches nothing
/// (kubernetes-sigs/karpenter `pkg/controllers/provisioning/scheduling/scheduler.go`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requirements_no_instance_type_meets_launch_nothing() -> Result<()> {
    let lab = Lab::start("lab-types", "ap-southeast-1").await?;
    let outcome: Result<()> = async {
        lab.patch_node_pool(requirements(json!([
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c5"]},
        ])))
        .await?;
        let operator = lab.fx.start_operator(None, false).await?;
        launches_nothing(
            &lab,
            (
                ConditionType::InstanceTypesAvailable,
                Reason::NoInstanceTypeMatchesRequirements,
            ),
            "skipping, nodepool requirements filtered out all instance types",
        )
        .await?;
        lab.patch_node_pool(requirements(json!([]))).await?;
        launches(&lab, "with requirements some type meets").await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// InstanceTypesAvailable: a NodePool that requires a zone the class has no subnet in. Karpenter
/// offers instance types only in the zones of the class's subnets
/// (`pkg/providers/instancetype/types.go`), so nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_zone_without_a_subnet_launches_nothing() -> Result<()> {
    let lab = Lab::start("lab-zones", "ap-southeast-2").await?;
    let outcome: Result<()> = async {
        lab.karpenter_condition("SubnetsReady", "True").await?;
        let class = lab.node_class().await?;
        let zone = class
            .data
            .pointer("/status/subnets/0/zone")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
            .context("Karpenter resolved no subnet")?;
        let elsewhere = ["a", "b", "c"]
            .iter()
            .map(|suffix| format!("{}{suffix}", lab.fx.region))
            .find(|z| *z != zone)
            .context("no other zone")?;
        lab.patch_node_pool(requirements(json!([
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [elsewhere]},
        ])))
        .await?;
        let operator = lab.fx.start_operator(None, false).await?;
        launches_nothing(
            &lab,
            (
                ConditionType::InstanceTypesAvailable,
                Reason::RequiredZonesWithoutSubnets,
            ),
            "skipping, nodepool requirements filtered out all instance types",
        )
        .await?;
        lab.patch_node_pool(requirements(json!([
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
        ])))
        .await?;
        launches(&lab, "with the subnet's zone required").await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// AmisResolvable: an image selected by id that EC2 no longer has. Karpenter's own AMIsReady is
/// False and the provisioner ignores the NodePool (`pkg/controllers/nodeclass/ami.go`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_ec2_no_longer_has_launches_nothing() -> Result<()> {
    let lab = Lab::start("lab-images", "ca-central-1").await?;
    let outcome: Result<()> = async {
        let gone = lab
            .fx
            .aws
            .register_image(&format!("{}-old", lab.fx.name))
            .await?;
        lab.fx.aws.deregister_image(&gone).await?;
        lab.fx
            .patch_node_class_spec(
                json!({"amiFamily": "AL2023", "amiSelectorTerms": [{"id": gone}]}),
            )
            .await?;
        let operator = lab.fx.start_operator(None, false).await?;
        let status = launches_nothing(
            &lab,
            (ConditionType::AmisResolvable, Reason::AmiUnavailable),
            "ignoring nodepool, not ready",
        )
        .await?;
        ensure!(
            status
                .condition(ConditionType::AmisResolvable)
                .is_some_and(|c| c.message.contains(&gone)),
            "names {gone}"
        );
        lab.karpenter_condition("AMIsReady", "False").await?;
        let image = lab
            .fx
            .aws
            .register_image(&format!("{}-new", lab.fx.name))
            .await?;
        lab.fx
            .patch_node_class_spec(json!({"amiSelectorTerms": [{"id": image}]}))
            .await?;
        launches(&lab, "with an image EC2 has").await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// InstanceTypesAvailable: a NodePool that allows only arm64 while the class's only image is
/// x86_64. Karpenter makes a NodeClaim and its launch fails for want of an image
/// (`pkg/providers/amifamily/resolver.go`): no instance is launched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_architecture_the_images_are_not_built_for_launches_nothing() -> Result<()> {
    let lab = Lab::start("lab-arch", "sa-east-1").await?;
    let outcome: Result<()> = async {
        let image = lab
            .fx
            .aws
            .register_image(&format!("{}-x86", lab.fx.name))
            .await?;
        lab.fx
            .patch_node_class_spec(
                json!({"amiFamily": "AL2023", "amiSelectorTerms": [{"id": image}]}),
            )
            .await?;
        lab.karpenter_condition("AMIsReady", "True").await?;
        lab.patch_node_pool(json!({"spec": {"template": {"spec": {"requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m6g"]},
        ]}}}}))
        .await?;
        let operator = lab.fx.start_operator(None, false).await?;
        lab.workload("web", "500m").await?;
        lab.fx
            .wait_failed(&[(
                ConditionType::InstanceTypesAvailable,
                Reason::NoInstanceTypeForAmiArchitecture,
            )])
            .await?;
        // What Karpenter does: the NodeClaim it makes fails to launch for want of an image.
        lab.wait_logged(
            "Reconciler error",
            &["no instance types satisfy requirements of amis"],
            PROVISIONER_PASS,
        )
        .await?;
        for claim in lab.node_claims().await? {
            let launched = karpenter_health_e2e::lab::carries(&claim, "Launched", "True");
            ensure!(
                !launched,
                "Karpenter launched an arm64 node without an arm64 image"
            );
        }
        ensure!(
            lab.launched_instances().await?.is_empty(),
            "an instance was launched"
        );
        // The twin: the images' architecture. The claim that could not launch would hold the
        // Pod until Karpenter's 5-minute launch timeout (`liveness.go`); the user deletes it.
        lab.patch_node_pool(requirements(json!([]))).await?;
        lab.delete_node_claims().await?;
        launches(&lab, "with the images' architecture").await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// LimitsLeaveRoom: the NodePool's cpu limit is used up by the node Karpenter launched, and a
/// second Pod that does not fit beside the first waits: Karpenter refuses every instance type
/// ("all available instance types exceed limits for nodepool", kubernetes-sigs/karpenter
/// `scheduling/scheduler.go`). A second NodePool of the class has room, but it does not define
/// the label `team` the Pod selects from the first's template, and Karpenter refuses a custom
/// label a NodePool does not define (`pkg/scheduling/requirements.go` `Compatible`: "does not
/// have known values"): it launches nothing there either, so the class is False. The scale-up
/// that reaches the limit is never False.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_beyond_the_node_pools_limit_wait_and_the_scale_up_to_it_is_never_false() -> Result<()>
{
    let lab = Lab::start("lab-limits", "eu-north-1").await?;
    let outcome: Result<()> = async {
        lab.patch_node_pool(json!({"spec": {
            "limits": {"cpu": "2"},
            "template": {"spec": {"requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
            ]}},
        }}))
        .await?;
        lab.label_node_pool("team", "shop").await?;
        let spare = lab.add_node_pool("spare", json!({})).await?;
        let operator = lab
            .fx
            .start_operator_with(None, |config| {
                config.evaluation.waiting_on_limits_after = WAITING_ON_LIMITS;
            })
            .await?;
        lab.fx.wait_healthy("before any Pod").await?;
        // An ordinary scale-up to the limit: one m5.large (2 vCPU) for the first Pod.
        let log = StatusLog::start(&lab.fx.admin, &lab.fx.name);
        lab.workload("web", "500m").await?;
        lab.wait_node_claim("Initialized", LAUNCH).await?;
        lab.wait_pod_bound("web", LAUNCH).await?;
        lab.fx.wait_healthy("with the first node up").await?;
        for held in log.stop().await {
            ensure!(
                !condition_is(&held, ConditionType::LimitsLeaveRoom, "False", Reason::NodePoolLimitsReached),
                "False during the scale-up that reached the limit"
            );
        }
        // A Pod that fits beside the first on no node: Karpenter may launch nothing more. It
        // counts as waiting on the limits once it has waited WAITING_ON_LIMITS.
        let waited = std::time::Instant::now();
        lab.workload_with("batch", "1800m", json!({"team": "shop"})).await?;
        let refused = lab
            .wait_logged(
                "could not schedule pod",
                &["exceed limits", "batch", "does not have known values"],
                PROVISIONER_PASS,
            )
            .await?;
        eprintln!("lab: Karpenter on the Pod: {refused}");
        lab.fx
            .wait_status("the limits warning naming the Pod not counted yet", |s| {
                s.findings.iter().any(|f| {
                    f.reason == "NodePoolAtLimits" && f.message.contains("/batch")
                })
            })
            .await?;
        tokio::time::sleep(WAITING_ON_LIMITS.saturating_sub(waited.elapsed())).await;
        lab.fx
            .wait_failed(&[(ConditionType::LimitsLeaveRoom, Reason::NodePoolLimitsReached)])
            .await?;
        let claims = lab.node_claims().await?;
        ensure!(claims.len() == 1, "Karpenter launched beyond the limit");
        ensure!(
            !claims.iter().any(|c| c.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")) == Some(&spare)),
            "Karpenter launched from {spare}, which does not define the Pod's label"
        );
        // The twin: room for one more node.
        lab.patch_node_pool(json!({"spec": {"limits": {"cpu": "4"}}})).await?;
        crate_wait_claims(&lab, 2).await?;
        lab.fx.wait_healthy("with room under the limit").await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

async fn crate_wait_claims(lab: &Lab, count: usize) -> Result<()> {
    karpenter_health_e2e::wait_for(&format!("{count} NodeClaims"), LAUNCH, || async {
        Ok((lab.node_claims().await?.len() >= count).then_some(()))
    })
    .await
}

/// InterruptionHandlingReady: Karpenter told to read a queue SQS does not have keeps failing to
/// set up its interruption controller ("failed to create valid sqs provider",
/// `pkg/controllers/interruption/controller.go`) and receives nothing; once the queue exists it
/// polls it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interruption_queue_sqs_does_not_have_is_never_read() -> Result<()> {
    let queue = "kh-lab-interruption";
    let lab = Lab::start_with("lab-queue", "us-east-2", |settings| {
        settings.interruption_queue = Some(format!("{}-{queue}", settings.cluster_name));
    })
    .await?;
    let outcome: Result<()> = async {
        let name = format!("{}-{queue}", lab.fx.cluster);
        let operator = lab.fx.start_operator(None, false).await?;
        lab.fx
            .wait_failed(&[(
                ConditionType::InterruptionHandlingReady,
                Reason::InterruptionQueueNotFound,
            )])
            .await?;
        lab.wait_logged("failed to create valid sqs provider", &[], PROVISIONER_PASS)
            .await?;
        ensure!(
            lab.fx.proxy.count("sqs", "ReceiveMessage") == 0,
            "Karpenter read a queue"
        );
        // The twin: the queue as Karpenter's getting-started template makes it.
        lab.fx.aws.interruption_queue(&name).await?;
        karpenter_health_e2e::wait_for(
            "Karpenter to poll the queue",
            Duration::from_secs(120),
            || async { Ok((lab.fx.proxy.count("sqs", "ReceiveMessage") > 0).then_some(())) },
        )
        .await?;
        lab.fx.wait_healthy("with the queue").await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// AmisResolvable: the alias's parameters go away after Karpenter resolved them (as when the
/// control plane moves to a minor AWS has not published images for). Karpenter's resolution then
/// fails, and it leaves `status.amis` and `AMIsReady` as they were and launches from them
/// (`pkg/controllers/nodeclass/ami.go`): a warning while it does, never False. Once the class is
/// edited, its status no longer speaks for the new generation.
///
/// The operator re-reads an alias's parameters at the catalog period (hours in production; a new
/// minor names other parameters, read at once), sooner on evidence about the class; Karpenter
/// keeping its status is no evidence, so the period is scaled down to seconds here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alias_that_stops_resolving_leaves_karpenter_launching_from_its_images() -> Result<()> {
    let mut lab = Lab::start("lab-alias", "eu-west-2").await?;
    let outcome: Result<()> = async {
        let operator = lab
            .fx
            .start_operator_tuned(
                None,
                |config| config.leader_elect = false,
                |aws| aws.catalog_ttl = Duration::from_secs(10),
            )
            .await?;
        lab.karpenter_condition("AMIsReady", "True").await?;
        lab.fx.wait_healthy("with the alias resolved").await?;
        let log = StatusLog::start(&lab.fx.admin, &lab.fx.name);
        for name in al2023_recommended(karpenter_health_e2e::lab::KUBERNETES_VERSION) {
            lab.fx.proxy.set_public_parameter(&name, None);
        }
        // A Karpenter with empty caches (after a restart, or at a new minor) resolves nothing.
        lab.restart_karpenter().await?;
        let status = lab
            .fx
            .wait_status("the warning that the alias no longer resolves", |s| {
                s.findings
                    .iter()
                    .any(|f| f.reason == "AmiAliasNoLongerResolves")
            })
            .await?;
        ensure!(
            condition_is(
                &status,
                ConditionType::AmisResolvable,
                "True",
                Reason::AmisResolved
            ),
            "a warning, not a verdict"
        );
        // What Karpenter does: it keeps AMIsReady and launches from the images it holds.
        lab.workload("web", "500m").await?;
        lab.wait_node_claim("Initialized", LAUNCH).await?;
        lab.karpenter_condition("AMIsReady", "True").await?;
        for held in log.stop().await {
            ensure!(
                !condition_is(
                    &held,
                    ConditionType::AmisResolvable,
                    "False",
                    Reason::AmiAliasNotPublished
                ),
                "False while Karpenter launched from the images it resolved"
            );
        }
        // Republished: the warning goes.
        lab.fx.proxy.set_public_parameter(
            &al2023_recommended(karpenter_health_e2e::lab::KUBERNETES_VERSION)[0],
            Some("ami-0e000000000000001"),
        );
        lab.fx
            .wait_status("the warning gone once AWS publishes again", |s| {
                !s.findings
                    .iter()
                    .any(|f| f.reason == "AmiAliasNoLongerResolves")
            })
            .await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// AmisResolvable: Karpenter refuses an `al2` alias from Kubernetes 1.33 (the lab runs 1.34)
/// before reading any parameter (aws/karpenter-provider-aws `pkg/providers/amifamily/ami.go`
/// `DescribeImageQueries`), sets `AMIsReady=False UnsupportedAlias`
/// (`pkg/controllers/nodeclass/ami.go`) and launches nothing for the class. The twin: the same
/// class on `al2023@latest` launches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_al2_alias_is_refused_from_kubernetes_1_33_and_launches_nothing() -> Result<()> {
    let lab = Lab::start_with_class(
        "lab-al2",
        "us-west-1",
        |_| json!({"amiSelectorTerms": [{"alias": "al2@latest"}]}),
    )
    .await?;
    let outcome: Result<()> = async {
        let operator = lab.fx.start_operator(None, false).await?;
        lab.karpenter_condition("AMIsReady", "False").await?;
        let class = lab.node_class().await?;
        let refused =
            karpenter_health_e2e::lab::condition(&class, "AMIsReady").context("AMIsReady")?;
        ensure!(
            refused["reason"] == "UnsupportedAlias",
            "Karpenter's reason: {refused}"
        );
        let status = lab
            .fx
            .wait_failed(&[(ConditionType::AmisResolvable, Reason::AmiAliasUnsupported)])
            .await?;
        let message =
            karpenter_health_e2e::health_status::message(&status, ConditionType::AmisResolvable)
                .to_owned();
        ensure!(message.contains("al2023@latest"), "the fix: {message}");
        // What Karpenter does: nothing for a Pod of the class.
        lab.workload("web", "500m").await?;
        tokio::time::sleep(PROVISIONER_PASS).await;
        ensure!(
            lab.node_claims().await?.is_empty(),
            "Karpenter made a NodeClaim"
        );
        ensure!(
            lab.launched_instances().await?.is_empty(),
            "an instance was launched"
        );
        // The twin: a family Karpenter resolves at 1.34.
        lab.fx
            .patch_node_class_spec(json!({"amiSelectorTerms": [{"alias": "al2023@latest"}]}))
            .await?;
        lab.wait_node_claim("Initialized", LAUNCH).await?;
        lab.fx.wait_healthy("on al2023@latest").await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// DriftCanBeReplaced: a budget of 0 without a schedule is how Karpenter's docs switch drift
/// (here every disruption) off (kubernetes-sigs/karpenter #1576). Karpenter marks the NodeClaim drifted,
/// says on the NodePool that the budget blocks it ("No allowed disruptions for disruption reason
/// Drifted due to blocking budget", `pkg/controllers/disruption/helpers.go`) and leaves it; at its
/// `expireAfter` its expiration controller deletes it all the same, budgets unread
/// (`pkg/controllers/nodeclaim/expiration/controller.go`). What the DriftHeldByBudget warning
/// says; the condition is never False on the way (the warning itself waits 30 minutes of drift,
/// which the bed cannot age: crates/checks/src/tests/drift.rs covers its message).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drift_freeze_of_a_budget_holds_the_node_claim_until_it_expires() -> Result<()> {
    // Long enough for the launch and the drift to be seen first; short enough to wait out.
    const EXPIRE_AFTER: Duration = Duration::from_secs(150);
    let lab = Lab::start("lab-drift", "eu-central-1").await?;
    let outcome: Result<()> = async {
        lab.patch_node_pool(json!({"spec": {
            // Every reason: with drift alone held, Karpenter's consolidation replaces the node
        // it just launched (a cheaper type fits the Pod) and nothing is left to drift.
        "disruption": {"budgets": [{"nodes": "0"}]},
            "template": {"spec": {"expireAfter": format!("{}s", EXPIRE_AFTER.as_secs())}},
        }}))
        .await?;
        let operator = lab.fx.start_operator(None, false).await?;
        lab.fx.wait_healthy("before any Pod").await?;
        let log = StatusLog::start(&lab.fx.admin, &lab.fx.name);
        lab.workload("web", "500m").await?;
        let claim = lab.wait_node_claim("Initialized", LAUNCH).await?;
        let name = claim.metadata.name.clone().context("NodeClaim name")?;
        // Drift: the NodePool's template changes, so its NodeClaim no longer matches it.
        lab.label_node_pool("kh-lab/revision", "2").await?;
        lab.karpenter_condition_of(&name, "Drifted", "True").await?;
        // Karpenter holds it: the budget, named on the NodePool, and no disruption.
        karpenter_health_e2e::wait_for(
            "Karpenter's DisruptionBlocked Event on the NodePool",
            PROVISIONER_PASS * 2,
            || async {
                Ok(lab
                    .events(&lab.fx.name, "DisruptionBlocked")
                    .await?
                    .into_iter()
                    .find(|e| {
                        e.message.as_deref().is_some_and(|m| {
                            m.contains("disruption reason Drifted due to blocking budget")
                        })
                    })
                    .map(|_| ()))
            },
        )
        .await?;
        let still = lab.node_claims().await?;
        ensure!(
            still
                .iter()
                .any(|c| c.metadata.name.as_deref() == Some(name.as_str())
                    && c.metadata.deletion_timestamp.is_none()),
            "Karpenter disrupted a NodeClaim its budget holds: {still:?}"
        );
        // At its expireAfter it goes anyway, the budget unread.
        let created = claim
            .metadata
            .creation_timestamp
            .as_ref()
            .context("creation time")?
            .0;
        let line = lab
            .wait_logged(
                "deleting expired nodeclaim",
                &[&name],
                EXPIRE_AFTER + LAUNCH,
            )
            .await?;
        let expired_at: k8s_openapi::jiff::Timestamp = line["time"]
            .as_str()
            .context("the log line's time")?
            .parse()?;
        ensure!(
            expired_at.duration_since(created)
                >= k8s_openapi::jiff::SignedDuration::try_from(EXPIRE_AFTER)?,
            "deleted before its expiry: created {created}, deleted {expired_at}"
        );
        for held in log.stop().await {
            let c = held.condition(ConditionType::DriftCanBeReplaced);
            ensure!(
                c.is_none_or(|c| c.status != "False"),
                "False while drift was off on purpose: {c:?}"
            );
        }
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// AmisResolvable: an alias pinned to a release AWS never built for the cluster's Kubernetes
/// version. Karpenter asks SSM for the release's image parameter, gets none, fails to resolve the
/// class's images ("failed to discover any AMIs for alias", `pkg/providers/amifamily/al2023.go`)
/// and never marks AMIsReady True, so the provisioner ignores the NodePool
/// (`pkg/controllers/nodeclass/ami.go`). The twin is the same class on `@latest`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alias_pinned_to_a_release_never_built_launches_nothing() -> Result<()> {
    let lab = Lab::start_with_class(
        "lab-pinned",
        "us-west-2",
        |_| json!({"amiSelectorTerms": [{"alias": "al2023@v20200101"}]}),
    )
    .await?;
    let outcome: Result<()> = async {
        let operator = lab.fx.start_operator(None, false).await?;
        let status = launches_nothing(
            &lab,
            (ConditionType::AmisResolvable, Reason::AmiAliasNotPublished),
            "ignoring nodepool, not ready",
        )
        .await?;
        let message =
            karpenter_health_e2e::health_status::message(&status, ConditionType::AmisResolvable);
        ensure!(
            message.contains("v20200101"),
            "names the release: {message}"
        );
        lab.wait_logged(
            "Reconciler error",
            &["failed to discover any AMIs for alias", &lab.fx.name],
            PROVISIONER_PASS,
        )
        .await?;
        let class = lab.node_class().await?;
        ensure!(
            !karpenter_health_e2e::lab::carries(&class, "AMIsReady", "True"),
            "Karpenter resolved images for a release never built"
        );
        lab.fx
            .patch_node_class_spec(json!({"amiSelectorTerms": [{"alias": "al2023@latest"}]}))
            .await?;
        launches(&lab, "with the latest release").await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// LimitsLeaveRoom: a NodePool whose `limits.cpu` is below the vCPUs of every instance type it
/// allows (1 against m5.large's 2). Karpenter filters every type out as exceeding the limits
/// ("all available instance types exceed limits for nodepool", kubernetes-sigs/karpenter
/// `scheduling/scheduler.go`) and launches nothing; raised to one node's worth, it launches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_below_the_smallest_instance_launch_nothing() -> Result<()> {
    let lab = Lab::start("lab-small-limits", "ap-south-1").await?;
    let outcome: Result<()> = async {
        lab.patch_node_pool(json!({"spec": {
            "limits": {"cpu": "1"},
            "template": {"spec": {"requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
            ]}},
        }}))
        .await?;
        let operator = lab
            .fx
            .start_operator_with(None, |config| {
                config.evaluation.waiting_on_limits_after = WAITING_ON_LIMITS;
            })
            .await?;
        let waited = std::time::Instant::now();
        lab.workload("web", "500m").await?;
        let refused = lab
            .wait_logged("could not schedule pod", &["exceed limits", "web"], PROVISIONER_PASS)
            .await?;
        eprintln!("lab: Karpenter on the Pod: {refused}");
        tokio::time::sleep(WAITING_ON_LIMITS.saturating_sub(waited.elapsed())).await;
        lab.fx
            .wait_failed(&[(
                ConditionType::LimitsLeaveRoom,
                Reason::NodePoolLimitsBelowSmallestInstance,
            )])
            .await?;
        ensure!(
            lab.node_claims().await?.is_empty() && lab.launched_instances().await?.is_empty(),
            "Karpenter launched under a limit below one node"
        );
        lab.patch_node_pool(json!({"spec": {"limits": {"cpu": "2"}}}))
            .await?;
        launches(&lab, "with a limit of one node").await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// SecurityGroupsReady: the selector also matches a group of another VPC. Karpenter resolves it
/// with the cluster's (its SecurityGroupsReady is True: it does not compare VPCs,
/// `pkg/providers/securitygroup`), validates and launches, and EC2 refuses every fleet ("... belong
/// to different networks", which the gap proxy answers as EC2 does for a launch): no NodeClaim
/// launches. The twin selects the cluster's group only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_security_group_of_another_vpc_fails_every_launch() -> Result<()> {
    let lab = Lab::start("lab-sg-vpc", "eu-north-1").await?;
    let outcome: Result<()> = async {
        // moto's DescribeCluster leaves the VPC out; the proxy adds it as EKS answers.
        lab.fx.proxy.set_cluster_vpc(&lab.fx.cluster, &lab.fx.vpc);
        let other_vpc = lab.fx.aws.vpc("10.42.0.0/16", &[]).await?;
        let stray = lab
            .fx
            .aws
            .security_group(
                &other_vpc,
                &format!("{}-stray", lab.fx.cluster),
                &[("karpenter.sh/discovery", lab.fx.cluster.as_str())],
            )
            .await?;
        let operator = lab.fx.start_operator(None, false).await?;
        lab.workload("web", "500m").await?;
        let status = lab
            .fx
            .wait_only_failed(
                ConditionType::SecurityGroupsReady,
                Reason::SecurityGroupInOtherVpc,
            )
            .await?;
        let message = karpenter_health_e2e::health_status::message(
            &status,
            ConditionType::SecurityGroupsReady,
        );
        ensure!(message.contains(&stray), "names {stray}: {message}");
        // What Karpenter does: both groups resolved, every launch refused by EC2, nothing runs.
        lab.karpenter_condition("SecurityGroupsReady", "True")
            .await?;
        let refused = lab
            .wait_logged("", &["belong to different networks"], LAUNCH)
            .await?;
        eprintln!("lab: Karpenter's launch: {refused}");
        let fleets = lab
            .fx
            .proxy
            .launch_refusals()
            .iter()
            .filter(|r| r.operation == "CreateFleet" && r.message.contains(&stray))
            .count();
        ensure!(fleets >= 1, "no fleet with {stray} was refused");
        for claim in lab.node_claims().await? {
            ensure!(
                !karpenter_health_e2e::lab::carries(&claim, "Launched", "True"),
                "a NodeClaim launched with a group of another VPC"
            );
        }
        ensure!(
            lab.launched_instances().await?.is_empty(),
            "an instance was launched"
        );
        // The twin: the cluster's group only.
        lab.fx
            .patch_node_class_spec(
                json!({"securityGroupSelectorTerms": [{"id": lab.fx.security_group}]}),
            )
            .await?;
        launches(&lab, "with the cluster's group only").await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// SubnetsReady: the class's only subnet has no free address. Karpenter resolves it (SubnetsReady
/// True), launches into it, and EC2 refuses every fleet (`InsufficientFreeAddressesInSubnet`,
/// which the gap proxy answers from moto's own address count; Karpenter marks the subnet
/// unavailable, `pkg/providers/instance/instance.go`): no NodeClaim launches. The twin selects the
/// class's roomy subnet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subnet_without_a_free_address_fails_every_launch() -> Result<()> {
    let lab = Lab::start("lab-full-subnet", "ap-northeast-2").await?;
    let outcome: Result<()> = async {
        // A /28 (11 free addresses, as in EC2) with a route out, filled by other ENIs, in another
        // zone than the fixture's roomy subnet: Karpenter takes InsufficientFreeAddressesInSubnet
        // for a zone's capacity and keeps its offerings there unavailable for 3 minutes
        // (`pkg/cache/unavailableofferings.go`), which would hold the twin back in the same zone.
        let zones = lab.fx.aws.zones().await?;
        let other_zone = zones.get(1).context("a second zone")?;
        let full = lab
            .fx
            .aws
            .subnet(&lab.fx.vpc, "10.40.3.0/28", Some(other_zone), &[])
            .await?;
        lab.fx
            .aws
            .associate_route_table(&lab.fx.route_table, &full)
            .await?;
        let enis = lab.fx.aws.fill_subnet(&full, 0).await?;
        eprintln!("lab: {full} filled by {} network interfaces", enis.len());
        lab.fx
            .patch_node_class_spec(json!({"subnetSelectorTerms": [{"id": full}]}))
            .await?;
        let operator = lab.fx.start_operator(None, false).await?;
        lab.workload("web", "500m").await?;
        let status = lab
            .fx
            .wait_only_failed(ConditionType::SubnetsReady, Reason::SubnetsOutOfAddresses)
            .await?;
        let message =
            karpenter_health_e2e::health_status::message(&status, ConditionType::SubnetsReady);
        ensure!(message.contains(&full), "names {full}: {message}");
        // What Karpenter does: the subnet resolved, every launch refused, nothing runs.
        lab.karpenter_condition("SubnetsReady", "True").await?;
        let refused = lab
            .wait_logged("", &["InsufficientFreeAddressesInSubnet"], LAUNCH)
            .await?;
        eprintln!("lab: Karpenter's launch: {refused}");
        let fleets = lab
            .fx
            .proxy
            .fleets_refused("InsufficientFreeAddressesInSubnet");
        ensure!(fleets >= 1, "no fleet into {full} was refused");
        for claim in lab.node_claims().await? {
            ensure!(
                !karpenter_health_e2e::lab::carries(&claim, "Launched", "True"),
                "a NodeClaim launched into a subnet without a free address"
            );
        }
        ensure!(
            lab.launched_instances().await?.is_empty(),
            "an instance was launched"
        );
        // The twin: the class's roomy subnet.
        let roomy = lab.fx.subnet.clone().context("the fixture's subnet")?;
        lab.fx
            .patch_node_class_spec(json!({"subnetSelectorTerms": [{"id": roomy}]}))
            .await?;
        launches(&lab, "with a subnet that has room").await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

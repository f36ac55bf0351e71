//! Before a launch fails (issue 25), end to end on the real API server and moto's instance types
//! and offerings. Requirements no instance type can meet: the class starts all True, narrow but
//! satisfiable NodePools stay True (a status log proves no False among them), a family that does
//! not exist and a zone the class has no subnet in each turn `InstanceTypesAvailable` False with
//! their reason, the repair turns it True again, and EC2 denying the new reads is Unknown with the
//! cause, never False. NodePool limits: a NodePool at its limits is a warning until a Pod that
//! only this class can take waits, then `LimitsLeaveRoom` is False, and True once the limit is
//! raised. Drift: a NodeClaim drifted for 45 minutes is fine under a budget that opens at night;
//! a budget of 0 always in force (without a schedule, then as a daily freeze for 24 h) switches
//! drift off on purpose, the warning `DriftHeldByBudget` naming the NodeClaim, the budget and its
//! expiry, while `DriftCanBeReplaced` stays True (a status log proves it never False); at 10 %
//! Karpenter's own DisruptionBlocked Event naming a PodDisruptionBudget is a warning that names
//! it. Does IO (API server, moto, fault proxy).
//!
//! Karpenter's state is written by hand here, not produced by the lab's real controller: the
//! catalogue and limit arithmetic over many NodePool shapes at once; the lab proves the launches
//! (lab `reasons`).

use anyhow::{Context, Result};
use karpenter_health_api::karpenter::{NodeClaim, NodePool};
use karpenter_health_api::{ConditionType, KarpenterHealth, KarpenterHealthStatus, Reason};
use karpenter_health_aws::REVALIDATE_MIN_AGE;
use karpenter_health_e2e::fault_proxy::Fault;
use karpenter_health_e2e::fixture::{Fixture, REFRESH, rfc3339_ago};
use karpenter_health_e2e::health_status::{message, subnet_zone};
use karpenter_health_e2e::status_log::{StatusLog, from_first_unknown};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

fn requirement(key: &str, operator: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": operator, "values": values})
}

/// Waits until the condition is True with another message than `before`: the operator has
/// evaluated the NodePool as it is now.
async fn wait_true_after(fx: &Fixture, what: &str, before: &str) -> Result<KarpenterHealthStatus> {
    fx.wait_status(what, |s| {
        s.condition(ConditionType::InstanceTypesAvailable)
            .is_some_and(|c| c.status == "True" && c.message != before)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_pools_no_offered_instance_type_can_meet_are_instance_types_unavailable() -> Result<()>
{
    let fx = Fixture::seed("itypes", "us-west-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        let started = tokio::time::Instant::now();
        let status = fx
            .wait_healthy("with a NodePool of amd64 on-demand types")
            .await?;
        let zone = subnet_zone(&status)?;
        let mut before = message(&status, ConditionType::InstanceTypesAvailable).to_owned();
        assert!(fx.proxy.count("ec2", "DescribeInstanceTypes") > 0);
        assert!(fx.proxy.count("ec2", "DescribeInstanceTypeOfferings") > 0);

        // Narrow but satisfiable NodePools: never False. Each differs in how many types it
        // leaves, so a new message shows the operator has judged it.
        let log = StatusLog::start(&fx.admin, &fx.name);
        let amd64 = requirement("kubernetes.io/arch", "In", &["amd64"]);
        let on_demand = requirement("karpenter.sh/capacity-type", "In", &["on-demand"]);
        let narrow = [
            (
                "one family in two sizes with more than 2 vCPUs",
                json!([
                    amd64,
                    on_demand,
                    requirement("karpenter.k8s.aws/instance-family", "In", &["m5"]),
                    requirement(
                        "karpenter.k8s.aws/instance-size",
                        "In",
                        &["xlarge", "2xlarge"]
                    ),
                    requirement("karpenter.k8s.aws/instance-cpu", "Gt", &["2"]),
                ]),
            ),
            (
                "pinned to the zone of the class's subnet",
                json!([
                    amd64,
                    on_demand,
                    requirement("topology.kubernetes.io/zone", "In", &[&zone])
                ]),
            ),
            (
                "Graviton spot of a recent generation",
                json!([
                    requirement("kubernetes.io/arch", "In", &["arm64"]),
                    requirement("karpenter.sh/capacity-type", "In", &["spot"]),
                    requirement("karpenter.k8s.aws/instance-category", "In", &["c", "m"]),
                    requirement("karpenter.k8s.aws/instance-generation", "Gt", &["5"]),
                ]),
            ),
        ];
        for (what, requirements) in narrow {
            fx.patch_node_pool_requirements(requirements).await?;
            let status = wait_true_after(&fx, what, &before).await?;
            before = message(&status, ConditionType::InstanceTypesAvailable).to_owned();
        }
        for held in log.stop().await {
            let c = held.condition(ConditionType::InstanceTypesAvailable);
            assert!(
                c.is_none_or(|c| c.status != "False"),
                "False on a satisfiable NodePool: {c:?}"
            );
        }

        // A family this region does not have (a typo of m5).
        fx.patch_node_pool_requirements(json!([
            amd64,
            on_demand,
            requirement("karpenter.k8s.aws/instance-family", "In", &["m5x"]),
        ]))
        .await?;
        let status = fx
            .wait_only_failed(
                ConditionType::InstanceTypesAvailable,
                Reason::NoInstanceTypeMatchesRequirements,
            )
            .await?;
        let text = message(&status, ConditionType::InstanceTypesAvailable);
        assert!(
            text.contains("karpenter.k8s.aws/instance-family In [m5x]") && text.contains(&zone),
            "names the requirement and the zone: {text}"
        );
        fx.patch_node_pool_requirements(json!([amd64, on_demand]))
            .await?;
        fx.wait_healthy("after the family is corrected").await?;

        // A zone of the region in which the class selects no subnet.
        let other = ["a", "b", "c"]
            .iter()
            .map(|z| format!("{}{z}", fx.region))
            .find(|z| *z != zone)
            .context("another zone")?;
        fx.patch_node_pool_requirements(json!([
            amd64,
            on_demand,
            requirement("topology.kubernetes.io/zone", "In", &[&other]),
        ]))
        .await?;
        let status = fx
            .wait_only_failed(
                ConditionType::InstanceTypesAvailable,
                Reason::RequiredZonesWithoutSubnets,
            )
            .await?;
        let text = message(&status, ConditionType::InstanceTypesAvailable);
        assert!(text.contains(&other), "names the zone: {text}");
        fx.patch_node_pool_requirements(json!([amd64, on_demand]))
            .await?;
        fx.wait_healthy("after the zone requirement is dropped")
            .await?;

        // EC2 denies the catalog reads. The catalog is kept for hours; an edit of the class is
        // evidence that revalidates it (answers older than REVALIDATE_MIN_AGE), and the denied
        // refresh is Unknown, never False.
        tokio::time::sleep_until(started + REVALIDATE_MIN_AGE + REFRESH).await;
        let log = StatusLog::start(&fx.admin, &fx.name);
        fx.patch_node_pool_requirements(json!([
            amd64,
            on_demand,
            requirement("karpenter.k8s.aws/instance-family", "In", &["m5x"]),
        ]))
        .await?;
        fx.proxy
            .inject("ec2", Some("DescribeInstanceTypes"), Fault::AccessDenied);
        fx.proxy.inject(
            "ec2",
            Some("DescribeInstanceTypeOfferings"),
            Fault::AccessDenied,
        );
        // An edit revalidates only answers older than REVALIDATE_MIN_AGE, and a NodePool edit
        // above may have refreshed the catalog since `started`: edit again each refresh until
        // the denied refresh shows, for at most two such ages.
        let denied_shows = |s: &KarpenterHealthStatus| {
            s.condition(ConditionType::InstanceTypesAvailable)
                .is_some_and(|c| c.status == "Unknown" && c.reason == "AwsAccessDenied")
        };
        let healths: Api<KarpenterHealth> = Api::all(fx.admin.clone());
        let deadline = tokio::time::Instant::now() + 2 * REVALIDATE_MIN_AGE + REFRESH;
        for attempt in 0.. {
            fx.patch_node_class_spec(json!({"tags": {"revalidate": format!("now-{attempt}")}}))
                .await?;
            tokio::time::sleep(REFRESH).await;
            let status = healths.get(&fx.name).await?.status;
            if status.as_ref().is_some_and(denied_shows) {
                break;
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "InstanceTypesAvailable never went Unknown with AwsAccessDenied: {status:?}"
            );
        }
        let held = log.stop().await;
        fx.proxy.clear_faults();
        // The first status after the edit may still hold the False of the catalog read before;
        // from the first Unknown on, none is False while EC2 denies.
        let denied = from_first_unknown(&held, ConditionType::InstanceTypesAvailable)
            .context("an Unknown status")?;
        for s in denied {
            let c = s.condition(ConditionType::InstanceTypesAvailable);
            assert!(
                c.is_none_or(|c| c.status != "False"),
                "False while EC2 denied the reads: {c:?}"
            );
        }
        tokio::time::sleep(REFRESH).await;
        fx.patch_node_pool_requirements(json!([amd64, on_demand]))
            .await?;
        fx.patch_node_class_spec(json!({"tags": {"revalidate": "again"}}))
            .await?;
        fx.wait_healthy("once EC2 answers again").await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

/// How long a Pod waits before limits are blamed for it, in these tests.
const WAITING_ON_LIMITS: std::time::Duration = std::time::Duration::from_secs(5);

/// Sets this test's NodePool's `spec.limits` and what Karpenter counts its nodes providing
/// (`status.resources`), as Karpenter's counter writes it.
async fn set_usage(fx: &Fixture, limits: Value, used: Value) -> Result<()> {
    let api: Api<NodePool> = Api::all(fx.admin.clone());
    api.patch(
        &fx.name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"limits": limits}})),
    )
    .await?;
    api.patch_status(
        &fx.name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"resources": used}})),
    )
    .await?;
    Ok(())
}

fn limits_is(status: &KarpenterHealthStatus, want: &str, warned: bool) -> bool {
    let warning = status
        .findings
        .iter()
        .any(|f| f.reason == "NodePoolAtLimits");
    status
        .condition(ConditionType::LimitsLeaveRoom)
        .is_some_and(|c| c.status == want)
        && warning == warned
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_waiting_behind_node_pool_limits_are_limits_leave_no_room() -> Result<()> {
    let fx = Fixture::seed("limits", "us-east-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        // A Pod counts as waiting on the limits once unschedulable this long (2 minutes by
        // default: the lab's `reasons` shows the real scale-up that needs it); scaled down here.
        let operator = fx
            .start_operator_with(None, |config| {
                config.leader_elect = true;
                config.evaluation.waiting_on_limits_after = WAITING_ON_LIMITS;
            })
            .await?;
        set_usage(
            &fx,
            json!({"cpu": "1000", "memory": "1000Gi"}),
            json!({"cpu": "4", "memory": "16Gi"}),
        )
        .await?;
        fx.wait_healthy("with a NodePool well under its limits")
            .await?;

        // Healthy variants: at its limits with nothing waiting is a warning, never False.
        let log = StatusLog::start(&fx.admin, &fx.name);
        set_usage(&fx, json!({"cpu": "16"}), json!({"cpu": "16"})).await?;
        fx.wait_status("a warning for the NodePool at its cpu limit", |s| {
            limits_is(s, "True", true)
        })
        .await?;
        // A Pod that selects the NodePool waits, but the scheduler has not judged it yet.
        fx.unjudged_pod("web", json!({"karpenter.sh/nodepool": fx.name}))
            .await?;
        tokio::time::sleep(REFRESH * 2).await;
        for held in log.stop().await {
            let c = held.condition(ConditionType::LimitsLeaveRoom);
            assert!(
                c.is_none_or(|c| c.status != "False"),
                "False with nothing waiting: {c:?}"
            );
        }

        // The scheduler finds no node for it: it waits for this NodePool, which is at its limit;
        // a warning until it has waited WAITING_ON_LIMITS, then False.
        fx.mark_unschedulable("web").await?;
        fx.wait_status("the warning naming the Pod not counted yet", |s| {
            s.findings
                .iter()
                .any(|f| f.reason == "NodePoolAtLimits" && f.message.contains("/web"))
        })
        .await?;
        let status = fx
            .wait_only_failed(
                ConditionType::LimitsLeaveRoom,
                Reason::NodePoolLimitsReached,
            )
            .await?;
        let text = message(&status, ConditionType::LimitsLeaveRoom);
        assert!(
            text.contains(&format!("{}/web", fx.name)) && text.contains("cpu limit 16"),
            "names the Pod and the limit: {text}"
        );
        set_usage(&fx, json!({"cpu": "32"}), json!({"cpu": "16"})).await?;
        fx.wait_status("LimitsLeaveRoom True once the limit is raised", |s| {
            limits_is(s, "True", false)
        })
        .await?;

        // Half a cpu left: no instance type moto offers has less than one vCPU.
        set_usage(&fx, json!({"cpu": "16500m"}), json!({"cpu": "16"})).await?;
        let status = fx
            .wait_only_failed(
                ConditionType::LimitsLeaveRoom,
                Reason::NodePoolLimitsBelowSmallestInstance,
            )
            .await?;
        let text = message(&status, ConditionType::LimitsLeaveRoom);
        assert!(text.contains("0.5 cpu left"), "{text}");
        set_usage(
            &fx,
            json!({"cpu": "1000", "memory": "1000Gi"}),
            json!({"cpu": "16"}),
        )
        .await?;
        fx.wait_healthy("once the limits leave room again").await?;

        // The account's on-demand standard vCPU quota is used up (the gap proxy serves Service
        // Quotas' EC2 values, which moto lacks) and the NodePool allows standard types only.
        let amd64 = requirement("kubernetes.io/arch", "In", &["amd64"]);
        let on_demand = requirement("karpenter.sh/capacity-type", "In", &["on-demand"]);
        fx.patch_node_pool_requirements(json!([
            amd64,
            on_demand,
            requirement(
                "karpenter.k8s.aws/instance-category",
                "In",
                &["m", "c", "r"]
            ),
        ]))
        .await?;
        fx.proxy.set_ec2_quota("L-1216C47A", Some(0.0));
        let status = fx
            .wait_only_failed(ConditionType::LimitsLeaveRoom, Reason::VcpuQuotaExhausted)
            .await?;
        let text = message(&status, ConditionType::LimitsLeaveRoom);
        assert!(text.contains("of the account's 0 vCPU quota"), "{text}");
        assert!(fx.proxy.count("servicequotas", "GetServiceQuota") > 0);
        // A GPU category counts against another quota, not read: never False for it.
        let log = StatusLog::start(&fx.admin, &fx.name);
        fx.patch_node_pool_requirements(json!([
            amd64,
            on_demand,
            requirement(
                "karpenter.k8s.aws/instance-category",
                "In",
                &["m", "c", "r", "g"]
            ),
        ]))
        .await?;
        fx.wait_status("LimitsLeaveRoom True with a GPU category allowed", |s| {
            limits_is(s, "True", false)
        })
        .await?;
        tokio::time::sleep(REFRESH * 2).await;
        let held = log.stop().await;
        let first_true = held
            .iter()
            .position(|s| limits_is(s, "True", false))
            .context("a True status")?;
        for s in &held[first_true..] {
            assert!(
                limits_is(s, "True", false),
                "False again with a GPU category allowed"
            );
        }
        fx.proxy.set_ec2_quota("L-1216C47A", Some(64.0));
        fx.patch_node_pool_requirements(json!([amd64, on_demand]))
            .await?;
        fx.wait_healthy("with room in the quota").await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

/// Waits for the DriftHeldByBudget warning while DriftCanBeReplaced is True; its message.
async fn held_warning(fx: &Fixture) -> Result<String> {
    let status = fx
        .wait_status("the DriftHeldByBudget warning", |s| {
            s.findings.iter().any(|f| f.reason == "DriftHeldByBudget")
                && s.condition(ConditionType::DriftCanBeReplaced)
                    .is_some_and(|c| c.status == "True")
        })
        .await?;
    Ok(status
        .findings
        .iter()
        .find(|f| f.reason == "DriftHeldByBudget")
        .map(|f| f.message.clone())
        .unwrap_or_default())
}

/// Sets this test's NodePool's disruption budgets.
async fn set_budgets(fx: &Fixture, budgets: Value) -> Result<()> {
    Api::<NodePool>::all(fx.admin.clone())
        .patch(
            &fx.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"disruption": {"budgets": budgets}}})),
        )
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_switched_off_by_a_budget_is_a_warning_never_false() -> Result<()> {
    let fx = Fixture::seed("drift", "eu-north-1", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        fx.wait_healthy("before any drift").await?;

        // A NodeClaim Karpenter found drifted 45 minutes ago, under Karpenter's default budget.
        let log = StatusLog::start(&fx.admin, &fx.name);
        let long_ago = rfc3339_ago(k8s_openapi::jiff::SignedDuration::from_mins(45));
        let claim = fx
            .node_claim(
                "drifted",
                "aws:///eu-north-1a/i-0ddddddddddddddd1",
                json!([
                    {"type": "Launched", "status": "True", "reason": "Launched", "lastTransitionTime": long_ago},
                    {"type": "Registered", "status": "True", "reason": "Registered", "lastTransitionTime": long_ago},
                    {"type": "Drifted", "status": "True", "reason": "AMIDrift", "lastTransitionTime": long_ago},
                ]),
            )
            .await?;
        fx.wait_status("the drifted NodeClaim counted", |s| {
            s.condition(ConditionType::DriftCanBeReplaced)
                .is_some_and(|c| c.status == "True" && c.message.starts_with("1 drifted"))
        })
        .await?;
        // A freeze that opens every night: drift goes through then, nothing to say.
        set_budgets(&fx, json!([{"nodes": "0", "schedule": "0 22 * * *", "duration": "8h"}])).await?;
        tokio::time::sleep(REFRESH * 2).await;

        // The freeze without a schedule, how Karpenter's docs switch drift off
        // (kubernetes-sigs/karpenter #1576): a decision, so a warning naming the NodeClaim, the
        // budget and its expiry (the real CRDs default expireAfter to 720h; without it Karpenter
        // never expires the NodeClaim), and True.
        set_budgets(&fx, json!([{"nodes": "0"}])).await?;
        let text = held_warning(&fx).await?;
        let expires = Api::<NodeClaim>::all(fx.admin.clone())
            .get(&claim)
            .await?
            .spec
            .expire_after
            .is_some();
        let expiry = if expires { "expires at " } else { "never expires (no expireAfter)" };
        assert!(
            text.contains(&claim)
                && text.contains("nodes: 0 for every reason")
                && text.contains(expiry),
            "{text}"
        );
        // A daily freeze for 24 hours never leaves a gap either.
        set_budgets(&fx, json!([{"nodes": "10%"}])).await?;
        fx.wait_healthy("once the budget lets drift through").await?;

        // Karpenter says what else holds the drifted NodeClaim: a warning naming it.
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let event: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
            "metadata": {"name": format!("{claim}.blocked"), "namespace": "default"},
            "involvedObject": {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": claim},
            "reason": "DisruptionBlocked",
            "message": "Pdb prevents pod evictions (PodDisruptionBudget=[shop/web])",
            "type": "Normal",
            "source": {"component": "karpenter"},
            "firstTimestamp": now,
            "lastTimestamp": now,
        }))?;
        Api::<k8s_openapi::api::core::v1::Event>::namespaced(fx.admin.clone(), "default")
            .create(&Default::default(), &event)
            .await?;
        let status = fx
            .wait_status("the warning naming the PodDisruptionBudget", |s| {
                s.findings
                    .iter()
                    .any(|f| f.reason == "DriftedNodeClaimBlocked" && f.message.contains("shop/web"))
            })
            .await?;
        let c = status
            .condition(ConditionType::DriftCanBeReplaced)
            .context("DriftCanBeReplaced")?;
        assert_eq!(c.status, "True", "a warning, not a failure: {c:?}");
        set_budgets(
            &fx,
            json!([{"nodes": "0", "schedule": "@daily", "duration": "24h"}]),
        )
        .await?;
        let text = held_warning(&fx).await?;
        assert!(text.contains("schedule @daily for 24h"), "{text}");
        set_budgets(&fx, json!([{"nodes": "10%"}])).await?;
        fx.wait_healthy("once the budget lets drift through again").await?;
        // Whatever the budgets said, the condition was never False on the way.
        for held in log.stop().await {
            let c = held.condition(ConditionType::DriftCanBeReplaced);
            assert!(
                c.is_none_or(|c| c.status != "False"),
                "False for a budget that switches drift off: {c:?}"
            );
        }
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

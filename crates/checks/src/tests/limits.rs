//! Scenarios of `LimitsLeaveRoom` beyond one sentence per reason: a NodePool at its limits is a
//! warning until a Pod that only this class can take waits, another NodePool with room keeps the
//! class True, and what was not seen is Unknown, never False. Pure.

use super::reasons::condition_of;
use crate::facts::{Facts, Observed, UnknownCause};
use crate::testing::*;
use karpenter_health_api::ConditionType;

fn limits(f: &Facts) -> (String, String, String, Vec<String>) {
    condition_of(f, ConditionType::LimitsLeaveRoom)
}

#[test]
fn a_node_pool_at_its_limits_with_nothing_waiting_only_here_is_a_warning() {
    for (what, f) in [
        (
            "the waiting Pod can go to another class",
            Facts::healthy().with_pool_usage(&[("cpu", "16")], &[("cpu", "16")], false),
        ),
        (
            "nothing waits",
            Facts::healthy()
                .with_pool_usage(&[("cpu", "16")], &[("cpu", "16")], true)
                .with(|f| f.cluster.pending_pods = Observed::Found(Vec::new())),
        ),
        (
            "memory used up, nothing waits",
            Facts::healthy()
                .with_pool_usage(&[("memory", "64Gi")], &[("memory", "64Gi")], true)
                .with(|f| f.cluster.pending_pods = Observed::Found(Vec::new())),
        ),
    ] {
        let (status, reason, message, warnings) = limits(&f);
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("True", "NodePoolsHaveRoom"),
            "{what}"
        );
        assert_eq!(warnings, ["NodePoolAtLimits"], "{what}: {message}");
        assert!(message.contains("see the warning"), "{what}: {message}");
    }
}

#[test]
fn another_node_pool_with_room_keeps_the_class_true() {
    let f = Facts::healthy()
        .with_pool_usage(&[("cpu", "16")], &[("cpu", "16")], true)
        .with(|f| {
            if let Some(pools) = f.cluster.node_pools.found_mut() {
                pools.push(node_pool("spare"));
            }
        });
    let (status, _, message, warnings) = limits(&f);
    assert_eq!(status, "True", "{message}");
    assert_eq!(
        message,
        "1 of 2 NodePools have room for another node (the others are at their limits, see the \
         warning), and no Pod that only the stopped ones can take has waited on them for 2m."
    );
    assert_eq!(warnings, ["NodePoolAtLimits"]);
}

/// Karpenter tries a Pod only on NodePools whose taints it tolerates and whose requirements and
/// template labels it meets (kubernetes-sigs/karpenter
/// `pkg/controllers/provisioning/scheduling/nodeclaim.go` `CanAdd`): the NodePool with room does
/// not help a Pod it cannot take.
#[test]
fn a_pod_only_the_stopped_node_pool_can_take_waits_beside_one_with_room() {
    let beside = |spare: karpenter_health_api::karpenter::NodePool,
                  selector: Option<(&str, &str)>| {
        let f = Facts::healthy()
            .with_pool_usage(&[("cpu", "16")], &[("cpu", "16")], true)
            .with_node_pool_beside(spare);
        match selector {
            Some((k, v)) => f.with_pods_selecting_template_label(k, v),
            None => f,
        }
    };
    let mut tainted = node_pool("spare");
    tainted
        .spec
        .template
        .spec
        .taints
        .push(karpenter_health_api::karpenter::Taint {
            key: "dedicated".into(),
            value: Some("batch".into()),
            effect: "NoSchedule".into(),
        });
    for (what, f) in [
        (
            "the Pod selects the stopped NodePool's template label",
            beside(node_pool("spare"), Some(("team", "shop"))),
        ),
        (
            "the NodePool with room is tainted and the Pod does not tolerate it",
            beside(tainted, None),
        ),
    ] {
        let (status, reason, message, _) = limits(&f);
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "NodePoolLimitsReached"),
            "{what}: {message}"
        );
        assert!(
            message.contains("only to NodePool(s) default"),
            "{what}: {message}"
        );
    }
    // The same Pod that the spare NodePool may take (no label asked, no taint): True.
    let (status, _, message, _) = limits(&beside(node_pool("spare"), None));
    assert_eq!(status, "True", "{message}");
}

#[test]
fn what_karpenter_would_still_launch_is_never_false() {
    for (what, f) in [
        (
            "half a vCPU below the limit: a 2-vCPU type does not fit, but a cheaper limit reading would be wrong only if the catalog lied",
            Facts::healthy().with_pool_usage(&[("cpu", "16")], &[("cpu", "14")], true),
        ),
        (
            "memory not used up: Karpenter's memory capacity is below nominal by an overhead not read here",
            Facts::healthy().with_pool_usage(&[("memory", "16Gi")], &[("memory", "15Gi")], true),
        ),
        (
            "a limit that is no quantity",
            Facts::healthy().with_pool_usage(&[("cpu", "lots")], &[("cpu", "16")], true),
        ),
        (
            "a limit on a resource not every type has",
            Facts::healthy().with_pool_usage(
                &[("nvidia.com/gpu", "4")],
                &[("nvidia.com/gpu", "4")],
                true,
            ),
        ),
    ] {
        let (status, _, message, _) = limits(&f);
        assert_eq!(status, "True", "{what}: {message}");
    }
}

#[test]
fn cpu_left_below_the_smallest_type_needs_the_catalog_to_say_so() {
    let below = || Facts::healthy().with_pool_usage(&[("cpu", "1")], &[], true);
    let (status, reason, message, _) = limits(&below());
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "NodePoolLimitsBelowSmallestInstance")
    );
    assert!(message.contains("less than the 2 vCPUs"), "{message}");
    // Without the catalog the smallest type is not known: no claim, only what is proven.
    let (status, _, _, _) =
        limits(&below().with(|f| f.aws.instance_types = Some(unknown(UnknownCause::Throttled))));
    assert_eq!(status, "True");
}

#[test]
fn pending_pods_not_listed_are_unknown_when_every_node_pool_is_stopped() {
    let f = Facts::healthy()
        .with_pool_usage(&[("cpu", "16")], &[("cpu", "16")], true)
        .with(|f| f.cluster.pending_pods = unknown(UnknownCause::NotObserved));
    let (status, reason, message, _) = limits(&f);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("Unknown", "NotObserved"),
        "{message}"
    );
}

#[test]
fn a_claim_a_quota_keeps_from_launching_is_no_capacity_on_its_way() {
    let full = || Facts::healthy().with_vcpu_quotas(Observed::Found(2.0), Observed::Found(64.0));
    // Karpenter's retry: a NodeClaim made for the waiting Pod, not launched (EC2 refuses it, and
    // Karpenter deletes it moments later).
    let retrying = full().with(|f| {
        let mut claim = crate::testing::node_claim("retry", "", 0, false);
        claim.instance_id = None;
        claim.launched = None;
        if let Observed::Found(claims) = &mut f.cluster.node_claims {
            claims.push(claim);
        }
    });
    let (status, reason, message, _) = limits(&retrying);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "VcpuQuotaExhausted"),
        "{message}"
    );
    assert!(
        message.contains("Service Quotas L-1216C47A") && message.contains("2 + 2 > 2"),
        "{message}"
    );
    // A launched NodeClaim still registering may be the Pod's: not counted yet.
    let registering = full().with_node_claim(crate::testing::node_claim("new", "i-0new", 0, false));
    let (status, _, message, _) = limits(&registering);
    assert_eq!(status, "True", "{message}");
}

#[test]
fn a_quota_stops_only_what_it_covers_and_what_it_was_read_for() {
    let full = || Facts::healthy().with_vcpu_quotas(Observed::Found(2.0), Observed::Found(64.0));
    let (status, reason, message, warnings) = limits(&full());
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "VcpuQuotaExhausted"),
        "{message}"
    );
    assert!(
        message.contains("already run 2 of the account's 2 vCPU quota"),
        "{message}"
    );
    assert_eq!(warnings, ["VcpuQuotaNearlyUsed"]);
    for (what, f) in [
        (
            "spot allowed too, and the spot quota has room",
            full()
                .with_pool_requirement("karpenter.sh/capacity-type", "In", &["spot", "on-demand"])
                .with(|f| {
                    if let Some(pool) = f.cluster.node_pools.found_mut().and_then(|p| p.first_mut())
                    {
                        pool.spec.template.spec.requirements.retain(|r| {
                            !(r.key == "karpenter.sh/capacity-type" && r.values == ["on-demand"])
                        });
                    }
                }),
        ),
        (
            "a GPU type is allowed too: its quota is not read",
            full().with(|f| {
                if let Some(Observed::Found(catalog)) = &mut f.aws.instance_types {
                    let mut types = (*catalog.types).clone();
                    types.push(crate::facts::InstanceTypeFacts {
                        name: "g5.xlarge".into(),
                        vcpus: Some(4),
                        memory_mib: Some(16384),
                        architectures: vec!["x86_64".into()],
                        usage_classes: vec!["on-demand".into()],
                        ..Default::default()
                    });
                    types.sort_by(|a, b| a.name.cmp(&b.name));
                    let mut zones = (*catalog.zones).clone();
                    zones.insert("g5.xlarge".into(), ["us-west-2a".to_owned()].into());
                    catalog.types = types.into();
                    catalog.zones = zones.into();
                }
            }),
        ),
        (
            "Service Quotas has no value",
            Facts::healthy().with_vcpu_quotas(Observed::Absent, Observed::Absent),
        ),
        (
            "Service Quotas denied",
            Facts::healthy()
                .with_vcpu_quotas(unknown(UnknownCause::AccessDenied), Observed::Found(64.0)),
        ),
        (
            "the running instance is no NodeClaim's any more (terminated since the sweep read it)",
            full().with(|f| {
                f.cluster.claimed_instance_ids = Observed::Found(Default::default());
            }),
        ),
        (
            "the NodeClaims are not listed: nothing counts as running",
            full().with(|f| f.cluster.claimed_instance_ids = unknown(UnknownCause::NotObserved)),
        ),
        (
            "the running instance is a spot one",
            full().with(|f| {
                if let Observed::Found(instances) = &mut f.aws.cluster_instances {
                    instances[0].lifecycle = Some("spot".into());
                }
            }),
        ),
    ] {
        let (status, _, message, _) = limits(&f);
        assert_eq!(status, "True", "{what}: {message}");
    }
}

/// Karpenter counts a NodeClaim in its NodePool's `status.resources` from its launch, while the
/// Pod it is for stays Unschedulable until the node registers
/// (kubernetes-sigs/karpenter `pkg/controllers/nodepool/counter/controller.go`): every scale-up
/// that reaches a limit looks like this for a while. Only a Pod that has waited
/// `Settings::waiting_on_limits_after`, with no NodeClaim of the class still coming up (registering,
/// not initialized, or registered within the scheduler's retry interval), not nominated to a
/// node and not asking for a managed node group (a label no NodePool defines, so Karpenter may
/// take the Pod nowhere), makes the condition False.
#[test]
fn a_scale_up_reaching_the_limit_is_never_false() {
    let at_limit = || Facts::healthy().with_pool_usage(&[("cpu", "16")], &[("cpu", "16")], true);
    let pods = |f: &mut Facts, change: &dyn Fn(&mut crate::facts::PodScheduling)| {
        if let Observed::Found(pods) = &mut f.cluster.pending_pods {
            for pod in pods.iter_mut() {
                change(std::sync::Arc::make_mut(pod));
            }
        }
    };
    let waited = |mins: i64| {
        at_limit().with(move |f| pods(f, &|p| p.unschedulable_since = Some(mins_ago(mins))))
    };
    let registering = at_limit().with(|f| {
        if let Observed::Found(claims) = &mut f.cluster.node_claims {
            claims.push(node_claim("default-fghij", "i-0fffffffffffffff1", 0, false));
        }
    });
    let long = crate::Settings::default().waiting_on_limits_after.as_secs() / 60 + 1;
    // A node that came up at the limit may have room the scheduler has not tried the Pod on yet:
    // it retries on a Node change that may fit the Pod, and whatever changed within 6 minutes.
    let with_claim = |claim: crate::facts::NodeClaimFacts| {
        waited(long).with(move |f| {
            if let Observed::Found(claims) = &mut f.cluster.node_claims {
                claims.push(claim.clone());
            }
        })
    };
    let ready_ago = |name: &str, mins: i64| node_claim(name, "i-0fffffffffffffff2", mins + 2, true);
    let mut late_init = ready_ago("default-late", 20);
    if let Some(init) = late_init.initialized.as_mut() {
        init.last_transition = Some(mins_ago(1));
    }
    let mut no_time = ready_ago("default-untimed", 20);
    if let Some(reg) = no_time.registered.as_mut() {
        reg.last_transition = None;
    }
    no_time.initialized = None;
    let uninitialized = node_claim_uninitialized(
        "default-starting",
        "i-0fffffffffffffff3",
        7,
        "StartupTaintsExist",
        "StartupTaint \"example.com/agent=:NoSchedule\" still exists",
    );
    for (what, claim, why) in [
        ("ready 5 minutes ago", ready_ago("default-recent", 5), "NodeClaim default-recent became ready 5m ago"),
        ("registered long ago, initialized a minute ago", late_init, "NodeClaim default-late became ready 1m ago"),
        ("registered 7 minutes ago, not initialized", uninitialized, "NodeClaim default-starting is registered and not initialized"),
        ("ready since a time not read", no_time, "NodeClaim default-untimed is ready since a time that could not be read"),
    ] {
        let f = with_claim(claim);
        let (status, _, message, warnings) = limits(&f);
        assert_eq!(status, "True", "{what}: {message}");
        assert_eq!(warnings, ["NodePoolAtLimits"], "{what}");
        let warning = super::reasons::status(&f)
            .findings
            .into_iter()
            .find(|w| w.reason == "NodePoolAtLimits")
            .expect("the warning");
        assert!(warning.message.contains(why), "{what}: {}", warning.message);
    }
    // Ready longer ago than the scheduler's retry, or of a NodePool that cannot take the Pod:
    // False.
    let mut elsewhere = ready_ago("other-recent", 1);
    elsewhere.node_pool = Some("other".into());
    for (what, claim) in [
        ("ready 7 minutes ago", ready_ago("default-settled", 7)),
        ("another NodePool's", elsewhere),
    ] {
        assert_eq!(limits(&with_claim(claim)).1, "NodePoolLimitsReached", "{what}");
    }
    for (what, f) in [
        ("waited under a minute", waited(1)),
        ("a NodeClaim of the class still registering", registering),
        (
            "nominated to a node",
            at_limit().with(|f| pods(f, &|p| p.nominated = true)),
        ),
        (
            "asking for a managed node group",
            at_limit().with(|f| {
                pods(f, &|p| {
                    p.node_selector
                        .insert("eks.amazonaws.com/nodegroup".into(), "system".into());
                })
            }),
        ),
        (
            "no transition time read",
            at_limit().with(|f| pods(f, &|p| p.unschedulable_since = None)),
        ),
    ] {
        let (status, _, message, warnings) = limits(&f);
        assert_eq!(status, "True", "{what}: {message}");
        assert_eq!(warnings, ["NodePoolAtLimits"], "{what}");
        assert!(
            message.contains("see the warning") && message.contains("has waited on them for 2m"),
            "never contradicts the warning: {message}"
        );
    }
    // The warning says why the waiting Pod is not counted yet.
    let status = super::reasons::status(&waited(1));
    let warning = status
        .findings
        .iter()
        .find(|w| w.reason == "NodePoolAtLimits")
        .expect("the warning");
    assert!(
        warning.message.contains("shop/web-0") && warning.message.contains("less than 2m"),
        "{}",
        warning.message
    );
    // Past the threshold, nothing coming up: False.
    assert_eq!(limits(&waited(long)).1, "NodePoolLimitsReached");
}

/// `limits.nodes` stops a NodePool at its count from Karpenter 1.11 (kubernetes-sigs/karpenter
/// #2526); before, only once the count is past it (no instance type has a `nodes` capacity, so
/// `filterByRemainingResources` drops them only when what is left is negative).
#[test]
fn a_node_count_limit_stops_as_the_installed_karpenter_stops_it() {
    let at = |version: &str, used: &str| {
        let version = version.to_owned();
        Facts::healthy()
            .with_pool_usage(&[("nodes", "3")], &[("nodes", used)], true)
            .with(move |f| {
                if let Observed::Found(k) = &mut f.cluster.karpenter {
                    k.version = Some(version.clone());
                }
            })
    };
    let (status, reason, message, _) = limits(&at("1.11.0", "3"));
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "NodePoolLimitsReached"),
        "{message}"
    );
    assert!(message.contains("has 3 nodes, its limit is 3"), "{message}");
    let (status, _, message, warnings) = limits(&at("1.8.6", "3"));
    assert_eq!(status, "True", "1.8 launches one more: {message}");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(limits(&at("1.8.6", "4")).1, "NodePoolLimitsReached");
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        a_node_pool_under_its_limits_is_node_pools_have_room:
            Facts::healthy().with_pool_usage(&[("cpu", "1000"), ("memory", "1000Gi")], &[("cpu", "8"), ("memory", "32Gi")], true)
            => LimitsLeaveRoom is True because NodePoolsHaveRoom;
        cpu_used_up_while_a_pod_waits_is_node_pool_limits_reached:
            Facts::healthy().with_pool_usage(&[("cpu", "16")], &[("cpu", "16")], true)
            => LimitsLeaveRoom is False because NodePoolLimitsReached;
        a_quota_the_running_m5_large_fills_is_vcpu_quota_exhausted:
            Facts::healthy().with_vcpu_quotas(Observed::Found(2.0), Observed::Found(64.0))
            => LimitsLeaveRoom is False because VcpuQuotaExhausted;
        one_cpu_left_below_two_vcpu_types_is_node_pool_limits_below_smallest_instance:
            Facts::healthy().with_pool_usage(&[("cpu", "1")], &[], true)
            => LimitsLeaveRoom is False because NodePoolLimitsBelowSmallestInstance;
    }
}

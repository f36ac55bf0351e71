//! `LimitsLeaveRoom`: Pods that only this EC2NodeClass can take do not wait while every NodePool
//! of the class that may take them (`crate::pod_fit`: taints tolerated, requirements and template
//! labels met) is stopped by its `spec.limits`. Karpenter subtracts what a NodePool's nodes
//! provide from its limits and drops every instance type whose capacity exceeds what is left
//! (kubernetes-sigs/karpenter `pkg/controllers/provisioning/scheduling/scheduler.go`
//! `filterByRemainingResources`), so a NodePool whose `status.resources` reached a cpu or memory
//! limit, or whose cpu left is below the smallest type it allows, launches nothing; Karpenter
//! says so only in its log and Events. Pure: no IO.
//!
//! Never stricter than Karpenter: only cpu, memory (every instance type has some of both) and the
//! node count are judged, memory only once used up (Karpenter's memory capacity is below the nominal size by an
//! overhead this check does not read), and cpu left against the smallest type of the superset the
//! instance-type check computes.
//!
//! The account's vCPU quotas stop launches too: EC2 refuses a standard on-demand or spot instance
//! that would take the region's running vCPUs past Service Quotas' value (`VcpuLimitExceeded`,
//! `MaxSpotInstanceCountExceeded`). What is running is counted from this cluster's own instances
//! only, so the count is a lower bound, and a NodePool is stopped by a quota only when every type
//! and capacity type it allows is a standard one that no longer fits; types of other quotas (GPU,
//! high-memory, ...) and reserved capacity are never judged.
//!
//! A Pod counts as waiting on the limits only once a scale-up cannot be what it waits for:
//! Karpenter counts a NodeClaim in its NodePool's `status.resources` from its launch
//! (kubernetes-sigs/karpenter `pkg/controllers/nodepool/counter/controller.go` sums the cluster
//! state's nodes, NodeClaims not yet registered included), while the Pod it launched for stays
//! Unschedulable until the node registers, so every scale-up that reaches a limit would
//! otherwise look blocked. So a Pod counts only when it has been unschedulable for
//! `Settings::waiting_on_limits_after` (2 minutes: past Karpenter's batching of at most 10 s,
//! `pkg/controllers/provisioning/batcher.go`), no NodeClaim of a NodePool that may take it is
//! still coming up (registering, initializing, or ready so recently that the scheduler may not
//! have tried the Pod on it: `limits/waiting.rs`), and it is not nominated to a node (preemption). A Pod that asks for an EKS
//! managed node group (`eks.amazonaws.com/nodegroup`, a label no NodePool defines) may go to no
//! NodePool, so it is never counted. Otherwise the stopped NodePool is a warning.

use crate::quantity::quantity;
use crate::facts::{InstanceTypeFacts, Observed};
use crate::plan::Context;
use crate::plan::instance_types::{allowed, category_and_generation};
use crate::pod_fit::NodeClaimTemplate;
use crate::verdict::{Check, Outcome, Rule};
use crate::warnings::Warning;
use karpenter_health_api::karpenter::NodePool;
use karpenter_health_api::{ConditionType, Reason, SubjectRef};

mod waiting;
use waiting::{Waiting, claims_coming_up, waiting_pods};

/// The first Karpenter release that stops a NodePool when its node count reaches `limits.nodes`.
const NODE_LIMITS_ENFORCED: (u64, u64, u64) = (1, 11, 0);

/// The instance categories those two quotas cover (EC2 User Guide, "Amazon EC2 instance type
/// quotas": A, C, D, H, I, M, R, T, Z, with the I family's `im` and `is`). Anything else (`g`,
/// `p`, `x`, `u`, `inf`, `trn`, `dl`, `hpc`, `mac`, ...) counts against a quota not read here.
const STANDARD_CATEGORIES: [&str; 11] = ["a", "c", "d", "h", "i", "im", "is", "m", "r", "t", "z"];

fn is_standard(instance_type: &str) -> bool {
    category_and_generation(instance_type).is_some_and(|(c, _)| STANDARD_CATEGORIES.contains(&c))
}

/// The quotas and what this cluster's own instances already use of them (a lower bound of the
/// region's use: other workloads of the account count too).
struct Quotas {
    on_demand: Option<f64>,
    spot: Option<f64>,
    used_on_demand: f64,
    used_spot: f64,
}

impl Quotas {
    fn of(ctx: &Context) -> Option<Self> {
        let quotas = ctx.facts.aws.vcpu_quotas.as_ref()?;
        let value = |o: &Observed<f64>| o.found().copied();
        let (on_demand, spot) = (value(&quotas.on_demand), value(&quotas.spot));
        if on_demand.is_none() && spot.is_none() {
            return None;
        }
        let vcpus_of = |name: &str| -> Option<f64> {
            let Some(Observed::Found(catalog)) = &ctx.facts.aws.instance_types else {
                return None;
            };
            let i = catalog
                .types
                .binary_search_by(|t| t.name.as_str().cmp(name))
                .ok()?;
            catalog.types[i].vcpus.map(f64::from)
        };
        let (mut used_on_demand, mut used_spot) = (0.0, 0.0);
        // Unread instances count as none: the count stays a lower bound. So does an instance no
        // NodeClaim claims now: the sweep's answer may be up to its period old, and an instance
        // terminated since then has lost its NodeClaim (the NodeClaim watch is live).
        let claimed = ctx.facts.cluster.claimed_instance_ids.found();
        for instance in ctx
            .facts
            .aws
            .cluster_instances
            .found()
            .into_iter()
            .flatten()
        {
            let Some(t) = instance.instance_type.as_deref() else {
                continue;
            };
            let live = claimed.is_some_and(|c| c.contains(&instance.id));
            let running = matches!(instance.state.as_str(), "pending" | "running");
            if !live || !running || !is_standard(t) {
                continue;
            }
            let Some(v) = vcpus_of(t) else { continue };
            match instance.lifecycle.as_deref() {
                None => used_on_demand += v,
                Some("spot") => used_spot += v,
                Some(_) => {}
            }
        }
        Some(Self {
            on_demand,
            spot,
            used_on_demand,
            used_spot,
        })
    }

    /// Whether some type of `types` may still launch as one of its capacity types.
    fn admits_any(&self, types: &[(&InstanceTypeFacts, &[&'static str])]) -> bool {
        types.iter().any(|(t, capacities)| {
            let (true, Some(v)) = (is_standard(&t.name), t.vcpus) else {
                return true;
            };
            let v = f64::from(v);
            capacities.iter().any(|capacity| match *capacity {
                "on-demand" => self.on_demand.is_none_or(|q| self.used_on_demand + v <= q),
                "spot" => self.spot.is_none_or(|q| self.used_spot + v <= q),
                _ => true,
            })
        })
    }
}

/// Why one NodePool launches nothing more, if it does not.
#[derive(Debug, PartialEq)]
enum Stop {
    /// `resource` is used up: `used` of `limit`.
    Reached {
        resource: &'static str,
        used: String,
        limit: String,
    },
    /// `left` cpu is below the smallest allowed type's `smallest` vCPUs.
    BelowSmallest { left: f64, smallest: u32 },
    /// Every type it allows would take the account past a vCPU quota (`used` of `quota`, with
    /// the smallest type's `smallest` vCPUs): the spot one, or the on-demand one.
    Quota {
        used: f64,
        quota: f64,
        smallest: u32,
        spot: bool,
    },
}

fn text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn stop_of(ctx: &Context, pool: &NodePool, quotas: Option<&Quotas>) -> Option<Stop> {
    let used = |resource: &str| pool.status.as_ref().and_then(|s| s.resources.get(resource));
    // `limits.nodes` stops a NodePool at its count from Karpenter 1.11 (kubernetes-sigs/karpenter
    // #2526, `scheduler.go` "node limits have been exhausted"); before, no instance type has a
    // `nodes` capacity, so `filterByRemainingResources` drops them all only once the count is past
    // the limit. An unknown version is judged as the older one.
    let nodes_stop_at_limit = ctx
        .version
        .as_ref()
        .is_ok_and(|v| *v >= crate::karpenter_versions::release(NODE_LIMITS_ENFORCED));
    for resource in ["cpu", "memory", "nodes"] {
        let Some(limit) = pool.spec.limits.get(resource) else {
            continue;
        };
        let (Some(l), Some(u)) = (quantity(limit), used(resource).and_then(quantity)) else {
            continue;
        };
        let reached = if resource == "nodes" && !nodes_stop_at_limit {
            u > l
        } else {
            u >= l
        };
        if reached {
            return Some(Stop::Reached {
                resource,
                used: used(resource).map(text).unwrap_or_default(),
                limit: text(limit),
            });
        }
    }
    let allowed = allowed(ctx, pool)?;
    let smallest = allowed.smallest_vcpus();
    let types = allowed.types();
    let cpu_left = pool
        .spec
        .limits
        .get("cpu")
        .and_then(quantity)
        .and_then(|limit| {
            // No status yet: Karpenter counts nothing used.
            Some(limit - used("cpu").map_or(Some(0.0), quantity)?)
        });
    if let (Some(left), Some(smallest)) = (cpu_left, smallest)
        && left < f64::from(smallest)
    {
        return Some(Stop::BelowSmallest { left, smallest });
    }
    let quotas = quotas?;
    if quotas.admits_any(&types) {
        return None;
    }
    // Every type is standard and no capacity type fits: name the on-demand quota when the
    // NodePool allows on-demand, else spot.
    let on_demand = types.iter().any(|(_, c)| c.contains(&"on-demand"));
    let (used, quota) = if on_demand {
        (quotas.used_on_demand, quotas.on_demand?)
    } else {
        (quotas.used_spot, quotas.spot?)
    };
    Some(Stop::Quota {
        used,
        quota,
        smallest: smallest?,
        spot: !on_demand,
    })
}

fn describe(name: &str, stop: &Stop) -> String {
    match stop {
        Stop::Reached {
            resource,
            used,
            limit,
        } if *resource == "nodes" => {
            format!("NodePool {name} has {used} nodes, its limit is {limit}")
        }
        Stop::Reached {
            resource,
            used,
            limit,
        } => format!("NodePool {name} has used {used} of its {resource} limit {limit}"),
        Stop::BelowSmallest { left, smallest } => {
            // Millicores, as Kubernetes counts cpu: 0.1 left, not 0.09999999999999998.
            let left = format!("{:.3}", left.max(0.0));
            let left = left.trim_end_matches('0').trim_end_matches('.');
            format!(
                "NodePool {name} has {left} cpu left under its limits, less than the {smallest} \
                 vCPUs of the smallest instance type it allows"
            )
        }
        Stop::Quota {
            used,
            quota,
            smallest,
            spot,
        } => {
            let (which, code) = if *spot {
                ("standard spot", "L-34B43A08")
            } else {
                ("on-demand standard", "L-1216C47A")
            };
            format!(
                "NodePool {name} allows only standard instance types, the smallest of {smallest} \
                 vCPUs, and this cluster's own instances already run {used} of the account's \
                 {quota} vCPU quota for {which} instances in this region (Service Quotas {code}; \
                 {used} + {smallest} > {quota}), so EC2 refuses each launch"
            )
        }
    }
}

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::LimitsLeaveRoom, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let check = Check::new(ConditionType::LimitsLeaveRoom, "node-pool-limits");
    let (mut c, pools) = match check.node_pools(&ctx.facts.cluster.node_pools, Reason::NodePoolsHaveRoom) {
        Ok(found) => found,
        Err(outcome) => return outcome,
    };
    let quotas = Quotas::of(ctx);
    warn_quotas_nearly_used(ctx, &mut c, quotas.as_ref());
    let stopped: Vec<(&str, Stop)> = pools
        .iter()
        .filter_map(|p| {
            let name = p.metadata.name.as_deref().unwrap_or_default();
            stop_of(ctx, p, quotas.as_ref()).map(|s| (name, s))
        })
        .collect();
    if stopped.is_empty() {
        let limited = pools.iter().filter(|p| !p.spec.limits.is_empty()).count();
        let ok = match limited {
            0 => "No NodePool of this EC2NodeClass sets spec.limits.".to_owned(),
            n => format!("Each of the {n} NodePools with spec.limits has room for another node."),
        };
        return c.finish(Reason::NodePoolsHaveRoom, ok);
    }
    let all_stopped = stopped.len() == pools.len();
    let coming = claims_coming_up(ctx, &stopped);
    let templates: Vec<NodeClaimTemplate> =
        pools.iter().map(|p| NodeClaimTemplate::of(p)).collect();
    let Waiting {
        waiting,
        blocking,
        not_yet,
        coming_up,
    } = waiting_pods(ctx, &templates, &stopped, &coming);
    match waiting {
        Ok(waiting) if !waiting.is_empty() => {
            fail_blocked(ctx, &mut c, &stopped, &waiting, &blocking);
        }
        Err(why_unknown) => c.unknown(why_unknown),
        _ => warn_stopped(ctx, &mut c, &stopped, &not_yet, coming_up.as_deref()),
    }
    let ok = true_message(ctx, pools.len(), stopped.len(), all_stopped);
    c.finish(Reason::NodePoolsHaveRoom, ok)
}

/// Warns of each vCPU quota (on-demand, spot) this cluster's own instances have used 90% of.
fn warn_quotas_nearly_used(ctx: &Context, c: &mut Check, quotas: Option<&Quotas>) {
    if let Some(q) = quotas {
        for (used, quota, which) in [
            (q.used_on_demand, q.on_demand, "on-demand"),
            (q.used_spot, q.spot, "spot"),
        ] {
            if let Some(quota) = quota
                && quota > 0.0
                && used >= 0.9 * quota
            {
                c.warn(
                    Warning::VcpuQuotaNearlyUsed,
                    format!(
                        "This cluster's own {which} standard instances run {used} of the \
                         account's {quota} vCPU quota in this region."
                    ),
                    vec![ctx.node_class_subject()],
                );
            }
        }
    }
}

/// The class and the first few of the named NodePools, as a finding's subjects.
fn pool_subjects(ctx: &Context, names: &[&str]) -> Vec<SubjectRef> {
    let mut subjects = vec![ctx.node_class_subject()];
    subjects.extend(
        names
            .iter()
            .take(5)
            .map(|n| SubjectRef::new("NodePool", *n)),
    );
    subjects
}

/// False for the Pods waiting on the stopped NodePools, with the reason of the first kind of
/// stop among those blocking them: limits reached, below the smallest type, then quota.
fn fail_blocked(
    ctx: &Context,
    c: &mut Check,
    stopped: &[(&str, Stop)],
    waiting: &[String],
    blocking: &[&str],
) {
    let blocked: Vec<&(&str, Stop)> = stopped
        .iter()
        .filter(|(n, _)| blocking.contains(n))
        .collect();
    let reason = if blocked
        .iter()
        .any(|(_, s)| matches!(s, Stop::Reached { .. }))
    {
        Reason::NodePoolLimitsReached
    } else if blocked
        .iter()
        .any(|(_, s)| matches!(s, Stop::BelowSmallest { .. }))
    {
        Reason::NodePoolLimitsBelowSmallestInstance
    } else {
        Reason::VcpuQuotaExhausted
    };
    let why: Vec<String> = blocked.iter().map(|(n, s)| describe(n, s)).collect();
    c.fail(
        reason,
        format!(
            "Pending Pod(s) {} can only go to this EC2NodeClass, and only to NodePool(s) \
             {}, but {}, so Karpenter launches nothing for them. Raise the limits (or \
             request a quota increase) or add a NodePool with room that they fit.",
            crate::wording::list_bounded(waiting, 3),
            crate::wording::list_bounded(blocking, 3),
            crate::wording::list_bounded(&why, 3)
        ),
        pool_subjects(ctx, blocking),
    );
}

/// A warning for the stopped NodePools no Pod waits on, naming the pending Pods not counted yet
/// and why.
fn warn_stopped(
    ctx: &Context,
    c: &mut Check,
    stopped: &[(&str, Stop)],
    not_yet: &[String],
    coming_up: Option<&str>,
) {
    let names: Vec<&str> = stopped.iter().map(|(n, _)| *n).collect();
    let why: Vec<String> = stopped.iter().map(|(n, s)| describe(n, s)).collect();
    let pending = if not_yet.is_empty() {
        String::new()
    } else {
        let because = match coming_up {
            Some(why) => why.to_owned(),
            None => format!(
                "they have waited less than {} or are nominated to a node",
                crate::wording::human(ctx.settings.waiting_on_limits_after)
            ),
        };
        format!(
            " Pending Pod(s) {} are not counted as waiting on the limits yet: {because}.",
            crate::wording::list_bounded(not_yet, 3)
        )
    };
    c.warn(
        Warning::NodePoolAtLimits,
        format!(
            "{}; it launches nothing more until the limits are raised or capacity is \
             freed.{pending}",
            crate::wording::list_bounded(&why, 3)
        ),
        pool_subjects(ctx, &names),
    );
}

/// The True message when some NodePool is stopped but no Pod waits on it.
fn true_message(ctx: &Context, pools: usize, stopped: usize, all_stopped: bool) -> String {
    if all_stopped {
        format!(
            "Every NodePool of this EC2NodeClass is at its limits (see the warning), but no Pod \
             that only they can take has waited on them for {} with no NodeClaim of the class \
             still coming up.",
            crate::wording::human(ctx.settings.waiting_on_limits_after)
        )
    } else {
        format!(
            "{} of {} NodePools have room for another node (the others are at their limits, see \
             the warning), and no Pod that only the stopped ones can take has waited on them for \
             {}.",
            pools - stopped,
            pools,
            crate::wording::human(ctx.settings.waiting_on_limits_after)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_read_as_kubernetes_writes_them() {
        assert_eq!(quantity(&json!(16)), Some(16.0));
        assert_eq!(quantity(&json!("16")), Some(16.0));
        assert_eq!(quantity(&json!("500m")), Some(0.5));
        assert_eq!(
            quantity(&json!("64Gi")),
            Some(64.0 * 1024.0 * 1024.0 * 1024.0)
        );
        assert_eq!(quantity(&json!("1.5k")), Some(1500.0));
        assert_eq!(quantity(&json!("1e3")), Some(1000.0));
        assert_eq!(quantity(&json!("lots")), None);
        assert_eq!(quantity(&json!(null)), None);
    }

    #[test]
    fn cpu_left_reads_in_millicores() {
        let stop = Stop::BelowSmallest {
            left: 1.0 - 0.9,
            smallest: 2,
        };
        assert!(describe("p", &stop).contains("has 0.1 cpu left"));
        let none = Stop::BelowSmallest {
            left: 0.0,
            smallest: 2,
        };
        assert!(describe("p", &none).contains("has 0 cpu left"));
    }
}

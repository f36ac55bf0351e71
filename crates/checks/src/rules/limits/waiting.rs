//! Which pending Pods `LimitsLeaveRoom` counts as waiting on stopped NodePools, and why the
//! others are not counted yet: a NodeClaim of the class that may still be room for them. Pure: no
//! IO.

use super::Stop;
use crate::facts::{ClaimCondition, NodeClaimFacts, Observed};
use crate::plan::Context;
use crate::pod_fit::NodeClaimTemplate;
use crate::verdict::Why;
use karpenter_health_api::ConditionStatus;

/// A NodeClaim of the class that may still be room for a Pod its NodePool may take, and why;
/// `pool` is `None` when any Pod's (the NodeClaims are not read, or it names no NodePool).
pub(super) struct ComingUp<'a> {
    pool: Option<&'a str>,
    why: String,
}

/// The NodeClaims that may still be room for a waiting Pod: one still registering (its capacity
/// already counts against the limits), one registered and not initialized (Karpenter schedules
/// Pods onto in-flight and uninitialized NodeClaims before it launches, kubernetes-sigs/karpenter
/// `pkg/controllers/provisioning/scheduling/scheduler.go`, so it launches nothing for them), and
/// one that became ready to run Pods (the later of `Registered` and `Initialized`) so recently
/// that the scheduler may not have tried the Pod on it since: it tries a Pod again when a Node
/// changes in a way that may fit it, and otherwise once the Pod has sat 5 minutes since its last
/// attempt, checked every 30 s (kubernetes/kubernetes `pkg/scheduler/backend/queue/
/// scheduling_queue.go`, `flushUnschedulablePodsLeftover`), `Settings::scheduler_retries_within`.
/// A time that cannot be read counts as recent. Unknown NodeClaims leave it open too. A NodeClaim
/// not launched yet of a NodePool a vCPU quota stops is none: EC2 refuses its launch, and
/// Karpenter deletes it on the insufficient-capacity error and tries again minutes later
/// (kubernetes-sigs/karpenter `pkg/controllers/nodeclaim/lifecycle/launch.go`), which would
/// otherwise flip the verdict each time.
pub(super) fn claims_coming_up<'c>(ctx: &'c Context, stopped: &[(&str, Stop)]) -> Vec<ComingUp<'c>> {
    let quota_stopped = |pool: Option<&str>| {
        stopped
            .iter()
            .any(|(name, stop)| Some(*name) == pool && matches!(stop, Stop::Quota { .. }))
    };
    let is_true = |c: Option<&ClaimCondition>| c.is_some_and(|c| c.status == ConditionStatus::True);
    let retries = ctx.settings.scheduler_retries_within;
    let coming_up = |c: &NodeClaimFacts| -> Option<String> {
        if !is_true(c.registered.as_ref()) {
            return (is_true(c.launched.as_ref()) || !quota_stopped(c.node_pool.as_deref()))
                .then(|| "is still registering".to_owned());
        }
        if c.initialized.is_some_and(|i| i.status != ConditionStatus::True) {
            return Some("is registered and not initialized yet".to_owned());
        }
        let ready = [c.registered, c.initialized]
            .iter()
            .flatten()
            .map(|cond| cond.last_transition)
            .try_fold(None, |latest: Option<jiff::Timestamp>, t| Some(latest.max(Some(t?))));
        let age = ready.flatten().map(|t| ctx.age(t));
        age.is_none_or(|age| age < retries).then(|| match age {
            Some(age) => format!(
                "became ready {} ago, and the scheduler may take up to {} to try a waiting Pod on it",
                crate::wording::human(age),
                crate::wording::human(retries)
            ),
            None => "is ready since a time that could not be read".to_owned(),
        })
    };
    match &ctx.facts.cluster.node_claims {
        Observed::Found(claims) => {
            let mut coming: Vec<ComingUp> = claims
                .iter()
                .filter(|c| !c.deleting)
                .filter_map(|c| {
                    coming_up(c).map(|why| ComingUp {
                        pool: c.node_pool.as_deref(),
                        why: format!("NodeClaim {} {why}", c.name),
                    })
                })
                .collect();
            coming.sort_by(|a, b| a.why.cmp(&b.why));
            coming
        }
        Observed::Absent => Vec::new(),
        Observed::Unknown(_) => vec![ComingUp {
            pool: None,
            why: "the NodeClaims are not read".to_owned(),
        }],
    }
}

/// The pending Pods only stopped NodePools of the class may take, split into those waiting on
/// the limits and those not (yet) counted, with the stopped NodePools that block them.
pub(super) struct Waiting<'a> {
    /// The Pods waiting on the limits, or why pending Pods are not known.
    pub(super) waiting: Result<Vec<String>, Why>,
    /// The stopped NodePools that block a waiting Pod.
    pub(super) blocking: Vec<&'a str>,
    /// The Pods held by stopped NodePools that are not counted as waiting yet.
    pub(super) not_yet: Vec<String>,
    /// The first NodeClaim that keeps a Pod from counting (see [`claims_coming_up`]).
    pub(super) coming_up: Option<String>,
}

/// Which pending Pods wait on the stopped NodePools: every NodePool of the class that may take
/// one (its taints tolerated, its requirements met, `crate::pod_fit`) is stopped, it has waited
/// long enough, is not nominated, and no NodeClaim of a NodePool that may take it is coming up.
pub(super) fn waiting_pods<'a>(
    ctx: &Context,
    templates: &[NodeClaimTemplate<'a>],
    stopped: &[(&str, Stop)],
    coming: &[ComingUp],
) -> Waiting<'a> {
    let is_stopped = |pool: &str| stopped.iter().any(|(n, _)| *n == pool);
    let mut blocking: Vec<&str> = Vec::new();
    let mut not_yet: Vec<String> = Vec::new();
    let mut coming_up: Option<String> = None;
    let waiting: Result<Vec<String>, Why> = match &ctx.facts.cluster.pending_pods {
        Observed::Found(pods) => {
            let mut names: Vec<String> = Vec::new();
            let rules = ctx.controller_label_rules();
            for p in pods
                .iter()
                .filter(|p| p.only_this_class)
                .filter(|p| !crate::pod_fit::refused_before_scheduling(p, &rules))
            {
                let name = format!("{}/{}", p.namespace, p.name);
                let Some(its) = crate::pod_fit::held_by(templates, p, is_stopped) else {
                    continue;
                };
                let long = p
                    .unschedulable_since
                    .is_some_and(|t| ctx.age(t) >= ctx.settings.waiting_on_limits_after);
                let room = coming
                    .iter()
                    .find(|c| c.pool.is_none_or(|pool| its.contains(&pool)));
                if long && !p.nominated && room.is_none() {
                    names.push(name);
                    blocking.extend(its);
                } else {
                    if coming_up.is_none() {
                        coming_up = room.map(|c| c.why.clone());
                    }
                    not_yet.push(name);
                }
            }
            names.sort();
            names.dedup();
            not_yet.sort();
            not_yet.dedup();
            blocking.sort();
            blocking.dedup();
            Ok(names)
        }
        Observed::Absent => Ok(Vec::new()),
        Observed::Unknown(u) => Err(Why::unobserved("Pending Pods", u)),
    };
    Waiting {
        waiting,
        blocking,
        not_yet,
        coming_up,
    }
}

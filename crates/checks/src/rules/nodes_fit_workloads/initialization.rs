//! Registered nodes that never finish initializing. Karpenter marks a NodeClaim `Initialized`
//! once its Node is Ready, has no startup or known ephemeral taint left and has every requested
//! resource allocatable, and until then says on the condition what it waits for
//! (kubernetes-sigs/karpenter `pkg/controllers/nodeclaim/lifecycle/initialization.go`). It sets
//! no deadline on that: its liveness check ends at registration (`liveness.go`), and the
//! scheduler counts a node that is not initialized yet as room for the Pods it launched it for,
//! its startup taints hidden (`pkg/controllers/state/statenode.go` `Taints()`). So a node that
//! never initializes keeps those Pods pending and is never replaced. Pure: no IO.
//!
//! A False needs every node of the NodePool to fail: at least one registered past the threshold
//! and not initialized, and none initialized. A stuck node beside initialized ones is that
//! node's trouble, a warning. A node that waits for an extended resource to register (Karpenter's
//! reason `ResourceNotRegistered`: a GPU's device plugin, which NVIDIA's GPU Operator starts only
//! once it has built the driver on the node, which can take past the threshold) is certain only
//! after [`RESOURCE_WAIT_FACTOR`] times it, a warning until then.

use crate::clip;
use crate::facts::{NodeClaimFacts, Observed};
use crate::plan::Context;
use crate::verdict::{Check, MAX_SUBJECTS, Why};
use crate::warnings::Warning;
use crate::wording::{at, human, list_bounded};
use karpenter_health_api::karpenter::NodePool;
use karpenter_health_api::{ConditionStatus, Reason, SubjectRef};

/// How many thresholds a node waiting for an extended resource gets before it is certain.
const RESOURCE_WAIT_FACTOR: i32 = 3;

/// One NodeClaim registered longer than the threshold without initializing.
struct Stuck<'a> {
    name: &'a str,
    registered: jiff::Timestamp,
    /// What Karpenter's `Initialized` condition says it waits for.
    waits_for: &'a str,
    /// It has waited long enough for what it waits for to be certain not to come.
    certain: bool,
}

/// Whether Karpenter's `Initialized` reason says the node waits for an extended resource.
fn waits_for_a_resource(waits_for: &str) -> bool {
    waits_for.starts_with("ResourceNotRegistered")
}

/// Since when `claim` has been registered without initializing, if it has: from its `Registered`
/// condition's last transition. A NodeClaim without an `Initialized` condition, or being
/// deleted, is not judged.
fn registered_uninitialized(claim: &NodeClaimFacts) -> Option<jiff::Timestamp> {
    if claim.deleting {
        return None;
    }
    let registered = claim.registered?;
    let initialized = claim.initialized?;
    (registered.status == ConditionStatus::True && initialized.status != ConditionStatus::True)
        .then_some(registered.last_transition)?
}

fn is_initialized(claim: &NodeClaimFacts) -> bool {
    claim
        .initialized
        .is_some_and(|i| i.status == ConditionStatus::True)
}

/// Judges the initialization of the nodes of `pools`, recording failures, warnings and
/// unknowns on `c`; returns what the True message says of it (empty when it could not be
/// judged).
pub(super) fn judge(ctx: &Context, c: &mut Check, pools: &[&NodePool]) -> String {
    let claims = match &ctx.facts.cluster.node_claims {
        Observed::Found(claims) => claims.as_slice(),
        Observed::Absent => &[],
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved("The NodeClaims of this EC2NodeClass", u));
            return String::new();
        }
    };
    let timeout = ctx.settings.initialization_timeout;
    let mut stuck_pools = 0;
    for pool in pools {
        let name = pool.metadata.name.as_deref().unwrap_or_default();
        let of_pool: Vec<&NodeClaimFacts> = claims
            .iter()
            .filter(|claim| claim.node_pool.as_deref() == Some(name))
            .collect();
        let mut stuck: Vec<Stuck> = of_pool
            .iter()
            .filter_map(|claim| {
                let since = registered_uninitialized(claim)?;
                let waits_for = claim
                    .initialization_wait
                    .as_deref()
                    .unwrap_or("Karpenter gave no reason");
                let certain_after = if waits_for_a_resource(waits_for) {
                    timeout * RESOURCE_WAIT_FACTOR
                } else {
                    timeout
                };
                (ctx.age(since) > timeout).then(|| Stuck {
                    name: &claim.name,
                    registered: since,
                    waits_for,
                    certain: ctx.age(since) > certain_after,
                })
            })
            .collect();
        if stuck.is_empty() {
            continue;
        }
        stuck_pools += 1;
        stuck.sort_by(|a, b| (a.registered, a.name).cmp(&(b.registered, b.name)));
        let initialized = of_pool
            .iter()
            .filter(|claim| !claim.deleting && is_initialized(claim))
            .count();
        report(ctx, c, name, &stuck, initialized);
    }
    if stuck_pools == 0 {
        format!(
            "Every registered NodeClaim of its NodePools initialized within {} (or is still \
             within it).",
            human(timeout)
        )
    } else {
        // Only warnings reach a True message: the False ones name the NodePools.
        "Some NodeClaims did not initialize while others of their NodePool did: see the warning."
            .to_owned()
    }
}

/// A False when no node of `pool` initialized, else a warning naming the stuck ones.
fn report(ctx: &Context, c: &mut Check, pool: &str, stuck: &[Stuck], initialized: usize) {
    let described: Vec<String> = stuck
        .iter()
        .map(|s| {
            format!(
                "{} (registered {}; Karpenter: {})",
                clip(s.name, 128),
                at(s.registered),
                s.waits_for
            )
        })
        .collect();
    let mut subjects = vec![ctx.node_class_subject(), SubjectRef::new("NodePool", pool)];
    subjects.extend(
        stuck
            .iter()
            .take(MAX_SUBJECTS - 2)
            .map(|s| SubjectRef::new("NodeClaim", s.name)),
    );
    let timeout = human(ctx.settings.initialization_timeout);
    if initialized == 0 && stuck.iter().all(|s| s.certain) {
        c.fail(
            Reason::NodesNotInitializing,
            format!(
                "NodePool {}: none of its nodes initialized; {} NodeClaim(s) registered more than \
                 {timeout} ago and still wait: {}. Karpenter sets no deadline on initialization: \
                 it keeps these nodes and counts them as room for the Pods it launched them for, \
                 which stay pending.",
                clip(pool, 128),
                stuck.len(),
                list_bounded(&described, 3)
            ),
            subjects,
        );
    } else if initialized == 0 {
        let longer = human(ctx.settings.initialization_timeout * RESOURCE_WAIT_FACTOR);
        c.warn(
            Warning::NodeNotInitializing,
            format!(
                "NodePool {}: none of its nodes initialized yet; {} NodeClaim(s) registered more \
                 than {timeout} ago and still wait: {}. A node waiting for an extended resource \
                 to register may still be building its device's driver (NVIDIA's GPU Operator \
                 starts the device plugin only after it), so this is judged at {longer}.",
                clip(pool, 128),
                stuck.len(),
                list_bounded(&described, 3)
            ),
            subjects,
        );
    } else {
        c.warn(
            Warning::NodeNotInitializing,
            format!(
                "NodePool {}: {} NodeClaim(s) registered more than {timeout} ago and did not \
                 initialize, while {initialized} of its nodes did: {}.",
                clip(pool, 128),
                stuck.len(),
                list_bounded(&described, 3)
            ),
            subjects,
        );
    }
}

//! `NodeClaimsRegistered`: launched NodeClaims of this EC2NodeClass register as nodes in time;
//! when they do not, the message names the likely cause from the other outcomes. Pure: no IO.
//!
//! A node that never joins shows `Launched=True`, `Registered=Unknown` (reason `NodeNotFound`)
//! on its NodeClaim (kubernetes-sigs/karpenter `pkg/apis/v1/nodeclaim_status.go`;
//! aws/karpenter-provider-aws #7469).

use crate::clip;
use crate::facts::NodeClaimFacts;
use crate::facts::Observed;
use crate::plan::Context;
use crate::verdict::{Check, MAX_SUBJECTS, Outcome, Rule, Why};
use crate::wording::{at, human, list_bounded};
use karpenter_health_api::karpenter::find_condition;
use karpenter_health_api::{ConditionStatus, ConditionType, Reason, SubjectRef};

/// Sub-conditions whose failure keeps a launched instance from joining, most likely first.
const LIKELY_CAUSES: &[ConditionType] = &[
    ConditionType::NodeRoleMapped,
    ConditionType::InstanceProfileReady,
    ConditionType::NodeRoleReady,
    ConditionType::SecurityGroupsReady,
    ConditionType::ClusterIdentityUnique,
];

/// Since when `claim` has been launched without registering, if it has: from its `Registered`
/// condition's last transition, the clock Karpenter's own liveness check uses (it deletes a
/// NodeClaim 15 minutes after it; kubernetes-sigs/karpenter
/// `pkg/controllers/nodeclaim/lifecycle/liveness.go`), else from `Launched`'s. A NodeClaim being
/// deleted is on its way out and waits for nothing.
fn waiting_since(claim: &NodeClaimFacts) -> Option<jiff::Timestamp> {
    if claim.deleting {
        return None;
    }
    let launched = claim.launched?;
    if launched.status != ConditionStatus::True {
        return None;
    }
    let registered = claim.registered;
    if registered.is_some_and(|r| r.status == ConditionStatus::True) {
        return None;
    }
    registered
        .and_then(|r| r.last_transition)
        .or(launched.last_transition)
        .or(claim.created)
}

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::after_earlier(ConditionType::NodeClaimsRegistered, check);

pub(crate) fn check(ctx: &Context, others: &[Outcome]) -> Outcome {
    let mut c = Check::new(
        ConditionType::NodeClaimsRegistered,
        "nodeclaim-registration",
    );
    let timeout = ctx.settings.registration_timeout;
    let claims = match &ctx.facts.cluster.node_claims {
        Observed::Found(claims) => claims.as_slice(),
        Observed::Absent => &[],
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved("The NodeClaims of this EC2NodeClass", u));
            return c.finish(Reason::NodeClaimsRegistering, String::new());
        }
    };
    let mut stuck: Vec<(&str, jiff::Timestamp)> = claims
        .iter()
        .filter_map(|claim| {
            let since = waiting_since(claim)?;
            (ctx.age(since) > timeout).then_some((claim.name.as_str(), since))
        })
        .collect();
    stuck.sort();
    stuck.dedup_by(|a, b| a.0 == b.0);

    fail_registration_unhealthy(ctx, &mut c, others);

    let launched = claims.len();
    if !stuck.is_empty() {
        let described: Vec<String> = stuck
            .iter()
            .map(|(name, since)| format!("{} (waiting since {})", clip(name, 128), at(*since)))
            .collect();
        let mut subjects = vec![ctx.node_class_subject()];
        subjects.extend(
            stuck
                .iter()
                .take(MAX_SUBJECTS - 1)
                .map(|(name, _)| SubjectRef::new("NodeClaim", *name)),
        );
        c.fail(
            Reason::NodeClaimsNotRegistering,
            format!(
                "{} NodeClaim(s) launched but did not register within {}: {}. {}",
                stuck.len(),
                human(timeout),
                list_bounded(&described, 5),
                likely_cause(others)
            ),
            subjects,
        );
    }
    c.finish(
        Reason::NodeClaimsRegistering,
        format!(
            "None of the {launched} NodeClaim(s) of this EC2NodeClass has waited more than {} to \
             register.",
            human(timeout)
        ),
    )
}

/// False for each NodePool Karpenter reports NodeRegistrationHealthy=False on: its evidence,
/// which outlives the NodeClaims it deleted for not registering.
fn fail_registration_unhealthy(ctx: &Context, c: &mut Check, others: &[Outcome]) {
    // Karpenter's own evidence, which outlives the NodeClaims it deleted for not registering.
    for pool in ctx.facts.cluster.node_pools.found().into_iter().flatten() {
        let unhealthy = pool
            .status
            .as_ref()
            .and_then(|s| find_condition(&s.conditions, "NodeRegistrationHealthy"))
            .filter(|c| ConditionStatus::parse(&c.status) == ConditionStatus::False);
        if let Some(condition) = unhealthy {
            let name = pool.metadata.name.as_deref().unwrap_or_default();
            let said = condition
                .message
                .as_deref()
                .filter(|m| !m.is_empty())
                .map(|m| format!(": {}", clip(m, 256)))
                .unwrap_or_default();
            c.fail(
                Reason::NodeClaimsNotRegistering,
                format!(
                    "Karpenter reports NodeRegistrationHealthy=False on NodePool {} ({}{said}): \
                     its recent nodes failed to register. {}",
                    clip(name, 128),
                    clip(condition.reason.as_deref().unwrap_or("no reason"), 64),
                    likely_cause(others)
                ),
                vec![ctx.node_class_subject(), SubjectRef::new("NodePool", name)],
            );
        }
    }
}

fn likely_cause(others: &[Outcome]) -> String {
    let with_status = |status: ConditionStatus| -> Vec<String> {
        LIKELY_CAUSES
            .iter()
            .filter_map(|ty| others.iter().find(|o| o.condition == *ty))
            .filter(|o| o.status == status)
            .map(|o| format!("{}={} ({})", o.condition, o.status, o.reason))
            .collect()
    };
    let failed = with_status(ConditionStatus::False);
    if !failed.is_empty() {
        return format!("Likely cause: {}.", failed.join(", "));
    }
    let unknown = with_status(ConditionStatus::Unknown);
    if !unknown.is_empty() {
        return format!(
            "No check found a cause; not yet ruled out: {}. Otherwise read the instance's console \
             output (kubelet \"Unauthorized\" points at the node role mapping).",
            unknown.join(", ")
        );
    }
    "No check found a cause; read the instance's console output or kubelet logs (\"Unauthorized\" \
     points at the node role mapping; timeouts at security groups or networking)."
        .to_owned()
}

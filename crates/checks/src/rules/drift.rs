//! `DriftCanBeReplaced`: drifted NodeClaims of this EC2NodeClass can be replaced. Karpenter
//! disrupts a drifted NodeClaim only while every disruption budget of its NodePool in force for
//! drift allows it (kubernetes-sigs/karpenter `pkg/controllers/disruption`, budgets take the most
//! restrictive value); a budget without a schedule is always in force, so `nodes: "0"` for drift
//! (or for every reason) holds its drifted NodeClaims for good (#1776). That is how Karpenter's
//! docs switch drift off (#1576), and such NodeClaims still expire (`expireAfter`, which budgets
//! do not hold: `pkg/controllers/nodeclaim/expiration/controller.go`): a decision, so a warning
//! naming each held NodeClaim, how long it has been drifted, its NodePool's budget and when it
//! expires; never False. Each drifted NodeClaim is judged against the NodePool that made it
//! (`karpenter.sh/nodepool`). NodeClaims stuck terminating without a `terminationGracePeriod`
//! of their own (Karpenter's drain deadline is the NodeClaim's, copied from its NodePool when it
//! was made) are a warning that names what holds each, from the Pods on its Node and their
//! PodDisruptionBudgets (`terminating.rs`; #1392, #2169): a warning, since the Pod or budget may
//! go at any time and launches do not fail. Pure: no IO.
//!
//! A budget with a schedule is judged only when its fires come at a fixed period and each
//! window lasts until the next (`@daily` for `24h`); any other schedule may open tonight and is
//! never judged, nor percentages above 0, nor NodeClaims drifted for less than [`DRIFTED_FOR`]
//! (Karpenter disrupts within minutes of drift when a budget allows).

use crate::facts::{NodeClaimFacts, NodeDrain, Observed};
use crate::plan::Context;
use crate::verdict::{Check, Outcome, Rule, Why};
use crate::warnings::Warning;
use jiff::SignedDuration;
use karpenter_health_api::karpenter::{Budget, NodePool};
use karpenter_health_api::{ConditionStatus, ConditionType, Reason, SubjectRef};

/// How long a NodeClaim must have been drifted before a blocking budget is blamed.
pub const DRIFTED_FOR: SignedDuration = SignedDuration::from_mins(30);
/// How recently Karpenter must have said a NodeClaim is blocked for it to be named (Karpenter
/// repeats the Event while the block lasts).
pub const BLOCKED_EVENT_RECENT: SignedDuration = SignedDuration::from_mins(30);

/// Whether `budget` stops every disruption for drift, always: in force at every instant (no
/// schedule, or one whose windows never leave a gap), drift among its reasons (all reasons when
/// it names none), and zero nodes (`0` or `0%`).
fn stops_drift(budget: &Budget) -> bool {
    let zero = budget
        .nodes
        .trim()
        .trim_end_matches('%')
        .parse::<u64>()
        .is_ok_and(|n| n == 0);
    let always = match (&budget.schedule, &budget.duration) {
        (None, _) => true,
        (Some(schedule), Some(duration)) => never_opens(schedule, duration),
        (Some(_), None) => false,
    };
    always && zero && (budget.reasons.is_empty() || budget.reasons.iter().any(|r| r == "Drifted"))
}

/// Whether a budget active for `duration` from each fire of `schedule` is in force at every
/// instant: each window lasts at least until the next fire. Judged only for schedules whose
/// fires come at a fixed longest gap (`longest_gap`); any other schedule is assumed to open.
fn never_opens(schedule: &str, duration: &str) -> bool {
    let (Some(gap), Some(duration)) = (
        longest_gap(schedule),
        crate::go::parse_duration(duration.trim()),
    ) else {
        return false;
    };
    duration >= gap
}

/// The longest time between two fires of a schedule in Karpenter's cron syntax (five fields,
/// UTC, or a `@` descriptor; kubernetes-sigs/karpenter `pkg/apis/v1/nodepool.go`, robfig/cron's
/// standard parser), for the shapes whose fires come at a fixed period: every minute, one
/// minute of every hour, one time of every day, of one weekday, of one day of the month (at most
/// the 28th, so every month has it: 31 days), of one day of one month (366 days). `None` for
/// every other shape (lists, ranges, steps, names of months): not judged.
fn longest_gap(schedule: &str) -> Option<SignedDuration> {
    const MINUTE: SignedDuration = SignedDuration::from_mins(1);
    const HOUR: SignedDuration = SignedDuration::from_hours(1);
    const DAY: SignedDuration = SignedDuration::from_hours(24);
    let expanded = match schedule.trim() {
        "@hourly" => "0 * * * *",
        "@daily" | "@midnight" => "0 0 * * *",
        "@weekly" => "0 0 * * 0",
        "@monthly" => "0 0 1 * *",
        "@yearly" | "@annually" => "0 0 1 1 *",
        other => other,
    };
    let fields: Vec<&str> = expanded.split_whitespace().collect();
    let &[minute, hour, dom, month, dow] = fields.as_slice() else {
        return None;
    };
    let one = |field: &str, max: u32| field.parse::<u32>().is_ok_and(|n| n <= max);
    let weekday = |field: &str| {
        one(field, 7)
            || ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
                .contains(&field.to_ascii_uppercase().as_str())
    };
    let day_of_month = |field: &str| field.parse::<u32>().is_ok_and(|n| (1..=28).contains(&n));
    match (minute, hour, dom, month, dow) {
        ("*", "*", "*", "*", "*") => Some(MINUTE),
        (m, "*", "*", "*", "*") if one(m, 59) => Some(HOUR),
        (m, h, "*", "*", "*") if one(m, 59) && one(h, 23) => Some(DAY),
        (m, h, "*", "*", d) if one(m, 59) && one(h, 23) && weekday(d) => Some(DAY * 7),
        (m, h, d, "*", "*") if one(m, 59) && one(h, 23) && day_of_month(d) => Some(DAY * 31),
        (m, h, d, mo, "*") if one(m, 59) && one(h, 23) && day_of_month(d) && one(mo, 12) => {
            Some(DAY * 366)
        }
        _ => None,
    }
}

/// The budget of `pool` that stops drift for good, if any (Karpenter's default of `10%` does not).
fn drift_stopper(pool: &NodePool) -> Option<&Budget> {
    pool.spec
        .disruption
        .as_ref()?
        .budgets
        .as_ref()?
        .iter()
        .find(|b| stops_drift(b))
}

/// What holds one stuck NodeClaim, in a clause.
fn what_holds_claim(
    drain: &Observed<NodeDrain>,
    karpenter: Option<&semver::Version>,
    now: jiff::Timestamp,
) -> String {
    let drain = match drain {
        Observed::Found(drain) => drain,
        Observed::Absent => return "its Node's Pods were not found".to_owned(),
        Observed::Unknown(u) => return format!("its Node's Pods could not be read ({u})"),
    };
    let Some(node) = drain.node.as_deref() else {
        return "it has no Node, so no Pod holds it".to_owned();
    };
    let holding = crate::pod_drain::what_holds(drain, karpenter, now);
    let mut parts = Vec::new();
    if !holding.blockers.is_empty() {
        parts.push(crate::wording::list_bounded(&holding.blockers, 3));
    }
    if !holding.waiting.is_empty() {
        parts.push(format!(
            "Pod(s) {} on Node {node} wait to be evicted, and no PodDisruptionBudget refuses \
             their eviction (Karpenter's FailedDraining Events on the Node say more)",
            crate::wording::list_bounded(&holding.waiting, 3)
        ));
    }
    if let Some(undecided) = holding.undecided {
        parts.push(format!("not judged: {undecided}"));
    }
    if parts.is_empty() {
        return format!(
            "no Pod on Node {node} holds its drain (Karpenter may be waiting on volume \
             detachment or the instance's termination)"
        );
    }
    parts.join("; ")
}

/// The reasons a budget covers, in words.
fn reasons_of(budget: &Budget) -> String {
    if budget.reasons.is_empty() {
        "every reason".to_owned()
    } else {
        budget.reasons.join(", ")
    }
}

/// When a budget is in force, in words.
fn window_of(budget: &Budget) -> String {
    match (&budget.schedule, &budget.duration) {
        (Some(s), Some(d)) => format!("schedule {s} for {d}, which never leaves a gap"),
        _ => "no schedule".to_owned(),
    }
}

/// When a drifted NodeClaim expires: its creation plus its `spec.expireAfter`, which
/// Karpenter's expiration controller acts on whatever the budgets say
/// (kubernetes-sigs/karpenter `pkg/controllers/nodeclaim/expiration/controller.go`).
fn expiry(claim: &NodeClaimFacts, now: jiff::Timestamp) -> String {
    let after = claim.drift.as_ref().and_then(|d| d.expire_after.as_deref());
    match after.map(str::trim) {
        Some("Never") => "never expires (expireAfter: Never)".to_owned(),
        Some(after) => match (crate::go::parse_duration(after), claim.created) {
            (Some(after), Some(created)) => match created.checked_add(after) {
                Ok(at) if at > now => format!("expires at {}", crate::wording::at(at)),
                Ok(_) => "past its expiry, so Karpenter is replacing it".to_owned(),
                Err(_) => format!("expires {after} after creation"),
            },
            _ => format!("expireAfter {after}"),
        },
        // No expireAfter: Karpenter's expiration controller never deletes it.
        None => "never expires (no expireAfter)".to_owned(),
    }
}

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::DriftCanBeReplaced, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::DriftCanBeReplaced, "drift-budgets");
    let claims = match &ctx.facts.cluster.node_claims {
        Observed::Found(claims) => claims,
        Observed::Absent => {
            return c.finish(
                Reason::DriftReplaceable,
                "No NodeClaim of this EC2NodeClass exists.",
            );
        }
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved("The NodeClaims of this EC2NodeClass", u));
            return c.finish(Reason::DriftReplaceable, "");
        }
    };
    let drifted = drifted_long(ctx, claims);
    let stuck = terminating_long(ctx, claims);
    if drifted.is_empty() && stuck.is_empty() {
        return c.finish(
            Reason::DriftReplaceable,
            format!(
                "No NodeClaim of this EC2NodeClass has been drifted for 30 minutes or \
                 terminating for {}.",
                crate::wording::human(ctx.settings.terminating_long_after)
            ),
        );
    }
    let pools = match &ctx.facts.cluster.node_pools {
        Observed::Found(pools) => pools,
        Observed::Absent => &Vec::new(),
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved("The NodePools of this EC2NodeClass", u));
            return c.finish(Reason::DriftReplaceable, "");
        }
    };
    // Each drifted NodeClaim is judged against the NodePool that made it: a budget that stops
    // drift for good is how Karpenter's docs switch drift off (kubernetes-sigs/karpenter
    // #1576), a decision, so a warning; the NodeClaim is still replaced when it expires.
    let held: Vec<(&NodeClaimFacts, &NodePool, &Budget)> = drifted
        .iter()
        .filter_map(|claim| {
            let name = claim.drift.as_ref()?.node_pool.as_deref()?;
            let pool = pools
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))?;
            drift_stopper(pool).map(|budget| (*claim, pool, budget))
        })
        .collect();
    if !held.is_empty() {
        warn_held_by_budget(ctx, &mut c, &held);
    }
    let named_blockers = warn_named_blockers(ctx, &mut c, &drifted, &held);
    if !stuck.is_empty() {
        warn_terminating_long(ctx, &mut c, &stuck);
    }
    let ok = true_message(drifted.len(), held.len(), named_blockers);
    c.finish(Reason::DriftReplaceable, ok)
}

/// The NodeClaims, not being deleted, that have been drifted for `DRIFTED_FOR` or longer.
fn drifted_long<'a>(ctx: &Context, claims: &'a [NodeClaimFacts]) -> Vec<&'a NodeClaimFacts> {
    claims
        .iter()
        .filter(|claim| !claim.deleting)
        .filter(|claim| {
            claim.drifted.is_some_and(|d| {
                d.status == ConditionStatus::True
                    && d.last_transition.is_some_and(|t| ctx.age(t) >= DRIFTED_FOR)
            })
        })
        .collect()
}

/// The NodeClaims terminating for `terminating_long_after` or longer with no deadline of their
/// own.
fn terminating_long<'a>(ctx: &Context, claims: &'a [NodeClaimFacts]) -> Vec<&'a NodeClaimFacts> {
    claims
        .iter()
        // A NodeClaim with a terminationGracePeriod of its own has a deadline: Karpenter
        // deletes its Pods then, whatever blocks them.
        .filter(|claim| {
            !claim.has_termination_grace_period
                && claim
                    .deleting_since
                    .is_some_and(|t| ctx.age(t) >= ctx.settings.terminating_long_after)
        })
        .collect()
}

/// A NodePool's name, empty when it has none.
fn pool_name(p: &NodePool) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// The class, the first few NodePools and NodeClaims, as a finding's subjects.
fn claim_subjects(
    ctx: &Context,
    claims: &[&NodeClaimFacts],
    pools: &[&NodePool],
) -> Vec<SubjectRef> {
    let mut s = vec![ctx.node_class_subject()];
    s.extend(
        pools
            .iter()
            .take(3)
            .map(|p| SubjectRef::new("NodePool", pool_name(p))),
    );
    s.extend(
        claims
            .iter()
            .take(5)
            .map(|c| SubjectRef::new("NodeClaim", &c.name)),
    );
    s.truncate(crate::verdict::MAX_SUBJECTS);
    s
}

/// Warns of the drifted NodeClaims a NodePool's budget holds for good, with when each expires.
fn warn_held_by_budget(
    ctx: &Context,
    c: &mut Check,
    held: &[(&NodeClaimFacts, &NodePool, &Budget)],
) {
    let mut lines: Vec<String> = held
        .iter()
        .map(|(claim, pool, budget)| {
            let since = claim
                .drifted
                .and_then(|d| d.last_transition)
                .map(|t| format!("drifted for {}", crate::wording::human(ctx.age(t))))
                .unwrap_or_else(|| "drifted".to_owned());
            format!(
                "{} ({since}, {}; NodePool {}'s budget nodes: {} for {}, {})",
                claim.name,
                expiry(claim, ctx.now),
                pool_name(pool),
                budget.nodes,
                reasons_of(budget),
                window_of(budget)
            )
        })
        .collect();
    lines.sort();
    let held_claims: Vec<&NodeClaimFacts> = held.iter().map(|(c, _, _)| *c).collect();
    let mut held_pools: Vec<&NodePool> = held.iter().map(|(_, p, _)| *p).collect();
    held_pools.sort_by_key(|p| p.metadata.name.clone());
    held_pools.dedup_by_key(|p| p.metadata.name.clone());
    c.warn(
        Warning::DriftHeldByBudget,
        format!(
            "Drifted NodeClaim(s) are held by their NodePool's disruption budget, which is \
             always in force and allows 0 disruptions for drift, the way drift is switched \
             off: {}. Karpenter replaces them only when they expire (expireAfter, which \
             budgets do not hold) or are deleted. If drift should roll them, raise that \
             budget's nodes, limit it to other reasons, or give it a schedule.",
            crate::wording::list_bounded(&lines, 5)
        ),
        claim_subjects(ctx, &held_claims, &held_pools),
    );
}

/// Warns of what else keeps drifted NodeClaims, as Karpenter's own recent DisruptionBlocked
/// Events name it; whether any was named.
fn warn_named_blockers(
    ctx: &Context,
    c: &mut Check,
    drifted: &[&NodeClaimFacts],
    held: &[(&NodeClaimFacts, &NodePool, &Budget)],
) -> bool {
    // What else keeps drifted NodeClaims, as Karpenter's own DisruptionBlocked Events name it
    // (a PodDisruptionBudget, a karpenter.sh/do-not-disrupt Pod): a warning, since the blocker
    // may leave at any time. Only Events Karpenter repeated lately count.
    let mut named_blockers = Vec::new();
    if let Observed::Found(events) = &ctx.facts.cluster.disruption_blocked {
        for claim in drifted {
            if held.iter().any(|(h, _, _)| h.name == claim.name) {
                continue;
            }
            if let Some(event) = events.get(&claim.name)
                && event
                    .last_seen
                    .is_some_and(|t| ctx.age(t) <= BLOCKED_EVENT_RECENT)
            {
                named_blockers.push(format!("{}: {}", claim.name, event.message));
            }
        }
    }
    named_blockers.sort();
    if !named_blockers.is_empty() {
        c.warn(
            Warning::DriftedNodeClaimBlocked,
            format!(
                "Drifted NodeClaim(s) have been waiting for 30 minutes or more, and Karpenter says \
                 why it does not disrupt them: {}.",
                crate::wording::list_bounded(&named_blockers, 3)
            ),
            claim_subjects(ctx, drifted, &[]),
        );
    }
    !named_blockers.is_empty()
}

/// Warns of the NodeClaims terminating long without a deadline, with what holds each.
fn warn_terminating_long(ctx: &Context, c: &mut Check, stuck: &[&NodeClaimFacts]) {
    let mut stuck = stuck.to_vec();
    stuck.sort_by(|a, b| a.name.cmp(&b.name));
    let karpenter = ctx.version.as_ref().ok();
    let held: Vec<String> = stuck
        .iter()
        .map(|claim| {
            let since = claim
                .deleting_since
                .map(crate::wording::at)
                .unwrap_or_default();
            let holds = ctx
                .facts
                .cluster
                .drains
                .get(&claim.name)
                .map(|drain| what_holds_claim(drain, karpenter, ctx.now));
            match holds {
                Some(holds) => format!("{} (since {since}): {holds}", claim.name),
                None => format!("{} (since {since})", claim.name),
            }
        })
        .collect();
    c.warn(
        Warning::NodeClaimTerminatingLong,
        format!(
            "NodeClaim(s) are still terminating without a terminationGracePeriod of their own \
             (their NodePool had none when they were made), so Karpenter waits for every Pod \
             to leave their Nodes: {}. Let the PodDisruptionBudget allow an eviction, or \
             remove the annotation or the Pod; set terminationGracePeriod on the NodePool so \
             the NodeClaims it makes next have a deadline.",
            crate::wording::list_bounded(&held, 5)
        ),
        claim_subjects(ctx, &stuck, &[]),
    );
}

/// The True message: how many drifted NodeClaims Karpenter replaces and how many a budget holds.
fn true_message(drifted: usize, held: usize, named_blockers: bool) -> String {
    let others = drifted - held;
    match (drifted, held) {
        (0, _) => "No NodeClaim of this EC2NodeClass has been drifted for 30 minutes (see the warning on terminating ones).".to_owned(),
        (n, 0) if named_blockers => format!("{n} drifted NodeClaim(s); no NodePool's budget stops drift for good (see the warning on what else holds them)."),
        (n, 0) => format!("{n} drifted NodeClaim(s); no NodePool's budget stops drift for good, so Karpenter replaces them as its budgets allow."),
        (_, h) if others == 0 => format!("{h} drifted NodeClaim(s), each held on purpose by its NodePool's budget until it expires (see the warning)."),
        (_, h) => format!("{others} drifted NodeClaim(s) replaced as their NodePools' budgets allow; {h} held on purpose by their NodePool's budget until they expire (see the warning)."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::budget;

    #[test]
    fn a_schedule_never_opens_only_when_each_window_lasts_until_the_next_fire() {
        for (schedule, duration) in [
            ("@daily", "24h"),
            ("0 0 * * *", "25h"),
            ("30 * * * *", "1h"),
            ("* * * * *", "1m"),
            ("@weekly", "168h"),
            ("0 3 * * MON", "170h"),
            ("0 0 1 * *", "744h"),
        ] {
            assert!(never_opens(schedule, duration), "{schedule} for {duration}");
        }
        for (schedule, duration) in [
            // Opens for an hour every night.
            ("@daily", "23h"),
            ("0 22 * * *", "8h"),
            // Not judged: lists, ranges, steps, the 31st (not in every month).
            ("0 9 * * mon-fri", "9000h"),
            ("*/5 * * * *", "9000h"),
            ("0 0,12 * * *", "9000h"),
            ("0 0 31 * *", "9000h"),
            ("@every 1h", "9000h"),
            ("0 0 * * *", "not a duration"),
        ] {
            assert!(
                !never_opens(schedule, duration),
                "{schedule} for {duration}"
            );
        }
    }

    #[test]
    fn only_a_zero_budget_for_drift_without_a_schedule_stops_it_for_good() {
        assert!(stops_drift(&budget("0", &[], None)));
        assert!(stops_drift(&budget("0%", &["Drifted"], None)));
        assert!(!stops_drift(&budget(
            "0",
            &["Underutilized", "Empty"],
            None
        )));
        // A budget that opens tonight.
        assert!(!stops_drift(&budget("0", &[], Some("0 9 * * mon-fri"))));
        assert!(!stops_drift(&budget("10%", &[], None)));
        assert!(!stops_drift(&budget("1", &["Drifted"], None)));
    }
}

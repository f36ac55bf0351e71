//! `CapacityReservationsUsable`: the capacity reservations this EC2NodeClass selects can take its
//! launches. Karpenter's own `CapacityReservationsReady` is True even when the selector matches
//! nothing (aws/karpenter-provider-aws `pkg/controllers/nodeclass/capacityreservation.go`: no
//! reservation found is `SetTrue`), and Karpenter uses reservations only with its
//! `ReservedCapacity` feature gate on (alpha and off in 1.3 to 1.5, beta and on from 1.6; the
//! chart's `settings.featureGates.reservedCapacity` writes `FEATURE_GATES`). Pure: no IO.
//!
//! Judged from Karpenter's answer (`status.capacityReservations`, the active reservations its
//! `DescribeCapacityReservations` found for the selector, once its `CapacityReservationsReady`
//! is True for the current generation) and the class's subnets' zones (EC2). A selection that
//! cannot be used is False only when every NodePool of the class allows nothing but reserved
//! capacity, so nothing can launch; otherwise Karpenter launches on-demand or spot instead and it
//! is a warning (#8514).
//!
//! With the gate on, every Karpenter launch asks EC2 for no capacity reservation unless it
//! targets one (`CapacityReservationPreference: none`, `pkg/providers/launchtemplate/types.go`),
//! so the account's *open* reservations, which on-demand launches used to fall into, stay idle
//! (#8176, #9001, #9518). Open reservations in the class's zones, of a type a NodePool may launch
//! on demand and not selected by the class, are a warning, read with EC2
//! `DescribeCapacityReservations`; never False, nodes still launch.

use crate::facts::Observed;
use crate::plan::Context;
use crate::plan::capacity::{RESERVED_CAPACITY_GATE, reserved_capacity_enabled, reserved_only};
use crate::verdict::{Check, Outcome, Rule, Why};
use crate::warnings::Warning;
use karpenter_health_api::karpenter::{NodePool, ResolvedCapacityReservation};
use karpenter_health_api::{ConditionStatus, ConditionType, Reason, SubjectRef};
use std::collections::BTreeSet;

/// Karpenter's condition on the class for the reservation selector.
const KARPENTER_CONDITION: &str = "CapacityReservationsReady";

fn label(r: &ResolvedCapacityReservation) -> String {
    format!("{} ({} in {})", r.id, r.instance_type, r.availability_zone)
}

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::CapacityReservationsUsable, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(
        ConditionType::CapacityReservationsUsable,
        "capacity-reservations",
    );
    let class = &ctx.facts.cluster.node_class;
    let selects = !class.spec.capacity_reservation_selector_terms.is_empty();
    let pools = match &ctx.facts.cluster.node_pools {
        Observed::Found(pools) => pools.as_slice(),
        Observed::Absent => &[],
        Observed::Unknown(u) if selects => {
            c.unknown(Why::unobserved("The NodePools of this EC2NodeClass", u));
            return c.finish(Reason::CapacityReservationsSelected, "");
        }
        Observed::Unknown(_) => &[],
    };
    let reserved = ReservedPools::of(pools);
    if !selects {
        return finish_unselected(ctx, c, &reserved);
    }

    // While a NodePool may fall back to on-demand or spot, nothing here can be False: what is
    // not known then leaves the warnings unsaid rather than the condition Unknown.
    let fallback = "A NodePool of this EC2NodeClass may launch on-demand or spot capacity.";
    let enabled = match reserved_capacity_enabled(ctx) {
        Ok(enabled) => enabled,
        Err(why) if reserved.nothing_else => {
            c.unknown(why);
            return c.finish(Reason::CapacityReservationsSelected, "");
        }
        Err(_) => return c.finish(Reason::CapacityReservationsSelected, fallback),
    };
    if !enabled {
        return finish_gate_off(ctx, c, &reserved);
    }

    // Karpenter's answer for the current generation.
    let generation = class.metadata.generation;
    let resolved = ctx.karpenter_condition(KARPENTER_CONDITION).filter(|k| {
        ConditionStatus::parse(&k.status) == ConditionStatus::True
            && (k.observed_generation.is_none() || k.observed_generation == generation)
    });
    if resolved.is_none() {
        if !reserved.nothing_else {
            return c.finish(Reason::CapacityReservationsSelected, fallback);
        }
        c.unknown(Why::new(
            Reason::NotObserved,
            format!(
                "Karpenter has not reported {KARPENTER_CONDITION}=True for this generation of the \
                 EC2NodeClass, so which reservations its selector matches is not known yet."
            ),
        ));
        return c.finish(Reason::CapacityReservationsSelected, "");
    }
    let reservations: &[ResolvedCapacityReservation] = class
        .status
        .as_ref()
        .map_or(&[], |s| &s.capacity_reservations);
    if reservations.is_empty() {
        return finish_matches_nothing(ctx, c, &reserved);
    }
    judge_reservations(ctx, c, &reserved, reservations)
}

/// The class's NodePools that allow only reserved capacity, by name, and whether they are all
/// of its NodePools.
struct ReservedPools {
    names: Vec<String>,
    nothing_else: bool,
}

impl ReservedPools {
    /// Which of `pools` allow only reserved capacity.
    fn of(pools: &[NodePool]) -> Self {
        let mut names: Vec<String> = pools
            .iter()
            .filter(|p| reserved_only(p))
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        names.sort();
        let nothing_else = !pools.is_empty() && names.len() == pools.len();
        Self {
            names,
            nothing_else,
        }
    }

    /// The class and the first few reserved-only NodePools, as a finding's subjects.
    fn subjects(&self, ctx: &Context) -> Vec<SubjectRef> {
        let mut s = vec![ctx.node_class_subject()];
        s.extend(
            self.names
                .iter()
                .take(3)
                .map(|p| SubjectRef::new("NodePool", p)),
        );
        s
    }

    /// The first few reserved-only NodePools, for a message.
    fn listed(&self) -> String {
        crate::wording::list_bounded(&self.names, 3)
    }
}

/// A class without capacityReservationSelectorTerms: False when its NodePools allow only
/// reserved capacity, a warning when some do.
fn finish_unselected(ctx: &Context, mut c: Check, reserved: &ReservedPools) -> Outcome {
    // Karpenter offers reserved capacity only for the reservations in the class's status,
    // which a class without selector terms never has
    // (`pkg/providers/instancetype/offering/reserved_capacity_resolver.go`).
    let none = "This EC2NodeClass selects no capacity reservation \
                (capacityReservationSelectorTerms)";
    if reserved.nothing_else {
        c.fail(
            Reason::CapacityReservationsNotFound,
            format!(
                "{none}, and NodePool(s) {} allow only reserved capacity, which Karpenter \
                 offers only for the class's reservations, so it launches nothing for them. \
                 Select the reservations, or allow on-demand capacity.",
                reserved.listed()
            ),
            reserved.subjects(ctx),
        );
    } else if !reserved.names.is_empty() {
        c.warn(
            Warning::CapacityReservationSelectorMatchesNothing,
            format!(
                "{none}, but NodePool(s) {} allow only reserved capacity: Karpenter launches \
                 nothing from them (the class's other NodePools launch on-demand or spot).",
                reserved.listed()
            ),
            reserved.subjects(ctx),
        );
    }
    if let Ok(true) = reserved_capacity_enabled(ctx) {
        warn_open_reservations_skipped(ctx, &mut c, &BTreeSet::new());
    }
    let ok = if reserved.names.is_empty() {
        format!("{none}.")
    } else {
        format!("{none}; see the warning.")
    };
    c.finish(Reason::NoCapacityReservationsSelected, ok)
}

/// Reservations selected with the ReservedCapacity gate off: False when the NodePools allow only
/// reserved capacity, otherwise a warning that the selector is ignored.
fn finish_gate_off(ctx: &Context, mut c: Check, reserved: &ReservedPools) -> Outcome {
    if reserved.nothing_else {
        c.fail(
            Reason::ReservedCapacityDisabled,
            format!(
                "This EC2NodeClass selects capacity reservations and NodePool(s) {} allow only \
                 reserved capacity, but the Karpenter controller runs with its \
                 {RESERVED_CAPACITY_GATE} feature gate off, so it offers no reserved capacity \
                 and launches nothing for them. Turn the gate on \
                 (settings.featureGates.reservedCapacity) or allow on-demand.",
                reserved.listed()
            ),
            reserved.subjects(ctx),
        );
    } else {
        c.warn(
            Warning::CapacityReservationsIgnored,
            format!(
                "This EC2NodeClass selects capacity reservations, but the Karpenter controller \
                 runs with its {RESERVED_CAPACITY_GATE} feature gate off: it ignores the \
                 selector and launches on-demand or spot instances instead."
            ),
            vec![ctx.node_class_subject()],
        );
    }
    c.finish(
        Reason::CapacityReservationsSelected,
        "No NodePool of this EC2NodeClass needs reserved capacity.",
    )
}

/// Selector terms that match no active reservation: False when the NodePools allow only
/// reserved capacity, otherwise a warning.
fn finish_matches_nothing(ctx: &Context, mut c: Check, reserved: &ReservedPools) -> Outcome {
    if reserved.nothing_else {
        c.fail(
            Reason::CapacityReservationsNotFound,
            format!(
                "capacityReservationSelectorTerms match no active capacity reservation \
                 (Karpenter's status.capacityReservations is empty although its \
                 {KARPENTER_CONDITION} is True), and NodePool(s) {} allow only reserved \
                 capacity, so Karpenter launches nothing for them.",
                reserved.listed()
            ),
            reserved.subjects(ctx),
        );
    } else {
        c.warn(
            Warning::CapacityReservationSelectorMatchesNothing,
            "capacityReservationSelectorTerms match no active capacity reservation (Karpenter's \
             status.capacityReservations is empty although its CapacityReservationsReady is \
             True): Karpenter launches on-demand or spot instances instead.",
            vec![ctx.node_class_subject()],
        );
    }
    c.finish(
        Reason::CapacityReservationsSelected,
        "No NodePool of this EC2NodeClass needs reserved capacity.",
    )
}

/// The reservations Karpenter resolved: whether they lie in the class's subnets' zones, which
/// open reservations are skipped, and whether they are expiring.
fn judge_reservations(
    ctx: &Context,
    mut c: Check,
    reserved: &ReservedPools,
    reservations: &[ResolvedCapacityReservation],
) -> Outcome {
    let mut ok = vec![format!(
        "{} capacity reservation(s) selected",
        reservations.len()
    )];
    judge_zones(ctx, &mut c, reserved, reservations, &mut ok);
    let selected: BTreeSet<&str> = reservations.iter().map(|r| r.id.as_str()).collect();
    warn_open_reservations_skipped(ctx, &mut c, &selected);
    judge_expiring(ctx, &mut c, reserved, reservations);
    c.finish(
        Reason::CapacityReservationsSelected,
        format!("{}.", ok.join(", ")),
    )
}

/// Whether the reservations lie in zones the class has a subnet in: False when none does and
/// the NodePools allow only reserved capacity, a warning when some do not.
fn judge_zones(
    ctx: &Context,
    c: &mut Check,
    reserved: &ReservedPools,
    reservations: &[ResolvedCapacityReservation],
    ok: &mut Vec<String>,
) {
    match &ctx.facts.aws.subnets {
        Observed::Found(subnets) => {
            let zones: BTreeSet<&str> = subnets.iter().map(|s| s.zone.as_str()).collect();
            let outside: Vec<String> = reservations
                .iter()
                .filter(|r| !zones.contains(r.availability_zone.as_str()))
                .map(label)
                .collect();
            let zones_text = zones.iter().copied().collect::<Vec<_>>().join(", ");
            if outside.len() == reservations.len() && reserved.nothing_else {
                c.fail(
                    Reason::CapacityReservationsOnlyInZonesWithoutSubnets,
                    format!(
                        "Every capacity reservation this EC2NodeClass selects is in a zone it has \
                         no subnet in ({}; its subnets are in {zones_text}), and NodePool(s) {} \
                         allow only reserved capacity, so Karpenter launches nothing for them.",
                        crate::wording::list_bounded(&outside, 3),
                        reserved.listed()
                    ),
                    reserved.subjects(ctx),
                );
            } else if !outside.is_empty() {
                c.warn(
                    Warning::CapacityReservationInZoneWithoutSubnet,
                    format!(
                        "Capacity reservation(s) {} are in zones this EC2NodeClass has no subnet in \
                         (its subnets are in {zones_text}): Karpenter cannot launch into them from \
                         this class.",
                        crate::wording::list_bounded(&outside, 3)
                    ),
                    vec![ctx.node_class_subject()],
                );
            } else {
                ok.push("each in a zone the class has a subnet in".to_owned());
            }
        }
        Observed::Unknown(u) if reserved.nothing_else => {
            c.unknown(Why::unobserved("The subnets of this EC2NodeClass", u));
        }
        _ => ok.push("their zones not compared with the subnets' (not read)".to_owned()),
    }
}

/// Expiring capacity blocks: False when every selected reservation is one and the NodePools
/// allow only reserved capacity, otherwise a warning.
fn judge_expiring(
    ctx: &Context,
    c: &mut Check,
    reserved: &ReservedPools,
    reservations: &[ResolvedCapacityReservation],
) {
    let expiring: Vec<String> = reservations
        .iter()
        .filter(|r| r.state.as_deref() == Some("expiring"))
        .map(label)
        .collect();
    // Karpenter makes no reserved offering available for an expiring reservation
    // (`reserved_capacity_resolver.go`): with nothing else, nothing launches.
    if reserved.nothing_else && expiring.len() == reservations.len() {
        c.fail(
            Reason::CapacityReservationsNotFound,
            format!(
                "Every capacity reservation this EC2NodeClass selects is an expiring capacity \
                 block ({}), which Karpenter launches no more into, and NodePool(s) {} allow only \
                 reserved capacity, so Karpenter launches nothing for them. Select a reservation \
                 that is not ending, or allow on-demand capacity.",
                crate::wording::list_bounded(&expiring, 3),
                reserved.listed()
            ),
            reserved.subjects(ctx),
        );
    } else if !expiring.is_empty() {
        c.warn(
            Warning::CapacityReservationExpiring,
            format!(
                "Capacity block(s) {} are expiring: EC2 reclaims their instances at the end of the \
                 block, and Karpenter launches no more into them.",
                crate::wording::list_bounded(&expiring, 3)
            ),
            vec![ctx.node_class_subject()],
        );
    }
}

/// Open reservations of the account that Karpenter's launches for this class no longer fall
/// into: not `selected`, in a zone the class has a subnet in, with room, of a type some NodePool
/// of the class may launch on demand. Only from answers; anything not read is left unsaid.
/// Whether the class's nodes run Windows: a `windows…` alias or a `Windows…` amiFamily.
fn launches_windows(class: &karpenter_health_api::karpenter::EC2NodeClass) -> bool {
    let by_alias = class
        .spec
        .ami_selector_terms
        .iter()
        .filter_map(|t| t.alias.as_deref())
        .any(|a| a.starts_with("windows"));
    let by_family = class
        .spec
        .ami_family
        .as_deref()
        .is_some_and(|f| f.starts_with("Windows"));
    by_alias || by_family
}

fn warn_open_reservations_skipped(ctx: &Context, c: &mut Check, selected: &BTreeSet<&str>) {
    let (Some(Observed::Found(open)), Observed::Found(subnets), Observed::Found(pools)) = (
        &ctx.facts.aws.open_capacity_reservations,
        &ctx.facts.aws.subnets,
        &ctx.facts.cluster.node_pools,
    ) else {
        return;
    };
    if open.is_empty() {
        return;
    }
    let zones: BTreeSet<&str> = subnets.iter().map(|s| s.zone.as_str()).collect();
    // An open reservation takes only instances of its platform and tenancy (EC2 User Guide,
    // "Capacity Reservations": attributes an instance must match). Karpenter launches shared
    // tenancy, as Windows from a Windows family and as Linux/UNIX otherwise.
    let platform = if launches_windows(&ctx.facts.cluster.node_class) {
        "Windows"
    } else {
        "Linux/UNIX"
    };
    let on_demand: BTreeSet<String> = pools
        .iter()
        .filter_map(|p| crate::plan::instance_types::allowed(ctx, p))
        .flat_map(|allowed| {
            allowed
                .types()
                .into_iter()
                .filter(|(_, capacity)| capacity.contains(&"on-demand"))
                .map(|(t, _)| t.name.clone())
                .collect::<Vec<_>>()
        })
        .collect();
    let mut skipped: Vec<String> = open
        .iter()
        .filter(|r| {
            !selected.contains(r.id.as_str())
                && zones.contains(r.zone.as_str())
                && on_demand.contains(&r.instance_type)
                && r.available != Some(0)
                && r.platform.as_deref().is_none_or(|p| p == platform)
                && r.tenancy.as_deref().is_none_or(|t| t == "default")
        })
        .map(|r| {
            let room = r
                .available
                .map_or_else(String::new, |n| format!(", {n} available"));
            format!("{} ({} in {}{room})", r.id, r.instance_type, r.zone)
        })
        .collect();
    skipped.sort();
    if !skipped.is_empty() {
        c.warn(
            Warning::OpenCapacityReservationsSkipped,
            format!(
                "Open capacity reservation(s) {} match what this EC2NodeClass launches on \
                 demand, but with its {RESERVED_CAPACITY_GATE} feature gate on Karpenter \
                 launches with CapacityReservationPreference none, so its nodes run as \
                 on-demand beside the idle reservations.",
                crate::wording::list_bounded(&skipped, 3)
            ),
            vec![ctx.node_class_subject()],
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node_pool, requirement};

    #[test]
    fn reserved_only_needs_reserved_and_neither_on_demand_nor_spot() {
        let with = |values: &[&str]| {
            let mut pool = node_pool("p");
            pool.spec.template.spec.requirements = vec![requirement(
                crate::plan::capacity::CAPACITY_TYPE,
                "In",
                values,
            )];
            reserved_only(&pool)
        };
        assert!(with(&["reserved"]));
        assert!(!with(&["reserved", "on-demand"]));
        assert!(!with(&["on-demand"]));
        // No capacity-type requirement at all admits every type.
        let mut open = node_pool("p");
        open.spec.template.spec.requirements.clear();
        assert!(!reserved_only(&open));
    }
}

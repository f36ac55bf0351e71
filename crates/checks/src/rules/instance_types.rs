//! `InstanceTypesAvailable`: every NodePool of this EC2NodeClass allows some instance type that
//! EC2 offers in a zone of the class's subnets, with an architecture of the class's AMIs. When
//! none is left, Karpenter launches nothing for the NodePool and says so only in a
//! `NoCompatibleInstanceTypes` Event per Pod (aws/karpenter-provider-aws #6884, #7713, #8535).
//! Pure: no IO.
//!
//! The verdict is built to never be stricter than Karpenter: each instance type's labels are
//! derived as Karpenter derives them (`pkg/providers/instancetype/types.go`
//! `computeRequirements`, including the labels it leaves absent for a name its pattern does not
//! fit), and wherever this check cannot derive a label (a key it does not model, a size EC2 left
//! out, an operator it does not know) the requirement lets the type through. The set it computes therefore holds every type Karpenter could pick, and more; only
//! when even that set is empty is the NodePool `False`.

use crate::facts::{InstanceTypeCatalog, Observed};
use crate::plan::Context;
use crate::pod_fit::NodeClaimTemplate;
use crate::verdict::{Check, Outcome, Rule, Why};
use crate::warnings::Warning;
use karpenter_health_api::karpenter::NodePool;
use karpenter_health_api::{ConditionType, Reason, SubjectRef};
use std::collections::{BTreeMap, BTreeSet};

use crate::plan::instance_types::{
    Judged, ami_architectures, judged, min_values_strict, reserved_offerings,
};

/// The pending Pods that only this class can take and that may go to none of its NodePools but
/// the `empty` ones (`crate::pod_fit`), by the empty NodePool they may go to: Karpenter launches
/// nothing for them. A Pod whose NodePools are not known (pending Pods not read) is not counted.
fn stranded_pods<'p>(
    ctx: &Context,
    pools: &[&'p NodePool],
    empty: &[(&'p NodePool, Reason, String)],
) -> BTreeMap<&'p str, Vec<String>> {
    let mut stranded: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let Observed::Found(pods) = &ctx.facts.cluster.pending_pods else {
        return stranded;
    };
    if empty.is_empty() {
        return stranded;
    }
    let templates: Vec<NodeClaimTemplate> =
        pools.iter().map(|p| NodeClaimTemplate::of(p)).collect();
    let is_empty = |name: &str| {
        empty
            .iter()
            .any(|(p, _, _)| p.metadata.name.as_deref() == Some(name))
    };
    let rules = ctx.controller_label_rules();
    for pod in pods
        .iter()
        .filter(|p| p.only_this_class)
        .filter(|p| !crate::pod_fit::refused_before_scheduling(p, &rules))
    {
        let Some(its) = crate::pod_fit::held_by(&templates, pod, is_empty) else {
            continue;
        };
        for name in its {
            stranded
                .entry(name)
                .or_default()
                .push(format!("{}/{}", pod.namespace, pod.name));
        }
    }
    stranded
}

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::InstanceTypesAvailable, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let check = Check::new(ConditionType::InstanceTypesAvailable, "instance-types");
    let (mut c, pools) = match check.node_pools(&ctx.facts.cluster.node_pools, Reason::InstanceTypesOffered) {
        Ok(found) => found,
        Err(outcome) => return outcome,
    };
    let catalog = read_catalog(ctx, &mut c);
    let zones = read_zones(ctx, &mut c);
    let (Some(catalog), Some(zones)) = (catalog, zones) else {
        return c.finish(Reason::InstanceTypesOffered, "");
    };
    let zones_text = crate::wording::list_bounded(&zones.iter().collect::<Vec<_>>(), 6);
    let ami_archs = ami_architectures(ctx);
    let reserved = reserved_offerings(ctx, &zones);
    let strict = min_values_strict(ctx);
    let mut allowed = Vec::new();
    let mut unchecked_keys = BTreeSet::new();
    // Each NodePool that allows nothing, with why; judged once every NodePool is.
    let mut empty: Vec<(&NodePool, Reason, String)> = Vec::new();
    for pool in &pools {
        let name = pool.metadata.name.as_deref().unwrap_or_default();
        match &*judged(
            catalog,
            pool,
            &zones,
            ami_archs.as_ref(),
            reserved.as_ref(),
            strict,
        ) {
            Judged::NothingOffered => {
                // No real region answers this for a zone it has: an emulator's or a partial
                // answer.
                c.unknown(Why::new(
                    Reason::NotObserved,
                    format!(
                        "EC2 listed no instance type offered in {zones_text}, which no region \
                         with these zones answers, so nothing is concluded."
                    ),
                ));
                return c.finish(Reason::InstanceTypesOffered, "");
            }
            Judged::Allows { left, unchecked } => {
                allowed.push(format!("{name}: {}", left.len()));
                unchecked_keys.extend(unchecked.iter().cloned());
            }
            verdict => {
                if let Some((reason, message)) =
                    why_empty(pool, name, verdict, &zones_text, reserved.as_ref())
                {
                    empty.push((pool, reason, message));
                }
            }
        }
    }
    let stranded = stranded_pods(ctx, &pools, &empty);
    let empty_count = empty.len();
    report_empty(ctx, &mut c, empty, allowed.is_empty(), &stranded);
    let ok = true_message(
        &zones_text,
        &allowed,
        pools.len(),
        empty_count,
        unchecked_keys,
    );
    c.finish(Reason::InstanceTypesOffered, ok)
}

/// The region's instance type catalog, or why it is not known.
fn read_catalog<'a>(ctx: &Context<'a>, c: &mut Check) -> Option<&'a InstanceTypeCatalog> {
    match &ctx.facts.aws.instance_types {
        Some(Observed::Found(catalog)) => Some(catalog),
        None => {
            c.unknown(Why::new(
                Reason::NotObserved,
                "The region's instance types have not been read yet.",
            ));
            None
        }
        Some(Observed::Unknown(u)) => {
            c.unknown(Why::unobserved("The region's instance types", u));
            None
        }
        Some(Observed::Absent) => {
            c.unknown(Why::new(
                Reason::NotObserved,
                "EC2 answered that the region has no instance types.",
            ));
            None
        }
    }
}

/// The zones of the class's subnets, or why there are none to look in.
fn read_zones(ctx: &Context, c: &mut Check) -> Option<BTreeSet<String>> {
    match &ctx.facts.aws.subnets {
        Observed::Found(subnets) if subnets.iter().any(|s| !s.zone.is_empty()) => Some(
            subnets
                .iter()
                .filter(|s| !s.zone.is_empty())
                .map(|s| s.zone.clone())
                .collect(),
        ),
        Observed::Found(_) | Observed::Absent => {
            c.unknown(Why::new(
                Reason::NotObserved,
                "The EC2NodeClass selects no subnet (see SubnetsReady), so there is no zone to \
                 look for instance types in.",
            ));
            None
        }
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved("The subnets of this EC2NodeClass", u));
            None
        }
    }
}

/// Why NodePool `name` allows no instance type, from a verdict that leaves it none; `None` for
/// a verdict that is not one of those.
fn why_empty(
    pool: &NodePool,
    name: &str,
    verdict: &Judged,
    zones_text: &str,
    reserved: Option<&BTreeSet<(String, String)>>,
) -> Option<(Reason, String)> {
    Some(match verdict {
        Judged::NothingOffered | Judged::Allows { .. } => return None,
        Judged::ZonesWithoutSubnets { requirement } => (
            Reason::RequiredZonesWithoutSubnets,
            format!(
                "NodePool {name} requires `{requirement}`, but the EC2NodeClass's subnets \
                 are only in {zones_text}, so no node of it can launch. Select a subnet in a \
                 required zone, or require a zone the subnets are in."
            ),
        ),
        Judged::Emptied {
            requirement,
            before,
            alone,
        } => {
            let mut why = if *alone {
                format!("no instance type EC2 offers in {zones_text} satisfies `{requirement}`")
            } else {
                format!(
                    "`{requirement}` admits none of the {before} instance types offered in \
                     {zones_text} that its earlier requirements allow"
                )
            };
            if let (Some(reserved), true) = (reserved, crate::plan::capacity::reserved_only(pool)) {
                let pairs: Vec<String> = reserved
                    .iter()
                    .map(|(t, z)| format!("{t} in {z}"))
                    .collect();
                why.push_str(&format!(
                    " (it allows only reserved capacity, which Karpenter offers only for the \
                     instance types and zones of the class's capacity reservations that are \
                     not expiring: {})",
                    crate::wording::list_bounded(&pairs, 3)
                ));
            }
            (
                Reason::NoInstanceTypeMatchesRequirements,
                format!(
                    "NodePool {name} can launch nothing: {why}. Widen or correct that \
                     requirement."
                ),
            )
        }
        Judged::MinValuesUnmet {
            requirement,
            min,
            found,
        } => (
            Reason::NoInstanceTypeMatchesRequirements,
            format!(
                "NodePool {name} can launch nothing: `{requirement}` asks for at least {min} \
                 distinct values (minValues), but the instance types its requirements leave \
                 in {zones_text} offer only {}{}, and Karpenter's minValues policy is Strict. \
                 Lower minValues, widen the requirements, or set MIN_VALUES_POLICY=BestEffort.",
                found.len(),
                if found.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", crate::wording::list_bounded(found, 5))
                }
            ),
        ),
        Judged::NoneForAmis { archs, left } => (
            Reason::NoInstanceTypeForAmiArchitecture,
            format!(
                "NodePool {name} allows only {} instance types in {zones_text}, but the \
                 EC2NodeClass's AMIs are built for {}. Allow that architecture in the \
                 NodePool, or select AMIs for the one it asks for.",
                left.join(", "),
                archs.join(", ")
            ),
        ),
    })
}

/// Each NodePool that allows nothing: False when no NodePool of the class allows anything or a
/// pending Pod may go to no other, otherwise a warning.
fn report_empty(
    ctx: &Context,
    c: &mut Check,
    empty: Vec<(&NodePool, Reason, String)>,
    none_allowed: bool,
    stranded: &BTreeMap<&str, Vec<String>>,
) {
    for (pool, reason, message) in empty {
        let name = pool.metadata.name.as_deref().unwrap_or_default();
        let subjects = vec![ctx.node_class_subject(), SubjectRef::new("NodePool", name)];
        let waiting = stranded.get(name);
        match (none_allowed, waiting) {
            // Every NodePool of the class is empty: the class launches nothing at all.
            (true, _) => c.fail(reason, message, subjects),
            (false, Some(pods)) => c.fail(
                reason,
                format!(
                    "{message} Pending Pod(s) {} may go to no other NodePool.",
                    crate::wording::list_bounded(pods, 3)
                ),
                subjects,
            ),
            (false, None) => {
                // Only what was read is claimed: unread pending Pods leave the question open.
                let pods = if matches!(ctx.facts.cluster.pending_pods, Observed::Found(_)) {
                    "no pending Pod only this one may take waits"
                } else {
                    "whether a pending Pod needs this one is not known (pending Pods not read)"
                };
                c.warn(
                    Warning::NodePoolAllowsNoInstanceType,
                    format!(
                        "{message} Other NodePools of the class allow instance types, and {pods}."
                    ),
                    subjects,
                )
            }
        }
    }
}

/// The True message: how many types each NodePool allows, and which requirement keys were not
/// checked.
fn true_message(
    zones_text: &str,
    allowed: &[String],
    pool_count: usize,
    empty_count: usize,
    unchecked_keys: BTreeSet<String>,
) -> String {
    let mut ok = if empty_count == 0 {
        format!(
            "Every NodePool allows instance types offered in {zones_text} (types per NodePool: \
             {}).",
            crate::wording::list_bounded(allowed, 5)
        )
    } else {
        format!(
            "{} of {} NodePools allow instance types offered in {zones_text} (types per \
             NodePool: {}); the others allow none (see the warning).",
            allowed.len(),
            pool_count,
            crate::wording::list_bounded(allowed, 5)
        )
    };
    if !unchecked_keys.is_empty() {
        let keys: Vec<String> = unchecked_keys.into_iter().collect();
        ok.push_str(&format!(
            " Requirements on {} were not checked.",
            crate::wording::list_bounded(&keys, 3)
        ));
    }
    ok
}

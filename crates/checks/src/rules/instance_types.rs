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

use super::{Check, Context, Outcome, Why};
use crate::facts::{InstanceTypeCatalog, InstanceTypeFacts, Observed};
use crate::pod_fit::NodeClaimTemplate;
use crate::warnings::Warning;
use karpenter_health_api::karpenter::{NodePool, Requirement};
use karpenter_health_api::{ConditionType, Reason, SubjectRef};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

mod labels;
mod offered;

pub use labels::{ARCH, CATEGORY, CPU, FAMILY, GENERATION, INSTANCE_TYPE, MEMORY, SIZE, ZONE};
pub(crate) use labels::{Candidate, category_and_generation};
use labels::{Key, admits, values_of};
use offered::{ami_architectures, min_values_strict, offered, reserved_offerings};

/// A NodePool's requirements as Karpenter applies them to instance types: its template labels
/// (each an `In` of one value) and then `spec.template.spec.requirements`, in order.
fn requirements_of(pool: &NodePool) -> Vec<Requirement> {
    let template = &pool.spec.template;
    let labels = template.metadata.labels.iter().map(|(k, v)| Requirement {
        key: k.clone(),
        operator: "In".into(),
        values: vec![v.clone()],
        min_values: None,
    });
    labels
        .chain(template.spec.requirements.iter().cloned())
        .collect()
}

/// A requirement as messages write it: `karpenter.k8s.aws/instance-family In [m9, m10]`.
fn show(r: &Requirement) -> String {
    if r.values.is_empty() {
        format!("{} {}", r.key, r.operator)
    } else {
        format!(
            "{} {} [{}]",
            r.key,
            r.operator,
            super::list_bounded(&r.values, 5)
        )
    }
}

/// The distinct values of `key` among `left`; `None` when a type's value is not derived (it
/// might add one).
fn distinct_values(left: &[Candidate<'_>], key: Key) -> Option<BTreeSet<String>> {
    let mut values = BTreeSet::new();
    for c in left {
        match key {
            Key::Zone => values.extend(c.zones.iter().map(|z| (*z).to_owned())),
            Key::CapacityType => values.extend(c.capacity.iter().map(|v| (*v).to_owned())),
            _ => values.extend(values_of(c.facts, key)?),
        }
    }
    Some(values)
}

fn judge<'a>(
    requirements: &[Requirement],
    offered: &[Candidate<'a>],
    zones: &BTreeSet<String>,
    ami_archs: Option<&BTreeSet<String>>,
    min_values_strict: bool,
) -> Judged {
    let mut left: Vec<Candidate<'a>> = offered.to_vec();
    let mut unchecked = BTreeSet::new();
    for r in requirements {
        let Some(key) = Key::of(&r.key) else {
            if r.key.starts_with("karpenter.k8s.aws/") || r.key.starts_with("topology.k8s.aws/") {
                unchecked.insert(r.key.clone());
            }
            continue;
        };
        let before = left.len();
        left.retain_mut(|c| c.keep(key, r));
        if !left.is_empty() {
            continue;
        }
        if key == Key::Zone && !zones.iter().any(|z| admits(&r.operator, &r.values, z)) {
            return Judged::ZonesWithoutSubnets {
                requirement: show(r),
            };
        }
        let alone = !offered.iter().any(|c| c.clone().keep(key, r));
        return Judged::Emptied {
            requirement: show(r),
            before,
            alone,
        };
    }
    if let Some(archs) = ami_archs {
        let fits = |c: &Candidate<'_>| match values_of(c.facts, Key::Arch) {
            None => true,
            Some(values) => values.iter().any(|v| archs.contains(v)),
        };
        if !left.iter().any(fits) {
            let left_archs: BTreeSet<String> = left
                .iter()
                .filter_map(|c| values_of(c.facts, Key::Arch))
                .flatten()
                .collect();
            return Judged::NoneForAmis {
                archs: archs.iter().cloned().collect(),
                left: left_archs.into_iter().collect(),
            };
        }
        left.retain(fits);
    }
    // minValues: under the Strict policy Karpenter drops a NodePool whose remaining types offer
    // fewer distinct values of the key (kubernetes-sigs/karpenter
    // `pkg/controllers/provisioning/scheduling/scheduler.go`, "skipping, nodepool requirements
    // filtered out all instance types" with `minValuesIncompatibleErr`). Counted on the
    // superset, so fewer here is fewer for Karpenter too.
    if min_values_strict {
        for r in requirements {
            let (Some(min), Some(key)) = (r.min_values, Key::of(&r.key)) else {
                continue;
            };
            let Some(found) = distinct_values(&left, key) else {
                continue;
            };
            if found.len() < min as usize {
                return Judged::MinValuesUnmet {
                    requirement: show(r),
                    min,
                    found: found.into_iter().collect(),
                };
            }
        }
    }
    Judged::Allows {
        left: left.into_iter().map(|c| (c.index, c.capacity)).collect(),
        unchecked,
    }
}

/// What one NodePool's requirements leave of the catalog, owned, so it can be kept in the
/// catalog's memo and shared by every class that asks the same question.
#[derive(Debug)]
pub enum Judged {
    /// EC2 offers no type at all in the zones (an emulator's or a partial answer).
    NothingOffered,
    /// These types are left (by index into the catalog's `types`, with the capacity types each
    /// may still be launched as); requirements on these keys were not checked.
    Allows {
        left: Vec<(u32, Vec<&'static str>)>,
        unchecked: BTreeSet<String>,
    },
    /// The zone requirement admits no zone of the class's subnets.
    ZonesWithoutSubnets { requirement: String },
    /// This requirement left no type; `before` were left by the ones before it, and `alone` is
    /// whether it admits none of the offered types even by itself.
    Emptied {
        requirement: String,
        before: usize,
        alone: bool,
    },
    /// `requirement`'s `minValues` asks for `min` distinct values of its key, but the types
    /// left offer only `found`.
    MinValuesUnmet {
        requirement: String,
        min: u32,
        found: Vec<String>,
    },
    /// Types are left, but none of an architecture the AMIs are built for.
    NoneForAmis {
        archs: Vec<String>,
        left: Vec<String>,
    },
}

/// The NodePool's verdict on `catalog` in `zones` for AMIs of `ami_archs`, from the catalog's
/// memo when the same question was judged before (by this class or another).
fn judged(
    catalog: &InstanceTypeCatalog,
    pool: &NodePool,
    zones: &BTreeSet<String>,
    ami_archs: Option<&BTreeSet<String>>,
    reserved: Option<&BTreeSet<(String, String)>>,
    min_values_strict: bool,
) -> Arc<Judged> {
    use std::hash::{Hash, Hasher};
    let requirements = requirements_of(pool);
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    requirements.hash(&mut hasher);
    (zones, ami_archs, reserved, min_values_strict).hash(&mut hasher);
    catalog.judged.get_or_derive(hasher.finish(), || {
        let offered = offered(catalog, zones, reserved);
        if offered.is_empty() {
            return Judged::NothingOffered;
        }
        judge(&requirements, &offered, zones, ami_archs, min_values_strict)
    })
}

/// The instance types a NodePool allows, read from its verdict in the catalog's memo.
pub(crate) struct Allowed<'a> {
    types: &'a [InstanceTypeFacts],
    verdict: Arc<Judged>,
}

impl Allowed<'_> {
    /// Each type with the capacity types it may be launched as.
    pub fn types(&self) -> Vec<(&InstanceTypeFacts, &[&'static str])> {
        match &*self.verdict {
            Judged::Allows { left, .. } => left
                .iter()
                .filter_map(|(i, capacity)| {
                    Some((self.types.get(*i as usize)?, capacity.as_slice()))
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The vCPUs of the smallest type; `None` when one of them does not say (it might be
    /// smaller) or there are none.
    pub fn smallest_vcpus(&self) -> Option<u32> {
        self.types()
            .iter()
            .map(|(t, _)| t.vcpus)
            .collect::<Option<Vec<u32>>>()
            .and_then(|v| v.into_iter().min())
    }
}

/// The instance types `pool` allows in the class's zones, for its AMIs, with the capacity types
/// each may still be launched as: a superset of what Karpenter could launch. `None` when that is
/// not known (no catalog, no subnet) or the NodePool allows none (`InstanceTypesAvailable` says
/// why).
pub(crate) fn allowed<'a>(ctx: &Context<'a>, pool: &NodePool) -> Option<Allowed<'a>> {
    let facts: &'a crate::facts::Facts = ctx.facts;
    let Some(Observed::Found(catalog)) = &facts.aws.instance_types else {
        return None;
    };
    let Observed::Found(subnets) = &facts.aws.subnets else {
        return None;
    };
    let zones: BTreeSet<String> = subnets
        .iter()
        .filter(|s| !s.zone.is_empty())
        .map(|s| s.zone.clone())
        .collect();
    let reserved = reserved_offerings(ctx, &zones);
    let verdict = judged(
        catalog,
        pool,
        &zones,
        ami_architectures(ctx).as_ref(),
        reserved.as_ref(),
        min_values_strict(ctx),
    );
    match &*verdict {
        Judged::Allows { left, .. } if !left.is_empty() => Some(Allowed {
            types: catalog.types.as_slice(),
            verdict,
        }),
        _ => None,
    }
}

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
    for pod in pods.iter().filter(|p| p.only_this_class) {
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

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::InstanceTypesAvailable, "instance-types");
    let pools = match &ctx.facts.cluster.node_pools {
        Observed::Found(pools) if !pools.is_empty() => pools,
        Observed::Found(_) | Observed::Absent => {
            return c.finish(
                Reason::InstanceTypesOffered,
                "No NodePool uses this EC2NodeClass.",
            );
        }
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved("The NodePools of this EC2NodeClass", u));
            return c.finish(Reason::InstanceTypesOffered, "");
        }
    };
    let catalog = read_catalog(ctx, &mut c);
    let zones = read_zones(ctx, &mut c);
    let (Some(catalog), Some(zones)) = (catalog, zones) else {
        return c.finish(Reason::InstanceTypesOffered, "");
    };
    let zones_text = super::list_bounded(&zones.iter().collect::<Vec<_>>(), 6);
    let ami_archs = ami_architectures(ctx);
    let reserved = reserved_offerings(ctx, &zones);
    let strict = min_values_strict(ctx);
    let mut pools: Vec<&NodePool> = pools.iter().collect();
    pools.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
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
            if let (Some(reserved), true) =
                (reserved, super::capacity_reservations::reserved_only(pool))
            {
                let pairs: Vec<String> = reserved
                    .iter()
                    .map(|(t, z)| format!("{t} in {z}"))
                    .collect();
                why.push_str(&format!(
                    " (it allows only reserved capacity, which Karpenter offers only for the \
                     instance types and zones of the class's capacity reservations that are \
                     not expiring: {})",
                    super::list_bounded(&pairs, 3)
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
                    format!(" ({})", super::list_bounded(found, 5))
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
                    super::list_bounded(pods, 3)
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
            super::list_bounded(allowed, 5)
        )
    } else {
        format!(
            "{} of {} NodePools allow instance types offered in {zones_text} (types per \
             NodePool: {}); the others allow none (see the warning).",
            allowed.len(),
            pool_count,
            super::list_bounded(allowed, 5)
        )
    };
    if !unchecked_keys.is_empty() {
        let keys: Vec<String> = unchecked_keys.into_iter().collect();
        ok.push_str(&format!(
            " Requirements on {} were not checked.",
            super::list_bounded(&keys, 3)
        ));
    }
    ok
}

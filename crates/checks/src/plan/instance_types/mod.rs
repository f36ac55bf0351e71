//! Which instance types a NodePool allows: the catalogue's types in the class's zones (with the
//! capacity types each may be launched as), narrowed by the NodePool's requirements as Karpenter
//! applies them, judged once per distinct question and kept in the catalogue's memo. Shared by
//! `InstanceTypesAvailable`, `LimitsLeaveRoom` and `CapacityReservationsUsable`. Pure, no IO.
//!
//! Never stricter than Karpenter: each instance type's labels are derived as Karpenter derives
//! them (`pkg/providers/instancetype/types.go` `computeRequirements`), and wherever a label cannot
//! be derived the requirement lets the type through, so the set holds every type Karpenter could
//! pick, and more.

use crate::facts::{InstanceTypeCatalog, InstanceTypeFacts, Observed};
use crate::plan::Context;
use karpenter_health_api::karpenter::{NodePool, Requirement};
use std::collections::BTreeSet;
use std::sync::Arc;

mod labels;
mod offered;

pub use labels::{ARCH, CATEGORY, CPU, FAMILY, GENERATION, INSTANCE_TYPE, MEMORY, SIZE, ZONE};
pub(crate) use labels::{Candidate, admits, category_and_generation, type_intersects};
use labels::{Key, values_of};
pub(crate) use offered::{ami_architectures, min_values_strict, offered, reserved_offerings};

/// A NodePool's requirements as Karpenter applies them to instance types: its template labels
/// (each an `In` of one value) and then `spec.template.spec.requirements`, in order.
pub(crate) fn requirements_of(pool: &NodePool) -> Vec<Requirement> {
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
            crate::wording::list_bounded(&r.values, 5)
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
    // minValues: under the Strict policy Karpenter drops a NodePool whose remaining types offer
    // fewer distinct values of the key (kubernetes-sigs/karpenter
    // `pkg/controllers/provisioning/scheduling/nodeclaim.go` `filterInstanceTypesByRequirements`
    // with `minValuesIncompatibleErr`; the AWS provider's `Truncate` again at launch). Counted
    // on the superset, so fewer here is fewer for Karpenter too; and counted before the AMIs'
    // architectures narrow the types, as Karpenter counts it: it maps the types to the AMIs only
    // when it builds the launch templates (aws/karpenter-provider-aws
    // `pkg/providers/amifamily/resolver.go` `MapToInstanceTypes`), and checks minValues no more.
    if min_values_strict {
        for r in requirements {
            let (Some(min), Some(key)) = (r.min_values, Key::of(&r.key)) else {
                continue;
            };
            // Karpenter counts each type's own zones and capacity types (its requirements), not
            // what the NodePool's requirements left of them: not judged.
            if matches!(key, Key::Zone | Key::CapacityType) {
                continue;
            }
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
pub(crate) fn judged(
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

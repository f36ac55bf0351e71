//! What the class can be offered before any NodePool requirement: the catalogue's types in the
//! class's zones with the capacity types each may be launched as (reserved only where Karpenter
//! makes a reserved offering), the AMIs' architectures, and whether Karpenter enforces minValues.
//! Pure: no IO.

use super::labels::{Candidate, Key};
use crate::facts::{InstanceTypeCatalog, Observed};
use crate::plan::Context;
use karpenter_health_api::ConditionStatus;
use std::collections::BTreeSet;

/// The (instance type, zone) pairs Karpenter offers reserved capacity for: those of the class's
/// capacity reservations that are not expiring, in a zone of its subnets
/// (aws/karpenter-provider-aws `pkg/providers/instancetype/offering/reserved_capacity_resolver.go`
/// makes one reserved offering per reservation of `status.capacityReservations`, available only
/// when not `expiring`). `None` when that is not known for certain, or when the class's selection
/// is unusable as a whole (no reservation left, the `ReservedCapacity` gate off), which
/// `CapacityReservationsUsable` judges: reserved capacity is then never ruled out here.
type ReservedOfferings = Option<BTreeSet<(String, String)>>;

pub(crate) fn reserved_offerings(ctx: &Context, zones: &BTreeSet<String>) -> ReservedOfferings {
    let class = &ctx.facts.cluster.node_class;
    if class.spec.capacity_reservation_selector_terms.is_empty() {
        return None;
    }
    if crate::plan::capacity::reserved_capacity_enabled(ctx) != Ok(true) {
        return None;
    }
    let current = ctx
        .karpenter_condition("CapacityReservationsReady")
        .is_some_and(|k| {
            ConditionStatus::parse(&k.status) == ConditionStatus::True
                && (k.observed_generation.is_none()
                    || k.observed_generation == class.metadata.generation)
        });
    if !current {
        return None;
    }
    let offered: BTreeSet<(String, String)> = class
        .status
        .as_ref()?
        .capacity_reservations
        .iter()
        .filter(|r| r.state.as_deref() != Some("expiring") && zones.contains(&r.availability_zone))
        .map(|r| (r.instance_type.clone(), r.availability_zone.clone()))
        .collect();
    (!offered.is_empty()).then_some(offered)
}

/// Whether Karpenter enforces minValues strictly: `MIN_VALUES_POLICY` / `--min-values-policy`
/// is `Strict`, its default since it exists (kubernetes-sigs/karpenter
/// `pkg/operator/options/options.go`, 1.6; before, always strict). `BestEffort` relaxes
/// minValues instead of dropping the NodePool; a value not read is no proof either way.
pub(crate) fn min_values_strict(ctx: &Context) -> bool {
    match &ctx.facts.cluster.karpenter {
        Observed::Found(k) => match &k.min_values_policy {
            crate::facts::Setting::Unset => true,
            crate::facts::Setting::Value(v) => v == "Strict",
            crate::facts::Setting::Unresolved(_) => false,
        },
        _ => false,
    }
}

/// Every type offered in one of `zones`, with the capacity types it may be launched as: on
/// demand, spot unless EC2 says the type has no spot, and reserved where `reserved` says
/// Karpenter offers it (everywhere when that is not known).
pub(crate) fn offered<'a>(
    catalog: &'a InstanceTypeCatalog,
    zones: &BTreeSet<String>,
    reserved: Option<&BTreeSet<(String, String)>>,
) -> Vec<Candidate<'a>> {
    catalog
        .types
        .iter()
        .zip(0u32..)
        // Karpenter lists only the types EC2 runs as x86_64 or arm64 (its DescribeInstanceTypes
        // filter on processor-info.supported-architecture, aws/karpenter-provider-aws
        // pkg/providers/instancetype/instancetype.go): EC2 Mac types (x86_64_mac, arm64_mac,
        // dedicated hosts only) are never its candidates. A type that does not say stays.
        .filter(|(t, _)| {
            t.architectures.is_empty()
                || t.architectures
                    .iter()
                    .any(|a| a == "x86_64" || a == "arm64")
        })
        .filter_map(|(t, index)| {
            let in_zones: Vec<&str> = catalog
                .zones
                .get(&t.name)?
                .iter()
                .filter(|z| zones.contains(*z))
                .map(String::as_str)
                .collect();
            if in_zones.is_empty() {
                return None;
            }
            let spot = t.usage_classes.is_empty() || t.usage_classes.iter().any(|u| u == "spot");
            let mut capacity = vec!["on-demand"];
            let reservable = reserved.is_none_or(|r| {
                in_zones
                    .iter()
                    .any(|z| r.contains(&(t.name.clone(), (*z).to_owned())))
            });
            if reservable {
                capacity.push("reserved");
            }
            if spot {
                capacity.push("spot");
            }
            Some(Candidate {
                index,
                facts: t,
                zones: in_zones,
                capacity,
            })
        })
        .collect()
}

/// The architectures the class's AMIs boot (`status.amis[].requirements` on
/// `kubernetes.io/arch`); `None` when Karpenter resolved no AMI, an AMI does not say, or its
/// `AMIsReady` is not True for the class's current generation (after an edit of the selector,
/// the images in the status may be the old ones).
pub(crate) fn ami_architectures(ctx: &Context) -> Option<BTreeSet<String>> {
    let class = &ctx.facts.cluster.node_class;
    let amis = &class.status.as_ref()?.amis;
    if amis.is_empty() {
        return None;
    }
    let ready = ctx.karpenter_condition("AMIsReady")?;
    let current = ready
        .observed_generation
        .is_none_or(|g| Some(g) == class.metadata.generation);
    if ConditionStatus::parse(&ready.status) != ConditionStatus::True || !current {
        return None;
    }
    let mut archs = BTreeSet::new();
    for ami in amis {
        let arch = ami
            .requirements
            .iter()
            .find(|r| Key::of(&r.key) == Some(Key::Arch) && r.operator == "In")?;
        archs.extend(arch.values.iter().cloned());
    }
    Some(archs)
}

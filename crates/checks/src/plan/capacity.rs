//! What a class's NodePools admit (a label value; spot, on-demand or reserved capacity) and
//! whether the installed Karpenter uses capacity reservations at all. Pure, no IO.

use crate::facts::{Observed, Setting};
use crate::plan::Context;
use crate::verdict::Why;
use karpenter_health_api::Reason;
use karpenter_health_api::karpenter::NodePool;

pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";

/// Whether Karpenter may launch spot capacity for `pool`: its requirements (and template labels)
/// admit `spot`. A NodePool without a capacity-type requirement admits every capacity type
/// (Karpenter prefers spot then; `pkg/providers/instance/instance.go getCapacityType`).
pub fn allows_spot(pool: &NodePool) -> bool {
    allows_capacity_type(pool, "spot")
}

/// Whether `pool`'s requirements (and template labels) admit the capacity type `value`
/// (`spot`, `on-demand`, `reserved`).
pub fn allows_capacity_type(pool: &NodePool, value: &str) -> bool {
    admits(pool, CAPACITY_TYPE, value)
}

/// Whether `pool` lets Karpenter give a node `key`=`value`: its template label for the key when it
/// has one, else every requirement on the key (`In` lists it, `NotIn` does not, `DoesNotExist`
/// never; `Exists` and operators that do not constrain strings, `Gt` and `Lt`, always).
pub fn admits(pool: &NodePool, key: &str, value: &str) -> bool {
    let template = &pool.spec.template;
    if let Some(label) = template.metadata.labels.get(key) {
        return label == value;
    }
    template
        .spec
        .requirements
        .iter()
        .filter(|r| r.key == key)
        .all(|r| {
            let listed = r.values.iter().any(|v| v == value);
            match r.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                "DoesNotExist" => false,
                _ => true,
            }
        })
}

/// The feature gate Karpenter uses capacity reservations under.
pub const RESERVED_CAPACITY_GATE: &str = "ReservedCapacity";

/// Whether `pool` allows only reserved capacity (`karpenter.sh/capacity-type In [reserved]`).
pub fn reserved_only(pool: &NodePool) -> bool {
    allows_capacity_type(pool, "reserved")
        && !allows_capacity_type(pool, "on-demand")
        && !allows_capacity_type(pool, "spot")
}

/// Whether the controller runs with `ReservedCapacity` on: the gate as `FEATURE_GATES` (or
/// `--feature-gates`) writes it, else the release's default (on from 1.6).
pub(crate) fn reserved_capacity_enabled(ctx: &Context) -> Result<bool, Why> {
    let karpenter = match &ctx.facts.cluster.karpenter {
        Observed::Found(k) => k,
        Observed::Unknown(u) => return Err(Why::unobserved("The Karpenter controller", u)),
        Observed::Absent => {
            return Err(Why::new(
                Reason::NotObserved,
                "No Karpenter controller was found, so whether it uses capacity reservations \
                 (its ReservedCapacity feature gate) is not known.",
            ));
        }
    };
    match &karpenter.feature_gates {
        Setting::Value(gates) => {
            // `Name=bool` pairs, comma-separated (k8s.io/component-base `cliflag.MapStringBool`).
            let written = gates.split(',').find_map(|pair| {
                let (name, value) = pair.split_once('=')?;
                (name.trim() == RESERVED_CAPACITY_GATE).then(|| value.trim().to_owned())
            });
            if let Some(value) = written {
                return match crate::go::parse_bool(&value) {
                    Some(enabled) => Ok(enabled),
                    None => Err(Why::new(
                        Reason::NotObserved,
                        format!(
                            "The Karpenter controller's FEATURE_GATES sets \
                             {RESERVED_CAPACITY_GATE}={}, which is no boolean.",
                            crate::clip(&value, 32)
                        ),
                    )),
                };
            }
        }
        Setting::Unresolved(how) => {
            return Err(Why::new(
                Reason::NotObserved,
                format!(
                    "The Karpenter controller's FEATURE_GATES is set {how}, which karpenter-health \
                     does not read, so whether it uses capacity reservations is not known."
                ),
            ));
        }
        Setting::Unset => {}
    }
    let version = ctx.version.as_ref().map_err(Clone::clone)?;
    Ok((version.major, version.minor) >= (1, 6))
}

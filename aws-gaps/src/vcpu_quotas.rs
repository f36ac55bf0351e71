//! The account's vCPU quotas, which EC2 holds every launch to and moto does not: a standard
//! instance (the A, C, D, H, I, M, R, T and Z families, EC2 User Guide "Amazon EC2 instance type
//! quotas") is refused when the vCPUs of the region's running standard instances of its purchase
//! option, with its own, would pass Service Quotas' value: "Running On-Demand Standard
//! instances" (`L-1216C47A`, `VcpuLimitExceeded`) or "All Standard Spot Instance Requests"
//! (`L-34B43A08`, `MaxSpotInstanceCountExceeded`). Only a quota a test set is held to (the
//! proxy's `set_ec2_quota`); without one, launches are moto's as before. The decision is pure
//! ([`quota_refusal`]); [`room_for`] reads moto's instances and catalogue (IO).
//!
//! A fleet whose overrides are refused in part is not emulated: while one override fits, moto
//! launches whichever it picks.

use std::collections::{BTreeMap, BTreeSet};

/// Service Quotas' code for running on-demand standard instances' vCPUs.
pub const ON_DEMAND_STANDARD: &str = "L-1216C47A";
/// Service Quotas' code for standard spot instance requests' vCPUs.
pub const SPOT_STANDARD: &str = "L-34B43A08";

/// Whether EC2 counts `instance_type` against the standard quotas: its family starts with one
/// of the standard letters and is none of the families with quotas of their own that share a
/// letter (Inf, DL, HPC, Mac, Trn).
pub(crate) fn is_standard(instance_type: &str) -> bool {
    let family = instance_type
        .split('.')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let own_quota = ["inf", "dl", "hpc", "mac", "trn"];
    family
        .chars()
        .next()
        .is_some_and(|c| "acdhimrtz".contains(c))
        && !own_quota.iter().any(|p| family.starts_with(p))
}

/// One quota and the vCPUs the region's running instances already take of it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Quota {
    pub(crate) value: f64,
    pub(crate) used: f64,
}

/// The quotas a launch is held to in one region, and the vCPUs of the types it asks for.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Room {
    pub(crate) on_demand: Option<Quota>,
    pub(crate) spot: Option<Quota>,
    pub(crate) vcpus: BTreeMap<String, i32>,
}

/// EC2's refusal of a standard `instance_type` (spot or not) the quota has no room for.
/// (The error code and message: `launch_parameters::Refusal`.)
pub(crate) fn quota_refusal(
    instance_type: &str,
    spot: bool,
    room: &Room,
) -> Option<(&'static str, String)> {
    if !is_standard(instance_type) {
        return None;
    }
    let quota = if spot { room.spot } else { room.on_demand }?;
    let vcpus = f64::from(*room.vcpus.get(instance_type)?);
    if quota.used + vcpus <= quota.value {
        return None;
    }
    Some(if spot {
        (
            "MaxSpotInstanceCountExceeded",
            "Max spot instance count exceeded".to_owned(),
        )
    } else {
        (
            "VcpuLimitExceeded",
            format!(
                "You have requested more vCPU capacity than your current vCPU limit of {} allows \
                 for the instance bucket that the specified instance type belongs to.",
                quota.value
            ),
        )
    })
}

/// The room the quotas of `quotas` (by code, as set on the proxy) leave in `region`, for
/// launches of `asked` types: moto's pending and running instances there, counted by their
/// types' vCPUs from moto's catalogue. `None` when no quota is set (nothing is held) or moto
/// could not answer (moto launches, as before).
pub(crate) async fn room_for(
    upstream: &str,
    region: &str,
    quotas: &BTreeMap<String, f64>,
    asked: &BTreeSet<String>,
) -> Option<Room> {
    let (on_demand, spot) = (
        quotas.get(ON_DEMAND_STANDARD).copied(),
        quotas.get(SPOT_STANDARD).copied(),
    );
    if on_demand.is_none() && spot.is_none() {
        return None;
    }
    let ec2 = aws_sdk_ec2::Client::new(&crate::upstream::moto_config(upstream, region).await);
    let running = ec2
        .describe_instances()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("instance-state-name")
                .values("pending")
                .values("running")
                .build(),
        )
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .ok()?;
    let running: Vec<(String, bool)> = running
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| {
            let spot = i.instance_lifecycle().is_some_and(|l| l.as_str() == "spot");
            Some((i.instance_type()?.as_str().to_owned(), spot))
        })
        .collect();
    let types: BTreeSet<String> = running
        .iter()
        .map(|(t, _)| t.clone())
        .chain(asked.iter().cloned())
        .filter(|t| is_standard(t))
        .collect();
    let mut vcpus = BTreeMap::new();
    if !types.is_empty() {
        let described = ec2
            .describe_instance_types()
            .set_instance_types(Some(types.iter().map(|t| t.as_str().into()).collect()))
            .send()
            .await
            .ok()?;
        for t in described.instance_types() {
            if let (Some(name), Some(v)) = (
                t.instance_type(),
                t.v_cpu_info().and_then(|v| v.default_v_cpus()),
            ) {
                vcpus.insert(name.as_str().to_owned(), v);
            }
        }
    }
    let used = |spot: bool| -> f64 {
        running
            .iter()
            .filter(|(t, s)| *s == spot && is_standard(t))
            .filter_map(|(t, _)| vcpus.get(t).copied().map(f64::from))
            .sum()
    };
    Some(Room {
        on_demand: on_demand.map(|value| Quota {
            value,
            used: used(false),
        }),
        spot: spot.map(|value| Quota {
            value,
            used: used(true),
        }),
        vcpus,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(on_demand: Option<(f64, f64)>, spot: Option<(f64, f64)>) -> Room {
        let quota = |q: Option<(f64, f64)>| q.map(|(value, used)| Quota { value, used });
        Room {
            on_demand: quota(on_demand),
            spot: quota(spot),
            vcpus: [("m5.large", 2), ("c5.xlarge", 4), ("g4dn.xlarge", 4)]
                .into_iter()
                .map(|(t, v)| (t.to_owned(), v))
                .collect(),
        }
    }

    #[test]
    fn the_standard_families_are_the_documented_letters_without_their_own_quotas() {
        for t in [
            "m5.large",
            "c7i.xlarge",
            "r6a.2xlarge",
            "t3.micro",
            "im4gn.large",
            "z1d.large",
        ] {
            assert!(is_standard(t), "{t}");
        }
        for t in [
            "g4dn.xlarge",
            "p4d.24xlarge",
            "inf2.xlarge",
            "dl1.24xlarge",
            "hpc7g.4xlarge",
        ] {
            assert!(!is_standard(t), "{t}");
        }
        assert!(
            !is_standard("mac2.metal")
                && !is_standard("trn1.2xlarge")
                && !is_standard("x2idn.large")
        );
    }

    #[test]
    fn a_launch_past_its_purchase_options_quota_is_refused_and_one_within_it_is_not() {
        let full = room(Some((2.0, 2.0)), Some((8.0, 0.0)));
        let refused = quota_refusal("m5.large", false, &full).expect("past the quota");
        assert_eq!(refused.0, "VcpuLimitExceeded");
        assert!(refused.1.contains("vCPU limit of 2"), "{}", refused.1);
        // Spot has a quota of its own, with room.
        assert_eq!(quota_refusal("m5.large", true, &full), None);
        // Up to the quota exactly is within it.
        assert_eq!(
            quota_refusal("m5.large", false, &room(Some((4.0, 2.0)), None)),
            None
        );
        let spot_full = room(None, Some((4.0, 2.0)));
        assert_eq!(
            quota_refusal("c5.xlarge", true, &spot_full).map(|r| r.0),
            Some("MaxSpotInstanceCountExceeded")
        );
    }

    #[test]
    fn what_no_quota_holds_launches() {
        let full = room(Some((0.0, 0.0)), None);
        // Another bucket's type, a purchase option without a quota set, a type moto does not know.
        assert_eq!(quota_refusal("g4dn.xlarge", false, &full), None);
        assert_eq!(quota_refusal("m5.large", true, &full), None);
        assert_eq!(quota_refusal("m7i.large", false, &full), None);
    }
}

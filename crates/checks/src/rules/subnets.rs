//! `SubnetsReady`: the subnets this EC2NodeClass selects exist, are in the cluster's VPC, and
//! each zone it can launch into has a subnet with the free addresses a starting node takes. Pure:
//! no IO.
//!
//! Which subnets: Karpenter's `status.subnets` when it lists any (what Karpenter launches into),
//! else what `spec.subnetSelectorTerms` match now (terms ORed, fields ANDed, tag value `*` any;
//! aws/karpenter-provider-aws `pkg/providers/subnet/subnet.go`). Karpenter picks, per zone, the
//! subnet with the most free addresses (`ZonalSubnetsForLaunch`), so a zone is out of room only
//! when none of its subnets has enough; launches there fail with
//! `InsufficientFreeAddressesInSubnet` (#3380, #7318). A subnet in another VPC than the cluster's
//! fails launches with `SecurityGroupSubnetVPCMismatch` since Karpenter 1.12, after the fact
//! (#9090).
//!
//! The zones the class can launch into are the selected subnets' zones, narrowed by the NodePools'
//! `topology.kubernetes.io/zone` requirements. A zone below what a node needs for certain (one
//! address, two where Pods take theirs from the node's subnet; `crate::vpc_cni`) is out of room:
//! one such zone is a warning (Karpenter still launches elsewhere), every one is `False`. A zone
//! short of the VPC CNI's warm pool only is a warning: nodes launch and join there. When the
//! NodePools are not known, the narrowing is skipped: `False` then needs every subnet zone to be
//! out of room, which holds for any narrowing.

use crate::clip;
use crate::facts::{Observed, SubnetFacts};
use crate::plan::Context;
use crate::plan::capacity::admits;
use crate::plan::subnets::{Selection, selection};
use crate::verdict::{Check, Outcome, Rule, Why};
use crate::vpc_cni::addresses_per_node;
use crate::warnings::Warning;
use crate::wording::list_bounded;
use karpenter_health_api::{ConditionType, Reason, SubjectRef};
use std::collections::{BTreeMap, BTreeSet};

const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::SubnetsReady, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::SubnetsReady, "subnets");
    let node_class = ctx.node_class_subject();
    let selected = match selection(ctx) {
        Selection::Unknown(why) => {
            c.unknown(why);
            return c.finish(Reason::SubnetsValid, "");
        }
        Selection::NotFound(message, missing) => {
            let mut subjects = vec![node_class];
            subjects.extend(missing.iter().map(|id| SubjectRef::new("Subnet", id)));
            subjects.truncate(crate::verdict::MAX_SUBJECTS);
            c.fail(Reason::SubnetsNotFound, message, subjects);
            return c.finish(Reason::SubnetsValid, "");
        }
        Selection::Subnets(s) => s,
    };
    fail_other_vpc(ctx, &mut c, &node_class, &selected);

    // Free addresses per zone: the roomiest subnet of each zone counts (Karpenter picks it).
    let need = addresses_per_node(&ctx.facts.cluster.vpc_cni);
    let zones = roomiest_per_zone(&selected);
    let launchable = launchable_zones(ctx, &zones);
    // Below the certain need a node launched there cannot work; below the warm pool it starts
    // with fewer Pod addresses than the VPC CNI keeps ready, and Pods beyond them wait.
    let below = |floor: u32| -> Vec<ZoneRoom> {
        launchable
            .iter()
            .filter_map(|z| match zones.get(z) {
                Some(Some((best, which))) if *best < floor => Some((*z, *best, *which)),
                _ => None,
            })
            .collect()
    };
    let full = below(need.certain);
    let short: Vec<ZoneRoom> = below(need.warm)
        .into_iter()
        .filter(|(z, _, _)| !full.iter().any(|(f, _, _)| f == z))
        .collect();
    let subjects = |zones: &[ZoneRoom]| zone_subjects(&node_class, &selected, zones);
    report_zones_short(&mut c, &need, &full, &short, launchable.len(), subjects);

    let ids: Vec<&str> = selected.iter().map(|s| s.id.as_str()).collect();
    let zone_names: Vec<&str> = launchable
        .iter()
        .copied()
        .filter(|z| !full.iter().any(|(f, _, _)| f == z))
        .collect();
    c.finish(
        Reason::SubnetsValid,
        format!(
            "Subnets {} exist in the cluster's VPC, with room to launch a node in {} (a node \
             needs {} for certain; {}).",
            list_bounded(&ids, 5),
            list_bounded(&zone_names, 6),
            certain(need.certain),
            need.basis
        ),
    )
}

/// A zone, the most free addresses a selected subnet in it has, and that subnet.
type ZoneRoom<'a> = (&'a str, u32, &'a SubnetFacts);

/// False for each selected subnet in another VPC than the cluster's.
fn fail_other_vpc(
    ctx: &Context,
    c: &mut Check,
    node_class: &SubjectRef,
    selected: &[&SubnetFacts],
) {
    let subject = |s: &SubnetFacts| vec![node_class.clone(), SubjectRef::new("Subnet", &s.id)];
    // Subnets in another VPC than the cluster's.
    match &ctx.facts.aws.cluster_vpc {
        Observed::Found(vpc) => {
            for subnet in selected.iter().filter(|s| s.vpc_id != *vpc) {
                c.fail(
                    Reason::SubnetInOtherVpc,
                    format!(
                        "Subnet {} ({}) is in {}, not in the cluster's VPC {}, so nodes launched \
                         there fail or cannot join.",
                        clip(&subnet.id, 64),
                        clip(&subnet.zone, 64),
                        clip(&subnet.vpc_id, 64),
                        clip(vpc, 64)
                    ),
                    subject(subnet),
                );
            }
        }
        Observed::Unknown(u) => c.unknown(Why::unobserved("The cluster's VPC", u)),
        // No such EKS cluster: ClusterIdentityUnique reports it.
        Observed::Absent => {}
    }
}

/// Each zone's roomiest selected subnet with its free addresses; `None` when a subnet of the
/// zone has an unknown free count, so the zone is not provably full.
fn roomiest_per_zone<'a>(
    selected: &[&'a SubnetFacts],
) -> BTreeMap<&'a str, Option<(u32, &'a SubnetFacts)>> {
    let mut zones: BTreeMap<&str, Option<(u32, &SubnetFacts)>> = BTreeMap::new();
    for subnet in selected.iter().copied() {
        let entry = zones
            .entry(subnet.zone.as_str())
            .or_insert(Some((0, subnet)));
        match (entry.as_mut(), subnet.available_ips) {
            // A subnet whose free count is unknown may have room: the zone is not provably full.
            (_, None) => *entry = None,
            (Some((best, which)), Some(n)) if n > *best || *best == 0 => {
                *best = n;
                *which = subnet;
            }
            _ => {}
        }
    }
    zones
}

/// The subnets' zones some NodePool of the class admits, or all of them when none does or the
/// NodePools are not known.
fn launchable_zones<'a>(
    ctx: &Context,
    zones: &BTreeMap<&'a str, Option<(u32, &SubnetFacts)>>,
) -> BTreeSet<&'a str> {
    let admitted: BTreeSet<&str> = match &ctx.facts.cluster.node_pools {
        Observed::Found(pools) if !pools.is_empty() => zones
            .keys()
            .copied()
            .filter(|z| pools.iter().any(|p| admits(p, ZONE_LABEL, z)))
            .collect(),
        _ => BTreeSet::new(),
    };
    // NodePools that admit none of the subnets' zones launch nothing at all
    // (`InstanceTypesAvailable` says so); what holds of the subnets then holds of every zone,
    // as when the NodePools are not known.
    if admitted.is_empty() {
        zones.keys().copied().collect()
    } else {
        admitted
    }
}

/// A zone for a message: its name, its most free addresses and the subnet that has them.
fn zone_text((zone, best, which): &ZoneRoom) -> String {
    format!(
        "{} (at most {best} free, in {})",
        clip(zone, 64),
        clip(&which.id, 64)
    )
}

/// The class and every selected subnet in the zones, as a finding's subjects.
fn zone_subjects(
    node_class: &SubjectRef,
    selected: &[&SubnetFacts],
    full: &[ZoneRoom],
) -> Vec<SubjectRef> {
    let mut s = vec![node_class.clone()];
    s.extend(
        full.iter()
            .flat_map(|(zone, _, _)| selected.iter().filter(move |x| x.zone == *zone))
            .map(|x| SubjectRef::new("Subnet", &x.id)),
    );
    s.truncate(crate::verdict::MAX_SUBJECTS);
    s
}

/// The addresses a node needs for certain, in words.
fn certain(n: u32) -> String {
    if n == 1 {
        "its own address".to_owned()
    } else {
        format!("{n} addresses (its own and one for a Pod)")
    }
}

/// False when every launchable zone is out of addresses, else a warning for each zone that is
/// and for each with fewer than a started node takes.
fn report_zones_short(
    c: &mut Check,
    need: &crate::vpc_cni::NodeAddressNeed,
    full: &[ZoneRoom],
    short: &[ZoneRoom],
    launchable: usize,
    zone_subjects: impl Fn(&[ZoneRoom]) -> Vec<SubjectRef>,
) {
    if !full.is_empty() && full.len() == launchable {
        let texts: Vec<String> = full.iter().map(zone_text).collect();
        c.fail(
            Reason::SubnetsOutOfAddresses,
            format!(
                "Every zone the EC2NodeClass can launch into is out of addresses: {}; a node \
                 needs {} for certain ({}).",
                list_bounded(&texts, 5),
                certain(need.certain),
                need.basis
            ),
            zone_subjects(full),
        );
    } else {
        for zone in full {
            c.warn(
                Warning::ZoneSubnetsLowOnAddresses,
                format!(
                    "Zone {}: no selected subnet has the {} a node needs for certain ({}), so \
                     Karpenter launches in the other zones only.",
                    zone_text(zone),
                    certain(need.certain),
                    need.basis
                ),
                zone_subjects(std::slice::from_ref(zone)),
            );
        }
    }
    for zone in short {
        c.warn(
            Warning::ZoneSubnetsLowOnAddresses,
            format!(
                "Zone {}: no selected subnet has the {} free addresses a started node takes ({}); \
                 nodes still launch there, but Pods beyond the free addresses wait for one.",
                zone_text(zone),
                need.warm,
                need.basis
            ),
            zone_subjects(std::slice::from_ref(zone)),
        );
    }
}

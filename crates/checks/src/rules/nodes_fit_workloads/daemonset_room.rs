//! DaemonSets that leave a NodePool's nodes no room. Karpenter adds the requests of every
//! DaemonSet whose Pod would run on a NodePool's nodes to each Pod it schedules there, and picks
//! only instance types whose allocatable holds both. Up to v1.13 it counts a DaemonSet on a
//! NodePool when the DaemonSet tolerates its taints and its requirements are compatible with the
//! NodeClaim template (kubernetes-sigs/karpenter `scheduling/scheduler.go` `getDaemonOverhead`,
//! `isDaemonPodCompatible`); from v1.14 only on the instance types its requirements also admit
//! (#2975, `buildDaemonOverheadGroups`), so agents split by architecture or OS count once per
//! node, not all together. When, on every instance type the NodePool allows, the DaemonSets
//! counted there ask more than the type can give Pods, the NodePool launches nothing, and its
//! Pods stay pending with "no instance type has enough resources" (#9269,
//! kubernetes-sigs/karpenter #2838).
//!
//! What is counted is never more than Karpenter counts: a DaemonSet counts only where the
//! release's model certainly counts it (`crate::pod_fit::NodeClaimTemplate::certainly_counts`:
//! Karpenter's own well-known labels, its requirement algebra, both ways of counting when the
//! release is not known), with only the template's containers' requests; and the room is never
//! less than Karpenter's (`crate::allocatable`, over a superset of the types Karpenter may pick).
//! Pure: no IO.

use crate::allocatable::{self, Allocatable};
use crate::facts::{DaemonSetFacts, Observed};
use crate::karpenter_release::Sure;
use crate::plan::Context;
use crate::plan::instance_types::{allowed, type_intersects};
use crate::pod_fit::NodeClaimTemplate;
use crate::verdict::{Check, MAX_SUBJECTS, Why};
use crate::warnings::Warning;
use crate::wording::list_bounded;
use karpenter_health_api::karpenter::NodePool;
use karpenter_health_api::{Reason, SubjectRef};
use std::collections::BTreeSet;

const MIB: u64 = 1024 * 1024;

/// The DaemonSets Karpenter counts on one instance type, against its room.
struct Overhead<'a> {
    instance_type: String,
    room: Allocatable,
    daemonsets: Vec<&'a DaemonSetFacts>,
    cpu_millis: u64,
    memory_bytes: u64,
}

/// What is counted on one type: what Karpenter certainly counts (DaemonSets whose requests are
/// known: the newest Pod's, or the template's where no Pod exists), and what it may count (the
/// others at their templates' requests too).
struct Counted<'a> {
    certain: Overhead<'a>,
    possible: Overhead<'a>,
}

impl Overhead<'_> {
    /// How far the DaemonSets are over the room (millicores, then bytes); negative: room left.
    fn excess(&self) -> (i128, i128) {
        (
            i128::from(self.cpu_millis) - i128::from(self.room.cpu_millis),
            i128::from(self.memory_bytes) - i128::from(self.room.memory_bytes_at_most),
        )
    }

    /// How short the type is, in cores or GiB, whichever is more.
    fn shortfall(&self) -> f64 {
        let (cpu, memory) = self.excess();
        (cpu as f64 / 1000.0).max(memory as f64 / (1024.0 * MIB as f64))
    }

    fn short(&self) -> bool {
        let (cpu, memory) = self.excess();
        cpu > 0 || memory > 0
    }
}

/// Judges the DaemonSets' room on the nodes of `pools`, recording failures and unknowns on `c`;
/// returns what the True message says of it (empty when it could not be judged).
pub(super) fn judge(ctx: &Context, c: &mut Check, pools: &[&NodePool]) -> String {
    let daemonsets = match &ctx.facts.cluster.daemonsets {
        Observed::Found(all) => all.as_slice(),
        Observed::Absent => &[],
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved("The cluster's DaemonSets", u));
            return String::new();
        }
    };
    if !super::catalog_observed(ctx, c) {
        return String::new();
    }
    let mut judged = Vec::new();
    for pool in pools {
        let name = pool.metadata.name.as_deref().unwrap_or_default();
        let Some(counted) = overheads(ctx, pool, daemonsets) else {
            continue;
        };
        // Only a NodePool with room whatever the unread Pods ask is named in the True message.
        if let Some(o) = closest(counted.iter().map(|c| &c.certain)) {
            fail(ctx, c, name, o, counted.len());
        } else if let Some(o) = closest(counted.iter().map(|c| &c.possible)) {
            warn_unread(ctx, c, name, o, counted.len());
        } else {
            judged.push(name.to_owned());
        }
    }
    if judged.is_empty() {
        return String::new();
    }
    format!(
        "NodePool {}: the DaemonSets that run on its nodes leave room for Pods.",
        list_bounded(&judged, 3)
    )
}

/// The type that comes closest to leaving room, when none does: it says why.
fn closest<'o, 'a: 'o>(overheads: impl Iterator<Item = &'o Overhead<'a>>) -> Option<&'o Overhead<'a>> {
    let overheads: Vec<&Overhead> = overheads.collect();
    if !overheads.iter().all(|o| o.short()) {
        return None;
    }
    overheads
        .into_iter()
        .min_by(|a, b| a.shortfall().total_cmp(&b.shortfall()))
}

/// The DaemonSets Karpenter counts on each instance type `pool` allows, with the type's room;
/// `None` when that is not known (no type allowed, a type EC2 did not size, kubelet settings
/// Karpenter v1.0 reads from the NodePool) or does not decide (a static NodePool keeps its
/// `replicas` whatever its Pods ask).
fn overheads<'a>(
    ctx: &Context<'a>,
    pool: &'a NodePool,
    daemonsets: &'a [DaemonSetFacts],
) -> Option<Vec<Counted<'a>>> {
    let release = ctx.release();
    if pool.spec.replicas.is_some() || release.kubelet_from_pool(pool) {
        return None;
    }
    let allowed = allowed(ctx, pool)?;
    let template = NodeClaimTemplate::for_release(pool, &release, Sure::Certainly);
    let kubelet = ctx.facts.cluster.node_class.spec.kubelet.as_ref();
    let windows = ctx.windows_nodes();
    let class_zones: BTreeSet<&str> = match &ctx.facts.aws.subnets {
        Observed::Found(subnets) => subnets.iter().map(|s| s.zone.as_str()).collect(),
        _ => BTreeSet::new(),
    };
    let Some(Observed::Found(catalog)) = &ctx.facts.aws.instance_types else {
        return None;
    };
    let per_type = release.daemons_per_instance_type();
    allowed
        .types()
        .into_iter()
        .map(|(t, _)| {
            let room = allocatable::of(t, kubelet)?;
            let zones: Vec<&str> = catalog
                .zones
                .get(&t.name)
                .into_iter()
                .flatten()
                .map(String::as_str)
                .filter(|z| class_zones.contains(z))
                .collect();
            // Up to v1.13 the template alone decides; from v1.14 the type must admit it too, and
            // with the release unknown only what both count is certain (the second is narrower).
            let admits = |wanted: &crate::requirements::Requirements| match per_type {
                Some(false) => Some(true),
                Some(true) | None => type_intersects(t, &zones, windows, wanted),
            };
            let mut counted: Vec<&DaemonSetFacts> = daemonsets
                .iter()
                // One with dynamic resource claims counts only where the release certainly does.
                .filter(|d| {
                    !d.constraints_unjudged
                        && release.daemon_ignored_for_claims(d.resource_claims) == Some(false)
                })
                .filter(|d| template.certainly_counts(&d.pod, admits))
                .collect();
            counted.sort_by(|a, b| {
                (b.requests(), &a.pod.namespace, &a.pod.name).cmp(&(
                    a.requests(),
                    &b.pod.namespace,
                    &b.pod.name,
                ))
            });
            let sum = |ds: Vec<&'a DaemonSetFacts>, requests: fn(&DaemonSetFacts) -> (u64, u64)| {
                Overhead {
                    instance_type: t.name.clone(),
                    room,
                    cpu_millis: ds.iter().map(|d| requests(d).0).sum(),
                    memory_bytes: ds.iter().map(|d| requests(d).1).sum(),
                    daemonsets: ds,
                }
            };
            let certain: Vec<&DaemonSetFacts> = counted
                .iter()
                .copied()
                .filter(|d| d.counted_requests().is_some())
                .collect();
            Some(Counted {
                certain: sum(certain, |d| d.counted_requests().unwrap_or_default()),
                possible: sum(counted, DaemonSetFacts::requests),
            })
        })
        .collect()
}

/// How a finding names the NodePool's instance types and the one that comes closest.
fn which_types(closest: &Overhead, types: usize) -> String {
    if types > 1 {
        format!(
            "none of the {types} instance types it allows has room for the DaemonSets Karpenter \
             counts on it; the closest, {}",
            closest.instance_type
        )
    } else {
        format!("on {}, the one instance type it allows", closest.instance_type)
    }
}

/// The DaemonSets of `overhead` as a finding names them, and its subjects.
fn named(ctx: &Context, pool: &str, overhead: &Overhead) -> (String, Vec<SubjectRef>) {
    let named: Vec<String> = overhead
        .daemonsets
        .iter()
        .map(|d| {
            let (cpu, memory) = d.requests();
            format!(
                "{}/{} ({cpu}m, {} MiB)",
                d.pod.namespace,
                d.pod.name,
                memory / MIB
            )
        })
        .collect();
    let mut subjects = vec![ctx.node_class_subject(), SubjectRef::new("NodePool", pool)];
    subjects.extend(
        overhead
            .daemonsets
            .iter()
            .take(MAX_SUBJECTS - 2)
            .map(|d| SubjectRef::namespaced("DaemonSet", &d.pod.namespace, &d.pod.name)),
    );
    (list_bounded(&named, 3), subjects)
}

/// A NodePool that launches nothing if the DaemonSets' unread Pods ask what their templates ask.
fn warn_unread(ctx: &Context, c: &mut Check, pool: &str, closest: &Overhead, types: usize) {
    let (named, subjects) = named(ctx, pool, closest);
    let unread: Vec<String> = closest
        .daemonsets
        .iter()
        .filter(|d| d.counted_requests().is_none())
        .map(|d| format!("{}/{}", d.pod.namespace, d.pod.name))
        .collect();
    c.warn(
        Warning::DaemonSetsMayFillNodes,
        format!(
            "NodePool {pool}: {}, the {} DaemonSet(s) Karpenter counts there request {}m CPU and \
             {} MiB, their templates' where their Pods were not read ({named}), more than the {}m and at most \
             {} MiB it can give Pods. Karpenter counts the requests of a DaemonSet's newest Pod, \
             and those of {} were not read; if they are what the templates ask, this NodePool \
             launches nothing.",
            which_types(closest, types),
            closest.daemonsets.len(),
            closest.cpu_millis,
            closest.memory_bytes / MIB,
            closest.room.cpu_millis,
            closest.room.memory_bytes_at_most / MIB,
            list_bounded(&unread, 3)
        ),
        subjects,
    );
}

fn fail(ctx: &Context, c: &mut Check, pool: &str, closest: &Overhead, types: usize) {
    let room = if closest.cpu_millis > closest.room.cpu_millis {
        format!(
            "{}m CPU, more than the {}m it can give Pods",
            closest.cpu_millis, closest.room.cpu_millis
        )
    } else {
        format!(
            "{} MiB of memory, more than the at most {} MiB it can give Pods",
            closest.memory_bytes / MIB,
            closest.room.memory_bytes_at_most / MIB
        )
    };
    let (named, subjects) = named(ctx, pool, closest);
    c.fail(
        Reason::DaemonSetsFillNodes,
        format!(
            "NodePool {pool}: {}, the {} DaemonSet(s) Karpenter counts there request {room} \
             (their newest Pods', or their templates' where they have none: {named}). Karpenter \
             counts them on every node and picks no instance type they leave no room on, so \
             this NodePool launches nothing: its Pods stay pending with \"no instance type has \
             enough resources\".",
            which_types(closest, types),
            closest.daemonsets.len(),
        ),
        subjects,
    );
}

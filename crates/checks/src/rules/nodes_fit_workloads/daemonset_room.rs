//! DaemonSets that leave a NodePool's nodes no room. Karpenter adds the requests of every
//! DaemonSet whose Pod would run on a NodePool's nodes (it tolerates the NodePool's taints and
//! its node selector and required affinity fit the NodePool's requirements) to each Pod it
//! schedules there, and picks only instance types whose allocatable holds both
//! (kubernetes-sigs/karpenter `pkg/controllers/provisioning/scheduling/scheduler.go`
//! `getDaemonOverhead`, `isDaemonPodCompatible`; `nodeclaim.go` `filterInstanceTypesByRequirements`).
//! When the DaemonSets alone ask more than the roomiest type the NodePool allows can give, no
//! type is left for any Pod: the NodePool launches nothing, and its Pods stay pending with
//! "no instance type has enough resources" (#9269, kubernetes-sigs/karpenter #2838).
//!
//! What is counted is never more than Karpenter counts: only the template's containers' requests
//! (Karpenter may add init containers, or a running Pod's own requests), only DaemonSets whose
//! constraints the NodePool model judges exactly; and the room is never less than Karpenter's
//! (`crate::allocatable`, over a superset of the types Karpenter may pick). Pure: no IO.

use crate::allocatable::{self, Allocatable};
use crate::facts::{DaemonSetFacts, Observed, PodScheduling};
use crate::plan::Context;
use crate::plan::instance_types::allowed;
use crate::pod_fit::NodeClaimTemplate;
use crate::verdict::{Check, MAX_SUBJECTS, Why};
use crate::wording::list_bounded;
use karpenter_health_api::karpenter::NodePool;
use karpenter_health_api::{Reason, SubjectRef};

/// The requirement operators whose meaning the NodePool model judges exactly.
const EXACT_OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

const MIB: u64 = 1024 * 1024;

/// The keys `pool` constrains with an operator the model does not judge exactly (`Gt`, `Lt`).
pub(super) fn inexact_keys(pool: &NodePool) -> Vec<&str> {
    pool.spec
        .template
        .spec
        .requirements
        .iter()
        .filter(|r| !EXACT_OPERATORS.contains(&r.operator.as_str()))
        .map(|r| r.key.as_str())
        .collect()
}

/// Whether Karpenter counts `daemonset` on the nodes of `template`'s NodePool, judged only where
/// the model is exact (`runs_on`).
pub(super) fn counted_on(
    template: &NodeClaimTemplate,
    inexact_keys: &[&str],
    daemonset: &DaemonSetFacts,
) -> bool {
    runs_on(
        template,
        inexact_keys,
        &daemonset.pod,
        daemonset.constraints_unjudged,
    )
}

/// Whether a Pod of `pod`'s template can be scheduled on the nodes of `template`'s NodePool,
/// judged only where the model is exact: a template with a constraint it does not judge exactly
/// (`constraints_unjudged`), or one on a key the NodePool constrains with another operator
/// (`inexact_keys`), is taken not to run there.
pub(super) fn runs_on(
    template: &NodeClaimTemplate,
    inexact_keys: &[&str],
    pod: &PodScheduling,
    constraints_unjudged: bool,
) -> bool {
    if constraints_unjudged {
        return false;
    }
    let keys = pod
        .node_selector
        .keys()
        .map(String::as_str)
        .chain(pod.required_affinity.iter().flatten().map(|r| r.key.as_str()));
    for key in keys {
        if inexact_keys.contains(&key) {
            return false;
        }
    }
    template.may_take(pod)
}

/// The DaemonSets' requests against the room of the roomiest type a NodePool allows.
struct Overhead<'a> {
    daemonsets: Vec<&'a DaemonSetFacts>,
    cpu_millis: u64,
    memory_bytes: u64,
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
    let kubelet = ctx.facts.cluster.node_class.spec.kubelet.as_ref();
    let mut judged = Vec::new();
    for pool in pools {
        let name = pool.metadata.name.as_deref().unwrap_or_default();
        // A NodePool that allows no type is InstanceTypesAvailable's to report.
        let Some(allowed) = allowed(ctx, pool) else {
            continue;
        };
        let template = NodeClaimTemplate::of(pool);
        let inexact = inexact_keys(pool);
        let mut counted: Vec<&DaemonSetFacts> = daemonsets
            .iter()
            .filter(|d| counted_on(&template, &inexact, d))
            .collect();
        counted.sort_by(|a, b| {
            (b.cpu_millis, b.memory_bytes, &a.pod.namespace, &a.pod.name).cmp(&(
                a.cpu_millis,
                a.memory_bytes,
                &b.pod.namespace,
                &b.pod.name,
            ))
        });
        let overhead = Overhead {
            cpu_millis: counted.iter().map(|d| d.cpu_millis).sum(),
            memory_bytes: counted.iter().map(|d| d.memory_bytes).sum(),
            daemonsets: counted,
        };
        // The roomiest of the types it allows; a type EC2 did not size leaves it unjudged.
        let rooms: Option<Vec<(&str, Allocatable)>> = allowed
            .types()
            .into_iter()
            .map(|(t, _)| Some((t.name.as_str(), allocatable::of(t, kubelet)?)))
            .collect();
        let Some(rooms) = rooms else {
            continue;
        };
        judged.push(name.to_owned());
        let cpu = rooms.iter().max_by_key(|(n, a)| (a.cpu_millis, *n));
        let memory = rooms.iter().max_by_key(|(n, a)| (a.memory_bytes_at_most, *n));
        let (Some(cpu), Some(memory)) = (cpu, memory) else {
            continue;
        };
        let short_cpu = overhead.cpu_millis > cpu.1.cpu_millis;
        let short_memory = overhead.memory_bytes > memory.1.memory_bytes_at_most;
        if short_cpu || short_memory {
            let room = if short_cpu {
                format!(
                    "{}m CPU, more than the {}m {} can give Pods",
                    overhead.cpu_millis, cpu.1.cpu_millis, cpu.0
                )
            } else {
                format!(
                    "{} MiB of memory, more than the at most {} MiB {} can give Pods",
                    overhead.memory_bytes / MIB,
                    memory.1.memory_bytes_at_most / MIB,
                    memory.0
                )
            };
            fail(ctx, c, name, &overhead, &room);
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

fn fail(ctx: &Context, c: &mut Check, pool: &str, overhead: &Overhead, room: &str) {
    let named: Vec<String> = overhead
        .daemonsets
        .iter()
        .map(|d| {
            format!(
                "{}/{} ({}m, {} MiB)",
                d.pod.namespace,
                d.pod.name,
                d.cpu_millis,
                d.memory_bytes / MIB
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
    c.fail(
        Reason::DaemonSetsFillNodes,
        format!(
            "NodePool {pool}: the {} DaemonSet(s) that run on its nodes request {room} (their Pod \
             templates: {}). Karpenter counts them on every node and picks no instance type they \
             leave no room on, so this NodePool launches nothing: its Pods stay pending with \"no \
             instance type has enough resources\".",
            overhead.daemonsets.len(),
            list_bounded(&named, 3)
        ),
        subjects,
    );
}

//! The Pods each node is promised (the kubelet's `maxPods`, as Karpenter computes it or the
//! class sets it) against the Pod addresses the VPC CNI can give it (`crate::pod_density`). A
//! node promised more Pods than it can address leaves the rest `ContainerCreating` once it fills
//! up (aws/karpenter-provider-aws #6353, #7318, #5317); whether it ever fills up depends on the
//! Pods' requests, so that is a warning, and only where every type the NodePool allows is
//! promised too many. Pure: no IO.

use crate::facts::{Observed, Setting};
use crate::plan::Context;
use crate::plan::instance_types::allowed;
use crate::pod_density::{DensityInputs, HOST_NETWORK_PODS, PodAddressing};
use crate::verdict::{Check, Why};
use crate::warnings::Warning;
use karpenter_health_api::karpenter::NodePool;
use karpenter_health_api::{Reason, SubjectRef};

/// One instance type a NodePool allows: its name, the Pods Karpenter promises its nodes, and
/// the Pod addresses the CNI can give them.
struct Density<'a> {
    name: &'a str,
    promised: u32,
    addresses: u32,
}

/// Judges the Pod density of `pools`, recording warnings and unknowns on `c`; returns what the
/// True message says of it (empty when it could not be judged).
pub(super) fn judge(ctx: &Context, c: &mut Check, pools: &[&NodePool]) -> String {
    let addressing = match &ctx.facts.cluster.vpc_cni {
        Observed::Found(cni) => PodAddressing::of(cni),
        Observed::Absent => {
            return "The VPC CNI is not installed (no DaemonSet kube-system/aws-node): Pods get \
                    their addresses from another CNI, whose limits are not judged."
                .to_owned();
        }
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved("The cluster's DaemonSets (kube-system/aws-node among them)", u));
            return String::new();
        }
    };
    if addressing == PodAddressing::Ipv6 {
        return "The VPC CNI gives Pods IPv6 addresses (ENABLE_IPv6): a node's prefix holds every \
                Pod it may run."
            .to_owned();
    }
    let density = DensityInputs::of(&ctx.facts.cluster.node_class, reserved_enis(ctx));
    if density.flags.windows {
        return "Windows nodes get their Pod addresses from the VPC resource controller, whose \
                limits are not judged."
            .to_owned();
    }
    if !super::catalog_observed(ctx, c) {
        return String::new();
    }
    let (judged, unjudged) = judge_pools(ctx, c, pools, &density, addressing);
    if density.max_pods.is_none()
        && density.flags.eni_limited
        && density.reserved_enis.is_none()
        && !unjudged.is_empty()
    {
        // Karpenter's own count needs RESERVED_ENIS: unread, the NodePools are not judged.
        c.unknown(Why::new(
            Reason::NotObserved,
            "Karpenter's RESERVED_ENIS setting has not been read (its Deployment), so the Pods it \
             promises each node are not known.",
        ));
    }
    true_message(c, &judged, &unjudged)
}

/// Judges each NodePool that allows instance types (the others are InstanceTypesAvailable's to
/// report), warning where every type it allows is promised more Pods than it can address;
/// returns the NodePools judged and those whose types' network or count is not known.
fn judge_pools(
    ctx: &Context,
    c: &mut Check,
    pools: &[&NodePool],
    density: &DensityInputs,
    addressing: PodAddressing,
) -> (Vec<String>, Vec<String>) {
    let mut judged = Vec::new();
    let mut unjudged = Vec::new();
    let release = ctx.release();
    for pool in pools {
        let name = pool.metadata.name.as_deref().unwrap_or_default();
        // Karpenter v1.0 may take maxPods from the NodePool's annotation: not judged there.
        if release.kubelet_from_pool(pool) {
            continue;
        }
        // A NodePool that allows no type is InstanceTypesAvailable's to report.
        let Some(allowed) = allowed(ctx, pool) else {
            continue;
        };
        let types: Option<Vec<Density>> = allowed
            .types()
            .into_iter()
            .map(|(t, _)| {
                Some(Density {
                    name: &t.name,
                    promised: density.max_pods(t)?,
                    addresses: addressing.pod_addresses(t)?,
                })
            })
            .collect();
        let Some(mut types) = types else {
            unjudged.push(name.to_owned());
            continue;
        };
        judged.push(name.to_owned());
        if types
            .iter()
            .all(|t| t.promised > t.addresses + HOST_NETWORK_PODS)
        {
            types.sort_by_key(|t| (t.addresses, t.name));
            warn_over_promised(ctx, c, name, &types, density, addressing);
        }
    }
    (judged, unjudged)
}

/// Karpenter's `RESERVED_ENIS` (0 when unset); `None` when its settings are not known or the
/// value is not a count (Karpenter refuses to start on one).
fn reserved_enis(ctx: &Context) -> Option<u32> {
    match &ctx.facts.cluster.karpenter {
        Observed::Found(k) => match &k.reserved_enis {
            Setting::Unset => Some(0),
            Setting::Value(v) => v.trim().parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

/// Why the nodes are promised what they are, for the warning.
fn promise_of(density: &DensityInputs, addressing: PodAddressing) -> String {
    let custom = matches!(
        addressing,
        PodAddressing::Ipv4 {
            custom_networking: true,
            ..
        }
    );
    match (density.max_pods, density.pods_per_core) {
        (Some(max), None) => format!("spec.kubelet.maxPods {max}"),
        (Some(max), Some(per_core)) => {
            format!("spec.kubelet.maxPods {max} and podsPerCore {per_core}")
        }
        (None, Some(per_core)) => format!("spec.kubelet.podsPerCore {per_core}"),
        (None, None) if custom && density.reserved_enis == Some(0) => {
            "Karpenter's ENI-limited count, which includes the primary ENI that custom networking \
             (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG) keeps from Pods: RESERVED_ENIS is not set"
                .to_owned()
        }
        (None, None) => "Karpenter's ENI-limited count".to_owned(),
    }
}

fn warn_over_promised(
    ctx: &Context,
    c: &mut Check,
    pool: &str,
    types: &[Density],
    density: &DensityInputs,
    addressing: PodAddressing,
) {
    let shown: Vec<String> = types
        .iter()
        .map(|t| {
            format!(
                "{} runs up to {} Pods but can address {} ({} + {HOST_NETWORK_PODS} on the host \
                 network)",
                t.name,
                t.promised,
                t.addresses + HOST_NETWORK_PODS,
                t.addresses
            )
        })
        .collect();
    c.warn(
        Warning::MaxPodsAboveAddresses,
        format!(
            "NodePool {pool}: every instance type it allows is promised more Pods ({}) than the \
             VPC CNI can give addresses: {}. Once a node holds more Pods than it can address, the \
             rest stay ContainerCreating (\"failed to assign an IP address to container\").",
            promise_of(density, addressing),
            crate::wording::list_bounded(&shown, 3)
        ),
        vec![ctx.node_class_subject(), SubjectRef::new("NodePool", pool)],
    );
}

/// The True message: which NodePools were judged, and (without contradicting a warning) what
/// was found of them.
fn true_message(c: &Check, judged: &[String], unjudged: &[String]) -> String {
    let mut ok = if judged.is_empty() {
        "No NodePool of this EC2NodeClass allows an instance type to judge.".to_owned()
    } else if c.warned(Warning::MaxPodsAboveAddresses) {
        format!(
            "NodePool {}: judged the Pods each node is promised against the addresses the VPC \
             CNI can give it; see the warning for the NodePools that promise more.",
            crate::wording::list_bounded(judged, 3)
        )
    } else {
        format!(
            "NodePool {}: no node is promised more Pods than the VPC CNI can give addresses.",
            crate::wording::list_bounded(judged, 3)
        )
    };
    if !unjudged.is_empty() {
        ok.push_str(&format!(
            " Not judged (an allowed type's network, or Karpenter's count, is not known): {}.",
            crate::wording::list_bounded(unjudged, 3)
        ));
    }
    ok
}

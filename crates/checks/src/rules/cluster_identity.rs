//! `ClusterIdentityUnique`: Karpenter is configured with the real EKS cluster name, and no other
//! cluster's instances carry that name. Pure: no IO.
//!
//! Karpenter lists "its" instances by the cluster-name tag alone (aws/karpenter-provider-aws
//! `pkg/providers/instance/instance.go` `List`), so two clusters sharing a name garbage-collect
//! and drift each other's nodes (#7356). An instance with
//! this name and `karpenter.sh/nodepool` that no NodeClaim here claims is foreign when it sits in
//! another VPC than the EKS cluster, or has outlived Karpenter's garbage collection (which would
//! have removed a genuine orphan of this cluster).

use crate::clip;
use crate::facts::{InstanceFacts, Observed};
use crate::plan::Context;
use crate::verdict::{Check, Outcome, Rule, Why};
use crate::wording::{at, human, list_bounded};
use karpenter_health_api::karpenter::NODEPOOL_LABEL;
use karpenter_health_api::{ConditionType, Reason, SubjectRef};
use std::collections::BTreeSet;

const EKS_CLUSTER_NAME_TAG: &str = "eks:eks-cluster-name";

/// Whether an instance carries `cluster`'s name tags (either form Karpenter has used).
pub fn carries_cluster_name(instance: &InstanceFacts, cluster: &str) -> bool {
    instance
        .tags
        .get(EKS_CLUSTER_NAME_TAG)
        .is_some_and(|v| v == cluster)
        || instance
            .tags
            .contains_key(&format!("kubernetes.io/cluster/{cluster}"))
}

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::ClusterIdentityUnique, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::ClusterIdentityUnique, "cluster-identity");
    let node_class = ctx.node_class_subject();
    let karpenter_name = match &ctx.karpenter_cluster_name {
        Ok(name) => Some(*name),
        Err(why) => {
            c.unknown(why.clone());
            None
        }
    };
    let region = ctx.facts.aws.region.as_deref().unwrap_or("this region");

    if let (Some(karpenter), Some(configured)) = (
        karpenter_name,
        ctx.facts.cluster.configured_cluster_name.as_deref(),
    ) && !configured.is_empty()
        && karpenter != configured
    {
        c.fail(
            Reason::KarpenterClusterNameMismatch,
            format!(
                "Karpenter is configured with cluster name {}, but this cluster is {} (the \
                 operator's cluster name).",
                clip(karpenter, 128),
                clip(configured, 128)
            ),
            vec![node_class.clone()],
        );
    }
    let eks_vpc = judge_eks_cluster(ctx, &mut c, karpenter_name, &node_class, region);

    match (&ctx.facts.aws.cluster_instances, karpenter_name) {
        (Observed::Unknown(u), _) => c.unknown(Why::unobserved(
            "The instances tagged with this cluster's name",
            u,
        )),
        // Unclaimed means claimed by no NodeClaim of a complete list: without one, nothing is.
        (Observed::Found(_), Some(_))
            if ctx.facts.cluster.claimed_instance_ids.found().is_none() =>
        {
            if let Some(u) = ctx.facts.cluster.claimed_instance_ids.unobserved() {
                c.unknown(Why::unobserved("The cluster's NodeClaims", u));
            }
        }
        (Observed::Found(instances), Some(name)) => {
            check_instances(ctx, &mut c, instances, name, &eks_vpc);
        }
        _ => {}
    }
    c.finish(
        Reason::ClusterIdentityVerified,
        format!(
            "Karpenter's cluster name {} is the EKS cluster's, and every instance carrying it \
             belongs to a NodeClaim here.",
            clip(karpenter_name.unwrap_or_default(), 128)
        ),
    )
}

/// Whether an EKS cluster bears the name Karpenter is configured with (False when it is named
/// otherwise or none is); the cluster's VPC, or why the cluster is not known.
fn judge_eks_cluster<'a>(
    ctx: &Context<'a>,
    c: &mut Check,
    karpenter_name: Option<&str>,
    node_class: &SubjectRef,
    region: &str,
) -> Result<Option<&'a str>, Why> {
    match &ctx.facts.aws.eks_cluster {
        Observed::Found(eks) => {
            if let Some(karpenter) = karpenter_name
                && eks.name != karpenter
            {
                c.fail(
                    Reason::KarpenterClusterNameMismatch,
                    format!(
                        "Karpenter is configured with cluster name {}, but the EKS cluster is \
                         named {}.",
                        clip(karpenter, 128),
                        clip(&eks.name, 128)
                    ),
                    vec![
                        node_class.clone(),
                        SubjectRef::new("EKSCluster", eks.name.as_str()),
                    ],
                );
            }
            Ok(eks.vpc_id.as_deref())
        }
        Observed::Absent => {
            if let Some(karpenter) = karpenter_name {
                c.fail(
                    Reason::KarpenterClusterNameMismatch,
                    format!(
                        "No EKS cluster in {} is named {}, the cluster name Karpenter is \
                         configured with.",
                        clip(region, 64),
                        clip(karpenter, 128)
                    ),
                    vec![node_class.clone()],
                );
            }
            Ok(None)
        }
        Observed::Unknown(u) => {
            let why = Why::unobserved("The EKS cluster", u);
            c.unknown(why.clone());
            Err(why)
        }
    }
}

fn check_instances(
    ctx: &Context,
    c: &mut Check,
    instances: &[InstanceFacts],
    name: &str,
    eks_vpc: &Result<Option<&str>, Why>,
) {
    let gc_window = ctx.settings.orphan_instance_after;
    let (mut foreign, mut undecided) = (Vec::new(), Vec::new());
    for instance in unclaimed(ctx, instances, name) {
        let age = instance.launch_time.map(|t| ctx.age(t));
        let other_vpc = match (eks_vpc, instance.vpc_id.as_deref()) {
            (Ok(Some(cluster_vpc)), Some(vpc)) => Some(vpc != *cluster_vpc),
            (Err(_), Some(_)) => None,
            _ => Some(false),
        };
        let id = clip(&instance.id, 64);
        if other_vpc == Some(true) {
            let vpc = clip(instance.vpc_id.as_deref().unwrap_or_default(), 64);
            foreign.push((instance, format!("{id} (in {vpc}, not the cluster's VPC)")));
        } else if let (Some(_), Some(launched)) =
            (age.filter(|a| *a > gc_window), instance.launch_time)
        {
            foreign.push((
                instance,
                format!(
                    "{id} (launched at {}, older than the {} garbage-collection window)",
                    at(launched),
                    human(gc_window)
                ),
            ));
        } else if other_vpc.is_none() {
            undecided.push(id.into_owned());
        }
    }
    if !foreign.is_empty() {
        let described: Vec<&str> = foreign.iter().map(|(_, d)| d.as_str()).collect();
        let mut subjects = vec![ctx.node_class_subject()];
        subjects.extend(
            foreign
                .iter()
                .take(crate::verdict::MAX_SUBJECTS - 1)
                .map(|(i, _)| SubjectRef::new("EC2Instance", i.id.as_str())),
        );
        c.fail(
            Reason::ClusterNameSharedWithOtherCluster,
            format!(
                "{} instance(s) carry cluster name {} and {NODEPOOL_LABEL} but belong to no \
                 NodeClaim here: {}. Another cluster uses the same name; the two Karpenters will \
                 drift and terminate each other's nodes.",
                foreign.len(),
                clip(name, 128),
                list_bounded(&described, 5)
            ),
            subjects,
        );
    } else if !undecided.is_empty()
        && let Err(why) = eks_vpc
    {
        c.unknown(Why::new(
            why.reason,
            format!(
                "Unclaimed instances {} carry the cluster name; whether they sit in another VPC is \
                 unknown. {}",
                list_bounded(&undecided, 5),
                why.message
            ),
        ));
    }
}

/// The live instances carrying `name` and a NodePool label that no NodeClaim claims, sorted by
/// id and without repeats.
fn unclaimed<'a>(
    ctx: &Context,
    instances: &'a [InstanceFacts],
    name: &str,
) -> Vec<&'a InstanceFacts> {
    // The cluster-wide set is shared by every class's evaluation: look up, never copy it.
    let cluster = &ctx.facts.cluster;
    let claimed_here: BTreeSet<&str> = cluster
        .node_claims
        .found()
        .into_iter()
        .flatten()
        .filter_map(|nc| nc.instance_id.as_deref())
        .collect();
    let claimed = |id: &str| {
        claimed_here.contains(id)
            || cluster
                .claimed_instance_ids
                .found()
                .is_some_and(|ids| ids.contains(id))
    };
    let mut sorted: Vec<&InstanceFacts> = instances.iter().collect();
    sorted.sort_by(|a, b| {
        (&a.id, &a.vpc_id, &a.state, a.launch_time, &a.tags).cmp(&(
            &b.id,
            &b.vpc_id,
            &b.state,
            b.launch_time,
            &b.tags,
        ))
    });
    sorted.dedup_by(|a, b| a.id == b.id);
    sorted
        .into_iter()
        .filter(|instance| {
            carries_cluster_name(instance, name)
                && instance.tags.contains_key(NODEPOOL_LABEL)
                && !claimed(&instance.id)
                && !matches!(instance.state.as_str(), "terminated" | "shutting-down")
        })
        .collect()
}

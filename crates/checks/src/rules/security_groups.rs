//! `SecurityGroupsReady`: the selector terms resolve to security groups, and none of them
//! belongs to another cluster only. Warnings for the cluster tag count and a stale Karpenter
//! status. Pure: no IO.
//!
//! Selector semantics follow Karpenter (aws/karpenter-provider-aws `pkg/apis/v1/ec2nodeclass.go`,
//! `pkg/providers/securitygroup`): terms are ORed, fields inside a
//! term ANDed; tag value `*` matches any value, and names and values take EC2 filter wildcards.

use crate::facts::{Observed, SecurityGroupFacts};
use crate::plan::Context;
use crate::verdict::{Check, Outcome, Rule, Why};
use crate::warnings::Warning;
use crate::wording::list_bounded;
use crate::{clip, glob_match};
use karpenter_health_api::karpenter::SelectorTerm;
use karpenter_health_api::{ConditionType, Reason, SubjectRef};
use std::collections::BTreeSet;

const CLUSTER_TAG_PREFIX: &str = "kubernetes.io/cluster/";

/// Whether one selector term selects `group`. A term without fields selects nothing (the CRD
/// forbids it; EC2 would otherwise return every group).
pub fn term_matches(term: &SelectorTerm, group: &SecurityGroupFacts) -> bool {
    if term.id.is_none() && term.name.is_none() && term.tags.is_empty() {
        return false;
    }
    term.id.as_deref().is_none_or(|id| id == group.id)
        && term
            .name
            .as_deref()
            .is_none_or(|name| glob_match(name, &group.name))
        && term.tags.iter().all(|(key, want)| {
            group
                .tags
                .get(key)
                .is_some_and(|have| want == "*" || glob_match(want, have))
        })
}

/// The clusters a group is tagged for (`kubernetes.io/cluster/<name>`).
fn clusters_of(group: &SecurityGroupFacts) -> Vec<&str> {
    group
        .tags
        .keys()
        .filter_map(|k| k.strip_prefix(CLUSTER_TAG_PREFIX))
        .collect()
}

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::SecurityGroupsReady, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::SecurityGroupsReady, "security-groups");
    let node_class = ctx.node_class_subject();
    let terms = &ctx
        .facts
        .cluster
        .node_class
        .spec
        .security_group_selector_terms;
    let groups: &[SecurityGroupFacts] = match &ctx.facts.aws.security_groups {
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved(
                "The security groups matching the selector terms",
                u,
            ));
            return c.finish(Reason::SecurityGroupsValid, "");
        }
        Observed::Absent => &[],
        Observed::Found(groups) => groups,
    };
    let selected = selected_groups(groups, terms);
    if selected.is_empty() {
        let what = if terms.is_empty() {
            "The EC2NodeClass has no security-group selector terms".to_owned()
        } else {
            format!(
                "The {} security-group selector term(s) match no security group",
                terms.len()
            )
        };
        c.fail(
            Reason::SecurityGroupsNotFound,
            format!("{what}, so Karpenter cannot launch nodes."),
            vec![node_class],
        );
        return c.finish(Reason::SecurityGroupsValid, "");
    }
    let ids: Vec<&str> = selected.iter().map(|g| g.id.as_str()).collect();
    let subjects = |gs: &[&SecurityGroupFacts]| sg_subjects(&node_class, gs);
    judge_cluster_tags(ctx, &mut c, &selected, &ids, subjects);
    fail_other_vpc(ctx, &mut c, &selected, subjects);
    warn_status_stale(ctx, &mut c, &selected, &ids, subjects);
    c.finish(
        Reason::SecurityGroupsValid,
        format!("The selector terms resolve to {}.", list_bounded(&ids, 5)),
    )
}

/// The security groups any selector term matches, sorted by id and without repeats.
fn selected_groups<'a>(
    groups: &'a [SecurityGroupFacts],
    terms: &[SelectorTerm],
) -> Vec<&'a SecurityGroupFacts> {
    let mut selected: Vec<&SecurityGroupFacts> = groups
        .iter()
        .filter(|g| terms.iter().any(|t| term_matches(t, g)))
        .collect();
    // EC2 never repeats an id; if an adapter did, the sort keeps the choice order-independent.
    selected.sort_by(|a, b| {
        (&a.id, &a.name, &a.vpc_id, &a.tags).cmp(&(&b.id, &b.name, &b.vpc_id, &b.tags))
    });
    selected.dedup_by(|a, b| a.id == b.id);
    selected
}

/// The class and the security groups, as a finding's subjects.
fn sg_subjects(node_class: &SubjectRef, gs: &[&SecurityGroupFacts]) -> Vec<SubjectRef> {
    let mut s = vec![node_class.clone()];
    s.extend(
        gs.iter()
            .map(|g| SubjectRef::new("SecurityGroup", g.id.as_str())),
    );
    s
}

/// The groups' cluster tags: False for a group tagged for another cluster only, a warning when
/// none or several carry this cluster's tag; Unknown when the cluster's name is not known and a
/// group is tagged for some cluster.
fn judge_cluster_tags(
    ctx: &Context,
    c: &mut Check,
    selected: &[&SecurityGroupFacts],
    ids: &[&str],
    sg_subjects: impl Fn(&[&SecurityGroupFacts]) -> Vec<SubjectRef>,
) {
    match &ctx.cluster_name {
        Ok(cluster) => {
            let own_tag = format!("{CLUSTER_TAG_PREFIX}{cluster}");
            let foreign: Vec<&SecurityGroupFacts> = selected
                .iter()
                .copied()
                .filter(|g| !clusters_of(g).is_empty() && !g.tags.contains_key(&own_tag))
                .collect();
            for group in &foreign {
                c.fail(
                    Reason::SecurityGroupTaggedForOtherCluster,
                    format!(
                        "Security group {} ({}) is tagged for cluster {} and not for {}.",
                        clip(&group.id, 64),
                        clip(&group.name, 128),
                        clip(&clusters_of(group).join(", "), 256),
                        clip(cluster, 128)
                    ),
                    sg_subjects(&[group]),
                );
            }
            let own: Vec<&SecurityGroupFacts> = selected
                .iter()
                .copied()
                .filter(|g| g.tags.contains_key(&own_tag))
                .collect();
            match own.len() {
                0 => c.warn(
                    Warning::NoSecurityGroupTaggedForCluster,
                    format!(
                        "None of the selected security groups ({}) carries {}.",
                        list_bounded(ids, 5),
                        clip(&own_tag, 160)
                    ),
                    sg_subjects(selected),
                ),
                1 => {}
                n => c.warn(
                    Warning::MultipleSecurityGroupsTaggedForCluster,
                    format!(
                        "{n} selected security groups carry {}: {}.",
                        clip(&own_tag, 160),
                        list_bounded(&own.iter().map(|g| g.id.as_str()).collect::<Vec<_>>(), 5)
                    ),
                    sg_subjects(&own),
                ),
            }
        }
        Err(why) => {
            // Without this cluster's name, another cluster's tag cannot be told from ours.
            if selected.iter().any(|g| !clusters_of(g).is_empty()) {
                c.unknown(why.clone());
            }
        }
    }
}

/// False for each group in another VPC than the cluster's.
fn fail_other_vpc(
    ctx: &Context,
    c: &mut Check,
    selected: &[&SecurityGroupFacts],
    sg_subjects: impl Fn(&[&SecurityGroupFacts]) -> Vec<SubjectRef>,
) {
    // A group in another VPC than the cluster's: Karpenter reports this only after a launch
    // failed (`SecurityGroupSubnetVPCMismatch`, aws/karpenter-provider-aws #9090).
    match &ctx.facts.aws.eks_cluster {
        Observed::Found(eks) => {
            if let Some(cluster_vpc) = eks.vpc_id.as_deref() {
                for group in selected
                    .iter()
                    .filter(|g| g.vpc_id.as_deref().is_some_and(|vpc| vpc != cluster_vpc))
                {
                    c.fail(
                        Reason::SecurityGroupInOtherVpc,
                        format!(
                            "Security group {} ({}) is in {}, not in the cluster's VPC {}, so \
                             launches with it fail.",
                            clip(&group.id, 64),
                            clip(&group.name, 128),
                            clip(group.vpc_id.as_deref().unwrap_or_default(), 64),
                            clip(cluster_vpc, 64)
                        ),
                        sg_subjects(&[group]),
                    );
                }
            }
        }
        Observed::Unknown(u) => c.unknown(Why::unobserved("The cluster's VPC", u)),
        // No EKS cluster of that name: ClusterIdentityUnique says so.
        Observed::Absent => {}
    }
}

/// A warning when Karpenter's status.securityGroups differs from what the terms resolve to now.
fn warn_status_stale(
    ctx: &Context,
    c: &mut Check,
    selected: &[&SecurityGroupFacts],
    ids: &[&str],
    sg_subjects: impl Fn(&[&SecurityGroupFacts]) -> Vec<SubjectRef>,
) {
    let in_status: BTreeSet<&str> = ctx
        .facts
        .cluster
        .node_class
        .status
        .as_ref()
        .map(|s| s.security_groups.iter().map(|g| g.id.as_str()).collect())
        .unwrap_or_default();
    let resolved: BTreeSet<&str> = ids.iter().copied().collect();
    if !in_status.is_empty() && in_status != resolved {
        let status_ids: Vec<&str> = in_status.iter().copied().collect();
        c.warn(
            Warning::SecurityGroupStatusStale,
            format!(
                "Karpenter's status.securityGroups lists {}, but the selector terms now resolve to \
                 {}.",
                list_bounded(&status_ids, 5),
                list_bounded(ids, 5)
            ),
            sg_subjects(selected),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn group(id: &str, name: &str, tags: &[(&str, &str)]) -> SecurityGroupFacts {
        SecurityGroupFacts {
            id: id.into(),
            name: name.into(),
            vpc_id: None,
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn term(id: Option<&str>, name: Option<&str>, tags: &[(&str, &str)]) -> SelectorTerm {
        SelectorTerm {
            id: id.map(Into::into),
            name: name.map(Into::into),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn selector_fields_are_anded_and_wildcards_match() {
        let g = group(
            "sg-1",
            "demo-nodes",
            &[("karpenter.sh/discovery", "demo"), ("team", "a")],
        );
        assert!(term_matches(&term(Some("sg-1"), None, &[]), &g));
        assert!(!term_matches(&term(Some("sg-2"), None, &[]), &g));
        assert!(term_matches(&term(None, Some("demo-*"), &[]), &g));
        assert!(term_matches(
            &term(None, None, &[("karpenter.sh/discovery", "*")]),
            &g
        ));
        assert!(term_matches(
            &term(None, None, &[("karpenter.sh/discovery", "de*")]),
            &g
        ));
        assert!(!term_matches(
            &term(
                None,
                None,
                &[("karpenter.sh/discovery", "demo"), ("team", "b")]
            ),
            &g
        ));
        assert!(!term_matches(&term(None, None, &[("missing", "*")]), &g));
        assert!(!term_matches(&term(None, None, &[]), &g));
    }
}

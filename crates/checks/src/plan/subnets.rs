//! Which subnets a class selects: Karpenter's `status.subnets` when it lists them, else the
//! selector terms matched against EC2's answer. Pure, no IO.

use crate::facts::{Observed, SubnetFacts};
use crate::plan::Context;
use crate::verdict::Why;
use crate::wording::list_bounded;
use karpenter_health_api::karpenter::SelectorTerm;

/// Whether one subnet selector term selects `subnet`. A term without fields selects nothing.
pub fn subnet_term_matches(term: &SelectorTerm, subnet: &SubnetFacts) -> bool {
    if term.id.is_none() && term.tags.is_empty() {
        return false;
    }
    term.id.as_deref().is_none_or(|id| id == subnet.id)
        && term.tags.iter().all(|(key, want)| {
            subnet
                .tags
                .get(key)
                .is_some_and(|have| want == "*" || crate::glob_match(want, have))
        })
}

/// The subnet ids Karpenter's status lists for the class (empty when it lists none).
pub fn status_subnet_ids(class: &karpenter_health_api::karpenter::EC2NodeClass) -> Vec<String> {
    let mut ids: Vec<String> = class
        .status
        .as_ref()
        .map(|s| s.subnets.iter().map(|s| s.id.clone()).collect())
        .unwrap_or_default();
    ids.sort();
    ids.dedup();
    ids
}

/// The selected subnets, or the failure/unknown that stops the check.
pub(crate) enum Selection<'a> {
    Subnets(Vec<&'a SubnetFacts>),
    Unknown(Why),
    /// Nothing is selected, or status names subnets that are gone: (message, missing ids).
    NotFound(String, Vec<String>),
}

/// Resolves the class's subnets from the facts (shared with `NodeNetworkReady`).
pub(crate) fn selection<'a>(ctx: &Context<'a>) -> Selection<'a> {
    let class = &ctx.facts.cluster.node_class;
    let subnets: &[SubnetFacts] = match &ctx.facts.aws.subnets {
        Observed::Unknown(u) => {
            return Selection::Unknown(Why::unobserved("The EC2NodeClass's subnets", u));
        }
        Observed::Absent => &[],
        Observed::Found(s) => s,
    };
    let in_status = status_subnet_ids(class);
    let mut selected: Vec<&SubnetFacts> = if in_status.is_empty() {
        let terms = &class.spec.subnet_selector_terms;
        subnets
            .iter()
            .filter(|s| terms.iter().any(|t| subnet_term_matches(t, s)))
            .collect()
    } else {
        subnets
            .iter()
            .filter(|s| in_status.binary_search(&s.id).is_ok())
            .collect()
    };
    selected.sort_by(|a, b| a.id.cmp(&b.id));
    selected.dedup_by(|a, b| a.id == b.id);
    if !in_status.is_empty() {
        let missing: Vec<String> = in_status
            .iter()
            .filter(|id| !selected.iter().any(|s| &&s.id == id))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Selection::NotFound(
                format!(
                    "Subnet {} in Karpenter's status.subnets does not exist, so launches into it \
                     fail.",
                    list_bounded(&missing, 5)
                ),
                missing,
            );
        }
    } else if selected.is_empty() {
        let terms = class.spec.subnet_selector_terms.len();
        return Selection::NotFound(
            if terms == 0 {
                "The EC2NodeClass has no subnet selector terms, so Karpenter cannot launch nodes."
                    .to_owned()
            } else {
                format!(
                    "The {terms} subnet selector term(s) match no subnet, so Karpenter cannot \
                     launch nodes."
                )
            },
            Vec::new(),
        );
    }
    Selection::Subnets(selected)
}

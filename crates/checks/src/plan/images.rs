//! Which images a class selects by id, and which Karpenter resolved and still launches from.
//! Pure, no IO.

use crate::plan::Context;
use karpenter_health_api::ConditionStatus;
use karpenter_health_api::karpenter::EC2NodeClass;
use std::collections::BTreeSet;

/// The image ids the class names in `amiSelectorTerms[].id`.
pub(crate) fn id_terms(class: &EC2NodeClass) -> Vec<String> {
    class
        .spec
        .ami_selector_terms
        .iter()
        .filter_map(|t| t.id.as_deref().map(str::trim))
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The images to describe: the id terms' and those in `status.amis`, sorted, once each.
pub fn image_ids(class: &EC2NodeClass) -> Vec<String> {
    let mut ids: BTreeSet<String> = id_terms(class).into_iter().collect();
    if let Some(status) = &class.status {
        ids.extend(status.amis.iter().map(|a| a.id.clone()));
    }
    ids.into_iter().collect()
}

/// The images Karpenter still launches from, when it resolved some for the class's current
/// generation and has not marked them unusable: `status.amis` non-empty and `AMIsReady` True
/// for this generation (a condition without `observedGeneration`, as older releases write it,
/// counts as current). Listed for a message; `None` when Karpenter holds none.
pub(crate) fn images_karpenter_keeps(ctx: &Context) -> Option<String> {
    let class = &ctx.facts.cluster.node_class;
    let amis = &class.status.as_ref()?.amis;
    let ready = ctx.karpenter_condition("AMIsReady")?;
    let current = ready
        .observed_generation
        .is_none_or(|g| Some(g) == class.metadata.generation);
    if amis.is_empty() || ConditionStatus::parse(&ready.status) != ConditionStatus::True || !current
    {
        return None;
    }
    let ids: Vec<String> = amis.iter().map(|a| a.id.clone()).collect();
    Some(crate::wording::list_bounded(&ids, 3))
}

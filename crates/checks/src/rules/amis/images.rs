//! `AmisResolvable`'s reading of EC2 DescribeImages: the images a class names by id and those
//! Karpenter resolved for it, as EC2 has them now. Pure: no IO.
//!
//! - An image EC2 does not return (it asks with `IncludeDeprecated` and `IncludeDisabled`) is
//!   deregistered or no longer shared with the account; a `disabled` one cannot launch either
//!   (EC2 User Guide, "Disable an AMI"). When every term is an id and none of their images can
//!   launch, nothing resolves: False. Karpenter's own `AMIsReady` then says only that no image
//!   matched; this says which image and why. Otherwise (other terms or other images remain) a
//!   warning: Karpenter resolves again and launches from the rest.
//! - An image EC2 deprecates within [`DEPRECATION_AHEAD`] is a warning: deprecated images still
//!   launch (Karpenter queries with `IncludeDeprecated`, `pkg/providers/amifamily/ami.go`).

use crate::facts::{ImageFacts, Observed};
use crate::plan::Context;
use crate::plan::images::id_terms;
use crate::verdict::{Check, Why};
use crate::warnings::Warning;
use jiff::{SignedDuration, Timestamp};
use karpenter_health_api::Reason;
use karpenter_health_api::karpenter::EC2NodeClass;
use std::collections::BTreeMap;

/// How far ahead a deprecation is worth a warning.
pub const DEPRECATION_AHEAD: SignedDuration = SignedDuration::from_hours(30 * 24);

/// Every term is an `id` term: no other term can resolve an image in their place.
fn ids_only(class: &EC2NodeClass) -> bool {
    let terms = &class.spec.ami_selector_terms;
    !terms.is_empty() && terms.iter().all(|t| t.id.is_some())
}

/// The image states in which EC2 launches nothing from an image for good (EC2 API reference,
/// `ImageState`). `pending` and `transient` may yet become available, and a state EC2 adds
/// later is not known to block: neither is judged.
const CANNOT_LAUNCH: [&str; 5] = ["disabled", "deregistered", "failed", "invalid", "error"];

/// Why an image cannot launch, per EC2's answer; `None` when it can or may.
fn unusable(id: &str, answered: &BTreeMap<&str, &ImageFacts>) -> Option<String> {
    match answered.get(id) {
        None => Some(format!(
            "{id} is deregistered or no longer shared with this account"
        )),
        Some(image) if CANNOT_LAUNCH.contains(&image.state.as_str()) => {
            Some(format!("{} is {}", label(image), image.state))
        }
        Some(_) => None,
    }
}

fn label(image: &ImageFacts) -> String {
    match &image.name {
        Some(name) => format!("{} ({name})", image.id),
        None => image.id.clone(),
    }
}

/// Judges the images EC2 described; adds to `ok` what it verified.
pub(super) fn images_usable(ctx: &Context, c: &mut Check, ok: &mut Vec<String>) {
    let class = &ctx.facts.cluster.node_class;
    let answered = match &ctx.facts.aws.images {
        None => return,
        Some(Observed::Found(images)) => images,
        // Only a class naming images by id alone can be False; for any other the read adds
        // warnings, which are left unsaid.
        Some(Observed::Unknown(u)) if ids_only(class) => {
            return c.unknown(Why::unobserved(
                "The images the selector terms name (EC2 DescribeImages)",
                u,
            ));
        }
        Some(_) => return,
    };
    let by_id: BTreeMap<&str, &ImageFacts> = answered.iter().map(|i| (i.id.as_str(), i)).collect();
    let subjects = vec![ctx.node_class_subject()];

    let terms = id_terms(class);
    let gone_terms: Vec<String> = terms.iter().filter_map(|id| unusable(id, &by_id)).collect();
    let mut gone = gone_terms.clone();
    if ids_only(class) && !terms.is_empty() && gone_terms.len() == terms.len() {
        c.fail(
            Reason::AmiUnavailable,
            format!(
                "Every image amiSelectorTerms names is unusable: {}; Karpenter resolves no \
                 image for this EC2NodeClass and launches nothing.",
                crate::wording::list_bounded(&gone_terms, 3)
            ),
            subjects.clone(),
        );
        gone.clear();
    }
    let resolved: Vec<&str> = class
        .status
        .as_ref()
        .map(|s| s.amis.iter().map(|a| a.id.as_str()).collect())
        .unwrap_or_default();
    for id in &resolved {
        if !terms.iter().any(|t| t == id)
            && let Some(why) = unusable(id, &by_id)
        {
            gone.push(format!("{why} (Karpenter still lists it as resolved)"));
        }
    }
    if !gone.is_empty() {
        c.warn(
            Warning::AmiSomeUnavailable,
            format!(
                "{}; the other images of this EC2NodeClass still launch.",
                crate::wording::list_bounded(&gone, 3)
            ),
            subjects.clone(),
        );
    } else if !by_id.is_empty() {
        ok.push(format!(
            "EC2 has its {} image(s) available",
            terms.len().max(resolved.len())
        ));
    }

    let ahead: Vec<String> = answered
        .iter()
        .filter_map(|image| {
            let at = image.deprecation_time?;
            let left = at.duration_since(ctx.now);
            (left > SignedDuration::ZERO && left <= DEPRECATION_AHEAD)
                .then(|| format!("{} on {}", label(image), day(at)))
        })
        .collect();
    if !ahead.is_empty() {
        c.warn(
            Warning::AmiDeprecationAhead,
            format!(
                "EC2 deprecates {} within 30 days; launches go on after that, but AWS stops \
                 patching the image.",
                crate::wording::list_bounded(&ahead, 3)
            ),
            subjects,
        );
    }
}

fn day(t: Timestamp) -> String {
    t.strftime("%Y-%m-%d").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::images::image_ids;
    use karpenter_health_api::karpenter::AmiSelectorTerm;

    fn class(terms: &[AmiSelectorTerm]) -> EC2NodeClass {
        let mut class = EC2NodeClass::new("c", Default::default());
        class.spec.ami_selector_terms = terms.to_vec();
        class
    }

    fn id(id: &str) -> AmiSelectorTerm {
        AmiSelectorTerm {
            id: Some(id.into()),
            ..Default::default()
        }
    }

    #[test]
    fn only_a_class_of_id_terms_alone_cannot_fall_back_to_other_images() {
        assert!(ids_only(&class(&[id("ami-1"), id("ami-2")])));
        let tags = AmiSelectorTerm {
            tags: BTreeMap::from([("team".into(), "a".into())]),
            ..Default::default()
        };
        assert!(!ids_only(&class(&[id("ami-1"), tags])));
        assert!(!ids_only(&class(&[])));
    }

    #[test]
    fn the_ids_described_are_the_terms_and_the_resolved_images_once_each() {
        let mut c = class(&[id("ami-2"), id(" ami-1 ")]);
        c.status = Some(Default::default());
        if let Some(s) = c.status.as_mut() {
            s.amis = vec![karpenter_health_api::karpenter::ResolvedAmi {
                id: "ami-2".into(),
                ..Default::default()
            }];
        }
        assert_eq!(image_ids(&c), vec!["ami-1".to_owned(), "ami-2".to_owned()]);
    }

    #[test]
    fn only_states_that_never_launch_and_missing_images_are_unusable() {
        let in_state = |state: &str| ImageFacts {
            id: "ami-1".into(),
            state: state.into(),
            ..Default::default()
        };
        for state in ["available", "pending", "transient", "", "some-future-state"] {
            let image = in_state(state);
            assert_eq!(
                unusable("ami-1", &BTreeMap::from([("ami-1", &image)])),
                None,
                "{state}"
            );
        }
        for state in CANNOT_LAUNCH {
            let image = in_state(state);
            assert!(
                unusable("ami-1", &BTreeMap::from([("ami-1", &image)])).is_some(),
                "{state}"
            );
        }
        let pending = in_state("pending");
        let answered = BTreeMap::from([("ami-1", &pending)]);
        assert!(
            unusable("ami-9", &answered)
                .is_some_and(|why| why.contains("deregistered or no longer shared"))
        );
    }
}

//! Which NodePools Karpenter may make a NodeClaim of for a pending Pod, and on which it counts a
//! DaemonSet, from the Pod's node selector, required node affinity and tolerations against the
//! NodePool's template. Pure: no IO.
//!
//! Karpenter's scheduler tries a Pod on a NodePool only if the Pod tolerates every taint of the
//! NodePool's template and the Pod's requirements are compatible with the template's
//! (kubernetes-sigs/karpenter `pkg/controllers/provisioning/scheduling/nodeclaim.go` `CanAdd`).
//! The template's requirements are `spec.template.spec.requirements`, its labels, and the labels
//! the release adds (`scheduling/nodeclaimtemplate.go` `NewNodeClaimTemplate`;
//! [`KarpenterRelease::template_labels`]). Compatible means (`pkg/scheduling/requirements.go`
//! `Compatible`, modelled exactly in [`crate::requirements`]): every label the Pod requires must be
//! defined by the template unless it is one of the release's well-known labels
//! ([`KarpenterRelease::well_known`]: Karpenter's short list, not whole domains) or the Pod asks
//! for it with `NotIn` or `DoesNotExist`, and every label both define must have a value in common.
//! A Pod's requirements are its node selector and one required-affinity term at a time: Karpenter
//! relaxes to the next term when one fails (`scheduling/preferences.go`); preferences are relaxed
//! away, and a `PreferNoSchedule` taint is tolerated when relaxing.
//!
//! Two questions, with opposite safe sides. For a pending Pod, *may* Karpenter take it on a
//! NodePool ([`NodeClaimTemplate::may_take`]): what the model cannot decide (an unknown operator,
//! a release not known) lets it. For a DaemonSet, does Karpenter *certainly* count it on the
//! NodePool's nodes ([`NodeClaimTemplate::certainly_counts`]): what the model cannot decide does
//! not count. Karpenter relaxes a DaemonSet's required terms on the Pod object it shares across
//! NodePools and instance types (`scheduler.go` `isDaemonPodCompatible` removes the first term
//! in place, never the last), so with several terms only the last one is certain to be tried.

use crate::facts::{PodScheduling, Toleration};
use crate::karpenter_release::{KarpenterRelease, Sure};
use crate::requirements::{Requirement, Requirements};
use karpenter_health_api::karpenter::{NodePool, Requirement as Written, Taint};
use std::collections::BTreeSet;

pub use crate::karpenter_release::NODE_CLASS_LABEL;

/// What a NodeClaim of one NodePool would be, as Karpenter's scheduler compares Pods with it.
#[derive(Debug)]
pub struct NodeClaimTemplate<'a> {
    pub node_pool: &'a str,
    /// The EC2NodeClass it launches from (`None` when the NodePool names none).
    pub node_class: Option<&'a str>,
    /// Its requirements as each possible release builds them (one when the release is known).
    variants: Vec<Requirements>,
    /// Keys the NodePool constrains with an operator the model does not know: anything may hold.
    unjudged_keys: BTreeSet<String>,
    /// The template's taints.
    taints: Vec<&'a Taint>,
    release: KarpenterRelease,
    sure: Sure,
}

/// A Pod's requirements: its node selector with one required term and, where Karpenter treats it
/// as required, one preferred term (`scheduling.NewPodRequirements`); `None` when a requirement's
/// operator is one the model does not know.
fn pod_requirements(
    pod: &PodScheduling,
    term: Option<&[Written]>,
    preferred: Option<&[Written]>,
) -> Option<Requirements> {
    let mut r = Requirements::default();
    for (k, v) in &pod.node_selector {
        r.add(k, Requirement::single(v));
    }
    for w in preferred
        .into_iter()
        .flatten()
        .chain(term.into_iter().flatten())
    {
        r.add(&w.key, Requirement::new(&w.operator, &w.values)?);
    }
    Some(r)
}

impl<'a> NodeClaimTemplate<'a> {
    /// The template of `pool` for whichever release is installed: Pods "may" go where some release
    /// may take them.
    pub fn of(pool: &'a NodePool) -> Self {
        Self::for_release(pool, &KarpenterRelease::unknown(), Sure::May)
    }

    /// The template of `pool` as `release` builds it, answering with `sure`'s certainty.
    pub fn for_release(pool: &'a NodePool, release: &KarpenterRelease, sure: Sure) -> Self {
        let template = &pool.spec.template;
        let node_pool = pool.metadata.name.as_deref().unwrap_or_default();
        let node_class = template
            .spec
            .node_class_ref
            .as_ref()
            .map(|r| r.name.as_str());
        let mut requirements = Requirements::default();
        let mut unjudged_keys = BTreeSet::new();
        for (k, v) in &template.metadata.labels {
            requirements.add(k, Requirement::single(v));
        }
        for r in &template.spec.requirements {
            match Requirement::new(&r.operator, &r.values) {
                Some(req) => requirements.add(&r.key, req),
                None => {
                    unjudged_keys.insert(crate::requirements::normalized(&r.key).to_owned());
                }
            }
        }
        let variants = release
            .template_labels(node_pool, node_class)
            .into_iter()
            .map(|labels| {
                let mut r = requirements.clone();
                for (k, v) in labels {
                    r.add(k, Requirement::single(&v));
                }
                r
            })
            .collect();
        let taints = template.spec.taints.iter().collect();
        Self {
            node_pool,
            node_class,
            variants,
            unjudged_keys,
            taints,
            release: release.clone(),
            sure,
        }
    }

    /// Whether Karpenter may make a NodeClaim of this NodePool for `pod`: `false` only when a
    /// taint it does not tolerate or a requirement it cannot meet rules it out in every term.
    /// A `PreferNoSchedule` taint rules out only the terms before the last: Karpenter tolerates
    /// it once it has relaxed every other term away.
    pub fn may_take(&self, pod: &PodScheduling) -> bool {
        self.may_take_but_for(pod, |_| false)
    }

    /// [`Self::may_take`] with the Pod's requirements on keys `ignored` says left out: whether
    /// only those keys keep the Pod off this NodePool.
    pub fn may_take_but_for(&self, pod: &PodScheduling, ignored: impl Fn(&str) -> bool) -> bool {
        if !self.tolerated_by(&pod.tolerations, Sure::May, true) {
            return false;
        }
        let admitted = |term: Option<&[Written]>| {
            let Some(wanted) = pod_requirements(pod, term, None) else {
                return true;
            };
            self.compatible(&wanted, &ignored) != Some(false)
        };
        // Karpenter relaxes the required terms first and tolerates a `PreferNoSchedule` taint
        // only after them (kubernetes-sigs/karpenter `scheduling/preferences.go` `Relax`): a term
        // before the last never lands on a NodePool with such a taint the Pod does not tolerate.
        let strictly_tolerated = self.tolerated_by(&pod.tolerations, Sure::May, false);
        let last = pod.required_affinity.len().saturating_sub(1);
        if pod.required_affinity.is_empty() {
            admitted(None)
        } else {
            pod.required_affinity.iter().enumerate().any(|(i, term)| {
                (i == last || strictly_tolerated) && admitted(Some(term.as_slice()))
            })
        }
    }

    /// Whether Karpenter certainly counts a DaemonSet whose Pod is `pod` on this NodePool's nodes
    /// (up to v1.13), or, from v1.14, on the instance types `also` admits too: its taints are
    /// tolerated and its requirements are compatible, as each possible release compares them.
    /// From v1.1.5 (`isDaemonPodCompatible`) its required terms are tried in turn and only the
    /// last one is certain (see the module); `PreferNoSchedule` is tolerated. Before,
    /// `getDaemonOverhead` compares its node selector, first required term and heaviest
    /// preferred term at once and a `PreferNoSchedule` taint must be tolerated.
    pub fn certainly_counts(
        &self,
        pod: &PodScheduling,
        also: impl Fn(&Requirements) -> Option<bool>,
    ) -> bool {
        let counts = |relaxed: bool| {
            if !self.tolerated_by(&pod.tolerations, Sure::Certainly, relaxed) {
                return false;
            }
            let wanted = if relaxed {
                pod_requirements(pod, pod.required_affinity.last().map(Vec::as_slice), None)
            } else {
                pod_requirements(
                    pod,
                    pod.required_affinity.first().map(Vec::as_slice),
                    pod.preferred_affinity.first().map(Vec::as_slice),
                )
            };
            let Some(wanted) = wanted else {
                return false;
            };
            self.compatible(&wanted, &|_| false) == Some(true) && also(&wanted) == Some(true)
        };
        match self.release.daemon_terms_relaxed() {
            Some(relaxed) => counts(relaxed),
            None => counts(true) && counts(false),
        }
    }

    /// Whether the template admits `wanted` (its keys `ignored` left out): `None` when a key the
    /// NodePool constrains with an unknown operator is involved.
    fn compatible(&self, wanted: &Requirements, ignored: &impl Fn(&str) -> bool) -> Option<bool> {
        let mut kept = Requirements::default();
        for key in wanted.keys() {
            if ignored(key) {
                continue;
            }
            if self.unjudged_keys.contains(key) {
                return None;
            }
            if let Some(r) = wanted.get(key) {
                kept.add(key, r.clone());
            }
        }
        // Some release may take it, or every release certainly does.
        let sure = self.sure;
        let admits = |r: &Requirements| {
            r.compatible(&kept, |k| self.release.well_known(k, sure))
                .is_ok()
        };
        Some(match sure {
            Sure::May => self.variants.iter().any(admits),
            Sure::Certainly => self.variants.iter().all(admits),
        })
    }

    /// Whether `tolerations` tolerate every taint of the template, `PreferNoSchedule` ones
    /// included unless `relaxed` (Karpenter then tolerates them).
    fn tolerated_by(&self, tolerations: &[Toleration], sure: Sure, relaxed: bool) -> bool {
        self.taints
            .iter()
            .filter(|taint| !(relaxed && taint.effect == "PreferNoSchedule"))
            .all(|taint| tolerations.iter().any(|t| tolerates(t, taint, sure)))
    }
}

/// Whether the Karpenter controller certainly refuses `pod` before scheduling it, whichever of
/// `rules` it follows (kubernetes-sigs/karpenter `provisioning/provisioner.go` `Validate`, which
/// ignores a Pod with "ignoring pod"): a key of its node selector or of any required term is one
/// its label rules reject (`v1.IsRestrictedLabel`), or it requires `karpenter.sh/nodepool` not
/// to exist. Such a Pod waits whatever the NodePools offer: it is `LabelsAllowed`'s to report.
pub fn refused_before_scheduling(pod: &PodScheduling, rules: &[crate::labels::LabelRules]) -> bool {
    let requirement = crate::labels::KeyContext::Requirement;
    let keys = pod
        .node_selector
        .keys()
        .chain(pod.required_affinity.iter().flatten().map(|r| &r.key));
    let avoids_karpenter = pod
        .required_affinity
        .first()
        .into_iter()
        .flatten()
        .any(|r| {
            r.key == karpenter_health_api::karpenter::NODEPOOL_LABEL && r.operator == "DoesNotExist"
        });
    avoids_karpenter
        || keys.into_iter().any(|key| {
            crate::labels::LabelRules::rejected_by_all(rules, key, requirement).is_some()
        })
}

/// The NodePools among `templates` that may take `pod`, when there is one and every one of them
/// is `held` (stopped by its limits, allowing no instance type): the Pod waits on exactly them.
/// `None` when none may take it, or one that may is not held.
pub fn held_by<'a>(
    templates: &[NodeClaimTemplate<'a>],
    pod: &PodScheduling,
    held: impl Fn(&str) -> bool,
) -> Option<Vec<&'a str>> {
    let its: Vec<&str> = templates
        .iter()
        .filter(|t| t.may_take(pod))
        .map(|t| t.node_pool)
        .collect();
    (!its.is_empty() && its.iter().all(|n| held(n))).then_some(its)
}

/// Kubernetes' rule (`k8s.io/api/core/v1` `Toleration.ToleratesTaint`): the effect matches (or
/// the toleration names none), the key matches (or is empty with `Exists`), and with `Equal` the
/// value matches. An operator this model does not know may tolerate, never certainly.
fn tolerates(t: &Toleration, taint: &Taint, sure: Sure) -> bool {
    if !t.effect.is_empty() && t.effect != taint.effect {
        return false;
    }
    if !t.key.is_empty() && t.key != taint.key {
        return false;
    }
    match t.operator.as_str() {
        "Exists" => true,
        "" | "Equal" => t.value == taint.value.as_deref().unwrap_or_default(),
        _ => sure == Sure::May,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pool(spec: serde_json::Value) -> NodePool {
        serde_json::from_value(json!({
            "metadata": {"name": "batch"},
            "spec": {"template": spec}
        }))
        .unwrap()
    }

    fn pod(selector: &[(&str, &str)]) -> PodScheduling {
        PodScheduling {
            node_selector: selector
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..PodScheduling::default()
        }
    }

    fn req(key: &str, operator: &str, values: &[&str]) -> Written {
        Written {
            key: key.into(),
            operator: operator.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }

    fn batch() -> NodePool {
        pool(json!({
            "metadata": {"labels": {"team": "batch"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
            }
        }))
    }

    #[test]
    fn a_custom_label_must_be_defined_by_the_template_a_well_known_one_need_not() {
        let batch = batch();
        let t = NodeClaimTemplate::of(&batch);
        assert!(t.may_take(&pod(&[])));
        assert!(t.may_take(&pod(&[("team", "batch")])), "its template label");
        assert!(!t.may_take(&pod(&[("team", "web")])), "another value");
        assert!(
            !t.may_take(&pod(&[("eks.amazonaws.com/nodegroup", "ng-1")])),
            "a label no NodePool defines: Karpenter says it has no known values"
        );
        assert!(
            t.may_take(&pod(&[("topology.kubernetes.io/zone", "eu-west-1a")])),
            "well-known"
        );
        assert!(!t.may_take(&pod(&[("kubernetes.io/arch", "arm64")])));
        assert!(t.may_take(&pod(&[("karpenter.sh/nodepool", "batch")])));
        assert!(!t.may_take(&pod(&[("karpenter.sh/nodepool", "gpu")])));
        assert!(t.may_take(&pod(&[(NODE_CLASS_LABEL, "default")])));
        assert!(!t.may_take(&pod(&[(NODE_CLASS_LABEL, "gpu")])));
    }

    #[test]
    fn not_in_and_does_not_exist_on_an_undefined_label_are_met() {
        let batch = batch();
        let t = NodeClaimTemplate::of(&batch);
        let with = |term: Vec<Written>| PodScheduling {
            required_affinity: vec![term],
            ..PodScheduling::default()
        };
        assert!(t.may_take(&with(vec![req("dedicated", "NotIn", &["gpu"])])));
        assert!(t.may_take(&with(vec![req("dedicated", "DoesNotExist", &[])])));
        assert!(!t.may_take(&with(vec![req("dedicated", "Exists", &[])])));
        assert!(!t.may_take(&with(vec![req("team", "DoesNotExist", &[])])));
        assert!(!t.may_take(&with(vec![req("team", "NotIn", &["batch"])])));
        // `Gt` is a bound on an integer; "batch" is none (Karpenter's `withinBounds`).
        assert!(!t.may_take(&with(vec![req("team", "Gt", &["1"])])));
        assert!(
            t.may_take(&with(vec![req("team", "Near", &["1"])])),
            "an operator not modelled: may"
        );
    }

    #[test]
    fn any_required_term_may_be_the_one_karpenter_uses() {
        let batch = batch();
        let t = NodeClaimTemplate::of(&batch);
        let pod = PodScheduling {
            required_affinity: vec![
                vec![req("team", "In", &["web"])],
                vec![req("team", "In", &["batch", "web"])],
            ],
            ..PodScheduling::default()
        };
        assert!(t.may_take(&pod));
        let neither = PodScheduling {
            required_affinity: vec![vec![req("team", "In", &["web"])]],
            ..PodScheduling::default()
        };
        assert!(!t.may_take(&neither));
    }

    #[test]
    fn a_template_label_narrows_the_requirement_on_the_same_key() {
        let p = pool(json!({
            "metadata": {"labels": {"team": "a"}},
            "spec": {"requirements": [{"key": "team", "operator": "In", "values": ["a", "b"]}]}
        }));
        let t = NodeClaimTemplate::of(&p);
        assert!(t.may_take(&pod(&[("team", "a")])));
        assert!(!t.may_take(&pod(&[("team", "b")])));
        let exists = pool(json!({
            "spec": {"requirements": [{"key": "team", "operator": "Exists"}]}
        }));
        assert!(NodeClaimTemplate::of(&exists).may_take(&pod(&[("team", "any")])));
    }

    #[test]
    fn a_taint_must_be_tolerated_unless_it_is_only_a_preference() {
        let tainted = pool(json!({
            "spec": {"taints": [
                {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
                {"key": "spot", "effect": "PreferNoSchedule"}
            ]}
        }));
        let t = NodeClaimTemplate::of(&tainted);
        assert!(!t.may_take(&pod(&[])));
        let tolerating = |key: &str, operator: &str, value: &str, effect: &str| PodScheduling {
            tolerations: vec![Toleration {
                key: key.into(),
                operator: operator.into(),
                value: value.into(),
                effect: effect.into(),
            }],
            ..PodScheduling::default()
        };
        assert!(t.may_take(&tolerating("nvidia.com/gpu", "Equal", "true", "NoSchedule")));
        assert!(t.may_take(&tolerating("nvidia.com/gpu", "Exists", "", "")));
        assert!(
            t.may_take(&tolerating("", "Exists", "", "")),
            "tolerates all"
        );
        assert!(!t.may_take(&tolerating("nvidia.com/gpu", "Equal", "false", "")));
        assert!(!t.may_take(&tolerating("nvidia.com/gpu", "Exists", "", "NoExecute")));
    }

    #[test]
    fn a_prefer_no_schedule_taint_is_tolerated_only_for_the_last_required_term() {
        // Karpenter tries `arch In [amd64]` without tolerating the taint, relaxes it away, and
        // tolerates the taint only with `team In [b]` left, which this NodePool cannot meet.
        let spot = pool(
            json!({"spec": {"taints": [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]}}),
        );
        let t = NodeClaimTemplate::of(&spot);
        let term = |key: &str, value: &str| {
            vec![Written {
                key: key.into(),
                operator: "In".into(),
                values: vec![value.into()],
                min_values: None,
            }]
        };
        let two_terms = |first: (&str, &str), last: (&str, &str)| PodScheduling {
            required_affinity: vec![term(first.0, first.1), term(last.0, last.1)],
            ..PodScheduling::default()
        };
        assert!(!t.may_take(&two_terms(("kubernetes.io/arch", "amd64"), ("team", "b"))));
        assert!(t.may_take(&two_terms(("team", "b"), ("kubernetes.io/arch", "amd64"))));
        assert!(t.may_take(&PodScheduling {
            required_affinity: vec![term("kubernetes.io/arch", "amd64")],
            ..PodScheduling::default()
        }));
    }
}

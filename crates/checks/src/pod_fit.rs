//! Which NodePools Karpenter may make a NodeClaim of for a pending Pod, from the Pod's node
//! selector, required node affinity and tolerations against the NodePool's template. Pure: no IO.
//!
//! Karpenter's scheduler tries a Pod on a NodePool only if the Pod tolerates every taint of the
//! NodePool's template and the Pod's requirements are compatible with the template's
//! (kubernetes-sigs/karpenter `pkg/controllers/provisioning/scheduling/nodeclaim.go` `CanAdd`).
//! The template's requirements are `spec.template.spec.requirements` and its labels: the template
//! labels, `karpenter.sh/nodepool` and the class label (`scheduling/nodeclaimtemplate.go`
//! `NewNodeClaimTemplate`). Compatible means: every label the Pod requires that is not one of
//! Karpenter's well-known labels must be defined by the template, unless the Pod asks for it with
//! `NotIn` or `DoesNotExist`, and every key both define must have a value in common
//! (`pkg/scheduling/requirements.go` `Compatible`, `Intersects`).
//!
//! The answer errs on the side of "may": a NodePool is ruled out only when one of those rules
//! certainly refuses the Pod. Labels under a Kubernetes, Karpenter or AWS-provider domain are
//! treated as well-known (Karpenter's list is a subset of them), `Gt` and `Lt` and operators the
//! model does not know admit everything, each required-affinity term is tried (Karpenter relaxes
//! to the next term when one fails, `scheduling/preferences.go`), preferences are ignored (they
//! are relaxed away), and a `PreferNoSchedule` taint is never a reason (Karpenter tolerates it
//! when relaxing).

use crate::facts::{PodScheduling, Toleration};
use karpenter_health_api::karpenter::{NODEPOOL_LABEL, NodePool, Requirement, Taint};
use std::collections::{BTreeMap, BTreeSet};

/// The label naming the EC2NodeClass a NodeClaim is launched from.
pub const NODE_CLASS_LABEL: &str = "karpenter.k8s.aws/ec2nodeclass";

/// Domains whose labels Karpenter may know without a NodePool defining them: its well-known
/// labels (`pkg/apis/v1/labels.go` `WellKnownLabels`, and the AWS provider's additions in
/// aws/karpenter-provider-aws `pkg/apis/v1/labels.go`) all live under these.
const WELL_KNOWN_DOMAINS: [&str; 4] = ["kubernetes.io", "k8s.io", "karpenter.sh", "k8s.aws"];

fn is_well_known(key: &str) -> bool {
    let Some((domain, _)) = key.split_once('/') else {
        return false;
    };
    WELL_KNOWN_DOMAINS
        .iter()
        .any(|d| domain == *d || domain.ends_with(&format!(".{d}")))
}

/// What the template allows for one key, after every requirement on it.
#[derive(Clone, Debug, PartialEq)]
enum Allowed<'a> {
    In(BTreeSet<&'a str>),
    NotIn(BTreeSet<&'a str>),
    Exists,
    DoesNotExist,
    /// An operator (`Gt`, `Lt`, unknown) or combination not modelled: admits anything.
    Anything,
}

impl<'a> Allowed<'a> {
    fn of(r: &'a Requirement) -> Self {
        let values = || r.values.iter().map(String::as_str).collect();
        match r.operator.as_str() {
            "In" => Self::In(values()),
            "NotIn" => Self::NotIn(values()),
            "Exists" => Self::Exists,
            "DoesNotExist" => Self::DoesNotExist,
            _ => Self::Anything,
        }
    }

    /// Both at once, as Karpenter adds requirements on one key to each other.
    fn and(self, other: Self) -> Self {
        use Allowed::*;
        match (self, other) {
            (Anything, _) | (_, Anything) => Anything,
            (In(a), In(b)) => In(a.intersection(&b).copied().collect()),
            (In(a), NotIn(b)) | (NotIn(b), In(a)) => In(a.difference(&b).copied().collect()),
            (NotIn(a), NotIn(b)) => NotIn(a.union(&b).copied().collect()),
            (In(a), Exists) | (Exists, In(a)) => In(a),
            (NotIn(a), Exists) | (Exists, NotIn(a)) => NotIn(a),
            (Exists, Exists) => Exists,
            (DoesNotExist, DoesNotExist) => DoesNotExist,
            (DoesNotExist, NotIn(_)) | (NotIn(_), DoesNotExist) => DoesNotExist,
            (DoesNotExist, _) | (_, DoesNotExist) => In(BTreeSet::new()),
        }
    }

    /// Whether a Pod's requirement `r` on the same key has a value in common with this one.
    fn admits(&self, r: &Requirement) -> bool {
        use Allowed::*;
        match (self, &Allowed::of(r)) {
            (Anything, _) | (_, Anything) => true,
            (In(a), In(b)) => a.intersection(b).next().is_some(),
            (In(a), NotIn(b)) => a.difference(b).next().is_some(),
            (In(a), Exists) => !a.is_empty(),
            (In(_), DoesNotExist) => false,
            (NotIn(a), In(b)) => b.difference(a).next().is_some(),
            (NotIn(_), _) => true,
            (Exists, DoesNotExist) => false,
            (Exists, _) => true,
            (DoesNotExist, In(_) | Exists) => false,
            (DoesNotExist, _) => true,
        }
    }
}

/// What a NodeClaim of one NodePool would be, as Karpenter's scheduler compares Pods with it.
#[derive(Debug)]
pub struct NodeClaimTemplate<'a> {
    pub node_pool: &'a str,
    /// The EC2NodeClass it launches from (`None` when the NodePool names none).
    pub node_class: Option<&'a str>,
    allowed: BTreeMap<&'a str, Allowed<'a>>,
    taints: Vec<&'a Taint>,
}

impl<'a> NodeClaimTemplate<'a> {
    pub fn of(pool: &'a NodePool) -> Self {
        let template = &pool.spec.template;
        let node_pool = pool.metadata.name.as_deref().unwrap_or_default();
        let node_class = template
            .spec
            .node_class_ref
            .as_ref()
            .map(|r| r.name.as_str());
        let mut allowed: BTreeMap<&'a str, Allowed<'a>> = BTreeMap::new();
        let mut add = |key: &'a str, a: Allowed<'a>| {
            let merged = match allowed.remove(key) {
                Some(existing) => existing.and(a),
                None => a,
            };
            allowed.insert(key, merged);
        };
        for r in &template.spec.requirements {
            add(r.key.as_str(), Allowed::of(r));
        }
        let one = |v: &'a str| Allowed::In(BTreeSet::from([v]));
        for (k, v) in &template.metadata.labels {
            add(k.as_str(), one(v.as_str()));
        }
        add(NODEPOOL_LABEL, one(node_pool));
        if let Some(class) = node_class {
            add(NODE_CLASS_LABEL, one(class));
        }
        let taints = template
            .spec
            .taints
            .iter()
            .filter(|t| t.effect != "PreferNoSchedule")
            .collect();
        Self {
            node_pool,
            node_class,
            allowed,
            taints,
        }
    }

    /// Whether Karpenter may make a NodeClaim of this NodePool for `pod`: `false` only when a
    /// taint it does not tolerate or a requirement it cannot meet certainly rules it out.
    pub fn may_take(&self, pod: &PodScheduling) -> bool {
        self.tolerated_by(&pod.tolerations)
            && self.compatible(pod.node_selector.iter().map(|(k, v)| Requirement {
                key: k.clone(),
                operator: "In".into(),
                values: vec![v.clone()],
                min_values: None,
            }))
            && (pod.required_affinity.is_empty()
                || pod
                    .required_affinity
                    .iter()
                    .any(|term| self.compatible(term.iter().cloned())))
    }

    fn compatible(&self, requirements: impl IntoIterator<Item = Requirement>) -> bool {
        requirements
            .into_iter()
            .all(|r| match self.allowed.get(r.key.as_str()) {
                Some(allowed) => allowed.admits(&r),
                None => {
                    is_well_known(&r.key) || matches!(r.operator.as_str(), "NotIn" | "DoesNotExist")
                }
            })
    }

    fn tolerated_by(&self, tolerations: &[Toleration]) -> bool {
        self.taints
            .iter()
            .all(|taint| tolerations.iter().any(|t| tolerates(t, taint)))
    }
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
/// value matches. An operator this model does not know tolerates (never rules a NodePool out).
fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if !t.effect.is_empty() && t.effect != taint.effect {
        return false;
    }
    if !t.key.is_empty() && t.key != taint.key {
        return false;
    }
    match t.operator.as_str() {
        "Exists" => true,
        "" | "Equal" => t.value == taint.value.as_deref().unwrap_or_default(),
        _ => true,
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

    fn req(key: &str, operator: &str, values: &[&str]) -> Requirement {
        Requirement {
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
        let with = |term: Vec<Requirement>| PodScheduling {
            required_affinity: vec![term],
            ..PodScheduling::default()
        };
        assert!(t.may_take(&with(vec![req("dedicated", "NotIn", &["gpu"])])));
        assert!(t.may_take(&with(vec![req("dedicated", "DoesNotExist", &[])])));
        assert!(!t.may_take(&with(vec![req("dedicated", "Exists", &[])])));
        assert!(!t.may_take(&with(vec![req("team", "DoesNotExist", &[])])));
        assert!(!t.may_take(&with(vec![req("team", "NotIn", &["batch"])])));
        assert!(
            t.may_take(&with(vec![req("team", "Gt", &["1"])])),
            "not modelled: may"
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
}

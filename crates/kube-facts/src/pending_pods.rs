//! The pending Pods Karpenter would provision for, each kept as the scheduling constraints it
//! copies into NodeClaims (shared, not copied, by every EC2NodeClass that could take it) and the
//! NodePool or EC2NodeClass it pins. Pure: callers feed it the Pods a watch or a list returned.
//!
//! A Pod Karpenter would not provision for (the scheduler has not given up on it yet, a
//! DaemonSet's) is not held, and a change that leaves a Pod's constraints as they were asks for no
//! reconcile: in a scale-up most Pod events are of these kinds.

use crate::index::{SharedIndex, WatchIndex};
use crate::pods::{self, NODE_CLASS_LABEL};
use k8s_openapi::api::core::v1::Pod;
use karpenter_health_api::karpenter::{NODEPOOL_LABEL, NodePool, Requirement};
use karpenter_health_checks::facts::{PodScheduling, Toleration};
use karpenter_health_checks::pod_fit::NodeClaimTemplate;
use kube::ResourceExt;
use std::collections::{BTreeMap, HashMap};

/// What of a Pod decides which NodePools may take it: node selector, required affinity,
/// tolerations.
type Constraints<'a> = (
    &'a BTreeMap<String, String>,
    &'a Vec<Vec<Requirement>>,
    &'a Vec<Toleration>,
);
use std::sync::Arc;

/// What a pending Pod pins by node selector; neither means any EC2NodeClass could take it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodPins {
    pub node_pool: Option<String>,
    pub node_class: Option<String>,
}

#[derive(Debug)]
struct IndexedPod {
    scheduling: Arc<PodScheduling>,
    pins: PodPins,
}

/// Pending Pods by `namespace/name`.
#[derive(Debug, Default)]
pub struct PendingPodIndex {
    pods: HashMap<String, IndexedPod>,
}

fn key_of(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

fn pins_of(pod: &Pod) -> PodPins {
    let selector = pod.spec.as_ref().and_then(|s| s.node_selector.as_ref());
    let pinned = |label: &str| selector.and_then(|s| s.get(label)).cloned();
    PodPins {
        node_pool: pinned(NODEPOOL_LABEL),
        node_class: pinned(NODE_CLASS_LABEL),
    }
}

impl PendingPodIndex {
    /// Builds an index of `pods` (a complete list).
    pub fn of<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Self {
        let mut index = Self::default();
        for pod in pods {
            index.apply(pod);
        }
        index
    }

    /// The pending Pods the EC2NodeClass `name` could take, given every NodePool (its template:
    /// class, labels, requirements, taints), sorted by namespace and name; `only_this_class`
    /// says whether it is the only one (no NodePool of another class may take the Pod).
    pub fn of_class(&self, name: &str, pools: &[&NodePool]) -> Vec<Arc<PodScheduling>> {
        let templates: Vec<NodeClaimTemplate<'_>> =
            pools.iter().map(|p| NodeClaimTemplate::of(p)).collect();
        // Pods of one workload share their constraints: judge each set of constraints once
        // (a storm of a Deployment's Pods is one judgement, not one per Pod and NodePool).
        let mut judged: HashMap<Constraints<'_>, Option<bool>> = HashMap::new();
        let mut pods: Vec<Arc<PodScheduling>> = self
            .pods
            .values()
            .filter_map(|pod| {
                let s = pod.scheduling.as_ref();
                let only = *judged
                    .entry((&s.node_selector, &s.required_affinity, &s.tolerations))
                    .or_insert_with(|| pods::candidacy(s, &templates, name));
                let only = only?;
                // Stored with the guess its pins allow; only a Pod whose NodePools say otherwise
                // needs a copy with the other answer.
                Some(if s.only_this_class == only {
                    pod.scheduling.clone()
                } else {
                    Arc::new(PodScheduling {
                        only_this_class: only,
                        ..s.clone()
                    })
                })
            })
            .collect();
        pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        pods
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }
}

impl WatchIndex for PendingPodIndex {
    type Object = Pod;
    type Touched = PodPins;

    fn apply(&mut self, pod: &Pod) -> Option<PodPins> {
        let key = key_of(pod);
        if !pods::karpenter_provisions_for(pod) {
            return self.pods.remove(&key).map(|gone| gone.pins);
        }
        let pins = pins_of(pod);
        let scheduling = PodScheduling {
            only_this_class: pins.node_pool.is_some() || pins.node_class.is_some(),
            ..pods::pod_scheduling(pod)
        };
        let unchanged = self
            .pods
            .get(&key)
            .is_some_and(|held| *held.scheduling == scheduling && held.pins == pins);
        if unchanged {
            return None;
        }
        let previous = self.pods.insert(
            key,
            IndexedPod {
                scheduling: Arc::new(scheduling),
                pins: pins.clone(),
            },
        );
        // A Pod whose pins changed touches the classes it left too: ask for every class.
        match previous {
            Some(previous) if previous.pins != pins => Some(PodPins::default()),
            _ => Some(pins),
        }
    }

    fn delete(&mut self, pod: &Pod) -> Option<PodPins> {
        self.pods.remove(&key_of(pod)).map(|gone| gone.pins)
    }

    fn relisted() -> PodPins {
        PodPins::default()
    }
}

/// The pending-Pod index a watch keeps current.
pub type SharedPendingPods = SharedIndex<PendingPodIndex>;

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, selector: serde_json::Value, reason: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "apps"},
            "spec": {"containers": [], "nodeSelector": selector},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": reason}]}
        }))
        .unwrap()
    }

    fn node_pool(name: &str, class: &str, labels: serde_json::Value) -> NodePool {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"template": {
                "metadata": {"labels": labels},
                "spec": {"nodeClassRef": {
                    "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class}}
            }}
        }))
        .unwrap()
    }

    fn pools() -> Vec<NodePool> {
        vec![
            node_pool("general", "default", serde_json::json!({})),
            node_pool("gpu", "gpu", serde_json::json!({"team": "ml"})),
        ]
    }

    fn names(pods: &[Arc<PodScheduling>]) -> Vec<(&str, bool)> {
        pods.iter()
            .map(|p| (p.name.as_str(), p.only_this_class))
            .collect()
    }

    #[test]
    fn pods_go_to_the_classes_that_could_take_them_and_are_shared_not_copied() {
        let index = PendingPodIndex::of(&[
            pod("free", serde_json::json!({}), "Unschedulable"),
            pod(
                "pinned-pool",
                serde_json::json!({"karpenter.sh/nodepool": "gpu"}),
                "Unschedulable",
            ),
            pod(
                "pinned-class",
                serde_json::json!({"karpenter.k8s.aws/ec2nodeclass": "default"}),
                "Unschedulable",
            ),
            pod("not-yet", serde_json::json!({}), "SchedulerError"),
        ]);
        assert_eq!(index.len(), 3, "the scheduler has not given up on not-yet");
        let pools = pools();
        let pools: Vec<&NodePool> = pools.iter().collect();
        let default = index.of_class("default", &pools);
        let gpu = index.of_class("gpu", &pools);
        assert_eq!(names(&default), [("free", false), ("pinned-class", true)]);
        assert_eq!(names(&gpu), [("free", false), ("pinned-pool", true)]);
        assert!(
            Arc::ptr_eq(&default[0], &gpu[0]),
            "one copy for both classes"
        );
        // With one class left, an unpinned Pod is that class's alone.
        let general = node_pool("general", "default", serde_json::json!({}));
        assert_eq!(
            names(&index.of_class("default", &[&general])),
            [("free", true), ("pinned-class", true)]
        );
    }

    #[test]
    fn a_pod_that_selects_a_template_label_is_only_for_the_class_of_that_node_pool() {
        let index = PendingPodIndex::of(&[
            pod(
                "trainer",
                serde_json::json!({"team": "ml"}),
                "Unschedulable",
            ),
            pod("web", serde_json::json!({"team": "web"}), "Unschedulable"),
            pod(
                "grouped",
                serde_json::json!({"eks.amazonaws.com/nodegroup": "ng-1"}),
                "Unschedulable",
            ),
        ]);
        let pools = pools();
        let pools: Vec<&NodePool> = pools.iter().collect();
        // Karpenter refuses a custom label a NodePool does not define
        // (kubernetes-sigs/karpenter pkg/scheduling/requirements.go Compatible).
        assert_eq!(names(&index.of_class("gpu", &pools)), [("trainer", true)]);
        assert!(index.of_class("default", &pools).is_empty());
    }

    #[test]
    fn only_changes_of_what_the_checks_read_ask_for_a_reconcile() {
        let mut index = PendingPodIndex::default();
        let pinned = serde_json::json!({"karpenter.sh/nodepool": "gpu"});
        // Pending but not yet given up on by the scheduler: nothing to hold, nothing asked.
        assert_eq!(
            index.apply(&pod("p", pinned.clone(), "SchedulerError")),
            None
        );
        let pins = PodPins {
            node_pool: Some("gpu".into()),
            node_class: None,
        };
        assert_eq!(
            index.apply(&pod("p", pinned.clone(), "Unschedulable")),
            Some(pins.clone())
        );
        // The same constraints again (a status update): nothing asked.
        assert_eq!(
            index.apply(&pod("p", pinned.clone(), "Unschedulable")),
            None
        );
        // Its pins changed: every class is asked (it left one).
        assert_eq!(
            index.apply(&pod("p", serde_json::json!({}), "Unschedulable")),
            Some(PodPins::default())
        );
        assert_eq!(
            index.delete(&pod("p", serde_json::json!({}), "Unschedulable")),
            Some(PodPins::default())
        );
        assert!(index.is_empty());
    }
}

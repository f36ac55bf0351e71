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
use karpenter_health_api::karpenter::NODEPOOL_LABEL;
use karpenter_health_checks::facts::PodScheduling;
use kube::ResourceExt;
use std::collections::{BTreeMap, HashMap};
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

    /// The pending Pods the EC2NodeClass `name` could take, given which class each NodePool
    /// launches from, sorted by namespace and name; `only_this_class` says whether it is the only
    /// one (the Pod pins it, or no other class has a NodePool).
    pub fn of_class(
        &self,
        name: &str,
        class_of_pool: &BTreeMap<String, String>,
    ) -> Vec<Arc<PodScheduling>> {
        let mut pods: Vec<Arc<PodScheduling>> = self
            .pods
            .values()
            .filter_map(|pod| {
                let only = pods::candidacy(
                    pod.pins.node_pool.as_deref(),
                    pod.pins.node_class.as_deref(),
                    class_of_pool,
                    name,
                )?;
                // Stored with the guess its pins allow; only a cluster with a single class and
                // unpinned Pods needs a copy with the other answer.
                Some(if pod.scheduling.only_this_class == only {
                    pod.scheduling.clone()
                } else {
                    Arc::new(PodScheduling {
                        only_this_class: only,
                        ..pod.scheduling.as_ref().clone()
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

    fn pools() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("general".into(), "default".into()),
            ("gpu".into(), "gpu".into()),
        ])
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
        let default = index.of_class("default", &pools());
        let gpu = index.of_class("gpu", &pools());
        assert_eq!(names(&default), [("free", false), ("pinned-class", true)]);
        assert_eq!(names(&gpu), [("free", false), ("pinned-pool", true)]);
        assert!(
            Arc::ptr_eq(&default[0], &gpu[0]),
            "one copy for both classes"
        );
        // With one class left, an unpinned Pod is that class's alone.
        let one_class = BTreeMap::from([("general".into(), "default".into())]);
        assert_eq!(
            names(&index.of_class("default", &one_class)),
            [("free", true), ("pinned-class", true)]
        );
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

//! Which EC2NodeClasses a watched change affects, and when it arrived (for the change-to-status
//! latency). No IO: works on the controller's caches.

use karpenter_health_api::karpenter::{EC2NodeClass, NodePool};
use karpenter_health_kube_facts::KubeFacts;
use karpenter_health_kube_facts::pending_pods::PodPins;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub type NodeClassRef = ObjectRef<DeserializeGuard<EC2NodeClass>>;

/// When a watched change first asked for each EC2NodeClass, until its status is written.
pub type TriggerTimes = Arc<Mutex<HashMap<String, Instant>>>;

/// Turns watched changes into reconcile requests. Cheap to clone: every watch gets its own copy.
#[derive(Clone)]
pub struct ClassTriggers {
    classes: Store<DeserializeGuard<EC2NodeClass>>,
    kube_facts: KubeFacts,
    triggered_at: TriggerTimes,
}

impl std::fmt::Debug for ClassTriggers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClassTriggers").finish_non_exhaustive()
    }
}

impl ClassTriggers {
    pub fn new(
        classes: Store<DeserializeGuard<EC2NodeClass>>,
        kube_facts: KubeFacts,
        triggered_at: TriggerTimes,
    ) -> Self {
        Self {
            classes,
            kube_facts,
            triggered_at,
        }
    }

    /// A mapper for `Controller::watches_stream`: `affected` names the EC2NodeClasses an object
    /// touches (given these triggers), and each request is stamped with its arrival time.
    pub fn mapper<T, F>(&self, affected: F) -> impl Fn(T) -> Vec<NodeClassRef> + use<T, F>
    where
        F: Fn(&Self, T) -> Vec<String>,
    {
        let triggers = self.clone();
        move |object| triggers.mark(affected(&triggers, object))
    }

    fn mark(&self, names: Vec<String>) -> Vec<NodeClassRef> {
        self.stamp(&names);
        names.iter().map(|n| ObjectRef::new(n)).collect()
    }

    /// Records now as when a change first asked for each of `names` (the earliest one stays).
    pub fn stamp(&self, names: &[String]) {
        let now = Instant::now();
        if let Ok(mut map) = self.triggered_at.lock() {
            for name in names {
                map.entry(name.clone()).or_insert(now);
            }
        }
    }

    /// Every EC2NodeClass: for cluster-wide inputs (aws-auth, the Karpenter Deployment, …).
    pub fn all_classes(&self) -> Vec<String> {
        self.classes.state().iter().map(|c| c.name_any()).collect()
    }

    /// The EC2NodeClass a NodePool's template points at.
    pub fn class_of_pool(pool: DeserializeGuard<NodePool>) -> Vec<String> {
        pool.0
            .ok()
            .and_then(|p| p.spec.template.spec.node_class_ref.map(|r| r.name))
            .into_iter()
            .collect()
    }

    /// A pending Pod pinned to a NodePool affects only that pool's EC2NodeClass, one pinned to an
    /// EC2NodeClass only that class; any other, every class.
    /// The EC2NodeClass of the NodeClaim `name`, if it is indexed.
    pub fn class_of_node_claim(&self, name: &str) -> Vec<String> {
        self.kube_facts
            .node_class_of_claim(name)
            .into_iter()
            .collect()
    }

    pub fn classes_of_pending_pod(&self, pins: &PodPins) -> Vec<String> {
        match (&pins.node_pool, &pins.node_class) {
            (Some(pool), _) => self
                .kube_facts
                .node_class_of_pool(pool)
                .into_iter()
                .collect(),
            (None, Some(class)) => vec![class.clone()],
            (None, None) => self.all_classes(),
        }
    }
}

/// The controller's shared trigger backoff, off: each input stream has its own.
#[derive(Debug)]
pub struct NoSharedBackoff;

impl Iterator for NoSharedBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        // `None` would end the trigger stream; zero lets it go on at once.
        Some(Duration::ZERO)
    }
}

impl kube::runtime::utils::Backoff for NoSharedBackoff {
    fn reset(&mut self) {}
}

/// Whether a reflector's first list has completed.
pub trait StoreReady {
    fn is_empty_or_unsynced(&self) -> bool;
}

impl<K: Resource + Clone + 'static> StoreReady for Store<K>
where
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    /// Readiness must not wait for EC2NodeClasses to exist; it only needs the first list done.
    fn is_empty_or_unsynced(&self) -> bool {
        futures::FutureExt::now_or_never(self.wait_until_ready()).is_none()
    }
}

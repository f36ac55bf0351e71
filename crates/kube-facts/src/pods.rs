//! Pending Pods as Karpenter sees them: whether it would provision for one, which EC2NodeClasses
//! could take it, and what of its scheduling constraints it copies into NodeClaim requirements.
//! Pure: works on objects already fetched.

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Pod};
use karpenter_health_api::karpenter::Requirement;
use karpenter_health_checks::facts::PodScheduling;
use kube::ResourceExt;
use std::collections::BTreeMap;

/// The label (and tag) naming the EC2NodeClass a node was launched from.
pub(crate) const NODE_CLASS_LABEL: &str = "karpenter.k8s.aws/ec2nodeclass";

/// Whether Karpenter would provision for a Pending Pod (kubernetes-sigs/karpenter
/// `pkg/utils/pod/scheduling.go` `IsProvisionable`): the scheduler found no node for it
/// (`PodScheduled=False`, reason `Unschedulable`), no scheduling gate holds it, and it is not a
/// DaemonSet's or a static Pod (owned by a Node). A Pod merely Pending for a moment before the
/// scheduler binds it is not one.
pub fn karpenter_provisions_for(pod: &Pod) -> bool {
    let unschedulable = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        });
    let gated = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty());
    let owned_by_daemon_set_or_node = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet" || o.kind == "Node");
    unschedulable && !gated && !owned_by_daemon_set_or_node
}

/// Whether the EC2NodeClass `name` could take a Pod that pins `node_pool` (by
/// `karpenter.sh/nodepool`) and `node_class` (by `karpenter.k8s.aws/ec2nodeclass`), given which
/// class each NodePool launches from: `Some(true)` when it is the only class that could,
/// `Some(false)` when others could too, `None` when it could not. Without pins, every class that
/// has a NodePool could.
pub(crate) fn candidacy(
    node_pool: Option<&str>,
    node_class: Option<&str>,
    class_of_pool: &BTreeMap<String, String>,
    name: &str,
) -> Option<bool> {
    let (mut this, mut others) = (false, false);
    for (pool, class) in class_of_pool {
        if node_pool.is_some_and(|p| p != pool) || node_class.is_some_and(|c| c != class) {
            continue;
        }
        if class == name {
            this = true;
        } else {
            others = true;
        }
    }
    this.then_some(!others)
}

fn requirement(expression: &NodeSelectorRequirement) -> Requirement {
    Requirement {
        key: expression.key.clone(),
        operator: expression.operator.clone(),
        values: expression.values.clone().unwrap_or_default(),
    }
}

/// The match expressions of one node selector term as requirements.
fn requirements(term: &NodeSelectorTerm) -> Vec<Requirement> {
    term.match_expressions
        .iter()
        .flatten()
        .map(requirement)
        .collect()
}

/// What Karpenter copies from a Pod into NodeClaim requirements.
pub fn pod_scheduling(pod: &Pod) -> PodScheduling {
    let spec = pod.spec.as_ref();
    let node_affinity = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref());
    let required = node_affinity
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|selector| {
            selector
                .node_selector_terms
                .iter()
                .map(requirements)
                .collect()
        })
        .unwrap_or_default();
    let preferred = node_affinity
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|terms| terms.iter().map(|t| requirements(&t.preference)).collect())
        .unwrap_or_default();
    PodScheduling {
        only_this_class: true,
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        node_selector: spec
            .and_then(|s| s.node_selector.clone())
            .unwrap_or_default(),
        required_affinity: required,
        preferred_affinity: preferred,
        unschedulable_since: pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0),
        nominated: pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .is_some_and(|n| !n.is_empty()),
    }
}

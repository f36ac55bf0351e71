//! Pending Pods as Karpenter sees them: whether it would provision for one, which EC2NodeClasses
//! could take it, and what of its scheduling constraints it copies into NodeClaim requirements.
//! Pure: works on objects already fetched.

use k8s_openapi::api::core::v1::Pod;
use karpenter_health_checks::facts::PodScheduling;
use karpenter_health_checks::labels::{KeyContext, LabelRules};
use karpenter_health_checks::pod_fit::NodeClaimTemplate;
use kube::ResourceExt;

pub(crate) use karpenter_health_checks::pod_fit::NODE_CLASS_LABEL;

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

/// Whether the EC2NodeClass `name` could take `pod`, given every NodePool's template:
/// `Some(true)` when it is the only class with a NodePool Karpenter may use for the Pod,
/// `Some(false)` when another class has one too, `None` when it has none. A key some release's
/// label rules reject is left out of the question: such a Pod is the class's to report
/// (`LabelsAllowed`), whichever NodePool it would have gone to.
pub(crate) fn candidacy(
    pod: &PodScheduling,
    templates: &[NodeClaimTemplate<'_>],
    name: &str,
) -> Option<bool> {
    let rejected = |key: &str| {
        [LabelRules::UpTo1_8, LabelRules::From1_9]
            .iter()
            .any(|rules| rules.restriction(key, KeyContext::Requirement).is_some())
    };
    let (mut this, mut others) = (false, false);
    for template in templates
        .iter()
        .filter(|t| t.may_take_but_for(pod, rejected))
    {
        if template.node_class == Some(name) {
            this = true;
        } else {
            others = true;
        }
    }
    this.then_some(!others)
}

/// What Karpenter copies from a Pod into NodeClaim requirements.
pub fn pod_scheduling(pod: &Pod) -> PodScheduling {
    let scheduling = karpenter_health_checks::pod_template::scheduling(
        &pod.namespace().unwrap_or_default(),
        &pod.name_any(),
        pod.spec.as_ref(),
    );
    PodScheduling {
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
        ..scheduling
    }
}

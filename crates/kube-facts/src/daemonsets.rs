//! A DaemonSet as Karpenter counts its Pod against a NodePool's nodes: the Pod its template
//! makes (kubernetes-sigs/karpenter `pkg/utils/daemonset` `PodForDaemonSet`), its scheduling
//! constraints and its containers' requests. Pure: works on objects already fetched.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_health_checks::facts::{DaemonSetFacts, PodScheduling};
use karpenter_health_checks::quantity::quantity;

/// The operators whose meaning the NodePool model judges exactly.
const EXACT_REQUIREMENT_OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];
const EXACT_TOLERATION_OPERATORS: [&str; 3] = ["", "Equal", "Exists"];

/// The facts of `daemonset`: its template's Pod as the scheduler sees it, and the sum of its
/// containers' CPU (millicores) and memory (bytes) requests. A request that is no quantity
/// counts as none (the API server refuses such a DaemonSet anyway).
pub fn facts_of(daemonset: &DaemonSet) -> DaemonSetFacts {
    let spec = daemonset
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.clone());
    let (scheduling, constraints_unjudged) = template_scheduling(&daemonset.metadata, spec.clone());
    let requests = |resource: &str| -> f64 {
        spec.iter()
            .flat_map(|s| s.containers.iter())
            .filter_map(|c| c.resources.as_ref()?.requests.as_ref()?.get(resource))
            .filter_map(|q| quantity(&serde_json::Value::String(q.0.clone())))
            .sum()
    };
    DaemonSetFacts {
        cpu_millis: (requests("cpu") * 1000.0).round() as u64,
        memory_bytes: requests("memory").round() as u64,
        constraints_unjudged,
        pod: karpenter_health_checks::facts::PodScheduling {
            // Karpenter ignores a daemon's preferences (`isDaemonPodCompatible`).
            preferred_affinity: Vec::new(),
            only_this_class: false,
            ..scheduling
        },
    }
}

/// The scheduling constraints of the Pods a workload's template `spec` makes (named by the
/// workload's `metadata`), and whether one of them is beyond what the NodePool model judges
/// exactly (an operator such as `Gt`, a toleration operator other than `Equal` or `Exists`).
pub(crate) fn template_scheduling(
    metadata: &ObjectMeta,
    spec: Option<PodSpec>,
) -> (PodScheduling, bool) {
    let pod = Pod {
        metadata: ObjectMeta {
            namespace: metadata.namespace.clone(),
            name: metadata.name.clone(),
            ..Default::default()
        },
        spec,
        status: None,
    };
    let scheduling = crate::pods::pod_scheduling(&pod);
    let constraints_unjudged = scheduling
        .required_affinity
        .iter()
        .flatten()
        .any(|r| !EXACT_REQUIREMENT_OPERATORS.contains(&r.operator.as_str()))
        || scheduling
            .tolerations
            .iter()
            .any(|t| !EXACT_TOLERATION_OPERATORS.contains(&t.operator.as_str()));
    (scheduling, constraints_unjudged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn daemonset(spec: serde_json::Value) -> DaemonSet {
        let mut ds: DaemonSet = serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"namespace": "monitoring", "name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"metadata": {"labels": {"app": "agent"}}, "spec": spec}},
        }))
        .unwrap();
        crate::trim::daemonset(&mut ds);
        ds
    }

    #[test]
    fn the_trimmed_template_keeps_the_requests_and_constraints_karpenter_counts_by() {
        let ds = daemonset(json!({
            "containers": [
                {"name": "agent", "image": "agent:1", "env": [{"name": "A", "value": "1"}],
                 "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}, "limits": {"cpu": "2"}}},
                {"name": "sidecar", "image": "s:1", "resources": {"requests": {"cpu": "0.25"}}},
            ],
            "initContainers": [{"name": "init", "image": "i:1",
                                "resources": {"requests": {"cpu": "4"}}}],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"operator": "Exists"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}]}},
                "podAntiAffinity": {}},
        }));
        let facts = facts_of(&ds);
        assert_eq!(
            facts.cpu_millis, 1750,
            "containers only, init containers left out"
        );
        assert_eq!(facts.memory_bytes, 1 << 30);
        assert_eq!(facts.pod.namespace, "monitoring");
        assert_eq!(facts.pod.name, "agent");
        assert_eq!(
            facts
                .pod
                .node_selector
                .get("kubernetes.io/os")
                .map(String::as_str),
            Some("linux")
        );
        assert_eq!(facts.pod.required_affinity.len(), 1);
        assert_eq!(facts.pod.tolerations.len(), 1);
        assert!(!facts.constraints_unjudged);
        // Nothing else is kept: no env (not aws-node), no limits, no init containers.
        let spec = ds.spec.unwrap().template.spec.unwrap();
        assert!(
            spec.containers
                .iter()
                .all(|c| c.env.is_none() && c.image.is_none())
        );
        assert!(
            spec.containers[0]
                .resources
                .as_ref()
                .unwrap()
                .limits
                .is_none()
        );
        assert!(spec.init_containers.is_none());
    }

    #[test]
    fn an_operator_the_model_does_not_judge_exactly_is_marked() {
        let gt = daemonset(json!({
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["4"]}]}]}}},
        }));
        assert!(facts_of(&gt).constraints_unjudged);
        let no_requests = daemonset(json!({"containers": [{"name": "a"}]}));
        assert_eq!(
            (
                facts_of(&no_requests).cpu_millis,
                facts_of(&no_requests).memory_bytes
            ),
            (0, 0)
        );
    }
}

//! A DaemonSet as Karpenter counts its Pod against a NodePool's nodes
//! ([`karpenter_health_checks::pod_template::daemonset`]). Pure: works on objects already
//! fetched.

use k8s_openapi::api::apps::v1::DaemonSet;
use karpenter_health_checks::facts::DaemonSetFacts;

/// The facts of `daemonset`: its template's Pod as the scheduler sees it, and the sum of its
/// containers' CPU (millicores) and memory (bytes) requests.
pub fn facts_of(daemonset: &DaemonSet) -> DaemonSetFacts {
    let meta = &daemonset.metadata;
    DaemonSetFacts {
        generation: meta.generation,
        has_pods: daemonset
            .status
            .as_ref()
            .map(|s| s.current_number_scheduled > 0),
        ..karpenter_health_checks::pod_template::daemonset(
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
            daemonset
                .spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref()),
        )
    }
}

/// [`facts_of`] with the requests of its newest Pod where they were read.
pub fn facts_with_newest(
    daemonset: &DaemonSet,
    reads: &crate::daemonset_pods::DaemonSetPodReads,
) -> DaemonSetFacts {
    let key = format!(
        "{}/{}",
        daemonset.metadata.namespace.as_deref().unwrap_or_default(),
        daemonset.metadata.name.as_deref().unwrap_or_default()
    );
    DaemonSetFacts {
        newest_pod: reads.of(&key).and_then(|read| read.found().copied()),
        ..facts_of(daemonset)
    }
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
            facts.cpu_millis, 4000,
            "the init container needs more than the containers' 1750m (Kubernetes' PodRequests)"
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
        // Nothing else is kept: no env (not aws-node), no images; requests and limits are.
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
                .is_some()
        );
        assert!(spec.init_containers.is_some_and(|i| i[0].image.is_none()));
    }

    #[test]
    fn sidecars_add_to_the_containers_and_limits_stand_in_for_missing_requests() {
        let ds = daemonset(json!({
            "containers": [{"name": "agent", "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}}}],
            "initContainers": [
                {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}},
                {"name": "setup", "resources": {"requests": {"cpu": "600m"}}}],
            "overhead": {"cpu": "10m"},
        }));
        let facts = facts_of(&ds);
        // 500m (the limit) + 250m sidecar = 750m; the setup container needs 250m + 600m = 850m
        // beside the sidecar started before it; plus 10m overhead.
        assert_eq!(facts.cpu_millis, 860);
        assert_eq!(facts.memory_bytes, 64 << 20);
    }

    #[test]
    fn an_operator_the_model_does_not_judge_exactly_is_marked() {
        let with = |operator: &str| {
            daemonset(json!({
                "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "karpenter.k8s.aws/instance-cpu", "operator": operator, "values": ["4"]}]}]}}},
            }))
        };
        // Gt is Karpenter's bound, judged exactly; an operator Kubernetes does not define is not.
        assert!(!facts_of(&with("Gt")).constraints_unjudged);
        assert!(facts_of(&with("Near")).constraints_unjudged);
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

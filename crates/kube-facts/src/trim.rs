//! Trims watched objects to what the checks read before they enter a cache, so memory stays flat
//! as NodeClaims and Pods grow. Pure.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Affinity, Pod, PodSpec, PodStatus};
use kube::Resource;

/// Drops what no check reads from any object's metadata: managed fields (about half of a typical
/// ObjectMeta) and annotations.
pub fn metadata<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    meta.annotations = None;
}

/// Keeps the metadata plus the annotations (ServiceAccount role ARNs live there).
pub fn metadata_keep_annotations<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Keeps of a Pod only its identity, node selector and node affinity: what Karpenter copies into
/// NodeClaim requirements.
pub fn pod(pod: &mut Pod) {
    metadata(pod);
    pod.metadata.labels = None;
    pod.metadata.owner_references = None;
    let spec = pod.spec.take().unwrap_or_default();
    pod.spec = Some(PodSpec {
        node_selector: spec.node_selector,
        affinity: spec
            .affinity
            .and_then(|a| a.node_affinity)
            .map(|node_affinity| Affinity {
                node_affinity: Some(node_affinity),
                ..Affinity::default()
            }),
        containers: Vec::new(),
        ..PodSpec::default()
    });
    let phase = pod.status.take().and_then(|s| s.phase);
    pod.status = Some(PodStatus {
        phase,
        ..PodStatus::default()
    });
}

/// Keeps of the Karpenter Deployment only its containers' names, images and env.
pub fn deployment(deployment: &mut Deployment) {
    metadata(deployment);
    if let Some(spec) = deployment.spec.as_mut()
        && let Some(pod_spec) = spec.template.spec.as_mut()
    {
        let service_account = pod_spec.service_account_name.take();
        let containers = std::mem::take(&mut pod_spec.containers)
            .into_iter()
            .map(|c| k8s_openapi::api::core::v1::Container {
                name: c.name,
                image: c.image,
                env: c.env,
                ..Default::default()
            })
            .collect();
        *pod_spec = PodSpec {
            containers,
            service_account_name: service_account,
            ..PodSpec::default()
        };
        spec.template.metadata = None;
    }
    deployment.status = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trimmed_pod_keeps_only_scheduling_constraints() {
        let mut web: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "shop", "annotations": {"big": "x"},
                         "managedFields": [{"manager": "kubectl"}], "labels": {"app": "web"}},
            "spec": {"nodeSelector": {"node-role.kubernetes.io/web": ""},
                     "containers": [{"name": "c", "image": "nginx", "env": [{"name": "A", "value": "1"}]}],
                     "affinity": {"podAntiAffinity": {}, "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}}}},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}
        }))
        .unwrap();
        super::pod(&mut web);
        let spec = web.spec.as_ref().unwrap();
        assert!(spec.containers.is_empty());
        assert_eq!(spec.node_selector.as_ref().unwrap().len(), 1);
        let affinity = spec.affinity.as_ref().unwrap();
        assert!(affinity.node_affinity.is_some() && affinity.pod_anti_affinity.is_none());
        assert!(web.metadata.annotations.is_none() && web.metadata.managed_fields.is_none());
        assert_eq!(
            web.status.as_ref().unwrap().phase.as_deref(),
            Some("Pending")
        );
        assert!(web.status.as_ref().unwrap().conditions.is_none());
    }
}

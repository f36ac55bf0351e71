//! Trims watched objects to what the checks read before they enter a cache, so memory stays flat
//! as NodeClaims and Pods grow. Pure.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_health_checks::labels::LabelRules;
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

/// Keeps of the Karpenter Deployment only its containers' names, images, args and env.
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
                args: c.args,
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

/// Keeps of the VPC CNI's `aws-node` DaemonSet only its containers' names and env (the CNI's
/// settings: warm targets, prefix delegation).
pub fn daemonset(daemonset: &mut DaemonSet) {
    metadata(daemonset);
    if let Some(spec) = daemonset.spec.as_mut()
        && let Some(pod_spec) = spec.template.spec.as_mut()
    {
        let containers = std::mem::take(&mut pod_spec.containers)
            .into_iter()
            .map(|c| k8s_openapi::api::core::v1::Container {
                name: c.name,
                env: c.env,
                ..Default::default()
            })
            .collect();
        *pod_spec = PodSpec {
            containers,
            ..PodSpec::default()
        };
        spec.template.metadata = None;
    }
    daemonset.status = None;
}

/// Where a trimmed CRD keeps the label rules its validation rules enforce.
pub const LABEL_RULES_ANNOTATION: &str = "karpenter-health.io/label-rules";

/// Keeps of the NodePool CRD only the label rules its validation rules enforce (read once per
/// change, in an annotation of the cached copy), not its schema of thousands of lines.
pub fn node_pool_crd(crd: &mut CustomResourceDefinition) {
    let rules = serde_json::to_value(&*crd)
        .ok()
        .and_then(|value| LabelRules::from_crd(&value));
    metadata(crd);
    crd.spec.versions = Vec::new();
    crd.status = None;
    let marker = match rules {
        Some(LabelRules::UpTo1_8) => "UpTo1_8",
        Some(LabelRules::From1_9) => "From1_9",
        None => "none",
    };
    crd.metadata.annotations =
        Some([(LABEL_RULES_ANNOTATION.to_owned(), marker.to_owned())].into());
}

/// The label rules a CRD trimmed by [`node_pool_crd`] enforces; `None` when it carries none.
pub fn label_rules_of(crd: &CustomResourceDefinition) -> Option<LabelRules> {
    match crd
        .metadata
        .annotations
        .as_ref()?
        .get(LABEL_RULES_ANNOTATION)?
        .as_str()
    {
        "UpTo1_8" => Some(LabelRules::UpTo1_8),
        "From1_9" => Some(LabelRules::From1_9),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trimmed_node_pool_crd_keeps_only_its_label_rules() {
        let crd = |message: Option<&str>| -> CustomResourceDefinition {
            let mut schema = serde_json::json!({"type": "object"});
            if let Some(message) = message {
                schema["x-kubernetes-validations"] =
                    serde_json::json!([{"message": message, "rule": "true"}]);
            }
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "nodepools.karpenter.sh"},
                "spec": {"group": "karpenter.sh", "scope": "Cluster",
                         "names": {"kind": "NodePool", "plural": "nodepools"},
                         "versions": [{"name": "v1", "served": true, "storage": true,
                                       "schema": {"openAPIV3Schema": schema}}]}
            }))
            .unwrap()
        };
        let cases = [
            (
                Some(r#"label domain "kubernetes.io" is restricted"#),
                Some(LabelRules::UpTo1_8),
            ),
            (
                Some(r#"label domain "karpenter.sh" is restricted"#),
                Some(LabelRules::From1_9),
            ),
            (None, None),
        ];
        for (message, expected) in cases {
            let mut trimmed = crd(message);
            super::node_pool_crd(&mut trimmed);
            assert!(trimmed.spec.versions.is_empty(), "the schema is dropped");
            assert_eq!(super::label_rules_of(&trimmed), expected, "{message:?}");
        }
    }
}

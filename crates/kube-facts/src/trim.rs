//! Trims watched objects to what the checks read before they enter a cache, so memory stays flat
//! as NodeClaims and Pods grow. Pure.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus, Deployment};
use k8s_openapi::api::core::v1::{
    Affinity, Container, EndpointAddress, Endpoints, NodeAffinity, PodSpec, ResourceRequirements,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionStatus,
};
use karpenter_health_checks::facts::CrdFacts;
use karpenter_health_checks::karpenter_versions;
use karpenter_health_checks::labels::LabelRules;
use kube::Resource;

/// Drops what no check reads from any object's metadata: managed fields (about half of a typical
/// ObjectMeta) and annotations.
/// The NodePool annotation Karpenter v1.0 reads kubelet settings from before the class's
/// `spec.kubelet` (aws/karpenter-provider-aws v1.0.8 `pkg/utils/utils.go`
/// `GetKubletConfigurationWithNodePool`; v1.1 and later refuse to start while one is set).
pub const KUBELET_CONVERSION_ANNOTATION: &str =
    karpenter_health_checks::karpenter_release::KUBELET_CONVERSION_ANNOTATION;

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
            .map(|c| Container {
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

/// Keeps of a webhook configuration only each webhook's name and the Service it calls.
pub fn validating_webhooks(config: &mut ValidatingWebhookConfiguration) {
    metadata(config);
    for w in config.webhooks.iter_mut().flatten() {
        *w = ValidatingWebhook {
            name: std::mem::take(&mut w.name),
            client_config: service_only(&w.client_config),
            ..Default::default()
        };
    }
}

/// Keeps of a webhook configuration only each webhook's name and the Service it calls.
pub fn mutating_webhooks(config: &mut MutatingWebhookConfiguration) {
    metadata(config);
    for w in config.webhooks.iter_mut().flatten() {
        *w = MutatingWebhook {
            name: std::mem::take(&mut w.name),
            client_config: service_only(&w.client_config),
            ..Default::default()
        };
    }
}

fn service_only(config: &WebhookClientConfig) -> WebhookClientConfig {
    WebhookClientConfig {
        service: config.service.clone(),
        ..Default::default()
    }
}

/// Keeps of Endpoints only the ready addresses' IPs (their count is what the checks read).
pub fn endpoints(endpoints: &mut Endpoints) {
    metadata(endpoints);
    for subset in endpoints.subsets.iter_mut().flatten() {
        subset.not_ready_addresses = None;
        subset.ports = None;
        for address in subset.addresses.iter_mut().flatten() {
            *address = EndpointAddress {
                ip: std::mem::take(&mut address.ip),
                ..Default::default()
            };
        }
    }
}

/// Keeps of a DaemonSet what Karpenter schedules its Pod by (node selector, node affinity,
/// tolerations) and counts of it (its containers' and init containers' requests and limits,
/// restart policies and resource claims, the Pod's overhead and resource claims); of the VPC
/// CNI's `kube-system/aws-node` also its containers' env (the CNI's settings: warm targets,
/// prefix delegation); of its status only whether it has Pods (`currentNumberScheduled` as 0 or
/// 1, so a node joining or leaving is no change here).
pub fn daemonset(daemonset: &mut DaemonSet) {
    metadata(daemonset);
    let keep_env = is_aws_node(daemonset);
    if let Some(spec) = daemonset.spec.as_mut()
        && let Some(pod_spec) = spec.template.spec.as_mut()
    {
        let counted = |c: Container, env: bool| Container {
            name: c.name,
            env: if env { c.env } else { None },
            resources: c.resources.map(|r| ResourceRequirements {
                requests: r.requests,
                limits: r.limits,
                claims: r.claims,
            }),
            restart_policy: c.restart_policy,
            ..Default::default()
        };
        let containers = std::mem::take(&mut pod_spec.containers)
            .into_iter()
            .map(|c| counted(c, keep_env))
            .collect();
        let init_containers = pod_spec
            .init_containers
            .take()
            .map(|cs| cs.into_iter().map(|c| counted(c, false)).collect());
        let preferred = pod_spec
            .affinity
            .as_mut()
            .and_then(|a| a.node_affinity.as_mut())
            .and_then(|n| {
                n.preferred_during_scheduling_ignored_during_execution
                    .take()
            });
        let overhead = pod_spec.overhead.take();
        let resource_claims = pod_spec.resource_claims.take();
        let mut kept = scheduling_only(pod_spec, containers);
        if let Some(preferred) = preferred {
            kept.affinity
                .get_or_insert_with(Affinity::default)
                .node_affinity
                .get_or_insert_with(NodeAffinity::default)
                .preferred_during_scheduling_ignored_during_execution = Some(preferred);
        }
        *pod_spec = PodSpec {
            init_containers,
            overhead,
            resource_claims,
            ..kept
        };
        spec.template.metadata = None;
    }
    daemonset.status = daemonset.status.take().map(|s| DaemonSetStatus {
        current_number_scheduled: s.current_number_scheduled.min(1),
        ..DaemonSetStatus::default()
    });
}

/// `pod_spec` reduced to `containers` and what decides where its Pods can be scheduled: node
/// selector, required node affinity and tolerations.
pub(crate) fn scheduling_only(pod_spec: &mut PodSpec, containers: Vec<Container>) -> PodSpec {
    let required = pod_spec
        .affinity
        .take()
        .and_then(|a| a.node_affinity)
        .and_then(|n| n.required_during_scheduling_ignored_during_execution);
    PodSpec {
        containers,
        node_selector: pod_spec.node_selector.take(),
        tolerations: pod_spec.tolerations.take(),
        affinity: required.map(|required| Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(required),
                ..NodeAffinity::default()
            }),
            ..Affinity::default()
        }),
        ..PodSpec::default()
    }
}

/// Where a trimmed CRD keeps the label rules its validation rules enforce.
pub const LABEL_RULES_ANNOTATION: &str = "karpenter-health.io/label-rules";

/// Where a trimmed Karpenter CRD keeps which fields of the version table its `v1` schema has.
pub const SCHEMA_FIELDS_ANNOTATION: &str = "karpenter-health.io/schema-fields";

/// Keeps of a Karpenter CRD only what the checks read, not its schema of thousands of lines: the
/// label rules its validation rules enforce and the fields of the version table its `v1` schema
/// has (read once per change, in annotations of the cached copy), which versions it serves,
/// `status.storedVersions`, and a conversion webhook's Service (without its CA bundle).
pub fn node_pool_crd(crd: &mut CustomResourceDefinition) {
    let value = serde_json::to_value(&*crd).ok();
    let rules = value.as_ref().and_then(LabelRules::from_crd);
    let name = crd.metadata.name.clone().unwrap_or_default();
    let fields: Vec<String> = value
        .as_ref()
        .and_then(|v| {
            v["spec"]["versions"]
                .as_array()?
                .iter()
                .find(|version| version["name"] == "v1")
                .map(|version| &version["schema"]["openAPIV3Schema"])
                .map(|schema| {
                    karpenter_versions::fields_present(&name, schema)
                        .into_iter()
                        .collect()
                })
        })
        .unwrap_or_default();
    metadata(crd);
    // Each version's name and served/storage flags only: whether the API server ever converts.
    for version in &mut crd.spec.versions {
        version.schema = None;
        version.additional_printer_columns = None;
        version.subresources = None;
        version.selectable_fields = None;
    }
    if let Some(conversion) = &mut crd.spec.conversion
        && let Some(webhook) = &mut conversion.webhook
        && let Some(config) = &mut webhook.client_config
    {
        config.ca_bundle = None;
    }
    crd.status = crd
        .status
        .take()
        .map(|status| CustomResourceDefinitionStatus {
            stored_versions: status.stored_versions,
            ..Default::default()
        });
    let marker = match rules {
        Some(LabelRules::UpTo1_8) => "UpTo1_8",
        Some(LabelRules::From1_9) => "From1_9",
        None => "none",
    };
    crd.metadata.annotations = Some(
        [
            (LABEL_RULES_ANNOTATION.to_owned(), marker.to_owned()),
            (SCHEMA_FIELDS_ANNOTATION.to_owned(), fields.join(",")),
        ]
        .into(),
    );
}

/// What `KarpenterVersionCompatible` reads of a CRD trimmed by [`node_pool_crd`].
pub fn crd_facts(crd: &CustomResourceDefinition) -> CrdFacts {
    let fields = crd
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SCHEMA_FIELDS_ANNOTATION))
        .map(|f| {
            f.split(',')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let conversion_service = crd
        .spec
        .conversion
        .as_ref()
        .filter(|c| c.strategy == "Webhook")
        .and_then(|c| c.webhook.as_ref()?.client_config.as_ref()?.service.as_ref())
        .map(|s| format!("{}/{}", s.namespace, s.name));
    CrdFacts {
        name: crd.metadata.name.clone().unwrap_or_default(),
        stored_versions: crd
            .status
            .as_ref()
            .and_then(|s| s.stored_versions.clone())
            .unwrap_or_default(),
        served_versions: crd
            .spec
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| v.name.clone())
            .collect(),
        fields,
        conversion_service,
    }
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

/// Whether `daemonset` is the VPC CNI's, `kube-system/aws-node`.
pub fn is_aws_node(daemonset: &DaemonSet) -> bool {
    daemonset.metadata.namespace.as_deref() == Some("kube-system")
        && daemonset.metadata.name.as_deref() == Some("aws-node")
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
            assert!(
                trimmed.spec.versions.iter().all(|v| v.schema.is_none()),
                "the schema is dropped"
            );
            assert_eq!(super::label_rules_of(&trimmed), expected, "{message:?}");
        }
    }

    #[test]
    fn a_trimmed_crd_keeps_stored_versions_the_conversion_service_and_the_table_fields() {
        let mut crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "nodepools.karpenter.sh"},
            "spec": {"group": "karpenter.sh", "scope": "Cluster",
                     "names": {"kind": "NodePool", "plural": "nodepools"},
                     "conversion": {"strategy": "Webhook", "webhook": {
                         "conversionReviewVersions": ["v1"],
                         "clientConfig": {"caBundle": "Zm9v",
                             "service": {"name": "karpenter", "namespace": "kube-system"}}}},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"properties": {"status": {
                                       "properties": {"nodeClassObservedGeneration": {}}}}}}},
                                  {"name": "v1beta1", "served": false, "storage": false}]},
            "status": {"storedVersions": ["v1beta1", "v1"], "conditions": [],
                       "acceptedNames": {"kind": "NodePool", "plural": "nodepools"}}
        }))
        .unwrap();
        super::node_pool_crd(&mut crd);
        let facts = super::crd_facts(&crd);
        assert_eq!(facts.stored_versions, ["v1beta1", "v1"]);
        assert_eq!(
            facts.served_versions,
            ["v1"],
            "v1beta1 is listed but not served"
        );
        assert!(crd.spec.versions.iter().all(|v| v.schema.is_none()));
        assert_eq!(
            facts.conversion_service.as_deref(),
            Some("kube-system/karpenter")
        );
        assert_eq!(
            facts.fields.into_iter().collect::<Vec<_>>(),
            ["status.nodeClassObservedGeneration"]
        );
        let conversion = crd.spec.conversion.as_ref().unwrap();
        let config = conversion.webhook.as_ref().unwrap().client_config.as_ref();
        assert_eq!(config.unwrap().ca_bundle, None, "the CA bundle is dropped");
    }
}

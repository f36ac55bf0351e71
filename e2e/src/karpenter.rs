//! What Karpenter itself writes, as the operator tests and the benchmark imitate it: its
//! Deployment and IRSA-annotated ServiceAccount, and the status conditions it sets on
//! EC2NodeClasses and NodeClaims. Pure JSON builders, no IO.

use serde_json::{Value, json};

pub use karpenter_health_api::karpenter::NODE_CLASS_CONDITIONS;

/// One status condition as Karpenter writes it (`lastTransitionTime` in RFC 3339); a condition
/// that is not True carries Karpenter's message for a pending one.
pub fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    last_transition_time: &str,
    observed_generation: Option<i64>,
) -> Value {
    json!({
        "type": type_, "status": status, "reason": reason,
        "message": if status == "True" { "" } else { "object is awaiting reconciliation" },
        "lastTransitionTime": last_transition_time,
        "observedGeneration": observed_generation,
    })
}

/// Karpenter's ServiceAccount, annotated with its controller role for IRSA.
pub fn service_account(namespace: &str, controller_role_arn: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "karpenter", "namespace": namespace,
                     "annotations": {"eks.amazonaws.com/role-arn": controller_role_arn}},
    })
}

/// Karpenter's Deployment, scaled to zero: the operator reads Karpenter's `version` from the
/// image tag and its settings (`CLUSTER_NAME`, ...) from `env`.
pub fn deployment(namespace: &str, version: &str, env: &[(&str, &str)]) -> Value {
    let env: Vec<Value> = env
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "karpenter", "namespace": namespace},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "karpenter"}},
            "template": {
                "metadata": {"labels": {"app": "karpenter"}},
                "spec": {
                    "serviceAccountName": "karpenter",
                    "containers": [{
                        "name": "controller",
                        "image": format!("public.ecr.aws/karpenter/controller:{version}"),
                        "env": env,
                    }],
                },
            },
        },
    })
}

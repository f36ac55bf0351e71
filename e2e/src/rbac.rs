//! The RBAC the project ships (deploy/rbac.yaml), applied to the bed and bound to the bed's
//! non-admin operator user, so tests run the operator with exactly those rules; and questions to
//! the API server's authorizer about what a user may do. Does IO (API server).

use crate::apply_json;
use anyhow::Result;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

/// The RBAC the project ships; the operator under test runs with exactly these rules.
const SHIPPED_RBAC: &str = include_str!("../../deploy/rbac.yaml");
/// The shipped Role that lives in Karpenter's namespace (kube-system by default).
pub const KARPENTER_NAMESPACE_ROLE: &str = "karpenter-health-karpenter";
/// The bed's token user without any permission of its own.
pub const OPERATOR_USER: &str = "karpenter-health-operator";

/// A binding made for a test: its namespace (None for a ClusterRoleBinding) and name.
pub type Binding = (Option<String>, String);

/// The shipped RBAC documents.
pub fn shipped_rbac() -> Result<Vec<Value>> {
    use serde::Deserialize;
    let mut docs = Vec::new();
    for document in serde_yaml::Deserializer::from_str(SHIPPED_RBAC) {
        let value = Value::deserialize(document)?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Installs the shipped RBAC as is, and binds the bed's operator user to the same roles: a twin
/// of every shipped binding with the user as subject. The Role meant for Karpenter's namespace is
/// copied, rules unchanged, into `karpenter_namespace` with its twin binding. Returns the twin
/// bindings outside that namespace, for removal.
pub async fn bind_operator_user(
    admin: &kube::Client,
    prefix: &str,
    karpenter_namespace: &str,
) -> Result<Vec<Binding>> {
    let docs = shipped_rbac()?;
    apply_json(admin, &docs).await?;
    let mut extra = Vec::new();
    let mut created = Vec::new();
    for doc in &docs {
        let kind = str_at(doc, "/kind");
        if kind == "Role" && str_at(doc, "/metadata/name") == KARPENTER_NAMESPACE_ROLE {
            let mut role = doc.clone();
            role["metadata"]["namespace"] = json!(karpenter_namespace);
            extra.push(role);
        }
        if kind != "RoleBinding" && kind != "ClusterRoleBinding" {
            continue;
        }
        let mut twin = doc.clone();
        let name = format!("{prefix}-{}", str_at(doc, "/metadata/name"));
        twin["metadata"]["name"] = json!(name);
        twin["subjects"] = json!([{
            "kind": "User", "name": OPERATOR_USER, "apiGroup": "rbac.authorization.k8s.io"
        }]);
        let namespace = if str_at(doc, "/roleRef/name") == KARPENTER_NAMESPACE_ROLE {
            twin["metadata"]["namespace"] = json!(karpenter_namespace);
            None
        } else {
            doc.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        if namespace.is_some() || kind == "ClusterRoleBinding" {
            created.push((namespace, name));
        }
        extra.push(twin);
    }
    apply_json(admin, &extra).await?;
    Ok(created)
}

/// Deletes the bindings [`bind_operator_user`] made; those already gone are fine.
pub async fn unbind_operator_user(admin: &kube::Client, bindings: &[Binding]) -> Result<()> {
    for (namespace, name) in bindings {
        let deleted = match namespace {
            Some(ns) => Api::<RoleBinding>::namespaced(admin.clone(), ns)
                .delete(name, &DeleteParams::default())
                .await
                .map(|_| ()),
            None => Api::<ClusterRoleBinding>::all(admin.clone())
                .delete(name, &DeleteParams::default())
                .await
                .map(|_| ()),
        };
        match deleted {
            Ok(()) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Deletes the operator's Lease once the operator under test has released it. The shipped RBAC
/// itself stays installed (identical for every test, like the CRD): on a cluster running the real
/// operator, removing it would break that install.
pub async fn remove_released_lease(admin: &kube::Client) -> Result<()> {
    let leases: Api<Lease> = Api::namespaced(admin.clone(), "kube-system");
    let held = leases.get_opt("karpenter-health").await?.map(|lease| {
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .is_some_and(|h| !h.is_empty())
    });
    if held == Some(false) {
        leases
            .delete("karpenter-health", &DeleteParams::default())
            .await?;
    }
    Ok(())
}

/// What `user` (with `groups`) may do, asked of the API server's authorizer.
pub async fn allowed(
    admin: &kube::Client,
    user: &str,
    groups: &[&str],
    attributes: ResourceAttributes,
) -> Result<bool> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            groups: Some(groups.iter().map(|g| g.to_string()).collect()),
            resource_attributes: Some(attributes),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let answer = Api::<SubjectAccessReview>::all(admin.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// `verb group:resource[/subresource]` in `namespace` on `name`.
pub fn attributes(
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
    name: Option<&str>,
) -> ResourceAttributes {
    let (group, rest) = resource.split_once(':').unwrap_or(("", resource));
    let (resource, subresource) = match rest.split_once('/') {
        Some((r, s)) => (r, Some(s.to_owned())),
        None => (rest, None),
    };
    ResourceAttributes {
        verb: Some(verb.to_owned()),
        group: Some(group.to_owned()),
        resource: Some(resource.to_owned()),
        subresource,
        namespace: namespace.map(str::to_owned),
        name: name.map(str::to_owned),
        ..ResourceAttributes::default()
    }
}

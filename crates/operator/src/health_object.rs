//! Creates the KarpenterHealth that mirrors an EC2NodeClass (same name, owned by it, so it is
//! garbage-collected with it) and writes its status by server-side apply. Does IO.

use crate::error::Error;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use karpenter_health_api::health::FIELD_MANAGER;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_api::{KarpenterHealth, KarpenterHealthSpec, KarpenterHealthStatus};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use std::collections::BTreeMap;

/// The owner reference every KarpenterHealth carries to its EC2NodeClass.
pub fn owner_reference(node_class: &EC2NodeClass) -> Result<OwnerReference, Error> {
    let uid = node_class.uid().ok_or_else(|| Error::MissingUid {
        name: node_class.name_any(),
    })?;
    Ok(OwnerReference {
        api_version: EC2NodeClass::api_version(&()).into_owned(),
        kind: EC2NodeClass::kind(&()).into_owned(),
        name: node_class.name_any(),
        uid,
        controller: Some(true),
        block_owner_deletion: None,
    })
}

/// Applies the KarpenterHealth object (metadata and spec only) and returns it as stored, status
/// included. Applying an unchanged object is a no-op on the server. `copied` are the labels of
/// the EC2NodeClass copied onto it: server-side apply removes one this field manager applied
/// before and no longer applies, so a label removed from the class leaves the KarpenterHealth.
pub async fn ensure(
    api: &Api<KarpenterHealth>,
    node_class: &EC2NodeClass,
    copied: BTreeMap<String, String>,
) -> Result<KarpenterHealth, Error> {
    let name = node_class.name_any();
    let mut desired = KarpenterHealth::new(
        &name,
        KarpenterHealthSpec {
            node_class_name: name.clone(),
        },
    );
    desired.metadata.owner_references = Some(vec![owner_reference(node_class)?]);
    let mut labels = copied;
    labels.insert(
        "app.kubernetes.io/managed-by".to_owned(),
        FIELD_MANAGER.to_owned(),
    );
    desired.metadata.labels = Some(labels);
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&desired),
    )
    .await
    .map_err(|source| Error::ApplyHealth { name, source })
}

/// Writes `status` through the status subresource by server-side apply, one field manager.
pub async fn patch_status(
    api: &Api<KarpenterHealth>,
    name: &str,
    status: &KarpenterHealthStatus,
) -> Result<(), Error> {
    let patch = serde_json::json!({
        "apiVersion": KarpenterHealth::api_version(&()),
        "kind": KarpenterHealth::kind(&()),
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map(|_| ())
    .map_err(|source| Error::PatchStatus {
        name: name.to_owned(),
        source,
    })
}

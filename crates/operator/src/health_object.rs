//! Creates the KarpenterHealth that mirrors an EC2NodeClass (same name, owned by it, so it is
//! garbage-collected with it) and writes its status by server-side apply. Does IO.

use crate::error::Error;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use karpenter_health_api::health::FIELD_MANAGER;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_api::{KarpenterHealth, KarpenterHealthSpec, KarpenterHealthStatus};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};

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
/// included. Applying an unchanged object is a no-op on the server.
pub async fn ensure(
    api: &Api<KarpenterHealth>,
    node_class: &EC2NodeClass,
) -> Result<KarpenterHealth, Error> {
    let name = node_class.name_any();
    let mut desired = KarpenterHealth::new(
        &name,
        KarpenterHealthSpec {
            node_class_name: name.clone(),
        },
    );
    desired.metadata.owner_references = Some(vec![owner_reference(node_class)?]);
    desired.metadata.labels = Some(
        [(
            "app.kubernetes.io/managed-by".to_owned(),
            FIELD_MANAGER.to_owned(),
        )]
        .into_iter()
        .collect(),
    );
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

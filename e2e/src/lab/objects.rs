//! Karpenter's objects as the lab reads them, plain JSON (never the product's types), and the
//! release of a test's NodePools and NodeClaims, also when a test panicked. Does IO (the API
//! server).

use anyhow::Result;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};
use std::time::Duration;

/// One of Karpenter's objects (an EC2NodeClass, a NodePool, a NodeClaim) as Karpenter wrote it:
/// plain JSON, so that the lab judges Karpenter's own fields, never the product's reading of them.
pub type KarpenterObject = kube::api::DynamicObject;

/// Karpenter's condition `type_` in `object`'s `status.conditions`, as written.
pub fn condition<'a>(object: &'a KarpenterObject, type_: &str) -> Option<&'a Value> {
    object
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
}

/// Whether `object` carries Karpenter's condition `type_` with `status`.
pub fn carries(object: &KarpenterObject, type_: &str, status: &str) -> bool {
    condition(object, type_).is_some_and(|c| c["status"] == status)
}

/// Karpenter's cluster-scoped `karpenter.sh/v1` objects of `kind`, read as plain JSON: the lab
/// judges what Karpenter wrote, not what the product's types make of it.
pub(super) fn karpenter_objects(
    client: &kube::Client,
    kind: &str,
) -> Api<kube::api::DynamicObject> {
    let resource = kube::api::ApiResource {
        group: "karpenter.sh".into(),
        version: "v1".into(),
        api_version: "karpenter.sh/v1".into(),
        kind: kind.into(),
        plural: format!("{}s", kind.to_ascii_lowercase()),
    };
    Api::all_with(client.clone(), &resource)
}

/// Deletes the NodePools of EC2NodeClass `class` (read as plain JSON: whatever their shape) and
/// waits up to a minute for Karpenter to terminate their NodeClaims, so that no claim with
/// Karpenter's finalizer outlives the controller and is reconciled by the next test's.
pub(super) async fn release_node_pools(client: &kube::Client, class: &str) -> Result<()> {
    let pools = karpenter_objects(client, "NodePool");
    let listed = pools.list(&ListParams::default()).await?;
    for pool in listed.items {
        let of_this_class =
            pool.data.pointer("/spec/template/spec/nodeClassRef/name") == Some(&json!(class));
        if let (true, Some(name)) = (of_this_class, pool.metadata.name.as_deref()) {
            let _ = pools.delete(name, &DeleteParams::default()).await;
        }
    }
    let claims = karpenter_objects(client, "NodeClaim");
    crate::wait_for(
        "Karpenter to terminate the test's NodeClaims",
        Duration::from_secs(60),
        || async {
            let left = claims.list(&ListParams::default()).await?.items;
            let ours = left
                .iter()
                .any(|claim| claim.data.pointer("/spec/nodeClassRef/name") == Some(&json!(class)));
            Ok((!ours).then_some(()))
        },
    )
    .await
}

/// Releases a dropped [`super::Lab`]'s NodePools and NodeClaims when [`super::Lab::finish`] did not (a test
/// body that panicked): on a thread of its own with its own runtime and client, since the
/// test's runtime may be unwinding.
pub(super) struct TeardownOnDrop {
    /// The bed's admin kubeconfig; `None` once `finish` has released the objects.
    pub(super) kubeconfig: Option<std::path::PathBuf>,
    pub(super) class: String,
}

impl Drop for TeardownOnDrop {
    fn drop(&mut self) {
        let Some(kubeconfig) = self.kubeconfig.take() else {
            return;
        };
        let class = self.class.clone();
        eprintln!("lab: {class} dropped without finish: releasing its NodePools and NodeClaims");
        let released = std::thread::spawn(move || -> Result<()> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let client = crate::client_from(&kubeconfig).await?;
                release_node_pools(&client, &class).await
            })
        })
        .join();
        match released {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("lab: releasing {} failed: {e:#}", self.class),
            Err(_) => eprintln!("lab: releasing {} panicked", self.class),
        }
    }
}

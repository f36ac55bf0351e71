//! Installs or updates the KarpenterHealth CRD by server-side apply and waits until the API server
//! serves it. Does IO.

use crate::error::Error;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_health_api::{KarpenterHealth, health::FIELD_MANAGER};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, CustomResourceExt};
use std::time::Duration;

pub async fn install(client: &Client) -> Result<(), Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = KarpenterHealth::crd();
    let name = KarpenterHealth::crd_name();
    crds.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&crd),
    )
    .await
    .map_err(Error::InstallCrd)?;
    let timeout = Duration::from_secs(30);
    tokio::time::timeout(
        timeout,
        await_condition(crds, name, conditions::is_crd_established()),
    )
    .await
    .map_err(|_| Error::CrdNotEstablished(timeout))?
    .map_err(|_| Error::CrdNotEstablished(timeout))?;
    tracing::info!(crd = name, "KarpenterHealth CRD installed");
    Ok(())
}

//! Installs or updates the KarpenterHealth CRD by server-side apply and waits until the API server
//! serves it; at start, waits until the CRDs the operator reads and writes are served, saying once
//! a minute what to do. Does IO.

use crate::error::Error;
use crate::readiness::Readiness;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_api::{KarpenterHealth, health::FIELD_MANAGER};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::core::DeserializeGuard;
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, CustomResourceExt};
use std::time::{Duration, Instant};

/// How often a missing CRD is looked for again, and how often the log repeats what to do.
const RECHECK_EVERY: Duration = Duration::from_secs(5);
const REPEAT_ADVICE_EVERY: Duration = Duration::from_secs(60);

/// What keeps the operator from starting, in one line with the fix; `None` when both the
/// KarpenterHealth and the EC2NodeClass kinds are served.
async fn missing_crd(client: &Client) -> Option<String> {
    let one = ListParams::default().limit(1);
    let served = |result: Result<_, kube::Error>, missing: &str| match result {
        Ok(_) => None,
        Err(kube::Error::Api(status)) if status.code == 404 => Some(missing.to_owned()),
        Err(error) => Some(format!("cannot read the CRDs yet: {error}")),
    };
    let healths = Api::<KarpenterHealth>::all(client.clone())
        .list_metadata(&one)
        .await;
    if let Some(why) = served(
        healths.map(|_| ()),
        "the KarpenterHealth CRD is not installed: run `karpenter-health crd | kubectl apply -f -`, \
         start with --install-crd, or install the Helm chart",
    ) {
        return Some(why);
    }
    let classes = Api::<DeserializeGuard<EC2NodeClass>>::all(client.clone())
        .list_metadata(&one)
        .await;
    served(
        classes.map(|_| ()),
        "Karpenter's EC2NodeClass CRD (ec2nodeclasses.karpenter.k8s.aws) is not installed: \
         install Karpenter (its chart or its CRDs) first",
    )
}

/// Waits until the CRDs are served, keeping `/readyz` unready with the reason meanwhile and
/// logging the advice at once and then once a minute, not per retry. Returns early if `stop`
/// completes first (`false`).
pub async fn wait_until_served(
    client: &Client,
    readiness: &Readiness,
    stop: impl std::future::Future<Output = ()>,
) -> bool {
    let mut stop = std::pin::pin!(stop);
    let mut advised: Option<(Instant, String)> = None;
    loop {
        // An API server that does not answer must not hold a shutdown.
        let missing = tokio::select! {
            missing = missing_crd(client) => missing,
            () = &mut stop => return false,
        };
        let Some(why) = missing else {
            if advised.is_some() {
                tracing::info!("the CRDs are served now; starting");
            }
            readiness.set_blocked(None);
            return true;
        };
        let repeat = advised
            .as_ref()
            .is_none_or(|(at, said)| at.elapsed() >= REPEAT_ADVICE_EVERY || *said != why);
        if repeat {
            tracing::warn!("{why}");
            advised = Some((Instant::now(), why.clone()));
        }
        readiness.set_blocked(Some(why));
        tokio::select! {
            () = tokio::time::sleep(RECHECK_EVERY) => {}
            () = &mut stop => return false,
        }
    }
}

pub async fn install(client: &Client) -> Result<(), Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = karpenter_health_api::custom_resource_definition();
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

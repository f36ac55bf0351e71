//! One-shot reads of what the checks need from the cluster, for `karpenter-health check`: the
//! same objects the watches follow, listed once (paged, read-only) and trimmed the same way, into
//! the same [`Sources`] the operator's caches produce. Does IO (list calls).

use crate::api_errors::cause_of_api_error;
use crate::disruption_events::{DisruptionEventIndex, SharedDisruptionEvents};
use crate::inputs::{Input, Inputs, WatchTargets};
use crate::node_claims::{NodeClaimIndex, SharedClaims};
use crate::pending_pods::{PendingPodIndex, SharedPendingPods};
use crate::snapshot::Sources;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_checks::facts::Observed;
use kube::api::ListParams;
use kube::core::DeserializeGuard;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;

/// Objects per list page: what the watches' initial lists use too, so a large cluster is read
/// in bounded chunks.
const PAGE_SIZE: u32 = 500;

/// Lists every object `params` selects, page by page.
async fn list_all<K>(api: &Api<K>, params: &ListParams) -> Result<Vec<K>, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned,
{
    let mut items = Vec::new();
    let mut params = params.clone().limit(PAGE_SIZE);
    loop {
        let page = api.list(&params).await?;
        items.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(items),
        }
    }
}

/// Lists `input`, trims, and turns a failure into `Unknown` with its cause, naming what was read.
async fn observe_list<K>(api: Api<K>, input: &Input<K>) -> Observed<Vec<Arc<K>>>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned,
{
    match list_all(&api, &input.list_params()).await {
        Ok(items) => Observed::Found(
            items
                .into_iter()
                .map(|mut item| {
                    (input.trim)(&mut item);
                    Arc::new(item)
                })
                .collect(),
        ),
        Err(error) => Observed::unknown(
            cause_of_api_error(&error),
            format!("listing {}: {error}", input.listing),
        ),
    }
}

/// One named object, read the way the operator's watch reads it (a list by field selector, so
/// the same `list` permission suffices): `Found(None)` when the list proves it absent.
async fn observe_named<K>(api: Api<K>, input: &Input<K>) -> Observed<Option<Arc<K>>>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned,
{
    observe_list(api, input)
        .await
        .map(|items| items.into_iter().next())
}

/// Reads every input the checks need besides the EC2NodeClasses ([`Inputs`]), concurrently.
#[allow(clippy::too_many_lines)] // One read per input, joined: the list of inputs.
pub async fn list_sources(client: &Client, targets: &WatchTargets) -> Sources {
    let inputs = Inputs::of(targets);
    let (i, c) = (&inputs, client);
    let (
        node_pools,
        node_claims,
        pending_pods,
        disruption_events,
        aws_auth,
        cilium_config,
        karpenter_deployment,
        karpenter_service_account,
        aws_node_service_account,
        node_pool_crd,
        daemonsets,
    ) = futures::join!(
        observe_list(i.node_pools.cluster_api(c), &i.node_pools),
        observe_list(i.node_claims.cluster_api(c), &i.node_claims),
        observe_list(i.pending_pods.api(c), &i.pending_pods),
        observe_list(i.disruption_events.api(c), &i.disruption_events),
        observe_named(i.aws_auth.api(c), &i.aws_auth),
        observe_named(i.cilium_config.api(c), &i.cilium_config),
        observe_named(i.karpenter_deployment.api(c), &i.karpenter_deployment),
        observe_named(
            i.karpenter_service_account.api(c),
            &i.karpenter_service_account
        ),
        observe_named(
            i.aws_node_service_account.api(c),
            &i.aws_node_service_account
        ),
        observe_named(i.node_pool_crd.cluster_api(c), &i.node_pool_crd),
        observe_list(i.daemonsets.api(c), &i.daemonsets),
    );
    let (
        node_claim_crd,
        node_class_crd,
        validating,
        mutating,
        endpoints,
        version,
        load_balancer_controller,
    ) = futures::join!(
        observe_named(i.node_claim_crd.cluster_api(c), &i.node_claim_crd),
        observe_named(i.node_class_crd.cluster_api(c), &i.node_class_crd),
        observe_list(i.validating_webhooks.cluster_api(c), &i.validating_webhooks),
        observe_list(i.mutating_webhooks.cluster_api(c), &i.mutating_webhooks),
        observe_list(i.endpoints.api(c), &i.endpoints),
        client.apiserver_version(),
        observe_named(
            i.load_balancer_controller.api(c),
            &i.load_balancer_controller
        ),
    );
    let karpenter_crds = karpenter_crds_of([node_pool_crd.clone(), node_claim_crd, node_class_crd]);
    let webhooks = crate::snapshot::webhooks_of_configurations(validating, mutating);
    let apiserver_version = match version {
        Ok(info) => Observed::Found(info.git_version),
        Err(error) => {
            Observed::unknown(cause_of_api_error(&error), format!("GET /version: {error}"))
        }
    };
    Sources {
        node_pools,
        node_claims: node_claims.map(|claims| {
            SharedClaims::listed(NodeClaimIndex::of_listed(claims.iter().map(AsRef::as_ref)))
        }),
        pending_pods: pending_pods.map(|pods| {
            SharedPendingPods::listed(PendingPodIndex::of(pods.iter().map(AsRef::as_ref)))
        }),
        disruption_events: disruption_events.map(|events| {
            SharedDisruptionEvents::listed(DisruptionEventIndex::of(
                events.iter().map(AsRef::as_ref),
            ))
        }),
        // Read by `with_drains`, once the threshold is known.
        drains: crate::drain::DrainReads::default(),
        // Read by `with_daemonset_pods`.
        daemonset_pods: crate::daemonset_pods::DaemonSetPodReads::default(),
        aws_auth,
        cilium_config,
        karpenter_deployment,
        load_balancer_controller,
        karpenter_service_account,
        aws_node_service_account,
        node_pool_crd,
        karpenter_crds,
        webhooks,
        endpoints,
        karpenter_namespace: targets.karpenter_namespace.clone(),
        apiserver_version,
        daemonsets,
    }
}

/// Karpenter's installed CRDs, from the three named reads: unknown (as the last unknown read
/// says) while any of them is.
fn karpenter_crds_of(
    crds: [Observed<Option<Arc<CustomResourceDefinition>>>; 3],
) -> Observed<Vec<Arc<CustomResourceDefinition>>> {
    let mut karpenter_crds = Observed::Found(Vec::new());
    for crd in crds {
        match (crd, &mut karpenter_crds) {
            (Observed::Unknown(u), _) => karpenter_crds = Observed::Unknown(u),
            (Observed::Found(Some(c)), Observed::Found(all)) => all.push(c),
            _ => {}
        }
    }
    karpenter_crds
}

/// `sources` with the drains of the NodeClaims it lists as terminating since `before` or
/// earlier read (nothing is read when the NodeClaims could not be listed).
pub async fn with_drains(
    client: &Client,
    mut sources: Sources,
    before: jiff::Timestamp,
) -> Sources {
    if let Observed::Found(claims) = &sources.node_claims {
        let stuck = claims.read(|index| index.terminating_since(before));
        sources.drains =
            crate::drain::DrainReads::listed(crate::drain::read_drains(client, &stuck).await);
    }
    sources
}

/// `sources` with the newest Pod read of each DaemonSet that has Pods (up to
/// [`crate::daemonset_pods::MAX_DAEMONSETS`], largest templates first): a one-shot run has no
/// earlier verdict to say which ones a verdict hangs on.
pub async fn with_daemonset_pods(client: &Client, mut sources: Sources) -> Sources {
    if let Observed::Found(daemonsets) = &sources.daemonsets {
        let mut with_pods: Vec<(u64, u64, String)> = daemonsets
            .iter()
            .filter(|d| {
                d.status
                    .as_ref()
                    .is_some_and(|s| s.current_number_scheduled > 0)
            })
            .map(|d| {
                let facts = crate::daemonsets::facts_of(d);
                (
                    facts.cpu_millis,
                    facts.memory_bytes,
                    format!("{}/{}", facts.pod.namespace, facts.pod.name),
                )
            })
            .collect();
        with_pods.sort_by_key(|(cpu, memory, _)| std::cmp::Reverse((*cpu, *memory)));
        let wanted: Vec<String> = with_pods.into_iter().map(|(_, _, k)| k).collect();
        sources.daemonset_pods = crate::daemonset_pods::DaemonSetPodReads::listed(
            crate::daemonset_pods::read_all(client, daemonsets, &wanted).await,
        );
    }
    sources
}

/// Every EC2NodeClass, malformed ones kept as the error that names them. A failure here means
/// there is nothing to check, so it is returned rather than folded into `Unknown`.
pub async fn list_node_classes(
    client: &Client,
) -> Result<Vec<DeserializeGuard<EC2NodeClass>>, kube::Error> {
    list_all(&Api::all(client.clone()), &ListParams::default()).await
}

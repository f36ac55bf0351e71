//! What asks for a reconcile in each lane: the user lane follows the class's KarpenterHealth (not
//! this process's own writes), its NodePools and every input users change; the bulk lane follows
//! the storms (NodeClaims, pending Pods, DisruptionBlocked Events, coalesced per class), AWS
//! answers refreshed in the background, and drains that changed. Builds streams; the IO is the
//! watches they poll.

use crate::coalesce::coalesce;
use crate::context::AwsPort;
use crate::reconcile::write::WrittenStatuses;
use crate::triggers::ClassTriggers;
use futures::StreamExt;
use futures::stream::BoxStream;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_api::{KarpenterHealth, KarpenterHealthStatus};
use karpenter_health_aws::Changed;
use karpenter_health_kube_facts::Triggers;
use karpenter_health_kube_facts::disruption_events::EventsTouched;
use karpenter_health_kube_facts::node_claims::ClaimsTouched;
use karpenter_health_kube_facts::pending_pods::PodPins;
use kube::core::DeserializeGuard;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, ResourceExt};

/// The KarpenterHealth watch, reflected into `health_writer`'s store. A deleted or hand-edited
/// KarpenterHealth is put back at once, but the watch events of this process's own status writes
/// ask for nothing: each would run one more reconcile that finds nothing to do.
pub(crate) fn health_watch(
    client: &Client,
    own_writes: WrittenStatuses,
    health_writer: reflector::store::Writer<KarpenterHealth>,
) -> impl futures::Stream<Item = Result<KarpenterHealth, watcher::Error>> + Send + 'static {
    watcher(
        Api::<KarpenterHealth>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(health_writer)
    .filter_map(move |event| {
        futures::future::ready(match event {
            Ok(watcher::Event::Apply(health) | watcher::Event::InitApply(health))
                if is_own_write(&own_writes, &health) =>
            {
                None
            }
            Ok(
                watcher::Event::Apply(health)
                | watcher::Event::InitApply(health)
                | watcher::Event::Delete(health),
            ) => Some(Ok(health)),
            Ok(_) => None,
            Err(error) => Some(Err(error)),
        })
    })
}

/// The user lane's triggers: the class's KarpenterHealth, its NodePools, and every input a
/// user changes that every class reads (aws-auth, the controller, the CRDs, webhooks, the CNI);
/// the storms' inputs are returned for the bulk lane.
pub(crate) fn user_changes(
    controller: Controller<DeserializeGuard<EC2NodeClass>>,
    health_stream: impl futures::Stream<Item = Result<KarpenterHealth, watcher::Error>> + Send + 'static,
    inputs: Triggers,
    triggers: &ClassTriggers,
) -> (Controller<DeserializeGuard<EC2NodeClass>>, StormInputs) {
    let Triggers {
        node_pools,
        node_claims,
        pending_pods,
        disruption_events,
        config_maps,
        deployments,
        service_accounts,
        node_pool_crd,
        validating_webhooks,
        mutating_webhooks,
        endpoints,
        daemonsets,
        inputs_changed,
    } = inputs;
    let controller = controller
        // A KarpenterHealth has the name of its class.
        .watches_stream(
            health_stream,
            triggers.mapper(|_, health: KarpenterHealth| vec![health.name_any()]),
        )
        .watches_stream(
            node_pools,
            triggers.mapper(|_, pool| ClassTriggers::class_of_pool(pool)),
        )
        .watches_stream(config_maps, triggers.mapper(|t, _| t.all_classes()))
        .watches_stream(deployments, triggers.mapper(|t, _| t.all_classes()))
        .watches_stream(service_accounts, triggers.mapper(|t, _| t.all_classes()))
        .watches_stream(node_pool_crd, triggers.mapper(|t, _| t.all_classes()))
        // Webhooks and their Services' endpoints: every class's KarpenterVersionCompatible.
        .watches_stream(validating_webhooks, triggers.mapper(|t, _| t.all_classes()))
        .watches_stream(mutating_webhooks, triggers.mapper(|t, _| t.all_classes()))
        .watches_stream(endpoints, triggers.mapper(|t, _| t.all_classes()))
        .watches_stream(daemonsets, triggers.mapper(|t, _| t.all_classes()))
        // An input becoming observable (its first list, even an empty one), or turning unknown
        // after a lasting watch failure, or recovering, re-evaluates every class at once.
        .reconcile_all_on(inputs_changed);
    (
        controller,
        StormInputs {
            node_claims,
            pending_pods,
            disruption_events,
        },
    )
}

/// The inputs that change in storms (a scale-up), for the bulk lane.
pub(crate) struct StormInputs {
    pub(crate) node_claims: BoxStream<'static, Result<ClaimsTouched, watcher::Error>>,
    pub(crate) pending_pods: BoxStream<'static, Result<PodPins, watcher::Error>>,
    pub(crate) disruption_events: BoxStream<'static, Result<EventsTouched, watcher::Error>>,
}

/// Whether `health` holds what this process last wrote for it (up to `lastEvaluated`): then the
/// watch event is the echo of that write.
fn is_own_write(written: &WrittenStatuses, health: &KarpenterHealth) -> bool {
    let (Some(status), Ok(written)) = (health.status.as_ref(), written.lock()) else {
        return false;
    };
    written.get(&health.name_any()).is_some_and(|mine| {
        KarpenterHealthStatus {
            last_evaluated: None,
            ..mine.clone()
        } == KarpenterHealthStatus {
            last_evaluated: None,
            ..status.clone()
        }
    })
}

/// The classes of the NodeClaims whose drain read anew differs from the one held.
pub(crate) fn drain_classes(
    changed: futures::channel::mpsc::UnboundedReceiver<Vec<String>>,
    triggers: &ClassTriggers,
) -> BoxStream<'static, ObjectRef<DeserializeGuard<EC2NodeClass>>> {
    let triggers = triggers.clone();
    changed
        .flat_map(move |claims| {
            let mut classes: Vec<String> = claims
                .iter()
                .flat_map(|claim| triggers.class_of_node_claim(claim))
                .collect();
            classes.sort();
            classes.dedup();
            triggers.stamp(&classes);
            futures::stream::iter(classes.into_iter().map(|c| ObjectRef::new(&c)))
        })
        .boxed()
}

/// The classes NodeClaim and pending-Pod changes ask for, each stamped with its arrival time and
/// coalesced per class to one reconcile per `interval`.
pub(crate) fn bulk_triggers(
    node_claims: BoxStream<'static, Result<ClaimsTouched, watcher::Error>>,
    pending_pods: BoxStream<'static, Result<PodPins, watcher::Error>>,
    disruption_events: BoxStream<'static, Result<EventsTouched, watcher::Error>>,
    triggers: &ClassTriggers,
    interval: std::time::Duration,
) -> BoxStream<'static, ObjectRef<DeserializeGuard<EC2NodeClass>>> {
    // Watch errors are the watches' own business (their health turns the facts Unknown).
    let claim_triggers = triggers.clone();
    let claim_classes = node_claims.filter_map(move |touched| {
        futures::future::ready(touched.ok().map(|touched| match touched {
            ClaimsTouched::Classes(classes) => classes,
            ClaimsTouched::AllClasses => claim_triggers.all_classes(),
        }))
    });
    let pod_triggers = triggers.clone();
    let pod_classes = pending_pods.filter_map(move |pod| {
        futures::future::ready(
            pod.ok()
                .map(|pod| pod_triggers.classes_of_pending_pod(&pod)),
        )
    });
    let event_triggers = triggers.clone();
    let event_classes = disruption_events.filter_map(move |touched| {
        futures::future::ready(touched.ok().map(|touched| match touched {
            EventsTouched::NodeClaim(claim) => event_triggers.class_of_node_claim(&claim),
            EventsTouched::All => event_triggers.all_classes(),
        }))
    });
    let stamping = triggers.clone();
    let requests = futures::stream::select_all([
        claim_classes.boxed(),
        pod_classes.boxed(),
        event_classes.boxed(),
    ])
    .map(move |classes| {
        stamping.stamp(&classes);
        classes
    });
    coalesce(requests, interval)
        .map(|class| ObjectRef::new(&class))
        .boxed()
}

/// The classes whose AWS answers changed, as reconcile requests.
pub(crate) fn aws_changes(
    aws: &AwsPort,
    triggers: &ClassTriggers,
) -> BoxStream<'static, ObjectRef<DeserializeGuard<EC2NodeClass>>> {
    let Some(changes) = aws.source.changes() else {
        return futures::stream::empty().boxed();
    };
    let triggers = triggers.clone();
    changes
        .flat_map(move |changed| {
            let classes = match changed {
                Changed::Readers(readers) => readers.iter().map(|r| r.to_string()).collect(),
                Changed::Everyone => triggers.all_classes(),
            };
            triggers.stamp(&classes);
            futures::stream::iter(classes.into_iter().map(|class| ObjectRef::new(&class)))
        })
        .boxed()
}

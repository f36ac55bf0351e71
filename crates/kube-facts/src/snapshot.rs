//! Turns what the watch caches hold into the check engine's `ClusterFacts` for one EC2NodeClass.
//! Pure: no IO, callers pass the cache contents in.

use crate::disruption_events::SharedDisruptionEvents;
use crate::karpenter_settings::{controller_settings, irsa_audience, role_arn};
use crate::node_claims::SharedClaims;
use crate::pending_pods::SharedPendingPods;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_health_api::karpenter::{EC2NodeClass, NodePool};
use karpenter_health_checks::facts::{
    AwsAuthData, ClusterFacts, CrdFacts, KarpenterFacts, Observed, VpcCniSettings, WebhookFacts,
};
use kube::ResourceExt;
use kube::core::DeserializeGuard;
use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Operator flags that replace what would otherwise be read from the cluster, for clusters where
/// the Karpenter controller runs elsewhere (EKS Auto Mode, a Fargate profile in another place).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    pub karpenter_version: Option<String>,
    pub cluster_name: Option<String>,
}

/// What the caches held at one instant. A cache that has not synced, or whose watch is failing,
/// is `Unknown`; a synced cache without the object is `Found(None)`.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    pub node_pools: Observed<Vec<Arc<DeserializeGuard<NodePool>>>>,
    /// Every NodeClaim, indexed by EC2NodeClass.
    pub node_claims: Observed<SharedClaims>,
    /// The pending Pods Karpenter would provision for.
    pub pending_pods: Observed<SharedPendingPods>,
    /// Karpenter's `DisruptionBlocked` Events on NodeClaims.
    pub disruption_events: Observed<SharedDisruptionEvents>,
    /// What the drains of NodeClaims stuck terminating wait for.
    pub drains: crate::drain::DrainReads,
    /// The requests of the newest Pods of the DaemonSets read ([`crate::daemonset_pods`]).
    pub daemonset_pods: crate::daemonset_pods::DaemonSetPodReads,
    pub aws_auth: Observed<Option<Arc<ConfigMap>>>,
    /// `kube-system/cilium-config`, trimmed to its node taint settings ([`crate::cilium`]).
    pub cilium_config: Observed<Option<Arc<ConfigMap>>>,
    pub karpenter_deployment: Observed<Option<Arc<Deployment>>>,
    /// `kube-system/aws-load-balancer-controller`, trimmed ([`crate::load_balancer_controller`]).
    pub load_balancer_controller: Observed<Option<Arc<Deployment>>>,
    pub karpenter_service_account: Observed<Option<Arc<ServiceAccount>>>,
    pub aws_node_service_account: Observed<Option<Arc<ServiceAccount>>>,
    /// `nodepools.karpenter.sh`, trimmed to the label rules it enforces.
    pub node_pool_crd: Observed<Option<Arc<CustomResourceDefinition>>>,
    /// Every DaemonSet, trimmed to what Karpenter schedules by and, for the VPC CNI's
    /// `kube-system/aws-node`, its containers' env ([`crate::trim::daemonset`]).
    pub daemonsets: Observed<Vec<Arc<DaemonSet>>>,
    /// Every installed Karpenter CRD, trimmed ([`crate::trim::node_pool_crd`]).
    pub karpenter_crds: Observed<Vec<Arc<CustomResourceDefinition>>>,
    /// Every webhook of every validating and mutating webhook configuration.
    pub webhooks: Observed<Vec<Webhook>>,
    /// The Endpoints in Karpenter's namespace.
    pub endpoints: Observed<Vec<Arc<Endpoints>>>,
    pub karpenter_namespace: String,
    pub apiserver_version: Observed<String>,
}

/// One webhook of a validating or mutating webhook configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Webhook {
    pub kind: &'static str,
    pub configuration: String,
    pub name: String,
    /// `clientConfig.service` as (namespace, name); `None` for a URL webhook.
    pub service: Option<(String, String)>,
}

/// The webhooks of one configuration.
pub fn webhooks_of<'a>(
    kind: &'static str,
    metadata: &ObjectMeta,
    webhooks: impl Iterator<Item = (&'a String, &'a WebhookClientConfig)>,
) -> Vec<Webhook> {
    let configuration = metadata.name.clone().unwrap_or_default();
    webhooks
        .map(|(name, config)| Webhook {
            kind,
            configuration: configuration.clone(),
            name: name.clone(),
            service: config
                .service
                .as_ref()
                .map(|s| (s.namespace.clone(), s.name.clone())),
        })
        .collect()
}

/// Every webhook of both kinds of configuration (cached `Arc`s or listed objects alike); unknown
/// while either kind is.
pub fn webhooks_of_configurations<V, M>(
    validating: Observed<Vec<V>>,
    mutating: Observed<Vec<M>>,
) -> Observed<Vec<Webhook>>
where
    V: Borrow<ValidatingWebhookConfiguration>,
    M: Borrow<MutatingWebhookConfiguration>,
{
    match (validating, mutating) {
        (Observed::Unknown(u), _) | (_, Observed::Unknown(u)) => Observed::Unknown(u),
        (v, m) => {
            let mut all = Vec::new();
            for c in v.found().into_iter().flatten().map(Borrow::borrow) {
                all.extend(webhooks_of(
                    "ValidatingWebhookConfiguration",
                    &c.metadata,
                    c.webhooks
                        .iter()
                        .flatten()
                        .map(|w| (&w.name, &w.client_config)),
                ));
            }
            for c in m.found().into_iter().flatten().map(Borrow::borrow) {
                all.extend(webhooks_of(
                    "MutatingWebhookConfiguration",
                    &c.metadata,
                    c.webhooks
                        .iter()
                        .flatten()
                        .map(|w| (&w.name, &w.client_config)),
                ));
            }
            Observed::Found(all)
        }
    }
}

/// Whether a webhook is Karpenter's: it calls a Service named `karpenter*`, or a Service in
/// Karpenter's namespace and carries Karpenter's name (its webhooks are `*.karpenter.sh` and
/// `*.karpenter.k8s.aws`). Other webhooks sharing the namespace (kube-system) are not ours to
/// judge.
fn is_karpenters(webhook: &Webhook, namespace: &str) -> bool {
    let Some((ns, name)) = &webhook.service else {
        return false;
    };
    name.starts_with("karpenter")
        || (ns == namespace
            && (webhook.name.contains("karpenter") || webhook.configuration.contains("karpenter")))
}

/// The ready addresses of the Service `namespace/name`, from the Endpoints in Karpenter's
/// namespace: absent when no Endpoints object has its name.
fn ready_endpoints(sources: &Sources, service: &str) -> Observed<usize> {
    let Some((namespace, name)) = service.split_once('/') else {
        return Observed::not_observed(format!("{service} names no namespace"));
    };
    if namespace != sources.karpenter_namespace {
        return Observed::not_observed(format!(
            "only the Endpoints of Karpenter's namespace {} are watched",
            sources.karpenter_namespace
        ));
    }
    match &sources.endpoints {
        Observed::Found(all) => all
            .iter()
            .find(|e| e.metadata.name.as_deref() == Some(name))
            .map_or(Observed::Absent, |e| {
                Observed::Found(
                    e.subsets
                        .iter()
                        .flatten()
                        .flat_map(|s| s.addresses.iter().flatten())
                        .count(),
                )
            }),
        Observed::Absent => Observed::Absent,
        Observed::Unknown(u) => Observed::Unknown(u.clone()),
    }
}

/// What every EC2NodeClass reads alike: derived from the cluster-wide inputs (aws-auth, the
/// controller's Deployment and ServiceAccounts, CRDs, webhooks, Endpoints, the VPC CNI, the API
/// server's version), once per change of them, and shared by every class's snapshot
/// ([`WideMemo`]). NodePools, NodeClaims and pending Pods are read per class instead: they change
/// in storms and each class reads only its own.
#[derive(Clone, Debug, Default)]
pub struct ClusterWide {
    aws_auth: Observed<AwsAuthData>,
    karpenter: Observed<KarpenterFacts>,
    crd_label_rules: karpenter_health_checks::facts::CrdLabelRules,
    aws_node_role_arn: Observed<Option<String>>,
    karpenter_crds: Observed<Vec<CrdFacts>>,
    karpenter_webhooks: Observed<Vec<WebhookFacts>>,
    service_endpoints: BTreeMap<String, Observed<usize>>,
    vpc_cni: Observed<VpcCniSettings>,
    daemonsets: Observed<Arc<Vec<karpenter_health_checks::facts::DaemonSetFacts>>>,
    cilium_node_taint: Observed<String>,
    load_balancer_controller: Observed<karpenter_health_checks::facts::LoadBalancerControllerFacts>,
}

/// Derives the cluster-wide facts from `sources`.
pub fn cluster_wide(sources: &Sources, overrides: &Overrides) -> ClusterWide {
    let karpenter_crds: Observed<Vec<CrdFacts>> = sources
        .karpenter_crds
        .as_ref()
        .map(|crds| crds.iter().map(|c| crate::trim::crd_facts(c)).collect());
    let karpenter_webhooks: Observed<Vec<WebhookFacts>> = sources.webhooks.as_ref().map(|hooks| {
        hooks
            .iter()
            .filter(|w| is_karpenters(w, &sources.karpenter_namespace))
            .filter_map(|w| {
                let (ns, name) = w.service.as_ref()?;
                Some(WebhookFacts {
                    kind: w.kind.to_owned(),
                    configuration: w.configuration.clone(),
                    webhook: w.name.clone(),
                    service: format!("{ns}/{name}"),
                })
            })
            .collect()
    });
    let services: std::collections::BTreeSet<String> = karpenter_webhooks
        .found()
        .into_iter()
        .flatten()
        .map(|w| w.service.clone())
        .chain(
            karpenter_crds
                .found()
                .into_iter()
                .flatten()
                .filter_map(|c| c.conversion_service.clone()),
        )
        .collect();
    let service_endpoints = services
        .into_iter()
        .map(|s| {
            let ready = ready_endpoints(sources, &s);
            (s, ready)
        })
        .collect();
    ClusterWide {
        aws_auth: aws_auth(&sources.aws_auth),
        karpenter: karpenter(sources, overrides),
        crd_label_rules: of_named(&sources.node_pool_crd, |crd| {
            Some(crate::trim::label_rules_of(crd))
        }),
        aws_node_role_arn: sources
            .aws_node_service_account
            .as_ref()
            .map(|sa| sa.as_ref().and_then(|sa| role_arn(sa))),
        karpenter_crds,
        karpenter_webhooks,
        service_endpoints,
        vpc_cni: match &sources.daemonsets {
            Observed::Found(all) => match all.iter().find(|ds| crate::trim::is_aws_node(ds)) {
                Some(ds) => Observed::Found(vpc_cni_settings(ds)),
                None => Observed::Absent,
            },
            Observed::Absent => Observed::Absent,
            Observed::Unknown(u) => Observed::Unknown(u.clone()),
        },
        cilium_node_taint: of_named(&sources.cilium_config, crate::cilium::node_taint_key),
        load_balancer_controller: of_named(&sources.load_balancer_controller, |deployment| {
            Some(crate::load_balancer_controller::facts_of(deployment))
        }),
        daemonsets: sources.daemonsets.as_ref().map(|all| {
            Arc::new(
                all.iter()
                    .map(|ds| crate::daemonsets::facts_with_newest(ds, &sources.daemonset_pods))
                    .collect(),
            )
        }),
    }
}

/// The fact `fact` derives from a named object's read: `Absent` when there is no such object or
/// it says nothing (`fact` gives `None`), unknown as the read is.
fn of_named<T, U>(
    read: &Observed<Option<Arc<T>>>,
    fact: impl FnOnce(&T) -> Option<U>,
) -> Observed<U> {
    match read {
        Observed::Found(Some(object)) => fact(object).map_or(Observed::Absent, Observed::Found),
        Observed::Found(None) | Observed::Absent => Observed::Absent,
        Observed::Unknown(u) => Observed::Unknown(u.clone()),
    }
}

/// The inputs [`cluster_wide`] reads, by identity: the cached objects themselves (a watch cache
/// hands out a new `Arc` when an object changes and the same one otherwise), their observation
/// state, and the values built per snapshot. Holding the `Arc`s keeps their addresses from being
/// reused while the key lives.
#[derive(Clone, Debug, Default)]
pub struct WideKey {
    objects: Vec<Observed<Vec<ObjectId>>>,
    webhooks: Observed<Vec<Webhook>>,
    apiserver_version: Observed<String>,
    daemonset_pods: u64,
}

/// One cached object, compared by address.
#[derive(Clone, Debug)]
struct ObjectId(Arc<dyn std::any::Any + Send + Sync>);

impl PartialEq for ObjectId {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl PartialEq for WideKey {
    fn eq(&self, other: &Self) -> bool {
        self.objects == other.objects
            && self.webhooks == other.webhooks
            && self.apiserver_version == other.apiserver_version
            && self.daemonset_pods == other.daemonset_pods
    }
}

fn ids<T: Send + Sync + 'static>(observed: &Observed<Vec<Arc<T>>>) -> Observed<Vec<ObjectId>> {
    observed.as_ref().map(|all| {
        all.iter()
            .map(|o| ObjectId(o.clone() as Arc<dyn std::any::Any + Send + Sync>))
            .collect()
    })
}

fn id<T: Send + Sync + 'static>(observed: &Observed<Option<Arc<T>>>) -> Observed<Vec<ObjectId>> {
    ids(&observed.as_ref().map(|o| o.iter().cloned().collect()))
}

impl WideKey {
    /// The identity of every input of [`cluster_wide`] in `sources`.
    pub fn of(sources: &Sources) -> Self {
        Self {
            objects: vec![
                id(&sources.aws_auth),
                id(&sources.cilium_config),
                id(&sources.karpenter_deployment),
                id(&sources.load_balancer_controller),
                id(&sources.karpenter_service_account),
                id(&sources.aws_node_service_account),
                id(&sources.node_pool_crd),
                ids(&sources.daemonsets),
                ids(&sources.karpenter_crds),
                ids(&sources.endpoints),
            ],
            webhooks: sources.webhooks.clone(),
            apiserver_version: sources.apiserver_version.clone(),
            daemonset_pods: sources.daemonset_pods.version(),
        }
    }
}

/// The last [`ClusterWide`] derived, with the key it was derived from: every class's snapshot
/// between two changes of a cluster-wide input shares one derivation (one aws-auth parse, one
/// trim of each CRD), however many classes there are.
#[derive(Debug, Default)]
pub struct WideMemo {
    last: std::sync::Mutex<Option<(WideKey, Arc<ClusterWide>)>>,
    derivations: std::sync::atomic::AtomicU64,
}

impl WideMemo {
    /// The cluster-wide facts of `sources`: the memoized ones when no input changed.
    pub fn get(&self, sources: &Sources, overrides: &Overrides) -> Arc<ClusterWide> {
        let key = WideKey::of(sources);
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((known, wide)) = last.as_ref()
            && *known == key
        {
            return wide.clone();
        }
        let wide = Arc::new(cluster_wide(sources, overrides));
        self.derivations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *last = Some((key, wide.clone()));
        wide
    }

    /// How many times the cluster-wide facts were derived.
    pub fn derivations(&self) -> u64 {
        self.derivations.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Builds the cluster facts of `node_class`, deriving the cluster-wide part anew.
pub fn cluster_facts(
    node_class: &EC2NodeClass,
    sources: &Sources,
    overrides: &Overrides,
) -> ClusterFacts {
    class_facts(
        node_class,
        sources,
        overrides,
        &cluster_wide(sources, overrides),
    )
}

/// Builds the cluster facts of `node_class` over cluster-wide facts derived before.
pub fn class_facts(
    node_class: &EC2NodeClass,
    sources: &Sources,
    overrides: &Overrides,
    wide: &ClusterWide,
) -> ClusterFacts {
    let name = node_class.name_any();
    let node_pools: Observed<Vec<NodePool>> = sources.node_pools.as_ref().map(|pools| {
        pools
            .iter()
            .filter_map(|guarded| guarded.0.as_ref().ok())
            .filter(|pool| pool.uses_ec2_node_class(&name))
            .cloned()
            .collect()
    });
    // A class reads its own NodeClaims and the cluster-wide claimed-instance set, which the index
    // builds once per NodeClaim change and shares.
    let (node_claims, claimed_instance_ids) = match &sources.node_claims {
        Observed::Found(claims) => claims.read(|index| {
            let claimed = match index.unreadable() {
                // Its instance may be any of them: calling one unclaimed would be a guess.
                Some((claim, error, count)) => Observed::not_observed(format!(
                    "NodeClaim {claim} could not be read ({error}){}; the instances it claims \
                     are unknown",
                    if count > 1 {
                        format!(" and {} more", count - 1)
                    } else {
                        String::new()
                    }
                )),
                None => Observed::Found(index.claimed_instance_ids()),
            };
            (Observed::Found(index.of_class(&name)), claimed)
        }),
        Observed::Absent => (Observed::Absent, Observed::Absent),
        Observed::Unknown(u) => (Observed::Unknown(u.clone()), Observed::Unknown(u.clone())),
    };
    // Which pending Pods charge this class depends on every NodePool: unknown while they are.
    let pending_pods = match (&sources.pending_pods, &sources.node_pools) {
        (Observed::Found(pods), Observed::Found(pools)) => {
            let pools: Vec<&NodePool> = pools
                .iter()
                .filter_map(|guarded| guarded.0.as_ref().ok())
                .collect();
            Observed::Found(pods.read(|index| index.of_class(&name, &pools)))
        }
        (Observed::Unknown(u), _) | (Observed::Found(_), Observed::Unknown(u)) => {
            Observed::Unknown(u.clone())
        }
        (Observed::Absent, _) | (Observed::Found(_), Observed::Absent) => {
            Observed::Found(Vec::new())
        }
    };

    // What blocks the class's NodeClaims, as Karpenter's Events say.
    let disruption_blocked = match (&sources.disruption_events, &node_claims) {
        (Observed::Found(events), Observed::Found(claims)) => Observed::Found(
            events.read(|index| index.of_node_claims(claims.iter().map(|c| c.name.as_str()))),
        ),
        (Observed::Unknown(u), _) => Observed::Unknown(u.clone()),
        (_, Observed::Unknown(u)) => Observed::Unknown(u.clone()),
        _ => Observed::Found(BTreeMap::new()),
    };
    // What holds the class's NodeClaims stuck terminating, where it was read.
    let drains = match &node_claims {
        Observed::Found(claims) => sources
            .drains
            .of_node_claims(claims.iter().map(|c| c.name.as_str())),
        _ => BTreeMap::new(),
    };
    ClusterFacts {
        node_class: node_class.clone(),
        node_pools,
        node_claims,
        claimed_instance_ids,
        pending_pods,
        aws_auth: wide.aws_auth.clone(),
        karpenter: wide.karpenter.clone(),
        crd_label_rules: wide.crd_label_rules.clone(),
        aws_node_role_arn: wide.aws_node_role_arn.clone(),
        configured_cluster_name: overrides.cluster_name.clone(),
        // The controller knows when it saw the current generation; it fills this in.
        node_class_generation_seen_at: None,
        apiserver_version: sources.apiserver_version.clone(),
        karpenter_crds: wide.karpenter_crds.clone(),
        karpenter_webhooks: wide.karpenter_webhooks.clone(),
        service_endpoints: wide.service_endpoints.clone(),
        vpc_cni: wide.vpc_cni.clone(),
        daemonsets: wide.daemonsets.clone(),
        cilium_node_taint: wide.cilium_node_taint.clone(),
        load_balancer_controller: wide.load_balancer_controller.clone(),
        disruption_blocked,
        drains,
    }
}

/// The literal env of the `aws-node` container (the first container when none has that name);
/// values from references (`valueFrom`) cannot be read here and are left out.
pub fn vpc_cni_settings(daemonset: &DaemonSet) -> VpcCniSettings {
    let containers = daemonset
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .map(|p| p.containers.as_slice())
        .unwrap_or_default();
    let container = containers
        .iter()
        .find(|c| c.name == "aws-node")
        .or_else(|| containers.first());
    VpcCniSettings {
        env: container
            .and_then(|c| c.env.as_ref())
            .map(|env| {
                env.iter()
                    .filter_map(|e| Some((e.name.clone(), e.value.clone()?)))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

fn aws_auth(observed: &Observed<Option<Arc<ConfigMap>>>) -> Observed<AwsAuthData> {
    match observed {
        Observed::Found(Some(config_map)) => {
            let data = config_map.data.as_ref();
            Observed::Found(AwsAuthData::new(
                data.and_then(|d| d.get("mapRoles")).cloned(),
                data.and_then(|d| d.get("mapUsers")).cloned(),
            ))
        }
        Observed::Found(None) | Observed::Absent => Observed::Absent,
        Observed::Unknown(u) => Observed::Unknown(u.clone()),
    }
}

fn karpenter(sources: &Sources, overrides: &Overrides) -> Observed<KarpenterFacts> {
    let settings = match &sources.karpenter_deployment {
        Observed::Found(Some(deployment)) => Some(controller_settings(deployment)),
        Observed::Found(None) | Observed::Absent => None,
        Observed::Unknown(unobserved) => {
            // Flags can stand in for an unreadable Deployment, but only for what they cover.
            if overrides.karpenter_version.is_none() {
                return Observed::Unknown(unobserved.clone());
            }
            None
        }
    };
    let settings = settings.unwrap_or_default();
    let (controller_role_arn, irsa_audience, service_account) =
        match &sources.karpenter_service_account {
            Observed::Found(Some(sa)) => (
                role_arn(sa),
                irsa_audience(sa),
                Some(format!(
                    "{}/{}",
                    sa.namespace().unwrap_or_default(),
                    sa.name_any()
                )),
            ),
            _ => (None, None, None),
        };
    // Issue 11: whether the ServiceAccount was read, and the interruption and dry-run settings.
    let service_account_state = match &sources.karpenter_service_account {
        Observed::Found(Some(_)) => Observed::Found(()),
        Observed::Found(None) | Observed::Absent => Observed::Absent,
        Observed::Unknown(u) => Observed::Unknown(u.clone()),
    };
    Observed::Found(KarpenterFacts {
        version: overrides.karpenter_version.clone().or(settings.version),
        cluster_name: settings.cluster_name,
        controller_role_arn,
        isolated_vpc: settings.isolated_vpc,
        service_account,
        service_account_state,
        interruption_queue: settings.interruption_queue,
        dry_run_disabled: settings.dry_run_disabled,
        feature_gates: settings.feature_gates,
        min_values_policy: settings.min_values_policy,
        reserved_enis: settings.reserved_enis,
        irsa_audience,
    })
}

#[cfg(test)]
mod tests;

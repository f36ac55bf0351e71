//! Reads what the drain of a NodeClaim stuck terminating waits for: the Pods bound to its Node
//! (one list, field selector `spec.nodeName`) and the PodDisruptionBudgets of their namespaces,
//! kept as the checks' [`NodeDrain`] by NodeClaim. Only NodeClaims terminating longer than the
//! warning's threshold are read, at most [`MAX_NODES`] of them per round, so a cluster that
//! drains normally costs no call. Does IO (`read_drain`, [`DrainReads::refresh`]); the
//! translation of Pods and budgets is pure.

use crate::api_errors::cause_of_api_error;
use k8s_openapi::api::core::v1::{Pod, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use karpenter_health_checks::facts::{BudgetFacts, NodeDrain, Observed, PodOnNode};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::core::{Selector, SelectorExt};
use kube::{Api, Client, ResourceExt};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

/// The most Nodes read per round (oldest NodeClaims first); the warning names five.
pub const MAX_NODES: usize = 20;

/// The taints Karpenter puts on a Node it drains: v1's, and the one before v1
/// (kubernetes-sigs/karpenter `pkg/apis/v1/taints.go`, `pkg/apis/v1beta1/taints.go`).
const DISRUPTED_TAINT: (&str, &str) = ("karpenter.sh/disrupted", "");
const DISRUPTING_TAINT: (&str, &str) = ("karpenter.sh/disruption", "disrupting");

/// The drains read, by NodeClaim; shared by the refresher and every snapshot.
#[derive(Clone, Debug, Default)]
pub struct DrainReads(Arc<RwLock<BTreeMap<String, Observed<NodeDrain>>>>);

impl DrainReads {
    /// Reads held for a one-shot evaluation.
    pub fn listed(drains: BTreeMap<String, Observed<NodeDrain>>) -> Self {
        Self(Arc::new(RwLock::new(drains)))
    }

    /// The drains read of `node_claims`.
    pub fn of_node_claims<'a>(
        &self,
        node_claims: impl IntoIterator<Item = &'a str>,
    ) -> BTreeMap<String, Observed<NodeDrain>> {
        let held = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if held.is_empty() {
            return BTreeMap::new();
        }
        node_claims
            .into_iter()
            .filter_map(|name| held.get(name).map(|d| (name.to_owned(), d.clone())))
            .collect()
    }

    /// Reads the drains of the NodeClaims of `claims` terminating since `before` or earlier, and
    /// replaces what was held; returns the NodeClaims whose drain changed (read anew
    /// differently, or no longer terminating long).
    pub async fn refresh(
        &self,
        client: &Client,
        claims: &crate::node_claims::SharedClaims,
        before: jiff::Timestamp,
    ) -> Vec<String> {
        let stuck = claims.read(|index| index.terminating_since(before));
        let read = read_drains(client, &stuck).await;
        let mut held = self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let names: BTreeSet<&String> = held.keys().chain(read.keys()).collect();
        let changed = names
            .into_iter()
            .filter(|name| held.get(*name) != read.get(*name))
            .cloned()
            .collect();
        *held = read;
        changed
    }
}

/// Reads the drain of each of `stuck` (NodeClaim, Node), oldest first, up to [`MAX_NODES`].
pub(crate) async fn read_drains(
    client: &Client,
    stuck: &[(String, Option<String>)],
) -> BTreeMap<String, Observed<NodeDrain>> {
    let mut drains = BTreeMap::new();
    for (claim, node) in stuck.iter().take(MAX_NODES) {
        drains.insert(claim.clone(), read_drain(client, node.as_deref()).await);
    }
    drains
}

/// The Pods on `node` and the PodDisruptionBudgets of their namespaces.
pub async fn read_drain(client: &Client, node: Option<&str>) -> Observed<NodeDrain> {
    let Some(node) = node else {
        return Observed::Found(NodeDrain::default());
    };
    // Served from the API server's watch cache: the drain moves in minutes, not milliseconds.
    let params = ListParams::default()
        .fields(&format!("spec.nodeName={node}"))
        .match_any();
    let pods = match Api::<Pod>::all(client.clone()).list(&params).await {
        Ok(list) => list.items,
        Err(error) => {
            return Observed::unknown(
                cause_of_api_error(&error),
                format!("listing the Pods on Node {node}: {error}"),
            );
        }
    };
    let namespaces: BTreeSet<String> = pods.iter().filter_map(|p| p.namespace()).collect();
    let mut budgets: Vec<Budget> = Vec::new();
    let mut failed = None;
    for namespace in &namespaces {
        match list_budgets(client, namespace).await {
            Ok(listed) => budgets.extend(listed),
            Err(unknown) => {
                failed = Some(unknown);
                break;
            }
        }
    }
    Observed::Found(drain_of(node, &pods, failed.map_or(Ok(budgets), Err)))
}

/// One PodDisruptionBudget as read: its facts and the Pods its selector selects.
#[derive(Clone, Debug)]
pub struct Budget {
    pub key: String,
    pub facts: BudgetFacts,
    /// `None` selects no Pod (a null selector; an empty one under `policy/v1beta1`).
    pub selector: Option<Selector>,
}

impl Budget {
    fn selects(&self, pod: &Pod) -> bool {
        self.key.split('/').next() == pod.namespace().as_deref()
            && self.selector.as_ref().is_some_and(|s| {
                s.matches(pod.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()))
            })
    }
}

/// The PodDisruptionBudgets of `namespace`, as `policy/v1` (Kubernetes 1.21 on) or, where the
/// API server serves no such version, `policy/v1beta1`.
async fn list_budgets(
    client: &Client,
    namespace: &str,
) -> Result<Vec<Budget>, karpenter_health_checks::facts::Unobserved> {
    let mut last = None;
    for version in ["v1", "v1beta1"] {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("policy", version, "PodDisruptionBudget"),
            "poddisruptionbudgets",
        );
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
        match api.list(&ListParams::default().match_any()).await {
            Ok(list) => {
                return list
                    .items
                    .iter()
                    .map(|object| budget_of(object, version == "v1"))
                    .collect();
            }
            Err(kube::Error::Api(status)) if status.code == 404 && version == "v1" => {
                last = Some(kube::Error::Api(status));
            }
            Err(error) => {
                return Err(unobserved(&error, namespace));
            }
        }
    }
    Err(last.map_or_else(
        || karpenter_health_checks::facts::Unobserved {
            cause: karpenter_health_checks::facts::UnknownCause::Unsupported,
            detail: "no version of PodDisruptionBudgets is served".into(),
        },
        |error| unobserved(&error, namespace),
    ))
}

fn unobserved(error: &kube::Error, namespace: &str) -> karpenter_health_checks::facts::Unobserved {
    karpenter_health_checks::facts::Unobserved {
        cause: cause_of_api_error(error),
        detail: format!("listing the PodDisruptionBudgets of namespace {namespace}: {error}"),
    }
}

#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireBudget {
    spec: WireBudgetSpec,
    status: WireBudgetStatus,
}

#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireBudgetSpec {
    selector: Option<LabelSelector>,
    unhealthy_pod_eviction_policy: Option<String>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireBudgetStatus {
    disruptions_allowed: i64,
    current_healthy: i64,
    desired_healthy: i64,
    observed_generation: Option<i64>,
}

/// The budget of `object`; `empty_selects_all` under `policy/v1` (under `v1beta1` an empty
/// selector selects nothing). A budget that cannot be read, or whose selector the API server
/// would not accept, makes the budgets unknown: which Pods it holds cannot be said.
pub fn budget_of(
    object: &DynamicObject,
    empty_selects_all: bool,
) -> Result<Budget, karpenter_health_checks::facts::Unobserved> {
    let key = format!(
        "{}/{}",
        object.namespace().unwrap_or_default(),
        object.name_any()
    );
    let invalid = |why: String| karpenter_health_checks::facts::Unobserved {
        cause: karpenter_health_checks::facts::UnknownCause::Unavailable,
        detail: format!("PodDisruptionBudget {key} could not be read: {why}"),
    };
    let wire: WireBudget =
        serde_json::from_value(object.data.clone()).map_err(|e| invalid(e.to_string()))?;
    let selector = match wire.spec.selector {
        None => None,
        Some(s) if !empty_selects_all && s == LabelSelector::default() => None,
        Some(s) => Some(Selector::try_from(s).map_err(|e| invalid(e.to_string()))?),
    };
    let generation = object.metadata.generation.unwrap_or_default();
    Ok(Budget {
        facts: BudgetFacts {
            disruptions_allowed: wire.status.disruptions_allowed,
            current_healthy: wire.status.current_healthy,
            desired_healthy: wire.status.desired_healthy,
            unhealthy_pod_eviction_policy: wire.spec.unhealthy_pod_eviction_policy,
            unprocessed: wire.status.observed_generation.unwrap_or_default() < generation,
        },
        key,
        selector,
    })
}

/// The drain of `node` from its Pods and the budgets of their namespaces (or why those could
/// not be read).
pub fn drain_of(
    node: &str,
    pods: &[Pod],
    budgets: Result<Vec<Budget>, karpenter_health_checks::facts::Unobserved>,
) -> NodeDrain {
    let mut on_node: Vec<PodOnNode> = pods
        .iter()
        .map(|pod| pod_on_node(pod, budgets.as_deref().unwrap_or_default()))
        .collect();
    on_node.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    NodeDrain {
        node: Some(node.to_owned()),
        pods: on_node,
        budgets: match budgets {
            Ok(budgets) => Observed::Found(budgets.into_iter().map(|b| (b.key, b.facts)).collect()),
            Err(unobserved) => Observed::Unknown(unobserved),
        },
    }
}

/// What Karpenter's drain and the eviction API read of `pod`, with the budgets selecting it.
pub fn pod_on_node(pod: &Pod, budgets: &[Budget]) -> PodOnNode {
    let status = pod.status.as_ref();
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default();
    PodOnNode {
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        phase: status.and_then(|s| s.phase.clone()).unwrap_or_default(),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        deleting_until: pod.metadata.deletion_timestamp.as_ref().map(|t| t.0),
        do_not_disrupt: pod
            .annotations()
            .get("karpenter.sh/do-not-disrupt")
            .cloned(),
        started: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
        mirror: pod
            .owner_references()
            .iter()
            .any(|o| o.api_version == "v1" && o.kind == "Node"),
        tolerates_disrupted: tolerates(tolerations, DISRUPTED_TAINT),
        tolerates_disrupting: tolerates(tolerations, DISRUPTING_TAINT),
        budgets: budgets
            .iter()
            .filter(|b| b.selects(pod))
            .map(|b| b.key.clone())
            .collect(),
    }
}

/// Whether `tolerations` tolerate the `NoSchedule` taint `(key, value)` (kubernetes
/// `pkg/apis/core/v1/helper` `ToleratesTaint`): the effect empty or equal, the key empty (with
/// `Exists`) or equal, and `Exists` or an equal value.
fn tolerates(tolerations: &[Toleration], (key, value): (&str, &str)) -> bool {
    tolerations.iter().any(|t| {
        let effect_ok = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == "NoSchedule");
        let t_key = t.key.as_deref().unwrap_or_default();
        let key_ok = t_key.is_empty() || t_key == key;
        let value_ok = match t.operator.as_deref().unwrap_or("Equal") {
            "Exists" => true,
            "Equal" | "" => !t_key.is_empty() && t.value.as_deref().unwrap_or_default() == value,
            _ => false,
        };
        effect_ok && key_ok && value_ok
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).expect("a Pod")
    }

    fn budget(name: &str, selector: serde_json::Value, v1: bool) -> Budget {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": if v1 { "policy/v1" } else { "policy/v1beta1" },
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "shop", "generation": 2},
            "spec": {"selector": selector, "minAvailable": 1},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1,
                       "observedGeneration": 2},
        }))
        .expect("a PodDisruptionBudget");
        budget_of(&object, v1).expect("readable")
    }

    #[test]
    fn a_pod_is_read_as_karpenters_drain_and_the_eviction_api_see_it() {
        let web = pod(json!({
            "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web"},
                         "annotations": {"karpenter.sh/do-not-disrupt": "true"}},
            "spec": {"nodeName": "n", "containers": [],
                     "tolerations": [{"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }));
        let budgets = [
            budget("web", json!({"matchLabels": {"app": "web"}}), true),
            budget(
                "other",
                json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}),
                true,
            ),
            // Empty: every Pod of the namespace under v1, none under v1beta1; null: none.
            budget("all", json!({}), true),
            budget("none-beta", json!({}), false),
            budget("null", serde_json::Value::Null, true),
        ];
        let read = pod_on_node(&web, &budgets);
        assert_eq!(read.budgets, ["shop/web", "shop/all"]);
        assert!(
            read.ready
                && read.do_not_disrupt.as_deref() == Some("true")
                && read.tolerates_disrupted
        );
        assert!(!read.tolerates_disrupting && !read.mirror);
        assert_eq!(read.phase, "Running");
    }

    #[test]
    fn tolerations_match_as_the_api_server_matches_them() {
        let t = |v: serde_json::Value| -> Vec<Toleration> { serde_json::from_value(v).unwrap() };
        // Everything, by an empty key with Exists.
        assert!(tolerates(
            &t(json!([{"operator": "Exists"}])),
            DISRUPTED_TAINT
        ));
        // The pre-v1 taint by key and value; a wrong value or effect does not.
        let old = t(json!([{"key": "karpenter.sh/disruption", "value": "disrupting"}]));
        assert!(tolerates(&old, DISRUPTING_TAINT) && !tolerates(&old, DISRUPTED_TAINT));
        assert!(!tolerates(
            &t(json!([{"key": "karpenter.sh/disruption", "value": "x"}])),
            DISRUPTING_TAINT
        ));
        assert!(!tolerates(
            &t(
                json!([{"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoExecute"}])
            ),
            DISRUPTED_TAINT
        ));
    }

    #[test]
    fn unprocessed_budgets_and_unreadable_ones_are_said_so() {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "shop", "generation": 3},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 1, "observedGeneration": 2},
        }))
        .unwrap();
        assert!(budget_of(&object, true).unwrap().facts.unprocessed);
        let mut bad = object.clone();
        bad.data["status"]["disruptionsAllowed"] = json!("many");
        let error = budget_of(&bad, true).unwrap_err();
        assert!(error.detail.contains("shop/web"), "{error:?}");
        // A drain whose budgets are unknown keeps its Pods, and says why.
        let drain = drain_of(
            "n",
            &[pod(json!({"metadata": {"name": "a", "namespace": "shop"}}))],
            Err(error),
        );
        assert_eq!(drain.pods.len(), 1);
        assert!(matches!(drain.budgets, Observed::Unknown(_)));
    }
}

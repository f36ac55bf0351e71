//! One generated cluster ([`Spec`]: what varies, small enough for proptest to shrink) and the
//! scenario it renders to ([`Scenario`]: the Kubernetes objects as the API server would serve
//! them and EC2's answers), which both the oracle and karpenter-health's engine read. Pure.

use crate::catalogue::{self, InstanceType};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The zones of the region the oracle's fake EC2 knows (aws/karpenter-provider-aws `pkg/fake`),
/// with their ids and the subnet the class has in each.
pub const ZONES: [(&str, &str, &str); 3] = [
    ("test-zone-1a", "tstz1-1a", "subnet-test1"),
    ("test-zone-1b", "tstz1-1b", "subnet-test2"),
    ("test-zone-1c", "tstz1-1c", "subnet-test3"),
];

pub const CLASS: &str = "default";
pub const CLUSTER: &str = "test-cluster";

/// What the oracle reads: one line of its input.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scenario {
    pub name: String,
    /// The Karpenter controller's environment.
    pub env: BTreeMap<String, String>,
    pub kubernetes_version: String,
    pub node_class: Value,
    pub node_pools: Vec<Value>,
    pub daemon_sets: Vec<Value>,
    pub daemon_set_pods: Vec<Value>,
    pub pending_pods: Vec<Value>,
    pub instance_types: Vec<InstanceType>,
}

impl Scenario {
    /// The required node affinity terms of pending Pod `pod` (`namespace/name`).
    pub fn required_terms(&self, pod: &str) -> usize {
        self.pending_pod(pod)
            .and_then(|p| terms(p).as_array().map(Vec::len))
            .unwrap_or(0)
    }

    /// Whether Karpenter, scheduling pending Pod `pod` on NodePool `pool`, relaxes more than its
    /// required node affinity terms: its preferences, or a `PreferNoSchedule` taint of the
    /// NodePool it does not tolerate (kubernetes-sigs/karpenter `scheduling/preferences.go`
    /// `Relax` removes required terms first and tolerates `PreferNoSchedule` last, so a Pod
    /// narrowed to one term goes on relaxing where Karpenter's attempt at that term did not).
    pub fn relaxes_beyond_required_terms(&self, pod: &str, pool: &str) -> bool {
        let Some(p) = self.pending_pod(pod) else {
            return true;
        };
        let affinity = &p["spec"]["affinity"];
        let preferences =
            !affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"].is_null()
                || !affinity["podAffinity"].is_null()
                || !affinity["podAntiAffinity"].is_null()
                || !p["spec"]["topologySpreadConstraints"].is_null();
        let tolerations = p["spec"]["tolerations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let untolerated = self
            .node_pools
            .iter()
            .filter(|np| np["metadata"]["name"] == pool)
            .flat_map(|np| {
                np["spec"]["template"]["spec"]["taints"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter(|taint| taint["effect"] == "PreferNoSchedule")
            .any(|taint| !tolerations.iter().any(|t| tolerates(t, &taint)));
        preferences || untolerated
    }

    /// This scenario with pending Pod `pod`'s required node affinity narrowed to its `term`th
    /// term: Karpenter's attempt at that term, where it relaxes nothing else
    /// ([`Self::relaxes_beyond_required_terms`]).
    pub fn with_only_term(&self, pod: &str, term: usize) -> Scenario {
        let mut narrowed = self.clone();
        if let Some(p) = narrowed.pending_pods.iter_mut().find(|p| key_of(p) == pod) {
            let path = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms";
            if let Some(terms) = p.pointer_mut(path).and_then(Value::as_array_mut) {
                let kept = terms.get(term).cloned();
                *terms = kept.into_iter().collect();
            }
        }
        narrowed
    }

    fn pending_pod(&self, pod: &str) -> Option<&Value> {
        self.pending_pods.iter().find(|p| key_of(p) == pod)
    }
}

/// Kubernetes' `Toleration.ToleratesTaint`: the effect matches or is empty, the key matches or
/// is empty with `Exists`, and with `Equal` (or no operator) the value matches.
fn tolerates(toleration: &Value, taint: &Value) -> bool {
    let field = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_owned();
    let effect = field(toleration, "effect");
    let key = field(toleration, "key");
    let exists = field(toleration, "operator") == "Exists";
    (effect.is_empty() || effect == field(taint, "effect"))
        && ((key.is_empty() && exists) || key == field(taint, "key"))
        && (exists || field(toleration, "value") == field(taint, "value"))
}

fn terms(pod: &Value) -> &Value {
    &pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
}

/// An object's `namespace/name`.
fn key_of(object: &Value) -> String {
    format!(
        "{}/{}",
        object["metadata"]["namespace"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// The architectures the class's AMIs are built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Amis {
    Amd64,
    Arm64,
    Both,
}

/// One requirement, as a NodePool or a Pod's affinity writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Req {
    pub key: String,
    pub operator: &'static str,
    pub values: Vec<String>,
    pub min_values: Option<u32>,
}

impl Req {
    fn json(&self) -> Value {
        let mut r = json!({"key": self.key, "operator": self.operator});
        if !self.values.is_empty() {
            r["values"] = json!(self.values);
        }
        if let Some(m) = self.min_values {
            r["minValues"] = json!(m);
        }
        r
    }
}

/// A taint or a toleration's key, value and effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolSpec {
    pub weight: Option<u32>,
    pub labels: BTreeMap<String, String>,
    pub requirements: Vec<Req>,
    pub taints: Vec<Taint>,
    /// `spec.limits.cpu`, in cores.
    pub cpu_limit: Option<u32>,
}

/// A toleration: `None` key with `Exists` tolerates everything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Toleration {
    pub key: Option<String>,
    pub operator: &'static str,
    pub value: String,
    pub effect: Option<&'static str>,
}

/// Where a Pod may be scheduled and what it asks for.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Placement {
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: terms (ORed) of requirements (ANDed).
    pub required: Vec<Vec<Req>>,
    pub tolerations: Vec<Toleration>,
}

/// Requests and limits of one container, in millicores and MiB.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Resources {
    pub cpu_request: Option<u32>,
    pub memory_request: Option<u32>,
    pub cpu_limit: Option<u32>,
    pub memory_limit: Option<u32>,
}

impl Resources {
    fn json(&self) -> Value {
        let mut requests = serde_json::Map::new();
        let mut limits = serde_json::Map::new();
        if let Some(c) = self.cpu_request {
            requests.insert("cpu".into(), json!(format!("{c}m")));
        }
        if let Some(m) = self.memory_request {
            requests.insert("memory".into(), json!(format!("{m}Mi")));
        }
        if let Some(c) = self.cpu_limit {
            limits.insert("cpu".into(), json!(format!("{c}m")));
        }
        if let Some(m) = self.memory_limit {
            limits.insert("memory".into(), json!(format!("{m}Mi")));
        }
        let mut r = json!({});
        if !requests.is_empty() {
            r["requests"] = Value::Object(requests);
        }
        if !limits.is_empty() {
            r["limits"] = Value::Object(limits);
        }
        r
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonSetSpec {
    pub placement: Placement,
    pub containers: Vec<Resources>,
    /// Init containers; `true` marks a sidecar (`restartPolicy: Always`).
    pub init_containers: Vec<(Resources, bool)>,
    /// The newest running Pod asks for other requests than the template (a VPA lowered them):
    /// its one container's.
    pub running_pod: Option<Resources>,
    /// Its Pods ask for a dynamic resource.
    pub resource_claim: ResourceClaim,
}

/// Where a DaemonSet's Pods ask for a dynamic resource: Karpenter reads a container's claim from
/// v1.7 and the Pod's `resourceClaims` alone only from v1.14.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceClaim {
    None,
    /// `spec.resourceClaims` and a container's `resources.claims` naming it.
    Container,
    /// `spec.resourceClaims` only.
    PodOnly,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSpec {
    pub placement: Placement,
    pub resources: Resources,
}

/// One generated cluster around one EC2NodeClass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// The zones (indexes into [`ZONES`]) the class has subnets in.
    pub subnet_zones: Vec<usize>,
    /// The instance types EC2 offers: catalogue index, zones offered in, no spot.
    pub types: Vec<(usize, Vec<usize>, bool)>,
    pub amis: Amis,
    /// `spec.kubelet` of the class, as written.
    pub kubelet: Option<Value>,
    pub pools: Vec<PoolSpec>,
    pub daemonsets: Vec<DaemonSetSpec>,
    pub pods: Vec<PodSpec>,
    /// `MIN_VALUES_POLICY`, when set.
    pub min_values_policy: Option<&'static str>,
}

fn toleration_json(t: &Toleration) -> Value {
    let mut v = json!({"operator": t.operator});
    if let Some(k) = &t.key {
        v["key"] = json!(k);
    }
    if t.operator == "Equal" {
        v["value"] = json!(t.value);
    }
    if let Some(e) = t.effect {
        v["effect"] = json!(e);
    }
    v
}

fn placement_json(p: &Placement) -> Value {
    let mut spec = json!({});
    if !p.node_selector.is_empty() {
        spec["nodeSelector"] = json!(p.node_selector);
    }
    if !p.required.is_empty() {
        let terms: Vec<Value> = p
            .required
            .iter()
            .map(|term| json!({"matchExpressions": term.iter().map(Req::json).collect::<Vec<_>>()}))
            .collect();
        spec["affinity"] = json!({"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }});
    }
    if !p.tolerations.is_empty() {
        spec["tolerations"] = json!(
            p.tolerations
                .iter()
                .map(toleration_json)
                .collect::<Vec<_>>()
        );
    }
    spec
}

fn condition(type_: &str) -> Value {
    json!({"type": type_, "status": "True", "reason": type_, "message": "",
           "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1})
}

impl Spec {
    /// The scenario this cluster renders to, named `name`.
    pub fn render(&self, name: &str) -> Scenario {
        let mut env = BTreeMap::from([
            ("CLUSTER_NAME".to_owned(), CLUSTER.to_owned()),
            (
                "CLUSTER_ENDPOINT".to_owned(),
                "https://test-cluster".to_owned(),
            ),
        ]);
        if let Some(p) = self.min_values_policy {
            env.insert("MIN_VALUES_POLICY".into(), p.into());
        }
        Scenario {
            name: name.to_owned(),
            env,
            kubernetes_version: "1.34".into(),
            node_class: self.node_class(),
            node_pools: self
                .pools
                .iter()
                .enumerate()
                .map(|(i, p)| pool_json(i, p))
                .collect(),
            daemon_sets: self
                .daemonsets
                .iter()
                .enumerate()
                .map(|(i, d)| daemonset_json(i, d))
                .collect(),
            daemon_set_pods: self
                .daemonsets
                .iter()
                .enumerate()
                .filter_map(|(i, d)| daemonset_pod_json(i, d))
                .collect(),
            pending_pods: self
                .pods
                .iter()
                .enumerate()
                .map(|(i, p)| pod_json(i, p))
                .collect(),
            instance_types: self
                .types
                .iter()
                .map(|(index, zones, no_spot)| {
                    let zones = zones.iter().map(|z| ZONES[*z].0.to_owned()).collect();
                    catalogue::instance_type(*index, zones, *no_spot)
                })
                .collect(),
        }
    }

    fn node_class(&self) -> Value {
        let archs: &[&str] = match self.amis {
            Amis::Amd64 => &["amd64"],
            Amis::Arm64 => &["arm64"],
            Amis::Both => &["amd64", "arm64"],
        };
        let amis: Vec<Value> = archs
            .iter()
            .map(|arch| {
                json!({"id": format!("ami-{arch}"), "name": format!("custom-{arch}"),
                   "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": [arch]}]})
            })
            .collect();
        let subnets: Vec<Value> = self
            .subnet_zones
            .iter()
            .map(|z| {
                let (zone, id, subnet) = ZONES[*z];
                json!({"id": subnet, "zone": zone, "zoneID": id})
            })
            .collect();
        let conditions: Vec<Value> = [
            "Ready",
            "AMIsReady",
            "SubnetsReady",
            "SecurityGroupsReady",
            "InstanceProfileReady",
            "ValidationSucceeded",
            "PlacementGroupReady",
            "CapacityReservationsReady",
        ]
        .iter()
        .map(|t| condition(t))
        .collect();
        let mut spec = json!({
            "role": "KarpenterNodeRole-test-cluster",
            "amiFamily": "AL2023",
            "amiSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
            "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
                                "httpPutResponseHopLimit": 1, "httpTokens": "required"}
        });
        if let Some(k) = &self.kubelet {
            spec["kubelet"] = k.clone();
        }
        json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": CLASS, "generation": 1, "uid": "class-uid"},
            "spec": spec,
            "status": {
                "subnets": subnets,
                "securityGroups": [{"id": "sg-test1", "name": "securityGroup-test1"}],
                "amis": amis,
                "instanceProfile": "test-cluster_1234",
                "conditions": conditions
            }
        })
    }
}

/// The name of the `i`th NodePool.
pub fn pool_name(i: usize) -> String {
    format!("pool-{i}")
}

fn pool_json(i: usize, p: &PoolSpec) -> Value {
    let mut template_spec = json!({
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": CLASS},
        "requirements": p.requirements.iter().map(Req::json).collect::<Vec<_>>(),
        "expireAfter": "720h"
    });
    if !p.taints.is_empty() {
        template_spec["taints"] = json!(
            p.taints
                .iter()
                .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect}))
                .collect::<Vec<_>>()
        );
    }
    let mut template = json!({"spec": template_spec});
    if !p.labels.is_empty() {
        template["metadata"] = json!({"labels": p.labels});
    }
    let mut spec = json!({
        "template": template,
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                       "budgets": [{"nodes": "10%"}]}
    });
    if let Some(w) = p.weight {
        spec["weight"] = json!(w);
    }
    if let Some(cpu) = p.cpu_limit {
        spec["limits"] = json!({"cpu": cpu.to_string()});
    }
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": pool_name(i), "generation": 1, "uid": format!("pool-uid-{i}")},
        "spec": spec
    })
}

fn container(name: &str, r: &Resources) -> Value {
    json!({"name": name, "image": "registry.example/agent:1", "resources": r.json()})
}

/// `r` as the API server stores it in a Pod: a missing request defaulted to the limit
/// (`SetDefaults_Pod`, for containers and init containers alike); Pod templates are not defaulted.
fn as_stored_in_a_pod(r: &Resources) -> Resources {
    Resources {
        cpu_request: r.cpu_request.or(r.cpu_limit),
        memory_request: r.memory_request.or(r.memory_limit),
        ..r.clone()
    }
}

/// The name of the `i`th DaemonSet.
pub fn daemonset_name(i: usize) -> String {
    format!("agent-{i}")
}

/// A DaemonSet's Pod spec: its template's (`in_a_pod`: as the API server stores the Pod).
fn daemonset_pod_spec(d: &DaemonSetSpec, containers: Vec<Value>, in_a_pod: bool) -> Value {
    let mut spec = placement_json(&d.placement);
    spec["containers"] = json!(containers);
    if !d.init_containers.is_empty() {
        spec["initContainers"] = json!(
            d.init_containers
                .iter()
                .enumerate()
                .map(|(j, (r, sidecar))| {
                    let r = if in_a_pod {
                        as_stored_in_a_pod(r)
                    } else {
                        r.clone()
                    };
                    let mut c = container(&format!("init-{j}"), &r);
                    if *sidecar {
                        c["restartPolicy"] = json!("Always");
                    }
                    c
                })
                .collect::<Vec<_>>()
        );
    }
    spec
}

fn daemonset_json(i: usize, d: &DaemonSetSpec) -> Value {
    let name = daemonset_name(i);
    let mut containers: Vec<Value> = d
        .containers
        .iter()
        .enumerate()
        .map(|(j, r)| container(&format!("c{j}"), r))
        .collect();
    let mut spec = daemonset_pod_spec(d, Vec::new(), false);
    if d.resource_claim == ResourceClaim::Container {
        containers[0]["resources"]["claims"] = json!([{"name": "device"}]);
    }
    if d.resource_claim != ResourceClaim::None {
        spec["resourceClaims"] =
            json!([{"name": "device", "resourceClaimTemplateName": "device-template"}]);
    }
    spec["containers"] = json!(containers);
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system", "uid": format!("ds-uid-{i}"), "generation": 1},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec}
        },
        // Pods exist only where the scenario has one running.
        "status": {"currentNumberScheduled": i32::from(d.running_pod.is_some()),
                   "desiredNumberScheduled": i32::from(d.running_pod.is_some()),
                   "numberMisscheduled": 0, "numberReady": 0}
    })
}

/// The DaemonSet's newest running Pod, when its requests differ from the template's.
fn daemonset_pod_json(i: usize, d: &DaemonSetSpec) -> Option<Value> {
    let r = d.running_pod.as_ref()?;
    let name = daemonset_name(i);
    let mut spec = daemonset_pod_spec(d, vec![container("c0", &as_stored_in_a_pod(r))], true);
    spec["nodeName"] = json!("ip-10-0-0-1.ec2.internal");
    Some(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{name}-abcde"), "namespace": "kube-system",
                     "uid": format!("ds-pod-uid-{i}"), "labels": {"app": name},
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name,
                                          "uid": format!("ds-uid-{i}"), "controller": true}]},
        "spec": spec,
        "status": {"phase": "Running"}
    }))
}

/// The namespace and name of the `i`th pending Pod.
pub fn pod_name(i: usize) -> (String, String) {
    ("apps".to_owned(), format!("web-{i}"))
}

fn pod_json(i: usize, p: &PodSpec) -> Value {
    let (namespace, name) = pod_name(i);
    let mut spec = placement_json(&p.placement);
    spec["containers"] = json!([container("app", &as_stored_in_a_pod(&p.resources))]);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("pod-uid-{i}"),
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
        "status": {"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    })
}

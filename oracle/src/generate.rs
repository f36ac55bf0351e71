//! Generated clusters (proptest strategies for [`Spec`]) across what the scheduling checks read:
//! NodePool requirements (architecture, OS, family, category, generation, size, vCPUs, zone,
//! capacity type, instance type, custom labels; `In`, `NotIn`, `Exists`, `Gt`, `Lt`, minValues),
//! template labels, taints, cpu limits and weights; DaemonSets selecting by architecture, OS,
//! custom, `node-role` and NFD labels, with tolerations, requests or limits only, init and sidecar
//! containers, and a newest Pod whose requests differ from the template's; pending Pods with node
//! selectors, required affinity and tolerations; the class's kubelet settings, AMIs of one or two
//! architectures, its zones; the region's instance types and where they are offered. Pure.
//!
//! NodePools only use keys every supported release's CRD admits (a NodePool the API server
//! refuses never reaches Karpenter); Pods use any key, as Pods may.

use crate::catalogue;
use crate::scenario::{
    Amis, DaemonSetSpec, Placement, PodSpec, PoolSpec, Req, ResourceClaim, Resources, Spec, Taint,
    Toleration, ZONES, pool_name,
};
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use proptest::sample::subsequence;
use serde_json::{Value, json};

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| (*v).to_owned()).collect()
}

fn some_of(values: &'static [&'static str]) -> impl Strategy<Value = Vec<String>> {
    subsequence(values, 1..=values.len()).prop_map(|v| strings(&v))
}

fn zone_names() -> &'static [&'static str] {
    &["test-zone-1a", "test-zone-1b", "test-zone-1c"]
}

fn families() -> &'static [&'static str] {
    &[
        "t3", "m5", "c5", "r5", "m7i", "c7i", "m6a", "c6i", "r6i", "m6g", "c6g", "c7g", "m7g",
        "r6g", "t4g",
    ]
}

fn req(key: &str, operator: &'static str, values: Vec<String>) -> Req {
    Req {
        key: key.to_owned(),
        operator,
        values,
        min_values: None,
    }
}

/// One NodePool requirement.
fn pool_requirement() -> impl Strategy<Value = Req> {
    let names: &'static [&'static str] = Box::leak(catalogue::names().into_boxed_slice());
    prop_oneof![
        3 => some_of(&["amd64", "arm64"]).prop_map(|v| req("kubernetes.io/arch", "In", v)),
        1 => Just(req("kubernetes.io/os", "In", strings(&["linux"]))),
        2 => some_of(&["on-demand", "spot"]).prop_map(|v| req("karpenter.sh/capacity-type", "In", v)),
        3 => (subsequence(families(), 1..=5), option::weighted(0.4, 1u32..=3)).prop_map(|(v, m)| Req {
            min_values: m,
            ..req("karpenter.k8s.aws/instance-family", "In", strings(&v))
        }),
        1 => subsequence(families(), 1..=2)
            .prop_map(|v| req("karpenter.k8s.aws/instance-family", "NotIn", strings(&v))),
        2 => (some_of(&["c", "m", "r", "t"]), option::weighted(0.3, 1u32..=3)).prop_map(|(v, m)| Req {
            min_values: m,
            ..req("karpenter.k8s.aws/instance-category", "In", v)
        }),
        2 => (prop_oneof![Just("Gt"), Just("Lt")], 3u32..=8)
            .prop_map(|(op, n)| req("karpenter.k8s.aws/instance-generation", op, vec![n.to_string()])),
        2 => (prop_oneof![Just("Gt"), Just("Lt")], prop_oneof![Just(1u32), Just(2), Just(4), Just(8), Just(16)])
            .prop_map(|(op, n)| req("karpenter.k8s.aws/instance-cpu", op, vec![n.to_string()])),
        1 => some_of(&["medium", "large", "xlarge", "2xlarge"])
            .prop_map(|v| req("karpenter.k8s.aws/instance-size", "In", v)),
        2 => some_of(zone_names()).prop_map(|v| req("topology.kubernetes.io/zone", "In", v)),
        1 => (subsequence(names, 1..=4), option::weighted(0.3, 1u32..=3)).prop_map(|(v, m)| Req {
            min_values: m,
            ..req("node.kubernetes.io/instance-type", "In", strings(&v))
        }),
        1 => some_of(&["a", "b"]).prop_map(|v| req("team", "In", v)),
        1 => Just(req("team", "Exists", Vec::new())),
        1 => Just(req("example.com/tier", "In", strings(&["x"]))),
    ]
}

fn pool() -> impl Strategy<Value = PoolSpec> {
    (
        option::weighted(0.3, 0u32..=100),
        btree_map(
            prop_oneof![Just("team".to_owned()), Just("example.com/tier".to_owned())],
            prop_oneof![
                Just("a".to_owned()),
                Just("b".to_owned()),
                Just("x".to_owned())
            ],
            0..=2,
        ),
        prop_oneof![2 => vec(pool_requirement(), 0..=1), 1 => vec(pool_requirement(), 2..=4)],
        option::weighted(
            0.25,
            prop_oneof![
                Just(Taint {
                    key: "dedicated".into(),
                    value: "gpu".into(),
                    effect: "NoSchedule"
                }),
                Just(Taint {
                    key: "spot".into(),
                    value: "true".into(),
                    effect: "PreferNoSchedule"
                }),
            ],
        ),
        option::weighted(0.25, 1u32..=24),
    )
        .prop_map(
            |(weight, labels, requirements, taint, cpu_limit)| PoolSpec {
                weight,
                labels,
                requirements,
                taints: taint.into_iter().collect(),
                cpu_limit,
            },
        )
}

fn toleration() -> impl Strategy<Value = Toleration> {
    prop_oneof![
        Just(Toleration {
            key: None,
            operator: "Exists",
            value: String::new(),
            effect: None
        }),
        Just(Toleration {
            key: Some("dedicated".into()),
            operator: "Equal",
            value: "gpu".into(),
            effect: Some("NoSchedule"),
        }),
        Just(Toleration {
            key: Some("dedicated".into()),
            operator: "Exists",
            value: String::new(),
            effect: None
        }),
    ]
}

/// Node selector entries a DaemonSet or Pod may carry: well-known keys, custom ones, keys
/// Karpenter does not know (`node-role`, NFD, `node.kubernetes.io/lifecycle`).
fn selector_entry(pools: bool) -> impl Strategy<Value = (String, String)> {
    let pool_names = if pools { 3 } else { 0 };
    prop_oneof![
        3 => some_of(&["amd64", "arm64"]).prop_map(|v| ("kubernetes.io/arch".to_owned(), v[0].clone())),
        2 => prop_oneof![Just("linux"), Just("windows")].prop_map(|v| ("kubernetes.io/os".to_owned(), v.to_owned())),
        2 => prop_oneof![Just("a"), Just("b")].prop_map(|v| ("team".to_owned(), v.to_owned())),
        1 => Just(("node-role.kubernetes.io/edge".to_owned(), "true".to_owned())),
        1 => Just(("feature.node.kubernetes.io/cpu-cpuid.AVX512F".to_owned(), "true".to_owned())),
        1 => Just(("node.kubernetes.io/lifecycle".to_owned(), "normal".to_owned())),
        1 => some_of(zone_names()).prop_map(|v| ("topology.kubernetes.io/zone".to_owned(), v[0].clone())),
        1 => prop_oneof![Just("spot"), Just("on-demand")].prop_map(|v| ("karpenter.sh/capacity-type".to_owned(), v.to_owned())),
        pool_names => (0..3usize).prop_map(|i| ("karpenter.sh/nodepool".to_owned(), pool_name(i))),
        1 => Just(("eks.amazonaws.com/nodegroup".to_owned(), "ng-1".to_owned())),
    ]
}

/// One required-affinity expression of a DaemonSet or Pod.
fn affinity_requirement() -> impl Strategy<Value = Req> {
    prop_oneof![
        some_of(&["amd64", "arm64"]).prop_map(|v| req("kubernetes.io/arch", "In", v)),
        some_of(&["amd64", "arm64"]).prop_map(|v| req("kubernetes.io/arch", "NotIn", v)),
        Just(req("kubernetes.io/os", "In", strings(&["linux"]))),
        some_of(&["a", "b"]).prop_map(|v| req("team", "In", v)),
        Just(req("team", "DoesNotExist", Vec::new())),
        Just(req("node-role.kubernetes.io/edge", "Exists", Vec::new())),
        Just(req(
            "node-role.kubernetes.io/edge",
            "DoesNotExist",
            Vec::new()
        )),
        some_of(zone_names()).prop_map(|v| req("topology.kubernetes.io/zone", "In", v)),
        (prop_oneof![Just("Gt"), Just("Lt")], 2u32..=8).prop_map(|(op, n)| req(
            "karpenter.k8s.aws/instance-cpu",
            op,
            vec![n.to_string()]
        )),
    ]
}

fn placement(pools: bool) -> impl Strategy<Value = Placement> {
    (
        prop_oneof![3 => Just(Vec::new()), 2 => vec(selector_entry(pools), 1..=2)],
        prop_oneof![4 => Just(Vec::new()), 1 => vec(vec(affinity_requirement(), 1..=2), 1..=2)],
        prop_oneof![3 => Just(Vec::new()), 1 => vec(toleration(), 1..=1)],
    )
        .prop_map(|(selector, required, tolerations)| Placement {
            node_selector: selector.into_iter().collect(),
            required,
            tolerations,
        })
}

/// Requests and limits as the API server admits them: a limit is never below its request.
fn resources(max_cpu: u32, max_memory: u32) -> impl Strategy<Value = Resources> {
    (
        option::weighted(0.8, 0..=max_cpu),
        option::weighted(0.7, 0..=max_memory),
        option::weighted(0.2, 0..=max_cpu),
        option::weighted(0.2, 0..=max_memory),
    )
        .prop_map(
            |(cpu_request, memory_request, cpu_extra, memory_extra)| Resources {
                cpu_request,
                memory_request,
                cpu_limit: cpu_extra.map(|e| cpu_request.unwrap_or(0) + e),
                memory_limit: memory_extra.map(|e| memory_request.unwrap_or(0) + e),
            },
        )
}

fn daemonset() -> impl Strategy<Value = DaemonSetSpec> {
    (
        placement(false),
        vec(resources(1500, 3000), 1..=2),
        vec((resources(1500, 2000), any::<bool>()), 0..=1),
        option::weighted(0.2, resources(1500, 3000)),
        prop_oneof![
            18 => Just(ResourceClaim::None),
            1 => Just(ResourceClaim::Container),
            1 => Just(ResourceClaim::PodOnly),
        ],
    )
        .prop_map(
            |(placement, containers, init_containers, running_pod, resource_claim)| DaemonSetSpec {
                placement,
                containers,
                init_containers,
                running_pod,
                resource_claim,
            },
        )
}

fn pod() -> impl Strategy<Value = PodSpec> {
    (placement(true), resources(3000, 8000)).prop_map(|(placement, resources)| PodSpec {
        placement,
        resources,
    })
}

fn kubelet() -> impl Strategy<Value = Option<Value>> {
    option::weighted(
        0.3,
        prop_oneof![
            (4u32..=110).prop_map(|n| json!({"maxPods": n})),
            (1u32..=10).prop_map(|n| json!({"podsPerCore": n})),
            (50u32..=1000).prop_map(|m| json!({"kubeReserved": {"cpu": format!("{m}m")}})),
            (100u32..=2000).prop_map(|m| json!({"systemReserved": {"memory": format!("{m}Mi")}})),
            (100u32..=1000)
                .prop_map(|m| json!({"evictionHard": {"memory.available": format!("{m}Mi")}})),
        ],
    )
}

/// One generated cluster.
pub fn spec() -> impl Strategy<Value = Spec> {
    let zones = subsequence((0..ZONES.len()).collect::<Vec<_>>(), 1..=ZONES.len());
    let offered = (
        0..catalogue::len(),
        subsequence((0..ZONES.len()).collect::<Vec<_>>(), 1..=ZONES.len()),
        proptest::bool::weighted(0.1),
    );
    (
        zones,
        vec(offered, 1..=14),
        prop_oneof![3 => Just(Amis::Amd64), 1 => Just(Amis::Arm64), 3 => Just(Amis::Both)],
        kubelet(),
        vec(pool(), 1..=3),
        vec(daemonset(), 0..=4),
        vec(pod(), 0..=4),
        option::weighted(0.3, prop_oneof![Just("Strict"), Just("BestEffort")]),
    )
        .prop_map(
            |(
                subnet_zones,
                mut types,
                amis,
                kubelet,
                pools,
                daemonsets,
                pods,
                min_values_policy,
            )| {
                types.sort_by_key(|t| t.0);
                types.dedup_by_key(|t| t.0);
                Spec {
                    subnet_zones,
                    types,
                    amis,
                    kubelet,
                    pools,
                    daemonsets,
                    pods,
                    min_values_policy,
                }
            },
        )
}

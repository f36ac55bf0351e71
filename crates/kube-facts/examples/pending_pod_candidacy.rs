//! Measures what deciding which EC2NodeClasses may take each pending Pod costs per class
//! snapshot (`PendingPodIndex::of_class`), at the benchmark's scale: 50 NodePools over 20
//! classes, 5,000 pending Pods, either of one workload (a Deployment's storm) or of 500
//! workloads with constraints of their own. Pure CPU, no IO.
//!
//! `cargo run --release --locked -p karpenter-health-kube-facts --example pending_pod_candidacy`

use k8s_openapi::api::core::v1::Pod;
use karpenter_health_api::karpenter::NodePool;
use karpenter_health_kube_facts::pending_pods::PendingPodIndex;
use std::time::{Duration, Instant};

const CLASSES: usize = 20;
const NODE_POOLS: usize = 50;
const PODS: usize = 5_000;
const ROUNDS: usize = 15;

fn node_pool(i: usize) -> NodePool {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("pool-{i}")},
        "spec": {"template": {
            "metadata": {"labels": {"team": format!("team-{}", i % 10)}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                 "name": format!("class-{}", i % CLASSES)},
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]}
                ],
                "taints": if i.is_multiple_of(5) {
                    serde_json::json!([{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}])
                } else {
                    serde_json::json!([])
                }
            }
        }}
    }))
    .expect("a NodePool")
}

fn pod(i: usize, workloads: usize) -> Pod {
    let w = i % workloads;
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("web-{i}"), "namespace": "shop"},
        "spec": {
            "containers": [],
            "nodeSelector": {"team": format!("team-{}", w % 10)},
            // Of its own workload, and no NodePool defines the key: NotIn admits them all.
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "example.com/rack", "operator": "NotIn", "values": [format!("r-{w}")]}]}]}}},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "batch"}]
        },
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    }))
    .expect("a Pod")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let pools: Vec<NodePool> = (0..NODE_POOLS).map(node_pool).collect();
    let pools: Vec<&NodePool> = pools.iter().collect();
    for workloads in [1, 500] {
        let pods: Vec<Pod> = (0..PODS).map(|i| pod(i, workloads)).collect();
        let index = PendingPodIndex::of(&pods);
        let mut calls = Vec::new();
        let mut held = 0;
        for _ in 0..ROUNDS {
            for class in 0..CLASSES {
                let started = Instant::now();
                let of_class = index.of_class(&format!("class-{class}"), &pools);
                calls.push(started.elapsed());
                held += of_class.len();
            }
        }
        calls.sort();
        println!(
            "{PODS} pods of {workloads} workload(s), {NODE_POOLS} NodePools, {CLASSES} classes: \
             of_class median {:?}, p95 {:?}, max {:?} ({} calls, {} Pods handed out)",
            percentile(&calls, 0.5),
            percentile(&calls, 0.95),
            calls[calls.len() - 1],
            calls.len(),
            held
        );
    }
}

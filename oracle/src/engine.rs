//! karpenter-health's side of a comparison: the scenario's objects made into facts the way the
//! operator makes them (each object trimmed as its watch trims it, then the same snapshot code,
//! `karpenter_health_kube_facts::snapshot::cluster_facts`), EC2's answers as the AWS adapter
//! reports them, and the engine's verdict. Pure: no IO.

use crate::scenario::{CLASS, CLUSTER, Scenario, ZONES};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_health_api::KarpenterHealthStatus;
use karpenter_health_api::karpenter::{EC2NodeClass, NodeClaim, NodePool};
use karpenter_health_checks::facts::{
    AwsFacts, Facts, InstanceTypeCatalog, InstanceTypeFacts, Observed, Settings, SubnetFacts,
};
use karpenter_health_kube_facts::inputs::{Inputs, WatchTargets};
use karpenter_health_kube_facts::node_claims::{NodeClaimIndex, SharedClaims};
use karpenter_health_kube_facts::pending_pods::{PendingPodIndex, SharedPendingPods};
use karpenter_health_kube_facts::snapshot::{Overrides, Sources, cluster_facts};
use kube::core::DeserializeGuard;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// When the engine judges: an hour after every generated Pod became unschedulable, so each has
/// waited longer than any threshold of the checks.
pub const NOW: &str = "2026-01-01T01:00:00Z";

/// One release's CRDs, as the oracle answers them (the AWS provider's `pkg/apis/crds`).
#[derive(Clone, Debug)]
pub struct ReleaseCrds(pub Vec<CustomResourceDefinition>);

/// The Karpenter Deployment of `release` as its Helm chart renders it, with the scenario's
/// settings in its env.
fn karpenter_deployment(release: &str, env: &BTreeMap<String, String>) -> Deployment {
    let env: Vec<serde_json::Value> = env
        .iter()
        .map(|(k, v)| json!({"name": k, "value": v}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "karpenter", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": "karpenter"}},
            "template": {"spec": {
                "serviceAccountName": "karpenter",
                "containers": [{
                    "name": "controller",
                    "image": format!("public.ecr.aws/karpenter/controller:{}", release.trim_start_matches('v')),
                    "env": env
                }]
            }}
        }
    }))
    .expect("a Deployment the chart renders")
}

fn decode<T: serde::de::DeserializeOwned>(
    value: &serde_json::Value,
    what: &str,
) -> anyhow::Result<T> {
    serde_json::from_value(value.clone()).map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

/// The facts the operator would gather for the class of `scenario`, under Karpenter `release`,
/// with the newest Pods of the DaemonSets `read` names read (as the operator reads those its
/// findings name).
pub fn facts_reading(
    scenario: &Scenario,
    release: &str,
    crds: &ReleaseCrds,
    read: &[String],
) -> anyhow::Result<Facts> {
    let inputs = Inputs::of(&WatchTargets::default());
    let node_class: EC2NodeClass = decode(&scenario.node_class, "the EC2NodeClass")?;
    let node_pools = scenario
        .node_pools
        .iter()
        .map(|p| {
            let mut guarded: DeserializeGuard<NodePool> = decode(p, "a NodePool")?;
            (inputs.node_pools.trim)(&mut guarded);
            Ok(Arc::new(guarded))
        })
        .collect::<anyhow::Result<_>>()?;
    let pods: Vec<Pod> = scenario
        .pending_pods
        .iter()
        .map(|p| decode(p, "a pending Pod"))
        .collect::<anyhow::Result<_>>()?;
    let daemonsets = scenario
        .daemon_sets
        .iter()
        .map(|d| {
            let mut ds: DaemonSet = decode(d, "a DaemonSet")?;
            (inputs.daemonsets.trim)(&mut ds);
            Ok(Arc::new(ds))
        })
        .collect::<anyhow::Result<_>>()?;
    let mut deployment = karpenter_deployment(release, &scenario.env);
    (inputs.karpenter_deployment.trim)(&mut deployment);
    let crd = |name: &str, trim: fn(&mut CustomResourceDefinition)| {
        crds.0
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .map(|c| {
                let mut c = c.clone();
                trim(&mut c);
                Arc::new(c)
            })
    };
    let node_pool_crd = crd("nodepools.karpenter.sh", inputs.node_pool_crd.trim);
    let karpenter_crds = [
        crd("nodepools.karpenter.sh", inputs.node_pool_crd.trim),
        crd("nodeclaims.karpenter.sh", inputs.node_claim_crd.trim),
        crd(
            "ec2nodeclasses.karpenter.k8s.aws",
            inputs.node_class_crd.trim,
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    let sources = Sources {
        node_pools: Observed::Found(node_pools),
        node_claims: Observed::Found(SharedClaims::listed(NodeClaimIndex::of(
            &Vec::<NodeClaim>::new(),
        ))),
        pending_pods: Observed::Found(SharedPendingPods::listed(PendingPodIndex::of(&pods))),
        daemonsets: Observed::Found(daemonsets),
        karpenter_deployment: Observed::Found(Some(Arc::new(deployment))),
        karpenter_service_account: Observed::Found(None),
        aws_node_service_account: Observed::Found(None),
        load_balancer_controller: Observed::Found(None),
        cilium_config: Observed::Found(None),
        aws_auth: Observed::Found(None),
        node_pool_crd: Observed::Found(node_pool_crd),
        karpenter_crds: Observed::Found(karpenter_crds),
        webhooks: Observed::Found(Vec::new()),
        endpoints: Observed::Found(Vec::new()),
        karpenter_namespace: "kube-system".into(),
        apiserver_version: Observed::Found(format!("v{}.0-eks-1", scenario.kubernetes_version)),
        daemonset_pods: daemonset_pods(scenario, read)?,
        ..Sources::default()
    };
    let overrides = Overrides {
        karpenter_version: None,
        cluster_name: Some(CLUSTER.into()),
    };
    let cluster = cluster_facts(&node_class, &sources, &overrides);
    Ok(Facts {
        cluster,
        aws: aws_facts(scenario),
    })
}

/// The facts the operator gathers for `scenario`'s class and the engine's verdict on them, as the
/// operator comes to them: evaluated once, then again with the newest Pods of the DaemonSets the
/// first verdict's findings name read.
pub fn judge(
    scenario: &Scenario,
    release: &str,
    crds: &ReleaseCrds,
) -> anyhow::Result<(Facts, KarpenterHealthStatus)> {
    let facts = facts_reading(scenario, release, crds, &[])?;
    let status = evaluate(&facts);
    let named: Vec<String> = status
        .findings
        .iter()
        .filter(|f| f.reason == "DaemonSetsFillNodes" || f.reason == "DaemonSetsMayFillNodes")
        .flat_map(|f| f.subjects.iter())
        .filter(|s| s.kind == "DaemonSet")
        .map(|s| format!("{}/{}", s.namespace.as_deref().unwrap_or_default(), s.name))
        .collect();
    if named.is_empty() {
        return Ok((facts, status));
    }
    let facts = facts_reading(scenario, release, crds, &named)?;
    let status = evaluate(&facts);
    Ok((facts, status))
}

/// The newest Pods of the DaemonSets of `read`, from the scenario's DaemonSet Pods, as the
/// operator's list of each DaemonSet's Pods finds them.
fn daemonset_pods(
    scenario: &Scenario,
    read: &[String],
) -> anyhow::Result<karpenter_health_kube_facts::daemonset_pods::DaemonSetPodReads> {
    use karpenter_health_kube_facts::daemonset_pods::{DaemonSetPodReads, newest_of};
    let pods: Vec<Pod> = scenario
        .daemon_set_pods
        .iter()
        .map(|p| decode(p, "a DaemonSet Pod"))
        .collect::<anyhow::Result<_>>()?;
    let mut reads = BTreeMap::new();
    for raw in &scenario.daemon_sets {
        let ds: DaemonSet = decode(raw, "a DaemonSet")?;
        let key = format!(
            "{}/{}",
            ds.metadata.namespace.as_deref().unwrap_or_default(),
            ds.metadata.name.as_deref().unwrap_or_default()
        );
        if read.contains(&key) {
            reads.insert(key, newest_of(&ds, &pods));
        }
    }
    Ok(DaemonSetPodReads::listed(reads))
}

/// EC2's answers as the AWS adapter reports them: the class's subnets (Karpenter's
/// `status.subnets`, whose zones the scenario offers types in) and the region's catalogue.
fn aws_facts(scenario: &Scenario) -> AwsFacts {
    let subnets: Vec<SubnetFacts> = scenario.node_class["status"]["subnets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| SubnetFacts {
            id: s["id"].as_str().unwrap_or_default().to_owned(),
            vpc_id: "vpc-test1".into(),
            zone: s["zone"].as_str().unwrap_or_default().to_owned(),
            available_ips: Some(4000),
            ..SubnetFacts::default()
        })
        .collect();
    let mut types: Vec<InstanceTypeFacts> = scenario
        .instance_types
        .iter()
        .map(|t| InstanceTypeFacts {
            name: t.name.clone(),
            vcpus: Some(t.vcpus),
            memory_mib: Some(t.memory_mib),
            architectures: t.architectures.clone(),
            usage_classes: t.usage_classes.clone(),
            network_interfaces: Some(t.maximum_network_interfaces),
            ipv4_per_interface: Some(t.ipv4_addresses_per_interface),
        })
        .collect();
    types.sort_by(|a, b| a.name.cmp(&b.name));
    let zones: BTreeMap<String, BTreeSet<String>> = scenario
        .instance_types
        .iter()
        .map(|t| (t.name.clone(), t.zones.iter().cloned().collect()))
        .collect();
    AwsFacts {
        region: Some("us-west-2".into()),
        subnets: Observed::Found(subnets),
        cluster_vpc: Observed::Found("vpc-test1".into()),
        instance_types: Some(Observed::Found(InstanceTypeCatalog {
            types: Arc::new(types),
            zones: Arc::new(zones),
            judged: Default::default(),
        })),
        ..AwsFacts::default()
    }
}

/// The engine's status for the class, judged at [`NOW`].
pub fn evaluate(facts: &Facts) -> KarpenterHealthStatus {
    let now: jiff::Timestamp = NOW.parse().expect("a timestamp");
    karpenter_health_checks::evaluate(facts, &Settings::default(), None, now)
}

/// The zone names, for messages.
pub fn zone_names() -> Vec<&'static str> {
    ZONES.iter().map(|z| z.0).collect()
}

/// The class's name.
pub fn class_name() -> &'static str {
    CLASS
}

//! The bed's stand-in for the kubelet and the node agents, so the real Karpenter's NodeClaims
//! register and initialize: for each NodeClaim Karpenter launched (its `status.providerID` set) it
//! creates the Node that instance's kubelet would (the providerID, the NodeClaim's labels, the
//! `karpenter.sh/unregistered` taint, its capacity, Ready), removes the NodeClaim's
//! `startupTaints` once Karpenter registered the Node (as a CNI or device agent would) and its
//! `not-ready` taint once the Node's network is ready (the VPC CNI's Pod runs there, where the
//! cluster has `aws-node`: [`PodNetwork`]), runs the
//! Pods bound to its Nodes and completes their deletion. Does IO (watches and writes the bed).
//!
//! What Karpenter needs of a Node is kubernetes-sigs/karpenter's
//! `pkg/controllers/nodeclaim/lifecycle/registration.go` (one Node with the NodeClaim's
//! providerID, the unregistered taint) and `initialization.go` (Ready, no startup or ephemeral
//! taint left, every requested resource allocatable).
//!
//! A test steers it per NodePool with the annotation [`NODES_ANNOTATION`]:
//! - `never-register`: no Node is made (an instance that never joins, as with a node role
//!   aws-auth does not map);
//! - `authenticate`: the Node is made only when the instance's kubelet would be let in: its
//!   instance profile's role mapped through aws-auth by the AWS IAM Authenticator's own code and
//!   admitted by the API server's Node authorizer ([`crate::node_authentication`]); it is then
//!   named after the instance's private DNS name, as the kubelet names it. What kept an instance
//!   out is kept in [`Refusals`];
//! - `never-initialize`: the Node is made and registers but stays NotReady with its startup
//!   taints (an agent that never starts);
//! - `keep-startup-taints`: the Node is made, registers and is Ready, but its startup taints stay
//!   (a startup taint no agent on the node removes);
//! - `agent-not-running`: the Node is made, registers and is Ready, and Cilium's operator puts its
//!   [`AGENT_TAINT`] on it unless a taint of that key is there already, as it does where the agent
//!   Pod is scheduled but not running (cilium/cilium `operator/watchers/node_taint.go`
//!   `checkAndMarkNode`); neither that taint nor the startup taints are lifted while the agent
//!   does not run. In the default mode the agent runs, so its operator lifts that taint;
//! - `agent-starts-after-<N>s`: as `agent-not-running` until the Node is N seconds old, then as
//!   the default: an agent whose Pod takes that long to run (its image pulled, its start).
//!
//! It also stands in for the VPC CNI in its default mode: a node of a type it knows gets that
//! type's Pod addresses and no more, so a Pod beyond them stays `ContainerCreating` with the
//! CNI's error, as on EC2.

use anyhow::{Context as _, Result};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::runtime::watcher;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

mod pod_network;
use pod_network::{PodNetwork, pod_addresses};

/// The NodePool annotation that steers the stand-in (see the module's documentation).
pub const NODES_ANNOTATION: &str = "bed.karpenter-health.io/nodes";
/// The label on every Node the stand-in made.
pub const STAND_IN_LABEL: &str = "bed.karpenter-health.io/stand-in";
const UNREGISTERED_TAINT: &str = "karpenter.sh/unregistered";
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
const REGISTERED_LABEL: &str = "karpenter.sh/registered";
const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";
const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";
/// The taint Cilium's operator puts on a node whose agent is not running (its default key and
/// effect).
pub const AGENT_TAINT: (&str, &str) = ("node.cilium.io/agent-not-ready", "NoSchedule");

fn resource(group: &str, version: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind))
}

/// Why the stand-in made no Node for an instance in the `authenticate` mode, by instance id (the
/// latest answer; an instance let in later is removed).
#[derive(Clone, Debug, Default)]
pub struct Refusals(Arc<std::sync::Mutex<BTreeMap<String, String>>>);

impl Refusals {
    /// Every instance kept out so far, and why.
    pub fn get(&self) -> BTreeMap<String, String> {
        self.0.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// Records `why` for `instance`; true when it differs from what was recorded.
    fn record(&self, instance: &str, why: String) -> bool {
        let Ok(mut map) = self.0.lock() else {
            return false;
        };
        map.insert(instance.to_owned(), why.clone()).as_ref() != Some(&why)
    }

    fn clear(&self, instance: &str) {
        if let Ok(mut map) = self.0.lock() {
            map.remove(instance);
        }
    }
}

/// Runs until the client's API server goes away for good: reacts to every change of NodeClaims,
/// NodePools, Nodes and Pods, and looks again every few seconds. `authentication` judges the
/// instances of NodePools in the `authenticate` mode (without it, they get no Node).
pub async fn run(
    client: kube::Client,
    authentication: Option<crate::node_authentication::NodeAuthentication>,
    refusals: Refusals,
) -> Result<()> {
    let changed = Arc::new(Notify::new());
    let node_claims = resource("karpenter.sh", "v1", "NodeClaim");
    let node_pools = resource("karpenter.sh", "v1", "NodePool");
    let watches = [
        tokio::spawn(watch(
            Api::<DynamicObject>::all_with(client.clone(), &node_claims),
            changed.clone(),
        )),
        tokio::spawn(watch(
            Api::<DynamicObject>::all_with(client.clone(), &node_pools),
            changed.clone(),
        )),
        tokio::spawn(watch(Api::<Node>::all(client.clone()), changed.clone())),
        tokio::spawn(watch(Api::<Pod>::all(client.clone()), changed.clone())),
    ];
    // The watches end with this task (dropping a JoinHandle would detach them instead).
    let _watches = AbortOnDrop(watches.into());
    loop {
        let kubelets = Kubelets {
            authentication: authentication.as_ref(),
            refusals: &refusals,
        };
        if let Err(e) = sweep(&client, &node_claims, &node_pools, &kubelets).await {
            eprintln!("node-stand-in: {e:#}");
        }
        let _ = tokio::time::timeout(Duration::from_secs(3), changed.notified()).await;
        // Let a burst of events settle into one sweep.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn watch<K>(api: Api<K>, changed: Arc<Notify>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut stream = watcher(api, watcher::Config::default()).boxed();
    loop {
        match stream.try_next().await {
            Ok(Some(_)) => changed.notify_one(),
            Ok(None) => return,
            Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

/// Aborts the watch tasks when dropped.
struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// What the stand-in does for one NodeClaim's NodePool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Join,
    Authenticate,
    NeverRegister,
    NeverInitialize,
    KeepStartupTaints,
    AgentNotRunning,
    /// The agent runs once the Node is this many seconds old.
    AgentStartsAfter(i64),
}

/// How the `authenticate` mode decides, and what it found.
struct Kubelets<'a> {
    authentication: Option<&'a crate::node_authentication::NodeAuthentication>,
    refusals: &'a Refusals,
}

impl Kubelets<'_> {
    /// The name the kubelet of `provider_id`'s instance registers under, if it is let in.
    async fn admitted(&self, client: &kube::Client, provider_id: &str) -> Option<String> {
        use crate::node_authentication::Admission;
        let instance = provider_id.rsplit('/').next().unwrap_or(provider_id);
        let why = match self.authentication {
            None => "the stand-in was given no authenticator".to_owned(),
            Some(authentication) => match authentication.admission(client, instance).await {
                Ok(Admission::Admitted { node_name }) => {
                    self.refusals.clear(instance);
                    return Some(node_name);
                }
                Ok(Admission::Refused(why)) => why,
                Err(e) => format!("could not judge: {e:#}"),
            },
        };
        if self.refusals.record(instance, why.clone()) {
            eprintln!("node-stand-in: no Node for {instance}: {why}");
        }
        None
    }
}

async fn sweep(
    client: &kube::Client,
    node_claims: &ApiResource,
    node_pools: &ApiResource,
    kubelets: &Kubelets<'_>,
) -> Result<()> {
    let claims = Api::<DynamicObject>::all_with(client.clone(), node_claims)
        .list(&ListParams::default())
        .await
        .context("listing NodeClaims")?;
    let modes: BTreeMap<String, Mode> = Api::<DynamicObject>::all_with(client.clone(), node_pools)
        .list(&ListParams::default())
        .await
        .context("listing NodePools")?
        .into_iter()
        .filter_map(|pool| {
            let mode = match pool
                .metadata
                .annotations
                .as_ref()?
                .get(NODES_ANNOTATION)?
                .as_str()
            {
                "never-register" => Mode::NeverRegister,
                "authenticate" => Mode::Authenticate,
                "never-initialize" => Mode::NeverInitialize,
                "keep-startup-taints" => Mode::KeepStartupTaints,
                "agent-not-running" => Mode::AgentNotRunning,
                other => other
                    .strip_prefix("agent-starts-after-")
                    .and_then(|s| s.strip_suffix('s')?.parse().ok())
                    .map_or(Mode::Join, Mode::AgentStartsAfter),
            };
            Some((pool.metadata.name?, mode))
        })
        .collect();
    let network = PodNetwork::read(client).await?;
    let nodes_api = Api::<Node>::all(client.clone());
    let nodes = nodes_api
        .list(&ListParams::default())
        .await
        .context("listing Nodes")?;
    let by_provider: BTreeMap<String, &Node> = nodes
        .iter()
        .filter_map(|n| Some((n.spec.as_ref()?.provider_id.clone()?, n)))
        .collect();

    for claim in &claims {
        if claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(provider_id) = claim.data["status"]["providerID"].as_str() else {
            continue;
        };
        let pool = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(NODEPOOL_LABEL));
        let mode = pool
            .and_then(|p| modes.get(p))
            .copied()
            .unwrap_or(Mode::Join);
        match (by_provider.get(provider_id), mode) {
            (_, Mode::NeverRegister) => {}
            (None, Mode::Authenticate) => {
                if let Some(name) = kubelets.admitted(client, provider_id).await {
                    create_node(&nodes_api, claim, provider_id, Some(name), Mode::Join).await?;
                }
            }
            (None, Mode::AgentStartsAfter(_)) => {
                create_node(&nodes_api, claim, provider_id, None, Mode::AgentNotRunning).await?;
            }
            (None, mode) => create_node(&nodes_api, claim, provider_id, None, mode).await?,
            (Some(_), Mode::NeverInitialize) => {}
            (Some(node), mode) => {
                let mode = agent_now(mode, node);
                let network_ready = network.ready_on(node.metadata.name.as_deref());
                lift_taints(&nodes_api, claim, node, mode, network_ready).await?;
            }
        }
    }

    // Each of our Nodes, with the Pod addresses the CNI can give it (`None`: no limit).
    let ours: BTreeMap<String, Option<usize>> = nodes
        .iter()
        .filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(STAND_IN_LABEL))
        })
        .filter_map(|n| {
            let instance_type = n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(INSTANCE_TYPE_LABEL))
                .map(String::as_str)
                .unwrap_or_default();
            Some((n.metadata.name.clone()?, pod_addresses(instance_type)))
        })
        .collect();
    run_pods(client, &ours).await
}

/// The Node an instance's kubelet registers: named `name`, else after the instance (EKS's
/// resource-name hostnames), with the NodeClaim's labels, the unregistered taint Karpenter
/// expects of a new Node, and the NodeClaim's capacity.
async fn create_node(
    nodes: &Api<Node>,
    claim: &DynamicObject,
    provider_id: &str,
    name: Option<String>,
    mode: Mode,
) -> Result<()> {
    let name = name.unwrap_or_else(|| {
        provider_id
            .rsplit('/')
            .next()
            .unwrap_or(provider_id)
            .to_owned()
    });
    let mut labels = claim.metadata.labels.clone().unwrap_or_default();
    labels.remove(REGISTERED_LABEL);
    labels.insert("kubernetes.io/hostname".into(), name.clone());
    labels.insert(STAND_IN_LABEL.into(), "true".into());
    let status = &claim.data["status"];
    let ready = mode != Mode::NeverInitialize;
    let now = jiff::Timestamp::now().to_string();
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "providerID": provider_id,
            "taints": [{"key": UNREGISTERED_TAINT, "effect": "NoExecute"}],
        },
        "status": {
            "capacity": status["capacity"],
            "allocatable": status["allocatable"],
            "conditions": [{
                "type": "Ready",
                "status": if ready { "True" } else { "False" },
                "reason": if ready { "KubeletReady" } else { "KubeletNotReady" },
                "message": if ready { "kubelet is posting ready status" } else { "container runtime network not ready (bed: never-initialize)" },
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }],
            "nodeInfo": {
                "architecture": labels.get("kubernetes.io/arch").cloned().unwrap_or_else(|| "amd64".into()),
                "operatingSystem": "linux",
                "kubeletVersion": "v1.34.4", "kubeProxyVersion": "",
                "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "",
                "machineID": "", "osImage": "", "systemUUID": "",
            },
        },
    }))?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating Node {name}")),
    }
}

/// What an `agent-starts-after-<N>s` agent is doing on `node` now: not running until the Node is
/// N seconds old, then running.
fn agent_now(mode: Mode, node: &Node) -> Mode {
    let Mode::AgentStartsAfter(after) = mode else {
        return mode;
    };
    let age = node
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| jiff::Timestamp::now().duration_since(t.0).as_secs());
    if age.is_some_and(|age| age >= after) {
        Mode::Join
    } else {
        Mode::AgentNotRunning
    }
}

/// Once Karpenter registered the Node (its `karpenter.sh/registered` label), the Node, Ready,
/// loses its `not-ready` taint when its network is ready ([`PodNetwork`]); in `Join` mode the agents that own the NodeClaim's startup taints
/// remove them and a running agent's operator lifts [`AGENT_TAINT`]; in `AgentNotRunning` mode
/// the operator puts it on instead, unless a taint of its key is there.
async fn lift_taints(
    nodes: &Api<Node>,
    claim: &DynamicObject,
    node: &Node,
    mode: Mode,
    network_ready: bool,
) -> Result<()> {
    let registered = node
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.get(REGISTERED_LABEL).is_some_and(|v| v == "true"));
    let lifted = matches!(mode, Mode::Join | Mode::Authenticate);
    let startup: Vec<(String, String)> = claim.data["spec"]["startupTaints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            Some((
                t["key"].as_str()?.to_owned(),
                t["effect"].as_str()?.to_owned(),
            ))
        })
        .collect();
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    // The API server's TaintNodesByCondition admission puts `not-ready` on every new Node; the
    // node lifecycle controller, which the bed does not run, lifts it from a Ready one.
    let mut kept: Vec<_> = taints
        .iter()
        .filter(|t| !lifted || !startup.iter().any(|(k, e)| *k == t.key && *e == t.effect))
        .filter(|t| !lifted || t.key != AGENT_TAINT.0)
        .filter(|t| !network_ready || t.key != NOT_READY_TAINT)
        .cloned()
        .collect();
    let (agent_key, agent_effect) = AGENT_TAINT;
    let tainted_by_operator =
        mode == Mode::AgentNotRunning && !taints.iter().any(|t| t.key == agent_key);
    if tainted_by_operator {
        kept.push(serde_json::from_value(
            json!({"key": agent_key, "effect": agent_effect}),
        )?);
    }
    if !registered || kept == taints {
        return Ok(());
    }
    let name = node.metadata.name.clone().unwrap_or_default();
    nodes
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": kept}})),
        )
        .await
        .with_context(|| format!("lifting the taints of Node {name}"))?;
    Ok(())
}

/// What the kubelet and the CNI do with the Pods bound to their Node: start them (Running,
/// Ready, an address each) while the Node has Pod addresses left, oldest first; leave the rest
/// `ContainerCreating` with the CNI's error as an Event; and, once Pods are deleted, confirm the
/// deletion. Host-network Pods take no address.
async fn run_pods(client: &kube::Client, nodes: &BTreeMap<String, Option<usize>>) -> Result<()> {
    if nodes.is_empty() {
        return Ok(());
    }
    let mut pods: Vec<Pod> = Api::<Pod>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing Pods")?
        .items;
    pods.sort_by(|a, b| {
        (&a.metadata.creation_timestamp, &a.metadata.name)
            .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
    });
    // Addresses taken on each Node by the Pods already running there.
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    for pod in &pods {
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone())
            && takes_address(pod)
            && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        {
            *taken.entry(node).or_default() += 1;
        }
    }
    for pod in pods {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            continue;
        };
        let Some(addresses) = nodes.get(&node) else {
            continue;
        };
        let (Some(namespace), Some(name)) =
            (pod.metadata.namespace.clone(), pod.metadata.name.clone())
        else {
            continue;
        };
        let api = Api::<Pod>::namespaced(client.clone(), &namespace);
        if pod.metadata.deletion_timestamp.is_some() {
            let _ = api
                .delete(&name, &DeleteParams::default().grace_period(0))
                .await;
            continue;
        }
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        if phase == "Pending" && takes_address(&pod) {
            let used = taken.entry(node.clone()).or_default();
            if addresses.is_some_and(|limit| *used >= limit) {
                no_address_left(client, &api, &pod, &node).await?;
                continue;
            }
            *used += 1;
        }
        if phase == "Pending" {
            let now = jiff::Timestamp::now().to_string();
            let status = json!({"status": {
                "phase": "Running", "startTime": now, "podIP": "10.0.0.2",
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                    {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                    {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                    {"type": "Ready", "status": "True", "lastTransitionTime": now},
                ],
            }});
            let _ = api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
                .await;
        }
    }
    Ok(())
}

/// Whether the CNI gives the Pod an address of the node's (host-network Pods use the node's).
fn takes_address(pod: &Pod) -> bool {
    !pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

/// The message the VPC CNI's plugin returns when ipamd has no address for a Pod
/// (aws/amazon-vpc-cni-k8s `cmd/routed-eni-cni-plugin/cni.go`), which the kubelet reports as
/// `FailedCreatePodSandBox`.
pub const NO_ADDRESS_MESSAGE: &str = "failed to assign an IP address to container";

/// A Pod the CNI found no address for: it stays `ContainerCreating`, and an Event says why (once).
async fn no_address_left(
    client: &kube::Client,
    pods: &Api<Pod>,
    pod: &Pod,
    node: &str,
) -> Result<()> {
    let waiting = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|c| !c.is_empty());
    if waiting {
        return Ok(());
    }
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let containers: Vec<Value> = pod
        .spec
        .iter()
        .flat_map(|s| &s.containers)
        .map(|c| {
            json!({"name": c.name, "image": c.image, "imageID": "", "ready": false,
            "restartCount": 0, "started": false,
            "state": {"waiting": {"reason": "ContainerCreating"}}})
        })
        .collect();
    let now = jiff::Timestamp::now().to_string();
    let status = json!({"status": {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now}],
        "containerStatuses": containers,
    }});
    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .with_context(|| format!("marking Pod {namespace}/{name} ContainerCreating"))?;
    let event: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}.no-address"), "namespace": namespace},
        "involvedObject": {"kind": "Pod", "namespace": namespace, "name": name,
            "uid": pod.metadata.uid, "apiVersion": "v1"},
        "reason": "FailedCreatePodSandBox",
        "message": format!("Failed to create pod sandbox: plugin type=\"aws-cni\" name=\"aws-cni\" failed (add): add cmd: {NO_ADDRESS_MESSAGE} (node {node})"),
        "type": "Warning",
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        "source": {"component": "kubelet", "host": node},
    }))?;
    match Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), &namespace)
        .create(&PostParams::default(), &event)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e).context("recording the CNI's Event"),
    }
}

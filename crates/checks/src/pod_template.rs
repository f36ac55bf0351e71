//! What a Pod template says of where its Pods can be scheduled, as Karpenter reads it into
//! NodeClaim requirements (node selector, required and preferred node affinity, tolerations),
//! and what the workloads karpenter-health judges by their manifests say beyond it: the AWS Load
//! Balancer Controller's way to its VPC, Cilium's node taint. Shared by the operator's watches
//! and by lint, which reads the same objects from files. Pure.

use crate::facts::{
    DaemonSetFacts, LoadBalancerControllerFacts, PodScheduling, ResourceClaims, Toleration,
};
use crate::quantity::quantity;
use k8s_openapi::api::core::v1::{Container, NodeSelectorRequirement, NodeSelectorTerm, PodSpec};
use karpenter_health_api::karpenter::Requirement;
use std::collections::BTreeMap;

/// The requirement operators whose meaning the NodePool model judges exactly (Karpenter's
/// requirement algebra, `crate::requirements`).
const EXACT_REQUIREMENT_OPERATORS: [&str; 6] =
    ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
const EXACT_TOLERATION_OPERATORS: [&str; 3] = ["", "Equal", "Exists"];

/// The scheduling constraints of the Pods `spec` makes, named `namespace`/`name`; the Pod's own
/// state (`unschedulable_since`, `nominated`) is left unset.
pub fn scheduling(namespace: &str, name: &str, spec: Option<&PodSpec>) -> PodScheduling {
    let node_affinity = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref());
    let required = node_affinity
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|selector| {
            selector
                .node_selector_terms
                .iter()
                .map(requirements)
                .collect()
        })
        .unwrap_or_default();
    // Heaviest first, as Karpenter tries them (`scheduling.NewPodRequirements` sorts by weight).
    let preferred = node_affinity
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|terms| {
            let mut terms: Vec<_> = terms.iter().collect();
            terms.sort_by_key(|t| std::cmp::Reverse(t.weight));
            terms.iter().map(|t| requirements(&t.preference)).collect()
        })
        .unwrap_or_default();
    PodScheduling {
        only_this_class: true,
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        node_selector: spec
            .and_then(|s| s.node_selector.clone())
            .unwrap_or_default(),
        required_affinity: required,
        preferred_affinity: preferred,
        tolerations: spec
            .and_then(|s| s.tolerations.as_ref())
            .into_iter()
            .flatten()
            .map(|t| Toleration {
                key: t.key.clone().unwrap_or_default(),
                operator: t.operator.clone().unwrap_or_default(),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone().unwrap_or_default(),
            })
            .collect(),
        unschedulable_since: None,
        nominated: false,
    }
}

/// Whether a constraint of `pod` is beyond what the NodePool model judges exactly (a required
/// affinity operator Kubernetes does not define, a toleration operator other than `Equal` or
/// `Exists`).
pub fn constraints_unjudged(pod: &PodScheduling) -> bool {
    pod.required_affinity
        .iter()
        .flatten()
        .any(|r| !EXACT_REQUIREMENT_OPERATORS.contains(&r.operator.as_str()))
        || pod
            .tolerations
            .iter()
            .any(|t| !EXACT_TOLERATION_OPERATORS.contains(&t.operator.as_str()))
}

/// What Karpenter reads of a DaemonSet named `namespace`/`name` whose Pod template is `spec`
/// to count its Pod on a NodePool's nodes (kubernetes-sigs/karpenter `pkg/utils/daemonset`
/// `PodForDaemonSet`): its scheduling constraints (its heaviest preference kept: Karpenter up to
/// v1.1.0 weighs it) and its Pod's CPU (millicores) and memory (bytes) requests as
/// [`pod_requests`] counts them. A request that is no quantity counts as none (the API server
/// refuses such a DaemonSet anyway).
pub fn daemonset(namespace: &str, name: &str, spec: Option<&PodSpec>) -> DaemonSetFacts {
    let pod = scheduling(namespace, name, spec);
    let (cpu, memory) = spec.map(pod_requests).unwrap_or_default();
    DaemonSetFacts {
        cpu_millis: (cpu * 1000.0).round() as u64,
        memory_bytes: memory.round() as u64,
        constraints_unjudged: constraints_unjudged(&pod),
        has_pods: None,
        newest_pod: None,
        generation: None,
        resource_claims: spec.map(resource_claims).unwrap_or_default(),
        pod: PodScheduling {
            only_this_class: false,
            ..pod
        },
    }
}

/// Where the Pod asks for dynamic resources: Karpenter leaves such a DaemonSet out of its
/// overhead (`pod.HasDRARequirements`, `IGNORE_DRA_REQUESTS` true by default), by release
/// ([`crate::karpenter_release::KarpenterRelease::daemon_ignored_for_claims`]).
fn resource_claims(spec: &PodSpec) -> ResourceClaims {
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .any(|c| {
            c.resources
                .as_ref()
                .and_then(|r| r.claims.as_ref())
                .is_some_and(|c| !c.is_empty())
        });
    if containers {
        ResourceClaims::Containers
    } else if spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
        ResourceClaims::PodOnly
    } else {
        ResourceClaims::None
    }
}

/// One container's CPU (cores) and memory (bytes) requests, a limit standing in for a request
/// it does not set (Karpenter merges them: `PodForDaemonSet` from v1.8, its `Ceiling` before).
fn container_requests(c: &Container) -> (f64, f64) {
    let one = |resource: &str| {
        let r = c.resources.as_ref();
        r.and_then(|r| r.requests.as_ref()?.get(resource))
            .or_else(|| r.and_then(|r| r.limits.as_ref()?.get(resource)))
            .and_then(|q| quantity(&serde_json::Value::String(q.0.clone())))
            .unwrap_or(0.0)
    };
    (one("cpu"), one("memory"))
}

/// A Pod's CPU (cores) and memory (bytes) requests as Kubernetes counts them
/// (`k8s.io/component-helpers/resource` `PodRequests`, which Karpenter calls from v1.8; its own
/// `podRequests` before counts the same): the containers' sum, or more where an init container
/// needs more beside the sidecars started before it (restartable init containers run beside the
/// others and add to the sum), plus the Pod's `overhead`.
pub fn pod_requests(spec: &PodSpec) -> (f64, f64) {
    let add = |a: (f64, f64), b: (f64, f64)| (a.0 + b.0, a.1 + b.1);
    let max = |a: (f64, f64), b: (f64, f64)| (a.0.max(b.0), a.1.max(b.1));
    let mut regular = spec
        .containers
        .iter()
        .map(container_requests)
        .fold((0.0, 0.0), add);
    let (mut sidecars, mut init) = ((0.0, 0.0), (0.0, 0.0));
    for c in spec.init_containers.iter().flatten() {
        let r = container_requests(c);
        let in_use = if c.restart_policy.as_deref() == Some("Always") {
            regular = add(regular, r);
            sidecars = add(sidecars, r);
            sidecars
        } else {
            add(sidecars, r)
        };
        init = max(init, in_use);
    }
    let overhead = |resource: &str| {
        spec.overhead
            .as_ref()
            .and_then(|o| o.get(resource))
            .and_then(|q| quantity(&serde_json::Value::String(q.0.clone())))
            .unwrap_or(0.0)
    };
    add(max(regular, init), (overhead("cpu"), overhead("memory")))
}

/// The match expressions of one node selector term as requirements.
fn requirements(term: &NodeSelectorTerm) -> Vec<Requirement> {
    term.match_expressions
        .iter()
        .flatten()
        .map(requirement)
        .collect()
}

fn requirement(expression: &NodeSelectorRequirement) -> Requirement {
    Requirement {
        key: expression.key.clone(),
        operator: expression.operator.clone(),
        values: expression.values.clone().unwrap_or_default(),
        min_values: None,
    }
}

/// Where the AWS Load Balancer Controller's chart puts it when installed as AWS's EKS guide
/// says (release `aws-load-balancer-controller` in `kube-system`).
pub const LOAD_BALANCER_CONTROLLER: (&str, &str) = ("kube-system", "aws-load-balancer-controller");
/// The last segment of the controller's image repository (`public.ecr.aws/eks/…`, ECR's
/// `…/amazon/…`).
const LOAD_BALANCER_CONTROLLER_IMAGE: &str = "aws-load-balancer-controller";
/// The flags that name the VPC without instance metadata.
const VPC_FLAGS: [&str; 2] = ["--aws-vpc-id", "--aws-vpc-tags"];
/// The env the controller's `DescribeInstances` fallback reads.
const NODE_NAME_ENV: &str = "NODENAME";

/// The facts of the AWS Load Balancer Controller's Deployment, from its replicas and Pod
/// template. The controller needs its VPC id before it starts: `--aws-vpc-id`, else a
/// `DescribeVpcs` by `--aws-vpc-tags`, else instance metadata, else (since v2.4.5)
/// `DescribeInstances` of the node its `NODENAME` env names
/// (kubernetes-sigs/aws-load-balancer-controller `pkg/aws/cloud.go` `getVpcID`, `inferVPCID`;
/// the flags in `pkg/aws/cloud_config.go`). Its Helm chart passes the flags from the values
/// `vpcId` and `vpcTags` and sets no `NODENAME`
/// (`helm/aws-load-balancer-controller/templates/deployment.yaml`).
pub fn load_balancer_controller(
    namespace: &str,
    name: &str,
    replicas: Option<i32>,
    spec: Option<&PodSpec>,
) -> LoadBalancerControllerFacts {
    let pod = scheduling(namespace, name, spec);
    let controller = spec.and_then(|p| p.containers.iter().find(|c| runs_controller(c)));
    let (vpc_id_configured, vpc_source_unjudged) = match controller {
        Some(c) => (
            passes_vpc_flag(c),
            c.env_from.as_ref().is_some_and(|e| !e.is_empty())
                || c.env.iter().flatten().any(|e| e.name == NODE_NAME_ENV),
        ),
        // No container runs the controller's image: how it finds its VPC is not known.
        None => (false, true),
    };
    LoadBalancerControllerFacts {
        constraints_unjudged: constraints_unjudged(&pod),
        pod: PodScheduling {
            // The scheduler's preferences do not keep a Pod off a node.
            preferred_affinity: Vec::new(),
            ..pod
        },
        replicas: replicas.unwrap_or(1),
        host_network: spec.and_then(|p| p.host_network).unwrap_or(false),
        vpc_id_configured,
        vpc_source_unjudged,
    }
}

/// Whether `container` runs the controller's image (`registry/path/aws-load-balancer-controller`
/// with any tag or digest).
fn runs_controller(container: &Container) -> bool {
    let Some(image) = container.image.as_deref() else {
        return false;
    };
    let repository = image.split('@').next().unwrap_or(image);
    let last = repository.rsplit('/').next().unwrap_or(repository);
    last.split(':').next() == Some(LOAD_BALANCER_CONTROLLER_IMAGE)
}

/// Whether the container's command or arguments pass a flag that names the VPC, as Go's pflag
/// reads them (`--flag=value` or `--flag value`). An empty `--aws-vpc-id=` leaves it unset
/// (the controller then asks instance metadata); any `--aws-vpc-tags` counts.
fn passes_vpc_flag(container: &Container) -> bool {
    let words: Vec<&str> = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .map(String::as_str)
        .collect();
    words.iter().enumerate().any(|(i, word)| {
        VPC_FLAGS.iter().any(|flag| {
            let tags = *flag == "--aws-vpc-tags";
            match word.strip_prefix(flag) {
                Some("") => tags || words.get(i + 1).is_some_and(|v| !v.is_empty()),
                Some(rest) => rest
                    .strip_prefix('=')
                    .is_some_and(|value| tags || !value.is_empty()),
                None => false,
            }
        })
    })
}

/// Cilium's agent DaemonSet and the ConfigMap its agent and operator read their settings from,
/// as its Helm chart installs them.
pub const CILIUM_AGENT: (&str, &str) = ("kube-system", "cilium");
pub const CILIUM_CONFIG: (&str, &str) = ("kube-system", "cilium-config");
/// Whether Cilium's operator taints nodes whose agent is not running yet.
pub const CILIUM_SET_NODE_TAINTS: &str = "set-cilium-node-taints";
/// The key of that taint.
pub const CILIUM_TAINT_KEY: &str = "agent-not-ready-taint-key";
/// The key when the setting is absent or empty (cilium/cilium `pkg/defaults`
/// `AgentNotReadyNodeTaint`).
pub const CILIUM_DEFAULT_TAINT_KEY: &str = "node.cilium.io/agent-not-ready";

/// The key of the taint Cilium's operator puts on new nodes, from `cilium-config`'s `data`, or
/// `None` when these settings do not let it taint. Cilium's operator taints a node where an
/// agent Pod is scheduled but not yet running when `set-cilium-node-taints` is true, unless the
/// node already carries a taint of that key (cilium/cilium `operator/watchers/node_taint.go`
/// `checkAndMarkNode`); the operator's own flag defaults to false (`operator/cmd/flags.go`),
/// Cilium's Helm chart writes true. The boolean is read as Go's `strconv.ParseBool` reads it
/// (through viper), a value it cannot parse being false.
pub fn cilium_node_taint_key(data: &BTreeMap<String, String>) -> Option<String> {
    let set = data.get(CILIUM_SET_NODE_TAINTS)?;
    if crate::go::parse_bool(set.trim()) != Some(true) {
        return None;
    }
    Some(
        data.get(CILIUM_TAINT_KEY)
            .map(|k| k.trim())
            .filter(|k| !k.is_empty())
            .unwrap_or(CILIUM_DEFAULT_TAINT_KEY)
            .to_owned(),
    )
}

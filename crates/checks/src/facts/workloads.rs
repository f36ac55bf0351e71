//! The workloads the checks read by their Pod templates, as plain data: pending Pods, DaemonSets
//! and the AWS Load Balancer Controller, each as Karpenter's scheduler sees it. No IO.

use super::*;

/// What of one pending Pod's spec Karpenter turns into NodeClaim requirements.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodScheduling {
    pub namespace: String,
    pub name: String,
    pub node_selector: BTreeMap<String, String>,
    /// `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[*].matchExpressions`,
    /// one inner list per term.
    pub required_affinity: Vec<Vec<Requirement>>,
    /// Preferred terms' expressions (Karpenter also tries them, relaxing later).
    pub preferred_affinity: Vec<Vec<Requirement>>,
    /// `spec.tolerations`: which NodePools' taints it accepts.
    pub tolerations: Vec<Toleration>,
    /// This EC2NodeClass is the only one whose NodePools could take the Pod (it pins one of
    /// them, or no other class has a NodePool it could use), so what the Pod breaks, it breaks
    /// here. `false`: Karpenter chooses among several classes, and a finding is only a warning.
    pub only_this_class: bool,
    /// Since when the scheduler has called it unschedulable (its `PodScheduled=False`
    /// condition's transition time): how long it has waited.
    pub unschedulable_since: Option<Timestamp>,
    /// `status.nominatedNodeName` is set: a node is being made free for it (preemption).
    pub nominated: bool,
}

/// What Karpenter reads of one DaemonSet to count its Pod on a NodePool's nodes
/// (kubernetes-sigs/karpenter `pkg/controllers/provisioning/scheduling/scheduler.go`
/// `getDaemonOverhead`, `isDaemonPodCompatible`): its Pod template's scheduling constraints and
/// requests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DaemonSetFacts {
    /// The template's node selector, required node affinity and tolerations (`namespace` and
    /// `name` are the DaemonSet's).
    pub pod: PodScheduling,
    /// The template's Pod's CPU requests, in millicores, as Kubernetes and Karpenter count them
    /// (`crate::pod_template::pod_requests`: containers, init and sidecar containers, overhead,
    /// a limit standing in for a missing request).
    pub cpu_millis: u64,
    /// The template's Pod's memory requests, in bytes, counted likewise.
    pub memory_bytes: u64,
    /// A scheduling constraint this model does not judge exactly (an operator Kubernetes does
    /// not define in its node affinity, a toleration operator other than `Equal` or `Exists`):
    /// such a DaemonSet is never counted, so what is counted is never more than Karpenter counts.
    pub constraints_unjudged: bool,
    /// Whether Pods of it exist (`status.currentNumberScheduled` above 0); `None` when not known.
    /// Karpenter counts the requests of a DaemonSet's newest Pod where one exists, the template's
    /// only where none does (kubernetes-sigs/karpenter `provisioning/provisioner.go`
    /// `getDaemonSetPods`: `cluster.GetDaemonSetPod`, else `daemonset.PodForDaemonSet`), and an
    /// admission webhook (the Vertical Pod Autoscaler) may have given its Pods other requests.
    pub has_pods: Option<bool>,
    /// The CPU (millicores) and memory (bytes) requests of its newest Pod, when read.
    pub newest_pod: Option<(u64, u64)>,
    /// `metadata.generation`: 1 while its template was never changed.
    pub generation: Option<i64>,
    /// Which dynamic resources its Pods ask for, as Karpenter tells them apart.
    pub resource_claims: ResourceClaims,
}

/// Where a Pod asks for dynamic resources (DRA), as Karpenter's `pod.HasDRARequirements` looks:
/// a container's `resources.claims` from core v1.7.0, the Pod's `resourceClaims` alone only from
/// v1.14.0 (kubernetes-sigs/karpenter `pkg/utils/pod/scheduling.go`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResourceClaims {
    #[default]
    None,
    /// `spec.resourceClaims` with no container claiming one.
    PodOnly,
    /// A container's (or init container's) `resources.claims`.
    Containers,
}

impl DaemonSetFacts {
    /// The requests Karpenter certainly counts for it: its newest Pod's when read; its template's
    /// when it has no Pod and its template was never changed; `None` otherwise. Karpenter's
    /// cluster state keeps the last Pod it saw of a DaemonSet until the DaemonSet is deleted
    /// (kubernetes-sigs/karpenter `state/cluster.go` `UpdateDaemonSet` stores nothing when no
    /// Pod is left), so a DaemonSet whose Pods are gone may still be counted at what they asked,
    /// which only an unchanged template certainly equals (an admission webhook that changed those
    /// Pods' requests is not seen: docs/checks.md).
    pub fn counted_requests(&self) -> Option<(u64, u64)> {
        match (self.newest_pod, self.has_pods, self.generation) {
            (Some(read), _, _) => Some(read),
            (None, Some(false), Some(1)) => Some((self.cpu_millis, self.memory_bytes)),
            _ => None,
        }
    }

    /// The requests it is counted at: what Karpenter certainly counts, else its template's.
    pub fn requests(&self) -> (u64, u64) {
        self.counted_requests()
            .unwrap_or((self.cpu_millis, self.memory_bytes))
    }
}

/// What the AWS Load Balancer Controller's Deployment says of how it finds its VPC, which it
/// needs before it starts (kubernetes-sigs/aws-load-balancer-controller `pkg/aws/cloud.go`
/// `getVpcID`): the `--aws-vpc-id` flag, else a lookup by `--aws-vpc-tags`, else instance
/// metadata, else (since v2.4.5) `DescribeInstances` of the node named by its `NODENAME` env.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadBalancerControllerFacts {
    /// The Pod template's node selector, required node affinity and tolerations (`namespace` and
    /// `name` are the Deployment's).
    pub pod: PodScheduling,
    /// A scheduling constraint the NodePool model does not judge exactly (see
    /// [`DaemonSetFacts::constraints_unjudged`]): where it can run is not judged.
    pub constraints_unjudged: bool,
    /// `spec.replicas` (1 when unset).
    pub replicas: i32,
    /// `hostNetwork: true`: its requests to instance metadata make one network hop, not two.
    pub host_network: bool,
    /// The controller's container passes `--aws-vpc-id` or `--aws-vpc-tags`: it does not read
    /// its VPC id from instance metadata.
    pub vpc_id_configured: bool,
    /// Its VPC may come from elsewhere than the flags, which the Deployment alone does not
    /// decide: the container sets a `NODENAME` env (the `DescribeInstances` fallback), takes env
    /// from `envFrom`, or no container runs the controller's image.
    pub vpc_source_unjudged: bool,
}

/// One of a Pod's tolerations, as written (an empty key with `Exists` tolerates every taint, an
/// empty effect every effect).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Toleration {
    pub key: String,
    /// `Equal` (also when empty), `Exists`, or an operator this model does not know.
    pub operator: String,
    pub value: String,
    pub effect: String,
}

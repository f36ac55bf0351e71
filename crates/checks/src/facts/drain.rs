//! What a terminating NodeClaim's drain waits for, as plain data: the Pods bound to its Node and
//! the PodDisruptionBudgets of their namespaces. The adapter reads them (kube-facts `drain.rs`)
//! only for NodeClaims terminating longer than [`crate::Settings::terminating_long_after`]. No IO.

use super::Observed;
use jiff::Timestamp;
use std::collections::BTreeMap;

/// The Pods on one terminating NodeClaim's Node and the PodDisruptionBudgets that select them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeDrain {
    /// The NodeClaim's `status.nodeName`; `None` when it has no Node (then no Pod is read).
    pub node: Option<String>,
    /// Every Pod bound to the Node (`spec.nodeName`), sorted by `namespace/name`.
    pub pods: Vec<PodOnNode>,
    /// The PodDisruptionBudgets of the Pods' namespaces by `namespace/name`; unknown when they
    /// could not be listed.
    pub budgets: Observed<BTreeMap<String, BudgetFacts>>,
}

/// What Karpenter's drain and the eviction API read of one Pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodOnNode {
    pub namespace: String,
    pub name: String,
    /// `status.phase` (`Running`, `Pending`, `Succeeded`, `Failed`); empty when unset.
    pub phase: String,
    /// Its `Ready` condition is `True`.
    pub ready: bool,
    /// `metadata.deletionTimestamp`: when its grace period ends.
    pub deleting_until: Option<Timestamp>,
    /// Its `karpenter.sh/do-not-disrupt` annotation as written (`"true"`, or from Karpenter 1.12
    /// a duration such as `"30m"`).
    pub do_not_disrupt: Option<String>,
    /// `status.startTime`: a duration-valued `do-not-disrupt` counts from it.
    pub started: Option<Timestamp>,
    /// A static Pod's mirror (owned by its Node): never evicted, never waited for.
    pub mirror: bool,
    /// Tolerates the taint Karpenter v1 puts on a Node it drains (`karpenter.sh/disrupted:NoSchedule`).
    pub tolerates_disrupted: bool,
    /// Tolerates the taint Karpenter put there before v1
    /// (`karpenter.sh/disruption=disrupting:NoSchedule`).
    pub tolerates_disrupting: bool,
    /// The PodDisruptionBudgets whose selector selects it, by `namespace/name` (matched by the
    /// adapter with the API server's selector rules).
    pub budgets: Vec<String>,
}

/// What the eviction API reads of one PodDisruptionBudget (kubernetes
/// `pkg/registry/core/pod/storage/eviction.go`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BudgetFacts {
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i64,
    /// `status.currentHealthy` and `status.desiredHealthy`.
    pub current_healthy: i64,
    pub desired_healthy: i64,
    /// `spec.unhealthyPodEvictionPolicy` (`IfHealthyBudget`, the default, or `AlwaysAllow`).
    pub unhealthy_pod_eviction_policy: Option<String>,
    /// The disruption controller has not processed its current generation yet
    /// (`status.observedGeneration` < `metadata.generation`): every eviction is refused.
    pub unprocessed: bool,
}

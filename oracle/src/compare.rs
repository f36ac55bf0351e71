//! The invariants between karpenter-health's verdict and Karpenter's decision on one scenario:
//! what the verdict claims Karpenter does ([`Claim`]), which claims Karpenter's code contradicts
//! (disagreements: false alarms), which Pods wait while every scheduling condition is True
//! (misses), and which NodePools Karpenter puts a Pod on that the engine's model rules out
//! (narrower than Karpenter). Pure.

use crate::oracle::{Answer, PodOutcome};
use crate::scenario::Scenario;
use k8s_openapi::api::core::v1::Pod;
use karpenter_health_api::{ConditionStatus, ConditionType, KarpenterHealthStatus, Severity};
use karpenter_health_checks::facts::PodScheduling;
use karpenter_health_checks::facts::{Facts, Observed};
use karpenter_health_checks::pod_fit::NodeClaimTemplate;
use karpenter_health_kube_facts::pods;
use std::fmt;

/// The conditions whose verdicts model Karpenter's scheduling.
pub const SCHEDULING: [ConditionType; 4] = [
    ConditionType::InstanceTypesAvailable,
    ConditionType::LimitsLeaveRoom,
    ConditionType::NodesFitWorkloads,
    ConditionType::LabelsAllowed,
];

/// The findings that say a NodePool launches nothing, by reason (errors and warnings alike).
const LAUNCHES_NOTHING: [&str; 9] = [
    "NoInstanceTypeMatchesRequirements",
    "RequiredZonesWithoutSubnets",
    "NoInstanceTypeForAmiArchitecture",
    "NodePoolAllowsNoInstanceType",
    "DaemonSetsFillNodes",
    "NodePoolLimitsReached",
    "NodePoolLimitsBelowSmallestInstance",
    "NodePoolAtLimits",
    "VcpuQuotaExhausted",
];

/// The findings that say a Pod they name waits (nothing launches for it), when they are errors.
const POD_WAITS: [&str; 7] = [
    "NoInstanceTypeMatchesRequirements",
    "RequiredZonesWithoutSubnets",
    "NoInstanceTypeForAmiArchitecture",
    "NodePoolLimitsReached",
    "NodePoolLimitsBelowSmallestInstance",
    "VcpuQuotaExhausted",
    "RestrictedLabelDomain",
];

/// The findings that name the NodePools a Pod they name waits on.
const BLAMES_NODE_POOLS: [&str; 6] = [
    "NoInstanceTypeMatchesRequirements",
    "RequiredZonesWithoutSubnets",
    "NoInstanceTypeForAmiArchitecture",
    "NodePoolLimitsReached",
    "NodePoolLimitsBelowSmallestInstance",
    "VcpuQuotaExhausted",
];

/// What a finding of the verdict says Karpenter does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Karpenter launches nothing for any Pod of this NodePool.
    LaunchesNothing { node_pool: String },
    /// Karpenter launches nothing for this Pod (`namespace/name`).
    PodWaits { pod: String },
    /// This Pod waits on this NodePool for what the finding names (its limits, its instance
    /// types): Karpenter would take the Pod there otherwise, so it does not refuse the Pod there
    /// for the Pod's own requirements or taints ("raise the limit" must be able to help).
    WaitsOn { pod: String, node_pool: String },
}

/// Whether Karpenter refused a Pod on a NodePool for the Pod's own scheduling constraints (its
/// requirements, its tolerations) or before scheduling: no change to the NodePool's limits or
/// instance types would take it.
pub fn refused_for_the_pod(outcome: &PodOutcome) -> bool {
    !outcome.ignored.is_empty()
        || outcome.error.starts_with("incompatible requirements")
        || outcome.error.contains("did not tolerate")
}

/// A claim Karpenter's code contradicts: a false alarm.
#[derive(Clone, Debug)]
pub struct Disagreement {
    pub claim: Claim,
    /// The finding that made it: condition, reason, message.
    pub finding: String,
    /// What Karpenter did instead.
    pub karpenter: String,
}

/// A Pod nothing launches for while every scheduling condition is True without a warning.
#[derive(Clone, Debug)]
pub struct Miss {
    pub pod: String,
    pub karpenter: String,
}

/// A NodePool Karpenter puts a Pod on that the engine's model says may not take it.
#[derive(Clone, Debug)]
pub struct Narrower {
    pub pod: String,
    pub node_pool: String,
}

/// Everything one comparison found.
#[derive(Clone, Debug, Default)]
pub struct Comparison {
    pub claims: usize,
    pub disagreements: Vec<Disagreement>,
    pub misses: Vec<Miss>,
    pub narrower: Vec<Narrower>,
}

impl Comparison {
    /// Disagreements of the first kind (false alarms) and narrower answers fail the suite;
    /// misses are counted only.
    pub fn failed(&self) -> bool {
        !self.disagreements.is_empty() || !self.narrower.is_empty()
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.disagreements {
            writeln!(
                f,
                "false alarm: {:?}\n  verdict: {}\n  Karpenter: {}",
                d.claim, d.finding, d.karpenter
            )?;
        }
        for n in &self.narrower {
            writeln!(
                f,
                "narrower than Karpenter: Karpenter puts {} on NodePool {}, the engine says it may not take it",
                n.pod, n.node_pool
            )?;
        }
        for m in &self.misses {
            writeln!(
                f,
                "miss: {} waits ({}) while every scheduling condition is True",
                m.pod, m.karpenter
            )?;
        }
        Ok(())
    }
}

/// The claims of `status`'s findings; `pods` are the scenario's pending Pods (`namespace/name`),
/// named in messages.
pub fn claims(status: &KarpenterHealthStatus, pods: &[String]) -> Vec<(Claim, String)> {
    let mut claims = Vec::new();
    for f in &status.findings {
        if !SCHEDULING.contains(&f.condition_type) {
            continue;
        }
        let said = format!(
            "{} {} ({:?}): {}",
            f.condition_type, f.reason, f.severity, f.message
        );
        if LAUNCHES_NOTHING.contains(&f.reason.as_str()) {
            for s in f.subjects.iter().filter(|s| s.kind == "NodePool") {
                claims.push((
                    Claim::LaunchesNothing {
                        node_pool: s.name.clone(),
                    },
                    said.clone(),
                ));
            }
        }
        if f.severity == Severity::Error && POD_WAITS.contains(&f.reason.as_str()) {
            for pod in pods {
                let named = f.message.contains(pod.as_str())
                    || f.subjects.iter().any(|s| {
                        s.kind == "Pod"
                            && format!("{}/{}", s.namespace.as_deref().unwrap_or_default(), s.name)
                                == *pod
                    });
                if !named {
                    continue;
                }
                claims.push((Claim::PodWaits { pod: pod.clone() }, said.clone()));
                if BLAMES_NODE_POOLS.contains(&f.reason.as_str()) {
                    for s in f.subjects.iter().filter(|s| s.kind == "NodePool") {
                        claims.push((
                            Claim::WaitsOn {
                                pod: pod.clone(),
                                node_pool: s.name.clone(),
                            },
                            said.clone(),
                        ));
                    }
                }
            }
        }
    }
    claims
}

/// Compares the engine's `status` (from `facts`, for `scenario`) with Karpenter's `answer`.
pub fn compare(
    scenario: &Scenario,
    facts: &Facts,
    status: &KarpenterHealthStatus,
    answer: &Answer,
) -> Comparison {
    let pods: Vec<String> = answer.pods.keys().cloned().collect();
    let mut out = Comparison::default();
    for (claim, finding) in claims(status, &pods) {
        out.claims += 1;
        let contradiction = match &claim {
            Claim::LaunchesNothing { node_pool } => answer
                .node_pools
                .get(node_pool)
                .filter(|np| np.probe.launched)
                .map(|np| {
                    format!(
                        "alone, it launches for a Pod that tolerates its taints (instance types {:?})",
                        np.probe.instance_types
                    )
                }),
            Claim::PodWaits { pod } => answer
                .pods
                .get(pod)
                .filter(|p| p.launched)
                .map(|p| format!("launches NodePool {} ({:?}) for it", p.node_pool, p.instance_types)),
            Claim::WaitsOn { pod, node_pool } => answer
                .node_pools
                .get(node_pool)
                .and_then(|np| np.pods.get(pod))
                .filter(|p| refused_for_the_pod(p))
                .map(|p| {
                    format!(
                        "refuses the Pod on NodePool {node_pool} for its own constraints: {}",
                        p.why_not()
                    )
                }),
        };
        if let Some(karpenter) = contradiction {
            out.disagreements.push(Disagreement {
                claim,
                finding,
                karpenter,
            });
        }
    }
    let all_true = SCHEDULING.iter().all(|ty| {
        status.conditions.iter().any(|c| {
            c.type_ == ty.to_string() && ConditionStatus::parse(&c.status) == ConditionStatus::True
        })
    }) && !status
        .findings
        .iter()
        .any(|f| SCHEDULING.contains(&f.condition_type));
    if all_true {
        for (pod, outcome) in &answer.pods {
            // A Pod of the class: some NodePool of it would take the Pod but for what the
            // scheduling checks judge (room, limits, instance types, a launch).
            let of_the_class = answer.node_pools.values().any(|np| {
                np.pods
                    .get(pod)
                    .is_some_and(|p| !p.launched && !refused_for_the_pod(p))
            });
            if !outcome.launched && outcome.node_pool != "(existing node)" && of_the_class {
                out.misses.push(Miss {
                    pod: pod.clone(),
                    karpenter: outcome.why_not().to_owned(),
                });
            }
        }
    }
    out.narrower = narrower(scenario, facts, answer);
    out
}

/// Where Karpenter's scheduler puts a Pod on a NodePool alone that `pod_fit` rules out (each
/// Pod read as the operator reads a pending Pod, `karpenter_health_kube_facts::pods`).
fn narrower(scenario: &Scenario, facts: &Facts, answer: &Answer) -> Vec<Narrower> {
    let Observed::Found(pools) = &facts.cluster.node_pools else {
        return Vec::new();
    };
    let pods: Vec<PodScheduling> = scenario
        .pending_pods
        .iter()
        .filter_map(|p| serde_json::from_value::<Pod>(p.clone()).ok())
        .map(|p| pods::pod_scheduling(&p))
        .collect();
    let mut out = Vec::new();
    for pool in pools {
        let name = pool.metadata.name.as_deref().unwrap_or_default();
        let Some(alone) = answer.node_pools.get(name) else {
            continue;
        };
        let template = NodeClaimTemplate::of(pool);
        for pod in pods.iter() {
            let key = format!("{}/{}", pod.namespace, pod.name);
            let placed = alone.pods.get(&key).is_some_and(|o| o.node_pool == name);
            if placed && !template.may_take(pod) {
                out.push(Narrower {
                    pod: key,
                    node_pool: name.to_owned(),
                });
            }
        }
    }
    out
}

//! An agent's taint on new nodes that the NodePool does not declare as a startup taint. Until a
//! node initializes, Karpenter's scheduler hides only its startup taints and the well-known
//! ephemeral ones (kubernetes-sigs/karpenter `pkg/controllers/state/statenode.go` `Taints()`);
//! any other taint, such as the one Cilium's operator puts on each node whose agent is not
//! running yet (cilium/cilium `operator/watchers/node_taint.go`), makes the new
//! node look unable to take the Pods Karpenter launched it for, so Karpenter launches more nodes
//! for them while the agent starts (Karpenter's FAQ, "Why do I see extra nodes get launched";
//! declared as a startup taint, the node carries the taint from the start and Cilium's operator
//! adds none). Pure: no IO.
//!
//! A warning, never a False: the extra nodes cost money and are consolidated away later; no Pod
//! fails for it. Judged only for Cilium, whose settings say whether and with which key it
//! taints, and only on NodePools its agent DaemonSet (`kube-system/cilium`) may run on (an agent
//! selecting a label Karpenter's nodes never carry does not).

use crate::clip;
use crate::karpenter_release::Sure;
use crate::facts::Observed;
use crate::plan::Context;
use crate::pod_fit::NodeClaimTemplate;
use crate::pod_template::CILIUM_AGENT;
use crate::verdict::{Check, Why};
use crate::warnings::Warning;
use karpenter_health_api::SubjectRef;
use karpenter_health_api::karpenter::NodePool;

/// Warns of each NodePool of `pools` whose new nodes Cilium's operator taints without the
/// NodePool declaring that taint in `startupTaints`; returns what the True message says of it
/// (empty when Cilium does not taint new nodes, or it could not be judged).
pub(super) fn judge(ctx: &Context, c: &mut Check, pools: &[&NodePool]) -> String {
    let key = match &ctx.facts.cluster.cilium_node_taint {
        Observed::Found(key) => key.as_str(),
        Observed::Absent => return String::new(),
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved(
                "Cilium's settings (ConfigMap kube-system/cilium-config)",
                u,
            ));
            return String::new();
        }
    };
    // Unknown DaemonSets are reported by `daemonset_room`, which reads them too.
    let Observed::Found(daemonsets) = &ctx.facts.cluster.daemonsets else {
        return String::new();
    };
    let Some(agent) = daemonsets
        .iter()
        .find(|d| (d.pod.namespace.as_str(), d.pod.name.as_str()) == CILIUM_AGENT)
    else {
        // No agent Pod is scheduled anywhere, so the operator taints no node.
        return String::new();
    };
    let mut warned = 0;
    for pool in pools {
        let spec = &pool.spec.template.spec;
        // The operator adds no taint where one of its key is already on the node.
        if spec.startup_taints.iter().chain(&spec.taints).any(|t| t.key == key) {
            continue;
        }
        // What runs on a node: where the agent may run, it is warned of.
        if !NodeClaimTemplate::for_release(pool, &ctx.release(), Sure::May).may_take(&agent.pod) {
            continue;
        }
        let name = pool.metadata.name.as_deref().unwrap_or_default();
        warned += 1;
        c.warn(
            Warning::AgentTaintNotStartupTaint,
            format!(
                "NodePool {}: Cilium's operator taints each of its new nodes with {key} until \
                 the Cilium agent (DaemonSet kube-system/cilium) runs there \
                 (kube-system/cilium-config: set-cilium-node-taints), and the NodePool's \
                 startupTaints do not declare it. Karpenter then counts each new node as unable \
                 to take the Pods it launched it for and launches more nodes for them while the \
                 agent starts. Add {{key: {key}, effect: NoExecute}} to its \
                 spec.template.spec.startupTaints.",
                clip(name, 128)
            ),
            vec![ctx.node_class_subject(), SubjectRef::new("NodePool", name)],
        );
    }
    if warned == 0 {
        format!(
            "Cilium's node taint {key} is a startup taint of every NodePool its agent runs on."
        )
    } else {
        String::new()
    }
}

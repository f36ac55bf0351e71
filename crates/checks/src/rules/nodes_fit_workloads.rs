//! `NodesFitWorkloads`: the nodes Karpenter launches for this EC2NodeClass can run the Pods it
//! launches them for, judged per NodePool: they finish initializing (`initialization`), and the
//! Pods each is promised fit the addresses the VPC CNI can give it (`pod_density`). Karpenter
//! launches these nodes, so its own status stays green while the Pods wait. Pure: no IO.

mod initialization;
mod pod_density;

use crate::plan::Context;
use crate::verdict::{Check, Outcome, Rule};
use karpenter_health_api::{ConditionType, Reason};

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::NodesFitWorkloads, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let check = Check::new(ConditionType::NodesFitWorkloads, "nodes-fit-workloads");
    let (mut c, pools) =
        match check.node_pools(&ctx.facts.cluster.node_pools, Reason::NodesFitTheirPods) {
            Ok(found) => found,
            Err(outcome) => return outcome,
        };
    let said = [
        initialization::judge(ctx, &mut c, &pools),
        pod_density::judge(ctx, &mut c, &pools),
    ];
    let ok: Vec<String> = said.into_iter().filter(|s| !s.is_empty()).collect();
    c.finish(Reason::NodesFitTheirPods, ok.join(" "))
}

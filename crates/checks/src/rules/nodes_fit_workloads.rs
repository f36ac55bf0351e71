//! `NodesFitWorkloads`: the nodes Karpenter launches for this EC2NodeClass can run the Pods it
//! launches them for, judged per NodePool: the DaemonSets leave room for Pods
//! (`daemonset_room`), the nodes finish initializing (`initialization`) without an agent's taint
//! making Karpenter launch more of them (`agent_taint`), the Pods each is promised fit the
//! addresses the VPC CNI can give it (`pod_density`), and a workload that needs instance metadata
//! can reach it there (`metadata_reach`). Karpenter's own status stays green while
//! the Pods wait. Pure: no IO.

mod agent_taint;
mod daemonset_room;
mod initialization;
mod metadata_reach;
mod pod_density;

use crate::facts::Observed;
use crate::plan::Context;
use crate::verdict::{Check, Outcome, Rule, Why};
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
        daemonset_room::judge(ctx, &mut c, &pools),
        initialization::judge(ctx, &mut c, &pools),
        agent_taint::judge(ctx, &mut c, &pools),
        pod_density::judge(ctx, &mut c, &pools),
        metadata_reach::judge(ctx, &mut c, &pools),
    ];
    let ok: Vec<String> = said.into_iter().filter(|s| !s.is_empty()).collect();
    c.finish(Reason::NodesFitTheirPods, ok.join(" "))
}

/// Whether the catalog and the subnets (the zones the types are offered in) are known; an
/// Unknown naming what is not, else.
pub(super) fn catalog_observed(ctx: &Context, c: &mut Check) -> bool {
    let catalog = match &ctx.facts.aws.instance_types {
        Some(Observed::Found(_)) => true,
        Some(Observed::Unknown(u)) => {
            c.unknown(Why::unobserved("The region's instance types", u));
            false
        }
        None | Some(Observed::Absent) => {
            c.unknown(Why::new(
                Reason::NotObserved,
                "The region's instance types have not been read yet.",
            ));
            false
        }
    };
    let subnets = match &ctx.facts.aws.subnets {
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved("The subnets of this EC2NodeClass", u));
            false
        }
        // No subnet: InstanceTypesAvailable and SubnetsReady say so; no type is judged here.
        _ => true,
    };
    catalog && subnets
}

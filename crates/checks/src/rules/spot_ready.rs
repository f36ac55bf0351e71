//! `SpotReady`: when a NodePool of this EC2NodeClass allows spot, the account has the
//! `AWSServiceRoleForEC2Spot` service-linked role. Without it every spot request fails and,
//! since Karpenter 1.5, Karpenter silently falls back to on-demand (aws/karpenter-provider-aws
//! #504, #5436; `website/.../troubleshooting.md` "Missing Service Linked Role"; launch reason
//! `SpotSLRCreationFailed`, #7625). Pure: no IO.

use crate::facts::Observed;
use crate::plan::Context;
use crate::plan::capacity::allows_spot;
use crate::plan::request::SPOT_SERVICE_LINKED_ROLE;
use crate::verdict::{Check, Outcome, Rule, Why};
use karpenter_health_api::{ConditionType, Reason, SubjectRef};

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::SpotReady, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::SpotReady, "spot-service-linked-role");
    let pools = match &ctx.facts.cluster.node_pools {
        Observed::Found(pools) => pools,
        Observed::Absent => {
            return c.finish(Reason::SpotNotUsed, "No NodePool uses this EC2NodeClass.");
        }
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved("The NodePools of this EC2NodeClass", u));
            return c.finish(Reason::SpotNotUsed, "");
        }
    };
    let mut spot: Vec<String> = pools
        .iter()
        .filter(|p| allows_spot(p))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    spot.sort();
    if spot.is_empty() {
        return c.finish(
            Reason::SpotNotUsed,
            "No NodePool of this EC2NodeClass allows spot capacity.",
        );
    }
    let pools_text = crate::wording::list_bounded(&spot, 3);
    let mut ok = String::new();
    match &ctx.facts.aws.spot_service_linked_role {
        None => c.unknown(Why::new(
            Reason::NotObserved,
            format!("The {SPOT_SERVICE_LINKED_ROLE} role has not been looked up yet."),
        )),
        Some(Observed::Unknown(u)) => c.unknown(Why::unobserved(
            &format!("IAM role {SPOT_SERVICE_LINKED_ROLE}"),
            u,
        )),
        Some(Observed::Absent) => {
            let mut subjects = vec![ctx.node_class_subject()];
            subjects.extend(spot.iter().take(5).map(|p| SubjectRef::new("NodePool", p)));
            subjects.push(SubjectRef::new("IAMRole", SPOT_SERVICE_LINKED_ROLE));
            c.fail(
                Reason::SpotServiceLinkedRoleMissing,
                format!(
                    "NodePool {pools_text} allows spot, but the account has no \
                     {SPOT_SERVICE_LINKED_ROLE} service-linked role: spot launches fail and \
                     Karpenter falls back to on-demand. Create it with `aws iam \
                     create-service-linked-role --aws-service-name spot.amazonaws.com`."
                ),
                subjects,
            );
        }
        Some(Observed::Found(arn)) => {
            ok = format!(
                "NodePool {pools_text} allows spot, and the service-linked role {} exists.",
                crate::clip(arn, 256)
            );
        }
    }
    c.finish(Reason::SpotServiceLinkedRoleExists, ok)
}

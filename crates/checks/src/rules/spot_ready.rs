//! `SpotReady`: when a NodePool of this EC2NodeClass allows spot, the account has the
//! `AWSServiceRoleForEC2Spot` service-linked role, or Karpenter's role may have EC2 create it.
//! EC2 creates a missing one at the first spot launch with the caller's permission
//! (`iam:CreateServiceLinkedRole`); without that, every spot request fails
//! (`AuthFailure.ServiceLinkedRoleCreationNotPermitted`) and, since Karpenter 1.5, Karpenter
//! silently falls back to on-demand (aws/karpenter-provider-aws #504, #5436;
//! `website/.../troubleshooting.md` "Missing Service Linked Role"; launch reason
//! `SpotSLRCreationFailed`, #7625). Whether the role may is read as `ControllerCanLaunch` reads
//! its permissions (IAM's simulator, else the role's own policies); unknown, the condition is
//! Unknown. Pure: no IO.

use crate::facts::Observed;
use crate::plan::Context;
use crate::plan::capacity::allows_spot;
use crate::karpenter_permissions::CREATE_SERVICE_LINKED_ROLE as CREATE;
use crate::plan::request::SPOT_SERVICE_LINKED_ROLE;
use crate::verdict::{Check, Outcome, Rule, Why};
use crate::warnings::Warning;
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
            if let Some(creatable) = without_the_role(ctx, &mut c, &spot, &pools_text) {
                return c.finish(Reason::SpotServiceLinkedRoleCreatable, creatable);
            }
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

/// The account has no spot service-linked role. EC2 creates it at the first spot launch when the
/// caller may create it (its refusal, `AuthFailure.ServiceLinkedRoleCreationNotPermitted`, is for
/// a caller that may not; aws/karpenter-provider-aws `pkg/errors/errors.go`): the True message
/// (and a warning) when Karpenter's role may, else the finding (False when it may not, Unknown
/// when that is not known). On the refusal Karpenter marks spot unavailable for 3 minutes and
/// launches on-demand where the NodePool allows it (`pkg/providers/instance/instance.go`
/// `MarkCapacityTypeUnavailable`, `pkg/cache/cache.go` UnavailableOfferingsTTL; v1.8.6 and
/// v1.14.1 alike), so a spot-only NodePool's Pods wait.
fn without_the_role(
    ctx: &Context,
    c: &mut Check,
    spot: &[String],
    pools_text: &str,
) -> Option<String> {
    let missing = format!(
        "NodePool {pools_text} allows spot, but the account has no {SPOT_SERVICE_LINKED_ROLE} \
         service-linked role"
    );
    match crate::plan::permissions::spot_service_linked_role_creation(ctx) {
        Ok(Ok(())) => {
            c.warn(
                Warning::SpotServiceLinkedRoleCreatedAtFirstLaunch,
                format!(
                    "The account has no {SPOT_SERVICE_LINKED_ROLE}: EC2 creates it for the whole \
                     account at the first spot launch, with Karpenter's {CREATE}. Create it once \
                     (`aws iam create-service-linked-role --aws-service-name \
                     spot.amazonaws.com`) to rely on neither."
                ),
                vec![SubjectRef::new("IAMRole", SPOT_SERVICE_LINKED_ROLE)],
            );
            Some(format!(
                "{missing} yet; Karpenter's role may have EC2 create it ({CREATE} on it, decided \
                 by IAM's policy simulator), as EC2 does at the first spot launch."
            ))
        }
        Ok(Err(denied_by)) => {
            let mut subjects = vec![ctx.node_class_subject()];
            subjects.extend(spot.iter().take(5).map(|p| SubjectRef::new("NodePool", p)));
            subjects.push(SubjectRef::new("IAMRole", SPOT_SERVICE_LINKED_ROLE));
            c.fail(
                Reason::SpotServiceLinkedRoleMissing,
                format!(
                    "{missing}, and Karpenter's role may not have EC2 create it ({CREATE}: {}): \
                     every spot launch fails, and Karpenter marks spot unavailable for 3 minutes \
                     and tries again, {}. Create it with `aws iam create-service-linked-role \
                     --aws-service-name spot.amazonaws.com`.",
                    crate::clip(&denied_by, 512),
                    meanwhile(ctx, spot)
                ),
                subjects,
            );
            None
        }
        Err(why) => {
            c.unknown(Why::new(
                why.reason,
                format!(
                    "{missing}; EC2 creates it at the first spot launch if Karpenter's role may \
                     ({CREATE}), which is not known: {}",
                    why.message
                ),
            ));
            None
        }
    }
}

/// What Karpenter does meanwhile with the NodePools in `spot`: on-demand where a NodePool
/// allows it; the Pods of the others wait.
fn meanwhile(ctx: &Context, spot: &[String]) -> String {
    let pools = ctx.facts.cluster.node_pools.found().map(Vec::as_slice).unwrap_or_default();
    let spot_only: Vec<String> = pools
        .iter()
        .filter(|p| {
            p.metadata.name.as_ref().is_some_and(|n| spot.contains(n))
                && !crate::plan::capacity::allows_capacity_type(p, "on-demand")
        })
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    if spot_only.is_empty() {
        "launching on-demand instead".to_owned()
    } else if spot_only.len() == spot.len() {
        format!(
            "while the Pods of NodePool {} (spot only) wait",
            crate::wording::list_bounded(&spot_only, 3)
        )
    } else {
        format!(
            "launching on-demand instead, except for NodePool {} (spot only), whose Pods wait",
            crate::wording::list_bounded(&spot_only, 3)
        )
    }
}

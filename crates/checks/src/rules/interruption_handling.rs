//! `InterruptionHandlingReady`: when Karpenter is given an interruption queue, the setting is a
//! queue name, the queue exists, EventBridge may send to it (its policy, and its SSE-KMS key),
//! and enabled EventBridge rules route every event kind this class's nodes can get to it (kinds
//! they cannot get yet are warnings). Without a queue, spot NodePools get a warning. Pure: no IO.
//!
//! Sources: aws/karpenter-provider-aws `pkg/operator/options/options.go` (`--interruption-queue`,
//! `INTERRUPTION_QUEUE`), `pkg/providers/sqs/sqs.go` (`GetQueueUrl` by `QueueName`),
//! `pkg/controllers/interruption/messages/*/parser.go` (the event kinds; capacity-reservation
//! interruptions since v1.10.0, #9019) and the getting-started `cloudformation.yaml`
//! (`KarpenterInterruptionQueuePolicy` and the rules); the failure class: kubernetes-sigs/karpenter
//! #1799 #2490, aws/karpenter-provider-aws #3185 #3796 #6024.

mod event_rules;
mod queue_access;

use crate::facts::{Observed, Setting};
use crate::plan::Context;
use crate::plan::capacity::allows_spot;
use crate::plan::request::queue_name;
use crate::verdict::{Check, Outcome, Rule, Why};
use crate::warnings::Warning;
use crate::{clip, wording::list_bounded};
pub use event_rules::{EVENT_KINDS, EventKind, Need};
use karpenter_health_api::{ConditionType, Reason, SubjectRef};

/// The last part of an ARN or URL: the name to use instead.
fn name_in(setting: &str) -> &str {
    let s = setting.trim().trim_end_matches('/');
    s.rsplit([':', '/']).next().unwrap_or(s)
}

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::InterruptionHandlingReady, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(
        ConditionType::InterruptionHandlingReady,
        "interruption-queue",
    );
    let karpenter = match &ctx.facts.cluster.karpenter {
        Observed::Found(k) => k,
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved("The Karpenter controller's settings", u));
            return c.finish(Reason::InterruptionHandlingDisabled, "");
        }
        Observed::Absent => {
            c.unknown(Why::new(
                Reason::NotObserved,
                "No Karpenter controller was found, so its interruption queue is unknown.",
            ));
            return c.finish(Reason::InterruptionHandlingDisabled, "");
        }
    };
    let setting = match &karpenter.interruption_queue {
        Setting::Unset => {
            no_queue(ctx, &mut c);
            return c.finish(
                Reason::InterruptionHandlingDisabled,
                "Karpenter has no interruption queue configured.",
            );
        }
        Setting::Unresolved(how) => {
            c.unknown(Why::new(
                Reason::NotObserved,
                format!(
                    "Karpenter's interruption queue is set {}, which the operator does not resolve.",
                    clip(how, 128)
                ),
            ));
            return c.finish(Reason::InterruptionHandlingDisabled, "");
        }
        Setting::Value(v) => v,
    };
    let subjects = vec![
        ctx.node_class_subject(),
        SubjectRef::new("SQSQueue", clip(setting, 256)),
    ];
    if let Err(kind) = queue_name(setting) {
        c.fail(
            Reason::InterruptionQueueNotAName,
            format!(
                "Karpenter's interruption queue is set to {kind}, {:?}; Karpenter looks it up as \
                 a queue name, so it handles no interruption. Set it to {:?}.",
                clip(setting, 256),
                clip(name_in(setting), 80)
            ),
            subjects,
        );
        return c.finish(Reason::InterruptionHandlingConfigured, "");
    }
    let Some(queue) = interruption_queue(ctx, &mut c, setting, &subjects) else {
        return c.finish(Reason::InterruptionHandlingConfigured, "");
    };
    let version = ctx.version.as_ref().ok();
    let (rules, delivered) = event_rules::check_rules(ctx, &mut c, queue, version, &subjects);
    queue_access::check_policy(ctx, &mut c, queue, &rules, &subjects);
    queue_access::check_key(ctx, &mut c, queue, &rules, &subjects);
    let routes = if delivered.is_empty() {
        "no enabled rule routes any event to it yet".to_owned()
    } else {
        format!("enabled rules route {} to it", delivered.join(", "))
    };
    c.finish(
        Reason::InterruptionHandlingConfigured,
        format!(
            "Queue {} accepts EventBridge's messages, and {routes}.",
            clip(&queue.arn, 256)
        ),
    )
}

/// The interruption queue SQS answered for `setting`; `None` (and the finding why) when it was
/// not looked up, is not known or does not exist.
fn interruption_queue<'a>(
    ctx: &Context<'a>,
    c: &mut Check,
    setting: &str,
    subjects: &[SubjectRef],
) -> Option<&'a crate::facts::QueueFacts> {
    match &ctx.facts.aws.interruption_queue {
        None => {
            c.unknown(Why::new(
                Reason::NotObserved,
                format!("Queue {} has not been looked up yet.", clip(setting, 80)),
            ));
            None
        }
        Some(Observed::Unknown(u)) => {
            c.unknown(Why::unobserved(
                &format!("Interruption queue {}", clip(setting, 80)),
                u,
            ));
            None
        }
        Some(Observed::Absent) => {
            c.fail(
                Reason::InterruptionQueueNotFound,
                format!(
                    "SQS has no queue {:?} in {}, so Karpenter handles no interruption.",
                    clip(setting, 80),
                    ctx.facts.aws.region.as_deref().unwrap_or("this region")
                ),
                subjects.to_vec(),
            );
            None
        }
        Some(Observed::Found(q)) => Some(q),
    }
}

/// No queue: a warning when spot is allowed, since its interruptions then go unhandled.
fn no_queue(ctx: &Context, c: &mut Check) {
    let Observed::Found(pools) = &ctx.facts.cluster.node_pools else {
        return;
    };
    let mut spot: Vec<String> = pools
        .iter()
        .filter(|p| allows_spot(p))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    if spot.is_empty() {
        return;
    }
    spot.sort();
    let mut subjects = vec![ctx.node_class_subject()];
    subjects.extend(spot.iter().take(5).map(|p| SubjectRef::new("NodePool", p)));
    c.warn(
        Warning::SpotWithoutInterruptionHandling,
        format!(
            "NodePool {} allows spot, but Karpenter has no interruption queue: spot \
             interruptions, rebalance recommendations and scheduled maintenance are not handled, \
             so nodes vanish without draining.",
            list_bounded(&spot, 3)
        ),
        subjects,
    );
}

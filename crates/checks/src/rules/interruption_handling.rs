//! `InterruptionHandlingReady`: when Karpenter is given an interruption queue, the setting is a
//! queue name, the queue exists, its policy lets EventBridge send to it, and enabled EventBridge
//! rules route every event kind Karpenter handles to it. Without a queue, spot NodePools get a
//! warning. Pure: no IO.
//!
//! Sources: aws/karpenter-provider-aws `pkg/operator/options/options.go` (`--interruption-queue`,
//! `INTERRUPTION_QUEUE`), `pkg/providers/sqs/sqs.go` (`GetQueueUrl` by `QueueName`),
//! `pkg/controllers/interruption/messages/*/parser.go` (the event kinds; capacity-reservation
//! interruptions since v1.10.0, #9019) and the getting-started `cloudformation.yaml`
//! (`KarpenterInterruptionQueuePolicy` and the rules); the failure class: kubernetes-sigs/karpenter
//! #1799 #2490, aws/karpenter-provider-aws #3185 #3796 #6024.

use super::spot_ready::allows_spot;
use super::{Check, Context, Outcome, Why};
use crate::facts::{EventRuleFacts, Observed, QueueFacts, Setting};
use crate::iam_policy::{self, Decision, Named, Principal, Request, RequestContext};
use crate::warnings::Warning;
use crate::{clip, rules::list_bounded};
use karpenter_health_api::{ConditionType, Reason, SubjectRef};
use semver::Version;
use serde_json::Value;

/// One kind of event Karpenter's interruption controller handles.
#[derive(Clone, Copy, Debug)]
pub struct EventKind {
    pub what: &'static str,
    pub source: &'static str,
    pub detail_type: &'static str,
    /// The first Karpenter version that handles it.
    pub since: Option<(u64, u64)>,
}

pub const EVENT_KINDS: [EventKind; 5] = [
    EventKind {
        what: "spot interruption warnings",
        source: "aws.ec2",
        detail_type: "EC2 Spot Instance Interruption Warning",
        since: None,
    },
    EventKind {
        what: "rebalance recommendations",
        source: "aws.ec2",
        detail_type: "EC2 Instance Rebalance Recommendation",
        since: None,
    },
    EventKind {
        what: "instance state changes",
        source: "aws.ec2",
        detail_type: "EC2 Instance State-change Notification",
        since: None,
    },
    EventKind {
        what: "scheduled changes",
        source: "aws.health",
        detail_type: "AWS Health Event",
        since: None,
    },
    EventKind {
        what: "capacity-reservation interruptions",
        source: "aws.ec2",
        detail_type: "EC2 Capacity Reservation Instance Interruption Warning",
        since: Some((1, 10)),
    },
];

/// The queue name Karpenter would look up, or why the setting is not one.
pub fn queue_name(setting: &str) -> Result<&str, &'static str> {
    let s = setting.trim();
    if s.starts_with("arn:") {
        return Err("an ARN");
    }
    if s.contains("://") {
        return Err("a URL");
    }
    Ok(s)
}

/// The last part of an ARN or URL: the name to use instead.
fn name_in(setting: &str) -> &str {
    let s = setting.trim().trim_end_matches('/');
    s.rsplit([':', '/']).next().unwrap_or(s)
}

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
    let queue = match &ctx.facts.aws.interruption_queue {
        None => {
            c.unknown(Why::new(
                Reason::NotObserved,
                format!("Queue {} has not been looked up yet.", clip(setting, 80)),
            ));
            return c.finish(Reason::InterruptionHandlingConfigured, "");
        }
        Some(Observed::Unknown(u)) => {
            c.unknown(Why::unobserved(
                &format!("Interruption queue {}", clip(setting, 80)),
                u,
            ));
            return c.finish(Reason::InterruptionHandlingConfigured, "");
        }
        Some(Observed::Absent) => {
            c.fail(
                Reason::InterruptionQueueNotFound,
                format!(
                    "SQS has no queue {:?} in {}, so Karpenter handles no interruption.",
                    clip(setting, 80),
                    ctx.facts.aws.region.as_deref().unwrap_or("this region")
                ),
                subjects,
            );
            return c.finish(Reason::InterruptionHandlingConfigured, "");
        }
        Some(Observed::Found(q)) => q,
    };
    let version = ctx.version.as_ref().ok();
    let rules = check_rules(&mut c, queue, version, &subjects);
    check_policy(ctx, &mut c, queue, &rules, &subjects);
    c.finish(
        Reason::InterruptionHandlingConfigured,
        format!(
            "Queue {} accepts EventBridge's messages, and enabled rules route {} to it.",
            clip(&queue.arn, 256),
            wanted_kinds(version)
                .map(|k| k.what)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
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

fn wanted_kinds(version: Option<&Version>) -> impl Iterator<Item = &'static EventKind> {
    let version = version.cloned();
    EVENT_KINDS
        .iter()
        .filter(move |k| match (k.since, &version) {
            (None, _) => true,
            (Some((major, minor)), Some(v)) => (v.major, v.minor) >= (major, minor),
            // Unknown version: only what every version handles is required.
            (Some(_), None) => false,
        })
}

/// Whether an event pattern routes this kind of event: `None` when it cannot be told (content
/// filters such as `prefix`).
fn pattern_covers(pattern: &Value, kind: &EventKind) -> Option<bool> {
    let field = |name: &str, want: &str| -> Option<bool> {
        match pattern.get(name) {
            None => Some(true),
            Some(Value::Array(values)) => {
                if values.iter().any(|v| v.as_str() == Some(want)) {
                    Some(true)
                } else if values.iter().all(Value::is_string) {
                    Some(false)
                } else {
                    None
                }
            }
            Some(Value::String(s)) => Some(s == want),
            Some(_) => None,
        }
    };
    match (
        field("source", kind.source),
        field("detail-type", kind.detail_type),
    ) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

/// Checks the rules; returns the enabled rules that route a wanted kind.
fn check_rules<'q>(
    c: &mut Check,
    queue: &'q QueueFacts,
    version: Option<&Version>,
    subjects: &[SubjectRef],
) -> Vec<&'q EventRuleFacts> {
    let rules: &[EventRuleFacts] = match &queue.rules {
        Observed::Found(rules) => rules,
        Observed::Absent => &[],
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved(
                &format!("The EventBridge rules targeting {}", clip(&queue.arn, 256)),
                u,
            ));
            return Vec::new();
        }
    };
    let enabled: Vec<(&EventRuleFacts, Option<Value>)> = rules
        .iter()
        .filter(|r| r.state.eq_ignore_ascii_case("ENABLED"))
        .map(|r| {
            let pattern = r
                .event_pattern
                .as_deref()
                .and_then(|p| serde_json::from_str(p).ok());
            (r, pattern)
        })
        .collect();
    let mut missing = Vec::new();
    let mut undecided = Vec::new();
    let mut feeding = Vec::new();
    for kind in wanted_kinds(version) {
        let answers: Vec<(&EventRuleFacts, Option<bool>)> = enabled
            .iter()
            .map(|(r, p)| (*r, p.as_ref().and_then(|p| pattern_covers(p, kind))))
            .collect();
        let covering: Vec<&EventRuleFacts> = answers
            .iter()
            .filter(|(_, a)| *a == Some(true))
            .map(|(r, _)| *r)
            .collect();
        if !covering.is_empty() {
            feeding.extend(covering);
        } else if answers.iter().any(|(_, a)| a.is_none()) {
            undecided.push(kind.what);
        } else {
            missing.push(kind.what);
        }
    }
    if !missing.is_empty() {
        c.fail(
            Reason::InterruptionRulesMissing,
            format!(
                "No enabled EventBridge rule sends {} to queue {}, so Karpenter never hears of \
                 them ({} enabled rule(s) target it).",
                missing.join(", "),
                clip(&queue.arn, 256),
                enabled.len()
            ),
            subjects.to_vec(),
        );
    } else if !undecided.is_empty() {
        c.unknown(Why::new(
            Reason::PolicyUndecided,
            format!(
                "Whether the rules targeting {} route {} cannot be told from their event \
                 patterns (content filters).",
                clip(&queue.arn, 256),
                undecided.join(", ")
            ),
        ));
    }
    feeding.sort_by(|a, b| a.arn.cmp(&b.arn));
    feeding.dedup_by(|a, b| a.arn == b.arn);
    feeding
}

fn check_policy(
    ctx: &Context,
    c: &mut Check,
    queue: &QueueFacts,
    rules: &[&EventRuleFacts],
    subjects: &[SubjectRef],
) {
    let Some(document) = queue.policy.as_deref().filter(|d| !d.trim().is_empty()) else {
        c.fail(
            Reason::InterruptionQueuePolicyMissing,
            format!(
                "Queue {} has no policy, so EventBridge may not send it messages.",
                clip(&queue.arn, 256)
            ),
            subjects.to_vec(),
        );
        return;
    };
    let policy = match iam_policy::parse(document) {
        Ok(p) => p,
        Err(e) => {
            c.fail(
                Reason::InterruptionQueuePolicyMissing,
                format!(
                    "The policy of queue {} cannot be read ({e}), so it grants EventBridge nothing.",
                    clip(&queue.arn, 256)
                ),
                subjects.to_vec(),
            );
            return;
        }
    };
    let account = ctx.facts.aws.account.found().map(|a| a.account_id.clone());
    let ask = |service: &str, source_arn: Option<&str>| {
        let mut context = RequestContext::new().with_value("aws:SecureTransport", "true");
        if let Some(account) = &account {
            context = context.with_value("aws:SourceAccount", account);
        }
        if let Some(arn) = source_arn {
            context = context.with_value("aws:SourceArn", arn);
        }
        let principal = Principal::Service(service.to_owned());
        iam_policy::evaluate(
            &[Named {
                name: "the queue policy",
                policy: &policy,
            }],
            &Request {
                principal: Some(&principal),
                action: "sqs:SendMessage",
                resource: &queue.arn,
                context: &context,
            },
        )
    };
    // EventBridge sends on behalf of each rule: ask for each rule that feeds the queue.
    let sources: Vec<Option<&str>> = if rules.is_empty() {
        vec![None]
    } else {
        rules.iter().map(|r| Some(r.arn.as_str())).collect()
    };
    let events: Vec<Decision> = sources
        .iter()
        .map(|s| ask("events.amazonaws.com", *s))
        .collect();
    if let Some(denied) = events
        .iter()
        .find(|d| matches!(d, Decision::ImplicitDeny | Decision::ExplicitDeny(_)))
    {
        let how = match denied {
            Decision::ExplicitDeny(by) => format!(
                "denies it ({})",
                by.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => "does not allow it".to_owned(),
        };
        c.fail(
            Reason::InterruptionQueuePolicyMissing,
            format!(
                "The policy of queue {} {how}: events.amazonaws.com may not sqs:SendMessage, so \
                 EventBridge's interruption events never arrive.",
                clip(&queue.arn, 256)
            ),
            subjects.to_vec(),
        );
    } else if let Some(Decision::Undecided(why)) =
        events.iter().find(|d| matches!(d, Decision::Undecided(_)))
    {
        c.unknown(Why::new(
            Reason::PolicyUndecided,
            format!(
                "Whether the policy of queue {} lets events.amazonaws.com send cannot be decided: {}.",
                clip(&queue.arn, 256),
                clip(&list_bounded(why, 2), 512)
            ),
        ));
    }
    if !ask("sqs.amazonaws.com", None).is_allowed() && !c.has_failed() {
        c.warn(
            Warning::InterruptionQueuePolicyWithoutSqs,
            format!(
                "The policy of queue {} does not let sqs.amazonaws.com send messages, as \
                 Karpenter's template does.",
                clip(&queue.arn, 256)
            ),
            subjects.to_vec(),
        );
    }
}

//! Whether EventBridge can put messages on the interruption queue: the queue policy must let
//! `events.amazonaws.com` `sqs:SendMessage` for each rule that feeds it, and a queue encrypted with
//! SSE-KMS needs a key EventBridge may use. Pure: no IO.
//!
//! EventBridge User Guide, "Amazon SQS permissions" and "Encrypting events delivered to SQS": a
//! queue encrypted with the AWS managed key `alias/aws/sqs` cannot receive EventBridge's events
//! (its policy cannot be changed to admit the service); a customer managed key's policy must allow
//! `events.amazonaws.com` `kms:GenerateDataKey` and `kms:Decrypt`. The events are dropped
//! silently otherwise.

use crate::clip;
use crate::facts::{EventRuleFacts, KmsKeyFacts, Observed, QueueFacts};
use crate::iam_policy::{self, Decision, Named, Principal, Request, RequestContext};
use crate::plan::Context;
use crate::verdict::{Check, Why};
use crate::warnings::Warning;
use crate::wording::list_bounded;
use karpenter_health_api::{Reason, SubjectRef};

const EVENTS: &str = "events.amazonaws.com";
/// What EventBridge does with the queue's key when it sends (SQS calls them on its behalf).
const KEY_ACTIONS: [&str; 2] = ["kms:GenerateDataKey", "kms:Decrypt"];

/// The account's id, when known, for `aws:SourceAccount`.
fn account(ctx: &Context) -> Option<String> {
    ctx.facts.aws.account.found().map(|a| a.account_id.clone())
}

/// What a service principal asking on behalf of `source_arn` carries.
fn service_context(account: Option<&str>, source_arn: Option<&str>) -> RequestContext {
    let mut context = RequestContext::new().with_value("aws:SecureTransport", "true");
    if let Some(account) = account {
        context = context.with_value("aws:SourceAccount", account);
    }
    if let Some(arn) = source_arn {
        context = context.with_value("aws:SourceArn", arn);
    }
    context
}

fn denial_text(decision: &Decision) -> String {
    match decision {
        Decision::ExplicitDeny(by) => format!(
            "denies it ({})",
            by.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => "does not allow it".to_owned(),
    }
}

/// The queue policy: `events.amazonaws.com` may send for every rule that feeds the queue.
pub fn check_policy(
    ctx: &Context,
    c: &mut Check,
    queue: &QueueFacts,
    rules: &[&EventRuleFacts],
    subjects: &[SubjectRef],
) {
    let Some(policy) = queue_policy(c, queue, subjects) else {
        return;
    };
    let account = account(ctx);
    let ask = |service: &str, source_arn: Option<&str>| {
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
                context: &service_context(account.as_deref(), source_arn),
            },
        )
    };
    // EventBridge sends on behalf of each rule: ask for each rule that feeds the queue.
    let sources: Vec<Option<&str>> = if rules.is_empty() {
        vec![None]
    } else {
        rules.iter().map(|r| Some(r.arn.as_str())).collect()
    };
    let events: Vec<Decision> = sources.iter().map(|s| ask(EVENTS, *s)).collect();
    if let Some(denied) = events
        .iter()
        .find(|d| matches!(d, Decision::ImplicitDeny | Decision::ExplicitDeny(_)))
    {
        c.fail(
            Reason::InterruptionQueuePolicyMissing,
            format!(
                "The policy of queue {} {}: events.amazonaws.com may not sqs:SendMessage, so \
                 EventBridge's interruption events never arrive.",
                clip(&queue.arn, 256),
                denial_text(denied)
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

/// The queue's policy parsed; False (and `None`) when it has none or it cannot be read.
fn queue_policy(
    c: &mut Check,
    queue: &QueueFacts,
    subjects: &[SubjectRef],
) -> Option<iam_policy::Policy> {
    let Some(document) = queue.policy.as_deref().filter(|d| !d.trim().is_empty()) else {
        c.fail(
            Reason::InterruptionQueuePolicyMissing,
            format!(
                "Queue {} has no policy, so EventBridge may not send it messages.",
                clip(&queue.arn, 256)
            ),
            subjects.to_vec(),
        );
        return None;
    };
    match iam_policy::parse(document) {
        Ok(p) => Some(p),
        Err(e) => {
            c.fail(
                Reason::InterruptionQueuePolicyMissing,
                format!(
                    "The policy of queue {} cannot be read ({e}), so it grants EventBridge nothing.",
                    clip(&queue.arn, 256)
                ),
                subjects.to_vec(),
            );
            None
        }
    }
}

/// Whether `key` names the AWS managed key for SQS (`alias/aws/sqs`, as a name or an alias ARN).
fn is_aws_managed_sqs_alias(key: &str) -> bool {
    let key = key.trim();
    key == "alias/aws/sqs" || key.ends_with(":alias/aws/sqs")
}

/// The queue's SSE-KMS key, when it has one: EventBridge must be able to use it.
pub fn check_key(
    ctx: &Context,
    c: &mut Check,
    queue: &QueueFacts,
    rules: &[&EventRuleFacts],
    subjects: &[SubjectRef],
) {
    let Some(reference) = queue.kms_master_key_id.as_deref() else {
        return;
    };
    let shown = clip(reference, 256);
    let queue_arn = clip(&queue.arn, 256);
    let unusable = |c: &mut Check, why: String| {
        c.fail(
            Reason::InterruptionQueueKeyUnusable,
            format!(
                "Queue {queue_arn} is encrypted with KMS key {shown}, {why}, so EventBridge drops \
                 every interruption event it sends."
            ),
            subjects.to_vec(),
        );
    };
    if is_aws_managed_sqs_alias(reference) {
        unusable(
            c,
            "the AWS managed key for SQS, whose key policy EventBridge may not use".into(),
        );
        return;
    }
    let key = match &queue.kms_key {
        None => {
            c.unknown(Why::new(
                Reason::NotObserved,
                format!("The interruption queue's KMS key {shown} has not been looked up yet."),
            ));
            return;
        }
        Some(Observed::Unknown(u)) => {
            c.unknown(Why::unobserved(
                &format!("The interruption queue's KMS key {shown}"),
                u,
            ));
            return;
        }
        Some(Observed::Absent) => {
            unusable(c, "which does not exist".into());
            return;
        }
        Some(Observed::Found(key)) => key,
    };
    if key.manager.eq_ignore_ascii_case("AWS") {
        unusable(
            c,
            format!(
                "an AWS managed key ({}) whose key policy EventBridge may not use",
                clip(&key.arn, 256)
            ),
        );
        return;
    }
    match key.state.as_str() {
        "Enabled" => {}
        "Disabled" | "PendingDeletion" | "PendingReplicaDeletion" => {
            unusable(c, format!("which is {}", key.state));
            return;
        }
        other => {
            c.unknown(Why::new(
                Reason::PolicyUndecided,
                format!(
                    "The interruption queue's KMS key {} is {}, so whether EventBridge can use \
                     it is not decided.",
                    clip(&key.arn, 256),
                    clip(other, 64)
                ),
            ));
            return;
        }
    }
    check_key_policy(ctx, c, key, rules, &unusable);
}

fn check_key_policy(
    ctx: &Context,
    c: &mut Check,
    key: &KmsKeyFacts,
    rules: &[&EventRuleFacts],
    unusable: &dyn Fn(&mut Check, String),
) {
    let Some(policy) = key_policy(c, key, unusable) else {
        return;
    };
    let account = account(ctx);
    let principal = Principal::Service(EVENTS.to_owned());
    let sources: Vec<Option<&str>> = if rules.is_empty() {
        vec![None]
    } else {
        rules.iter().map(|r| Some(r.arn.as_str())).collect()
    };
    let mut undecided = Vec::new();
    for action in KEY_ACTIONS {
        for source in &sources {
            let context = service_context(account.as_deref(), *source);
            let decision = iam_policy::evaluate(
                &[Named {
                    name: "the key policy",
                    policy: &policy,
                }],
                &Request {
                    principal: Some(&principal),
                    action,
                    resource: &key.arn,
                    context: &context,
                },
            );
            match decision {
                Decision::Allowed(_) => {}
                Decision::Undecided(why) => undecided.extend(why),
                Decision::ExplicitDeny(by) => {
                    let by: Vec<String> = by.iter().map(ToString::to_string).collect();
                    unusable(
                        c,
                        format!(
                            "whose key policy denies events.amazonaws.com {action} ({})",
                            by.join(", ")
                        ),
                    );
                    return;
                }
                Decision::ImplicitDeny => {
                    unusable(
                        c,
                        format!("whose key policy does not allow events.amazonaws.com {action}"),
                    );
                    return;
                }
            }
        }
    }
    if !undecided.is_empty() {
        c.unknown(Why::new(
            Reason::PolicyUndecided,
            format!(
                "Whether the key policy of {} lets events.amazonaws.com use the key cannot be \
                 decided: {}.",
                clip(&key.arn, 256),
                clip(&list_bounded(&undecided, 2), 512)
            ),
        ));
    }
}

/// The key's policy parsed; `None` (and the finding why) when it has none, is not known or
/// cannot be read.
fn key_policy(
    c: &mut Check,
    key: &KmsKeyFacts,
    unusable: &dyn Fn(&mut Check, String),
) -> Option<iam_policy::Policy> {
    let document = match &key.policy {
        Observed::Found(d) => d,
        Observed::Absent => {
            unusable(c, "which has no key policy".into());
            return None;
        }
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved(
                &format!(
                    "The key policy of the interruption queue's KMS key {}",
                    clip(&key.arn, 256)
                ),
                u,
            ));
            return None;
        }
    };
    match iam_policy::parse(document) {
        Ok(p) => Some(p),
        Err(e) => {
            c.unknown(Why::new(
                Reason::PolicyUndecided,
                format!(
                    "The key policy of {} cannot be read ({e}).",
                    clip(&key.arn, 256)
                ),
            ));
            None
        }
    }
}

//! Scenarios of `InterruptionHandlingReady` on setups real accounts have: rules that cannot matter
//! yet for the class (the Terraform module's four rules under Karpenter 1.10+, no spot), rules on a
//! custom event bus, and queues encrypted with SSE-KMS. Pure.

use super::reasons::status;
use crate::facts::{EventRuleFacts, Facts, Observed, QueueFacts};
use crate::testing::*;
use karpenter_health_api::{ConditionType, KarpenterHealthStatus, Severity};

fn interruption(s: &KarpenterHealthStatus) -> (String, String, String) {
    let c = s
        .condition(ConditionType::InterruptionHandlingReady)
        .expect("present");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

fn warnings(s: &KarpenterHealthStatus) -> Vec<&str> {
    s.findings
        .iter()
        .filter(|f| f.severity == Severity::Warning)
        .map(|f| f.reason.as_str())
        .collect()
}

/// The healthy queue with only the rules whose names are listed.
fn queue_with_rules(keep: &[&str]) -> QueueFacts {
    let mut queue = healthy_queue();
    if let Observed::Found(rules) = &mut queue.rules {
        rules.retain(|r| keep.contains(&r.name.as_str()));
    }
    queue
}

fn with_queue(facts: Facts, queue: QueueFacts) -> Facts {
    facts.with_interruption_queue(QUEUE, Some(Observed::Found(queue)))
}

/// What `terraform-aws-modules/eks//modules/karpenter` creates: spot, rebalance, state change,
/// health; no capacity-reservation rule.
const TERRAFORM_RULES: [&str; 4] = ["spot", "rebalance", "state", "health"];

#[test]
fn the_terraform_modules_four_rules_on_karpenter_1_10_without_reservations_are_a_warning() {
    let facts = with_queue(
        Facts::healthy().with_karpenter_version("1.10.0"),
        queue_with_rules(&TERRAFORM_RULES),
    );
    let s = status(&facts);
    let (st, reason, message) = interruption(&s);
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("True", "InterruptionHandlingConfigured")
    );
    assert!(
        !message.contains("capacity-reservation"),
        "the True message claims what is not routed: {message}"
    );
    assert_eq!(warnings(&s), ["InterruptionRuleNotYetNeeded"]);
}

/// The class selects `reservations` (`(id, interruptible)`), as Karpenter reports them in
/// `status.capacityReservations`.
fn selecting(facts: Facts, reservations: &[(&str, Option<bool>)]) -> Facts {
    facts.with(|f| {
        f.cluster
            .node_class
            .spec
            .capacity_reservation_selector_terms = reservations
            .iter()
            .map(|(id, _)| serde_json::json!({"id": id}))
            .collect();
        if let Some(status) = f.cluster.node_class.status.as_mut() {
            status.capacity_reservations = reservations
                .iter()
                .map(|(id, interruptible)| {
                    karpenter_health_api::karpenter::ResolvedCapacityReservation {
                        id: (*id).into(),
                        availability_zone: "us-west-2a".into(),
                        instance_type: "m5.large".into(),
                        interruptible: *interruptible,
                        ..Default::default()
                    }
                })
                .collect();
        }
    })
}

#[test]
fn the_reservation_rule_is_needed_only_for_interruptible_reservations() {
    // EC2 warns of a reservation's interruption only for interruptible ones (Karpenter's
    // status.capacityReservations[].interruptible, aws/karpenter-provider-aws #9019).
    for (what, reservations) in [
        (
            "an ordinary reservation",
            vec![("cr-0123456789abcdef0", Some(false))],
        ),
        (
            "a reservation of a Karpenter that does not say",
            vec![("cr-0123456789abcdef0", None)],
        ),
    ] {
        let facts = with_queue(
            selecting(
                Facts::healthy().with_karpenter_version("1.10.0"),
                &reservations,
            ),
            queue_with_rules(&TERRAFORM_RULES),
        );
        let s = status(&facts);
        assert_eq!(interruption(&s).0, "True", "{what}");
        assert_eq!(warnings(&s), ["InterruptionRuleNotYetNeeded"], "{what}");
    }
    let facts = with_queue(
        selecting(
            Facts::healthy().with_karpenter_version("1.10.0"),
            &[("cr-0a", Some(false)), ("cr-0b", Some(true))],
        ),
        queue_with_rules(&TERRAFORM_RULES),
    );
    let (st, reason, message) = interruption(&status(&facts));
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "InterruptionRulesMissing")
    );
    assert!(
        message.contains("capacity-reservation interruptions"),
        "{message}"
    );
}

#[test]
fn reserved_capacity_needs_the_rule_only_where_a_node_pool_asks_for_interruptible_reservations() {
    let asking = |key: &'static str, values: &'static [&'static str]| {
        with_queue(
            Facts::healthy()
                .with_karpenter_version("1.10.0")
                .with(move |f| {
                    for pool in f.cluster.node_pools.found_mut().expect("pools") {
                        pool.spec.template.spec.requirements.push(
                            karpenter_health_api::karpenter::Requirement {
                                key: key.into(),
                                operator: "In".into(),
                                values: values.iter().map(|v| (*v).into()).collect(),
                                min_values: None,
                            },
                        );
                    }
                }),
            queue_with_rules(&TERRAFORM_RULES),
        )
    };
    // Reserved capacity alone: its reservations may all be ordinary ones.
    let s = status(&asking(
        "karpenter.sh/capacity-type",
        &["reserved", "on-demand"],
    ));
    assert_eq!(interruption(&s).0, "True");
    assert_eq!(warnings(&s), ["InterruptionRuleNotYetNeeded"]);
    let (st, reason, _) = interruption(&status(&asking(
        "karpenter.k8s.aws/capacity-reservation-interruptible",
        &["true"],
    )));
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "InterruptionRulesMissing")
    );
}

#[test]
fn karpenter_before_1_10_never_asks_for_the_capacity_reservation_rule() {
    let facts = with_queue(
        Facts::healthy().with_karpenter_version("1.9.2").with(|f| {
            f.cluster
                .node_class
                .spec
                .capacity_reservation_selector_terms =
                vec![serde_json::json!({"id": "cr-0123456789abcdef0"})];
        }),
        queue_with_rules(&TERRAFORM_RULES),
    );
    let s = status(&facts);
    assert_eq!(interruption(&s).0, "True");
    assert!(warnings(&s).is_empty(), "{:?}", warnings(&s));
}

#[test]
fn missing_spot_rules_are_a_warning_without_spot_and_a_failure_with_it() {
    let state_and_health = queue_with_rules(&["state", "health", "odcr"]);
    let on_demand = with_queue(Facts::healthy(), state_and_health.clone());
    let s = status(&on_demand);
    assert_eq!(interruption(&s).0, "True");
    assert_eq!(
        warnings(&s),
        [
            "InterruptionRuleNotYetNeeded",
            "InterruptionRuleNotYetNeeded"
        ]
    );

    let spot = with_queue(Facts::healthy().with_spot(None), state_and_health);
    let (st, reason, message) = interruption(&status(&spot));
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "InterruptionRulesMissing")
    );
    assert!(message.contains("spot interruption warnings"), "{message}");
    assert!(message.contains("rebalance recommendations"), "{message}");
}

#[test]
fn missing_spot_rules_with_node_pools_unobserved_are_unknown_not_false() {
    let facts = with_queue(
        Facts::healthy().with(|f| f.cluster.node_pools = Observed::not_observed("listing")),
        queue_with_rules(&["state", "health", "odcr"]),
    );
    let (st, reason, _) = interruption(&status(&facts));
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("Unknown", "PolicyUndecided")
    );
}

#[test]
fn the_always_needed_kinds_fail_whatever_the_node_pools() {
    let facts = with_queue(
        Facts::healthy(),
        queue_with_rules(&["spot", "rebalance", "odcr"]),
    );
    let (st, reason, message) = interruption(&status(&facts));
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "InterruptionRulesMissing")
    );
    assert!(message.contains("instance state changes"), "{message}");
    assert!(message.contains("scheduled changes"), "{message}");
}

/// Every rule of the healthy queue moved to the custom bus `karpenter`.
fn on_custom_bus() -> QueueFacts {
    let mut queue = healthy_queue();
    if let Observed::Found(rules) = &mut queue.rules {
        for r in rules {
            r.event_bus = "karpenter".into();
        }
    }
    queue
}

#[test]
fn rules_on_a_custom_bus_count_once_the_default_bus_forwards_to_it() {
    let unfed = with_queue(Facts::healthy(), on_custom_bus());
    let (st, reason, message) = interruption(&status(&unfed));
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("Unknown", "PolicyUndecided"),
        "a custom bus whose feed is not seen is never a missing rule: {message}"
    );
    assert!(message.contains("default bus only"), "{message}");

    let mut queue = on_custom_bus();
    queue.bus_forwarders.insert(
        "karpenter".into(),
        Observed::Found(vec![EventRuleFacts {
            name: "to-karpenter-bus".into(),
            arn: format!("arn:aws:events:{REGION}:{ACCOUNT}:rule/to-karpenter-bus"),
            state: "ENABLED".into(),
            event_pattern: Some(r#"{"source":["aws.ec2","aws.health"]}"#.into()),
            event_bus: "default".into(),
        }]),
    );
    let fed = with_queue(Facts::healthy(), queue);
    assert_eq!(
        interruption(&status(&fed)).1,
        "InterruptionHandlingConfigured"
    );
}

/// A customer key whose policy lets EventBridge use it, as the EventBridge guide shows.
fn key_for_eventbridge() -> String {
    format!(
        r#"{{"Statement":[{{"Effect":"Allow","Principal":{{"AWS":"arn:aws:iam::{ACCOUNT}:root"}},"Action":"kms:*","Resource":"*"}},{{"Effect":"Allow","Principal":{{"Service":"events.amazonaws.com"}},"Action":["kms:Decrypt","kms:GenerateDataKey"],"Resource":"*"}}]}}"#
    )
}

fn encrypted(policy: &str, state: &str) -> QueueFacts {
    QueueFacts {
        kms_master_key_id: Some("q-key".into()),
        kms_key: Some(Observed::Found(kms_key("q-key", state, policy))),
        ..healthy_queue()
    }
}

#[test]
fn an_sse_kms_queue_needs_a_key_eventbridge_may_use() {
    let usable = with_queue(
        Facts::healthy(),
        encrypted(&key_for_eventbridge(), "Enabled"),
    );
    assert_eq!(interruption(&status(&usable)).0, "True");

    let root_only = with_queue(
        Facts::healthy(),
        encrypted(&default_key_policy(), "Enabled"),
    );
    let (st, reason, message) = interruption(&status(&root_only));
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "InterruptionQueueKeyUnusable")
    );
    assert!(message.contains("events.amazonaws.com"), "{message}");

    let disabled = with_queue(
        Facts::healthy(),
        encrypted(&key_for_eventbridge(), "Disabled"),
    );
    assert_eq!(
        interruption(&status(&disabled)).1,
        "InterruptionQueueKeyUnusable"
    );

    let mut unreadable = encrypted(&key_for_eventbridge(), "Enabled");
    if let Some(Observed::Found(key)) = &mut unreadable.kms_key {
        key.policy = Observed::unknown(
            crate::facts::UnknownCause::AccessDenied,
            "kms:GetKeyPolicy denied",
        );
    }
    let (st, reason, _) = interruption(&status(&with_queue(Facts::healthy(), unreadable)));
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("Unknown", "AwsAccessDenied")
    );
}

#[test]
fn the_aws_managed_sqs_key_is_unusable_by_name_or_alias_arn() {
    for key in [
        "alias/aws/sqs",
        "arn:aws:kms:us-west-2:111122223333:alias/aws/sqs",
    ] {
        let queue = QueueFacts {
            kms_master_key_id: Some(key.into()),
            ..healthy_queue()
        };
        let (st, reason, _) = interruption(&status(&with_queue(Facts::healthy(), queue)));
        assert_eq!(
            (st.as_str(), reason.as_str()),
            ("False", "InterruptionQueueKeyUnusable"),
            "{key}"
        );
    }
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        a_queue_with_its_policy_and_every_rule_is_interruption_handling_configured:
            Facts::healthy().with_interruption_queue(QUEUE, Some(Observed::Found(healthy_queue())))
            => InterruptionHandlingReady is True because InterruptionHandlingConfigured;
        no_queue_is_interruption_handling_disabled:
            Facts::healthy() => InterruptionHandlingReady is True because InterruptionHandlingDisabled;
        a_queue_given_as_an_arn_is_interruption_queue_not_a_name:
            Facts::healthy().with_interruption_queue("arn:aws:sqs:us-west-2:111122223333:demo-interruptions", None)
            => InterruptionHandlingReady is False because InterruptionQueueNotAName;
        a_queue_sqs_does_not_have_is_interruption_queue_not_found:
            Facts::healthy().with_interruption_queue(QUEUE, Some(Observed::Absent))
            => InterruptionHandlingReady is False because InterruptionQueueNotFound;
        a_queue_without_a_policy_is_interruption_queue_policy_missing:
            Facts::healthy().with_interruption_queue(QUEUE, Some(Observed::Found(crate::facts::QueueFacts { policy: None, ..healthy_queue() })))
            => InterruptionHandlingReady is False because InterruptionQueuePolicyMissing;
        a_queue_encrypted_with_the_aws_managed_sqs_key_is_interruption_queue_key_unusable:
            Facts::healthy().with_interruption_queue(QUEUE, Some(Observed::Found(crate::facts::QueueFacts { kms_master_key_id: Some("alias/aws/sqs".into()), ..healthy_queue() })))
            => InterruptionHandlingReady is False because InterruptionQueueKeyUnusable;
        a_queue_without_rules_is_interruption_rules_missing:
            Facts::healthy().with_interruption_queue(QUEUE, Some(Observed::Found(crate::facts::QueueFacts { rules: Observed::Found(Vec::new()), ..healthy_queue() })))
            => InterruptionHandlingReady is False because InterruptionRulesMissing;
    }
}

//! Which interruption events this EC2NodeClass's nodes can produce, and whether enabled EventBridge
//! rules deliver each to the queue: from the default bus, or from a custom bus that a default-bus
//! rule forwards AWS's events to. Pure: no IO.
//!
//! AWS services put their events on the default event bus only (EventBridge User Guide, "Event
//! buses"); a rule on a custom bus sees them only when a default-bus rule (or another account)
//! forwards them there. A kind is required only when this class's nodes can be the subject of it:
//! spot interruptions and rebalance recommendations only for spot capacity, capacity-reservation
//! interruptions (Karpenter 1.10+, aws/karpenter-provider-aws #9019) only for interruptible
//! reservations: EC2 sends "EC2 Capacity Reservation Instance Interruption Warning" only for
//! instances in a reservation it may reclaim, which Karpenter marks `interruptible` in
//! `status.capacityReservations` and as the node label
//! `karpenter.k8s.aws/capacity-reservation-interruptible` (`pkg/apis/v1/labels.go`).
//! The Terraform `eks//modules/karpenter` module creates the four older rules, so a cluster it set
//! up without capacity reservations must not fail on the fifth.

use crate::clip;
use crate::facts::{EventRuleFacts, Observed, QueueFacts};
use crate::plan::Context;
use crate::plan::capacity::allows_spot;
use crate::verdict::{Check, Why};
use crate::warnings::Warning;
use crate::wording::list_bounded;
use karpenter_health_api::karpenter::NodePool;
use karpenter_health_api::{Reason, SubjectRef};
use semver::Version;
use serde_json::Value;

/// When a kind of event can concern this class's nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Always,
    /// Only spot instances are interrupted or get rebalance recommendations.
    Spot,
    /// Only instances in interruptible capacity reservations.
    Reserved,
}

/// One kind of event Karpenter's interruption controller handles.
#[derive(Clone, Copy, Debug)]
pub struct EventKind {
    pub what: &'static str,
    pub source: &'static str,
    pub detail_type: &'static str,
    /// The first Karpenter version that handles it.
    pub since: Option<(u64, u64)>,
    pub need: Need,
}

/// aws/karpenter-provider-aws `pkg/controllers/interruption/messages/*/parser.go`.
pub const EVENT_KINDS: [EventKind; 5] = [
    EventKind {
        what: "spot interruption warnings",
        source: "aws.ec2",
        detail_type: "EC2 Spot Instance Interruption Warning",
        since: None,
        need: Need::Spot,
    },
    EventKind {
        what: "rebalance recommendations",
        source: "aws.ec2",
        detail_type: "EC2 Instance Rebalance Recommendation",
        since: None,
        need: Need::Spot,
    },
    EventKind {
        what: "instance state changes",
        source: "aws.ec2",
        detail_type: "EC2 Instance State-change Notification",
        since: None,
        need: Need::Always,
    },
    EventKind {
        what: "scheduled changes",
        source: "aws.health",
        detail_type: "AWS Health Event",
        since: None,
        need: Need::Always,
    },
    EventKind {
        what: "capacity-reservation interruptions",
        source: "aws.ec2",
        detail_type: "EC2 Capacity Reservation Instance Interruption Warning",
        since: Some((1, 10)),
        need: Need::Reserved,
    },
];

/// The kinds this Karpenter version handles. With the version unknown, only what every version
/// handles.
pub fn handled_kinds(version: Option<&Version>) -> impl Iterator<Item = &'static EventKind> {
    let version = version.cloned();
    EVENT_KINDS
        .iter()
        .filter(move |k| match (k.since, &version) {
            (None, _) => true,
            (Some((major, minor)), Some(v)) => (v.major, v.minor) >= (major, minor),
            (Some(_), None) => false,
        })
}

/// The node label of instances in an interruptible reservation (aws/karpenter-provider-aws
/// `pkg/apis/v1/labels.go`).
const INTERRUPTIBLE: &str = "karpenter.k8s.aws/capacity-reservation-interruptible";

/// Whether a NodePool asks for interruptible reserved capacity (a requirement `In` listing
/// `true` on [`INTERRUPTIBLE`], or the template label).
fn asks_interruptible(pool: &NodePool) -> bool {
    let template = &pool.spec.template;
    if let Some(label) = template.metadata.labels.get(INTERRUPTIBLE) {
        return label == "true";
    }
    template.spec.requirements.iter().any(|r| {
        r.key == INTERRUPTIBLE && r.operator == "In" && r.values.iter().any(|v| v == "true")
    })
}

/// Whether this class's nodes can be the subject of `need`: `Ok(true/false)`, or why it cannot be
/// told (the NodePools were not observed).
fn needed(ctx: &Context, need: Need) -> Result<bool, Why> {
    let pools = || match &ctx.facts.cluster.node_pools {
        Observed::Found(pools) => Ok(pools.as_slice()),
        Observed::Absent => Ok(&[][..]),
        Observed::Unknown(u) => Err(Why::unobserved("The NodePools of this EC2NodeClass", u)),
    };
    match need {
        Need::Always => Ok(true),
        Need::Spot => Ok(pools()?.iter().any(allows_spot)),
        Need::Reserved => {
            let interruptible = ctx
                .facts
                .cluster
                .node_class
                .status
                .as_ref()
                .is_some_and(|s| {
                    s.capacity_reservations
                        .iter()
                        .any(|r| r.interruptible == Some(true))
                });
            Ok(interruptible || pools()?.iter().any(asks_interruptible))
        }
    }
}

/// What "not needed yet" means for a kind, for the warning.
fn before_use(need: Need) -> &'static str {
    match need {
        Need::Always => "",
        Need::Spot => "before a NodePool of this EC2NodeClass allows spot",
        Need::Reserved => {
            "before this EC2NodeClass selects an interruptible capacity reservation or a \
             NodePool asks for karpenter.k8s.aws/capacity-reservation-interruptible"
        }
    }
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

/// Whether any of `rules` (enabled ones only) routes `kind`: `Some(true)` with the rules that do,
/// `Some(false)`, or `None` when a content filter leaves it open.
fn routed<'r>(
    rules: impl IntoIterator<Item = &'r EventRuleFacts>,
    kind: &EventKind,
) -> (Option<bool>, Vec<&'r EventRuleFacts>) {
    let mut open = false;
    let mut covering = Vec::new();
    for rule in rules
        .into_iter()
        .filter(|r| r.state.eq_ignore_ascii_case("ENABLED"))
    {
        let pattern: Option<Value> = rule
            .event_pattern
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok());
        match pattern.as_ref().and_then(|p| pattern_covers(p, kind)) {
            Some(true) => covering.push(rule),
            Some(false) => {}
            None => open = true,
        }
    }
    let answer = match (covering.is_empty(), open) {
        (false, _) => Some(true),
        (true, true) => None,
        (true, false) => Some(false),
    };
    (answer, covering)
}

/// How one kind reaches the queue.
enum Delivery<'q> {
    /// By these enabled rules (the default bus's, or a forwarded custom bus's).
    Routed(Vec<&'q EventRuleFacts>),
    /// No enabled rule routes it.
    Missing,
    /// It cannot be told: a content filter, or a custom bus whose feed is not seen.
    Undecided(String),
}

/// Whether `kind` reaches the queue through `rules` (every bus's rules targeting it) and the
/// default-bus rules forwarding to each custom bus.
fn delivery<'q>(queue: &QueueFacts, rules: &'q [EventRuleFacts], kind: &EventKind) -> Delivery<'q> {
    let (from_default, by) = routed(rules.iter().filter(|r| r.on_default_bus()), kind);
    if from_default == Some(true) {
        return Delivery::Routed(by);
    }
    let mut undecided = from_default
        .is_none()
        .then(|| "a default-bus rule's event pattern has content filters".to_owned());
    let mut buses: Vec<&str> = rules
        .iter()
        .filter(|r| !r.on_default_bus())
        .map(|r| r.event_bus.as_str())
        .collect();
    buses.sort_unstable();
    buses.dedup();
    for bus in buses {
        let (answer, by) = routed(rules.iter().filter(|r| r.event_bus == bus), kind);
        if answer == Some(false) {
            continue;
        }
        let bus_name = clip(bus, 128);
        let fed = match queue.bus_forwarders.get(bus) {
            Some(Observed::Found(forwarders)) => routed(forwarders, kind).0,
            Some(Observed::Unknown(u)) => {
                undecided = Some(format!(
                    "rules on event bus {bus_name} route it, but the default bus's rules \
                     forwarding to that bus could not be read ({})",
                    clip(&u.detail, 256)
                ));
                continue;
            }
            Some(Observed::Absent) | None => Some(false),
        };
        match (answer, fed) {
            (Some(true), Some(true)) => return Delivery::Routed(by),
            (_, Some(false)) => {
                undecided = Some(format!(
                    "rules on event bus {bus_name} route it, but AWS services send their events \
                     to the default bus only and no enabled default-bus rule here forwards them \
                     to {bus_name} (one in another account may)"
                ));
            }
            _ => {
                undecided = Some(format!(
                    "rules on event bus {bus_name} may route it (content filters)"
                ));
            }
        }
    }
    match undecided {
        Some(why) => Delivery::Undecided(why),
        None => Delivery::Missing,
    }
}

/// Checks that every kind this class's nodes can produce reaches the queue; kinds that cannot
/// concern them yet are warnings when missing. Returns the enabled rules that deliver a kind, and
/// the kinds delivered (for the True message).
pub fn check_rules<'q>(
    ctx: &Context,
    c: &mut Check,
    queue: &'q QueueFacts,
    version: Option<&Version>,
    subjects: &[SubjectRef],
) -> (Vec<&'q EventRuleFacts>, Vec<&'static str>) {
    let rules: &[EventRuleFacts] = match &queue.rules {
        Observed::Found(rules) => rules,
        Observed::Absent => &[],
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved(
                &format!("The EventBridge rules targeting {}", clip(&queue.arn, 256)),
                u,
            ));
            return (Vec::new(), Vec::new());
        }
    };
    let mut missing = Vec::new();
    let mut not_yet: Vec<(&EventKind, &'static str)> = Vec::new();
    let mut undecided = Vec::new();
    let mut delivering = Vec::new();
    let mut delivered = Vec::new();
    for kind in handled_kinds(version) {
        match delivery(queue, rules, kind) {
            Delivery::Routed(by) => {
                delivering.extend(by);
                delivered.push(kind.what);
            }
            Delivery::Undecided(why) => undecided.push(format!("{} ({why})", kind.what)),
            Delivery::Missing => match needed(ctx, kind.need) {
                Ok(true) => missing.push(kind.what),
                Ok(false) => not_yet.push((kind, before_use(kind.need))),
                Err(why) => undecided.push(format!(
                    "{} (whether this EC2NodeClass's nodes can get them is unknown: {})",
                    kind.what,
                    why.message.trim_end_matches('.')
                )),
            },
        }
    }
    let enabled = rules
        .iter()
        .filter(|r| r.state.eq_ignore_ascii_case("ENABLED"))
        .count();
    if !missing.is_empty() {
        c.fail(
            Reason::InterruptionRulesMissing,
            format!(
                "No enabled EventBridge rule sends {} to queue {}, so Karpenter never hears of \
                 them for this EC2NodeClass's nodes ({enabled} enabled rule(s) target it).",
                missing.join(", "),
                clip(&queue.arn, 256),
            ),
            subjects.to_vec(),
        );
    }
    if !undecided.is_empty() {
        c.unknown(Why::new(
            Reason::PolicyUndecided,
            format!(
                "Whether {} reach queue {} cannot be told: {}.",
                if undecided.len() == 1 {
                    "this kind of event would"
                } else {
                    "these kinds of events would"
                },
                clip(&queue.arn, 256),
                clip(&list_bounded(&undecided, 3), 1024)
            ),
        ));
    }
    for (kind, when) in not_yet {
        c.warn(
            Warning::InterruptionRuleNotYetNeeded,
            format!(
                "No enabled EventBridge rule sends {} to queue {}; this EC2NodeClass's nodes \
                 cannot get them now, so add the rule {when}.",
                kind.what,
                clip(&queue.arn, 256)
            ),
            subjects.to_vec(),
        );
    }
    delivering.sort_by(|a, b| a.arn.cmp(&b.arn));
    delivering.dedup_by(|a, b| a.arn == b.arn);
    (delivering, delivered)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(bus: &str, pattern: &str) -> EventRuleFacts {
        EventRuleFacts {
            name: format!("r-{bus}"),
            arn: format!("arn:aws:events:us-west-2:111122223333:rule/{bus}/r"),
            state: "ENABLED".into(),
            event_pattern: Some(pattern.into()),
            event_bus: bus.into(),
        }
    }

    const STATE_CHANGE: &str =
        r#"{"source":["aws.ec2"],"detail-type":["EC2 Instance State-change Notification"]}"#;

    #[test]
    fn a_default_bus_rule_delivers() {
        let queue = QueueFacts::default();
        let rules = [rule("default", STATE_CHANGE)];
        assert!(matches!(
            delivery(&queue, &rules, &EVENT_KINDS[2]),
            Delivery::Routed(by) if by.len() == 1
        ));
        assert!(matches!(
            delivery(&queue, &rules, &EVENT_KINDS[0]),
            Delivery::Missing
        ));
    }

    #[test]
    fn a_custom_bus_rule_delivers_only_when_the_default_bus_forwards_to_it() {
        let rules = [rule("karpenter", STATE_CHANGE)];
        let mut queue = QueueFacts::default();
        // Nothing forwards AWS's events to the custom bus: not proven missing, not delivered.
        assert!(matches!(
            delivery(&queue, &rules, &EVENT_KINDS[2]),
            Delivery::Undecided(why) if why.contains("default bus only")
        ));
        queue.bus_forwarders.insert(
            "karpenter".into(),
            Observed::Found(vec![rule("default", r#"{"source":["aws.ec2"]}"#)]),
        );
        assert!(matches!(
            delivery(&queue, &rules, &EVENT_KINDS[2]),
            Delivery::Routed(by) if by[0].event_bus == "karpenter"
        ));
        // A kind the custom bus's rules do not route is missing, forwarder or not.
        assert!(matches!(
            delivery(&queue, &rules, &EVENT_KINDS[3]),
            Delivery::Missing
        ));
    }

    #[test]
    fn a_disabled_rule_delivers_nothing() {
        let queue = QueueFacts::default();
        let mut disabled = rule("default", STATE_CHANGE);
        disabled.state = "DISABLED".into();
        assert!(matches!(
            delivery(&queue, &[disabled], &EVENT_KINDS[2]),
            Delivery::Missing
        ));
    }
}

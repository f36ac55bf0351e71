//! Kubernetes Events on condition transitions. One Event per cause, not per class: the same
//! transition (condition, statuses, reason and message) made by several classes within one
//! window, as an aws-auth edit does on every class at once, is one Event naming them. Nothing on
//! unchanged re-checks. Transitions and their grouping are pure; publishing does IO.

use k8s_openapi::api::core::v1::ObjectReference;
use karpenter_health_api::{ConditionStatus, ConditionType, KarpenterHealthStatus, Reason};
use kube::runtime::events::{Event, EventType, Recorder};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long transitions are gathered before they are announced. The writes of one change land
/// within a few hundred milliseconds on every class (docs/benchmarks.md: the last of 20 classes
/// p99 250 to 900 ms after an aws-auth edit, storms included), so a change shared by every class
/// is one Event instead of one per class. An Event is a record for people; two seconds late
/// costs nothing, and the conditions themselves are written at once.
pub const EVENT_WINDOW: Duration = Duration::from_secs(2);

/// How many class names an aggregated Event lists before it says "and N more".
const NAMES_LISTED: usize = 5;

/// One condition whose status changed. Two equal transitions are the same cause: everything an
/// Event says about them is the same.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Transition {
    pub condition: String,
    pub from: ConditionStatus,
    pub to: ConditionStatus,
    pub reason: String,
    pub message: String,
}

/// The conditions whose status differs between `previous` and `next`. Leaving the initial
/// `Pending` state is not a transition worth an event: it happens once per object at start.
pub fn transitions(
    previous: Option<&KarpenterHealthStatus>,
    next: &KarpenterHealthStatus,
) -> Vec<Transition> {
    let Some(previous) = previous else {
        return Vec::new();
    };
    next.conditions
        .iter()
        .filter_map(|condition| {
            let before =
                ConditionType::parse(&condition.type_).and_then(|ty| previous.condition(ty))?;
            let (from, to) = (
                ConditionStatus::parse(&before.status),
                ConditionStatus::parse(&condition.status),
            );
            let was_pending = before.reason == Reason::Pending.as_str()
                || (condition.type_ == ConditionType::Ready.as_str()
                    && from == ConditionStatus::Unknown
                    && before.message.contains("not been evaluated"));
            (from != to && !was_pending).then(|| Transition {
                condition: condition.type_.clone(),
                from,
                to,
                reason: condition.reason.clone(),
                message: condition.message.clone(),
            })
        })
        .collect()
}

/// The transitions one written decision made for one class.
#[derive(Clone, Debug)]
pub struct ClassTransitions {
    pub class: String,
    pub health: ObjectReference,
    pub node_class: ObjectReference,
    pub transitions: Vec<Transition>,
}

/// One Event to publish: a transition and the classes that made it.
#[derive(Clone, Debug, PartialEq)]
pub struct Announcement {
    /// The KarpenterHealth the Event is about: the only class's, else the first class's by name
    /// (an Event has one object; the note names every class).
    pub regarding: ObjectReference,
    /// That class's EC2NodeClass, the Event's related object.
    pub related: ObjectReference,
    /// The classes that made the transition, sorted.
    pub classes: Vec<String>,
    pub transition: Transition,
}

/// One announcement per distinct transition in `batch`, whichever classes made it. Never more
/// announcements than transitions; a flip and back within the window is two.
pub fn group(batch: Vec<ClassTransitions>) -> Vec<Announcement> {
    // Classes by name under each transition, so the Event's object and its list of names do not
    // depend on which write landed first; announcements in the order the transitions came.
    let mut groups: BTreeMap<Transition, BTreeMap<String, (ObjectReference, ObjectReference)>> =
        BTreeMap::new();
    let mut order: Vec<Transition> = Vec::new();
    for made in batch {
        for transition in made.transitions {
            let classes = groups.entry(transition.clone()).or_insert_with(|| {
                order.push(transition);
                BTreeMap::new()
            });
            classes.insert(
                made.class.clone(),
                (made.health.clone(), made.node_class.clone()),
            );
        }
    }
    order
        .into_iter()
        .filter_map(|transition| {
            let classes = groups.remove(&transition)?;
            let (regarding, related) = classes.values().next()?.clone();
            Some(Announcement {
                regarding,
                related,
                classes: classes.into_keys().collect(),
                transition,
            })
        })
        .collect()
}

/// Publishes the announcements at once. Failures are logged, never fatal: Events are a courtesy.
pub async fn publish(recorder: &Recorder, announcements: &[Announcement]) {
    let publishes = announcements.iter().map(|announcement| async move {
        if let Err(error) = recorder
            .publish(&event_of(announcement), &announcement.regarding)
            .await
        {
            tracing::warn!(
                %error, reason = %announcement.transition.reason,
                classes = announcement.classes.len(), "could not publish event"
            );
        }
    });
    futures::future::join_all(publishes).await;
}

/// Events one object may get at once, and how soon one more is allowed after the budget is
/// spent: client-go's spam filter defaults (`defaultSpamBurst` 25, `defaultSpamQPS` 1/300 in
/// kubernetes `staging/src/k8s.io/client-go/tools/record/events_cache.go`), kept per
/// KarpenterHealth. A condition flapping on a broken input cannot flood the Event store.
pub const EVENT_BURST: f64 = 25.0;
pub const EVENT_REFILL: std::time::Duration = std::time::Duration::from_secs(300);

/// A token bucket of Events per object. Pure: time is passed in.
#[derive(Debug, Default)]
pub struct EventBudget {
    objects: std::collections::HashMap<String, (f64, std::time::Instant)>,
}

impl EventBudget {
    /// How many of `wanted` Events `object` may publish at `now`; takes them from its budget.
    pub fn take(&mut self, object: &str, wanted: usize, now: std::time::Instant) -> usize {
        let (tokens, at) = self
            .objects
            .entry(object.to_owned())
            .or_insert((EVENT_BURST, now));
        let refilled =
            now.saturating_duration_since(*at).as_secs_f64() / EVENT_REFILL.as_secs_f64();
        *tokens = (*tokens + refilled).min(EVENT_BURST);
        *at = now;
        let allowed = (tokens.floor() as usize).min(wanted);
        *tokens -= allowed as f64;
        allowed
    }
}

/// The Event of `announcement`: a Warning when the condition turned False.
fn event_of(announcement: &Announcement) -> Event {
    let transition = &announcement.transition;
    let type_ = if transition.to == ConditionStatus::False {
        EventType::Warning
    } else {
        EventType::Normal
    };
    let on = match announcement.classes.as_slice() {
        [_] => String::new(),
        classes => {
            let listed = classes[..classes.len().min(NAMES_LISTED)].join(", ");
            let more = classes.len().saturating_sub(NAMES_LISTED);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!(" on {} EC2NodeClasses ({listed}{more})", classes.len())
        }
    };
    let note = format!(
        "{} changed from {} to {}{on}: {}",
        transition.condition, transition.from, transition.to, transition.message
    );
    Event {
        type_,
        reason: transition.reason.clone(),
        // The Events API refuses a note over 1 kB.
        note: Some(note.chars().take(1000).collect()),
        action: "Evaluate".into(),
        secondary: Some(announcement.related.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn status_with(ty: ConditionType, status: &str, reason: &str) -> KarpenterHealthStatus {
        let mut s = KarpenterHealthStatus::pending(Time(jiff::Timestamp::UNIX_EPOCH), Some(1));
        for c in &mut s.conditions {
            if c.type_ == ty.as_str() {
                c.status = status.into();
                c.reason = reason.into();
            }
        }
        s
    }

    #[test]
    fn a_flapping_object_gets_a_burst_then_one_event_per_five_minutes() {
        let mut budget = EventBudget::default();
        let start = std::time::Instant::now();
        assert_eq!(budget.take("a", 20, start), 20);
        assert_eq!(budget.take("a", 20, start), 5, "the burst is 25");
        assert_eq!(budget.take("a", 1, start), 0);
        assert_eq!(
            budget.take("b", 1, start),
            1,
            "each object has its own budget"
        );
        assert_eq!(budget.take("a", 3, start + EVENT_REFILL), 1);
        assert_eq!(budget.take("a", 3, start + EVENT_REFILL * 3), 2);
        assert_eq!(
            budget.take("a", 30, start + EVENT_REFILL * 1000),
            25,
            "capped at the burst"
        );
    }

    #[test]
    fn a_status_change_is_one_transition_with_the_new_reason() {
        let before = status_with(
            ConditionType::NodeRoleMapped,
            "True",
            "NodeRoleMappedInAwsAuth",
        );
        let after = status_with(
            ConditionType::NodeRoleMapped,
            "False",
            "ControllerRoleMappedInstead",
        );
        let found = transitions(Some(&before), &after);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].reason, "ControllerRoleMappedInstead");
        assert_eq!(found[0].to, ConditionStatus::False);
    }

    #[test]
    fn unchanged_rechecks_and_leaving_pending_emit_nothing() {
        let same = status_with(
            ConditionType::NodeRoleMapped,
            "True",
            "NodeRoleMappedInAwsAuth",
        );
        assert!(transitions(Some(&same), &same).is_empty());
        let pending = KarpenterHealthStatus::pending(Time(jiff::Timestamp::UNIX_EPOCH), Some(1));
        assert!(transitions(Some(&pending), &same).is_empty());
        assert!(transitions(None, &same).is_empty());
    }

    fn health_of(class: &str) -> ObjectReference {
        ObjectReference {
            kind: Some("KarpenterHealth".into()),
            name: Some(class.into()),
            ..ObjectReference::default()
        }
    }

    fn made(class: &str, transitions: &[Transition]) -> ClassTransitions {
        ClassTransitions {
            class: class.into(),
            health: health_of(class),
            node_class: ObjectReference {
                kind: Some("EC2NodeClass".into()),
                name: Some(class.into()),
                ..ObjectReference::default()
            },
            transitions: transitions.to_vec(),
        }
    }

    fn turned(
        condition: ConditionType,
        to: ConditionStatus,
        reason: &str,
        message: &str,
    ) -> Transition {
        Transition {
            condition: condition.as_str().into(),
            from: if to == ConditionStatus::True {
                ConditionStatus::False
            } else {
                ConditionStatus::True
            },
            to,
            reason: reason.into(),
            message: message.into(),
        }
    }

    #[test]
    fn a_cause_every_class_shares_is_one_event_per_transition_naming_the_classes() {
        let mapped_off = turned(
            ConditionType::NodeRoleMapped,
            ConditionStatus::False,
            "ControllerRoleMappedInstead",
            "aws-auth maps the controller's role",
        );
        let ready_off = turned(
            ConditionType::Ready,
            ConditionStatus::False,
            "NodeRoleMapped",
            "NodeRoleMapped is False",
        );
        // Written in no particular order, as the writer's concurrent writes land.
        let batch: Vec<_> = (0..20)
            .rev()
            .map(|n| {
                made(
                    &format!("class-{n:02}"),
                    &[mapped_off.clone(), ready_off.clone()],
                )
            })
            .collect();
        let announced = group(batch);
        assert_eq!(announced.len(), 2, "{announced:#?}");
        assert_eq!(announced[0].transition, mapped_off);
        assert_eq!(announced[1].transition, ready_off);
        for a in &announced {
            assert_eq!(a.classes.len(), 20);
            assert_eq!(
                a.regarding.name.as_deref(),
                Some("class-00"),
                "the first class by name"
            );
            assert_eq!(a.related.kind.as_deref(), Some("EC2NodeClass"));
            assert_eq!(a.related.name.as_deref(), Some("class-00"));
        }
        let event = event_of(&announced[0]);
        assert_eq!(event.type_, EventType::Warning);
        assert_eq!(event.reason, "ControllerRoleMappedInstead");
        assert_eq!(
            event.note.as_deref(),
            Some(
                "NodeRoleMapped changed from True to False on 20 EC2NodeClasses (class-00, \
                 class-01, class-02, class-03, class-04 and 15 more): aws-auth maps the \
                 controller's role"
            )
        );
    }

    #[test]
    fn different_causes_stay_apart_and_one_class_is_named_as_before() {
        // Two node roles unmapped: two messages, two fixes, two Events.
        let role = |arn: &str| {
            turned(
                ConditionType::NodeRoleMapped,
                ConditionStatus::False,
                "NodeRoleNotMapped",
                arn,
            )
        };
        let announced = group(vec![
            made("a", &[role("role-a")]),
            made("b", &[role("role-b")]),
            made("c", &[role("role-a")]),
        ]);
        assert_eq!(announced.len(), 2);
        assert_eq!(announced[0].classes, ["a", "c"]);
        assert_eq!(announced[1].classes, ["b"]);
        assert_eq!(
            event_of(&announced[1]).note.as_deref(),
            Some("NodeRoleMapped changed from True to False: role-b"),
            "one class: the note of a single transition"
        );
    }

    #[test]
    fn never_more_events_than_transitions_and_a_flip_back_is_announced_in_order() {
        let off = turned(
            ConditionType::LabelsAllowed,
            ConditionStatus::False,
            "RestrictedLabel",
            "x",
        );
        let on = turned(
            ConditionType::LabelsAllowed,
            ConditionStatus::True,
            "LabelsAllowed",
            "y",
        );
        let batch = vec![
            made("a", std::slice::from_ref(&off)),
            made("a", std::slice::from_ref(&on)),
            made("b", std::slice::from_ref(&off)),
        ];
        let transitions: usize = batch.iter().map(|m| m.transitions.len()).sum();
        let announced = group(batch);
        assert!(announced.len() <= transitions);
        let order: Vec<_> = announced
            .iter()
            .map(|a| (&a.transition, a.classes.clone()))
            .collect();
        assert_eq!(
            order,
            [
                (&off, vec!["a".to_owned(), "b".to_owned()]),
                (&on, vec!["a".to_owned()])
            ]
        );
        assert_eq!(event_of(&announced[1]).type_, EventType::Normal);
        assert!(group(Vec::new()).is_empty());
    }
}

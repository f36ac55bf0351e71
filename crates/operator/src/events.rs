//! Kubernetes Events on condition transitions: one per condition whose status changed, with the
//! new reason, on the KarpenterHealth (and on the EC2NodeClass when it turned False). Nothing on
//! unchanged re-checks. The transition list is pure; publishing does IO.

use k8s_openapi::api::core::v1::ObjectReference;
use karpenter_health_api::{ConditionStatus, ConditionType, KarpenterHealthStatus, Reason};
use kube::runtime::events::{Event, EventType, Recorder};

/// One condition whose status changed.
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// Publishes one event per transition. Failures are logged, never fatal: events are a courtesy.
pub async fn publish(
    recorder: &Recorder,
    health: &ObjectReference,
    node_class: &ObjectReference,
    transitions: &[Transition],
) {
    // Every Event at once: published one after the other, the four Events of an aws-auth edit
    // (two transitions, two objects each) held the reconcile's slot for four API round trips.
    let publishes = transitions.iter().flat_map(|transition| {
        let targets: Vec<&ObjectReference> = if transition.to == ConditionStatus::False {
            vec![health, node_class]
        } else {
            vec![health]
        };
        targets.into_iter().map(move |target| async move {
            if let Err(error) = recorder.publish(&event_of(transition), target).await {
                tracing::warn!(%error, reason = %transition.reason, "could not publish event");
            }
        })
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

/// The Event announcing `transition`: a Warning when it turned False.
fn event_of(transition: &Transition) -> Event {
    let type_ = if transition.to == ConditionStatus::False {
        EventType::Warning
    } else {
        EventType::Normal
    };
    let note = format!(
        "{} changed from {} to {}: {}",
        transition.condition, transition.from, transition.to, transition.message
    );
    Event {
        type_,
        reason: transition.reason.clone(),
        note: Some(note.chars().take(1000).collect()),
        action: "Evaluate".into(),
        secondary: None,
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
}

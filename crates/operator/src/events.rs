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

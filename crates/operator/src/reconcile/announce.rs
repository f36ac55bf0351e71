//! Kubernetes Events on condition transitions. One Event per cause, not per class: the same
//! transition (condition, statuses, reason and message) made by several classes within one
//! window, as an aws-auth edit does on every class at once, is one Event listing them. Nothing
//! on unchanged re-checks. Transitions, their grouping and the Events are pure; publishing does
//! IO.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use karpenter_health_api::{ConditionStatus, ConditionType, KarpenterHealthStatus, Reason};
use kube::api::{Api, PostParams};
use kube::runtime::events::Reporter;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long transitions are gathered before they are announced. The writes of one change land
/// within a few hundred milliseconds on every class (docs/benchmarks.md: the last of 20 classes
/// p99 250 to 900 ms after an aws-auth edit, storms included), so a change shared by every class
/// is one Event instead of one per class. An Event is a record for people; two seconds late
/// costs nothing, and the conditions themselves are written at once.
pub const EVENT_WINDOW: Duration = Duration::from_secs(2);

/// How many class names an aggregated Event lists before it says "and N more", and how many
/// bytes of the note they may take (a name may have 253).
const NAMES_LISTED: usize = 5;
const NAMES_BYTES: usize = 320;

/// The Events API refuses a note over 1 kB (`NoteLengthLimit` in kubernetes
/// `pkg/apis/core/validation/events.go`), counted in bytes.
const NOTE_BYTES: usize = 1024;

/// Where Events about cluster-scoped objects (KarpenterHealths) are kept, as kube-runtime's and
/// client-go's recorders keep them.
const EVENT_NAMESPACE: &str = "default";

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

/// A class that made transitions: its name and the objects an Event about it refers to.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassRefs {
    pub name: String,
    pub health: ObjectReference,
    pub node_class: ObjectReference,
}

/// The transitions one written decision made for one class.
#[derive(Clone, Debug)]
pub struct ClassTransitions {
    pub class: ClassRefs,
    pub transitions: Vec<Transition>,
}

/// One Event to publish: a transition and the classes that made it.
#[derive(Clone, Debug, PartialEq)]
pub struct Announcement {
    /// The classes that made the transition, sorted by name. The Event is about one of them
    /// (the first whose Event budget is not spent), its note lists them.
    pub classes: Vec<ClassRefs>,
    pub transition: Transition,
}

/// One announcement per distinct transition in `batch`, whichever classes made it, in the
/// order of each one's latest occurrence: a class flipping off, on and off again within the
/// window is announced "on", then "off", so the last Event says what holds. Never more
/// announcements than transitions.
pub fn group(batch: Vec<ClassTransitions>) -> Vec<Announcement> {
    // Classes by name under each transition, so the Event's object and its list of names do not
    // depend on which write landed first.
    let mut groups: BTreeMap<Transition, (usize, BTreeMap<String, ClassRefs>)> = BTreeMap::new();
    let mut seen = 0;
    for made in batch {
        for transition in made.transitions {
            seen += 1;
            let (latest, classes) = groups.entry(transition).or_default();
            *latest = seen;
            classes.insert(made.class.name.clone(), made.class.clone());
        }
    }
    let mut announcements: Vec<(usize, Announcement)> = groups
        .into_iter()
        .map(|(transition, (latest, classes))| {
            (
                latest,
                Announcement {
                    classes: classes.into_values().collect(),
                    transition,
                },
            )
        })
        .collect();
    announcements.sort_by_key(|(latest, _)| *latest);
    announcements.into_iter().map(|(_, a)| a).collect()
}

/// The class an Event of `announcement` is about: the first by name whose Event budget is not
/// spent, taking one Event from it; `None` when every one's is.
pub fn about<'a>(
    announcement: &'a Announcement,
    budget: &mut EventBudget,
    now: std::time::Instant,
) -> Option<&'a ClassRefs> {
    announcement
        .classes
        .iter()
        .find(|class| budget.take(&class.name, 1, now) == 1)
}

/// Creates `events` at once. Failures are logged, never fatal: Events are a courtesy. Created,
/// never patched as a series: kube-runtime's recorder keys its series without the note, and
/// would count an Event listing other classes as a repeat of the last one.
pub async fn publish(client: &kube::Client, events: Vec<Event>) {
    let api: Api<Event> = Api::namespaced(client.clone(), EVENT_NAMESPACE);
    let creates = events.into_iter().map(|event| {
        let api = api.clone();
        async move {
            if let Err(error) = api.create(&PostParams::default(), &event).await {
                tracing::warn!(
                    %error, reason = ?event.reason, "could not publish event"
                );
            }
        }
    });
    futures::future::join_all(creates).await;
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

/// The Event of `announcement`, about `about` (one of its classes), at `now`: a Warning when
/// the condition turned False.
pub fn event_of(
    announcement: &Announcement,
    about: &ClassRefs,
    reporter: &Reporter,
    now: jiff::Timestamp,
) -> Event {
    let transition = &announcement.transition;
    let type_ = if transition.to == ConditionStatus::False {
        "Warning"
    } else {
        "Normal"
    };
    let name = about.health.name.as_deref().unwrap_or(&about.name);
    Event {
        metadata: ObjectMeta {
            // As client-go and kube-runtime name Events: the object's name and the time.
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: Some(EVENT_NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(now)),
        type_: Some(type_.into()),
        reason: Some(transition.reason.clone()),
        action: Some("Evaluate".into()),
        note: Some(note(announcement)),
        regarding: Some(about.health.clone()),
        related: Some(about.node_class.clone()),
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(
            reporter
                .instance
                .clone()
                .unwrap_or_else(|| reporter.controller.clone()),
        ),
        ..Event::default()
    }
}

/// "NodeRoleMapped changed from True to False: …", with the classes when several made it.
fn note(announcement: &Announcement) -> String {
    let transition = &announcement.transition;
    let on = match announcement.classes.as_slice() {
        [_] => String::new(),
        classes => {
            let mut listed: Vec<&str> = Vec::new();
            let mut bytes = 0;
            for class in classes.iter().take(NAMES_LISTED) {
                bytes += class.name.len() + 2;
                if bytes > NAMES_BYTES && !listed.is_empty() {
                    break;
                }
                listed.push(&class.name);
            }
            let more = classes.len() - listed.len();
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!(
                " on {} EC2NodeClasses ({}{more})",
                classes.len(),
                karpenter_health_checks::clip_bytes(&listed.join(", "), NAMES_BYTES)
            )
        }
    };
    let note = format!(
        "{} changed from {} to {}{on}: {}",
        transition.condition, transition.from, transition.to, transition.message
    );
    karpenter_health_checks::clip_bytes(&note, NOTE_BYTES).into_owned()
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

    fn refs(class: &str) -> ClassRefs {
        let reference = |kind: &str| ObjectReference {
            kind: Some(kind.into()),
            name: Some(class.into()),
            ..ObjectReference::default()
        };
        ClassRefs {
            name: class.into(),
            health: reference("KarpenterHealth"),
            node_class: reference("EC2NodeClass"),
        }
    }

    fn made(class: &str, transitions: &[Transition]) -> ClassTransitions {
        ClassTransitions {
            class: refs(class),
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

    fn names(a: &Announcement) -> Vec<&str> {
        a.classes.iter().map(|c| c.name.as_str()).collect()
    }

    fn reporter() -> Reporter {
        Reporter {
            controller: "karpenter-health".into(),
            instance: Some("pod-a".into()),
        }
    }

    fn note_of(a: &Announcement) -> String {
        let event = event_of(a, &a.classes[0], &reporter(), jiff::Timestamp::UNIX_EPOCH);
        event.note.unwrap_or_default()
    }

    #[test]
    fn a_cause_every_class_shares_is_one_event_per_transition_listing_the_classes() {
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
            assert_eq!(a.classes[0].name, "class-00", "sorted by name");
        }
        let now = jiff::Timestamp::from_second(1_800_000_000).expect("a time");
        let event = event_of(&announced[0], &announced[0].classes[3], &reporter(), now);
        assert_eq!(event.type_.as_deref(), Some("Warning"));
        assert_eq!(event.reason.as_deref(), Some("ControllerRoleMappedInstead"));
        assert_eq!(
            event.regarding.and_then(|r| r.name).as_deref(),
            Some("class-03")
        );
        let related = event.related.expect("related");
        assert_eq!(
            (related.kind.as_deref(), related.name.as_deref()),
            (Some("EC2NodeClass"), Some("class-03"))
        );
        assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(
            event.metadata.name,
            Some(format!("class-03.{:x}", now.as_nanosecond()))
        );
        assert_eq!(event.reporting_instance.as_deref(), Some("pod-a"));
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
    fn different_causes_stay_apart_and_one_class_is_not_listed() {
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
        assert_eq!(names(&announced[0]), ["b"]);
        assert_eq!(names(&announced[1]), ["a", "c"]);
        assert_eq!(
            note_of(&announced[0]),
            "NodeRoleMapped changed from True to False: role-b"
        );
    }

    #[test]
    fn never_more_events_than_transitions_and_the_last_event_says_what_holds() {
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
        // Class a flips off, on and off again within the window; b turns off.
        let batch = vec![
            made("a", std::slice::from_ref(&off)),
            made("a", std::slice::from_ref(&on)),
            made("b", std::slice::from_ref(&off)),
            made("a", std::slice::from_ref(&off)),
        ];
        let transitions: usize = batch.iter().map(|m| m.transitions.len()).sum();
        let announced = group(batch);
        assert!(announced.len() <= transitions);
        let order: Vec<_> = announced
            .iter()
            .map(|a| (&a.transition, names(a)))
            .collect();
        assert_eq!(order, [(&on, vec!["a"]), (&off, vec!["a", "b"])]);
        assert!(group(Vec::new()).is_empty());
    }

    #[test]
    fn a_note_stays_within_the_api_limit_in_bytes() {
        // Multi-byte characters and long names: the limit counts bytes.
        let long = "→".repeat(600);
        let announced = group(
            (0..30)
                .map(|n| {
                    made(
                        &format!("{}-{n}", "x".repeat(200)),
                        &[turned(
                            ConditionType::NodeNetworkReady,
                            ConditionStatus::False,
                            "NoRoute",
                            &long,
                        )],
                    )
                })
                .collect(),
        );
        let note = note_of(&announced[0]);
        assert!(note.len() <= NOTE_BYTES, "{} bytes", note.len());
        assert!(note.contains("on 30 EC2NodeClasses"), "{note}");
        assert!(note.contains("and 29 more"), "{note}");
        assert!(note.ends_with('…'));
    }

    #[test]
    fn an_event_is_about_the_first_class_with_budget_left() {
        let off = turned(
            ConditionType::NodeRoleMapped,
            ConditionStatus::False,
            "R",
            "m",
        );
        let announced = group(vec![
            made("b", std::slice::from_ref(&off)),
            made("a", std::slice::from_ref(&off)),
        ]);
        let mut budget = EventBudget::default();
        let now = std::time::Instant::now();
        // Class a flapped alone and spent its budget.
        assert_eq!(budget.take("a", 25, now), 25);
        let about_b = about(&announced[0], &mut budget, now).map(|c| c.name.clone());
        assert_eq!(about_b.as_deref(), Some("b"));
        assert_eq!(budget.take("b", 25, now), 24, "one Event taken from b");
        assert_eq!(about(&announced[0], &mut budget, now), None, "both spent");
    }
}

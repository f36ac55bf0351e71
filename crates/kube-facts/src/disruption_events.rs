//! Karpenter's `DisruptionBlocked` Events on NodeClaims, which name what keeps a NodeClaim from
//! being disrupted (kubernetes-sigs/karpenter `pkg/controllers/disruption/events/events.go
//! Blocked`): a PodDisruptionBudget that allows no eviction, a Pod annotated
//! `karpenter.sh/do-not-disrupt`, … Each is kept as its message and when it was last seen, by
//! NodeClaim. Pure: callers feed it the Events a watch or a list returned.

use crate::index::{SharedIndex, WatchIndex};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use karpenter_health_checks::facts::DisruptionBlocked;
use kube::ResourceExt;
use std::collections::{BTreeMap, HashMap};

/// The Event reason Karpenter's disruption controller uses.
pub const REASON: &str = "DisruptionBlocked";
/// The field selector of the watch: only these Events are listed at all.
pub const FIELD_SELECTOR: &str = "reason=DisruptionBlocked,involvedObject.kind=NodeClaim";

/// What an Event change affects: the NodeClaim it is about, or every one after a relist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventsTouched {
    NodeClaim(String),
    All,
}

#[derive(Debug)]
struct Held {
    node_claim: String,
    blocked: DisruptionBlocked,
}

/// `DisruptionBlocked` Events by `namespace/name`.
#[derive(Debug, Default)]
pub struct DisruptionEventIndex {
    events: HashMap<String, Held>,
}

pub type SharedDisruptionEvents = SharedIndex<DisruptionEventIndex>;

fn key_of(event: &Event) -> String {
    format!(
        "{}/{}",
        event.namespace().unwrap_or_default(),
        event.name_any()
    )
}

/// When an Event was last seen: its series' last observation, its last timestamp, its event
/// time, else its creation.
fn last_seen(event: &Event) -> Option<Timestamp> {
    event
        .series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref())
        .map(|t| t.0)
        .or_else(|| event.last_timestamp.as_ref().map(|t| t.0))
        .or_else(|| event.event_time.as_ref().map(|t| t.0))
        .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

impl DisruptionEventIndex {
    /// Builds an index of `events` (a complete list).
    pub fn of<'a>(events: impl IntoIterator<Item = &'a Event>) -> Self {
        let mut index = Self::default();
        for event in events {
            index.apply(event);
        }
        index
    }

    /// The newest Event of each of `node_claims`.
    pub fn of_node_claims<'a>(
        &self,
        node_claims: impl IntoIterator<Item = &'a str>,
    ) -> BTreeMap<String, DisruptionBlocked> {
        let wanted: std::collections::BTreeSet<&str> = node_claims.into_iter().collect();
        let mut out: BTreeMap<String, DisruptionBlocked> = BTreeMap::new();
        for held in self.events.values() {
            if !wanted.contains(held.node_claim.as_str()) {
                continue;
            }
            let newer = out
                .get(&held.node_claim)
                .is_none_or(|kept| kept.last_seen < held.blocked.last_seen);
            if newer {
                out.insert(held.node_claim.clone(), held.blocked.clone());
            }
        }
        out
    }
}

impl WatchIndex for DisruptionEventIndex {
    type Object = Event;
    type Touched = EventsTouched;

    fn apply(&mut self, event: &Event) -> Option<EventsTouched> {
        // The field selector already asks for these; a list from elsewhere may not.
        let object = &event.involved_object;
        if event.reason.as_deref() != Some(REASON) || object.kind.as_deref() != Some("NodeClaim") {
            return None;
        }
        let node_claim = object.name.clone()?;
        let blocked = DisruptionBlocked {
            // Messages name one Pod or PodDisruptionBudget; a hostile one is cut to a bound.
            message: karpenter_health_checks::clip_bytes(
                event.message.as_deref().unwrap_or_default(),
                512,
            )
            .into_owned(),
            last_seen: last_seen(event),
        };
        let key = key_of(event);
        if self
            .events
            .get(&key)
            .is_some_and(|held| held.node_claim == node_claim && held.blocked == blocked)
        {
            return None;
        }
        self.events.insert(
            key,
            Held {
                node_claim: node_claim.clone(),
                blocked,
            },
        );
        Some(EventsTouched::NodeClaim(node_claim))
    }

    fn delete(&mut self, event: &Event) -> Option<EventsTouched> {
        self.events
            .remove(&key_of(event))
            .map(|held| EventsTouched::NodeClaim(held.node_claim))
    }

    fn relisted() -> EventsTouched {
        EventsTouched::All
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, claim: &str, message: &str, at: &str) -> Event {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "NodeClaim", "name": claim},
            "reason": "DisruptionBlocked",
            "message": message,
            "lastTimestamp": at,
        }))
        .expect("an Event")
    }

    #[test]
    fn the_newest_event_of_each_node_claim_is_kept_and_others_are_ignored() {
        let older = event(
            "a.1",
            "claim-a",
            "Pdb prevents pod evictions (PodDisruptionBudget=[shop/web])",
            "2026-11-24T10:00:00Z",
        );
        let newer = event(
            "a.2",
            "claim-a",
            "Pod shop/batch-0 has \"karpenter.sh/do-not-disrupt\" annotation",
            "2026-11-24T11:00:00Z",
        );
        let other = event("b.1", "claim-b", "x", "2026-11-24T11:00:00Z");
        let mut not_karpenters = event("c.1", "claim-a", "y", "2026-11-24T12:00:00Z");
        not_karpenters.reason = Some("Evicted".into());
        let mut index = DisruptionEventIndex::of([&older, &newer, &other]);
        assert_eq!(index.apply(&not_karpenters), None);
        let of = index.of_node_claims(["claim-a"]);
        assert_eq!(of.len(), 1);
        assert!(of["claim-a"].message.contains("batch-0"), "{of:?}");
        // The same Event again changes nothing; deleting it touches its NodeClaim.
        assert_eq!(index.apply(&newer), None);
        assert_eq!(
            index.delete(&newer),
            Some(EventsTouched::NodeClaim("claim-a".into()))
        );
        assert!(
            index.of_node_claims(["claim-a"])["claim-a"]
                .message
                .contains("shop/web")
        );
    }
}

//! NodeClaims decoded lean: only what the index keeps is read off the wire (name, resource
//! version, uid, creation and deletion times, the `karpenter.sh/nodepool` label,
//! `nodeClassRef`, `terminationGracePeriod`, `expireAfter`, `providerID`, `nodeName`, and the
//! type, status and transition time of the `Launched`, `Registered`, `Drifted` and `Initialized`
//! conditions, and the reason and message of `Initialized` while it is not True).
//! Pure, no IO.
//!
//! Everything else (other labels, annotations, managed fields, requirements, resources and other
//! conditions) is skipped by the parser without being allocated; the kept conditions' reasons and
//! messages are read and dropped unless kept. kube's
//! `DeserializeGuard` first buffers the whole object as a value tree and clones it, so a
//! NodeClaim cost about twice its full size in short-lived allocations per watch event and per
//! list item, and at 50,000 NodeClaims the allocator kept much of that as fragmentation.
//!
//! A kept field of the wrong type (a NodeClaim CRD installed without its schema lets anything
//! through) makes the object invalid, named by its field, as `DeserializeGuard` would: never a
//! failed list, never a stopped watch.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use karpenter_health_api::karpenter::{
    KarpenterCondition, NodeClaim, NodeClaimSpec, NodeClaimStatus, NodeClassRef,
};
use kube::core::error_boundary::InvalidObject;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

/// The NodeClaim conditions the checks read.
const KEPT_CONDITIONS: [&str; 4] = ["Launched", "Registered", "Drifted", "Initialized"];
/// The one condition whose reason and message are kept, while it is not True: what a registered
/// NodeClaim waits for to initialize.
const INITIALIZED: &str = "Initialized";
/// The one label the checks read: the NodePool that made the NodeClaim.
const NODE_POOL_LABEL: &str = "karpenter.sh/nodepool";

/// A NodeClaim as the index reads it, or why it could not be read (with its metadata, for the
/// log line that names it).
#[derive(Clone, Debug)]
pub struct LeanNodeClaim(pub Result<NodeClaim, InvalidObject>);

impl kube::Resource for LeanNodeClaim {
    type DynamicType = ();
    type Scope = kube::core::ClusterResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        NodeClaim::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        NodeClaim::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        NodeClaim::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        NodeClaim::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        self.0
            .as_ref()
            .map_or_else(|e| &e.metadata, |c| &c.metadata)
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match &mut self.0 {
            Ok(claim) => &mut claim.metadata,
            Err(invalid) => &mut invalid.metadata,
        }
    }
}

/// A field read without failing the object: absent (or null), its value, or of another type than
/// the one expected.
#[derive(Clone, Debug, Default)]
enum Field<T> {
    #[default]
    Missing,
    Value(T),
    Wrong(&'static str),
}

impl<T> Field<T> {
    /// The value, `None` when missing; the wrong type is recorded under `path`.
    fn take(self, path: &str, wrong: &mut Vec<String>) -> Option<T> {
        match self {
            Field::Missing => None,
            Field::Value(value) => Some(value),
            Field::Wrong(expected) => {
                wrong.push(format!("{path}: expected {expected}"));
                None
            }
        }
    }
}

/// What a field may be read from; each reader of another shape than its own reports `Wrong`.
trait Tolerant: Sized {
    const EXPECTED: &'static str;
    fn from_str(_: &str) -> Option<Self> {
        None
    }
    fn from_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn from_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Option<Self>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

impl Tolerant for String {
    const EXPECTED: &'static str = "a string";
    fn from_str(s: &str) -> Option<Self> {
        Some(s.to_owned())
    }
}

impl Tolerant for Time {
    const EXPECTED: &'static str = "an RFC 3339 time";
    fn from_str(s: &str) -> Option<Self> {
        s.parse().ok().map(Time)
    }
}

impl<T: Tolerant> Tolerant for Vec<Field<T>> {
    const EXPECTED: &'static str = "a list";
    fn from_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Option<Self>, A::Error> {
        let mut all = Vec::new();
        while let Some(item) = seq.next_element::<Field<T>>()? {
            all.push(item);
        }
        Ok(Some(all))
    }
}

/// Of the labels, only [`NODE_POOL_LABEL`]'s value; the other keys are compared in place and
/// their values skipped, nothing allocated.
#[derive(Default)]
struct NodePoolLabel(Field<String>);

/// A label key read only as whether it is [`NODE_POOL_LABEL`].
struct IsNodePoolKey(bool);

impl<'de> Deserialize<'de> for IsNodePoolKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = IsNodePoolKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a label key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<IsNodePoolKey, E> {
                Ok(IsNodePoolKey(key == NODE_POOL_LABEL))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl Tolerant for NodePoolLabel {
    const EXPECTED: &'static str = "an object";
    fn from_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<Option<Self>, A::Error> {
        let mut label = NodePoolLabel::default();
        while let Some(IsNodePoolKey(kept)) = map.next_key()? {
            if kept {
                label.0 = map.next_value()?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Some(label))
    }
}

/// Objects read through their own (tolerant) derived `Deserialize`.
macro_rules! tolerant_object {
    ($($ty:ty),*) => {$(
        impl Tolerant for $ty {
            const EXPECTED: &'static str = "an object";
            fn from_map<'de, A: MapAccess<'de>>(map: A) -> Result<Option<Self>, A::Error> {
                <$ty>::deserialize(de::value::MapAccessDeserializer::new(map)).map(Some)
            }
        }
    )*};
}

impl<'de, T: Tolerant> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Tolerant> Visitor<'de> for FieldVisitor<T> {
            type Value = Field<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(T::EXPECTED)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Field<T>, E> {
                Ok(T::from_str(s).map_or(Field::Wrong(T::EXPECTED), Field::Value))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Field<T>, A::Error> {
                Ok(T::from_map(map)?.map_or(Field::Wrong(T::EXPECTED), Field::Value))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Field<T>, A::Error> {
                Ok(T::from_seq(seq)?.map_or(Field::Wrong(T::EXPECTED), Field::Value))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Field<T>, E> {
                Ok(Field::Missing)
            }
            fn visit_none<E: de::Error>(self) -> Result<Field<T>, E> {
                Ok(Field::Missing)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Field<T>, D::Error> {
                Field::deserialize(d)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Field<T>, E> {
                Ok(Field::Wrong(T::EXPECTED))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Field<T>, E> {
                Ok(Field::Wrong(T::EXPECTED))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Field<T>, E> {
                Ok(Field::Wrong(T::EXPECTED))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Field<T>, E> {
                Ok(Field::Wrong(T::EXPECTED))
            }
        }
        deserializer.deserialize_any(FieldVisitor(std::marker::PhantomData))
    }
}

#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireMeta {
    name: Field<String>,
    resource_version: Field<String>,
    uid: Field<String>,
    creation_timestamp: Field<Time>,
    deletion_timestamp: Field<Time>,
    labels: Field<NodePoolLabel>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireRef {
    group: Field<String>,
    kind: Field<String>,
    name: Field<String>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireSpec {
    node_class_ref: Field<WireRef>,
    termination_grace_period: Field<String>,
    expire_after: Field<String>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct WireCondition {
    #[serde(rename = "type")]
    type_: Field<String>,
    status: Field<String>,
    last_transition_time: Field<Time>,
    reason: Field<String>,
    message: Field<String>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct WireStatus {
    #[serde(rename = "providerID")]
    provider_id: Field<String>,
    #[serde(rename = "nodeName")]
    node_name: Field<String>,
    conditions: Field<Vec<Field<WireCondition>>>,
}

#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct WireClaim {
    metadata: Field<WireMeta>,
    spec: Field<WireSpec>,
    status: Field<WireStatus>,
}

tolerant_object!(
    WireMeta,
    WireRef,
    WireSpec,
    WireCondition,
    WireStatus,
    WireClaim
);

impl<'de> Deserialize<'de> for LeanNodeClaim {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = match Field::<WireClaim>::deserialize(deserializer)? {
            Field::Value(wire) => wire,
            Field::Missing | Field::Wrong(_) => {
                return Err(de::Error::custom("a NodeClaim must be a JSON object"));
            }
        };
        Ok(Self(lean(wire)))
    }
}

/// The NodeClaim of `wire`, or the fields that had the wrong type.
// The same shape as `DeserializeGuard`'s result, which the index and the lists read alike.
#[allow(clippy::result_large_err)]
fn lean(wire: WireClaim) -> Result<NodeClaim, InvalidObject> {
    let mut wrong = Vec::new();
    let meta = wire
        .metadata
        .take("metadata", &mut wrong)
        .unwrap_or_default();
    let metadata = lean_metadata(meta, &mut wrong);
    let spec = wire.spec.take("spec", &mut wrong).unwrap_or_default();
    let node_class_ref = spec
        .node_class_ref
        .take("spec.nodeClassRef", &mut wrong)
        .map(|r| NodeClassRef {
            group: r.group.take("spec.nodeClassRef.group", &mut wrong),
            kind: r.kind.take("spec.nodeClassRef.kind", &mut wrong),
            name: r
                .name
                .take("spec.nodeClassRef.name", &mut wrong)
                .unwrap_or_default(),
            ..NodeClassRef::default()
        });
    let status = wire
        .status
        .take("status", &mut wrong)
        .map(|status| lean_status(status, &mut wrong));
    if !wrong.is_empty() {
        return Err(InvalidObject {
            error: wrong.join("; "),
            metadata,
        });
    }
    let termination_grace_period = spec
        .termination_grace_period
        .take("spec.terminationGracePeriod", &mut wrong);
    let expire_after = spec.expire_after.take("spec.expireAfter", &mut wrong);
    let mut claim = NodeClaim::new(
        "",
        NodeClaimSpec {
            node_class_ref,
            termination_grace_period,
            expire_after,
        },
    );
    claim.metadata = metadata;
    claim.status = status;
    Ok(claim)
}

/// The metadata the index reads of a NodeClaim; the fields of the wrong type are added to `wrong`.
fn lean_metadata(meta: WireMeta, wrong: &mut Vec<String>) -> ObjectMeta {
    ObjectMeta {
        name: meta.name.take("metadata.name", wrong),
        resource_version: meta
            .resource_version
            .take("metadata.resourceVersion", wrong),
        uid: meta.uid.take("metadata.uid", wrong),
        creation_timestamp: meta
            .creation_timestamp
            .take("metadata.creationTimestamp", wrong),
        deletion_timestamp: meta
            .deletion_timestamp
            .take("metadata.deletionTimestamp", wrong),
        labels: meta
            .labels
            .take("metadata.labels", wrong)
            .and_then(|labels| {
                labels
                    .0
                    .take(&format!("metadata.labels.{NODE_POOL_LABEL}"), wrong)
            })
            .map(|pool| [(NODE_POOL_LABEL.to_owned(), pool)].into()),
        ..ObjectMeta::default()
    }
}

/// The status the index reads of a NodeClaim (the conditions it keeps); the fields of the wrong
/// type are added to `wrong`.
fn lean_status(status: WireStatus, wrong: &mut Vec<String>) -> NodeClaimStatus {
    let conditions = status
        .conditions
        .take("status.conditions", wrong)
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let path = format!("status.conditions[{i}]");
            let c = c.take(&path, wrong)?;
            let type_ = c.type_.take(&format!("{path}.type"), wrong)?;
            if !KEPT_CONDITIONS.contains(&type_.as_str()) {
                return None;
            }
            let status = c
                .status
                .take(&format!("{path}.status"), wrong)
                .unwrap_or_default();
            let waiting = type_ == INITIALIZED && status != "True";
            let (reason, message) = if waiting {
                (
                    c.reason.take(&format!("{path}.reason"), wrong),
                    c.message.take(&format!("{path}.message"), wrong),
                )
            } else {
                (None, None)
            };
            Some(KarpenterCondition {
                status,
                last_transition_time: c
                    .last_transition_time
                    .take(&format!("{path}.lastTransitionTime"), wrong),
                reason,
                message,
                type_,
                ..KarpenterCondition::default()
            })
        })
        .collect();
    NodeClaimStatus {
        provider_id: status.provider_id.take("status.providerID", wrong),
        node_name: status.node_name.take("status.nodeName", wrong),
        conditions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn full_claim() -> serde_json::Value {
        json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {
                "name": "default-x7k2p", "resourceVersion": "4711", "uid": "u-1",
                "creationTimestamp": "2026-11-24T10:00:00Z",
                "labels": {"karpenter.sh/nodepool": "default", "team": "a"},
                "annotations": {"karpenter.k8s.aws/ec2nodeclass-hash": "123"},
                "finalizers": ["karpenter.sh/termination"],
                "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                                     "name": "default", "uid": "p-1"}],
                "managedFields": [{"manager": "karpenter", "operation": "Update",
                                   "fieldsV1": {"f:status": {"f:conditions": {}}}}]
            },
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "expireAfter": "720h",
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
                "resources": {"requests": {"cpu": "2"}}
            },
            "status": {
                "providerID": "aws:///us-east-1a/i-0123456789abcdef0",
                "nodeName": "ip-10-0-0-1.ec2.internal",
                "capacity": {"cpu": "4"},
                "conditions": [
                    {"type": "Launched", "status": "True", "reason": "Launched",
                     "message": "", "lastTransitionTime": "2026-11-24T10:00:05Z"},
                    {"type": "Registered", "status": "Unknown", "reason": "AwaitingRegistration",
                     "message": "a long message", "lastTransitionTime": "2026-11-24T10:00:06Z"},
                    {"type": "Drifted", "status": "True", "reason": "AMIDrift"},
                    {"type": "Initialized", "status": "Unknown", "reason": "NodeNotFound",
                     "message": "Node not registered with cluster"},
                    {"type": "Ready", "status": "Unknown", "reason": "NotReady", "message": "..."}
                ]
            }
        })
    }

    #[test]
    fn the_lean_claim_yields_the_same_facts_as_the_full_one() {
        let full: NodeClaim = serde_json::from_value(full_claim()).unwrap();
        let lean: LeanNodeClaim = serde_json::from_value(full_claim()).unwrap();
        let lean = lean.0.unwrap();
        use karpenter_health_checks::facts::NodeClaimFacts;
        assert_eq!(NodeClaimFacts::of(&lean), NodeClaimFacts::of(&full));
        assert_eq!(lean.metadata.resource_version.as_deref(), Some("4711"));
        assert_eq!(lean.spec, full.spec);
        // What the index does not read is not kept: of the labels, the NodePool's alone.
        assert_eq!(
            lean.metadata.labels,
            Some([("karpenter.sh/nodepool".to_owned(), "default".to_owned())].into())
        );
        assert!(lean.metadata.managed_fields.is_none());
        let drift = NodeClaimFacts::of(&lean).drift.expect("drifted");
        assert_eq!(
            (drift.node_pool.as_deref(), drift.expire_after.as_deref()),
            (Some("default"), Some("720h"))
        );
        let status = lean.status.clone().unwrap();
        assert_eq!(
            status.conditions.len(),
            4,
            "Launched, Registered, Drifted and Initialized are read"
        );
        assert!(
            status
                .conditions
                .iter()
                .all(|c| c.message.is_none() || c.type_ == "Initialized"),
            "no other condition's message is kept"
        );
        // The index keeps it only once the NodeClaim registered.
        assert_eq!(NodeClaimFacts::of(&lean).initialization_wait, None);
    }

    #[test]
    fn what_a_registered_claim_waits_for_to_initialize_is_kept_and_dropped_once_initialized() {
        let mut claim = full_claim();
        claim["status"]["conditions"][1] = json!({"type": "Registered", "status": "True",
            "reason": "Registered", "lastTransitionTime": "2026-11-24T10:01:00Z"});
        claim["status"]["conditions"][3] = json!({"type": "Initialized", "status": "Unknown",
            "reason": "StartupTaintsExist",
            "message": "StartupTaint \"example.com/agent-not-ready:NoSchedule\" still exists",
            "lastTransitionTime": "2026-11-24T10:01:00Z"});
        let full: NodeClaim = serde_json::from_value(claim.clone()).unwrap();
        let lean: LeanNodeClaim = serde_json::from_value(claim.clone()).unwrap();
        use karpenter_health_checks::facts::NodeClaimFacts;
        let facts = NodeClaimFacts::of(&lean.0.unwrap());
        assert_eq!(facts, NodeClaimFacts::of(&full));
        assert_eq!(
            facts.initialization_wait.as_deref(),
            Some(
                "StartupTaintsExist: StartupTaint \"example.com/agent-not-ready:NoSchedule\" \
                 still exists"
            )
        );
        assert_eq!(facts.node_pool.as_deref(), Some("default"));

        claim["status"]["conditions"][3] = json!({"type": "Initialized", "status": "True",
            "reason": "Initialized", "message": "", "lastTransitionTime": "2026-11-24T10:02:00Z"});
        let lean: LeanNodeClaim = serde_json::from_value(claim).unwrap();
        let lean = lean.0.unwrap();
        let facts = NodeClaimFacts::of(&lean);
        assert_eq!(facts.initialization_wait, None);
        assert!(
            lean.status
                .unwrap()
                .conditions
                .iter()
                .all(|c| c.message.is_none() && c.reason.is_none())
        );
    }

    #[test]
    fn a_kept_field_of_the_wrong_type_names_the_object_and_the_field() {
        let mut claim = full_claim();
        claim["status"]["providerID"] = json!({"not": "a string"});
        claim["status"]["conditions"][1]["lastTransitionTime"] = json!("yesterday");
        claim["metadata"]["labels"]["karpenter.sh/nodepool"] = json!(7);
        let lean: LeanNodeClaim = serde_json::from_value(claim).unwrap();
        let invalid = lean.0.unwrap_err();
        assert_eq!(invalid.metadata.name.as_deref(), Some("default-x7k2p"));
        assert!(
            invalid
                .error
                .contains("status.providerID: expected a string"),
            "{}",
            invalid.error
        );
        assert!(
            invalid
                .error
                .contains("status.conditions[1].lastTransitionTime: expected an RFC 3339 time"),
            "{}",
            invalid.error
        );
        assert!(
            invalid
                .error
                .contains("metadata.labels.karpenter.sh/nodepool: expected a string"),
            "{}",
            invalid.error
        );
    }

    #[test]
    fn fields_it_does_not_read_may_hold_anything() {
        let mut claim = full_claim();
        claim["spec"]["requirements"] = json!("not a list");
        claim["status"]["capacity"] = json!(7);
        claim["status"]["conditions"][2]["message"] = json!(false);
        let lean: LeanNodeClaim = serde_json::from_value(claim).unwrap();
        assert!(lean.0.is_ok());
    }

    #[test]
    fn a_bare_claim_and_nulls_read_as_missing_fields() {
        let lean: LeanNodeClaim =
            serde_json::from_value(json!({"metadata": {"name": "bare"}, "status": null})).unwrap();
        let claim = lean.0.unwrap();
        assert_eq!(claim.metadata.name.as_deref(), Some("bare"));
        assert!(claim.spec.node_class_ref.is_none() && claim.status.is_none());
        assert!(serde_json::from_value::<LeanNodeClaim>(json!([1, 2])).is_err());
    }
}

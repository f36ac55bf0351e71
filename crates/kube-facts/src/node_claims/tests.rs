//! Unit tests of the NodeClaim index. Pure.

use super::*;
use karpenter_health_api::ConditionStatus;
use karpenter_health_api::karpenter::{NodeClaimSpec, NodeClaimStatus, NodeClassRef};
use karpenter_health_checks::facts::ClaimCondition;

fn claim(name: &str, class: Option<&str>, instance: Option<&str>) -> NodeClaim {
    let mut claim = NodeClaim::new(
        name,
        NodeClaimSpec {
            node_class_ref: class.map(|c| NodeClassRef {
                group: Some("karpenter.k8s.aws".into()),
                kind: Some("EC2NodeClass".into()),
                name: c.into(),
                ..NodeClassRef::default()
            }),
            ..NodeClaimSpec::default()
        },
    );
    claim.status = Some(NodeClaimStatus {
        provider_id: instance.map(|i| format!("aws:///us-east-1a/{i}")),
        ..NodeClaimStatus::default()
    });
    claim
}

fn names(claims: &[NodeClaimFacts]) -> Vec<&str> {
    claims.iter().map(|c| c.name.as_str()).collect()
}

#[test]
fn facts_keep_what_registration_identity_and_drift_checks_read() {
    let claim: NodeClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "web-abc", "creationTimestamp": "2025-01-01T00:00:00Z",
                     "deletionTimestamp": "2025-01-01T01:00:00Z",
                     "labels": {"karpenter.sh/nodepool": "web"}, "finalizers": ["karpenter.sh/termination"]},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
        "status": {"providerID": "aws:///us-east-1a/i-0abc", "nodeName": "node-abc", "conditions": [
            {"type": "Launched", "status": "True", "lastTransitionTime": "2025-01-01T00:00:01Z", "message": "long"},
            {"type": "Registered", "status": "Unknown", "reason": "NodeNotFound"},
            {"type": "Drifted", "status": "False", "message": "x"}]}
    }))
    .unwrap();
    let index = NodeClaimIndex::of([&claim]);
    let facts = index.of_class("default");
    let at = |s: &str| s.parse::<jiff::Timestamp>().ok();
    assert_eq!(
        facts,
        [NodeClaimFacts {
            name: "web-abc".into(),
            created: at("2025-01-01T00:00:00Z"),
            deleting: true,
            instance_id: Some("i-0abc".into()),
            launched: Some(ClaimCondition {
                status: ConditionStatus::True,
                last_transition: at("2025-01-01T00:00:01Z"),
            }),
            registered: Some(ClaimCondition {
                status: ConditionStatus::Unknown,
                last_transition: None,
            }),
            drifted: Some(ClaimCondition {
                status: ConditionStatus::False,
                last_transition: None,
            }),
            initialized: None,
            node_pool: Some("web".into()),
            initialization_wait: None,
            deleting_since: at("2025-01-01T01:00:00Z"),
            node_name: Some("node-abc".into()),
            has_termination_grace_period: false,
            // Not drifted: its NodePool and expiry are not kept.
            drift: None,
        }]
    );
    // Deleting an hour before, with its Node: found by the drain reader; not at 00:30.
    assert_eq!(
        index.terminating_since(at("2025-01-01T02:00:00Z").unwrap()),
        [("web-abc".to_owned(), Some("node-abc".to_owned()))]
    );
    assert!(
        index
            .terminating_since(at("2025-01-01T00:30:00Z").unwrap())
            .is_empty()
    );
    // One with a terminationGracePeriod of its own has a deadline: never read.
    let mut bounded = claim.clone();
    bounded.metadata.name = Some("web-def".into());
    bounded.spec.termination_grace_period = Some("24h".into());
    let index = NodeClaimIndex::of([&claim, &bounded]);
    assert!(index.of_class("default")[1].has_termination_grace_period);
    assert_eq!(
        index.terminating_since(at("2025-01-01T02:00:00Z").unwrap()),
        [("web-abc".to_owned(), Some("node-abc".to_owned()))]
    );
}

#[test]
fn what_a_claim_waits_for_to_initialize_and_its_node_pool_survive_the_index() {
    let claim: NodeClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "web-abc", "labels": {"karpenter.sh/nodepool": "web"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
        "status": {"conditions": [
            {"type": "Registered", "status": "True", "lastTransitionTime": "2025-01-01T00:00:01Z"},
            {"type": "Initialized", "status": "Unknown", "reason": "NodeNotReady",
             "message": "Node status is NotReady", "lastTransitionTime": "2025-01-01T00:00:01Z"}]}
    }))
    .unwrap();
    let mut other = claim.clone();
    other.metadata.name = Some("web-def".into());
    let index = NodeClaimIndex::of([&claim, &other]);
    let facts = index.of_class("default");
    assert_eq!(facts.len(), 2);
    let first = &facts[0];
    assert_eq!(
        first.initialized.map(|c| c.status),
        Some(ConditionStatus::Unknown)
    );
    assert_eq!(
        first.initialization_wait.as_deref(),
        Some("NodeNotReady: Node status is NotReady")
    );
    assert_eq!(first.node_pool.as_deref(), Some("web"));
    assert_eq!(index.pool_names.len(), 1, "one NodePool name, kept once");
}

#[test]
fn a_class_reads_only_its_own_claims_but_every_instance_counts_as_claimed() {
    let index = NodeClaimIndex::of(&[
        claim("b", Some("default"), Some("i-0b")),
        claim("a", Some("default"), Some("i-0a")),
        claim("g", Some("gpu"), Some("i-0g")),
        claim("other-provider", None, Some("i-0x")),
    ]);
    assert_eq!(names(&index.of_class("default")), ["a", "b"]);
    assert_eq!(names(&index.of_class("gpu")), ["g"]);
    assert!(index.of_class("none").is_empty());
    let ids: Vec<String> = index.claimed_instance_ids().iter().cloned().collect();
    assert_eq!(ids, ["i-0a", "i-0b", "i-0g", "i-0x"]);
    assert_eq!(index.len(), 4);
}

#[test]
fn only_a_change_of_claimed_instances_touches_every_class() {
    let mut index = NodeClaimIndex::default();
    // A new NodeClaim without an instance yet: only its class.
    assert_eq!(
        index.apply_claim(&claim("a", Some("default"), None)),
        ClaimsTouched::Classes(vec!["default".into()])
    );
    // It launched: the claimed set changed.
    assert_eq!(
        index.apply_claim(&claim("a", Some("default"), Some("i-0a"))),
        ClaimsTouched::AllClasses
    );
    let before = index.claimed_instance_ids();
    // A status change that keeps the instance: its class only, and the shared set is reused.
    let mut registered = claim("a", Some("default"), Some("i-0a"));
    registered.metadata.creation_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
    );
    assert_eq!(
        index.apply_claim(&registered),
        ClaimsTouched::Classes(vec!["default".into()])
    );
    assert!(Arc::ptr_eq(&before, &index.claimed_instance_ids()));
    assert_eq!(
        index.delete_named("a"),
        ClaimsTouched::AllClasses,
        "its instance is no longer claimed"
    );
    assert!(index.claimed_instance_ids().is_empty());
    assert!(index.is_empty());
}

#[test]
fn a_claim_moved_to_another_class_leaves_the_first() {
    let mut index = NodeClaimIndex::default();
    index.apply_claim(&claim("a", Some("default"), Some("i-0a")));
    assert_eq!(
        index.apply_claim(&claim("a", Some("gpu"), Some("i-0a"))),
        ClaimsTouched::Classes(vec!["default".into(), "gpu".into()])
    );
    assert!(index.of_class("default").is_empty());
    assert_eq!(names(&index.of_class("gpu")), ["a"]);
}

#[test]
fn a_relist_replaces_the_served_index_only_when_complete() {
    let guarded = |c| LeanNodeClaim(Ok(c));
    let shared = SharedClaims::default();
    shared.apply(&guarded(claim("old", Some("default"), Some("i-0old"))));
    shared.relist_started();
    shared.relist_apply(&guarded(claim("new", Some("default"), Some("i-0new"))));
    assert_eq!(
        shared.read(|i| names(&i.of_class("default")).join(",")),
        "old",
        "half a list is not served"
    );
    assert_eq!(shared.relist_done(), ClaimsTouched::AllClasses);
    assert_eq!(
        shared.read(|i| names(&i.of_class("default")).join(",")),
        "new"
    );
    assert_eq!(
        shared.read(|i| i.claimed_instance_ids().iter().cloned().collect::<Vec<_>>()),
        ["i-0new"]
    );
}

#[test]
fn an_unreadable_node_claim_keeps_the_claimed_set_unknown_until_read_or_gone() {
    let invalid = |name: &str| {
        LeanNodeClaim(Err(kube::core::error_boundary::InvalidObject {
            error: "status.providerID: expected a string".into(),
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
        }))
    };
    let mut index = NodeClaimIndex::of_listed(&[
        LeanNodeClaim(Ok(claim("a", Some("default"), Some("i-0a")))),
        invalid("b"),
    ]);
    assert_eq!(
        index.unreadable(),
        Some(("b", "status.providerID: expected a string", 1))
    );
    // Readable again: known again, and every class's sweep is asked to look.
    assert_eq!(
        index.apply(&LeanNodeClaim(Ok(claim(
            "b",
            Some("default"),
            Some("i-0b")
        )))),
        Some(ClaimsTouched::AllClasses)
    );
    assert_eq!(index.unreadable(), None);
    assert_eq!(index.claimed_instance_ids().len(), 2);
    // Unreadable, then deleted: gone from both.
    assert_eq!(index.apply(&invalid("b")), Some(ClaimsTouched::AllClasses));
    assert_eq!(
        index.claimed_instance_ids().len(),
        1,
        "b's instance left with it"
    );
    assert_eq!(index.delete(&invalid("b")), Some(ClaimsTouched::AllClasses));
    assert_eq!(index.unreadable(), None);
}

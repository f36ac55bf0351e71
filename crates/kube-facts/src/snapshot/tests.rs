//! Unit tests of the cluster-facts snapshot: what each watched object becomes in the facts.
//! No IO (objects built in memory).

use super::*;
use crate::node_claims::NodeClaimIndex;
use crate::pending_pods::PendingPodIndex;
use crate::pods::pod_scheduling;
use k8s_openapi::api::core::v1::Pod;
use karpenter_health_api::karpenter::{
    EC2NodeClassSpec, NodeClaim, NodeClaimSpec, NodeClassRef, NodePoolSpec,
};

fn node_class(name: &str) -> EC2NodeClass {
    EC2NodeClass::new(name, EC2NodeClassSpec::default())
}

fn reference(name: &str) -> Option<NodeClassRef> {
    Some(NodeClassRef {
        group: Some("karpenter.k8s.aws".into()),
        kind: Some("EC2NodeClass".into()),
        name: name.into(),
        ..NodeClassRef::default()
    })
}

fn pool(name: &str, class: &str) -> Arc<DeserializeGuard<NodePool>> {
    let mut spec = NodePoolSpec::default();
    spec.template.spec.node_class_ref = reference(class);
    Arc::new(DeserializeGuard(Ok(NodePool::new(name, spec))))
}

fn claims(claims: &[NodeClaim]) -> Observed<SharedClaims> {
    Observed::Found(SharedClaims::listed(NodeClaimIndex::of(claims)))
}

fn claim(name: &str, class: &str, provider_id: &str) -> NodeClaim {
    let mut claim = NodeClaim::new(
        name,
        NodeClaimSpec {
            node_class_ref: reference(class),
            ..NodeClaimSpec::default()
        },
    );
    claim.status = Some(karpenter_health_api::karpenter::NodeClaimStatus {
        provider_id: Some(provider_id.into()),
        ..Default::default()
    });
    claim
}

fn pending(pods: &[Pod]) -> Observed<SharedPendingPods> {
    Observed::Found(SharedPendingPods::listed(PendingPodIndex::of(pods)))
}

/// A Pending Pod the scheduler found no node for.
fn pod(name: &str, selector: serde_json::Value) -> Pod {
    pod_with(name, selector, serde_json::json!({}), "Unschedulable")
}

fn pod_with(
    name: &str,
    selector: serde_json::Value,
    extra_metadata: serde_json::Value,
    scheduled_reason: &str,
) -> Pod {
    let mut metadata = serde_json::json!({"name": name, "namespace": "apps"});
    if let (Some(m), Some(extra)) = (metadata.as_object_mut(), extra_metadata.as_object()) {
        m.extend(extra.clone());
    }
    serde_json::from_value(serde_json::json!({
        "metadata": metadata,
        "spec": {"containers": [], "nodeSelector": selector},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": scheduled_reason}]}
    }))
    .unwrap()
}

#[test]
fn only_pods_karpenter_provisions_for_count() {
    let ds_owner = serde_json::json!({"ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "1"}]});
    let static_owner = serde_json::json!({"ownerReferences": [
        {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "2"}]});
    let none = serde_json::json!({});
    let selector = serde_json::json!({"node-role.kubernetes.io/web": ""});
    let pods = vec![
        pod("unschedulable", selector.clone()),
        pod_with(
            "binding-soon",
            selector.clone(),
            none.clone(),
            "SchedulerError",
        ),
        pod_with("daemon", selector.clone(), ds_owner, "Unschedulable"),
        pod_with("static", selector.clone(), static_owner, "Unschedulable"),
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "no-verdict-yet", "namespace": "apps"},
            "spec": {"containers": [], "nodeSelector": selector},
            "status": {"phase": "Pending"}
        }))
        .unwrap(),
    ];
    let sources = Sources {
        node_pools: Observed::Found(vec![pool("general", "default")]),
        node_claims: claims(&[]),
        pending_pods: pending(&pods),
        ..Sources::default()
    };
    let facts = cluster_facts(&node_class("default"), &sources, &Overrides::default());
    let names: Vec<&str> = facts
        .pending_pods
        .found()
        .into_iter()
        .flatten()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["unschedulable"]);
}

#[test]
fn a_pod_that_several_classes_could_take_is_nobodys_alone() {
    let sources = Sources {
        node_pools: Observed::Found(vec![pool("general", "default"), pool("gpu", "gpu")]),
        node_claims: claims(&[]),
        pending_pods: pending(&[
            pod("free", serde_json::json!({})),
            pod(
                "pinned-pool",
                serde_json::json!({"karpenter.sh/nodepool": "general"}),
            ),
            pod(
                "pinned-class",
                serde_json::json!({"karpenter.k8s.aws/ec2nodeclass": "default"}),
            ),
        ]),
        ..Sources::default()
    };
    let facts = cluster_facts(&node_class("default"), &sources, &Overrides::default());
    let only: Vec<(&str, bool)> = facts
        .pending_pods
        .found()
        .into_iter()
        .flatten()
        .map(|p| (p.name.as_str(), p.only_this_class))
        .collect();
    assert_eq!(
        only,
        [
            ("free", false),
            ("pinned-class", true),
            ("pinned-pool", true)
        ]
    );
}

#[test]
fn facts_keep_only_the_pools_claims_and_pods_of_the_node_class() {
    let sources = Sources {
        node_pools: Observed::Found(vec![pool("general", "default"), pool("gpu", "gpu")]),
        node_claims: claims(&[
            claim("general-a", "default", "aws:///us-east-1a/i-0aaa"),
            claim("gpu-a", "gpu", "aws:///us-east-1b/i-0bbb"),
        ]),
        pending_pods: pending(&[
            pod(
                "free",
                serde_json::json!({"node-role.kubernetes.io/web": ""}),
            ),
            pod(
                "pinned-here",
                serde_json::json!({"karpenter.sh/nodepool": "general"}),
            ),
            pod(
                "pinned-elsewhere",
                serde_json::json!({"karpenter.sh/nodepool": "gpu"}),
            ),
        ]),
        ..Sources::default()
    };
    let facts = cluster_facts(&node_class("default"), &sources, &Overrides::default());
    assert_eq!(facts.node_pools.found().map(Vec::len), Some(1));
    assert_eq!(facts.node_claims.found().map(Vec::len), Some(1));
    let ids: Vec<_> = facts
        .claimed_instance_ids
        .found()
        .into_iter()
        .flat_map(|ids| ids.iter())
        .map(String::as_str)
        .collect();
    assert_eq!(
        ids,
        ["i-0aaa", "i-0bbb"],
        "every claim in the cluster counts as claimed"
    );
    let pods: Vec<_> = facts
        .pending_pods
        .found()
        .into_iter()
        .flatten()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(pods, ["free", "pinned-here"]);
}

#[test]
fn a_malformed_pool_is_skipped_not_fatal() {
    let invalid = kube::core::error_boundary::InvalidObject {
        error: "invalid type".into(),
        metadata: Default::default(),
    };
    let sources = Sources {
        node_pools: Observed::Found(vec![
            Arc::new(DeserializeGuard(Err(invalid))),
            pool("general", "default"),
        ]),
        ..Sources::default()
    };
    let facts = cluster_facts(&node_class("default"), &sources, &Overrides::default());
    assert_eq!(facts.node_pools.found().map(Vec::len), Some(1));
}

#[test]
fn unlisted_caches_are_unknown_never_empty() {
    // Before the first list completes (the default sources), nothing reads as "none".
    let facts = cluster_facts(
        &node_class("default"),
        &Sources {
            pending_pods: pending(&[]),
            ..Sources::default()
        },
        &Overrides::default(),
    );
    assert!(facts.node_pools.unobserved().is_some());
    assert!(facts.node_claims.unobserved().is_some());
    assert!(facts.claimed_instance_ids.unobserved().is_some());
    assert!(
        facts.pending_pods.unobserved().is_some(),
        "which Pods charge this class is unknown while its NodePools are"
    );
}

#[test]
fn an_unreadable_deployment_is_unknown_unless_the_version_is_given() {
    let unreadable = Sources {
        karpenter_deployment: Observed::unknown(
            karpenter_health_checks::facts::UnknownCause::AccessDenied,
            "deployments is forbidden",
        ),
        ..Sources::default()
    };
    let facts = cluster_facts(&node_class("x"), &unreadable, &Overrides::default());
    assert!(matches!(facts.karpenter, Observed::Unknown(_)));
    let overrides = Overrides {
        karpenter_version: Some("1.7.0".into()),
        cluster_name: None,
    };
    let facts = cluster_facts(&node_class("x"), &unreadable, &overrides);
    assert_eq!(
        facts.karpenter.found().unwrap().version.as_deref(),
        Some("1.7.0")
    );
}

#[test]
fn a_missing_aws_auth_is_proven_absent_only_by_a_synced_cache() {
    let synced = Sources {
        aws_auth: Observed::Found(None),
        ..Sources::default()
    };
    let facts = cluster_facts(&node_class("x"), &synced, &Overrides::default());
    assert_eq!(facts.aws_auth, Observed::Absent);
    let unsynced = Sources::default();
    let facts = cluster_facts(&node_class("x"), &unsynced, &Overrides::default());
    assert!(matches!(facts.aws_auth, Observed::Unknown(_)));
}

#[test]
fn required_and_preferred_affinity_terms_become_requirements() {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "batch", "namespace": "jobs"},
        "spec": {"containers": [], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "node-role.kubernetes.io/batch", "operator": "DoesNotExist"}]},
                {"matchExpressions": [{"key": "a", "operator": "In", "values": ["x", "y"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [{"key": "b", "operator": "Exists"}]}}]}}}
    }))
    .unwrap();
    let scheduling = pod_scheduling(&pod);
    assert_eq!(scheduling.required_affinity.len(), 2);
    assert_eq!(
        scheduling.required_affinity[0][0].key,
        "node-role.kubernetes.io/batch"
    );
    assert_eq!(scheduling.required_affinity[0][0].operator, "DoesNotExist");
    assert_eq!(scheduling.required_affinity[1][0].values, ["x", "y"]);
    assert_eq!(scheduling.preferred_affinity[0][0].key, "b");
    assert_eq!(
        (scheduling.namespace.as_str(), scheduling.name.as_str()),
        ("jobs", "batch")
    );
}

#[test]
fn the_vpc_cni_settings_are_the_aws_node_container_literal_env() {
    let daemonset: DaemonSet = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "aws-node", "namespace": "kube-system"},
        "spec": {
            "selector": {},
            "template": {"spec": {"containers": [
                {"name": "aws-vpc-cni-init", "env": [{"name": "WARM_IP_TARGET", "value": "99"}]},
                {"name": "aws-node", "env": [
                    {"name": "WARM_IP_TARGET", "value": "30"},
                    {"name": "MY_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                ]},
            ]}},
        },
    }))
    .expect("a DaemonSet");
    let settings = vpc_cni_settings(&daemonset);
    assert_eq!(
        settings.env,
        BTreeMap::from([("WARM_IP_TARGET".to_owned(), "30".to_owned())])
    );
    let mut other = daemonset.clone();
    other.metadata.namespace = Some("monitoring".into());
    let facts_with = |daemonsets: Vec<DaemonSet>| {
        cluster_facts(
            &node_class("a"),
            &Sources {
                daemonsets: Observed::Found(daemonsets.into_iter().map(Arc::new).collect()),
                ..Sources::default()
            },
            &Overrides::default(),
        )
    };
    let facts = facts_with(vec![other.clone()]);
    assert_eq!(
        facts.vpc_cni,
        Observed::Absent,
        "no kube-system/aws-node: another CNI"
    );
    assert_eq!(
        facts.daemonsets.found().map(|all| all.len()),
        Some(1),
        "every DaemonSet is counted, whatever its namespace"
    );
    let facts = facts_with(vec![other, daemonset]);
    assert_eq!(facts.vpc_cni.found().map(|c| c.env.len()), Some(1));
}

fn aws_auth_map(map_roles: &str) -> Observed<Option<Arc<ConfigMap>>> {
    Observed::Found(Some(Arc::new(ConfigMap {
        metadata: ObjectMeta {
            name: Some("aws-auth".into()),
            namespace: Some("kube-system".into()),
            ..Default::default()
        },
        data: Some([("mapRoles".to_owned(), map_roles.to_owned())].into()),
        ..Default::default()
    })))
}

#[test]
fn cluster_wide_facts_are_derived_once_per_change_of_their_inputs() {
    let memo = WideMemo::default();
    let mut sources = Sources {
        aws_auth: aws_auth_map("- rolearn: arn:aws:iam::1:role/a\n"),
        node_pools: Observed::Found(vec![pool("a", "default")]),
        ..Sources::default()
    };
    let overrides = Overrides::default();
    let snapshot = |sources: &Sources, class: &str| {
        class_facts(
            &node_class(class),
            sources,
            &overrides,
            &memo.get(sources, &overrides),
        )
    };
    let first = snapshot(&sources, "default");
    let second = snapshot(&sources, "other");
    assert_eq!(memo.derivations(), 1, "twenty classes, one derivation");
    // The classes share one parse of aws-auth.
    let (Observed::Found(a), Observed::Found(b)) = (&first.aws_auth, &second.aws_auth) else {
        panic!("aws-auth not found: {:?}", first.aws_auth);
    };
    assert!(std::ptr::eq(a.parsed(), b.parsed()));
    assert_eq!(a.parsed().map_roles[0].rolearn, "arn:aws:iam::1:role/a");

    // A NodePool's change (Karpenter rewrites their status during every scale-up) derives nothing.
    sources.node_pools = Observed::Found(vec![pool("a", "default"), pool("b", "other")]);
    let _ = snapshot(&sources, "default");
    assert_eq!(memo.derivations(), 1);

    // An aws-auth edit is seen at once, by the next snapshot.
    sources.aws_auth = aws_auth_map("- rolearn: arn:aws:iam::1:role/b\n");
    let edited = snapshot(&sources, "default");
    assert_eq!(memo.derivations(), 2);
    let Observed::Found(data) = &edited.aws_auth else {
        panic!("aws-auth not found");
    };
    assert_eq!(data.parsed().map_roles[0].rolearn, "arn:aws:iam::1:role/b");

    // So is aws-auth turning unknown (its watch failing), and the derived facts equal a fresh
    // derivation in every case.
    sources.aws_auth = Observed::not_observed("the aws-auth watch is failing");
    let unknown = snapshot(&sources, "default");
    assert!(matches!(unknown.aws_auth, Observed::Unknown(_)));
    assert_eq!(memo.derivations(), 3);
    assert_eq!(
        format!("{unknown:?}"),
        format!(
            "{:?}",
            cluster_facts(&node_class("default"), &sources, &overrides)
        )
    );
}

#[test]
fn an_unreadable_node_claim_makes_the_claimed_instances_unknown_not_empty() {
    use crate::lean_node_claim::LeanNodeClaim;
    let unreadable = LeanNodeClaim(Err(kube::core::error_boundary::InvalidObject {
        error: "status.providerID: expected a string".into(),
        metadata: ObjectMeta {
            name: Some("broken".into()),
            ..Default::default()
        },
    }));
    let readable = LeanNodeClaim(Ok(claim("a", "default", "aws:///us-east-1a/i-0a")));
    let sources = Sources {
        node_claims: Observed::Found(SharedClaims::listed(NodeClaimIndex::of_listed([
            &readable,
            &unreadable,
        ]))),
        ..Sources::default()
    };
    let facts = cluster_facts(&node_class("default"), &sources, &Overrides::default());
    let Observed::Unknown(why) = &facts.claimed_instance_ids else {
        panic!("claimed instances: {:?}", facts.claimed_instance_ids);
    };
    assert!(
        why.detail.contains("NodeClaim broken could not be read"),
        "{}",
        why.detail
    );
    // The class's own readable NodeClaims are still read.
    assert_eq!(facts.node_claims.found().map(Vec::len), Some(1));
}

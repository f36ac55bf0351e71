//! Scenarios of `LabelsAllowed`: restricted label domains in Pods' selectors and affinities and
//! in NodePools, one finding for many replicas, Pods several classes could take, and the rules
//! of the installed CRD over the controller's version. Pure.

use super::reasons::status;
use super::{failures, message, pair};
use crate::facts::{Facts, Observed, PodScheduling, UnknownCause};
use crate::testing::*;
use karpenter_health_api::{ConditionType, Reason};

#[test]
fn a_node_role_kubernetes_io_selector_fails_labels_on_1_8_naming_pod_and_key() {
    // Issues #7069/#8022: `label domain "kubernetes.io" is restricted`.
    let pod = pending_pod("batch", "etl-0", &[("node-role.kubernetes.io/worker", "")]);
    let facts = Facts::healthy().with_pending_pod(pod.clone());
    let status = status(&facts);
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::LabelsAllowed,
            Reason::RestrictedLabelDomain
        )]
    );
    let m = message(&status, ConditionType::LabelsAllowed);
    assert!(
        m.contains("batch/etl-0") && m.contains("node-role.kubernetes.io/worker"),
        "{m}"
    );
    assert!(
        m.contains("label domain \"kubernetes.io\" is restricted"),
        "{m}"
    );

    let fixed = Facts::healthy()
        .with_karpenter_version("1.9.0")
        .with_pending_pod(pod);
    assert!(failures(&crate::tests::reasons::status(&fixed)).is_empty());
}

#[test]
fn a_node_role_key_in_not_in_affinity_counts_too() {
    let pod = PodScheduling {
        required_affinity: vec![vec![requirement(
            "node-role.kubernetes.io/control-plane",
            "DoesNotExist",
            &[],
        )]],
        ..pending_pod("kube-system", "dns-0", &[])
    };
    let status = status(&Facts::healthy().with_pending_pod(pod));
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::LabelsAllowed,
            Reason::RestrictedLabelDomain
        )]
    );
}

#[test]
fn many_replicas_with_the_same_bad_key_make_one_finding() {
    let mut facts = Facts::healthy();
    for i in 0..200 {
        facts = facts.with_pending_pod(pending_pod(
            "web",
            &format!("web-{i:03}"),
            &[("kubernetes.io/role", "web")],
        ));
    }
    let status = status(&facts);
    let labels: Vec<_> = status
        .findings
        .iter()
        .filter(|f| f.condition_type == ConditionType::LabelsAllowed)
        .collect();
    assert_eq!(labels.len(), 1);
    assert!(
        labels[0].message.contains("and 197 more"),
        "{}",
        labels[0].message
    );
    assert!(labels[0].subjects.len() <= 10);
}

#[test]
fn a_restricted_label_proven_in_a_listed_nodepool_fails_even_while_pods_are_unlisted() {
    let facts = Facts::healthy()
        .with_node_pool_label("karpenter.sh/team", "a")
        .with(|f| f.cluster.pending_pods = Observed::unknown(UnknownCause::AccessDenied, "403"));
    assert_eq!(
        failures(&status(&facts)),
        vec![pair(
            ConditionType::LabelsAllowed,
            Reason::RestrictedLabelDomain
        )]
    );
}

/// Issue 22 point 8: whichever NodePool Karpenter picks, a rejected key in the Pod's node selector
/// reaches the NodeClaim, so every class that could take the Pod fails, naming it. This test
/// replaces one that made it a warning on every class (the failure was invisible with two
/// classes).
#[test]
fn a_restricted_node_selector_key_on_a_pod_several_classes_could_take_fails_each() {
    let shared = PodScheduling {
        only_this_class: false,
        ..pending_pod("shop", "web-1", &[("node-role.kubernetes.io/web", "")])
    };
    let status = status(&Facts::healthy().with_pending_pod(shared));
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::LabelsAllowed,
            Reason::RestrictedLabelDomain
        )]
    );
    assert!(
        message(&status, ConditionType::LabelsAllowed).contains("shop/web-1"),
        "{}",
        message(&status, ConditionType::LabelsAllowed)
    );
}

#[test]
fn a_restricted_key_in_only_some_terms_of_a_shared_pod_is_a_warning_the_true_message_admits() {
    use karpenter_health_api::karpenter::Requirement;
    let restricted = Requirement {
        key: "node-role.kubernetes.io/web".into(),
        operator: "Exists".into(),
        values: Vec::new(),
        min_values: None,
    };
    let other = Requirement {
        key: "team".into(),
        operator: "In".into(),
        values: vec!["web".into()],
        min_values: None,
    };
    let shared = PodScheduling {
        only_this_class: false,
        required_affinity: vec![vec![restricted.clone()], vec![other]],
        preferred_affinity: vec![vec![restricted]],
        ..pending_pod("shop", "web-3", &[])
    };
    let status = status(&Facts::healthy().with_pending_pod(shared.clone()));
    assert!(failures(&status).is_empty(), "{:?}", failures(&status));
    assert!(
        status
            .findings
            .iter()
            .any(|f| f.reason == "RestrictedLabelOnSharedPod" && f.message.contains("shop/web-3")),
        "{:?}",
        status.findings
    );
    let ok = message(&status, ConditionType::LabelsAllowed);
    assert!(
        !ok.starts_with("No NodePool or pending Pod uses"),
        "the True message contradicts the warning beside it: {ok}"
    );
    // The same Pod only this class could take fails it.
    let pinned = PodScheduling {
        only_this_class: true,
        ..shared
    };
    assert_eq!(
        failures(&super::reasons::status(
            &Facts::healthy().with_pending_pod(pinned)
        )),
        vec![pair(
            ConditionType::LabelsAllowed,
            Reason::RestrictedLabelDomain
        )]
    );
}

#[test]
fn the_installed_crds_rules_win_over_the_controller_version() {
    use crate::labels::LabelRules;
    let pod = pending_pod("shop", "web-2", &[("node-role.kubernetes.io/web", "")]);
    // A 1.9 controller with 1.8 CRDs left behind by `helm upgrade`: the CRD still rejects it.
    let old_crds = Facts::healthy()
        .with_karpenter_version("1.9.0")
        .with_pending_pod(pod.clone())
        .with(|f| f.cluster.crd_label_rules = Observed::Found(Some(LabelRules::UpTo1_8)));
    let status = status(&old_crds);
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::LabelsAllowed,
            Reason::RestrictedLabelDomain
        )]
    );
    let m = message(&status, ConditionType::LabelsAllowed);
    assert!(
        m.contains("the installed NodePool CRD"),
        "says which rules were used: {m}"
    );
    // A 1.8 controller whose CRDs were already upgraded: the CRD accepts it.
    let new_crds = Facts::healthy()
        .with_pending_pod(pod)
        .with(|f| f.cluster.crd_label_rules = Observed::Found(Some(LabelRules::From1_9)));
    assert!(failures(&super::reasons::status(&new_crds)).is_empty());
}

#[test]
fn an_unreadable_crd_leaves_only_what_every_rule_set_rejects_proven() {
    let unreadable = |f: &mut Facts| {
        f.cluster.crd_label_rules = Observed::unknown(UnknownCause::AccessDenied, "403 on the CRD")
    };
    // Karpenter 1.8.6 would reject this key, but 1.9 CRDs may be installed beside it: unknown.
    let kubernetes_io = Facts::healthy()
        .with_pending_pod(pending_pod(
            "shop",
            "web-3",
            &[("node-role.kubernetes.io/web", "")],
        ))
        .with(unreadable);
    let status = status(&kubernetes_io);
    assert!(failures(&status).is_empty(), "{:?}", failures(&status));
    let c = status.condition(ConditionType::LabelsAllowed).unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("Unknown", "AwsAccessDenied"),
        "{}",
        c.message
    );
    assert!(c.message.contains("CRD"), "{}", c.message);
    // Every Karpenter rejects karpenter.sh keys: still proven.
    let karpenter_sh = Facts::healthy()
        .with_pending_pod(pending_pod("shop", "web-4", &[("karpenter.sh/team", "a")]))
        .with(unreadable);
    assert_eq!(
        failures(&super::reasons::status(&karpenter_sh)),
        vec![pair(
            ConditionType::LabelsAllowed,
            Reason::RestrictedLabelDomain
        )]
    );
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        well_known_labels_only_are_no_restricted_labels:
            Facts::healthy() => LabelsAllowed is True because NoRestrictedLabels;
        a_nodepool_label_in_karpenter_sh_is_restricted_label_domain:
            Facts::healthy().with_node_pool_label("karpenter.sh/team", "a")
            => LabelsAllowed is False because RestrictedLabelDomain;
    }
}

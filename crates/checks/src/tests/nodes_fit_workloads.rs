//! The scenarios of `rules/nodes_fit_workloads.rs`: its sentences, one per reason, and the Pod
//! density warning against Karpenter's count (aws/karpenter-provider-aws
//! `pkg/providers/instancetype/types.go` `pods()`) and the VPC CNI's addresses. The fixture's
//! types carry the ENIs and addresses EC2 documents for them (m5.large 3 × 10, m5.xlarge and
//! r7i.2xlarge 4 × 15, c6g.large 3 × 10). Pure.

use super::reasons::condition_of;
use crate::facts::{Facts, Observed, Setting, UnknownCause};
use karpenter_health_api::ConditionType;

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        karpenters_own_pod_count_fits_the_addresses_is_nodes_fit_their_pods:
            Facts::healthy() => NodesFitWorkloads is True because NodesFitTheirPods;
        an_unread_aws_node_daemonset_is_not_observed:
            Facts::healthy().with(|f| f.cluster.vpc_cni = Observed::unknown(UnknownCause::NotObserved, "not listed yet"))
            => NodesFitWorkloads is Unknown because NotObserved;
    }
}

fn fit(facts: &Facts) -> (String, String, String, Vec<String>) {
    condition_of(facts, ConditionType::NodesFitWorkloads)
}

fn warning_text(facts: &Facts) -> Option<String> {
    super::reasons::status(facts)
        .findings
        .into_iter()
        .find(|f| f.reason == "MaxPodsAboveAddresses")
        .map(|f| f.message)
}

#[test]
fn max_pods_above_every_allowed_types_addresses_is_a_warning_never_a_false() {
    let facts = Facts::healthy().with_max_pods(110);
    let (status, reason, message, warnings) = fit(&facts);
    assert_eq!((status.as_str(), reason.as_str()), ("True", "NodesFitTheirPods"));
    assert_eq!(warnings, ["MaxPodsAboveAddresses"]);
    assert!(message.contains("see the warning"), "{message}");
    let text = warning_text(&facts).expect("the warning");
    assert!(
        text.contains("spec.kubelet.maxPods 110")
            && text.contains("m5.large runs up to 110 Pods but can address 29 (27 + 2"),
        "{text}"
    );
}

#[test]
fn a_max_pods_some_allowed_type_can_address_is_no_warning() {
    // m5.xlarge and r7i.2xlarge address 4 × 14 + 2 = 58 Pods: Karpenter may pick them.
    let facts = Facts::healthy().with_max_pods(50);
    assert_eq!(fit(&facts).3, Vec::<String>::new());
    // Only m5.large allowed: every node is promised 50 and can address 29.
    let small = facts.with_pool_requirement(
        "node.kubernetes.io/instance-type",
        "In",
        &["m5.large"],
    );
    assert_eq!(fit(&small).3, ["MaxPodsAboveAddresses"]);
}

#[test]
fn prefix_delegation_addresses_what_max_pods_promises() {
    let facts = Facts::healthy()
        .with_max_pods(110)
        .with_vpc_cni_env("ENABLE_PREFIX_DELEGATION", "true");
    assert_eq!(fit(&facts).3, Vec::<String>::new());
}

#[test]
fn custom_networking_without_reserved_enis_over_promises_and_reserved_enis_fixes_it() {
    let custom = Facts::healthy().with_vpc_cni_env("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "true");
    let text = warning_text(&custom).expect("the warning");
    assert!(
        text.contains("RESERVED_ENIS is not set")
            && text.contains("m5.large runs up to 29 Pods but can address 20"),
        "{text}"
    );
    let reserved = custom.with(|f| {
        if let Some(k) = f.cluster.karpenter.found_mut() {
            k.reserved_enis = Setting::Value("1".into());
        }
    });
    assert_eq!(fit(&reserved).3, Vec::<String>::new());
}

#[test]
fn what_is_not_the_vpc_cnis_ipv4_is_not_judged() {
    let ipv6 = Facts::healthy()
        .with_max_pods(110)
        .with_vpc_cni_env("ENABLE_IPv6", "true");
    let (status, _, message, warnings) = fit(&ipv6);
    assert_eq!(status, "True");
    assert!(warnings.is_empty() && message.contains("IPv6"), "{message}");
    let other_cni = Facts::healthy()
        .with_max_pods(110)
        .with(|f| f.cluster.vpc_cni = Observed::Absent);
    let (status, _, message, warnings) = fit(&other_cni);
    assert_eq!(status, "True");
    assert!(warnings.is_empty() && message.contains("another CNI"), "{message}");
}

#[test]
fn karpenters_count_unknown_without_its_settings_unless_max_pods_is_set() {
    let unread = Facts::healthy().with(|f| {
        f.cluster.karpenter = Observed::unknown(UnknownCause::NotObserved, "not listed yet");
    });
    assert_eq!(fit(&unread).0, "Unknown");
    let explicit = unread.with_max_pods(110);
    let (status, _, _, warnings) = fit(&explicit);
    assert_eq!(status, "True");
    assert_eq!(warnings, ["MaxPodsAboveAddresses"]);
}

#[test]
fn an_unread_catalog_is_unknown_with_its_cause() {
    let facts = Facts::healthy().with(|f| {
        f.aws.instance_types = Some(Observed::unknown(UnknownCause::Throttled, "429"));
    });
    let (status, reason, ..) = fit(&facts);
    assert_eq!((status.as_str(), reason.as_str()), ("Unknown", "AwsThrottled"));
}

#[test]
fn unread_subnets_are_unknown_with_their_cause() {
    let facts = Facts::healthy()
        .with_max_pods(110)
        .with(|f| f.aws.subnets = Observed::unknown(UnknownCause::AccessDenied, "403"));
    let (status, reason, _, warnings) = fit(&facts);
    assert_eq!((status.as_str(), reason.as_str()), ("Unknown", "AwsAccessDenied"));
    assert!(warnings.is_empty(), "{warnings:?}");
}

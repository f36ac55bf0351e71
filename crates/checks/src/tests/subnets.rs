//! Scenarios of `SubnetsReady` beyond one sentence per reason: what narrows the zones, which
//! shortages of addresses are only warnings, and what the messages name. Pure.

use super::reasons::status;
use crate::facts::{Facts, Observed, VpcCniSettings};
use crate::testing::*;
use karpenter_health_api::{ConditionType, Severity};
use std::collections::BTreeMap;

fn condition(facts: &Facts, ty: ConditionType) -> (String, String, String) {
    let s = status(facts);
    let c = s.condition(ty).expect("present");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

#[test]
fn one_full_zone_is_a_warning_and_the_condition_stays_true() {
    let facts = Facts::healthy().with_network(NetworkChange::OneZoneFull);
    let (st, _, _) = condition(&facts, ConditionType::SubnetsReady);
    assert_eq!(st, "True");
    let s = status(&facts);
    let warning = s
        .findings
        .iter()
        .find(|f| f.reason == "ZoneSubnetsLowOnAddresses")
        .expect("a warning for the full zone");
    assert_eq!(warning.severity, Severity::Warning);
    assert!(
        warning.message.contains("us-west-2b"),
        "{}",
        warning.message
    );
    assert!(warning.message.contains(SUBNET_B), "{}", warning.message);
}

#[test]
fn a_node_pool_pinned_to_the_full_zone_makes_it_false() {
    let facts = Facts::healthy()
        .with_network(NetworkChange::OneZoneFull)
        .with(|f| {
            if let Some(pools) = f.cluster.node_pools.found_mut() {
                pools[0].spec.template.spec.requirements.push(requirement(
                    "topology.kubernetes.io/zone",
                    "In",
                    &["us-west-2b"],
                ));
            }
        });
    let (st, reason, message) = condition(&facts, ConditionType::SubnetsReady);
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "SubnetsOutOfAddresses")
    );
    assert!(message.contains("at most 0 free"), "{message}");
}

/// Issue 22 point 2: a warm pool the subnets cannot fill is a warning, never a failure; nodes
/// still launch and join. (This test replaces one that made WARM_IP_TARGET=5000 False.)
#[test]
fn a_warm_pool_beyond_the_free_addresses_is_a_warning() {
    let mut facts = Facts::healthy();
    facts.cluster.vpc_cni = Observed::Found(VpcCniSettings {
        env: BTreeMap::from([("WARM_IP_TARGET".to_owned(), "5000".to_owned())]),
    });
    let (st, reason, _) = condition(&facts, ConditionType::SubnetsReady);
    assert_eq!((st.as_str(), reason.as_str()), ("True", "SubnetsValid"));
    let s = status(&facts);
    let warnings: Vec<&str> = s
        .findings
        .iter()
        .filter(|f| f.reason == "ZoneSubnetsLowOnAddresses")
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings.iter().all(|m| m.contains("5001")), "{warnings:?}");
}

/// Subnets with one free address each: enough to launch where Pods do not take addresses from the
/// node's subnet, not enough where they do.
fn one_free_address_each(cni: Observed<VpcCniSettings>) -> Facts {
    let mut facts = Facts::healthy();
    if let Some(s) = facts.aws.subnets.found_mut() {
        for subnet in s {
            subnet.available_ips = Some(1);
        }
    }
    facts.cluster.vpc_cni = cni;
    facts
}

#[test]
fn custom_networking_ipv6_and_other_cnis_need_one_address_per_node() {
    let env = |pairs: &[(&str, &str)]| {
        Observed::Found(VpcCniSettings {
            env: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        })
    };
    for cni in [
        env(&[("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "true")]),
        env(&[("ENABLE_IPv6", "true")]),
        Observed::Absent,
    ] {
        let facts = one_free_address_each(cni.clone());
        let s = status(&facts);
        let (st, reason, message) = condition(&facts, ConditionType::SubnetsReady);
        assert_eq!(
            (st.as_str(), reason.as_str()),
            ("True", "SubnetsValid"),
            "{cni:?}: {message}"
        );
        // Only the subnets' findings: NodesFitWorkloads judges custom networking's Pod density.
        assert!(
            s.findings
                .iter()
                .all(|f| f.condition_type != ConditionType::SubnetsReady),
            "{cni:?}: {:?}",
            s.findings
        );
    }
    // Pods from the node's subnet: a node there could not give any Pod an address.
    let (st, reason, message) = condition(
        &one_free_address_each(env(&[])),
        ConditionType::SubnetsReady,
    );
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "SubnetsOutOfAddresses"),
        "{message}"
    );
}

#[test]
fn a_deleted_subnet_still_in_karpenter_status_is_named() {
    let facts = Facts::healthy().with(|f| {
        if let Some(s) = f.cluster.node_class.status.as_mut() {
            s.subnets = [SUBNET_A, "subnet-0gone"]
                .iter()
                .map(|id| karpenter_health_api::karpenter::ResolvedSubnet {
                    id: (*id).into(),
                    ..Default::default()
                })
                .collect();
        }
    });
    let (st, reason, message) = condition(&facts, ConditionType::SubnetsReady);
    assert_eq!((st.as_str(), reason.as_str()), ("False", "SubnetsNotFound"));
    assert!(message.contains("subnet-0gone"), "{message}");
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        subnets_in_the_cluster_vpc_with_room_are_subnets_valid:
            Facts::healthy() => SubnetsReady is True because SubnetsValid;
        selector_terms_matching_no_subnet_are_subnets_not_found:
            Facts::healthy().with_network(NetworkChange::NoSubnets)
            => SubnetsReady is False because SubnetsNotFound;
        a_subnet_in_another_vpc_is_subnet_in_other_vpc:
            Facts::healthy().with_network(NetworkChange::OtherVpc)
            => SubnetsReady is False because SubnetInOtherVpc;
        every_zone_below_a_node_worth_of_addresses_is_subnets_out_of_addresses:
            Facts::healthy().with_network(NetworkChange::AllZonesFull)
            => SubnetsReady is False because SubnetsOutOfAddresses;
    }
}

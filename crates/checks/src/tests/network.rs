//! `SubnetsReady` and `NodeNetworkReady` beyond one sentence per reason: what narrows the zones,
//! what never makes a condition False, and what the messages name. Pure.

use super::reasons::status;
use crate::facts::{Facts, Observed, RouteTarget, VpcCniSettings};
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
        assert!(s.findings.is_empty(), "{cni:?}: {:?}", s.findings);
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

#[test]
fn endpoints_make_a_private_subnet_healthy() {
    let facts = Facts::healthy().with_network(NetworkChange::PrivateWithEndpoints);
    let (st, reason, _) = condition(&facts, ConditionType::NodeNetworkReady);
    assert_eq!((st.as_str(), reason.as_str()), ("True", "NodeNetworkValid"));
}

#[test]
fn missing_endpoints_and_the_route_table_are_named() {
    let facts = Facts::healthy().with_network(NetworkChange::SomeEndpoints);
    let (_, _, message) = condition(&facts, ConditionType::NodeNetworkReady);
    assert!(message.contains("ssm"), "{message}");
    assert!(message.contains(ROUTE_TABLE), "{message}");
    assert!(message.contains(SUBNET_A), "{message}");
    assert!(!message.contains("ecr.api"), "{message}");
}

#[test]
fn an_interface_endpoint_without_private_dns_does_not_count() {
    let facts = Facts::healthy()
        .with_network(NetworkChange::PrivateWithEndpoints)
        .with(|f| {
            if let Some(e) = network_mut(f).endpoints.found_mut() {
                e[0].private_dns_enabled = false;
            }
        });
    let (st, reason, message) = condition(&facts, ConditionType::NodeNetworkReady);
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "VpcEndpointsMissing")
    );
    assert!(message.contains("private DNS off"), "{message}");
}

#[test]
fn an_internet_gateway_with_public_addresses_works() {
    let facts = Facts::healthy()
        .with_network(NetworkChange::IgwWithoutPublicIp)
        .with(|f| f.cluster.node_class.spec.associate_public_ip_address = Some(true));
    let (st, _, _) = condition(&facts, ConditionType::NodeNetworkReady);
    assert_eq!(st, "True");
}

#[test]
fn a_proxy_in_user_data_turns_a_missing_route_into_a_caveat() {
    let facts = Facts::healthy()
        .with_network(NetworkChange::NoEgress)
        .with(|f| {
            f.cluster.node_class.spec.user_data =
                Some("export HTTPS_PROXY=http://proxy.internal:3128".into())
        });
    let (st, reason, message) = condition(&facts, ConditionType::NodeNetworkReady);
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("True", "NodeEgressNotInspected")
    );
    assert!(message.contains("proxy"), "{message}");
}

#[test]
fn opaque_targets_are_never_false() {
    for target in [
        "pcx-0peer",
        "vgw-0vpn",
        "eni-0firewall",
        "arn:aws:networkmanager::1:core-network/x",
    ] {
        let facts = Facts::healthy()
            .with_network(NetworkChange::NoEgress)
            .with(|f| private_routes(f).push(default_route(RouteTarget::Opaque(target.into()))));
        let (st, reason, message) = condition(&facts, ConditionType::NodeNetworkReady);
        assert_eq!(
            (st.as_str(), reason.as_str()),
            ("True", "NodeEgressNotInspected")
        );
        assert!(message.contains(target), "{message}");
    }
}

#[test]
fn unread_network_facts_make_the_conditions_unknown_never_false() {
    let facts = Facts::healthy().with_network(NetworkChange::RouteTablesDenied);
    let (st, reason, _) = condition(&facts, ConditionType::NodeNetworkReady);
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("Unknown", "AwsAccessDenied")
    );
    let facts = Facts::healthy().with_network(NetworkChange::SubnetsDenied);
    for ty in [ConditionType::SubnetsReady, ConditionType::NodeNetworkReady] {
        let (st, reason, _) = condition(&facts, ty);
        assert_eq!(
            (st.as_str(), reason.as_str()),
            ("Unknown", "AwsAccessDenied"),
            "{ty}"
        );
    }
    let mut facts = Facts::healthy().with_network(NetworkChange::NoEgress);
    network_mut(&mut facts).endpoints = unknown(crate::facts::UnknownCause::Throttled);
    let (st, reason, _) = condition(&facts, ConditionType::NodeNetworkReady);
    assert_eq!((st.as_str(), reason.as_str()), ("Unknown", "AwsThrottled"));
}

#[test]
fn the_main_route_table_applies_to_subnets_without_an_association() {
    let facts = Facts::healthy().with(|f| {
        if let Some(tables) = network_mut(f).route_tables.found_mut() {
            for t in tables.iter_mut() {
                t.subnet_ids.clear();
            }
        }
    });
    let (st, reason, message) = condition(&facts, ConditionType::NodeNetworkReady);
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "SubnetNoEgressRoute")
    );
    assert!(message.contains("rtb-0main"), "{message}");
}

/// Issue 22 point 3: a default route to a `vpce-` endpoint is inspected egress (Gateway Load
/// Balancer, Network Firewall), never a missing route.
#[test]
fn a_default_route_to_an_inspection_endpoint_is_never_false() {
    let facts = Facts::healthy()
        .with_network(NetworkChange::NoEgress)
        .with(|f| {
            private_routes(f).push(default_route(RouteTarget::VpcEndpoint(
                "vpce-0inspection".into(),
            )))
        });
    let (st, reason, message) = condition(&facts, ConditionType::NodeNetworkReady);
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("True", "NodeEgressNotInspected"),
        "{message}"
    );
    assert!(message.contains("vpce-0inspection"), "{message}");
}

/// The healthy facts with the selected subnets owned by another account (a VPC shared through
/// AWS RAM): the owner's NAT gateways and endpoints are not in this account's lists.
fn in_a_shared_vpc(change: Option<NetworkChange>) -> Facts {
    let facts = match change {
        Some(change) => Facts::healthy().with_network(change),
        None => Facts::healthy(),
    };
    facts.with(|f| {
        if let Some(subnets) = f.aws.subnets.found_mut() {
            for s in subnets {
                s.owner_id = Some("444455556666".into());
            }
        }
        for network in f.aws.vpc_networks.values_mut() {
            if let Observed::Found(n) = network {
                n.nat_gateways = Observed::Found(Vec::new());
            }
        }
    })
}

#[test]
fn a_shared_vpcs_unlisted_nat_gateway_and_endpoints_are_never_proven_missing() {
    // The route names a NAT gateway this account cannot list.
    let (st, reason, message) = condition(&in_a_shared_vpc(None), ConditionType::NodeNetworkReady);
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("True", "NodeEgressNotInspected"),
        "{message}"
    );
    assert!(message.contains("444455556666"), "{message}");
    // No default route seen, no endpoints seen: not proven either.
    let (st, reason, message) = condition(
        &in_a_shared_vpc(Some(NetworkChange::NoEgress)),
        ConditionType::NodeNetworkReady,
    );
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("True", "NodeEgressNotInspected"),
        "{message}"
    );
    // The same subnets owned by this account: the missing NAT gateway is proven.
    let own = Facts::healthy().with(|f| {
        for network in f.aws.vpc_networks.values_mut() {
            if let Observed::Found(n) = network {
                n.nat_gateways = Observed::Found(Vec::new());
            }
        }
    });
    let (st, reason, _) = condition(&own, ConditionType::NodeNetworkReady);
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "SubnetEgressBlackholed")
    );
}

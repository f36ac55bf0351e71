//! Scenarios of `NodeNetworkReady` beyond one sentence per reason: what gives a private subnet
//! egress, what never makes the condition False, and what the messages name. Pure.

use super::reasons::status;
use crate::facts::{Facts, Observed, RouteTarget};
use crate::testing::*;
use karpenter_health_api::ConditionType;

fn condition(facts: &Facts, ty: ConditionType) -> (String, String, String) {
    let s = status(facts);
    let c = s.condition(ty).expect("present");
    (c.status.clone(), c.reason.clone(), c.message.clone())
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

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        subnets_behind_an_available_nat_gateway_are_node_network_valid:
            Facts::healthy() => NodeNetworkReady is True because NodeNetworkValid;
        a_default_route_to_a_transit_gateway_is_node_egress_not_inspected:
            Facts::healthy().with_network(NetworkChange::TransitGateway)
            => NodeNetworkReady is True because NodeEgressNotInspected;
        a_private_subnet_without_nat_or_endpoints_is_subnet_no_egress_route:
            Facts::healthy().with_network(NetworkChange::NoEgress)
            => NodeNetworkReady is False because SubnetNoEgressRoute;
        a_route_to_a_failed_nat_gateway_is_subnet_egress_blackholed:
            Facts::healthy().with_network(NetworkChange::NatFailed)
            => NodeNetworkReady is False because SubnetEgressBlackholed;
        an_internet_gateway_route_without_public_addresses_is_internet_gateway_without_public_ip:
            Facts::healthy().with_network(NetworkChange::IgwWithoutPublicIp)
            => NodeNetworkReady is False because InternetGatewayWithoutPublicIp;
        a_private_subnet_lacking_the_ssm_endpoint_is_vpc_endpoints_missing:
            Facts::healthy().with_network(NetworkChange::SomeEndpoints)
            => NodeNetworkReady is False because VpcEndpointsMissing;
        dns_host_names_off_is_vpc_dns_disabled:
            Facts::healthy().with_network(NetworkChange::DnsHostnamesOff)
            => NodeNetworkReady is False because VpcDnsDisabled;
    }
}

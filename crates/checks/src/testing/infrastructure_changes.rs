//! Ways to break the healthy facts' volume keys, Karpenter CRDs and network paths, one fact at a
//! time. Pure data, no IO.

use super::*;

impl Facts {
    /// The class's one volume names `key`, which KMS answered as `found`.
    pub fn with_volume_key(self, key: &str, found: Observed<KmsKeyFacts>) -> Self {
        self.with(|f| {
            f.cluster.node_class.spec.block_device_mappings =
                vec![karpenter_health_api::karpenter::BlockDeviceMapping {
                    device_name: Some("/dev/xvda".into()),
                    ebs: Some(karpenter_health_api::karpenter::BlockDevice {
                        encrypted: Some(true),
                        kms_key_id: Some(key.into()),
                    }),
                }];
            f.aws.kms_keys.insert(key.into(), found);
        })
    }

    /// Changes the CRD named `name` (one of [`current_crds`]).
    pub fn with_crd(self, name: &str, change: impl FnOnce(&mut CrdFacts)) -> Self {
        self.with(|f| {
            if let Observed::Found(crds) = &mut f.cluster.karpenter_crds
                && let Some(crd) = crds.iter_mut().find(|c| c.name == name)
            {
                change(crd);
            }
        })
    }
}

/// One way to break (or vary) where nodes land: one per `SubnetsReady`/`NodeNetworkReady` reason,
/// plus unknowns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetworkChange {
    /// The selector terms match no subnet.
    NoSubnets,
    /// Subnet B is in another VPC.
    OtherVpc,
    /// Both zones' subnets have fewer free addresses than a node takes.
    AllZonesFull,
    /// Only zone b's subnet is full (a warning).
    OneZoneFull,
    /// The default route goes to a transit gateway.
    TransitGateway,
    /// The private route table loses its default route; no endpoints.
    NoEgress,
    /// No default route, but every endpoint a private cluster needs.
    PrivateWithEndpoints,
    /// The NAT gateway failed.
    NatFailed,
    /// The default route goes to an internet gateway, and the subnets map no public IPs.
    IgwWithoutPublicIp,
    /// No default route and every endpoint but `ssm`.
    SomeEndpoints,
    /// DNS host names off.
    DnsHostnamesOff,
    /// The route tables could not be read.
    RouteTablesDenied,
    /// The subnets could not be read.
    SubnetsDenied,
}

impl NetworkChange {
    pub const ALL: [NetworkChange; 13] = [
        Self::NoSubnets,
        Self::OtherVpc,
        Self::AllZonesFull,
        Self::OneZoneFull,
        Self::TransitGateway,
        Self::NoEgress,
        Self::PrivateWithEndpoints,
        Self::NatFailed,
        Self::IgwWithoutPublicIp,
        Self::SomeEndpoints,
        Self::DnsHostnamesOff,
        Self::RouteTablesDenied,
        Self::SubnetsDenied,
    ];
}

/// The healthy VPC's network, to edit in place.
pub fn network_mut(f: &mut Facts) -> &mut VpcNetworkFacts {
    f.aws
        .vpc_networks
        .get_mut(VPC)
        .and_then(Observed::found_mut)
        .expect("the healthy facts read the VPC's network")
}

/// The private route table's routes, to edit in place.
pub fn private_routes(f: &mut Facts) -> &mut Vec<RouteFacts> {
    let tables = network_mut(f)
        .route_tables
        .found_mut()
        .expect("route tables");
    &mut tables
        .iter_mut()
        .find(|t| t.id == ROUTE_TABLE)
        .expect("the private route table")
        .routes
}

impl Facts {
    /// Applies one [`NetworkChange`]; a no-op where the facts it edits are not found (a
    /// generator may have degraded them first).
    pub fn with_network(mut self, change: NetworkChange) -> Self {
        fn network(f: &mut Facts) -> Option<&mut VpcNetworkFacts> {
            f.aws
                .vpc_networks
                .get_mut(VPC)
                .and_then(Observed::found_mut)
        }
        fn routes(f: &mut Facts) -> Option<&mut Vec<RouteFacts>> {
            let tables = network(f)?.route_tables.found_mut()?;
            Some(&mut tables.iter_mut().find(|t| t.id == ROUTE_TABLE)?.routes)
        }
        let is_default = |r: &RouteFacts| r.destination == "0.0.0.0/0";
        let replace_default = |f: &mut Facts, target: Option<RouteTarget>| {
            if let Some(routes) = routes(f) {
                routes.retain(|r| !is_default(r));
                routes.extend(target.map(default_route));
            }
        };
        match change {
            NetworkChange::NoSubnets => self.aws.subnets = Observed::Found(Vec::new()),
            NetworkChange::OtherVpc => {
                if let Some(s) = self.aws.subnets.found_mut().and_then(|s| s.get_mut(1)) {
                    s.vpc_id = "vpc-0other".into();
                }
                self.aws.vpc_networks.insert(
                    "vpc-0other".into(),
                    Observed::Found(VpcNetworkFacts {
                        vpc_id: "vpc-0other".into(),
                        ..vpc_network()
                    }),
                );
            }
            NetworkChange::AllZonesFull | NetworkChange::OneZoneFull => {
                if let Some(s) = self.aws.subnets.found_mut() {
                    for (i, subnet) in s.iter_mut().enumerate() {
                        if i == 1 || change == NetworkChange::AllZonesFull {
                            subnet.available_ips = Some(0);
                        }
                    }
                }
            }
            NetworkChange::TransitGateway => {
                replace_default(&mut self, Some(RouteTarget::Opaque("tgw-0hub".into())));
            }
            NetworkChange::NoEgress => replace_default(&mut self, None),
            NetworkChange::PrivateWithEndpoints | NetworkChange::SomeEndpoints => {
                replace_default(&mut self, None);
                let mut endpoints = private_cluster_endpoints(ROUTE_TABLE);
                if change == NetworkChange::SomeEndpoints {
                    endpoints.retain(|e| !e.service_name.ends_with(".ssm"));
                }
                if let Some(n) = network(&mut self) {
                    n.endpoints = Observed::Found(endpoints);
                }
            }
            NetworkChange::NatFailed => {
                if let Some(n) = network(&mut self).and_then(|n| n.nat_gateways.found_mut()) {
                    for nat in n {
                        nat.state = "failed".into();
                    }
                }
            }
            NetworkChange::IgwWithoutPublicIp => replace_default(
                &mut self,
                Some(RouteTarget::InternetGateway(INTERNET_GATEWAY.into())),
            ),
            NetworkChange::DnsHostnamesOff => {
                if let Some(n) = network(&mut self) {
                    n.dns_hostnames = Observed::Found(false);
                }
            }
            NetworkChange::RouteTablesDenied => {
                if let Some(n) = network(&mut self) {
                    n.route_tables = unknown(UnknownCause::AccessDenied);
                }
            }
            NetworkChange::SubnetsDenied => {
                self.aws.subnets = unknown(UnknownCause::AccessDenied);
            }
        }
        self
    }
}

/// A disruption budget of `nodes` for `reasons` (every reason when empty), in force always, or
/// from `schedule` for eight hours.
pub fn budget(
    nodes: &str,
    reasons: &[&str],
    schedule: Option<&str>,
) -> karpenter_health_api::karpenter::Budget {
    karpenter_health_api::karpenter::Budget {
        nodes: nodes.into(),
        reasons: reasons.iter().map(|r| (*r).into()).collect(),
        schedule: schedule.map(Into::into),
        duration: schedule.map(|_| "8h".into()),
    }
}

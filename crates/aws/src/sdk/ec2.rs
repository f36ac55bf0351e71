//! The EC2 port over the AWS SDK client. Does IO (every method is one EC2 request).

use super::{SdkPorts, next_page, text};
use crate::classify::classify;
use crate::ports::{Ec2Api, Filter, Page, PortResult, Service, VpcAttribute};
use futures::FutureExt;
use futures::future::BoxFuture;
use karpenter_health_checks::facts::{
    CapacityReservationFacts, ImageFacts, InstanceFacts, InstanceTypeFacts, NatGatewayFacts,
    RouteFacts, RouteTableFacts, RouteTarget, SecurityGroupFacts, SubnetFacts, VpcEndpointFacts,
};
use std::collections::BTreeMap;

fn ec2_tags(tags: &[aws_sdk_ec2::types::Tag]) -> BTreeMap<String, String> {
    tags.iter()
        .filter_map(|t| Some((t.key()?.to_owned(), text(t.value()))))
        .collect()
}

fn ec2_filters(filters: &[Filter]) -> Vec<aws_sdk_ec2::types::Filter> {
    filters
        .iter()
        .map(|f| {
            aws_sdk_ec2::types::Filter::builder()
                .name(&f.name)
                .set_values(Some(f.values.clone()))
                .build()
        })
        .collect()
}

impl Ec2Api for SdkPorts {
    fn describe_security_groups<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<SecurityGroupFacts>>> {
        async move {
            let out = self
                .ec2
                .describe_security_groups()
                .set_filters(Some(ec2_filters(filters)))
                .max_results(1000)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            Ok(Page {
                items: out
                    .security_groups()
                    .iter()
                    .map(|g| SecurityGroupFacts {
                        id: text(g.group_id()),
                        name: text(g.group_name()),
                        vpc_id: g.vpc_id().map(str::to_owned),
                        tags: ec2_tags(g.tags()),
                    })
                    .collect(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn describe_instances<'a>(
        &'a self,
        filters: &'a [Filter],
        max_results: i32,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<InstanceFacts>>> {
        async move {
            let out = self
                .ec2
                .describe_instances()
                .set_filters(Some(ec2_filters(filters)))
                .max_results(max_results)
                .set_next_token(next_token)
                .customize()
                .config_override(
                    aws_sdk_ec2::config::Builder::default()
                        .timeout_config(self.sweep_timeouts.clone()),
                )
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            let items = out
                .reservations()
                .iter()
                .flat_map(|r| r.instances())
                .map(|i| InstanceFacts {
                    id: text(i.instance_id()),
                    vpc_id: i.vpc_id().map(str::to_owned),
                    state: i
                        .state()
                        .and_then(|s| s.name())
                        .map(|n| n.as_str().to_owned())
                        .unwrap_or_default(),
                    launch_time: i
                        .launch_time()
                        .and_then(|t| jiff::Timestamp::new(t.secs(), t.subsec_nanos() as i32).ok()),
                    tags: ec2_tags(i.tags()),
                    instance_type: i.instance_type().map(|t| t.as_str().to_owned()),
                    lifecycle: i.instance_lifecycle().map(|l| l.as_str().to_owned()),
                })
                .collect();
            Ok(Page {
                items,
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn get_ebs_encryption_by_default(&self) -> BoxFuture<'_, PortResult<bool>> {
        async move {
            let out = self
                .ec2
                .get_ebs_encryption_by_default()
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            out.ebs_encryption_by_default()
                .ok_or_else(|| super::missing(Service::Ec2, "EbsEncryptionByDefault"))
        }
        .boxed()
    }

    fn describe_instance_types(
        &self,
        next_token: Option<String>,
    ) -> BoxFuture<'_, PortResult<Page<InstanceTypeFacts>>> {
        async move {
            let out = self
                .ec2
                .describe_instance_types()
                .max_results(100)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            Ok(Page {
                items: out
                    .instance_types()
                    .iter()
                    .filter_map(super::ec2_instance_types::facts_of)
                    .collect(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn describe_instance_type_offerings(
        &self,
        next_token: Option<String>,
    ) -> BoxFuture<'_, PortResult<Page<(String, String)>>> {
        async move {
            let out = self
                .ec2
                .describe_instance_type_offerings()
                .location_type(aws_sdk_ec2::types::LocationType::AvailabilityZone)
                .max_results(1000)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            Ok(Page {
                items: out
                    .instance_type_offerings()
                    .iter()
                    .filter_map(|o| {
                        Some((
                            o.instance_type()?.as_str().to_owned(),
                            o.location()?.to_owned(),
                        ))
                    })
                    .collect(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn describe_open_capacity_reservations(
        &self,
        next_token: Option<String>,
    ) -> BoxFuture<'_, PortResult<Page<CapacityReservationFacts>>> {
        async move {
            let filters = ec2_filters(&[
                Filter::new("state", ["active"]),
                Filter::new("instance-match-criteria", ["open"]),
            ]);
            let out = self
                .ec2
                .describe_capacity_reservations()
                .set_filters(Some(filters))
                .max_results(1000)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            Ok(Page {
                items: out
                    .capacity_reservations()
                    .iter()
                    .map(|r| CapacityReservationFacts {
                        id: text(r.capacity_reservation_id()),
                        instance_type: text(r.instance_type()),
                        zone: text(r.availability_zone()),
                        available: r
                            .available_instance_count()
                            .and_then(|n| u32::try_from(n).ok()),
                        platform: r.instance_platform().map(|p| p.as_str().to_owned()),
                        tenancy: r.tenancy().map(|t| t.as_str().to_owned()),
                    })
                    .collect(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn describe_images(
        &self,
        ids: &[String],
        next_token: Option<String>,
    ) -> BoxFuture<'_, PortResult<Page<ImageFacts>>> {
        let filters = ec2_filters(&[Filter::new("image-id", ids.iter().map(String::as_str))]);
        async move {
            let out = self
                .ec2
                .describe_images()
                .set_filters(Some(filters))
                .include_deprecated(true)
                .include_disabled(true)
                .max_results(1000)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            Ok(Page {
                items: out
                    .images()
                    .iter()
                    .map(|i| ImageFacts {
                        id: text(i.image_id()),
                        name: i.name().map(str::to_owned),
                        state: i
                            .state()
                            .map_or_else(String::new, |s| s.as_str().to_owned()),
                        deprecation_time: i
                            .deprecation_time()
                            .and_then(|t| t.parse::<jiff::Timestamp>().ok()),
                    })
                    .collect(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn get_ebs_default_kms_key_id(&self) -> BoxFuture<'_, PortResult<String>> {
        async move {
            let out = self
                .ec2
                .get_ebs_default_kms_key_id()
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            out.kms_key_id()
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .ok_or_else(|| super::missing(Service::Ec2, "KmsKeyId"))
        }
        .boxed()
    }

    fn describe_subnets<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<SubnetFacts>>> {
        async move {
            let out = self
                .ec2
                .describe_subnets()
                .set_filters(Some(ec2_filters(filters)))
                .max_results(1000)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            Ok(Page {
                items: out
                    .subnets()
                    .iter()
                    .map(|s| SubnetFacts {
                        id: text(s.subnet_id()),
                        vpc_id: text(s.vpc_id()),
                        zone: text(s.availability_zone()),
                        available_ips: s
                            .available_ip_address_count()
                            .and_then(|n| u32::try_from(n).ok()),
                        map_public_ip_on_launch: s.map_public_ip_on_launch().unwrap_or(false),
                        tags: ec2_tags(s.tags()),
                        owner_id: s.owner_id().filter(|o| !o.is_empty()).map(str::to_owned),
                    })
                    .collect(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn describe_route_tables<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<RouteTableFacts>>> {
        async move {
            let out = self
                .ec2
                .describe_route_tables()
                .set_filters(Some(ec2_filters(filters)))
                .max_results(100)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            Ok(Page {
                items: out
                    .route_tables()
                    .iter()
                    .map(|t| RouteTableFacts {
                        id: text(t.route_table_id()),
                        main: t.associations().iter().any(|a| a.main() == Some(true)),
                        subnet_ids: t
                            .associations()
                            .iter()
                            .filter_map(|a| a.subnet_id().map(str::to_owned))
                            .collect(),
                        routes: t.routes().iter().map(route).collect(),
                    })
                    .collect(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn describe_nat_gateways<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<NatGatewayFacts>>> {
        async move {
            let out = self
                .ec2
                .describe_nat_gateways()
                .set_filter(Some(ec2_filters(filters)))
                .max_results(1000)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            Ok(Page {
                items: out
                    .nat_gateways()
                    .iter()
                    .map(|n| NatGatewayFacts {
                        id: text(n.nat_gateway_id()),
                        state: n.state().map(|s| s.as_str().to_owned()).unwrap_or_default(),
                        connectivity_type: n.connectivity_type().map(|c| c.as_str().to_owned()),
                    })
                    .collect(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn describe_vpc_endpoints<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<VpcEndpointFacts>>> {
        async move {
            let out = self
                .ec2
                .describe_vpc_endpoints()
                .set_filters(Some(ec2_filters(filters)))
                .max_results(1000)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            Ok(Page {
                items: out
                    .vpc_endpoints()
                    .iter()
                    .map(|e| VpcEndpointFacts {
                        id: text(e.vpc_endpoint_id()),
                        service_name: text(e.service_name()),
                        type_: e
                            .vpc_endpoint_type()
                            .map(|t| t.as_str().to_owned())
                            .unwrap_or_default(),
                        state: e.state().map(|s| s.as_str().to_owned()).unwrap_or_default(),
                        private_dns_enabled: e.private_dns_enabled().unwrap_or(false),
                        route_table_ids: e.route_table_ids().to_vec(),
                    })
                    .collect(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn describe_vpc_attribute<'a>(
        &'a self,
        vpc_id: &'a str,
        attribute: VpcAttribute,
    ) -> BoxFuture<'a, PortResult<bool>> {
        async move {
            let name = match attribute {
                VpcAttribute::EnableDnsSupport => {
                    aws_sdk_ec2::types::VpcAttributeName::EnableDnsSupport
                }
                VpcAttribute::EnableDnsHostnames => {
                    aws_sdk_ec2::types::VpcAttributeName::EnableDnsHostnames
                }
            };
            let out = self
                .ec2
                .describe_vpc_attribute()
                .vpc_id(vpc_id)
                .attribute(name)
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            let value = match attribute {
                VpcAttribute::EnableDnsSupport => out.enable_dns_support(),
                VpcAttribute::EnableDnsHostnames => out.enable_dns_hostnames(),
            };
            // An answer without the value: EC2's default for the attribute is what applies
            // (DNS support on, host names off for non-default VPCs) — but that is a guess, so the
            // value is reported missing instead.
            value
                .and_then(|v| v.value())
                .ok_or_else(|| super::missing(Service::Ec2, attribute.as_str()))
        }
        .boxed()
    }
}

/// One route, by the target field EC2 filled in.
fn route(r: &aws_sdk_ec2::types::Route) -> RouteFacts {
    let destination = r
        .destination_cidr_block()
        .or(r.destination_ipv6_cidr_block())
        .unwrap_or_default()
        .to_owned();
    let owned = |s: &str| s.to_owned();
    let target = if let Some(id) = r.nat_gateway_id() {
        RouteTarget::NatGateway(owned(id))
    } else if let Some(id) = r.egress_only_internet_gateway_id() {
        RouteTarget::EgressOnlyInternetGateway(owned(id))
    } else if let Some(id) = r.gateway_id() {
        if id == "local" {
            RouteTarget::Local
        } else if id.starts_with("igw-") {
            RouteTarget::InternetGateway(owned(id))
        } else if id.starts_with("vpce-") {
            RouteTarget::VpcEndpoint(owned(id))
        } else {
            // vgw-... and anything new: not followed.
            RouteTarget::Opaque(owned(id))
        }
    } else if let Some(id) = r
        .transit_gateway_id()
        .or(r.vpc_peering_connection_id())
        .or(r.network_interface_id())
        .or(r.instance_id())
        .or(r.core_network_arn())
        .or(r.local_gateway_id())
        .or(r.carrier_gateway_id())
    {
        RouteTarget::Opaque(owned(id))
    } else {
        RouteTarget::Unknown
    };
    RouteFacts {
        destination,
        target,
        state: r.state().map(|s| s.as_str().to_owned()).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{Route, RouteState};

    fn default_route() -> aws_sdk_ec2::types::builders::RouteBuilder {
        Route::builder()
            .destination_cidr_block("0.0.0.0/0")
            .state(RouteState::Active)
    }

    #[test]
    fn routes_are_named_by_the_target_field_ec2_filled_in() {
        let cases = [
            (
                default_route().nat_gateway_id("nat-1").build(),
                RouteTarget::NatGateway("nat-1".into()),
            ),
            (
                default_route().gateway_id("igw-1").build(),
                RouteTarget::InternetGateway("igw-1".into()),
            ),
            (
                default_route().gateway_id("local").build(),
                RouteTarget::Local,
            ),
            (
                default_route().gateway_id("vpce-1").build(),
                RouteTarget::VpcEndpoint("vpce-1".into()),
            ),
            (
                default_route().gateway_id("vgw-1").build(),
                RouteTarget::Opaque("vgw-1".into()),
            ),
            (
                default_route().transit_gateway_id("tgw-1").build(),
                RouteTarget::Opaque("tgw-1".into()),
            ),
            (
                default_route().network_interface_id("eni-1").build(),
                RouteTarget::Opaque("eni-1".into()),
            ),
            (default_route().build(), RouteTarget::Unknown),
        ];
        for (sdk, want) in cases {
            let r = route(&sdk);
            assert_eq!(r.target, want, "{sdk:?}");
            assert_eq!(
                (r.destination.as_str(), r.state.as_str()),
                ("0.0.0.0/0", "active")
            );
        }
        let blackhole = default_route()
            .nat_gateway_id("nat-gone")
            .state(RouteState::Blackhole)
            .build();
        assert_eq!(route(&blackhole).state, "blackhole");
    }
}

//! `NodeNetworkReady`: from every selected subnet a node can reach the control plane and the AWS
//! APIs it needs to boot and join, and the VPC resolves DNS. Pure: no IO.
//!
//! A node in a subnet reaches beyond the VPC through the subnet's route table (its explicit
//! association, else the VPC's main table): a default route (`0.0.0.0/0`; `::/0` also counts on
//! IPv6 clusters) to an available NAT gateway, or to an internet gateway when the node gets a
//! public address. Without that, a private cluster needs VPC endpoints: interface endpoints for
//! `ec2`, `ecr.api`, `ecr.dkr`, `sts` and `ssm` with private DNS, and the `s3` gateway endpoint
//! associated with the subnet's route table (Karpenter's private-cluster docs; EKS user guide
//! "private clusters"; aws/karpenter-provider-aws #1157, #1313, #6550). Both attributes
//! `enableDnsSupport` and `enableDnsHostnames` must be on for nodes to resolve and register.
//!
//! What is never `False` here, because this check cannot see through it:
//! - default routes to a transit gateway, peering connection, virtual private gateway, network
//!   interface or instance (firewall appliances), core network, local or carrier gateway, or a
//!   private NAT gateway: the path continues somewhere this check does not read. The condition
//!   is then `True` with reason `NodeEgressNotInspected`, naming the route, rather than `Unknown`:
//!   `Unknown` would stay forever on healthy hub-and-spoke networks and teach users to ignore the
//!   condition, and nothing read suggests a problem. The message says what was not checked.
//! - a NAT gateway that is still `pending` (it becomes usable by itself): same reason.
//! - a default route to a `vpce-` target: a Gateway Load Balancer or Network Firewall endpoint
//!   (gateway endpoints never carry a default route), so traffic is inspected on its way out.
//! - a subnet of a VPC shared through AWS RAM by another account: the owner's NAT gateways and
//!   endpoints cannot be listed by this account, so what is not seen is not proven missing.
//! - an EC2NodeClass whose user data mentions a proxy: nodes may reach AWS through an HTTP proxy
//!   inside the VPC, which routes cannot show, so what would be a failure is reported the same way.
//!
//! Not checked at all: security groups and network ACLs on the path, whether the EKS endpoint
//! is reachable privately (`endpointPrivateAccess`) when nodes rely on endpoints alone, and
//! anything past the route's target.
//!
//! An internet-gateway route only carries a node's traffic when the node has a public address
//! (or on IPv6 clusters, an IPv6 one). A subnet that does not map public IPv4 addresses, with
//! `spec.associatePublicIPAddress` not `true` (Karpenter then leaves the choice to the subnet,
//! `pkg/providers/launchtemplate`), gives nodes none: that is `InternetGatewayWithoutPublicIp`
//! unless the endpoints make up for it.

use crate::clip;
use crate::facts::{
    NatGatewayFacts, Observed, RouteFacts, RouteTableFacts, RouteTarget, SubnetFacts,
    VpcEndpointFacts, VpcNetworkFacts,
};
use crate::plan::Context;
use crate::plan::subnets::{Selection, selection};
use crate::verdict::{Check, Outcome, Rule, Why};
use crate::wording::list_bounded;
use karpenter_health_api::{ConditionType, Reason, SubjectRef};
use std::collections::BTreeSet;

/// Interface endpoints a node in a private subnet needs (service name suffixes).
pub const INTERFACE_ENDPOINTS: [&str; 5] = ["ec2", "ecr.api", "ecr.dkr", "sts", "ssm"];

/// What a subnet's default routes give a node.
#[derive(Debug)]
enum Egress {
    /// A NAT gateway, or an internet gateway with a public address.
    Works,
    /// A target this check cannot see through: `description`.
    Opaque(String),
    /// The default route's target is gone or failed: `description`.
    Blackholed(String),
    /// An internet gateway route, but nodes get no public address.
    IgwWithoutPublicIp(String),
    /// No default route at all.
    None,
}

fn is_default(route: &RouteFacts, ipv6: bool) -> bool {
    route.destination == "0.0.0.0/0" || (ipv6 && route.destination == "::/0")
}

/// The route table that applies to `subnet`: its explicit association, else the main table.
fn route_table_of<'a>(tables: &'a [RouteTableFacts], subnet: &str) -> Option<&'a RouteTableFacts> {
    tables
        .iter()
        .find(|t| t.subnet_ids.iter().any(|s| s == subnet))
        .or_else(|| tables.iter().find(|t| t.main))
}

/// Classifies one default route. `Err` when a fact it needs is unknown.
fn route_egress(
    route: &RouteFacts,
    nats: &Observed<Vec<NatGatewayFacts>>,
    public_ip: bool,
    shared_by: Option<&str>,
) -> Result<Egress, Why> {
    if route.state.eq_ignore_ascii_case("blackhole") {
        return Ok(Egress::Blackholed(format!(
            "the route {} is blackholed",
            describe(route)
        )));
    }
    Ok(match &route.target {
        RouteTarget::NatGateway(id) => {
            let nats = match nats {
                Observed::Found(n) => n,
                Observed::Absent => &Vec::new(),
                Observed::Unknown(u) => {
                    return Err(Why::unobserved(&format!("NAT gateway {}", clip(id, 64)), u));
                }
            };
            match nats.iter().find(|n| &n.id == id) {
                // A shared VPC's NAT gateways belong to its owner, whom this account cannot list.
                None if shared_by.is_some() => Egress::Opaque(format!(
                    "a default route to NAT gateway {}, which account {} (the VPC's owner) holds \
                     and this account cannot list",
                    clip(id, 64),
                    clip(shared_by.unwrap_or_default(), 32)
                )),
                None => Egress::Blackholed(format!("NAT gateway {} does not exist", clip(id, 64))),
                Some(n) if n.connectivity_type.as_deref() == Some("private") => {
                    Egress::Opaque(format!(
                        "a default route to the private NAT gateway {}",
                        clip(id, 64)
                    ))
                }
                Some(n) => match n.state.as_str() {
                    "available" => Egress::Works,
                    "pending" => Egress::Opaque(format!(
                        "a default route to NAT gateway {}, which is still pending",
                        clip(id, 64)
                    )),
                    state => Egress::Blackholed(format!(
                        "NAT gateway {} is {}",
                        clip(id, 64),
                        clip(state, 32)
                    )),
                },
            }
        }
        RouteTarget::InternetGateway(id) | RouteTarget::EgressOnlyInternetGateway(id) => {
            let ipv6_route = route.destination.contains(':');
            if public_ip || ipv6_route {
                Egress::Works
            } else {
                Egress::IgwWithoutPublicIp(clip(id, 64).into_owned())
            }
        }
        RouteTarget::Opaque(what) => Egress::Opaque(format!(
            "a default route to {}, which this check does not follow",
            clip(what, 128)
        )),
        // A target EC2 named in a field this adapter does not know: not followed, never failed.
        RouteTarget::Unknown => {
            Egress::Opaque("a default route to a target this check does not recognise".to_owned())
        }
        // Gateway endpoints (S3, DynamoDB) are reached through prefix-list routes and never carry
        // a default route; a default route to `vpce-` is a Gateway Load Balancer or Network
        // Firewall endpoint, an inspection path this check does not follow.
        RouteTarget::VpcEndpoint(id) => Egress::Opaque(format!(
            "a default route to {} (a Gateway Load Balancer or Network Firewall endpoint), \
             which this check does not follow",
            clip(id, 64)
        )),
        RouteTarget::Local => Egress::None,
    })
}

fn describe(route: &RouteFacts) -> String {
    let target = match &route.target {
        RouteTarget::Local => "local".to_owned(),
        RouteTarget::InternetGateway(id)
        | RouteTarget::EgressOnlyInternetGateway(id)
        | RouteTarget::NatGateway(id)
        | RouteTarget::VpcEndpoint(id)
        | RouteTarget::Opaque(id) => clip(id, 64).into_owned(),
        RouteTarget::Unknown => "an unnamed target".to_owned(),
    };
    format!("{} → {target}", clip(&route.destination, 64))
}

/// The best of the subnet's default routes: works > opaque > blackholed > IGW without address.
fn egress(
    table: &RouteTableFacts,
    nats: &Observed<Vec<NatGatewayFacts>>,
    public_ip: bool,
    ipv6: bool,
    shared_by: Option<&str>,
) -> Result<Egress, Why> {
    let mut best = Egress::None;
    let rank = |e: &Egress| match e {
        Egress::Works => 4,
        Egress::Opaque(_) => 3,
        Egress::Blackholed(_) => 2,
        Egress::IgwWithoutPublicIp(_) => 1,
        Egress::None => 0,
    };
    let mut unknown = None;
    for route in table.routes.iter().filter(|r| is_default(r, ipv6)) {
        match route_egress(route, nats, public_ip, shared_by) {
            Ok(e) if rank(&e) > rank(&best) => best = e,
            Ok(_) => {}
            Err(why) => unknown = Some(why),
        }
    }
    match (best, unknown) {
        (best @ (Egress::Works | Egress::Opaque(_)), _) => Ok(best),
        (_, Some(why)) => Err(why),
        (best, None) => Ok(best),
    }
}

/// The endpoints a private subnet still lacks (empty: it has them all).
fn missing_endpoints(
    endpoints: &[VpcEndpointFacts],
    region: &str,
    route_table: &str,
) -> Vec<String> {
    let available = |e: &&VpcEndpointFacts| e.state.eq_ignore_ascii_case("available");
    let serves = |e: &VpcEndpointFacts, service: &str| {
        e.service_name
            .ends_with(&format!("amazonaws.{region}.{service}"))
    };
    let mut missing: Vec<String> = INTERFACE_ENDPOINTS
        .iter()
        .filter(|service| {
            !endpoints.iter().filter(available).any(|e| {
                serves(e, service)
                    && e.type_.eq_ignore_ascii_case("Interface")
                    && e.private_dns_enabled
            })
        })
        .map(|service| {
            let without_dns = endpoints.iter().any(|e| {
                serves(e, service)
                    && e.type_.eq_ignore_ascii_case("Interface")
                    && !e.private_dns_enabled
            });
            if without_dns {
                format!("{service} (private DNS off)")
            } else {
                (*service).to_owned()
            }
        })
        .collect();
    // S3: the gateway endpoint on this route table; an interface endpoint with private DNS also
    // serves the node's pulls.
    let s3 = endpoints.iter().filter(available).any(|e| {
        serves(e, "s3")
            && ((e.type_.eq_ignore_ascii_case("Gateway")
                && e.route_table_ids.iter().any(|t| t == route_table))
                || (e.type_.eq_ignore_ascii_case("Interface") && e.private_dns_enabled))
    });
    if !s3 {
        missing.push(format!("s3 (gateway, on {})", clip(route_table, 64)));
    }
    missing
}

/// Whether the class's user data configures a proxy nodes may reach AWS through.
fn mentions_proxy(ctx: &Context) -> bool {
    ctx.facts
        .cluster
        .node_class
        .spec
        .user_data
        .as_deref()
        .is_some_and(|u| u.to_ascii_lowercase().contains("proxy"))
}

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::NodeNetworkReady, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::NodeNetworkReady, "node-network");
    let node_class = ctx.node_class_subject();
    let selected = match selection(ctx) {
        Selection::Unknown(why) => {
            c.unknown(why);
            return c.finish(Reason::NodeNetworkValid, "");
        }
        // SubnetsReady reports it; there is no subnet to judge.
        Selection::NotFound(..) => {
            return c.finish(
                Reason::NodeNetworkValid,
                "No selected subnet exists, so there is no network path to check (see \
                 SubnetsReady).",
            );
        }
        Selection::Subnets(s) => s,
    };
    fail_dns_off(ctx, &mut c, &node_class, &selected);
    let (fine, caveats) = judge_paths(ctx, &mut c, &node_class, &selected);
    if !caveats.is_empty() {
        return c.finish(
            Reason::NodeEgressNotInspected,
            format!(
                "Not checked beyond the route: {}.{}",
                list_bounded(&caveats, 3),
                if fine.is_empty() {
                    String::new()
                } else {
                    format!(" Subnets {} reach AWS.", list_bounded(&fine, 5))
                }
            ),
        );
    }
    c.finish(
        Reason::NodeNetworkValid,
        format!(
            "Subnets {} reach the control plane and AWS, and their VPC resolves DNS.",
            list_bounded(&fine, 5)
        ),
    )
}

/// False for each VPC of the selected subnets with DNS support or DNS hostnames off (once per
/// VPC).
fn fail_dns_off(ctx: &Context, c: &mut Check, node_class: &SubjectRef, selected: &[&SubnetFacts]) {
    // DNS: once per VPC.
    let vpcs: BTreeSet<&str> = selected.iter().map(|s| s.vpc_id.as_str()).collect();
    for vpc in &vpcs {
        let Some(network) = network_of(ctx, c, vpc) else {
            continue;
        };
        let mut off = Vec::new();
        for (attribute, value) in [
            ("enableDnsSupport", &network.dns_support),
            ("enableDnsHostnames", &network.dns_hostnames),
        ] {
            match value {
                Observed::Found(false) => off.push(attribute),
                Observed::Found(true) | Observed::Absent => {}
                Observed::Unknown(u) => c.unknown(Why::unobserved(
                    &format!("{attribute} of {}", clip(vpc, 64)),
                    u,
                )),
            }
        }
        if !off.is_empty() {
            c.fail(
                Reason::VpcDnsDisabled,
                format!(
                    "VPC {} has {} off, so nodes cannot resolve the cluster endpoint or register \
                     by their DNS names.",
                    clip(vpc, 64),
                    off.join(" and ")
                ),
                vec![node_class.clone(), SubjectRef::new("VPC", *vpc)],
            );
        }
    }
}

/// Judges each selected subnet's path to AWS: False for a broken one (a caveat instead when the
/// user data mentions a proxy); the subnets that work, and the caveats.
fn judge_paths<'a>(
    ctx: &Context,
    c: &mut Check,
    node_class: &SubjectRef,
    selected: &[&'a SubnetFacts],
) -> (Vec<&'a str>, Vec<String>) {
    let ipv6 = ctx
        .facts
        .aws
        .eks_cluster
        .found()
        .and_then(|e| e.ip_family.as_deref())
        .is_some_and(|f| f.eq_ignore_ascii_case("ipv6"));
    let associate = ctx
        .facts
        .cluster
        .node_class
        .spec
        .associate_public_ip_address;
    let proxy = mentions_proxy(ctx);
    let mut caveats: Vec<String> = Vec::new();
    let mut fine: Vec<&str> = Vec::new();
    for subnet in selected {
        let Some(network) = network_of(ctx, c, &subnet.vpc_id) else {
            continue;
        };
        match subnet_path(ctx, subnet, network, ipv6, associate) {
            Err(why) => c.unknown(why),
            Ok(Path::Works) => fine.push(&subnet.id),
            Ok(Path::Caveat(text)) => caveats.push(text),
            Ok(Path::Broken(reason, text, table)) => {
                if proxy {
                    caveats.push(format!(
                        "{text} (not failed: the EC2NodeClass's user data mentions a proxy, \
                         which may carry the traffic)"
                    ));
                } else {
                    c.fail(
                        reason,
                        text,
                        vec![
                            node_class.clone(),
                            SubjectRef::new("Subnet", &subnet.id),
                            SubjectRef::new("RouteTable", table),
                        ],
                    );
                }
            }
        }
    }
    (fine, caveats)
}

/// The account that shared `subnet`'s VPC with this one (AWS RAM), when it is another account
/// than the operator's: its NAT gateways and endpoints cannot be listed from here.
fn shared_by<'a>(ctx: &Context<'a>, subnet: &'a SubnetFacts) -> Option<&'a str> {
    let owner = subnet.owner_id.as_deref()?;
    match ctx.facts.aws.account.found() {
        Some(account) if account.account_id != owner => Some(owner),
        // The operator's account unknown: a foreign owner cannot be told from its own.
        _ => None,
    }
}

/// The network facts of `vpc`, or `None` after recording why they are unknown.
fn network_of<'a>(ctx: &Context<'a>, c: &mut Check, vpc: &str) -> Option<&'a VpcNetworkFacts> {
    match ctx.facts.aws.vpc_networks.get(vpc) {
        Some(Observed::Found(n)) => Some(n),
        Some(Observed::Unknown(u)) => {
            c.unknown(Why::unobserved(
                &format!("The network of {}", clip(vpc, 64)),
                u,
            ));
            None
        }
        Some(Observed::Absent) | None => {
            c.unknown(Why::new(
                Reason::NotObserved,
                format!("The network of {} has not been read yet.", clip(vpc, 64)),
            ));
            None
        }
    }
}

enum Path {
    Works,
    Caveat(String),
    /// (reason, message, route table id)
    Broken(Reason, String, String),
}

fn subnet_path(
    ctx: &Context,
    subnet: &SubnetFacts,
    network: &VpcNetworkFacts,
    ipv6: bool,
    associate: Option<bool>,
) -> Result<Path, Why> {
    let table = route_table_for(subnet, network)?;
    let public_ip = associate.unwrap_or(subnet.map_public_ip_on_launch);
    let shared_by = shared_by(ctx, subnet);
    let egress = egress(table, &network.nat_gateways, public_ip, ipv6, shared_by)?;
    let where_ = format!(
        "Subnet {} (route table {})",
        clip(&subnet.id, 64),
        clip(&table.id, 64)
    );
    match egress {
        Egress::Works => return Ok(Path::Works),
        Egress::Opaque(what) => return Ok(Path::Caveat(format!("{where_} has {what}"))),
        _ => {}
    }
    let endpoints = match &network.endpoints {
        Observed::Found(e) => e.as_slice(),
        Observed::Absent => &[],
        Observed::Unknown(u) => {
            return Err(Why::unobserved(
                &format!("The VPC endpoints of {}", clip(&subnet.vpc_id, 64)),
                u,
            ));
        }
    };
    let Some(region) = ctx.facts.aws.region.as_deref() else {
        return Err(Why::new(
            Reason::RegionUnknown,
            "The AWS region is not known, so the VPC endpoints' service names cannot be matched.",
        ));
    };
    let missing = missing_endpoints(endpoints, region, &table.id);
    if missing.is_empty() {
        return Ok(Path::Works);
    }
    let missing_text = list_bounded(&missing, 6);
    // What this account cannot list is not proven missing: the owner of a shared VPC may have
    // the NAT gateways and endpoints the path needs.
    if let Some(owner) = shared_by {
        return Ok(Path::Caveat(format!(
            "{where_}, in a VPC shared by account {}, shows no usable default route and no \
             endpoints {missing_text} from this account, which cannot list the owner's NAT \
             gateways and endpoints",
            clip(owner, 32)
        )));
    }
    Ok(broken_path(
        egress,
        &where_,
        &missing,
        &missing_text,
        table.id.clone(),
    ))
}

/// The route table that applies to `subnet`, or why it is not known.
fn route_table_for<'a>(
    subnet: &SubnetFacts,
    network: &'a VpcNetworkFacts,
) -> Result<&'a RouteTableFacts, Why> {
    let tables = match &network.route_tables {
        Observed::Found(t) => t.as_slice(),
        Observed::Absent => &[],
        Observed::Unknown(u) => {
            return Err(Why::unobserved(
                &format!("The route tables of {}", clip(&subnet.vpc_id, 64)),
                u,
            ));
        }
    };
    route_table_of(tables, &subnet.id).ok_or_else(|| {
        Why::new(
            Reason::NotObserved,
            format!(
                "No route table of {} applies to subnet {} (no explicit association and no main \
                 table in the answer).",
                clip(&subnet.vpc_id, 64),
                clip(&subnet.id, 64)
            ),
        )
    })
}

/// The broken path of a subnet whose egress does not work and whose VPC lacks the `missing`
/// endpoints: why, by what its default route is.
fn broken_path(
    egress: Egress,
    where_: &str,
    missing: &[String],
    missing_text: &str,
    table_id: String,
) -> Path {
    match egress {
        Egress::Blackholed(what) => Path::Broken(
            Reason::SubnetEgressBlackholed,
            format!(
                "{where_}: {what}, and the VPC lacks the endpoints {missing_text}, so nodes \
                 cannot reach AWS or the control plane."
            ),
            table_id,
        ),
        Egress::IgwWithoutPublicIp(igw) => Path::Broken(
            Reason::InternetGatewayWithoutPublicIp,
            format!(
                "{where_} routes to internet gateway {igw}, but the subnet does not map public \
                 IPv4 addresses and spec.associatePublicIPAddress is not true, so nodes get no \
                 public address and cannot use it; the VPC lacks the endpoints {missing_text}."
            ),
            table_id,
        ),
        _ if missing.len() == INTERFACE_ENDPOINTS.len() + 1
            && !missing.iter().any(|m| m.contains("private DNS")) =>
        {
            Path::Broken(
                Reason::SubnetNoEgressRoute,
                format!(
                    "{where_} has no default route to a NAT or internet gateway and the VPC has none \
                 of the endpoints a private cluster needs ({missing_text}), so nodes cannot \
                 reach AWS or the control plane."
                ),
                table_id,
            )
        }
        _ => Path::Broken(
            Reason::VpcEndpointsMissing,
            format!(
                "{where_} has no default route to a NAT or internet gateway and the VPC lacks \
                 the endpoints {missing_text}."
            ),
            table_id,
        ),
    }
}

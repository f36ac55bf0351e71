//! EC2 network reads of the observer: the subnets a class selects (cached per id set or per
//! selector term, so classes sharing selectors share the calls), the cluster's VPC when EKS's
//! answer lacks it, and per VPC its route tables, NAT gateways, endpoints and DNS attributes
//! (cached per VPC, whatever the number of classes). Does IO (through the EC2 port).
//!
//! The route tables are cached per VPC *and* set of subnets asked about: a class whose subnets
//! change (a new subnet, just associated with its route table) gets route tables read with them,
//! never an older answer in which the new subnet would fall back to the main table.
//!
//! Provides the facts `subnets`, `cluster_vpc` and `vpc_networks`.

use super::AwsObserver;
use super::fact_read::AsIs;
use super::shared::{because, not_observed, union_of_reads};
use crate::cache::{Cache, Read};
use crate::ports::{Ec2Api, Filter, Page, PortResult, Service, VpcAttribute};
use futures::future::BoxFuture;
use futures::future::join_all;
use futures::join;
use karpenter_health_api::karpenter::SelectorTerm;
use karpenter_health_checks::facts::{
    EksClusterFacts, NatGatewayFacts, Observed, RouteTableFacts, SubnetFacts, VpcEndpointFacts,
    VpcNetworkFacts,
};
use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hash;

/// One of the EC2 port's listings of a VPC's objects (one page per call).
type VpcListing<T> =
    for<'a> fn(&'a dyn Ec2Api, &'a [Filter], Option<String>) -> BoxFuture<'a, PortResult<Page<T>>>;

/// One DescribeSubnets question: the subnets with these ids, or those one selector term matches.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SubnetQuery {
    /// Sorted, de-duplicated ids.
    Ids(Vec<String>),
    Term(SelectorTerm),
}

impl SubnetQuery {
    /// The EC2 filters of the question; empty when it asks nothing.
    pub fn filters(&self) -> Vec<Filter> {
        match self {
            SubnetQuery::Ids(ids) if ids.is_empty() => Vec::new(),
            SubnetQuery::Ids(ids) => vec![Filter::new("subnet-id", ids)],
            SubnetQuery::Term(term) => {
                let mut filters = Vec::new();
                if let Some(id) = &term.id {
                    filters.push(Filter::new("subnet-id", [id]));
                }
                for (k, v) in &term.tags {
                    if v == "*" {
                        filters.push(Filter::new("tag-key", [k]));
                    } else {
                        filters.push(Filter::new(format!("tag:{k}"), [v]));
                    }
                }
                filters
            }
        }
    }
}

fn subject(filters: &[Filter]) -> String {
    filters
        .iter()
        .map(|f| format!("{}={}", f.name, f.values.join(",")))
        .collect::<Vec<_>>()
        .join(" ")
}

impl AwsObserver {
    async fn subnet_query(&self, query: SubnetQuery) -> Read<Vec<SubnetFacts>> {
        let this = self.clone();
        self.inner
            .subnets
            .get(query.clone(), move || async move {
                let ec2 = &this.inner.ec2;
                let filters = query.filters();
                let mut subnets = Vec::new();
                // Absent (InvalidSubnetID.NotFound): nothing more matches, as an empty page says.
                this.pages(
                    Service::Ec2,
                    "DescribeSubnets",
                    &subject(&filters),
                    |token| ec2.describe_subnets(&filters, token),
                    |page| subnets.extend(page),
                )
                .await?;
                Ok(Some(subnets))
            })
            .await
    }

    /// Provider of `subnets`: those Karpenter's status lists when it lists any, else the union of
    /// what each selector term matches (unknown if any term's answer is).
    pub(super) async fn subnets(
        &self,
        status_ids: &[String],
        terms: &[SelectorTerm],
    ) -> Read<Vec<SubnetFacts>> {
        let mut ids: Vec<String> = status_ids.to_vec();
        ids.sort();
        ids.dedup();
        let queries: Vec<SubnetQuery> = if ids.is_empty() {
            terms
                .iter()
                .map(|t| SubnetQuery::Term(t.clone()))
                .filter(|q| !q.filters().is_empty())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect()
        } else {
            vec![SubnetQuery::Ids(ids)]
        };
        let reads = join_all(queries.into_iter().map(|q| self.subnet_query(q))).await;
        let union = |all: Vec<SubnetFacts>| -> Vec<SubnetFacts> {
            let by_id: BTreeMap<String, SubnetFacts> =
                all.into_iter().map(|s| (s.id.clone(), s)).collect();
            by_id.into_values().collect()
        };
        union_of_reads(reads, union)
    }

    /// Provider of `vpc_networks`: the network of each VPC the class's subnets are in, read once
    /// per VPC whatever the number of classes (issue 12).
    pub(super) async fn vpc_networks(
        &self,
        subnets: &Read<Vec<SubnetFacts>>,
    ) -> AsIs<BTreeMap<String, Observed<VpcNetworkFacts>>> {
        let mut vpcs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for subnet in subnets.current.found().into_iter().flatten() {
            vpcs.entry(subnet.vpc_id.clone())
                .or_default()
                .push(subnet.id.clone());
        }
        let networks = join_all(vpcs.into_iter().map(|(vpc, mut ids)| async move {
            ids.sort();
            let network = self.vpc_network(&vpc, ids).await;
            (vpc, Observed::Found(network))
        }));
        AsIs(networks.await.into_iter().collect())
    }

    /// Provider of `cluster_vpc`: DescribeCluster's `vpcId`, else the VPC of the cluster's own
    /// subnets (one DescribeSubnets by id, cached like any id set).
    pub(super) async fn cluster_vpc(
        &self,
        eks: Option<&Read<EksClusterFacts>>,
    ) -> Observed<String> {
        let Some(eks) = eks else {
            return not_observed("Karpenter's cluster name is not known");
        };
        let cluster = match &eks.current {
            Observed::Found(c) => c,
            Observed::Absent => return Observed::Absent,
            Observed::Unknown(u) => {
                return Observed::Unknown(because("EKS cluster not read", u));
            }
        };
        if let Some(vpc) = cluster.vpc_id.as_deref().filter(|v| !v.is_empty()) {
            return Observed::Found(vpc.to_owned());
        }
        let mut ids = cluster.subnet_ids.clone();
        ids.sort();
        ids.dedup();
        if ids.is_empty() {
            return not_observed(format!(
                "EKS DescribeCluster {} gave neither a VPC nor subnets",
                cluster.name
            ));
        }
        match self.subnet_query(SubnetQuery::Ids(ids)).await.current {
            Observed::Found(subnets) => match subnets.first() {
                Some(s) => Observed::Found(s.vpc_id.clone()),
                None => not_observed(format!(
                    "none of the subnets of EKS cluster {} exists",
                    cluster.name
                )),
            },
            Observed::Absent => not_observed(format!(
                "none of the subnets of EKS cluster {} exists",
                cluster.name
            )),
            Observed::Unknown(u) => {
                Observed::Unknown(because("the cluster's subnets not read", &u))
            }
        }
    }

    /// The network of `vpc`: each part read (and cached) on its own, so a denied call leaves
    /// only its part unknown.
    async fn vpc_network(&self, vpc: &str, subnets: Vec<String>) -> VpcNetworkFacts {
        let (route_tables, nat_gateways, endpoints, dns_support, dns_hostnames) = join!(
            self.route_tables(vpc, subnets),
            self.nat_gateways(vpc),
            self.vpc_endpoints(vpc),
            self.vpc_attribute(vpc, VpcAttribute::EnableDnsSupport),
            self.vpc_attribute(vpc, VpcAttribute::EnableDnsHostnames),
        );
        VpcNetworkFacts {
            vpc_id: vpc.to_owned(),
            route_tables: route_tables.current,
            nat_gateways: nat_gateways.current,
            endpoints: endpoints.current,
            dns_support: dns_support.current,
            dns_hostnames: dns_hostnames.current,
        }
    }

    async fn route_tables(&self, vpc: &str, subnets: Vec<String>) -> Read<Vec<RouteTableFacts>> {
        let key = (vpc.to_owned(), subnets);
        self.vpc_listing(
            &self.inner.route_tables,
            key,
            vpc,
            "DescribeRouteTables",
            |ec2, f, t| ec2.describe_route_tables(f, t),
        )
        .await
    }

    async fn nat_gateways(&self, vpc: &str) -> Read<Vec<NatGatewayFacts>> {
        let key = vpc.to_owned();
        self.vpc_listing(
            &self.inner.nat_gateways,
            key,
            vpc,
            "DescribeNatGateways",
            |ec2, f, t| ec2.describe_nat_gateways(f, t),
        )
        .await
    }

    async fn vpc_endpoints(&self, vpc: &str) -> Read<Vec<VpcEndpointFacts>> {
        let key = vpc.to_owned();
        self.vpc_listing(
            &self.inner.vpc_endpoints,
            key,
            vpc,
            "DescribeVpcEndpoints",
            |ec2, f, t| ec2.describe_vpc_endpoints(f, t),
        )
        .await
    }

    /// Everything `list` (one of the EC2 port's listings) returns for `vpc`, every page, through
    /// `cache` under `key`.
    async fn vpc_listing<K, T>(
        &self,
        cache: &Cache<K, Vec<T>>,
        key: K,
        vpc: &str,
        operation: &'static str,
        list: VpcListing<T>,
    ) -> Read<Vec<T>>
    where
        K: Clone + Eq + Hash + Send + 'static,
        T: Clone + PartialEq + Send + 'static,
    {
        let this = self.clone();
        let vpc = vpc.to_owned();
        cache
            .get(key, move || async move {
                let ec2 = this.inner.ec2.as_ref();
                let filters = [Filter::new("vpc-id", [&vpc])];
                let mut all = Vec::new();
                this.pages(
                    Service::Ec2,
                    operation,
                    &vpc,
                    |token| list(ec2, &filters, token),
                    |page| all.extend(page),
                )
                .await?;
                Ok(Some(all))
            })
            .await
    }

    async fn vpc_attribute(&self, vpc: &str, attribute: VpcAttribute) -> Read<bool> {
        let this = self.clone();
        let vpc = vpc.to_owned();
        self.inner
            .vpc_attributes
            .get((vpc.clone(), attribute), move || async move {
                let ec2 = &this.inner.ec2;
                let subject = format!("{vpc} {}", attribute.as_str());
                this.load(
                    Service::Ec2,
                    "DescribeVpcAttribute",
                    &subject,
                    ec2.describe_vpc_attribute(&vpc, attribute),
                )
                .await
            })
            .await
    }
}

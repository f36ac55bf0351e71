//! EC2 reads of the observer: the security groups the selector terms select (cached per term,
//! so node classes sharing a term share its call) and the sweep of the cluster's Karpenter
//! instances (cached per cluster). Does IO (through the EC2 port); the filter builders are pure.
//!
//! Provides the facts `security_groups` and `cluster_instances`.

use super::AwsObserver;
use super::fact_read::Conditional;
use super::shared::union_of_reads;
use crate::cache::Read;
use crate::ports::{Filter, Service};
use futures::future::join_all;
use karpenter_health_api::karpenter::SelectorTerm;
use karpenter_health_checks::facts::{InstanceFacts, SecurityGroupFacts};
use std::collections::{BTreeMap, BTreeSet};

/// Instance states worth knowing: terminated instances are gone (and linger in answers for an
/// hour), so they only cost pages.
const LIVE_STATES: [&str; 5] = ["pending", "running", "stopping", "stopped", "shutting-down"];

/// EC2 filters for one selector term: fields ANDed, `*` meaning any value.
pub fn security_group_filters(term: &SelectorTerm) -> Vec<Filter> {
    let mut filters = Vec::new();
    if let Some(id) = &term.id {
        filters.push(Filter::new("group-id", [id]));
    }
    if let Some(name) = &term.name {
        filters.push(Filter::new("group-name", [name]));
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

/// The DescribeInstances queries of one sweep. Each query names a filter once: EC2 ANDs repeated
/// names, but emulators (moto) keep only the last one.
pub fn instance_filters(cluster: &str, also_eks_cluster_name_tag: bool) -> Vec<Vec<Filter>> {
    let common = |cluster_filter: Filter| {
        vec![
            cluster_filter,
            Filter::new("tag-key", ["karpenter.sh/nodepool"]),
            Filter::new("instance-state-name", LIVE_STATES),
        ]
    };
    let mut queries = vec![common(Filter::new(
        format!("tag:kubernetes.io/cluster/{cluster}"),
        ["owned"],
    ))];
    if also_eks_cluster_name_tag {
        queries.push(common(Filter::new("tag:eks:eks-cluster-name", [cluster])));
    }
    queries
}

/// `name=v1,v2 name2=v3`: what a query asked, for the detail of an unknown answer.
fn filters_subject(filters: &[Filter]) -> String {
    filters
        .iter()
        .map(|f| format!("{}={}", f.name, f.values.join(",")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Groups by id: terms may select the same group.
fn union(groups: impl IntoIterator<Item = SecurityGroupFacts>) -> Vec<SecurityGroupFacts> {
    let by_id: BTreeMap<String, SecurityGroupFacts> =
        groups.into_iter().map(|g| (g.id.clone(), g)).collect();
    by_id.into_values().collect()
}

impl AwsObserver {
    /// Provider of `security_groups`: the union of the selector terms' answers, unknown if any
    /// term's is, and with a last good answer only if every term has one (aged as its oldest).
    pub(super) async fn security_groups(
        &self,
        terms: &[SelectorTerm],
    ) -> Read<Vec<SecurityGroupFacts>> {
        let distinct: BTreeSet<&SelectorTerm> = terms
            .iter()
            .filter(|t| !security_group_filters(t).is_empty())
            .collect();
        let reads = join_all(
            distinct
                .into_iter()
                .map(|t| self.security_group_term(t.clone())),
        )
        .await;
        union_of_reads(reads, union)
    }

    async fn security_group_term(&self, term: SelectorTerm) -> Read<Vec<SecurityGroupFacts>> {
        let this = self.clone();
        self.inner
            .security_groups
            .get(term.clone(), move || async move {
                let ec2 = &this.inner.ec2;
                let filters = security_group_filters(&term);
                let mut groups = Vec::new();
                // Absent (InvalidGroup.NotFound / InvalidGroupId.Malformed): this term matches
                // nothing more, which the groups read so far already say.
                this.pages(
                    Service::Ec2,
                    "DescribeSecurityGroups",
                    &filters_subject(&filters),
                    |token| ec2.describe_security_groups(&filters, token),
                    |page| groups.extend(page),
                )
                .await?;
                // An empty match is a proven "nothing selected", so it is Found(empty), not Absent.
                Ok(Some(groups))
            })
            .await
    }

    /// Provider of `cluster_instances`, swept when Karpenter's cluster name is known.
    pub(super) async fn cluster_instances(
        &self,
        cluster: Option<&str>,
    ) -> Conditional<Read<Vec<InstanceFacts>>> {
        let read = match cluster {
            Some(c) => Some(self.instances(c).await),
            None => None,
        };
        Conditional::of_cluster(read)
    }

    async fn instances(&self, cluster: &str) -> Read<Vec<InstanceFacts>> {
        let this = self.clone();
        let cluster = cluster.to_owned();
        self.inner
            .instances
            .get(cluster.clone(), move || async move {
                let ec2 = &this.inner.ec2;
                let options = &this.inner.options;
                let page_size = options.instance_page_size.clamp(5, 1000);
                let mut by_id = BTreeMap::new();
                for filters in instance_filters(&cluster, options.sweep_eks_cluster_name_tag) {
                    // The cluster filter tells the queries apart; the others are the same.
                    let subject = filters_subject(&filters[..1]);
                    // Absent ends this query with what it found, like an empty page.
                    this.pages(
                        Service::Ec2,
                        "DescribeInstances",
                        &subject,
                        |token| ec2.describe_instances(&filters, page_size, token),
                        |page| by_id.extend(page.into_iter().map(|i| (i.id.clone(), i))),
                    )
                    .await?;
                }
                Ok(Some(by_id.into_values().collect()))
            })
            .await
    }
}

impl AwsObserver {}

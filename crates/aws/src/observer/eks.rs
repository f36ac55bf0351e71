//! EKS reads of the observer: the cluster (DescribeCluster) and the node role's access entries
//! (ListAccessEntries, then DescribeAccessEntry for the matching principals), cached by cluster
//! and role. Does IO (through the EKS port).
//!
//! Provides the facts `eks_cluster` and `node_role_access_entries`.

use super::AwsObserver;
use super::fact_read::Conditional;
use super::iam::{RoleReads, path_stripped_role_arn};
use super::shared::{Paged, because, not_observed};
use crate::cache::Read;
use crate::ports::Service;
use karpenter_health_checks::facts::{
    AccessEntryFacts, EksClusterFacts, Observed, UnknownCause, Unobserved,
};
use std::collections::BTreeSet;

impl AwsObserver {
    pub(super) async fn eks_cluster(&self, name: &str) -> Read<EksClusterFacts> {
        let this = self.clone();
        let name = name.to_owned();
        self.inner
            .clusters
            .get(name.clone(), move || async move {
                let eks = &this.inner.eks;
                this.load(
                    Service::Eks,
                    "DescribeCluster",
                    &name,
                    eks.describe_cluster(&name),
                )
                .await
            })
            .await
    }

    /// Provider of `eks_cluster`: the cluster Karpenter names, when its name is known.
    pub(super) async fn eks_cluster_fact(
        &self,
        cluster: Option<&str>,
    ) -> Conditional<Read<EksClusterFacts>> {
        let read = match cluster {
            Some(c) => Some(self.eks_cluster(c).await),
            None => None,
        };
        Conditional::of_cluster(read)
    }

    /// Provider of `node_role_access_entries`: the node role's access entries, else why there was
    /// no role to look them up by.
    pub(super) async fn node_role_access_entries(
        &self,
        cluster: Option<&str>,
        eks: Option<&Read<EksClusterFacts>>,
        role: &RoleReads,
    ) -> Conditional<Read<Vec<AccessEntryFacts>>> {
        let read = match self.access_entries(cluster, eks, role).await {
            Some(read) => Some(read),
            // Nothing was read: the reason is the answer, and there is no older one.
            None => role.access_blocked.clone().map(|why| Read {
                current: why,
                last_good: None,
            }),
        };
        Conditional::of_cluster(read)
    }

    /// The access entries of the node role, or `None` when there is no cluster or no role name
    /// to look them up by.
    async fn access_entries(
        &self,
        cluster: Option<&str>,
        eks: Option<&Read<EksClusterFacts>>,
        role: &RoleReads,
    ) -> Option<Read<Vec<AccessEntryFacts>>> {
        let fixed = |current| Some(Read::answered(current));
        let not_read =
            |u: &Unobserved| fixed(Observed::Unknown(because("access entries not read", u)));
        let (Some(cluster), Some(eks)) = (cluster, eks) else {
            return None;
        };
        match &eks.current {
            Observed::Found(c) if c.authentication_mode.as_deref() == Some("CONFIG_MAP") => {
                // Proven by DescribeCluster: a CONFIG_MAP cluster has no access entries (the mode
                // only ever moves towards API, so none were made before either).
                return fixed(Observed::Found(Vec::new()));
            }
            Observed::Found(_) => {}
            Observed::Absent => {
                return fixed(not_observed(format!(
                    "EKS cluster {cluster} does not exist"
                )));
            }
            Observed::Unknown(u) => return not_read(u),
        }
        let (role_arn, role_name) = match role.role.as_ref().map(|r| &r.role.current) {
            Some(Observed::Found(r)) => (r.arn.clone(), r.name.clone()),
            Some(Observed::Absent) => {
                return fixed(not_observed(
                    "no access entries read: the node role does not exist",
                ));
            }
            Some(Observed::Unknown(u)) => return not_read(u),
            None => return None,
        };
        let read = self.access_entries_of(cluster, role_arn, role_name).await;
        Some(match read.current {
            // ListAccessEntries is never "absent" here (mapped above); keep the type honest.
            Observed::Absent => Read {
                current: Observed::Found(Vec::new()),
                ..read
            },
            _ => read,
        })
    }

    /// The access entries of `cluster` whose principal is the role (with or without its path),
    /// cached by cluster and role ARN.
    async fn access_entries_of(
        &self,
        cluster: &str,
        role_arn: String,
        role_name: String,
    ) -> Read<Vec<AccessEntryFacts>> {
        let this = self.clone();
        let key = (cluster.to_owned(), role_arn.clone());
        let cluster = cluster.to_owned();
        self.inner
            .access
            .get(key, move || async move {
                let eks = &this.inner.eks;
                let mut wanted = BTreeSet::from([role_arn.clone()]);
                wanted.extend(path_stripped_role_arn(&role_arn, &role_name));
                let op = "ListAccessEntries";
                let mut matching = Vec::new();
                let listed = this
                    .pages(
                        Service::Eks,
                        op,
                        &cluster,
                        |token| eks.list_access_entries(&cluster, token),
                        |page| matching.extend(page.into_iter().filter(|a| wanted.contains(a))),
                    )
                    .await?;
                if listed == Paged::Absent {
                    // The cluster vanished between the calls: nothing proven about entries.
                    return Err(Unobserved {
                        cause: UnknownCause::NotObserved,
                        detail: format!("EKS {op} {cluster}: cluster not found"),
                    });
                }
                let mut entries = Vec::new();
                for arn in matching {
                    let op = "DescribeAccessEntry";
                    let entry = this
                        .load(
                            Service::Eks,
                            op,
                            &arn,
                            eks.describe_access_entry(&cluster, &arn),
                        )
                        .await?;
                    // Absent: deleted since the listing; it is gone either way.
                    entries.extend(entry);
                }
                entries.sort_by(|a, b| a.principal_arn.cmp(&b.principal_arn));
                Ok(Some(entries))
            })
            .await
    }
}

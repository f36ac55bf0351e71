//! EKS Pod Identity reads of the observer: the IAM roles a ServiceAccount gets from a Pod Identity
//! association (ListPodIdentityAssociations, then DescribePodIdentityAssociation: the role, and a
//! target role when the association chains to one), cached by cluster and ServiceAccount. Karpenter's getting-started guide sets the controller's and the
//! VPC CNI's roles up this way, without IRSA annotations. Does IO (through the EKS port).

use super::AwsObserver;
use super::shared::{Paged, because, not_observed};
use crate::cache::Read;
use crate::ports::{PodIdentityRoles, Service, ServiceAccountRef};
use karpenter_health_checks::facts::{EksClusterFacts, Observed, UnknownCause, Unobserved};
use std::collections::BTreeMap;

impl AwsObserver {
    /// The roles Pod Identity gives `service_account` in `cluster`: `Found(None)` when it has no
    /// association. `None` when there is no cluster to ask (the facade reports why).
    pub(super) async fn pod_identity_role(
        &self,
        cluster: Option<&str>,
        eks: Option<&Read<EksClusterFacts>>,
        service_account: &ServiceAccountRef,
    ) -> Option<Read<Option<PodIdentityRoles>>> {
        let fixed = |current| Some(Read::answered(current));
        let (Some(cluster), Some(eks)) = (cluster, eks) else {
            return None;
        };
        match &eks.current {
            Observed::Found(_) => {}
            Observed::Absent => {
                return fixed(not_observed(format!(
                    "EKS cluster {cluster} does not exist"
                )));
            }
            Observed::Unknown(u) => {
                return fixed(Observed::Unknown(because(
                    "Pod Identity associations not read",
                    u,
                )));
            }
        }
        let this = self.clone();
        let key = (cluster.to_owned(), service_account.clone());
        let (cluster, service_account) = (cluster.to_owned(), service_account.clone());
        let read = self
            .inner
            .pod_identity
            .get(key, move || async move {
                let eks = &this.inner.eks;
                let op = "ListPodIdentityAssociations";
                let subject = format!("{cluster} {service_account}");
                let mut ids = Vec::new();
                let listed = this
                    .pages(
                        Service::Eks,
                        op,
                        &subject,
                        |token| {
                            eks.list_pod_identity_associations(&cluster, &service_account, token)
                        },
                        |page| ids.extend(page),
                    )
                    .await?;
                if listed == Paged::Absent {
                    return Err(Unobserved {
                        cause: UnknownCause::NotObserved,
                        detail: format!("EKS {op} {cluster}: cluster not found"),
                    });
                }
                // EKS allows one association per ServiceAccount.
                let Some(id) = ids.into_iter().next() else {
                    return Ok(Some(None));
                };
                let role = this
                    .load(
                        Service::Eks,
                        "DescribePodIdentityAssociation",
                        &id,
                        eks.describe_pod_identity_association(&cluster, &id),
                    )
                    .await?;
                // Absent: deleted since the listing, so no role now.
                Ok(Some(role))
            })
            .await;
        Some(read)
    }
}

/// The role each ServiceAccount's Pods get, by `namespace/name`.
pub(super) type EffectiveRoles = BTreeMap<String, Observed<Option<String>>>;

/// The Pod Identity facts of the reads: each ServiceAccount's effective role (the target role when
/// the association chains to one), and the association's own role where it does.
pub(super) fn pod_identity_facts<'a>(
    reads: impl IntoIterator<Item = (String, Observed<Option<PodIdentityRoles>>)> + 'a,
) -> (EffectiveRoles, BTreeMap<String, String>) {
    let mut roles = BTreeMap::new();
    let mut via = BTreeMap::new();
    for (sa, read) in reads {
        if let Observed::Found(Some(r)) = &read
            && r.target_role_arn.is_some()
        {
            via.insert(sa.clone(), r.role_arn.clone());
        }
        roles.insert(sa, read.map(|r| r.map(|r| r.effective().to_owned())));
    }
    (roles, via)
}

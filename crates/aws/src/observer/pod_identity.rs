//! EKS Pod Identity reads of the observer: the IAM role a ServiceAccount gets from a Pod Identity
//! association (ListPodIdentityAssociations, then DescribePodIdentityAssociation), cached by
//! cluster and ServiceAccount. Karpenter's getting-started guide sets the controller's and the
//! VPC CNI's roles up this way, without IRSA annotations. Does IO (through the EKS port).

use super::AwsObserver;
use super::shared::{Paged, because, not_observed};
use crate::cache::Read;
use crate::ports::{Service, ServiceAccountRef};
use karpenter_health_checks::facts::{EksClusterFacts, Observed, UnknownCause, Unobserved};

impl AwsObserver {
    /// The role Pod Identity gives `service_account` in `cluster`: `Found(None)` when it has no
    /// association. `None` when there is no cluster to ask (the facade reports why).
    pub(super) async fn pod_identity_role(
        &self,
        cluster: Option<&str>,
        eks: Option<&Read<EksClusterFacts>>,
        service_account: &ServiceAccountRef,
    ) -> Option<Read<Option<String>>> {
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

//! EKS Pod Identity reads of the observer: the IAM roles a ServiceAccount gets from a Pod Identity
//! association (ListPodIdentityAssociations, then DescribePodIdentityAssociation: the role, and a
//! target role when the association chains to one), cached by cluster and ServiceAccount. Karpenter's getting-started guide sets the controller's and the
//! VPC CNI's roles up this way, without IRSA annotations. Does IO (through the EKS port).
//!
//! Provides the facts `pod_identity_roles` and `pod_identity_via`.

use super::fact_read::{FactRead, note};
use super::shared::{Paged, because, good, no_cluster, not_observed};
use super::{AwsObserver, AwsRequest, StaleFact};
use crate::cache::Read;
use crate::ports::{PodIdentityRoles, Service, ServiceAccountRef};
use futures::future::join_all;
use karpenter_health_checks::facts::{EksClusterFacts, Observed, UnknownCause, Unobserved};
use std::collections::BTreeMap;

impl AwsObserver {
    /// The roles Pod Identity gives `service_account` in `cluster`: `Found(None)` when it has no
    /// association. `None` when there is no cluster to ask.
    async fn pod_identity_role(
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

/// What Pod Identity gives each ServiceAccount asked about, in the order asked: `None` where
/// there was no cluster to ask.
type Reads = Vec<(ServiceAccountRef, Option<Read<Option<PodIdentityRoles>>>)>;

/// The role each ServiceAccount's Pods get, by `namespace/name`.
type RolesByServiceAccount = BTreeMap<String, Observed<Option<String>>>;

/// The association's own role, by `namespace/name`, where it chains to a target role.
type ViaByServiceAccount = BTreeMap<String, String>;

/// The `pod_identity_roles` fact: the role each ServiceAccount's Pods get (the target role when
/// the association chains to one), by `namespace/name`.
pub(super) struct EffectiveRoles(Reads);

/// The `pod_identity_via` fact: the association's own role where it chains to a target role.
pub(super) struct ViaRoles(Reads);

impl EffectiveRoles {
    /// The role the Pods of `service_account` get, as read now.
    pub(super) fn of(&self, service_account: &ServiceAccountRef) -> Option<String> {
        self.0
            .iter()
            .find(|(asked, _)| asked == service_account)
            .and_then(|(_, read)| read.as_ref()?.current.found().cloned().flatten())
            .map(|roles| roles.effective().to_owned())
    }
}

fn current(reads: &Reads) -> impl Iterator<Item = (String, Observed<Option<PodIdentityRoles>>)> {
    reads.iter().map(|(sa, read)| {
        let current = read.as_ref().map_or_else(no_cluster, |r| r.current.clone());
        (sa.to_string(), current)
    })
}

fn last_good(reads: &Reads) -> impl Iterator<Item = (String, Observed<Option<PodIdentityRoles>>)> {
    reads.iter().map(|(sa, read)| {
        let good = read.as_ref().and_then(good).unwrap_or_default();
        (sa.to_string(), good)
    })
}

impl FactRead for EffectiveRoles {
    type Field = RolesByServiceAccount;

    fn current(&self) -> Self::Field {
        pod_identity_facts(current(&self.0)).0
    }

    fn last_good(&self) -> Self::Field {
        pod_identity_facts(last_good(&self.0)).0
    }

    fn note_stale(&self, fact: &'static str, stale: &mut Vec<StaleFact>) {
        for (_, read) in &self.0 {
            note(stale, fact, read.as_ref().and_then(Read::stale_age));
        }
    }
}

impl FactRead for ViaRoles {
    type Field = ViaByServiceAccount;

    fn current(&self) -> Self::Field {
        pod_identity_facts(current(&self.0)).1
    }

    fn last_good(&self) -> Self::Field {
        pod_identity_facts(last_good(&self.0)).1
    }

    /// Noted with `pod_identity_roles`, read by the same calls.
    fn note_stale(&self, _fact: &'static str, _stale: &mut Vec<StaleFact>) {}
}

impl AwsObserver {
    /// Provider of `pod_identity_roles` and `pod_identity_via`: one read per ServiceAccount the
    /// request names, all at once.
    pub(super) async fn pod_identities(
        &self,
        request: &AwsRequest,
        cluster: Option<&str>,
        eks: Option<&Read<EksClusterFacts>>,
    ) -> (EffectiveRoles, ViaRoles) {
        let reads = request
            .pod_identity_service_accounts
            .iter()
            .map(|sa| async move { (sa.clone(), self.pod_identity_role(cluster, eks, sa).await) });
        let reads = join_all(reads).await;
        (EffectiveRoles(reads.clone()), ViaRoles(reads))
    }
}

/// The Pod Identity facts of the reads: each ServiceAccount's effective role (the target role when
/// the association chains to one), and the association's own role where it does.
fn pod_identity_facts(
    reads: impl IntoIterator<Item = (String, Observed<Option<PodIdentityRoles>>)>,
) -> (RolesByServiceAccount, ViaByServiceAccount) {
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

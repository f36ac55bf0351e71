//! The Karpenter controller's role for `ControllerCanLaunch`: which role it is (its IRSA
//! annotation's, else its Pod Identity association's), the role itself (GetRole, not asked of a
//! role in another account) and, when the permission questions can be built from the answers read
//! before, what the role may do. Does IO (through the IAM port), every read cached.
//!
//! Provides the facts `controller_role` and `controller_permissions`. The reads it drives live
//! one concept a file:
//! - `identity.rs`: roles by name and the account's OIDC providers (`oidc_providers`,
//!   `spot_service_linked_role`);
//! - `simulation.rs`: IAM's answers to the permission questions (SimulatePrincipalPolicy);
//! - `sharing.rs`: which questions of two classes may share one answer (pure);
//! - `policies.rs`: the role's own policies and permissions boundary as documents.

mod identity;
mod policies;
mod sharing;
mod simulation;

pub use simulation::simulations;

use super::fact_read::{AsIs, FactRead, mapped};
use super::iam::RoleReads;
use super::pod_identity::EffectiveRoles;
use super::shared::because;
use super::{AwsObserver, AwsRequest};
use crate::cache::Read;
use crate::ports::RoleData;
use karpenter_health_checks::facts::{
    AccountFacts, ControllerRoleFacts, EksClusterFacts, Observed, PermissionFacts, UnknownCause,
    Unobserved,
};
use karpenter_health_checks::karpenter_permissions::Inputs;

/// The controller's reads.
struct ControllerReads {
    role: Read<RoleData>,
    permissions: Option<PermissionFacts>,
}

fn role_facts(data: &RoleData) -> ControllerRoleFacts {
    ControllerRoleFacts {
        name: data.name.clone(),
        arn: data.arn.clone(),
        assume_role_policy_document: data.assume_role_policy_document.clone(),
        permissions_boundary_arn: data.permissions_boundary_arn.clone(),
    }
}

/// The controller's role ARN: its IRSA annotation's, else the role its Pod Identity association
/// gives it (read just before).
pub(super) fn controller_role_arn(
    request: &AwsRequest,
    pod_identity: &EffectiveRoles,
) -> Option<String> {
    request.controller.as_ref().and_then(|c| {
        c.irsa_role_arn
            .clone()
            .or_else(|| pod_identity.of(c.service_account.as_ref()?))
    })
}

fn unobserved(detail: &str) -> Unobserved {
    Unobserved {
        cause: UnknownCause::NotObserved,
        detail: detail.to_owned(),
    }
}

/// The answers the permission questions are built from, read before them.
#[derive(Clone, Copy)]
pub(super) struct EarlierAnswers<'a> {
    pub(super) account: &'a Read<AccountFacts>,
    pub(super) node_role: &'a RoleReads,
    pub(super) eks: Option<&'a Read<EksClusterFacts>>,
}

impl AwsObserver {
    /// Provider of `controller_role` and `controller_permissions`: the controller's role, when
    /// one is known, and what it may do.
    pub(super) async fn controller_facts(
        &self,
        request: &AwsRequest,
        role_arn: Option<&str>,
        earlier: EarlierAnswers<'_>,
    ) -> (
        Option<Read<ControllerRoleFacts>>,
        AsIs<Option<PermissionFacts>>,
    ) {
        let Some(arn) = role_arn else {
            return (None, AsIs(None));
        };
        let own = earlier
            .account
            .current
            .found()
            .map(|a| a.account_id.as_str());
        let inputs = self.permission_inputs(request, &earlier);
        let reads = self.controller(arn, own, inputs).await;
        let role = mapped(reads.role, |data| role_facts(&data));
        (Some(role), AsIs(reads.permissions))
    }

    /// The permission questions of the class: the cluster side from the request, the account,
    /// region and node role from AWS.
    fn permission_inputs(
        &self,
        request: &AwsRequest,
        earlier: &EarlierAnswers<'_>,
    ) -> Result<Inputs, Unobserved> {
        let class = request
            .controller
            .as_ref()
            .and_then(|c| c.class.clone())
            .ok_or_else(|| unobserved("Karpenter's cluster name is not known"))?;
        let account = match &earlier.account.current {
            Observed::Found(a) => a,
            Observed::Unknown(u) => return Err(because("account not read", u)),
            Observed::Absent => return Err(unobserved("the AWS account is not known")),
        };
        let region = self
            .inner
            .region
            .as_deref()
            .ok_or_else(|| unobserved("the AWS region is not known"))?;
        let node_role = match earlier.node_role.current() {
            Some(Observed::Found(r)) => r.arn,
            Some(Observed::Unknown(u)) => {
                return Err(because("node role not read", &u));
            }
            _ => return Err(unobserved("the node role is not known in IAM")),
        };
        // The minor the alias's parameters are read for (`amis.rs`), which names the
        // parameter the controller must be allowed to read.
        let minor = super::amis::kubernetes_minor(
            earlier.eks.map(|r| &r.current),
            request.apiserver_version.as_deref(),
        )
        .ok()
        .flatten();
        Ok(class.complete(
            &account.partition,
            &account.account_id,
            region,
            &node_role,
            minor.as_deref(),
        ))
    }

    /// The controller role and, when `inputs` are known, what it may do. A role of another
    /// account than `own_account` is not read: IAM's GetRole takes a name and looks in the
    /// caller's account, so it would answer NoSuchEntity for a role that exists elsewhere.
    async fn controller(
        &self,
        role_arn: &str,
        own_account: Option<&str>,
        inputs: Result<Inputs, Unobserved>,
    ) -> ControllerReads {
        if let (Ok(parsed), Some(own)) = (
            karpenter_health_checks::arn::parse_iam(role_arn),
            own_account,
        ) && parsed.account != own
        {
            return ControllerReads {
                role: Read::answered(Observed::Unknown(Unobserved {
                    cause: UnknownCause::OtherAccount,
                    detail: format!(
                        "role {role_arn} is in account {}, and IAM in account {own} cannot read it",
                        parsed.account
                    ),
                })),
                permissions: None,
            };
        }
        let role_name = karpenter_health_checks::arn::name_of(role_arn).to_owned();
        let role = self.role(&role_name).await;
        let data = match &role.current {
            Observed::Found(data) => data.clone(),
            _ => {
                return ControllerReads {
                    role,
                    permissions: None,
                };
            }
        };
        let inputs = match inputs {
            Ok(i) => i,
            Err(u) => {
                return ControllerReads {
                    role,
                    permissions: Some(PermissionFacts {
                        simulated: Observed::Unknown(u),
                        policies: None,
                    }),
                };
            }
        };
        let simulated = self.simulate(&data, &inputs).await;
        let policies = match &simulated {
            Observed::Unknown(_) => Some(self.role_policies(&data).await),
            _ => None,
        };
        ControllerReads {
            role,
            permissions: Some(PermissionFacts {
                simulated,
                policies,
            }),
        }
    }
}

//! IAM identity reads: a role by name (GetRole, through the shared role cache) and the account's
//! OIDC providers (ListOpenIDConnectProviders), read when the controller uses IRSA; also the spot
//! service-linked role for `SpotReady`. Does IO (through the IAM port), every read cached.
//!
//! Provides the facts `oidc_providers` and `spot_service_linked_role`.

use crate::cache::Read;
use crate::observer::fact_read::{Conditional, Unlisted, mapped};
use crate::observer::{AwsObserver, AwsRequest};
use crate::ports::{RoleData, Service};

impl AwsObserver {
    /// Provider of `oidc_providers`, read when the controller uses IRSA.
    pub(in crate::observer) async fn oidc_providers_fact(
        &self,
        request: &AwsRequest,
    ) -> Unlisted<Conditional<Read<Vec<String>>>> {
        let wants_irsa = request
            .controller
            .as_ref()
            .is_some_and(|c| c.irsa_role_arn.is_some());
        let read = if wants_irsa {
            Some(self.oidc_providers().await)
        } else {
            None
        };
        Unlisted(Conditional::if_asked(read))
    }

    /// Provider of `spot_service_linked_role`: its ARN, read when a NodePool allows spot.
    pub(in crate::observer) async fn spot_service_linked_role(
        &self,
        request: &AwsRequest,
    ) -> Unlisted<Option<Read<String>>> {
        let read = if request.spot_service_linked_role {
            Some(
                self.role(karpenter_health_checks::plan::request::SPOT_SERVICE_LINKED_ROLE)
                    .await,
            )
        } else {
            None
        };
        Unlisted(read.map(|role| mapped(role, |role| role.arn)))
    }

    /// A role by name, through the shared role cache.
    pub(in crate::observer) async fn role(&self, name: &str) -> Read<RoleData> {
        let this = self.clone();
        let name = name.to_owned();
        self.inner
            .roles
            .get(name.clone(), move || async move {
                let iam = &this.inner.iam;
                this.load(Service::Iam, "GetRole", &name, iam.get_role(&name))
                    .await
            })
            .await
    }

    async fn oidc_providers(&self) -> Read<Vec<String>> {
        let this = self.clone();
        self.inner
            .oidc_providers
            .get((), move || async move {
                let iam = &this.inner.iam;
                let mut arns = this
                    .load(
                        Service::Iam,
                        "ListOpenIDConnectProviders",
                        "",
                        iam.list_open_id_connect_providers(),
                    )
                    .await?;
                if let Some(arns) = arns.as_mut() {
                    arns.sort();
                }
                Ok(arns)
            })
            .await
    }
}

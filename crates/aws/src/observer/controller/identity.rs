//! IAM identity reads: a role by name (GetRole, through the shared role cache) and the account's
//! OIDC providers (ListOpenIDConnectProviders), read when the controller uses IRSA. Does IO
//! (through the IAM port), every read cached.
//!
//! Provides the fact `oidc_providers` (the spot service-linked role is read through the role
//! cache by `providers/spot_service_linked_role.rs`).

use crate::cache::Read;
use crate::observer::fact_read::{Conditional, Unlisted};
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

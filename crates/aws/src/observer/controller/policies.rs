//! The controller role's own policies as documents: inline (ListRolePolicies, then GetRolePolicy
//! each), attached (ListAttachedRolePolicies, then GetPolicy and GetPolicyVersion each) and its
//! permissions boundary. They say whether a simulation may be shared, and are evaluated when the
//! simulator cannot be asked. Does IO (through the IAM port), every read cached.

use crate::cache::Read;
use crate::observer::AwsObserver;
use crate::observer::shared::{Paged, because, not_observed};
use crate::ports::{RoleData, Service};
use futures::future::join_all;
use karpenter_health_checks::facts::{Observed, PolicyDocument, RolePolicies};

impl AwsObserver {
    /// The role's inline policies, as documents (ListRolePolicies, then GetRolePolicy each).
    async fn inline_policies(&self, name: String) -> Read<Vec<PolicyDocument>> {
        let this = self.clone();
        self.inner
            .inline_policies
            .get(name.clone(), move || async move {
                let iam = &this.inner.iam;
                let mut names = Vec::new();
                let listed = this
                    .pages(
                        Service::Iam,
                        "ListRolePolicies",
                        &name,
                        |marker| iam.list_role_policies(&name, marker),
                        |page| names.extend(page),
                    )
                    .await?;
                if listed == Paged::Absent {
                    return Ok(None);
                }
                let mut docs = Vec::new();
                for policy in names {
                    let doc = this
                        .load(
                            Service::Iam,
                            "GetRolePolicy",
                            &format!("{name} {policy}"),
                            iam.get_role_policy(&name, &policy),
                        )
                        .await?;
                    if let Some(document) = doc {
                        docs.push(PolicyDocument {
                            name: format!("inline policy {policy}"),
                            document,
                        });
                    }
                }
                Ok(Some(docs))
            })
            .await
    }

    /// The role's inline and attached policies and its boundary, as documents.
    pub(super) async fn role_policies(&self, role: &RoleData) -> Observed<RolePolicies> {
        let name = role.name.clone();
        let inline = self.inline_policies(name.clone());
        let attached = self.attached_policies(name.clone());
        let (inline, attached) = futures::join!(inline, attached);
        let inline = match inline.current {
            Observed::Found(d) => d,
            Observed::Absent => return Observed::Absent,
            Observed::Unknown(u) => {
                return Observed::Unknown(because("inline policies not read", &u));
            }
        };
        let attached = match attached.current {
            Observed::Found(a) => a,
            Observed::Absent => return Observed::Absent,
            Observed::Unknown(u) => {
                return Observed::Unknown(because("attached policies not read", &u));
            }
        };
        let mut identity = inline;
        let managed = join_all(attached.iter().map(|arn| self.managed_policy(arn))).await;
        for (arn, doc) in attached.iter().zip(managed) {
            match doc {
                Observed::Found(document) => identity.push(PolicyDocument {
                    name: arn.clone(),
                    document,
                }),
                // Detached or deleted since the listing: it grants nothing now.
                Observed::Absent => {}
                Observed::Unknown(u) => return Observed::Unknown(u),
            }
        }
        let boundary = match &role.permissions_boundary_arn {
            None => None,
            Some(arn) => match self.managed_policy(arn).await {
                Observed::Found(document) => Some(PolicyDocument {
                    name: format!("permissions boundary {arn}"),
                    document,
                }),
                Observed::Absent => {
                    return not_observed(format!("permissions boundary {arn} not found"));
                }
                Observed::Unknown(u) => return Observed::Unknown(u),
            },
        };
        Observed::Found(RolePolicies { identity, boundary })
    }

    /// A managed policy's default version's document (GetPolicy, then GetPolicyVersion).
    async fn managed_policy(&self, arn: &str) -> Observed<String> {
        let this = self.clone();
        let arn = arn.to_owned();
        self.inner
            .managed_policies
            .get(arn.clone(), move || async move {
                let iam = &this.inner.iam;
                let Some(version) = this
                    .load(Service::Iam, "GetPolicy", &arn, iam.get_policy(&arn))
                    .await?
                else {
                    return Ok(None);
                };
                this.load(
                    Service::Iam,
                    "GetPolicyVersion",
                    &arn,
                    iam.get_policy_version(&arn, &version),
                )
                .await
            })
            .await
            .current
    }
}

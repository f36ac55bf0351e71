//! IAM reads of the observer: the instance profile, the node role (named in the spec or found
//! through the profile) and its attached managed policies, each cached by name. Does IO (through
//! the IAM port).
//!
//! An ARN given where Karpenter wants a name (`spec.instanceProfile`, `spec.role`) is looked up by
//! the name in it: the engine reports the ARN itself, and every other answer about the object
//! comes from IAM (an ARN naming an existing profile is never "does not exist"). Any other name
//! is asked as given; IAM's `ValidationError` for a name it cannot hold is its answer that no
//! such object exists. Nothing is answered without a call.

use super::fact_read::{FactRead, note};
use super::shared::{Paged, because, good, not_observed};
use super::{AwsObserver, AwsRequest, StaleFact};
use crate::cache::Read;
use crate::ports::{RoleData, Service};
use futures::join;
use karpenter_health_checks::arn;
use karpenter_health_checks::facts::{
    AccessEntryFacts, InstanceProfileFacts, Observed, RoleFacts, Unobserved,
};

/// The name to ask IAM for: the name inside an ARN of `resource_type`, else `given` itself.
fn lookup_name(given: &str, resource_type: &str) -> String {
    let given = given.trim();
    match arn::parse_iam(given) {
        Ok(parsed) if parsed.resource_type == resource_type && !parsed.name.is_empty() => {
            parsed.name
        }
        _ => given.to_owned(),
    }
}

/// The node role's reads, and why access entries could not be looked up if so.
#[derive(Default)]
pub(super) struct RoleReads {
    /// `None`: no role name known (no `spec.role`; profile absent, without a role, or not asked).
    pub(super) role: Option<RoleRead>,
    /// The role name could not be determined (the profile read failed).
    undetermined: Option<Unobserved>,
    /// Set when access entries cannot be looked up for lack of a role ARN.
    pub(super) access_blocked: Option<Observed<Vec<AccessEntryFacts>>>,
}

pub(super) struct RoleRead {
    pub(super) role: Read<RoleData>,
    pub(super) attached: Read<Vec<String>>,
}

fn role_facts(role: RoleData, attached: Observed<Vec<String>>) -> RoleFacts {
    RoleFacts {
        name: role.name,
        arn: role.arn,
        path: role.path,
        assume_role_policy_document: role.assume_role_policy_document,
        attached_policy_arns: attached,
    }
}

impl RoleReads {
    fn no_role(why: &str) -> Self {
        Self {
            role: None,
            undetermined: None,
            access_blocked: Some(not_observed(format!("no node role to look up: {why}"))),
        }
    }
}

impl FactRead for RoleReads {
    type Field = Option<Observed<RoleFacts>>;

    fn current(&self) -> Option<Observed<RoleFacts>> {
        if let Some(u) = &self.undetermined {
            return Some(Observed::Unknown(u.clone()));
        }
        let r = self.role.as_ref()?;
        Some(
            r.role
                .current
                .clone()
                .map(|data| role_facts(data, r.attached.current.clone())),
        )
    }

    fn last_good(&self) -> Option<Observed<RoleFacts>> {
        if self.undetermined.is_some() && self.role.is_none() {
            return Some(Observed::default());
        }
        let r = self.role.as_ref()?;
        let attached = || good(&r.attached).unwrap_or_default();
        Some(match &r.role.last_good {
            Some((obs, _)) => obs.clone().map(|data| role_facts(data, attached())),
            None => Observed::default(),
        })
    }

    /// The role and, on its own, the list of its attached policies (a nested field).
    fn note_stale(&self, fact: &'static str, stale: &mut Vec<StaleFact>) {
        if let Some(r) = &self.role {
            note(stale, fact, r.role.stale_age());
            note(
                stale,
                "node_role.attached_policy_arns",
                r.attached.stale_age(),
            );
        }
    }
}

/// `arn:aws:iam::1:role/a/b/Name` -> `arn:aws:iam::1:role/Name` (aws-auth and access entries
/// are often written without the path).
pub(super) fn path_stripped_role_arn(arn: &str, name: &str) -> Option<String> {
    let (prefix, _) = arn.split_once(":role/")?;
    Some(format!("{prefix}:role/{name}"))
}

impl AwsObserver {
    /// Provider of `instance_profile` and `node_role`: the profile, and the role the spec names
    /// (read alongside) or else the profile's role (read after it).
    pub(super) async fn node_identity(
        &self,
        request: &AwsRequest,
    ) -> (Option<Read<InstanceProfileFacts>>, RoleReads) {
        let profile = async {
            match request
                .instance_profile
                .as_deref()
                .filter(|p| !p.is_empty())
            {
                Some(name) => Some(self.instance_profile(name).await),
                None => None,
            }
        };
        match request.role.as_deref().filter(|r| !r.is_empty()) {
            // The role is named: no need to wait for the profile.
            Some(role) => join!(profile, self.node_role(Some(role), None)),
            None => {
                let profile = profile.await;
                let role = self.node_role(None, profile.as_ref()).await;
                (profile, role)
            }
        }
    }

    pub(super) async fn instance_profile(&self, given: &str) -> Read<InstanceProfileFacts> {
        let this = self.clone();
        let name = lookup_name(given, "instance-profile");
        self.inner
            .profiles
            .get(name.clone(), move || async move {
                let iam = &this.inner.iam;
                this.load(
                    Service::Iam,
                    "GetInstanceProfile",
                    &name,
                    iam.get_instance_profile(&name),
                )
                .await
            })
            .await
    }

    pub(super) async fn node_role(
        &self,
        spec_role: Option<&str>,
        profile: Option<&Read<InstanceProfileFacts>>,
    ) -> RoleReads {
        let name = match spec_role.filter(|r| !r.is_empty()) {
            Some(r) => lookup_name(r, "role"),
            None => match profile.map(|p| &p.current) {
                Some(Observed::Found(p)) => match p.roles.first() {
                    Some(role) => role.name.clone(),
                    None => return RoleReads::no_role("the instance profile has no role"),
                },
                Some(Observed::Unknown(u)) => {
                    let u = because("node role not determined", u);
                    return RoleReads {
                        role: None,
                        undetermined: Some(u.clone()),
                        access_blocked: Some(Observed::Unknown(u)),
                    };
                }
                Some(Observed::Absent) => {
                    return RoleReads::no_role("the instance profile does not exist");
                }
                None => return RoleReads::no_role("no node role or instance profile is known"),
            },
        };
        let attached = self.attached_policies(name.clone());
        let this = self.clone();
        let key = name.clone();
        let role = self.inner.roles.get(key, move || async move {
            let iam = &this.inner.iam;
            this.load(Service::Iam, "GetRole", &name, iam.get_role(&name))
                .await
        });
        let (role, attached) = join!(role, attached);
        RoleReads {
            role: Some(RoleRead { role, attached }),
            undetermined: None,
            access_blocked: None,
        }
    }

    pub(super) async fn attached_policies(&self, role_name: String) -> Read<Vec<String>> {
        let this = self.clone();
        self.inner
            .attached
            .get(role_name.clone(), move || async move {
                let iam = &this.inner.iam;
                let mut arns = Vec::new();
                let read = this
                    .pages(
                        Service::Iam,
                        "ListAttachedRolePolicies",
                        &role_name,
                        |marker| iam.list_attached_role_policies(&role_name, marker),
                        |page| arns.extend(page),
                    )
                    .await?;
                if read == Paged::Absent {
                    // NoSuchEntity: the role itself is gone.
                    return Ok(None);
                }
                arns.sort();
                arns.dedup();
                Ok(Some(arns))
            })
            .await
    }
}

//! IAM reads about the Karpenter controller's role for `ControllerCanLaunch`: the role itself
//! (GetRole), the account's OIDC providers (ListOpenIDConnectProviders), IAM's answers to the
//! permission questions (SimulatePrincipalPolicy, one call per question group, shared among
//! classes whose questions the role's policies cannot tell apart), and the role's own policies
//! (ListRolePolicies/GetRolePolicy, ListAttachedRolePolicies, GetPolicy/GetPolicyVersion, the
//! permissions boundary), which say whether a simulation may be shared and are evaluated when
//! the simulator cannot be asked. Also the spot service-linked role (GetRole) for `SpotReady`.
//! Every read is cached; does IO (through the IAM port).
//!
//! Provides the facts `controller_role`, `controller_permissions`, `oidc_providers` and
//! `spot_service_linked_role`.

use super::facts::{AsIs, Conditional, FactRead, Unlisted, mapped};
use super::iam::RoleReads;
use super::pod_identity::EffectiveRoles;
use super::shared::{Paged, because, not_observed};
use super::{AwsObserver, AwsRequest};
use crate::cache::Read;
use crate::ports::{RoleData, Service, Simulation};
use futures::future::join_all;
use karpenter_health_checks::facts::{
    AccountFacts, ControllerRoleFacts, EksClusterFacts, Observed, PermissionFacts, PolicyDocument,
    RolePolicies, SimulatedDecision, UnknownCause, Unobserved,
};
use karpenter_health_checks::iam_policy::sharing::Literals;
use karpenter_health_checks::karpenter_permissions::{Group, Inputs};
use std::collections::BTreeMap;

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

/// Whether two simulations ask the same actions of the same number of resources, with the same
/// context keys, so that they can differ only in values.
fn same_shape(a: &Simulation, b: &Simulation) -> bool {
    a.policy_source_arn == b.policy_source_arn
        && a.actions == b.actions
        && a.resources.len() == b.resources.len()
        && a.context.len() == b.context.len()
        && a.context
            .iter()
            .zip(&b.context)
            .all(|((ka, va), (kb, vb))| ka == kb && va.len() == vb.len())
}

/// The tags whose values Karpenter derives from its objects' names, and the resources whose ARN
/// it derives from the EC2NodeClass's uid: the only places where two classes' questions may
/// differ and still share an answer. The tags a user gives (`spec.tags`), the node role and the
/// metadata options must be equal: SCP guardrails, which the operator cannot read, commonly
/// require exactly those (a cost-center tag, a role path, IMDSv2).
const NAME_DERIVED_TAGS: [&str; 2] = ["karpenter.sh/nodepool", "karpenter.k8s.aws/ec2nodeclass"];

fn name_derived(key: &str) -> bool {
    NAME_DERIVED_TAGS
        .iter()
        .any(|tag| key.strip_suffix(tag).is_some_and(|k| k.ends_with('/')))
}

/// The values two simulations of the same shape differ in, position by position; `None` when
/// they differ anywhere but in name-derived tags and instance-profile ARNs.
fn differing_values<'a>(a: &'a Simulation, b: &'a Simulation) -> Option<Vec<(&'a str, &'a str)>> {
    let mut pairs = Vec::new();
    for (x, y) in a.resources.iter().zip(&b.resources) {
        if x != y {
            if !(x.contains(":instance-profile/") && y.contains(":instance-profile/")) {
                return None;
            }
            pairs.push((x.as_str(), y.as_str()));
        }
    }
    for ((key, xs), (_, ys)) in a.context.iter().zip(&b.context) {
        for (x, y) in xs.iter().zip(ys) {
            if x != y {
                if !name_derived(key) {
                    return None;
                }
                pairs.push((x.as_str(), y.as_str()));
            }
        }
    }
    Some(pairs)
}

/// Whether every pair of `read` that `simulation` asks has an answer in `decisions`, and it is
/// "allowed". Denials of pairs no question reads (a simulation asks every action on every
/// resource of its group) change no verdict, so they do not keep an answer from being shared;
/// a denial of a pair the rule reads is never shared, since an SCP keyed on a class's name could
/// make it the first class's alone.
fn reads_only_allowed(
    decisions: &[SimulatedDecision],
    simulation: &Simulation,
    read: &[(&'static str, String)],
) -> bool {
    let asked: Vec<&(&'static str, String)> = read
        .iter()
        .filter(|(action, resource)| {
            simulation.actions.iter().any(|a| a == action)
                && simulation.resources.iter().any(|r| r == resource)
        })
        .collect();
    !asked.is_empty()
        && asked.iter().all(|(action, resource)| {
            decisions.iter().any(|d| {
                d.action.eq_ignore_ascii_case(action)
                    && d.resource == *resource
                    && d.decision == "allowed"
            })
        })
}

/// `decisions` about `asked`'s resources, renamed to the resources of `simulation` at the same
/// positions (the rule matches each question by action and resource).
fn renamed(
    decisions: Vec<SimulatedDecision>,
    asked: &Simulation,
    simulation: &Simulation,
) -> Vec<SimulatedDecision> {
    decisions
        .into_iter()
        .map(|mut d| {
            if let Some(i) = asked.resources.iter().position(|r| *r == d.resource) {
                d.resource = simulation.resources[i].clone();
            }
            d
        })
        .collect()
}

/// The simulations of the questions: one per group, every action and resource of the group in
/// the group's context.
pub fn simulations(role_arn: &str, inputs: &Inputs) -> Vec<Simulation> {
    let mut groups: BTreeMap<Group, (Vec<String>, Vec<String>)> = BTreeMap::new();
    for q in inputs.questions() {
        let (actions, resources) = groups.entry(q.group).or_default();
        if !actions.iter().any(|a| a == q.action) {
            actions.push(q.action.to_owned());
        }
        if !resources.contains(&q.resource) {
            resources.push(q.resource.clone());
        }
    }
    groups
        .into_iter()
        .map(|(group, (actions, resources))| Simulation {
            policy_source_arn: role_arn.to_owned(),
            actions,
            resources,
            context: inputs
                .context(group)
                .entries()
                .map(|(k, v)| (k.to_owned(), v.to_vec()))
                .collect(),
        })
        .collect()
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

    /// Provider of `oidc_providers`, read when the controller uses IRSA.
    pub(super) async fn oidc_providers_fact(
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
    pub(super) async fn spot_service_linked_role(
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
    pub(super) async fn role(&self, name: &str) -> Read<RoleData> {
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

    /// One simulation's answers, cached (with the permissions' longer TTL) by its whole request.
    pub(super) async fn simulate_one(
        &self,
        simulation: Simulation,
    ) -> Observed<Vec<SimulatedDecision>> {
        let this = self.clone();
        let key = simulation.clone();
        let cache = this.inner.simulations.clone();
        cache
            .get(key, move || async move {
                let iam = &this.inner.iam;
                this.all_pages(
                    Service::Iam,
                    "SimulatePrincipalPolicy",
                    &simulation.policy_source_arn,
                    |marker| iam.simulate_principal_policy(&simulation, marker),
                )
                .await
            })
            .await
            .current
    }

    async fn simulate(&self, role: &RoleData, inputs: &Inputs) -> Observed<Vec<SimulatedDecision>> {
        // The role's own policies say which of a class's values they could tell apart from
        // another class's (read with the permissions' TTL, shared by every class).
        let literals = match self.role_policies(role).await {
            Observed::Found(policies) => {
                let documents: Vec<&str> = policies
                    .identity
                    .iter()
                    .chain(policies.boundary.iter())
                    .map(|d| d.document.as_str())
                    .collect();
                Literals::of(&documents)
            }
            _ => None,
        };
        // The (action, resource) pairs the rule reads: a simulation asks every action of a group
        // on every resource of it, and the pairs no question asks (`iam:PassRole` on
        // `instance/*`) come back denied in a healthy account.
        let read: Vec<(&'static str, String)> = inputs
            .questions()
            .into_iter()
            .map(|q| (q.action, q.resource))
            .collect();
        let reads = simulations(&role.arn, inputs)
            .into_iter()
            .map(|simulation| self.simulate_shared(simulation, literals.as_ref(), &read));
        let mut decisions = Vec::new();
        for answer in join_all(reads).await {
            match answer {
                Observed::Found(d) => decisions.extend(d),
                // The role vanished in between: the caller sees it on the next GetRole.
                Observed::Absent => {
                    return not_observed("the controller role vanished during the simulation");
                }
                Observed::Unknown(u) => return Observed::Unknown(u),
            }
        }
        Observed::Found(decisions)
    }

    /// One simulation's answers, from the question of another class when the role's policies
    /// cannot tell the two apart and IAM allowed every question the rule reads in it; anything
    /// else (a denial of such a question, no answer, policies that could not be read) is asked
    /// as the class's own.
    ///
    /// Only questions that differ in what Karpenter derives from object names are shared (see
    /// [`NAME_DERIVED_TAGS`]). IAM's simulator also applies the organization's SCPs, which the
    /// operator cannot read: an SCP that treats two EC2NodeClasses or NodePools differently by
    /// their names alone would be missed for the second. A denial the rule reads is never shared, so sharing
    /// can only miss such a denial, never invent one.
    async fn simulate_shared(
        &self,
        simulation: Simulation,
        literals: Option<&Literals>,
        read: &[(&'static str, String)],
    ) -> Observed<Vec<SimulatedDecision>> {
        if let Some(literals) = literals
            && let Some(asked) = self.representative(&simulation, literals)
            && let Observed::Found(decisions) = self.simulate_one(asked.clone()).await
        {
            let decisions = renamed(decisions, &asked, &simulation);
            // Keys the policies needed and the request lacked are the same for both questions
            // (same keys, values told apart by nothing): an allowed answer that lists them is
            // shared as well.
            if reads_only_allowed(&decisions, &simulation, read) {
                return Observed::Found(decisions);
            }
        }
        self.simulate_one(simulation).await
    }

    /// A simulation asked before that `simulation` may share, else `None` (and `simulation` is
    /// remembered for the next class).
    fn representative(&self, simulation: &Simulation, literals: &Literals) -> Option<Simulation> {
        const REMEMBERED: usize = 256;
        let mut asked = self
            .inner
            .asked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if asked.contains(simulation) {
            return None;
        }
        let shared = asked.iter().find(|earlier| {
            same_shape(earlier, simulation)
                && differing_values(earlier, simulation)
                    .is_some_and(|pairs| literals.cannot_tell_apart(pairs))
        });
        if let Some(earlier) = shared {
            return Some(earlier.clone());
        }
        if asked.len() == REMEMBERED {
            asked.pop_front();
        }
        asked.push_back(simulation.clone());
        None
    }

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
    async fn role_policies(&self, role: &RoleData) -> Observed<RolePolicies> {
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

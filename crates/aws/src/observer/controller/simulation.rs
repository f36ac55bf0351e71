//! IAM's answers to the controller role's permission questions (SimulatePrincipalPolicy, one call
//! per question group, cached by the whole request), shared among classes whose questions the
//! role's policies cannot tell apart (`sharing.rs`). Does IO (through the IAM port).

use super::sharing::{differing_values, reads_only_allowed, renamed, same_shape};
use crate::observer::AwsObserver;
use crate::observer::shared::not_observed;
use crate::ports::{RoleData, Service, Simulation};
use futures::future::join_all;
use karpenter_health_checks::facts::{Observed, SimulatedDecision};
use karpenter_health_checks::iam_policy::sharing::Literals;
use karpenter_health_checks::karpenter_permissions::{Group, Inputs};
use std::collections::BTreeMap;

/// The simulations of the questions: one per group, every action and resource of the group in
/// the group's context.
pub fn simulations(role_arn: &str, inputs: &Inputs) -> Vec<(Group, Simulation)> {
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
        .map(|(group, (actions, resources))| {
            let simulation = Simulation {
                policy_source_arn: role_arn.to_owned(),
                actions,
                resources,
                context: inputs
                    .context(group)
                    .entries()
                    .map(|(k, v)| (k.to_owned(), v.to_vec()))
                    .collect(),
            };
            (group, simulation)
        })
        .collect()
}

impl AwsObserver {
    /// One simulation's answers, cached (with the permissions' longer TTL) by its whole request.
    pub(in crate::observer) async fn simulate_one(
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

    pub(super) async fn simulate(
        &self,
        role: &RoleData,
        inputs: &Inputs,
    ) -> Observed<Vec<SimulatedDecision>> {
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
        let (groups, asked): (Vec<Group>, Vec<Simulation>) =
            simulations(&role.arn, inputs).into_iter().unzip();
        let reads = asked
            .into_iter()
            .map(|simulation| self.simulate_shared(simulation, literals.as_ref(), &read));
        let mut decisions = Vec::new();
        for (group, answer) in groups.into_iter().zip(join_all(reads).await) {
            match answer {
                Observed::Found(d) => decisions.extend(d),
                // The role vanished in between: the caller sees it on the next GetRole.
                Observed::Absent => {
                    return not_observed("the controller role vanished during the simulation");
                }
                // SpotReady's question alone: its failure leaves that question unanswered
                // (SpotReady is Unknown), not ControllerCanLaunch's questions.
                Observed::Unknown(_) if group == Group::SpotServiceLinkedRole => {}
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
    /// [`NAME_DERIVED_TAGS`](super::sharing::NAME_DERIVED_TAGS)). IAM's simulator also applies
    /// the organization's SCPs, which the operator cannot read: an SCP that treats two
    /// EC2NodeClasses or NodePools differently by their names alone would be missed for the
    /// second. A denial the rule reads is never shared, so sharing can only miss such a denial,
    /// never invent one.
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
}

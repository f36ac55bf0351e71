//! The NodeClaims as the checks read them: each one kept as its compact facts, indexed by the
//! EC2NodeClass it was launched from, with the cluster-wide set of claimed instance ids built
//! once per change and shared. Pure (a malformed NodeClaim is logged): callers feed it the objects
//! a watch or a list returned.
//!
//! A reconcile reads only its own class's entries, so its cost follows the size of its class,
//! not of the cluster; the claimed-instance set is the one cluster-wide fact and is built at most
//! once per NodeClaim change, however many classes read it.

use crate::index::{SharedIndex, WatchIndex};
use crate::lean_node_claim::LeanNodeClaim;
use karpenter_health_api::karpenter::NodeClaim;
use karpenter_health_checks::facts::{ClaimCondition, DriftFacts, NodeClaimFacts};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

/// The EC2NodeClass a NodeClaim belongs to; `None` for one whose `nodeClassRef` names no
/// EC2NodeClass (another provider's kind, or none at all): it still claims its instance.
type ClassKey = Option<Arc<str>>;

/// Which EC2NodeClasses a NodeClaim change can affect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimsTouched {
    /// Only these classes' own NodeClaims changed.
    Classes(Vec<String>),
    /// The set of claimed instances changed too, which every class's instance sweep reads.
    AllClasses,
}

/// What the index keeps of one NodeClaim: its facts without the name, which is the map's key
/// (kept once, not twice), and the instance id boxed to its length.
#[derive(Clone, Debug)]
struct StoredClaim {
    created: Option<jiff::Timestamp>,
    instance_id: Option<Box<str>>,
    launched: Option<ClaimCondition>,
    registered: Option<ClaimCondition>,
    drifted: Option<ClaimCondition>,
    /// Its `Initialized` condition: `LimitsLeaveRoom` reads when it became ready to run Pods.
    initialized: Option<ClaimCondition>,
    /// Its NodePool, shared by every NodeClaim of that NodePool (see
    /// [`NodeClaimIndex::pool_name`]).
    node_pool: Option<Arc<str>>,
    /// What it waits for to initialize; `None` unless registered and not initialized: boxed to
    /// its length, since few wait.
    initialization_wait: Option<Box<str>>,
    /// `None` when the NodeClaim is not being deleted: boxed, since few are.
    deleting: Option<Box<Deleting>>,
    /// `None` unless it is drifted: boxed, since few are.
    drift: Option<Box<DriftFacts>>,
}

/// What the index keeps of a NodeClaim being deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Deleting {
    /// `None` when its deletion time could not be read.
    since: Option<jiff::Timestamp>,
    /// Its Node, whose Pods its drain waits for.
    node_name: Option<Box<str>>,
    /// Its termination has a deadline (`spec.terminationGracePeriod`).
    has_grace: bool,
}

impl StoredClaim {
    fn of(facts: NodeClaimFacts, node_pool: Option<Arc<str>>) -> Self {
        Self {
            created: facts.created,
            instance_id: facts.instance_id.map(String::into_boxed_str),
            launched: facts.launched,
            registered: facts.registered,
            drifted: facts.drifted,
            initialized: facts.initialized,
            node_pool,
            initialization_wait: facts.initialization_wait.map(String::into_boxed_str),
            deleting: facts.deleting.then(|| {
                Box::new(Deleting {
                    since: facts.deleting_since,
                    node_name: facts.node_name.map(String::into_boxed_str),
                    has_grace: facts.has_termination_grace_period,
                })
            }),
            drift: facts.drift.map(Box::new),
        }
    }

    fn facts(&self, name: &str) -> NodeClaimFacts {
        NodeClaimFacts {
            name: name.to_owned(),
            created: self.created,
            deleting: self.deleting.is_some(),
            instance_id: self.instance_id.as_deref().map(str::to_owned),
            launched: self.launched,
            registered: self.registered,
            drifted: self.drifted,
            initialized: self.initialized,
            node_pool: self.node_pool.clone(),
            initialization_wait: self.initialization_wait.as_deref().map(str::to_owned),
            deleting_since: self.deleting.as_ref().and_then(|d| d.since),
            node_name: self
                .deleting
                .as_ref()
                .and_then(|d| d.node_name.as_deref().map(str::to_owned)),
            has_termination_grace_period: self.deleting.as_ref().is_some_and(|d| d.has_grace),
            drift: self.drift.as_deref().cloned(),
        }
    }
}

/// NodeClaim facts by EC2NodeClass and name.
#[derive(Debug, Default)]
pub struct NodeClaimIndex {
    by_class: HashMap<ClassKey, HashMap<Box<str>, StoredClaim>>,
    /// NodeClaims that could not be read, with why: the instances they claim are unknown, so
    /// no instance may be called unclaimed while any is here.
    unreadable: std::collections::BTreeMap<Box<str>, String>,
    claimed: OnceLock<Arc<BTreeSet<String>>>,
    /// Every NodePool name a NodeClaim has named, kept once: thousands of NodeClaims share a
    /// few NodePools.
    pool_names: std::collections::HashSet<Arc<str>>,
}

fn class_of(claim: &NodeClaim) -> ClassKey {
    claim
        .spec
        .node_class_ref
        .as_ref()
        .filter(|r| r.refers_to_ec2_node_class(&r.name))
        .map(|r| Arc::from(r.name.as_str()))
}

impl NodeClaimIndex {
    /// Builds an index of `claims` (a complete list).
    pub fn of<'a>(claims: impl IntoIterator<Item = &'a NodeClaim>) -> Self {
        let mut index = Self::default();
        for claim in claims {
            index.apply_claim(claim);
        }
        index
    }

    /// Adds or replaces `claim`; says which classes that affects.
    pub fn apply_claim(&mut self, claim: &NodeClaim) -> ClaimsTouched {
        let mut facts = NodeClaimFacts::of(claim);
        let class = class_of(claim);
        let name: Box<str> = std::mem::take(&mut facts.name).into_boxed_str();
        let pool = facts.node_pool.take().map(|p| self.pool_name(&p));
        let facts = StoredClaim::of(facts, pool);
        let previous = match self.by_class.get_mut(&class).and_then(|m| m.remove(&name)) {
            Some(previous) => Some((class.clone(), previous)),
            // New here: a NodeClaim's class is immutable in Karpenter, but a hand-made object's
            // may change, so its old entry is looked for under every other class (cheap: one
            // hash lookup per class).
            None => self.remove_anywhere(&name),
        };
        let instance_changed = match &previous {
            Some((_, previous)) => previous.instance_id != facts.instance_id,
            None => facts.instance_id.is_some(),
        };
        let mut touched: Vec<String> = previous
            .iter()
            .filter_map(|(c, _)| c.as_deref())
            .filter(|c| Some(*c) != class.as_deref())
            .map(str::to_owned)
            .collect();
        touched.extend(class.as_deref().map(str::to_owned));
        self.by_class.entry(class).or_default().insert(name, facts);
        if instance_changed {
            self.claimed = OnceLock::new();
            return ClaimsTouched::AllClasses;
        }
        ClaimsTouched::Classes(touched)
    }

    /// The shared copy of the NodePool name `name`. Names are never dropped: a cluster has a few
    /// NodePools, and a name comes back with its NodePool.
    fn pool_name(&mut self, name: &str) -> Arc<str> {
        if let Some(kept) = self.pool_names.get(name) {
            return kept.clone();
        }
        let kept: Arc<str> = Arc::from(name);
        self.pool_names.insert(kept.clone());
        kept
    }

    /// Removes the NodeClaim `name`; says which classes that affects.
    pub fn delete_named(&mut self, name: &str) -> ClaimsTouched {
        match self.remove_anywhere(name) {
            Some((_, removed)) if removed.instance_id.is_some() => {
                self.claimed = OnceLock::new();
                ClaimsTouched::AllClasses
            }
            Some((class, _)) => {
                ClaimsTouched::Classes(class.as_deref().map(str::to_owned).into_iter().collect())
            }
            None => ClaimsTouched::Classes(Vec::new()),
        }
    }

    fn remove_anywhere(&mut self, name: &str) -> Option<(ClassKey, StoredClaim)> {
        self.by_class
            .iter_mut()
            .find_map(|(class, claims)| claims.remove(name).map(|removed| (class.clone(), removed)))
    }

    /// The EC2NodeClass of the NodeClaim `name` (one hash lookup per class).
    pub fn class_of(&self, name: &str) -> Option<String> {
        self.by_class
            .iter()
            .find(|(_, claims)| claims.contains_key(name))
            .and_then(|(class, _)| class.as_deref().map(str::to_owned))
    }

    /// The NodeClaims of the EC2NodeClass `name`, sorted by name.
    pub fn of_class(&self, name: &str) -> Vec<NodeClaimFacts> {
        let key: ClassKey = Some(Arc::from(name));
        let mut claims: Vec<NodeClaimFacts> = self
            .by_class
            .get(&key)
            .map(|m| m.iter().map(|(name, c)| c.facts(name)).collect())
            .unwrap_or_default();
        claims.sort_by(|a, b| a.name.cmp(&b.name));
        claims
    }

    /// The NodeClaims of EC2NodeClasses being deleted since `before` or earlier without a
    /// termination deadline (`terminationGracePeriod`), with their Node, oldest first.
    pub fn terminating_since(&self, before: jiff::Timestamp) -> Vec<(String, Option<String>)> {
        let mut found: Vec<(jiff::Timestamp, String, Option<String>)> = self
            .by_class
            .iter()
            .filter(|(class, _)| class.is_some())
            .flat_map(|(_, claims)| claims.iter())
            .filter_map(|(name, claim)| {
                let deleting = claim.deleting.as_ref().filter(|d| !d.has_grace)?;
                let since = deleting.since.filter(|since| *since <= before)?;
                Some((
                    since,
                    name.to_string(),
                    deleting.node_name.as_deref().map(str::to_owned),
                ))
            })
            .collect();
        found.sort();
        found
            .into_iter()
            .map(|(_, name, node)| (name, node))
            .collect()
    }

    /// The instance ids of every NodeClaim in the cluster; built once per change, then shared.
    pub fn claimed_instance_ids(&self) -> Arc<BTreeSet<String>> {
        self.claimed
            .get_or_init(|| {
                Arc::new(
                    self.by_class
                        .values()
                        .flat_map(HashMap::values)
                        .filter_map(|c| c.instance_id.as_deref().map(str::to_owned))
                        .collect(),
                )
            })
            .clone()
    }

    /// Builds an index of a complete list as a list or watch returned it, unreadable NodeClaims
    /// included.
    pub fn of_listed<'a>(claims: impl IntoIterator<Item = &'a LeanNodeClaim>) -> Self {
        let mut index = Self::default();
        for claim in claims {
            index.apply(claim);
        }
        index
    }

    /// A NodeClaim that could not be read, with why, and how many there are; `None` when every
    /// NodeClaim was read.
    pub fn unreadable(&self) -> Option<(&str, &str, usize)> {
        self.unreadable
            .iter()
            .next()
            .map(|(name, error)| (&**name, error.as_str(), self.unreadable.len()))
    }

    /// How many NodeClaims the index holds.
    pub fn len(&self) -> usize {
        self.by_class.values().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The NodeClaim index a watch keeps current.
pub type SharedClaims = SharedIndex<NodeClaimIndex>;

impl WatchIndex for NodeClaimIndex {
    type Object = LeanNodeClaim;
    type Touched = ClaimsTouched;

    fn apply(&mut self, guarded: &Self::Object) -> Option<ClaimsTouched> {
        match &guarded.0 {
            Ok(claim) => {
                let name = claim.metadata.name.as_deref().unwrap_or_default();
                let was_unreadable = self.unreadable.remove(name).is_some();
                let touched = self.apply_claim(claim);
                Some(if was_unreadable {
                    ClaimsTouched::AllClasses
                } else {
                    touched
                })
            }
            // A NodeClaim that turned malformed leaves its class, and keeps the instance sweep
            // from calling any instance unclaimed until it is readable or gone.
            Err(invalid) => {
                let name = invalid.metadata.name.as_deref().unwrap_or_default();
                tracing::warn!(name, error = %invalid.error, "skipping malformed NodeClaim");
                self.delete_named(name);
                self.unreadable.insert(name.into(), invalid.error.clone());
                Some(ClaimsTouched::AllClasses)
            }
        }
    }

    fn delete(&mut self, guarded: &Self::Object) -> Option<ClaimsTouched> {
        let name = match &guarded.0 {
            Ok(claim) => claim.metadata.name.as_deref(),
            Err(invalid) => invalid.metadata.name.as_deref(),
        }
        .unwrap_or_default();
        if self.unreadable.remove(name).is_some() {
            self.delete_named(name);
            return Some(ClaimsTouched::AllClasses);
        }
        Some(self.delete_named(name))
    }

    fn relisted() -> ClaimsTouched {
        ClaimsTouched::AllClasses
    }
}

#[cfg(test)]
mod tests;

//! How one provider's answer fills its `AwsFacts` field: [`FactRead`], the value that knows its
//! field's current answer, its last good answer and whether it is stale, for the usual shapes of
//! a read (a cached [`Read`], one not always asked, one per key, one that needs another fact
//! first). No IO.

use super::StaleFact;
use super::shared::{NO_CLUSTER, good, not_observed};
use crate::cache::Read;
use karpenter_health_checks::facts::Observed;
use std::collections::BTreeMap;
use std::time::Duration;

/// What one provider read for one EC2NodeClass, as its `AwsFacts` field sees it.
pub(super) trait FactRead {
    /// The type of the `AwsFacts` field it fills.
    type Field;
    /// What to evaluate now: unknown where the latest read failed.
    fn current(&self) -> Self::Field;
    /// The last found/absent answer, the default where none was ever read.
    fn last_good(&self) -> Self::Field;
    /// Adds a note for each answer kept in `last_good` while `current` is unknown; `fact` is the
    /// field's name.
    fn note_stale(&self, fact: &'static str, stale: &mut Vec<StaleFact>);
}

/// A note that `fact` is stale, when `age` says it is.
pub(super) fn note(stale: &mut Vec<StaleFact>, fact: &'static str, age: Option<Duration>) {
    if let Some(age) = age {
        stale.push(StaleFact { fact, age });
    }
}

/// `read` with `f` applied to its current and its last good answer.
pub(super) fn mapped<V, W>(read: Read<V>, f: impl Fn(V) -> W) -> Read<W> {
    Read {
        current: read.current.map(&f),
        last_good: read.last_good.map(|(good, age)| (good.map(&f), age)),
    }
}

impl<V: Clone> FactRead for Read<V> {
    type Field = Observed<V>;

    fn current(&self) -> Observed<V> {
        self.current.clone()
    }

    fn last_good(&self) -> Observed<V> {
        good(self).unwrap_or_default()
    }

    fn note_stale(&self, fact: &'static str, stale: &mut Vec<StaleFact>) {
        note(stale, fact, self.stale_age());
    }
}

/// A fact that is not always asked: `None` in both the current and the last good facts then.
impl<R: FactRead> FactRead for Option<R> {
    type Field = Option<R::Field>;

    fn current(&self) -> Self::Field {
        self.as_ref().map(R::current)
    }

    fn last_good(&self) -> Self::Field {
        self.as_ref().map(R::last_good)
    }

    fn note_stale(&self, fact: &'static str, stale: &mut Vec<StaleFact>) {
        if let Some(read) = self {
            read.note_stale(fact, stale);
        }
    }
}

/// One read per key (the KMS keys by the reference the volumes use), each noted on its own.
impl<R: FactRead> FactRead for BTreeMap<String, R> {
    type Field = BTreeMap<String, R::Field>;

    fn current(&self) -> Self::Field {
        self.iter().map(|(k, r)| (k.clone(), r.current())).collect()
    }

    fn last_good(&self) -> Self::Field {
        self.iter()
            .map(|(k, r)| (k.clone(), r.last_good()))
            .collect()
    }

    fn note_stale(&self, fact: &'static str, stale: &mut Vec<StaleFact>) {
        for read in self.values() {
            read.note_stale(fact, stale);
        }
    }
}

/// An answer composed from other facts' answers, with no last good answer of its own (the
/// cluster's VPC): its last good answer is itself unless it is unknown, and it is never noted
/// stale (what it is composed of is).
impl<T: Clone> FactRead for Observed<T> {
    type Field = Observed<T>;

    fn current(&self) -> Observed<T> {
        self.clone()
    }

    fn last_good(&self) -> Observed<T> {
        match self {
            Observed::Unknown(_) => Observed::default(),
            known => known.clone(),
        }
    }

    fn note_stale(&self, _fact: &'static str, _stale: &mut Vec<StaleFact>) {}
}

/// A read made only when what it needs is known (Karpenter's cluster name, an IRSA role to
/// check); otherwise its field is unknown now, saying why, and has no last good answer.
pub(super) struct Conditional<R> {
    read: Option<R>,
    why_not_read: &'static str,
}

impl<R> Conditional<R> {
    /// A read about the cluster Karpenter names; `None` when its name is not known.
    pub(super) fn of_cluster(read: Option<R>) -> Self {
        Self {
            read,
            why_not_read: NO_CLUSTER,
        }
    }

    /// A read that is `None` when it was not asked for.
    pub(super) fn if_asked(read: Option<R>) -> Self {
        Self {
            read,
            why_not_read: "not asked",
        }
    }

    pub(super) fn read(&self) -> Option<&R> {
        self.read.as_ref()
    }
}

impl<R, T> FactRead for Conditional<R>
where
    R: FactRead<Field = Observed<T>>,
{
    type Field = Observed<T>;

    fn current(&self) -> Observed<T> {
        match &self.read {
            Some(read) => read.current(),
            None => not_observed(self.why_not_read),
        }
    }

    fn last_good(&self) -> Observed<T> {
        self.read.as_ref().map(R::last_good).unwrap_or_default()
    }

    fn note_stale(&self, fact: &'static str, stale: &mut Vec<StaleFact>) {
        if let Some(read) = &self.read {
            read.note_stale(fact, stale);
        }
    }
}

/// An answer reported as it is in both the current and the last good facts, never noted stale:
/// it keeps no older answer (the region, the permissions as asked, the networks as read).
pub(super) struct AsIs<T>(pub(super) T);

impl<T: Clone> FactRead for AsIs<T> {
    type Field = T;

    fn current(&self) -> T {
        self.0.clone()
    }

    fn last_good(&self) -> T {
        self.0.clone()
    }

    fn note_stale(&self, _fact: &'static str, _stale: &mut Vec<StaleFact>) {}
}

/// A fact whose kept answer is in `last_good` but which is not listed among the stale ones: the
/// OIDC providers and the spot service-linked role never were, and listing them now would change
/// what an observation reports.
pub(super) struct Unlisted<R>(pub(super) R);

impl<R: FactRead> FactRead for Unlisted<R> {
    type Field = R::Field;

    fn current(&self) -> R::Field {
        self.0.current()
    }

    fn last_good(&self) -> R::Field {
        self.0.last_good()
    }

    fn note_stale(&self, _fact: &'static str, _stale: &mut Vec<StaleFact>) {}
}

//! The AWS fact store: a stale-while-revalidate cache with single-flight loads, jittered refresh
//! periods, a bound on the age of any answer it hands out, and a feed of changed answers naming
//! the readers that saw the old one. No IO of its own: it runs the loader it is given (on a
//! spawned task, so a caller that gives up does not waste the call).
//!
//! Keyed by the request, shared by all EC2NodeClasses: two classes asking the same thing cost one
//! call per period, and concurrent askers of one key wait on the same call. Once a key has an
//! answer, a reader never waits on AWS while that answer is younger than `ttl + stale`: past the
//! (jittered) `ttl` it is handed the answer it had and one refresh starts in the background; when
//! the refresh answers something else, the readers of the key are named on the [`Changes`] feed
//! so the operator re-evaluates exactly them. Past `ttl + stale` (nobody read it for that long)
//! readers wait for a refresh, so no answer older than [`Ttls::staleness_bound`] is ever reported.
//! A failed load is reported as unknown (for `error_ttl`, or `refused_ttl` when AWS refused it,
//! without calling again, so an outage is not hammered) while the last found/absent answer and its age are kept for diagnostics: an
//! answer that cannot be refreshed turns Unknown with the cause, it never lives on as a guess.

use futures::future::{BoxFuture, Shared};
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use karpenter_health_checks::facts::{Observed, UnknownCause, Unobserved};
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::broadcast;
use tokio::time::Instant;

/// What a loader returns: `Ok(Some)` found, `Ok(None)` proven absent, `Err` unknown.
pub type Loaded<V> = Result<Option<V>, Unobserved>;

/// How long answers are served from memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ttls {
    /// A found or absent answer is due for a refresh this long after it was read from AWS, less
    /// a random part of `jitter` (so keys read together do not all refresh together).
    pub ttl: Duration,
    /// Up to this much is taken off each `ttl`, at random.
    pub jitter: Duration,
    /// How long a due answer is still handed out while one refresh runs in the background.
    /// Zero: a due answer is refreshed before it is read (readers wait, as a plain TTL cache).
    pub stale: Duration,
    /// Passing failures (throttled, unreachable): served as unknown without a new call for this
    /// long.
    pub error_ttl: Duration,
    /// Refusals that last until someone changes a policy (access denied, another account's
    /// object): served as unknown for this long. A missing permission asked again every few
    /// seconds would fill the account's CloudTrail with denied calls.
    pub refused_ttl: Duration,
    /// Entries nobody read for this long are dropped (EC2NodeClasses come and go).
    pub idle: Duration,
}

impl Ttls {
    /// The oldest found/absent answer a reader can be handed.
    pub fn staleness_bound(&self) -> Duration {
        self.ttl + self.stale
    }

    /// How long a failure for `cause` is served before the call is tried again. A call the
    /// endpoint does not implement is as lasting as an answer: asked again after `ttl`.
    pub fn failure_ttl(&self, cause: &UnknownCause) -> Duration {
        match cause {
            UnknownCause::Unsupported => self.ttl,
            UnknownCause::AccessDenied | UnknownCause::OtherAccount => self.refused_ttl,
            UnknownCause::Throttled | UnknownCause::Unavailable | UnknownCause::NotObserved => {
                self.error_ttl
            }
        }
    }
}

tokio::task_local! {
    /// Who is reading (an EC2NodeClass), recorded on every key it reads, and how.
    static READER: Arc<Reading>;
}

/// One class's reads: its name, whether due answers must be refreshed before they are handed
/// out, and whether one was handed out as it was while its refresh ran.
#[derive(Debug)]
struct Reading {
    name: Arc<str>,
    fresh: bool,
    served_due: std::sync::atomic::AtomicBool,
}

/// Runs `reads` as `reader`: every cache key read inside remembers it, and a changed answer for
/// such a key names it on the [`Changes`] feed.
pub async fn read_as<F: Future>(reader: &str, reads: F) -> F::Output {
    read_reporting(reader, false, reads).await.0
}

/// [`read_as`], also telling whether any answer was handed out past its period while its refresh
/// ran (answers of different ages may then be mixed). With `fresh`, no such answer is handed out:
/// readers wait for the refresh of a due answer instead (answers within their period are kept).
pub async fn read_reporting<F: Future>(reader: &str, fresh: bool, reads: F) -> (F::Output, bool) {
    let reading = Arc::new(Reading {
        name: Arc::from(reader),
        fresh,
        served_due: std::sync::atomic::AtomicBool::new(false),
    });
    let output = READER.scope(reading.clone(), reads).await;
    (
        output,
        reading
            .served_due
            .load(std::sync::atomic::Ordering::Relaxed),
    )
}

/// Whom a changed answer concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Changed {
    /// The readers of the keys whose answer changed.
    Readers(Arc<[Arc<str>]>),
    /// Changes were missed (a slow subscriber): anyone may be concerned.
    Everyone,
}

/// The feed of changed answers, shared by every cache of one observer.
#[derive(Debug)]
pub struct Changes {
    sender: broadcast::Sender<Arc<[Arc<str>]>>,
}

impl Default for Changes {
    fn default() -> Self {
        Self {
            sender: broadcast::channel(1024).0,
        }
    }
}

impl Changes {
    /// The changes from now on. A subscriber that falls behind is told [`Changed::Everyone`].
    pub fn subscribe(&self) -> BoxStream<'static, Changed> {
        let receiver = self.sender.subscribe();
        futures::stream::unfold(receiver, |mut receiver| async move {
            match receiver.recv().await {
                Ok(readers) => Some((Changed::Readers(readers), receiver)),
                Err(broadcast::error::RecvError::Lagged(_)) => Some((Changed::Everyone, receiver)),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        })
        .boxed()
    }

    fn publish(&self, readers: &BTreeSet<Arc<str>>) {
        if !readers.is_empty() {
            // No subscriber (no controller running): nobody to tell.
            let _ = self.sender.send(readers.iter().cloned().collect());
        }
    }
}

/// One read from the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read<V> {
    /// What to report now: the latest answer, or unknown when the latest load failed.
    pub current: Observed<V>,
    /// The last found/absent answer and its age (also when `current` is unknown).
    pub last_good: Option<(Observed<V>, Duration)>,
}

impl<V: Clone> Read<V> {
    /// An answer known without a call (e.g. a name IAM would reject): fresh, and its own last
    /// good answer unless it is unknown.
    pub fn answered(current: Observed<V>) -> Self {
        let last_good = match &current {
            Observed::Unknown(_) => None,
            known => Some((known.clone(), Duration::ZERO)),
        };
        Self { current, last_good }
    }

    /// Age of the last good answer when `current` is unknown: it is being kept, not reported.
    pub fn stale_age(&self) -> Option<Duration> {
        match (&self.current, &self.last_good) {
            (Observed::Unknown(_), Some((_, age))) => Some(*age),
            _ => None,
        }
    }
}

struct Good<V> {
    value: Option<V>,
    at: Instant,
}

/// Where an entry's latest answer stands at a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Freshness {
    /// Served as is.
    Fresh,
    /// Served as is while one refresh runs in the background.
    Due,
    /// Never answered, or too old to serve: readers wait for a load.
    Expired,
}

struct Entry<V> {
    good: Option<Good<V>>,
    /// The latest load's failure; cleared by a successful load.
    error: Option<(Unobserved, Instant)>,
    /// When the latest answer turns due for a refresh.
    due: Instant,
    /// When it may no longer be served while a refresh runs: `ttl + stale` after it was read
    /// (the jitter brings a refresh forward, never the bound).
    expires: Instant,
    inflight: Option<Shared<BoxFuture<'static, ()>>>,
    last_read: Instant,
    /// The EC2NodeClasses that read this key (see [`read_as`]).
    readers: BTreeSet<Arc<str>>,
}

/// What a reader would be told, for deciding whether a load changed anything. A failure counts
/// by its cause: a retried outage whose detail differs is the same answer.
#[derive(PartialEq)]
enum Answer<'a, V> {
    Value(Option<&'a V>),
    Failed(&'a UnknownCause),
}

impl<V: Clone + PartialEq> Entry<V> {
    fn read(&self, now: Instant) -> Read<V> {
        let last_good = self.good.as_ref().map(|g| {
            let obs = match &g.value {
                Some(v) => Observed::Found(v.clone()),
                None => Observed::Absent,
            };
            (obs, now.saturating_duration_since(g.at))
        });
        let current = match (&self.error, &last_good) {
            (Some((e, _)), _) => Observed::Unknown(e.clone()),
            (None, Some((obs, _))) => obs.clone(),
            (None, None) => Observed::unknown(UnknownCause::NotObserved, "not observed yet"),
        };
        Read { current, last_good }
    }

    fn answer(&self) -> Option<Answer<'_, V>> {
        match (&self.error, &self.good) {
            (Some((e, _)), _) => Some(Answer::Failed(&e.cause)),
            (None, Some(g)) => Some(Answer::Value(g.value.as_ref())),
            (None, None) => None,
        }
    }

    fn freshness(&self, now: Instant) -> Freshness {
        if self.answer().is_none() {
            Freshness::Expired
        } else if now < self.due {
            Freshness::Fresh
        } else if now < self.expires {
            Freshness::Due
        } else {
            Freshness::Expired
        }
    }
}

type Map<K, V> = Arc<Mutex<HashMap<K, Entry<V>>>>;

/// What is done to every cache at once, whatever its key and value.
pub trait Revalidate {
    /// Makes every answer `reader` read due for a refresh now, unless it was read from AWS less
    /// than `min_age` ago: the next read still gets it at once (within its bound) and starts the
    /// refresh. Returns how many answers were made due.
    fn revalidate(&self, reader: &str, min_age: Duration) -> usize;
}

/// A provider that reads through caches it shares with others (`observer/providers/`) has none
/// of its own to revalidate: the shared ones are revalidated where they are declared.
impl Revalidate for () {
    fn revalidate(&self, _reader: &str, _min_age: Duration) -> usize {
        0
    }
}

impl<K, V> Revalidate for Cache<K, V>
where
    K: Send + 'static,
    V: Send + 'static,
{
    fn revalidate(&self, reader: &str, min_age: Duration) -> usize {
        let now = Instant::now();
        let mut made_due = 0;
        for entry in lock(&self.map).values_mut() {
            let answered_at = match (&entry.error, &entry.good) {
                (Some((_, at)), _) => Some(*at),
                (None, Some(good)) => Some(good.at),
                (None, None) => None,
            };
            if entry.inflight.is_none()
                && entry.due > now
                && answered_at.is_some_and(|at| now.saturating_duration_since(at) >= min_age)
                && entry.readers.iter().any(|r| &**r == reader)
            {
                entry.due = now;
                made_due += 1;
            }
        }
        made_due
    }
}

/// The cache; cheap to clone (shared state).
pub struct Cache<K, V> {
    map: Map<K, V>,
    ttls: Ttls,
    changes: Option<Arc<Changes>>,
}

impl<K, V> Clone for Cache<K, V> {
    fn clone(&self) -> Self {
        Self {
            map: self.map.clone(),
            ttls: self.ttls,
            changes: self.changes.clone(),
        }
    }
}

impl<K, V> std::fmt::Debug for Cache<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("ttls", &self.ttls)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind, still usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `ttl` less a random part of `jitter`.
fn jittered(ttls: &Ttls) -> Duration {
    ttls.ttl
        .saturating_sub(ttls.jitter.min(ttls.ttl).mul_f64(fastrand::f64()))
}

impl<K, V> Cache<K, V>
where
    K: Clone + Eq + Hash + Send + 'static,
    V: Clone + PartialEq + Send + 'static,
{
    /// A cache whose changed answers are not announced.
    pub fn new(ttls: Ttls) -> Self {
        Self {
            map: Arc::new(Mutex::new(HashMap::new())),
            ttls,
            changes: None,
        }
    }

    /// A cache that announces its changed answers on `changes`.
    pub fn with_changes(ttls: Ttls, changes: Arc<Changes>) -> Self {
        Self {
            changes: Some(changes),
            ..Self::new(ttls)
        }
    }

    /// Number of keys held.
    pub fn len(&self) -> usize {
        lock(&self.map).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The answer for `key`: from memory while fresh; while due, from memory with one refresh
    /// by `load` started in the background; else from `load` (one load per key at a time;
    /// concurrent callers share it). `load` is only called when a load starts.
    pub async fn get<F, Fut>(&self, key: K, load: F) -> Read<V>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Loaded<V>> + Send + 'static,
    {
        let reading = READER.try_with(Arc::clone).ok();
        let inflight = {
            let mut map = lock(&self.map);
            let now = Instant::now();
            if !map.contains_key(&key) {
                let idle = self.ttls.idle;
                map.retain(|_, e| {
                    e.inflight.is_some() || now.saturating_duration_since(e.last_read) < idle
                });
            }
            let entry = map.entry(key.clone()).or_insert_with(|| Entry {
                good: None,
                error: None,
                due: now,
                expires: now,
                inflight: None,
                last_read: now,
                readers: BTreeSet::new(),
            });
            entry.last_read = now;
            let mut freshness = entry.freshness(now);
            if let Some(reading) = &reading {
                entry.readers.insert(reading.name.clone());
                if freshness == Freshness::Due {
                    if reading.fresh {
                        freshness = Freshness::Expired;
                    } else {
                        reading
                            .served_due
                            .store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
            match freshness {
                Freshness::Fresh => return entry.read(now),
                Freshness::Due => {
                    if entry.inflight.is_none() {
                        entry.inflight = Some(self.start(key.clone(), load()));
                    }
                    return entry.read(now);
                }
                Freshness::Expired => match &entry.inflight {
                    Some(f) => f.clone(),
                    None => {
                        let f = self.start(key.clone(), load());
                        entry.inflight = Some(f.clone());
                        f
                    }
                },
            }
        };
        inflight.await;
        let mut map = lock(&self.map);
        let now = Instant::now();
        match map.get_mut(&key) {
            Some(entry) => entry.read(now),
            // Evicted in between (only possible with a tiny idle time): report honestly.
            None => Read {
                current: Observed::unknown(UnknownCause::NotObserved, "cache entry evicted"),
                last_good: None,
            },
        }
    }

    fn start(
        &self,
        key: K,
        load: impl Future<Output = Loaded<V>> + Send + 'static,
    ) -> Shared<BoxFuture<'static, ()>> {
        let map = self.map.clone();
        let ttls = self.ttls;
        let changes = self.changes.clone();
        let task = tokio::spawn(async move {
            let loaded = AssertUnwindSafe(load)
                .catch_unwind()
                .await
                .unwrap_or_else(|_| {
                    Err(Unobserved {
                        cause: UnknownCause::Unavailable,
                        detail: "internal error: the AWS read panicked".to_owned(),
                    })
                });
            let mut map = lock(&map);
            if let Some(entry) = map.get_mut(&key) {
                let now = Instant::now();
                let changed = match (entry.answer(), &loaded) {
                    (None, _) => false,
                    (Some(before), Ok(value)) => before != Answer::Value(value.as_ref()),
                    (Some(before), Err(e)) => before != Answer::Failed(&e.cause),
                };
                match loaded {
                    Ok(value) => {
                        entry.good = Some(Good { value, at: now });
                        entry.error = None;
                        entry.due = now + jittered(&ttls);
                        entry.expires = now + ttls.staleness_bound();
                    }
                    Err(e) => {
                        entry.due = now + ttls.failure_ttl(&e.cause);
                        entry.error = Some((e, now));
                        entry.expires = entry.due + ttls.stale;
                    }
                }
                entry.inflight = None;
                if changed && let Some(changes) = &changes {
                    changes.publish(&entry.readers);
                }
            }
        });
        async move {
            // The task records its result itself; a JoinError (runtime shutdown) leaves nothing.
            let _ = task.await;
        }
        .boxed()
        .shared()
    }
}

#[cfg(test)]
mod tests;

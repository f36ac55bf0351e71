//! A TTL cache with single-flight loads and last-good retention. No IO of its own: it runs the
//! loader it is given (on a spawned task, so a caller that gives up does not waste the call).
//!
//! Keyed by the request, shared by all EC2NodeClasses: two classes asking the same thing cost one
//! call per TTL, and concurrent askers of one key wait on the same call. A failed load is reported
//! as unknown (for `error_ttl`, without calling again, so an outage is not hammered) while the last
//! found/absent answer and its age are kept for diagnostics.

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use karpenter_health_checks::facts::{Observed, UnknownCause, Unobserved};
use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// What a loader returns: `Ok(Some)` found, `Ok(None)` proven absent, `Err` unknown.
pub type Loaded<V> = Result<Option<V>, Unobserved>;

/// How long answers are served from memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ttls {
    /// Found or absent answers.
    pub ttl: Duration,
    /// Failures: served as unknown without a new call for this long.
    pub error_ttl: Duration,
    /// Entries nobody read for this long are dropped (EC2NodeClasses come and go).
    pub idle: Duration,
}

/// One read from the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read<V> {
    /// What to report now: the fresh answer, or unknown when the latest load failed.
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

struct Entry<V> {
    good: Option<Good<V>>,
    /// The latest load's failure; cleared by a successful load.
    error: Option<(Unobserved, Instant)>,
    inflight: Option<Shared<BoxFuture<'static, ()>>>,
    last_read: Instant,
}

impl<V: Clone> Entry<V> {
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

    fn fresh(&self, now: Instant, ttls: &Ttls) -> bool {
        match (&self.error, &self.good) {
            (Some((_, at)), _) => now.saturating_duration_since(*at) < ttls.error_ttl,
            (None, Some(g)) => now.saturating_duration_since(g.at) < ttls.ttl,
            (None, None) => false,
        }
    }
}

type Map<K, V> = Arc<Mutex<HashMap<K, Entry<V>>>>;

/// The cache; cheap to clone (shared state).
pub struct Cache<K, V> {
    map: Map<K, V>,
    ttls: Ttls,
}

impl<K, V> Clone for Cache<K, V> {
    fn clone(&self) -> Self {
        Self {
            map: self.map.clone(),
            ttls: self.ttls,
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

impl<K, V> Cache<K, V>
where
    K: Clone + Eq + Hash + Send + 'static,
    V: Clone + Send + 'static,
{
    pub fn new(ttls: Ttls) -> Self {
        Self {
            map: Arc::new(Mutex::new(HashMap::new())),
            ttls,
        }
    }

    /// Number of keys held.
    pub fn len(&self) -> usize {
        lock(&self.map).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The answer for `key`: from memory while fresh, else from `load` (one load per key at a
    /// time; concurrent callers share it). `load` is only called when a load starts.
    pub async fn get<F, Fut>(&self, key: K, load: F) -> Read<V>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Loaded<V>> + Send + 'static,
    {
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
                inflight: None,
                last_read: now,
            });
            entry.last_read = now;
            if entry.inflight.is_none() && entry.fresh(now, &self.ttls) {
                return entry.read(now);
            }
            match &entry.inflight {
                Some(f) => f.clone(),
                None => {
                    let f = self.start(key.clone(), load());
                    entry.inflight = Some(f.clone());
                    f
                }
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
                match loaded {
                    Ok(value) => {
                        entry.good = Some(Good { value, at: now });
                        entry.error = None;
                    }
                    Err(e) => entry.error = Some((e, now)),
                }
                entry.inflight = None;
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
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn ttls() -> Ttls {
        Ttls {
            ttl: Duration::from_secs(60),
            error_ttl: Duration::from_secs(10),
            idle: Duration::from_secs(600),
        }
    }

    fn unavailable() -> Unobserved {
        Unobserved {
            cause: UnknownCause::Unavailable,
            detail: "down".into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_readers_of_one_key_share_one_load() {
        let cache: Cache<&str, u32> = Cache::new(ttls());
        let loads = Arc::new(AtomicUsize::new(0));
        let reads = (0..20).map(|_| {
            let loads = loads.clone();
            cache.get("k", move || async move {
                loads.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(Some(7))
            })
        });
        let results = futures::future::join_all(reads).await;
        assert_eq!(loads.load(Ordering::SeqCst), 1);
        assert!(results.iter().all(|r| r.current == Observed::Found(7)));
    }

    #[tokio::test(start_paused = true)]
    async fn answers_are_served_until_the_ttl_then_reloaded() {
        let cache: Cache<&str, u32> = Cache::new(ttls());
        assert_eq!(
            cache.get("k", || async { Ok(Some(1)) }).await.current,
            Observed::Found(1)
        );
        tokio::time::advance(Duration::from_secs(59)).await;
        assert_eq!(
            cache.get("k", || async { Ok(Some(2)) }).await.current,
            Observed::Found(1)
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(
            cache.get("k", || async { Ok(None) }).await.current,
            Observed::Absent
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_reports_unknown_keeps_the_last_good_and_recovers() {
        let cache: Cache<&str, u32> = Cache::new(ttls());
        cache.get("k", || async { Ok(Some(1)) }).await;
        tokio::time::advance(Duration::from_secs(61)).await;
        let failed = cache.get("k", || async { Err(unavailable()) }).await;
        assert_eq!(failed.current, Observed::Unknown(unavailable()));
        assert_eq!(
            failed.last_good,
            Some((Observed::Found(1), Duration::from_secs(61)))
        );
        assert_eq!(failed.stale_age(), Some(Duration::from_secs(61)));
        // Within error_ttl the failure is served without a call.
        tokio::time::advance(Duration::from_secs(5)).await;
        let again = cache.get("k", || async { Ok(Some(9)) }).await;
        assert_eq!(again.current, Observed::Unknown(unavailable()));
        tokio::time::advance(Duration::from_secs(6)).await;
        let recovered = cache.get("k", || async { Ok(Some(3)) }).await;
        assert_eq!(recovered.current, Observed::Found(3));
        assert_eq!(recovered.stale_age(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_load_becomes_unknown() {
        let cache: Cache<&str, u32> = Cache::new(ttls());
        let read = cache.get("k", || async { panic!("boom") }).await;
        assert!(
            matches!(read.current, Observed::Unknown(u) if u.cause == UnknownCause::Unavailable)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn idle_keys_are_evicted() {
        let cache: Cache<&str, u32> = Cache::new(ttls());
        cache.get("old", || async { Ok(Some(1)) }).await;
        tokio::time::advance(Duration::from_secs(601)).await;
        cache.get("new", || async { Ok(Some(2)) }).await;
        assert_eq!(cache.len(), 1);
    }
}

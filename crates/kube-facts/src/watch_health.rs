//! The health of each watch: listed yet or not, failing since when, and the signal that an input
//! became observable or stopped being so. No IO: fed by the watch streams, read by the snapshot.

use futures::StreamExt;
use futures::stream::BoxStream;
use karpenter_health_checks::facts::{Observed, UnknownCause};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a synced watch may keep failing (403 after an RBAC change, a long outage) before its
/// cache counts as unknown: long enough to ride out an API-server restart or a relist, short enough
/// that a lasting failure shows within a minute or two (the retries come at most 30 s apart).
pub const WATCH_STALE_AFTER: Duration = Duration::from_secs(60);

/// Per-watch state: synced at least once, and the failure it is in, if any.
#[derive(Clone, Debug, Default)]
pub(crate) struct WatchState {
    synced: bool,
    last_error: Option<(UnknownCause, String)>,
    /// When the current run of failures began (monotonic, and as a wall-clock time for messages).
    failing_since: Option<(Instant, jiff::Timestamp)>,
    /// The staleness was announced (the inputs-changed signal sent) for the current failure.
    announced_stale: bool,
}

/// The health of every watch, and a signal for the moments an input becomes observable or
/// stops being so (first list done, a lasting failure, a recovery), which re-evaluate every class.
#[derive(Clone, Debug)]
pub(crate) struct WatchHealth {
    states: Arc<Mutex<BTreeMap<&'static str, WatchState>>>,
    stale_after: Duration,
    changed: Arc<tokio::sync::Notify>,
}

impl Default for WatchHealth {
    fn default() -> Self {
        Self::new(WATCH_STALE_AFTER)
    }
}

impl WatchHealth {
    pub(crate) fn new(stale_after: Duration) -> Self {
        Self {
            states: Arc::default(),
            stale_after,
            changed: Arc::default(),
        }
    }

    pub(crate) fn update(&self, watch: &'static str, f: impl FnOnce(&mut WatchState) -> bool) {
        let announce = match self.states.lock() {
            Ok(mut states) => f(states.entry(watch).or_default()),
            Err(_) => false,
        };
        if announce {
            // One stored permit is enough: the consumer re-evaluates everything once.
            self.changed.notify_one();
        }
    }

    /// A watch event: the first list done, or the watch working again.
    pub(crate) fn succeeded(&self, watch: &'static str, init_done: bool) {
        self.update(watch, |s| {
            let first_sync = init_done && !s.synced;
            let recovered = s.announced_stale;
            s.synced |= init_done;
            s.last_error = None;
            s.failing_since = None;
            s.announced_stale = false;
            first_sync || recovered
        });
    }

    /// A watch error at `now`; announces once when the failure has lasted past `stale_after`.
    pub(crate) fn failed(
        &self,
        watch: &'static str,
        cause: UnknownCause,
        detail: String,
        now: Instant,
    ) {
        let stale_after = self.stale_after;
        self.update(watch, |s| {
            s.last_error = Some((cause, detail));
            let (since, _) = *s
                .failing_since
                .get_or_insert_with(|| (now, jiff::Timestamp::now()));
            let stale = s.synced && now.duration_since(since) >= stale_after;
            let announce = stale && !s.announced_stale;
            s.announced_stale |= stale;
            announce
        });
    }

    pub(crate) fn state(&self, watch: &'static str) -> WatchState {
        self.states
            .lock()
            .ok()
            .and_then(|s| s.get(watch).cloned())
            .unwrap_or_default()
    }

    /// Observed contents of a cache: found once synced and not failing for longer than
    /// `stale_after`; else unknown with the watch's error.
    pub(crate) fn observe<T>(
        &self,
        watch: &'static str,
        contents: impl FnOnce() -> T,
    ) -> Observed<T> {
        self.observe_at(watch, Instant::now(), contents)
    }

    pub(crate) fn observe_at<T>(
        &self,
        watch: &'static str,
        now: Instant,
        contents: impl FnOnce() -> T,
    ) -> Observed<T> {
        let state = self.state(watch);
        let stale_since = state
            .failing_since
            .filter(|(since, _)| now.duration_since(*since) >= self.stale_after);
        match (state.synced, state.last_error, stale_since) {
            (true, Some((cause, detail)), Some((_, at))) => Observed::unknown(
                cause,
                format!("{watch} watch failing since {at:.0}: {detail}"),
            ),
            (true, _, _) => Observed::Found(contents()),
            (false, Some((cause, detail)), _) => {
                Observed::unknown(cause, format!("{watch}: {detail}"))
            }
            (false, None, _) => Observed::not_observed(format!("{watch} cache not synced yet")),
        }
    }

    pub(crate) fn all_synced(&self, watches: &[&'static str]) -> bool {
        watches.iter().all(|w| self.state(w).synced)
    }

    /// Completes each time an input became observable or stopped being so.
    pub(crate) fn changes(&self) -> BoxStream<'static, ()> {
        futures::stream::unfold(self.changed.clone(), |changed| async move {
            changed.notified().await;
            Some(((), changed))
        })
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WATCH: &str = "nodeclaims";

    fn observed(health: &WatchHealth, at: Instant) -> Observed<u8> {
        health.observe_at(WATCH, at, || 7)
    }

    #[test]
    fn an_unlisted_cache_is_not_observed_never_empty() {
        let health = WatchHealth::new(Duration::from_secs(60));
        let start = Instant::now();
        assert!(
            matches!(observed(&health, start), Observed::Unknown(u) if u.cause == UnknownCause::NotObserved)
        );
        health.failed(WATCH, UnknownCause::AccessDenied, "403".into(), start);
        assert!(
            matches!(observed(&health, start), Observed::Unknown(u) if u.cause == UnknownCause::AccessDenied)
        );
        health.succeeded(WATCH, true);
        assert_eq!(observed(&health, start), Observed::Found(7));
    }

    #[test]
    fn a_synced_watch_that_keeps_failing_turns_unknown_after_the_stale_limit() {
        let health = WatchHealth::new(Duration::from_secs(60));
        let start = Instant::now();
        health.succeeded(WATCH, true);
        health.failed(
            WATCH,
            UnknownCause::AccessDenied,
            "403 Forbidden".into(),
            start,
        );
        let later = |secs| start + Duration::from_secs(secs);
        assert_eq!(
            observed(&health, later(59)),
            Observed::Found(7),
            "a blip is ridden out"
        );
        match observed(&health, later(60)) {
            Observed::Unknown(u) => {
                assert_eq!(u.cause, UnknownCause::AccessDenied);
                assert!(
                    u.detail.contains("failing since") && u.detail.contains("403"),
                    "{}",
                    u.detail
                );
            }
            other => panic!("a lasting failure must be unknown, got {other:?}"),
        }
        health.succeeded(WATCH, false);
        assert_eq!(
            observed(&health, later(61)),
            Observed::Found(7),
            "recovered"
        );
    }

    #[test]
    fn first_sync_lasting_failure_and_recovery_are_announced_once_each() {
        let health = WatchHealth::new(Duration::from_secs(60));
        let announced = || futures::FutureExt::now_or_never(health.changed.notified()).is_some();
        let start = Instant::now();
        health.succeeded(WATCH, false);
        assert!(
            !announced(),
            "an event before the first list announces nothing"
        );
        health.succeeded(WATCH, true);
        assert!(announced(), "the first list, even an empty one");
        health.succeeded(WATCH, true);
        assert!(!announced(), "a relist is no news");
        health.failed(WATCH, UnknownCause::Unavailable, "reset".into(), start);
        health.failed(
            WATCH,
            UnknownCause::Unavailable,
            "reset".into(),
            start + Duration::from_secs(30),
        );
        assert!(!announced(), "not stale yet");
        health.failed(
            WATCH,
            UnknownCause::Unavailable,
            "reset".into(),
            start + Duration::from_secs(61),
        );
        assert!(announced(), "stale");
        health.failed(
            WATCH,
            UnknownCause::Unavailable,
            "reset".into(),
            start + Duration::from_secs(90),
        );
        assert!(!announced(), "announced once per failure");
        health.succeeded(WATCH, false);
        assert!(announced(), "recovered");
    }
}

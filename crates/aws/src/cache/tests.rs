//! The fact store's behaviour in paused time: sharing, TTLs, the stale window, the bound,
//! failures, jitter and the changes feed.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

fn ttls() -> Ttls {
    Ttls {
        ttl: Duration::from_secs(60),
        jitter: Duration::ZERO,
        stale: Duration::ZERO,
        error_ttl: Duration::from_secs(10),
        refused_ttl: Duration::from_secs(300),
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
async fn a_refusal_is_asked_again_after_refused_ttl_an_unsupported_call_after_ttl_a_passing_failure_after_error_ttl()
 {
    let calls = Arc::new(AtomicUsize::new(0));
    let cache: Cache<&str, u32> = Cache::new(ttls());
    for (cause, retried_after) in [
        (UnknownCause::AccessDenied, Duration::from_secs(300)),
        (UnknownCause::Unsupported, Duration::from_secs(60)),
        (UnknownCause::OtherAccount, Duration::from_secs(300)),
        (UnknownCause::Throttled, Duration::from_secs(10)),
        (UnknownCause::Unavailable, Duration::from_secs(10)),
    ] {
        let key: &'static str = Box::leak(format!("{cause:?}").into_boxed_str());
        let fail = || {
            let (calls, cause) = (calls.clone(), cause);
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Err::<Option<u32>, _>(Unobserved {
                    cause,
                    detail: "refused or failed".into(),
                })
            }
        };
        let before = calls.load(Ordering::SeqCst);
        cache.get(key, fail).await;
        // Read every second until just before the failure is due: no new call.
        for _ in 1..retried_after.as_secs() {
            tokio::time::advance(Duration::from_secs(1)).await;
            let read = cache.get(key, fail).await;
            assert!(matches!(read.current, Observed::Unknown(ref u) if u.cause == cause));
        }
        assert_eq!(calls.load(Ordering::SeqCst), before + 1, "{cause:?}");
        tokio::time::advance(Duration::from_secs(1)).await;
        cache.get(key, fail).await;
        assert_eq!(
            calls.load(Ordering::SeqCst),
            before + 2,
            "{cause:?} asked again when due"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_panicking_load_becomes_unknown() {
    let cache: Cache<&str, u32> = Cache::new(ttls());
    let read = cache.get("k", || async { panic!("boom") }).await;
    assert!(matches!(read.current, Observed::Unknown(u) if u.cause == UnknownCause::Unavailable));
}

#[tokio::test(start_paused = true)]
async fn idle_keys_are_evicted() {
    let cache: Cache<&str, u32> = Cache::new(ttls());
    cache.get("old", || async { Ok(Some(1)) }).await;
    tokio::time::advance(Duration::from_secs(601)).await;
    cache.get("new", || async { Ok(Some(2)) }).await;
    assert_eq!(cache.len(), 1);
}

fn swr() -> Ttls {
    Ttls {
        stale: Duration::from_secs(300),
        ..ttls()
    }
}

#[tokio::test(start_paused = true)]
async fn a_due_answer_is_served_at_once_while_one_refresh_runs_behind_it() {
    let cache: Cache<&str, u32> = Cache::new(swr());
    cache.get("k", || async { Ok(Some(1)) }).await;
    tokio::time::advance(Duration::from_secs(61)).await;
    let loads = Arc::new(AtomicUsize::new(0));
    let slow = |loads: Arc<AtomicUsize>| {
        move || async move {
            loads.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(Some(2))
        }
    };
    let started = Instant::now();
    let first = cache.get("k", slow(loads.clone())).await;
    let second = cache.get("k", slow(loads.clone())).await;
    assert_eq!(started.elapsed(), Duration::ZERO, "no reader waited");
    assert_eq!(first.current, Observed::Found(1));
    assert_eq!(second.current, Observed::Found(1));
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(loads.load(Ordering::SeqCst), 1, "one refresh for both");
    let after = cache.get("k", || async { Ok(Some(3)) }).await;
    assert_eq!(
        after.current,
        Observed::Found(2),
        "the refresh's answer, fresh again"
    );
}

#[tokio::test(start_paused = true)]
async fn no_answer_older_than_the_bound_is_ever_handed_out() {
    let ttls = swr();
    let cache: Cache<&str, u32> = Cache::new(ttls);
    cache.get("k", || async { Ok(Some(1)) }).await;
    // Nobody reads for longer than ttl + stale: the next reader waits for the load.
    tokio::time::advance(ttls.staleness_bound()).await;
    let started = Instant::now();
    let read = cache
        .get("k", || async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(Some(2))
        })
        .await;
    assert_eq!(read.current, Observed::Found(2));
    assert_eq!(started.elapsed(), Duration::from_millis(300));
}

#[tokio::test(start_paused = true)]
async fn a_refresh_that_fails_turns_the_answer_unknown_never_a_guess() {
    let cache: Cache<&str, u32> = Cache::new(swr());
    cache.get("k", || async { Ok(Some(1)) }).await;
    tokio::time::advance(Duration::from_secs(61)).await;
    let served = cache.get("k", || async { Err(unavailable()) }).await;
    assert_eq!(served.current, Observed::Found(1));
    tokio::task::yield_now().await;
    let after = cache.get("k", || async { Ok(Some(5)) }).await;
    assert_eq!(after.current, Observed::Unknown(unavailable()));
    assert_eq!(after.stale_age(), Some(Duration::from_secs(61)));
}

#[tokio::test(start_paused = true)]
async fn jitter_only_ever_brings_a_refresh_forward() {
    let ttls = Ttls {
        jitter: Duration::from_secs(6),
        ..ttls()
    };
    for _ in 0..50 {
        let due = jittered(&ttls);
        assert!(due <= ttls.ttl && due >= Duration::from_secs(54), "{due:?}");
    }
    let wide = Ttls {
        jitter: Duration::from_secs(600),
        ..ttls
    };
    // A jitter larger than the ttl brings the refresh forward at most to the load itself.
    assert!((0..50).all(|_| jittered(&wide) <= ttls.ttl));
}

#[tokio::test(start_paused = true)]
async fn a_changed_answer_names_the_readers_of_its_key_and_only_them() {
    let changes = Arc::new(Changes::default());
    let mut feed = changes.subscribe();
    let cache: Cache<&str, u32> = Cache::with_changes(swr(), changes.clone());
    read_as("class-a", cache.get("shared", || async { Ok(Some(1)) })).await;
    read_as("class-b", cache.get("shared", || async { Ok(Some(1)) })).await;
    read_as("class-c", cache.get("own", || async { Ok(Some(1)) })).await;
    tokio::time::advance(Duration::from_secs(61)).await;
    // The same answer again: nobody is told.
    read_as("class-c", cache.get("own", || async { Ok(Some(1)) })).await;
    // A new one: both readers of the shared key are.
    read_as("class-a", cache.get("shared", || async { Ok(Some(2)) })).await;
    tokio::task::yield_now().await;
    let changed = futures::StreamExt::next(&mut feed).await.unwrap();
    let expected: Arc<[Arc<str>]> = vec![Arc::from("class-a"), Arc::from("class-b")].into();
    assert_eq!(changed, Changed::Readers(expected));
    assert!(
        futures::FutureExt::now_or_never(futures::StreamExt::next(&mut feed)).is_none(),
        "the unchanged key announced nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn evidence_of_breakage_makes_a_readers_answers_due_at_once() {
    let cache: Cache<&str, u32> = Cache::new(swr());
    read_as("class-a", cache.get("a", || async { Ok(Some(1)) })).await;
    read_as("class-b", cache.get("b", || async { Ok(Some(1)) })).await;
    // Just read: too young to revalidate (a burst of evidence costs one refresh, not many).
    assert_eq!(cache.revalidate("class-a", Duration::from_secs(30)), 0);
    tokio::time::advance(Duration::from_secs(31)).await;
    assert_eq!(cache.revalidate("class-a", Duration::from_secs(30)), 1);
    // The next read gets the answer it had at once and refreshes it behind.
    let served = cache.get("a", || async { Ok(Some(2)) }).await;
    assert_eq!(served.current, Observed::Found(1));
    tokio::task::yield_now().await;
    assert_eq!(
        cache.get("a", || async { Ok(Some(3)) }).await.current,
        Observed::Found(2)
    );
    // Another reader's answer was left alone.
    assert_eq!(
        cache.get("b", || async { Ok(Some(9)) }).await.current,
        Observed::Found(1)
    );
}

#[tokio::test(start_paused = true)]
async fn a_reader_is_told_when_a_due_answer_was_served_and_can_ask_for_fresh_ones() {
    let cache: Cache<&str, u32> = Cache::new(swr());
    read_as("class-a", cache.get("k", || async { Ok(Some(1)) })).await;
    let (read, served_due) =
        read_reporting("class-a", false, cache.get("k", || async { Ok(Some(2)) })).await;
    assert_eq!(
        (read.current, served_due),
        (Observed::Found(1), false),
        "fresh"
    );
    tokio::time::advance(Duration::from_secs(61)).await;
    let (read, served_due) = read_reporting(
        "class-a",
        false,
        cache.get("k", || async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok(Some(2))
        }),
    )
    .await;
    assert_eq!(
        (read.current, served_due),
        (Observed::Found(1), true),
        "due, served"
    );
    // Asked for fresh answers, the reader waits for the refresh already running.
    let started = Instant::now();
    let (read, served_due) =
        read_reporting("class-a", true, cache.get("k", || async { Ok(Some(3)) })).await;
    assert_eq!((read.current, served_due), (Observed::Found(2), false));
    assert_eq!(started.elapsed(), Duration::from_secs(1));
}

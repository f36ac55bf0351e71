//! When a class is reconciled again: at the refresh in the user lane, soon when a condition is
//! Unknown for a passing cause, and with backoff after a failed reconcile. Pure, no IO.

use crate::error::Retry;
use karpenter_health_api::{KarpenterHealthStatus, Reason};
use std::time::Duration;

/// Which queue a reconcile came through. Changes users make (a class, aws-auth, a NodePool, the
/// controller's Deployment) run in a lane of their own, never behind the NodeClaim and pending-Pod
/// storms and background AWS refreshes of the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    User,
    Bulk,
}

/// How soon a class Unknown for a passing cause (AWS throttled or unreachable, or the
/// operator's own rate limit spent, as at a cold start with many distinct IAM questions) is
/// evaluated again, instead of at the next refresh: its failed reads are served as unknown for
/// the fact store's `error_ttl` (15 s) and asked again after that. Up to [`RETRY_SPREAD`] more,
/// by class, so the classes a cold start left waiting do not all ask at once.
pub const TRANSIENT_RETRY: Duration = Duration::from_secs(30);
const RETRY_SPREAD: Duration = Duration::from_secs(15);

/// When the class runs again after this reconcile: at [`TRANSIENT_RETRY`] when a condition is
/// Unknown for a passing cause, else at the next refresh (the user lane's; two lanes refreshing
/// would evaluate each class twice), else on a change.
pub(crate) fn next_run(
    lane: Lane,
    status: &KarpenterHealthStatus,
    refresh: Duration,
    name: &str,
) -> Option<Duration> {
    let passing = [
        Reason::AwsThrottled.as_str(),
        Reason::AwsUnavailable.as_str(),
    ];
    let unknown_for_now = status
        .conditions
        .iter()
        .any(|c| c.status == "Unknown" && passing.contains(&c.reason.as_str()));
    if unknown_for_now {
        let spread = name
            .bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
            % RETRY_SPREAD.as_millis().max(1) as u64;
        return Some((TRANSIENT_RETRY + Duration::from_millis(spread)).min(refresh));
    }
    match lane {
        Lane::User => Some(refresh),
        Lane::Bulk => None,
    }
}

/// How soon a reconcile that found the KarpenterHealth cache not listed yet runs again.
pub(crate) const HEALTHS_NOT_LISTED_RETRY: Duration = Duration::from_millis(500);

/// First retry of a transient failure; each further one waits twice as long, up to the cap.
const TRANSIENT_FIRST_RETRY: Duration = Duration::from_secs(1);
const TRANSIENT_MAX_RETRY: Duration = Duration::from_secs(30);
/// How often a permanent failure is retried at most (never more often than the refresh).
const PERMANENT_RETRY: Duration = Duration::from_secs(60);

/// When to retry after the `failures`-th consecutive failure of one EC2NodeClass.
pub fn retry_after(retry: Retry, failures: u32, refresh: Duration) -> Duration {
    match retry {
        Retry::Transient => {
            let doublings = failures.saturating_sub(1).min(16);
            TRANSIENT_FIRST_RETRY
                .saturating_mul(1 << doublings)
                .min(TRANSIENT_MAX_RETRY)
        }
        Retry::Permanent => PERMANENT_RETRY.min(refresh),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::status_at;

    #[test]
    fn transient_failures_back_off_exponentially_up_to_a_cap() {
        let refresh = Duration::from_secs(300);
        let waits: Vec<u64> = (1..=8)
            .map(|n| retry_after(Retry::Transient, n, refresh).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(
            retry_after(Retry::Transient, u32::MAX, refresh),
            TRANSIENT_MAX_RETRY
        );
    }

    #[test]
    fn permanent_failures_are_retried_slowly_but_never_slower_than_the_refresh() {
        assert_eq!(
            retry_after(Retry::Permanent, 1, Duration::from_secs(300)),
            Duration::from_secs(60)
        );
        assert_eq!(
            retry_after(Retry::Permanent, 1, Duration::from_secs(2)),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn a_class_unknown_for_a_passing_cause_runs_again_soon_in_either_lane() {
        let refresh = Duration::from_secs(300);
        let healthy = status_at(1_000);
        assert_eq!(next_run(Lane::User, &healthy, refresh, "a"), Some(refresh));
        assert_eq!(next_run(Lane::Bulk, &healthy, refresh, "a"), None);
        for (reason, soon) in [
            (Reason::AwsThrottled, true),
            (Reason::AwsUnavailable, true),
            (Reason::AwsAccessDenied, false),
        ] {
            let mut status = status_at(1_000);
            status.conditions[1].status = "Unknown".into();
            status.conditions[1].reason = reason.as_str().into();
            for lane in [Lane::User, Lane::Bulk] {
                let next = next_run(lane, &status, refresh, "a");
                if soon {
                    let after = next.expect("a retry");
                    assert!(
                        (TRANSIENT_RETRY..=TRANSIENT_RETRY + RETRY_SPREAD).contains(&after),
                        "{reason:?}: {after:?}"
                    );
                } else {
                    assert_eq!(next, next_run(lane, &healthy, refresh, "a"), "{reason:?}");
                }
            }
            // Never later than the refresh itself.
            assert_eq!(
                next_run(Lane::User, &status, Duration::from_secs(10), "a"),
                Some(Duration::from_secs(10))
            );
        }
        // Classes spread their retries.
        let mut throttled = status_at(1_000);
        throttled.conditions[1].status = "Unknown".into();
        throttled.conditions[1].reason = Reason::AwsThrottled.as_str().into();
        let retries: std::collections::BTreeSet<_> = (0..20)
            .map(|i| next_run(Lane::User, &throttled, refresh, &format!("bench-{i:02}")))
            .collect();
        assert!(retries.len() > 10, "{retries:?}");
    }
}

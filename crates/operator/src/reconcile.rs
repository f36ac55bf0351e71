//! One reconcile of one EC2NodeClass, as a visible pipeline: gather (IO) → evaluate and render
//! (pure) → patch (IO, only on change) → announce transitions; and the error policy that decides
//! when a failed reconcile runs again. Does IO.

use crate::context::Context;
use crate::error::{Error, Retry};
use crate::health_object;
use crate::status_writer::Decision;
use crate::triggers::StoreReady;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_api::{KarpenterHealth, KarpenterHealthStatus, Reason};
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

/// The name of a guarded EC2NodeClass, malformed or not, for logs and spans.
fn name_of(guarded: &DeserializeGuard<EC2NodeClass>) -> String {
    match &guarded.0 {
        Ok(node_class) => node_class.name_any(),
        Err(invalid) => invalid
            .metadata
            .name
            .clone()
            .unwrap_or_else(|| "<unnamed>".into()),
    }
}

/// Reconciles one EC2NodeClass inside a span naming it, so every log line of the reconcile (the
/// AWS adapter's included) carries its EC2NodeClass.
pub async fn reconcile(
    guarded: Arc<DeserializeGuard<EC2NodeClass>>,
    ctx: Arc<Context>,
    lane: Lane,
) -> Result<Action, Error> {
    let span = tracing::info_span!("reconcile", node_class = %name_of(&guarded), ?lane);
    reconcile_in_span(guarded, ctx, lane).instrument(span).await
}

/// Which queue a reconcile came through. Changes users make (a class, aws-auth, a NodePool, the
/// controller's Deployment) run in a lane of their own, never behind the NodeClaim and pending-Pod
/// storms and background AWS refreshes of the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    User,
    Bulk,
}

async fn reconcile_in_span(
    guarded: Arc<DeserializeGuard<EC2NodeClass>>,
    ctx: Arc<Context>,
    lane: Lane,
) -> Result<Action, Error> {
    let started = Instant::now();
    let node_class = match &guarded.0 {
        Ok(node_class) => node_class,
        Err(invalid) => {
            // A malformed object must not stop the watch: report it by name and move on.
            tracing::warn!(error = %invalid.error, "skipping malformed EC2NodeClass");
            return Ok(Action::await_change());
        }
    };
    let name = node_class.name_any();
    if node_class.metadata.deletion_timestamp.is_some() {
        ctx.metrics.forget(&name);
        ctx.writer.forget(&name);
        ctx.forget_class_lock(&name);
        return Ok(Action::await_change());
    }
    // The KarpenterHealth cache must be listed before it is read: read empty at a start or a
    // leader change, every class would be re-created and flash through Pending. Polled, not
    // awaited: of several reconciles awaiting the store's readiness at once, kube-runtime 5's
    // `wait_until_ready` woke only one, and the others hung for good (seen with three classes).
    if ctx.healths.is_empty_or_unsynced() {
        return Ok(Action::requeue(HEALTHS_NOT_LISTED_RETRY));
    }
    // One reconcile of a class at a time across both lanes: a decision made on older caches
    // must not be handed to the writer after a newer one.
    let _one_at_a_time = ctx.class_lock(&name).lock_owned().await;
    let healths: Api<KarpenterHealth> = Api::all(ctx.client.clone());
    let stored = ensure_owned_health(&ctx, &healths, node_class).await?;
    let (health_ref, class_ref): (ObjectReference, ObjectReference) =
        (stored.object_ref(&()), node_class.object_ref(&()));
    // What the API server holds now (a re-created object holds no status, a hand edit holds
    // someone else's); `previous` is what this operator last decided, for transitions.
    let on_server = stored.status.clone();
    let mut previous = ctx.previous_status(&name, Some(&stored));
    if previous.as_ref().is_none_or(|s| s.conditions.is_empty()) {
        // Show every check as Pending at once: the first AWS reads may take seconds. Through the
        // writer like every decision, so answers that come at once replace it unwritten.
        let pending = KarpenterHealthStatus {
            observed_generation: stored.metadata.generation,
            ..KarpenterHealthStatus::pending(Time(status_clock()), node_class.metadata.generation)
        };
        ctx.writer.submit(
            &name,
            Decision {
                status: pending.clone(),
                shown_before: on_server.clone(),
                health: health_ref.clone(),
                node_class: class_ref.clone(),
                triggered_at: None,
            },
        );
        previous = Some(pending);
    }

    // 1. gather (IO)
    let (mut facts, served_due) = ctx.gather(node_class).await;
    // 2. evaluate and 3. render (pure)
    let evaluate = |facts: &karpenter_health_checks::Facts| KarpenterHealthStatus {
        // kstatus compares this with the KarpenterHealth's own generation (GitOps health).
        observed_generation: stored.metadata.generation,
        ..karpenter_health_checks::evaluate(facts, &ctx.settings, previous.as_ref(), status_clock())
    };
    let mut status = evaluate(&facts);
    if served_due && turns_false(previous.as_ref(), &status) {
        // A new False from AWS answers of different ages is confirmed on answers of one moment.
        facts = ctx.reread_aws(node_class, facts).await;
        status = evaluate(&facts);
    }
    // 4. hand the decision to the status writer, only when something changed or the server
    // holds something else (a deleted and re-created object, a hand edit); it writes and
    // announces the transitions apart from this reconcile
    let server_differs = server_differs(on_server.as_ref(), previous.as_ref(), &status, |held| {
        ctx.writer.wrote(&name, held)
    });
    let triggered_at = take_trigger_time(&ctx, &name);
    if server_differs || needs_write(previous.as_ref(), &status, ctx.config.refresh_interval) {
        tracing::debug!(
            server_differs,
            changed = ?changed_conditions(on_server.as_ref(), &status),
            "deciding status"
        );
        ctx.writer.submit(
            &name,
            Decision {
                status: status.clone(),
                shown_before: previous.clone(),
                health: health_ref,
                node_class: class_ref,
                triggered_at,
            },
        );
    }
    ctx.metrics.record_status(&name, &status);
    ctx.metrics.observe_reconcile(&name, started.elapsed());
    ctx.reset_failures(&name);
    Ok(
        match next_run(lane, &status, ctx.config.refresh_interval, &name) {
            Some(after) => Action::requeue(after),
            None => Action::await_change(),
        },
    )
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
fn next_run(
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

/// Whether a condition of `status` is False that `previous` did not hold False.
fn turns_false(previous: Option<&KarpenterHealthStatus>, status: &KarpenterHealthStatus) -> bool {
    status.conditions.iter().any(|c| {
        c.status == "False"
            && previous
                .and_then(|p| p.conditions.iter().find(|q| q.type_ == c.type_))
                .is_none_or(|q| q.status != "False")
    })
}

/// The KarpenterHealth of `node_class` from the cache when it is owned by this very object (not
/// by a deleted namesake), else created or adopted now.
async fn ensure_owned_health(
    ctx: &Context,
    healths: &Api<KarpenterHealth>,
    node_class: &EC2NodeClass,
) -> Result<KarpenterHealth, Error> {
    let stored = ctx.healths.get(&ObjectRef::new(&node_class.name_any()));
    let owned = stored.as_ref().is_some_and(|h| {
        h.owner_references()
            .iter()
            .any(|o| Some(&o.uid) == node_class.metadata.uid.as_ref())
    });
    match (stored, owned) {
        (Some(health), true) => Ok(health.as_ref().clone()),
        _ => health_object::ensure(healths, node_class).await,
    }
}

/// When the change that asked for `name` arrived, if one did; clears it.
fn take_trigger_time(ctx: &Context, name: &str) -> Option<Instant> {
    ctx.triggered_at
        .lock()
        .ok()
        .and_then(|mut m| m.remove(name))
}

/// Now, in whole seconds: the precision the API server keeps of a status's times (`metav1.Time`
/// is RFC 3339 without fractions). With nanoseconds, the object read back never equalled the
/// status just written, so every change was written twice (found by the benchmark: 2 status
/// writes per EC2NodeClass per aws-auth edit).
fn status_clock() -> jiff::Timestamp {
    jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())
        .unwrap_or(jiff::Timestamp::now())
}

/// The condition types whose stored form differs from `next`'s, for the debug log of a write.
fn changed_conditions(
    stored: Option<&KarpenterHealthStatus>,
    next: &KarpenterHealthStatus,
) -> Vec<String> {
    next.conditions
        .iter()
        .filter(|c| stored.is_none_or(|s| !s.conditions.contains(c)))
        .map(|c| {
            format!(
                "{}={}/{}@{:?}",
                c.type_, c.status, c.reason, c.last_transition_time
            )
        })
        .collect()
}

/// Whether the server holds something else than `status`: a deleted and re-created object, a
/// hand edit. A cache holding a status this writer wrote lately, while the newest decision
/// (`previous`) already equals `status`, is only behind the writer: the echo of the newer write
/// is on its way. Compared with the cache alone, every reconcile in that window (a storm's, in
/// the other lane, right after a user change) wrote the same status again (206 needless writes
/// in the Pod storms of benchmark run 19).
fn server_differs(
    on_server: Option<&KarpenterHealthStatus>,
    previous: Option<&KarpenterHealthStatus>,
    status: &KarpenterHealthStatus,
    written_lately: impl Fn(&KarpenterHealthStatus) -> bool,
) -> bool {
    let decided = without_last_evaluated(status);
    if on_server.map(without_last_evaluated).as_ref() == Some(&decided) {
        return false;
    }
    let cache_behind = on_server.is_some_and(&written_lately)
        && previous.map(without_last_evaluated).as_ref() == Some(&decided);
    !cache_behind
}

/// A status without its `lastEvaluated` stamp, to compare what was decided.
pub fn without_last_evaluated(status: &KarpenterHealthStatus) -> KarpenterHealthStatus {
    KarpenterHealthStatus {
        last_evaluated: None,
        ..status.clone()
    }
}

/// Whether `next` must be written: something but `lastEvaluated` changed, or `lastEvaluated` is
/// older than half a refresh (so it moves about once per refresh and a status write never
/// triggers another).
pub fn needs_write(
    previous: Option<&KarpenterHealthStatus>,
    next: &KarpenterHealthStatus,
    refresh: Duration,
) -> bool {
    let Some(previous) = previous else {
        return true;
    };
    if without_last_evaluated(previous) != without_last_evaluated(next) {
        return true;
    }
    match (&previous.last_evaluated, &next.last_evaluated) {
        (Some(before), Some(now)) => {
            let age = now.0.duration_since(before.0);
            age >= jiff::SignedDuration::try_from(refresh / 2).unwrap_or(jiff::SignedDuration::MAX)
        }
        _ => true,
    }
}

/// How soon a reconcile that found the KarpenterHealth cache not listed yet runs again.
const HEALTHS_NOT_LISTED_RETRY: Duration = Duration::from_millis(500);

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

/// The error policy: transient errors back off per EC2NodeClass, permanent ones are retried
/// slowly; both are logged with the EC2NodeClass and counted.
pub fn error_policy(
    object: Arc<DeserializeGuard<EC2NodeClass>>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    let name = name_of(&object);
    let retry = error.retry();
    let failures = ctx.count_failure(&name);
    let after = retry_after(retry, failures, ctx.config.refresh_interval);
    tracing::warn!(
        node_class = %name,
        %error,
        kind = error.metric_label(),
        ?retry,
        failures,
        retry_in = ?after,
        "reconcile failed"
    );
    ctx.metrics.reconcile_error(error.metric_label());
    Action::requeue(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_at(seconds: i64) -> KarpenterHealthStatus {
        let at = Time(jiff::Timestamp::from_second(seconds).unwrap());
        KarpenterHealthStatus {
            last_evaluated: Some(at.clone()),
            ..KarpenterHealthStatus::pending(at, Some(1))
        }
    }

    #[test]
    fn a_cache_behind_this_writer_asks_for_no_write_a_foreign_edit_does() {
        let mut ours_before = status_at(1_000);
        ours_before.conditions[1].status = "False".into();
        let decided = status_at(1_010);
        let wrote = |s: &KarpenterHealthStatus| {
            without_last_evaluated(s) == without_last_evaluated(&ours_before)
                || without_last_evaluated(s) == without_last_evaluated(&decided)
        };
        // `status` decided after `decided`, with the cache holding `held`.
        let differs = |held: Option<&KarpenterHealthStatus>, status: &KarpenterHealthStatus| {
            server_differs(held, Some(&decided), status, wrote)
        };
        // The cache still holds our earlier write; the newest decision is this one.
        assert!(!differs(Some(&ours_before), &decided));
        // The same cache, but the decision changed since: written.
        let mut changed = decided.clone();
        changed.conditions[2].status = "False".into();
        assert!(differs(Some(&ours_before), &changed));
        // Someone else's edit, a re-created object: written.
        let mut foreign = status_at(1_000);
        foreign.conditions[3].message = "edited by hand".into();
        assert!(differs(Some(&foreign), &decided));
        assert!(differs(None, &decided));
        // The server holds the decision: nothing to write.
        assert!(!server_differs(Some(&decided), None, &decided, |_| false));
    }

    #[test]
    fn only_a_condition_newly_false_asks_for_confirmation() {
        let with = |status: &str| {
            let mut s = status_at(1_000);
            s.conditions[1].status = status.into();
            s
        };
        let (unknown, falsy, truthy) = (with("Unknown"), with("False"), with("True"));
        assert!(turns_false(Some(&unknown), &falsy));
        assert!(turns_false(Some(&truthy), &falsy));
        assert!(turns_false(None, &falsy));
        assert!(!turns_false(Some(&falsy), &falsy), "already False");
        assert!(!turns_false(Some(&falsy), &truthy));
        assert!(!turns_false(Some(&unknown), &truthy));
    }

    #[test]
    fn an_unchanged_status_is_rewritten_only_once_per_half_refresh() {
        let refresh = Duration::from_secs(300);
        let before = status_at(1_000);
        let mut soon = before.clone();
        soon.last_evaluated = status_at(1_010).last_evaluated;
        assert!(!needs_write(Some(&before), &soon, refresh));
        let mut later = before.clone();
        later.last_evaluated = status_at(1_200).last_evaluated;
        assert!(needs_write(Some(&before), &later, refresh));
    }

    #[test]
    fn a_changed_condition_is_always_written() {
        let before = status_at(1_000);
        let mut next = before.clone();
        next.conditions[0].reason = "InstanceProfileValid".into();
        next.conditions[0].status = "True".into();
        assert!(needs_write(Some(&before), &next, Duration::from_secs(300)));
        assert!(needs_write(None, &next, Duration::from_secs(300)));
    }

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

//! What one reconcile decides, apart from how it reads and writes: at a first visit every check
//! Pending; then the evaluated status, a new False confirmed on AWS answers of one moment, and
//! whether the status goes to the writer (only on change, or when the server holds something
//! else). Pure but for the re-read it is handed; tested without a cluster.

use karpenter_health_api::KarpenterHealthStatus;
use karpenter_health_checks::Facts;
use std::future::Future;
use std::time::Duration;

/// What is held of one class's status when its reconcile starts.
#[derive(Clone, Debug, Default)]
pub struct Held {
    /// The stored KarpenterHealth's status (a re-created object holds none, a hand edit holds
    /// someone else's).
    pub on_server: Option<KarpenterHealthStatus>,
    /// What this operator decided last, for transitions.
    pub previous: Option<KarpenterHealthStatus>,
}

/// At a first visit (nothing decided yet, or a status without conditions), the all-Pending status
/// to show at once, while the first AWS reads may take seconds; it then stands as the previous
/// decision.
pub fn opening(
    held: &mut Held,
    pending: impl FnOnce() -> KarpenterHealthStatus,
) -> Option<KarpenterHealthStatus> {
    if held
        .previous
        .as_ref()
        .is_some_and(|s| !s.conditions.is_empty())
    {
        return None;
    }
    let pending = pending();
    held.previous = Some(pending.clone());
    Some(pending)
}

/// One reconcile's verdict on the facts it gathered.
#[derive(Clone, Debug)]
pub struct Verdict {
    pub status: KarpenterHealthStatus,
    /// Whether the status goes to the writer.
    pub write: bool,
    /// Whether the server holds something else than the status (a re-created object, a hand
    /// edit), whatever changed.
    pub server_differs: bool,
    /// Whether AWS was read again to confirm a new False.
    pub reread: bool,
}

/// How a reconcile concludes once it has `facts`.
pub struct Conclude<'a, E, W> {
    pub held: &'a Held,
    /// Evaluates facts against the previous decision (the engine, with the operator's settings
    /// and clock).
    pub evaluate: E,
    /// Whether this process wrote `status` lately (so a cache holding it is only behind).
    pub written_lately: W,
    pub refresh: Duration,
}

impl<E, W> std::fmt::Debug for Conclude<'_, E, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conclude")
            .field("held", self.held)
            .field("refresh", &self.refresh)
            .finish_non_exhaustive()
    }
}

impl<E, W> Conclude<'_, E, W>
where
    E: Fn(&Facts, Option<&KarpenterHealthStatus>) -> KarpenterHealthStatus,
    W: Fn(&KarpenterHealthStatus) -> bool,
{
    /// Evaluates `facts`; when some AWS answer was served past its period (`served_due`) and a
    /// condition turns False, reads AWS again with `reread` (waiting for every refresh) and
    /// evaluates that instead: a False is published on answers of one moment, never on a fresh
    /// answer next to a stale one.
    pub async fn on<R, F>(&self, facts: Facts, served_due: bool, reread: R) -> Verdict
    where
        R: FnOnce(Facts) -> F,
        F: Future<Output = Facts>,
    {
        let previous = self.held.previous.as_ref();
        let mut status = (self.evaluate)(&facts, previous);
        let reread_now = served_due && turns_false(previous, &status);
        if reread_now {
            status = (self.evaluate)(&reread(facts).await, previous);
        }
        let differs = server_differs(
            self.held.on_server.as_ref(),
            previous,
            &status,
            &self.written_lately,
        );
        let write = differs || needs_write(previous, &status, self.refresh);
        Verdict {
            status,
            write,
            server_differs: differs,
            reread: reread_now,
        }
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

/// The condition types whose stored form differs from `next`'s, for the debug log of a write.
pub fn changed_conditions(
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
pub fn server_differs(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::status_at;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

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

    /// The reconcile scenarios, run on the real engine without a cluster.
    mod scenarios {
        use super::*;
        use karpenter_health_api::ConditionType;
        use karpenter_health_checks::Settings;
        use karpenter_health_checks::testing::now;
        use std::cell::Cell;

        const REFRESH: Duration = Duration::from_secs(300);

        fn evaluate(
            facts: &Facts,
            previous: Option<&KarpenterHealthStatus>,
        ) -> KarpenterHealthStatus {
            karpenter_health_checks::evaluate(facts, &Settings::default(), previous, now())
        }

        fn profile_status(status: &KarpenterHealthStatus) -> &str {
            let profile = ConditionType::InstanceProfileReady.as_str();
            status
                .conditions
                .iter()
                .find(|c| c.type_ == profile)
                .map(|c| c.status.as_str())
                .unwrap_or_default()
        }

        /// Facts on which the instance profile proves missing: a False.
        fn profile_missing() -> Facts {
            Facts::healthy().with_instance_profile_spec("KarpenterNodeProfile", false)
        }

        fn conclude(
            held: &Held,
        ) -> Conclude<
            '_,
            impl Fn(&Facts, Option<&KarpenterHealthStatus>) -> KarpenterHealthStatus,
            impl Fn(&KarpenterHealthStatus) -> bool,
        > {
            Conclude {
                held,
                evaluate,
                written_lately: |_: &KarpenterHealthStatus| false,
                refresh: REFRESH,
            }
        }

        fn block_on<F: Future>(future: F) -> F::Output {
            futures::executor::block_on(future)
        }

        #[test]
        fn a_first_visit_shows_every_check_pending_once_then_decides() {
            let pending = KarpenterHealthStatus::pending(Time(now()), Some(1));
            let mut held = Held::default();
            let shown = opening(&mut held, || pending.clone());
            assert_eq!(shown.as_ref(), Some(&pending));
            assert_eq!(
                held.previous.as_ref(),
                Some(&pending),
                "Pending stands as decided"
            );
            assert_eq!(opening(&mut held, || pending.clone()), None, "shown once");
            let verdict = block_on(conclude(&held).on(Facts::healthy(), false, |f| async { f }));
            assert!(verdict.write, "the first evaluation replaces Pending");
            assert_eq!(profile_status(&verdict.status), "True");
        }

        #[test]
        fn a_new_false_on_answers_of_different_ages_is_confirmed_on_a_reread() {
            let held = Held {
                on_server: None,
                previous: Some(evaluate(&Facts::healthy(), None)),
            };
            let rereads = Cell::new(0);
            let reread = |_: Facts| {
                rereads.set(rereads.get() + 1);
                async { Facts::healthy() }
            };
            let verdict = block_on(conclude(&held).on(profile_missing(), true, reread));
            assert_eq!(rereads.get(), 1);
            assert!(verdict.reread);
            assert_eq!(
                profile_status(&verdict.status),
                "True",
                "the re-read answers stand"
            );
            // Answers of one moment are not read again: the False is published.
            let verdict = block_on(conclude(&held).on(profile_missing(), false, |_| async {
                panic!("no re-read without answers served past their period")
            }));
            assert!(!verdict.reread);
            assert_eq!(profile_status(&verdict.status), "False");
        }

        #[test]
        fn a_condition_false_before_is_not_confirmed_again() {
            let held = Held {
                on_server: None,
                previous: Some(evaluate(&profile_missing(), None)),
            };
            let verdict = block_on(conclude(&held).on(profile_missing(), true, |_| async {
                panic!("an old False is no news")
            }));
            assert_eq!(profile_status(&verdict.status), "False");
        }

        #[test]
        fn a_status_is_written_only_when_it_changed_or_the_server_holds_another() {
            let decided = evaluate(&Facts::healthy(), None);
            let held = Held {
                on_server: Some(decided.clone()),
                previous: Some(decided.clone()),
            };
            let same = block_on(conclude(&held).on(Facts::healthy(), false, |f| async { f }));
            assert!(!same.write, "nothing changed");
            let changed = block_on(conclude(&held).on(profile_missing(), false, |f| async { f }));
            assert!(changed.write, "a condition changed");
            let recreated = Held {
                on_server: None,
                previous: Some(decided),
            };
            let verdict =
                block_on(conclude(&recreated).on(Facts::healthy(), false, |f| async { f }));
            assert!(verdict.write, "a re-created object holds no status");
        }
    }
}

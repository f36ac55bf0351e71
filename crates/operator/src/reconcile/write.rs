//! Writes each EC2NodeClass's latest decision to its KarpenterHealth apart from evaluation: a
//! reconcile hands its decision over and returns, so its slot is free for the next class while
//! the API server round trip runs. Latest decision wins per class; one write per class in flight,
//! at most [`WRITES_IN_FLIGHT`] in all; transitions are announced off the write path, gathered
//! for [`events::EVENT_WINDOW`] into one Event per cause, within a per-object Event budget.
//! Does IO.

use crate::error::Error;
use crate::health_object;
use crate::metrics::Metrics;
use crate::reconcile::announce::{
    self as events, ClassRefs, ClassTransitions, EventBudget, Transition,
};
use crate::reconcile::decide::without_last_evaluated;
use crate::reconcile::schedule::retry_after;
use k8s_openapi::api::core::v1::ObjectReference;
use karpenter_health_api::{KarpenterHealth, KarpenterHealthStatus};
use kube::Api;
use kube::runtime::events::Reporter;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// The status this process last wrote per EC2NodeClass, shared with the trigger that ignores the
/// watch events of those very writes.
pub type WrittenStatuses = Arc<Mutex<HashMap<String, KarpenterHealthStatus>>>;

/// Status writes in flight at once, across classes. An aws-auth edit decides every class within
/// milliseconds; writing 16 at a time lands 20 classes in two round trips instead of five (the
/// reconcile concurrency of 4 that used to carry the writes), without a burst the API server's
/// priority and fairness would queue.
pub const WRITES_IN_FLIGHT: usize = 16;

/// What one reconcile decided for one class.
#[derive(Clone, Debug)]
pub struct Decision {
    pub status: KarpenterHealthStatus,
    /// What the reconcile took as shown before (this writer's last write, else the server's):
    /// transitions are announced from it when this writer has written nothing for the class.
    pub shown_before: Option<KarpenterHealthStatus>,
    pub health: ObjectReference,
    pub node_class: ObjectReference,
    /// When the change that asked for this decision arrived, for the change-to-status histogram.
    pub triggered_at: Option<Instant>,
}

#[derive(Default)]
struct Slot {
    next: Option<Decision>,
    /// The status being written now: until its write returns, it is the class's newest decision
    /// for a reconcile to compare with (else one reconciling in that window, in the other lane or
    /// woken by the write's own echo, took the write before as the last decision and wrote the
    /// same status again).
    in_flight: Option<KarpenterHealthStatus>,
    writing: bool,
    failures: u32,
}

/// The status writer of one leading controller; [`StatusWriter::close`] it when leading ends.
pub struct StatusWriter {
    api: Api<KarpenterHealth>,
    slots: Mutex<HashMap<String, Slot>>,
    permits: Semaphore,
    written: WrittenStatuses,
    metrics: Arc<Metrics>,
    client: kube::Client,
    reporter: Reporter,
    budget: Mutex<EventBudget>,
    /// Transitions written and not announced yet, and whether an announcer is on its way.
    unannounced: Mutex<(Vec<ClassTransitions>, bool)>,
    refresh: Duration,
    tasks: Mutex<tokio::task::JoinSet<()>>,
    idle: tokio::sync::Notify,
    closed: std::sync::atomic::AtomicBool,
    /// The last few statuses written per class (without `lastEvaluated`), newest last: a watch
    /// cache holding one of them is behind this writer, not edited by someone else.
    history: Mutex<HashMap<String, std::collections::VecDeque<KarpenterHealthStatus>>>,
}

/// How many earlier writes per class are remembered to recognise a lagging cache.
const HISTORY: usize = 4;

impl std::fmt::Debug for StatusWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusWriter").finish_non_exhaustive()
    }
}

impl StatusWriter {
    pub fn new(
        api: Api<KarpenterHealth>,
        written: WrittenStatuses,
        metrics: Arc<Metrics>,
        client: kube::Client,
        reporter: Reporter,
        refresh: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            api,
            slots: Mutex::default(),
            permits: Semaphore::new(WRITES_IN_FLIGHT),
            written,
            metrics,
            client,
            reporter,
            budget: Mutex::new(EventBudget::default()),
            unannounced: Mutex::default(),
            refresh,
            tasks: Mutex::default(),
            idle: tokio::sync::Notify::new(),
            closed: std::sync::atomic::AtomicBool::new(false),
            history: Mutex::default(),
        })
    }

    /// Hands `decision` for `name` over. A decision not yet written for that class is replaced
    /// (latest wins), keeping the earlier trigger time and what was shown before it, so latency
    /// counts from the first change and a flip there and back announces nothing.
    pub fn submit(self: &Arc<Self>, name: &str, mut decision: Decision) {
        let mut slots = self.lock_slots();
        if self.is_closed() {
            return;
        }
        let slot = slots.entry(name.to_owned()).or_default();
        if let Some(replaced) = slot.next.take() {
            decision.triggered_at = match (replaced.triggered_at, decision.triggered_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            decision.shown_before = replaced.shown_before;
        }
        slot.next = Some(decision);
        if !slot.writing {
            slot.writing = true;
            let (writer, name) = (self.clone(), name.to_owned());
            if let Ok(mut tasks) = self.tasks.lock() {
                // Finished tasks are reaped here, so the set holds only writers still running.
                while tasks.try_join_next().is_some() {}
                tasks.spawn(async move { writer.drain(name).await });
            }
        }
    }

    /// The decision for `name` handed over and not written yet, or being written.
    pub fn pending(&self, name: &str) -> Option<KarpenterHealthStatus> {
        self.lock_slots().get(name).and_then(|s| {
            s.next
                .as_ref()
                .map(|d| d.status.clone())
                .or_else(|| s.in_flight.clone())
        })
    }

    /// Whether this writer wrote `status` (up to `lastEvaluated`) for `name` lately: then a cache
    /// holding it is merely behind the writer (the echo of a newer write is on its way), and a
    /// decision equal to the newest one needs no write on its account.
    pub fn wrote(&self, name: &str, status: &KarpenterHealthStatus) -> bool {
        let status = without_last_evaluated(status);
        self.history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .is_some_and(|written| written.contains(&status))
    }

    fn remember(&self, name: &str, status: &KarpenterHealthStatus) {
        let mut history = self
            .history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let written = history.entry(name.to_owned()).or_default();
        if written.len() == HISTORY {
            written.pop_front();
        }
        written.push_back(without_last_evaluated(status));
    }

    /// Drops what is pending for a deleted class.
    pub fn forget(&self, name: &str) {
        if let Some(slot) = self.lock_slots().get_mut(name) {
            slot.next = None;
        }
        if let Ok(mut history) = self.history.lock() {
            history.remove(name);
        }
    }

    /// Waits until nothing is pending or being written, at most `limit`, then announces what
    /// was written without waiting for the rest of the window; whether it got there.
    pub async fn flush(&self, limit: Duration) -> bool {
        tokio::time::timeout(limit, async {
            loop {
                let idle = self.idle.notified();
                if self.lock_slots().is_empty() {
                    break;
                }
                idle.await;
            }
            self.announce_now().await;
        })
        .await
        .is_ok()
    }

    /// Stops every write: the process no longer leads, and a write now could overwrite the new
    /// leader's.
    pub fn close(&self) {
        let mut slots = self.lock_slots();
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        slots.clear();
        drop(slots);
        *self.lock_unannounced() = (Vec::new(), false);
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.abort_all();
        }
        self.idle.notify_waiters();
    }

    fn lock_slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes `name`'s decisions until none is left.
    async fn drain(self: Arc<Self>, name: String) {
        loop {
            let decision = {
                let mut slots = self.lock_slots();
                let Some(slot) = slots.get_mut(&name) else {
                    return;
                };
                match slot.next.take() {
                    Some(decision) => {
                        slot.in_flight = Some(decision.status.clone());
                        decision
                    }
                    None => {
                        slots.remove(&name);
                        drop(slots);
                        self.idle.notify_waiters();
                        return;
                    }
                }
            };
            let Ok(_permit) = self.permits.acquire().await else {
                return;
            };
            let written = self.write(&name, &decision).await;
            if let Some(slot) = self.lock_slots().get_mut(&name) {
                slot.in_flight = None;
            }
            if let Err(error) = written {
                let retry = error.retry();
                let failures = {
                    let mut slots = self.lock_slots();
                    let Some(slot) = slots.get_mut(&name) else {
                        return;
                    };
                    slot.failures = slot.failures.saturating_add(1);
                    // A newer decision replaces the failed one; else the failed one is retried.
                    if slot.next.is_none() && !is_not_found(&error) {
                        slot.next = Some(decision);
                    }
                    slot.failures
                };
                let after = retry_after(retry, failures, self.refresh);
                tracing::warn!(
                    node_class = %name, %error, ?retry, failures, retry_in = ?after,
                    "status write failed"
                );
                self.metrics.reconcile_error(error.metric_label());
                drop(_permit);
                tokio::time::sleep(after).await;
            } else if let Some(slot) = self.lock_slots().get_mut(&name) {
                slot.failures = 0;
            }
        }
    }

    async fn write(self: &Arc<Self>, name: &str, decision: &Decision) -> Result<(), Error> {
        health_object::patch_status(&self.api, name, &decision.status).await?;
        self.metrics.status_patched();
        self.remember(name, &decision.status);
        let before = self
            .written
            .lock()
            .ok()
            .and_then(|mut written| written.insert(name.to_owned(), decision.status.clone()))
            .or_else(|| decision.shown_before.clone());
        if let Some(since) = decision.triggered_at {
            self.metrics.observe_change_to_status(since.elapsed());
        }
        let transitions = events::transitions(before.as_ref(), &decision.status);
        self.announce(name, decision, transitions);
        Ok(())
    }

    /// Queues `transitions` for the next announcement; the first queued starts the window.
    fn announce(self: &Arc<Self>, name: &str, decision: &Decision, transitions: Vec<Transition>) {
        if transitions.is_empty() || self.is_closed() {
            return;
        }
        let mut unannounced = self.lock_unannounced();
        unannounced.0.push(ClassTransitions {
            class: ClassRefs {
                name: name.to_owned(),
                health: decision.health.clone(),
                node_class: decision.node_class.clone(),
            },
            transitions,
        });
        if std::mem::replace(&mut unannounced.1, true) {
            return;
        }
        drop(unannounced);
        let writer = self.clone();
        self.tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .spawn(async move {
                tokio::time::sleep(events::EVENT_WINDOW).await;
                writer.announce_now().await;
            });
    }

    /// Publishes what is queued: one Event per cause, about the first of its classes whose
    /// Event budget is not spent; none when every one's is.
    async fn announce_now(&self) {
        let batch = {
            let mut unannounced = self.lock_unannounced();
            unannounced.1 = false;
            std::mem::take(&mut unannounced.0)
        };
        if batch.is_empty() || self.is_closed() {
            return;
        }
        let now = Instant::now();
        let events: Vec<_> = {
            let mut budget = self
                .budget
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            events::group(batch)
                .into_iter()
                .filter_map(|announcement| {
                    let about = events::about(&announcement, &mut budget, now);
                    if about.is_none() {
                        tracing::debug!(
                            reason = %announcement.transition.reason,
                            classes = announcement.classes.len(),
                            "Event budget of every class spent; transition not announced"
                        );
                    }
                    let event = events::event_of(
                        &announcement,
                        about?,
                        &self.reporter,
                        jiff::Timestamp::now(),
                    );
                    Some(event)
                })
                .collect()
        };
        events::publish(&self.client, events).await;
    }

    fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn lock_unannounced(&self) -> std::sync::MutexGuard<'_, (Vec<ClassTransitions>, bool)> {
        self.unannounced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn is_not_found(error: &Error) -> bool {
    matches!(
        error,
        Error::PatchStatus { source: kube::Error::Api(status), .. } if status.code == 404
    )
}

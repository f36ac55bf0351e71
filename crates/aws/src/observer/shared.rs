//! The small pieces every service module of the observer uses: the one counted, rate-limited way
//! to call a port, the mapping of its result to a cache load, the pagination loop, and the
//! `Observed` shorthands. Does IO only through the port futures it is handed.

use super::AwsObserver;
use crate::cache::{Loaded, Read};
use crate::limits::WouldWait;
use crate::metrics::Outcome;
use crate::ports::{CallError, ErrorKind, Page, PortResult, Service};
use karpenter_health_checks::facts::{Observed, UnknownCause, Unobserved};
use std::future::Future;
use std::time::Duration;

/// How a paginated read ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Paged {
    /// Every page was read.
    Complete,
    /// A page answered that the subject does not exist. What to make of that differs by call
    /// (a missing role, a vanished cluster, a term that matches nothing), so the caller decides;
    /// the items of earlier pages were already handed over.
    Absent,
}

impl AwsObserver {
    /// One counted, rate-limited port call. A call that would wait too long for the client-side
    /// limiter is not sent: it bounds how long one observation can take.
    pub(super) async fn call<T>(
        &self,
        service: Service,
        op: &'static str,
        f: impl Future<Output = PortResult<T>>,
    ) -> PortResult<T> {
        let inner = &self.inner;
        match inner
            .limiters
            .acquire(service, op, inner.options.max_rate_limit_wait)
            .await
        {
            Ok(waited) => inner.counters.waited(waited),
            Err(WouldWait(_)) => {
                inner.counters.record(service, op, Outcome::RateLimited);
                return Err(CallError::new(
                    ErrorKind::Throttled,
                    "not sent: the operator's own rate limit for this API is exhausted",
                ));
            }
        }
        let r = f.await;
        let outcome = match &r {
            Ok(_) => Outcome::Ok,
            Err(e) => Outcome::of(e.kind),
        };
        inner.counters.record(service, op, outcome);
        if let Err(e) = &r {
            tracing::debug!(service = service.as_str(), operation = op, error = %e, "AWS call failed");
        }
        r
    }

    /// One call, settled into a cache load. `subject` names what was asked about in the detail
    /// of an unknown answer (empty when the call has none).
    pub(super) async fn load<T>(
        &self,
        service: Service,
        op: &'static str,
        subject: &str,
        f: impl Future<Output = PortResult<T>>,
    ) -> Loaded<T> {
        settle(self.call(service, op, f).await, service, op, subject)
    }

    /// Every page of a paginated call, each handed to `on_page` as it arrives (a sweep of
    /// thousands of instances is never held twice). `request` sends one page given the previous
    /// page's token; a failed page makes the whole read unknown.
    pub(super) async fn pages<T, Fut>(
        &self,
        service: Service,
        op: &'static str,
        subject: &str,
        mut request: impl FnMut(Option<String>) -> Fut,
        mut on_page: impl FnMut(Vec<T>),
    ) -> Result<Paged, Unobserved>
    where
        Fut: Future<Output = PortResult<Page<T>>>,
    {
        let mut token = None;
        loop {
            let Some(page) = self
                .load(service, op, subject, request(token.take()))
                .await?
            else {
                return Ok(Paged::Absent);
            };
            on_page(page.items);
            match page.next {
                Some(next) => token = Some(next),
                None => return Ok(Paged::Complete),
            }
        }
    }

    /// Every item of every page, as a cache load answers: `None` when a page answered that the
    /// subject does not exist.
    pub(super) async fn all_pages<T, Fut>(
        &self,
        service: Service,
        op: &'static str,
        subject: &str,
        request: impl FnMut(Option<String>) -> Fut,
    ) -> Result<Option<Vec<T>>, Unobserved>
    where
        Fut: Future<Output = PortResult<Page<T>>>,
    {
        let mut all = Vec::new();
        let paged = self
            .pages(service, op, subject, request, |page| all.extend(page))
            .await?;
        Ok((paged == Paged::Complete).then_some(all))
    }
}

fn unobserved(service: Service, op: &str, subject: &str, err: &CallError) -> Unobserved {
    let cause = err
        .kind
        .unknown_cause()
        .unwrap_or(UnknownCause::NotObserved);
    let subject = if subject.is_empty() {
        String::new()
    } else {
        format!(" {subject}")
    };
    Unobserved {
        cause,
        detail: format!("{} {op}{subject}: {err}", service.display()),
    }
}

/// A port result as a cache load: absent is a proof, everything else unknown.
fn settle<T>(r: PortResult<T>, service: Service, op: &str, subject: &str) -> Loaded<T> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind == ErrorKind::Absent => Ok(None),
        Err(e) => Err(unobserved(service, op, subject, &e)),
    }
}

/// `u`, with its detail saying which fact could not be read because of it (same cause).
pub(super) fn because(what: &str, u: &Unobserved) -> Unobserved {
    Unobserved {
        cause: u.cause,
        detail: format!("{what}: {}", u.detail),
    }
}

pub(super) fn not_observed<T>(detail: impl Into<String>) -> Observed<T> {
    Observed::unknown(UnknownCause::NotObserved, detail)
}

/// Why a fact about the cluster was not read.
pub(super) const NO_CLUSTER: &str = "Karpenter's cluster name is not known";

pub(super) fn no_cluster<T>() -> Observed<T> {
    not_observed(NO_CLUSTER)
}

/// The last found/absent answer of a read, without its age.
pub(super) fn good<V: Clone>(r: &Read<V>) -> Option<Observed<V>> {
    r.last_good.as_ref().map(|(o, _)| o.clone())
}

/// The union of several reads of lists (one per selector term or query): unknown if any read is,
/// and a last good answer only if every read has one, aged as its oldest. `union` merges the
/// items (e.g. de-duplicates by id).
pub(super) fn union_of_reads<T>(
    reads: Vec<Read<Vec<T>>>,
    union: impl Fn(Vec<T>) -> Vec<T>,
) -> Read<Vec<T>> {
    let mut current = Ok(Vec::new());
    let mut last_good = Some((Vec::new(), Duration::ZERO));
    for read in reads {
        match (&mut current, read.current) {
            (Ok(all), Observed::Found(items)) => all.extend(items),
            (Ok(_), Observed::Absent) => {}
            (Ok(_), Observed::Unknown(u)) => current = Err(u),
            (Err(_), _) => {}
        }
        last_good = match (last_good, read.last_good) {
            (Some((mut all, age)), Some((obs, a))) => {
                if let Observed::Found(items) = obs {
                    all.extend(items);
                }
                Some((all, age.max(a)))
            }
            _ => None,
        };
    }
    Read {
        current: match current {
            Ok(all) => Observed::Found(union(all)),
            Err(u) => Observed::Unknown(u),
        },
        last_good: last_good.map(|(all, age)| (Observed::Found(union(all)), age)),
    }
}

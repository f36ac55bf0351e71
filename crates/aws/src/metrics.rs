//! Counters of AWS calls by service, operation and outcome, for the operator's metrics endpoint.
//! No IO.

use crate::ports::{ErrorKind, Service};
use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How one call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    Ok,
    Absent,
    AccessDenied,
    Throttled,
    Unavailable,
    Unsupported,
    /// Not sent: the client-side rate limit would have delayed it past the allowed wait.
    RateLimited,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Absent => "absent",
            Outcome::AccessDenied => "access_denied",
            Outcome::Throttled => "throttled",
            Outcome::Unavailable => "unavailable",
            Outcome::Unsupported => "unsupported",
            Outcome::RateLimited => "rate_limited",
        }
    }

    pub(crate) fn of(kind: ErrorKind) -> Self {
        match kind {
            ErrorKind::Absent => Outcome::Absent,
            ErrorKind::AccessDenied => Outcome::AccessDenied,
            ErrorKind::Throttled => Outcome::Throttled,
            ErrorKind::Unavailable => Outcome::Unavailable,
            ErrorKind::Unsupported => Outcome::Unsupported,
        }
    }
}

/// One counter, as plain data (`service`: `iam`, `ec2`, `eks`, `sts`; `operation`: the AWS
/// operation name, e.g. `DescribeInstances`; one page is one call).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct CallCount {
    pub service: &'static str,
    pub operation: &'static str,
    pub outcome: &'static str,
    pub count: u64,
}

/// A snapshot of all counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallStats {
    pub calls: Vec<CallCount>,
    /// Total time calls waited for the client-side rate limiter.
    pub rate_limit_wait: Duration,
}

impl CallStats {
    /// Calls of one operation, all outcomes.
    pub fn calls_of(&self, operation: &str) -> u64 {
        self.calls
            .iter()
            .filter(|c| c.operation == operation)
            .map(|c| c.count)
            .sum()
    }

    /// Calls of one operation with one outcome.
    pub fn calls_with(&self, operation: &str, outcome: Outcome) -> u64 {
        self.calls
            .iter()
            .filter(|c| c.operation == operation && c.outcome == outcome.as_str())
            .map(|c| c.count)
            .sum()
    }

    pub fn total(&self) -> u64 {
        self.calls.iter().map(|c| c.count).sum()
    }
}

type Key = (Service, &'static str, Outcome);

#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Counts, and the total wait for the rate limiter.
    inner: Mutex<(BTreeMap<Key, u64>, Duration)>,
}

impl Counters {
    pub(crate) fn record(&self, service: Service, operation: &'static str, outcome: Outcome) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        *inner.0.entry((service, operation, outcome)).or_default() += 1;
    }

    pub(crate) fn waited(&self, d: Duration) {
        if !d.is_zero() {
            self.inner.lock().unwrap_or_else(PoisonError::into_inner).1 += d;
        }
    }

    pub(crate) fn snapshot(&self) -> CallStats {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        CallStats {
            calls: inner
                .0
                .iter()
                .map(|((s, op, o), n)| CallCount {
                    service: s.as_str(),
                    operation: op,
                    outcome: o.as_str(),
                    count: *n,
                })
                .collect(),
            rate_limit_wait: inner.1,
        }
    }
}

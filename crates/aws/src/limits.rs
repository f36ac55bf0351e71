//! Client-side rate limits per AWS service (per action for EC2), so the operator stays a small
//! share of the account's API budget, which Karpenter and everything else also draw on. No IO;
//! waits on the tokio clock.

use crate::ports::Service;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota};
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// A token bucket: `per_second` sustained, `burst` at once. `per_second <= 0` disables it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: u32,
}

impl Rate {
    pub const UNLIMITED: Rate = Rate {
        per_second: 0.0,
        burst: 0,
    };

    fn quota(self) -> Option<Quota> {
        if self.per_second <= 0.0 || !self.per_second.is_finite() {
            return None;
        }
        let period = Duration::from_secs_f64(1.0 / self.per_second);
        Some(Quota::with_period(period)?.allow_burst(NonZeroU32::new(self.burst.max(1))?))
    }
}

/// The limits per service.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimits {
    /// Per EC2 action (EC2 throttles each action separately: Describe* refill 20/s, bucket 100).
    pub ec2_per_action: Rate,
    /// All IAM calls together (IAM publishes no rate and is global: the scarcest budget).
    pub iam: Rate,
    /// All EKS calls together.
    pub eks: Rate,
    pub sts: Rate,
    /// All SQS calls together (the interruption queue: two calls per refresh).
    pub sqs: Rate,
    /// All EventBridge calls together (the queue's rules).
    pub events: Rate,
    /// All KMS calls together (the volumes' keys: two calls per key per refresh).
    pub kms: Rate,
    /// All Service Quotas calls together (two quotas per account and period).
    pub quotas: Rate,
    /// All SSM calls together (an AMI alias's parameters: up to 15 per alias and period).
    pub ssm: Rate,
}

impl Default for RateLimits {
    fn default() -> Self {
        Self {
            ec2_per_action: Rate {
                per_second: 1.0,
                burst: 10,
            },
            iam: Rate {
                per_second: 0.5,
                burst: 20,
            },
            eks: Rate {
                per_second: 0.5,
                burst: 10,
            },
            sts: Rate {
                per_second: 0.1,
                burst: 2,
            },
            sqs: Rate {
                per_second: 0.5,
                burst: 10,
            },
            events: Rate {
                per_second: 0.5,
                burst: 10,
            },
            kms: Rate {
                per_second: 0.5,
                burst: 10,
            },
            quotas: Rate {
                per_second: 0.5,
                burst: 5,
            },
            // GetParameter allows 40 a second by default; an alias asks 15 at once.
            ssm: Rate {
                per_second: 1.0,
                burst: 15,
            },
        }
    }
}

impl RateLimits {
    pub const UNLIMITED: RateLimits = RateLimits {
        ec2_per_action: Rate::UNLIMITED,
        iam: Rate::UNLIMITED,
        eks: Rate::UNLIMITED,
        sts: Rate::UNLIMITED,
        sqs: Rate::UNLIMITED,
        events: Rate::UNLIMITED,
        kms: Rate::UNLIMITED,
        quotas: Rate::UNLIMITED,
        ssm: Rate::UNLIMITED,
    };
}

type Bucket = Arc<DefaultDirectRateLimiter>;

/// The buckets, made on first use.
#[derive(Debug)]
pub(crate) struct Limiters {
    limits: RateLimits,
    buckets: Mutex<HashMap<(Service, &'static str), Option<Bucket>>>,
}

/// The bucket was empty for longer than the caller may wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WouldWait(pub Duration);

impl Limiters {
    pub(crate) fn new(limits: RateLimits) -> Self {
        Self {
            limits,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn bucket(&self, service: Service, operation: &'static str) -> Option<Bucket> {
        let (key, rate) = match service {
            Service::Ec2 => ((service, operation), self.limits.ec2_per_action),
            Service::Iam => ((service, ""), self.limits.iam),
            Service::Eks => ((service, ""), self.limits.eks),
            Service::Sts => ((service, ""), self.limits.sts),
            Service::Sqs => ((service, ""), self.limits.sqs),
            Service::Events => ((service, ""), self.limits.events),
            Service::Kms => ((service, ""), self.limits.kms),
            Service::ServiceQuotas => ((service, ""), self.limits.quotas),
            Service::Ssm => ((service, ""), self.limits.ssm),
        };
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        buckets
            .entry(key)
            .or_insert_with(|| {
                rate.quota()
                    .map(|q| Arc::new(DefaultDirectRateLimiter::direct(q)))
            })
            .clone()
    }

    /// Takes a token, waiting up to `max_wait`; returns how long it waited.
    pub(crate) async fn acquire(
        &self,
        service: Service,
        operation: &'static str,
        max_wait: Duration,
    ) -> Result<Duration, WouldWait> {
        let Some(bucket) = self.bucket(service, operation) else {
            return Ok(Duration::ZERO);
        };
        let mut waited = Duration::ZERO;
        loop {
            match bucket.check() {
                Ok(()) => return Ok(waited),
                Err(not_until) => {
                    let wait = not_until.wait_time_from(DefaultClock::default().now());
                    if waited + wait > max_wait {
                        return Err(WouldWait(wait));
                    }
                    let wait = wait.max(Duration::from_millis(1));
                    tokio::time::sleep(wait).await;
                    waited += wait;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_burst_passes_then_calls_wait_or_give_up() {
        let limits = RateLimits {
            ec2_per_action: Rate {
                per_second: 20.0,
                burst: 2,
            },
            ..RateLimits::UNLIMITED
        };
        let l = Limiters::new(limits);
        let long = Duration::from_secs(5);
        assert!(
            l.acquire(Service::Ec2, "DescribeInstances", long)
                .await
                .is_ok()
        );
        assert!(
            l.acquire(Service::Ec2, "DescribeInstances", long)
                .await
                .is_ok()
        );
        // Another action has its own bucket.
        let other = l
            .acquire(Service::Ec2, "DescribeSecurityGroups", Duration::ZERO)
            .await;
        assert_eq!(other, Ok(Duration::ZERO));
        assert!(matches!(
            l.acquire(Service::Ec2, "DescribeInstances", Duration::ZERO)
                .await,
            Err(WouldWait(_))
        ));
        let waited = l
            .acquire(Service::Ec2, "DescribeInstances", long)
            .await
            .unwrap();
        assert!(waited >= Duration::from_millis(20), "{waited:?}");
        // Unlimited services never wait.
        assert_eq!(
            l.acquire(Service::Iam, "GetRole", Duration::ZERO).await,
            Ok(Duration::ZERO)
        );
    }
}

//! The AWS facts adapter as the tests build and read it: observer options with test timeouts,
//! an observer that talks to moto through a fault proxy, selector terms by tag, and small
//! readers of the facts it returns. Building an observer reads the bed's env (IO); the rest is
//! pure.

use crate::Bed;
use crate::fault_proxy::FaultProxy;
use anyhow::{Context, Result, bail};
use karpenter_health_api::karpenter::SelectorTerm;
use karpenter_health_aws::{AwsObserver, ObserverOptions, RateLimits, SdkOptions, Timeouts};
use karpenter_health_checks::facts::{AwsFacts, Observed, UnknownCause};
use std::collections::BTreeMap;
use std::time::Duration;

/// The account moto answers for.
pub const MOTO_ACCOUNT: &str = "123456789012";

/// Adapter options for tests: every answer (and error) lives `ttl` and is read afresh once due
/// (no stale window), no client-side limits, two attempts with a 50 ms backoff, `timeouts` for each call and `sweep_timeouts` for the instance
/// sweep.
pub fn observer_options(
    ttl: Duration,
    timeouts: Timeouts,
    sweep_timeouts: Timeouts,
) -> ObserverOptions {
    ObserverOptions {
        ttl,
        permissions_ttl: ttl,
        account_ttl: ttl,
        error_ttl: ttl,
        refused_ttl: ttl,
        stale: Duration::ZERO,
        rate_limits: RateLimits::UNLIMITED,
        sdk: SdkOptions {
            timeouts,
            sweep_timeouts,
            max_attempts: 2,
            initial_backoff: Duration::from_millis(50),
        },
        ..ObserverOptions::default()
    }
}

/// The slowest AWS answers measured through the gap proxy on these 2 cores with nothing else
/// running (`bash e2e/measure-aws-latency.sh 5 aws` (then three test files) with
/// `KH_REPEAT_FRESH_BED=1`, 2026-11-26): moto's first DescribeInstanceTypes listing (the proxy
/// reads all ~1,400 types once, then pages them) 1.65 s, median 1.49 s. Every e2e budget for an
/// AWS call is a stated multiple of one of these three.
pub const SLOWEST_CALL: Duration = Duration::from_millis(1650);
/// The slowest call other than the instance-type catalogue: a DescribeSecurityGroups, 0.79 s.
pub const SLOWEST_OTHER_CALL: Duration = Duration::from_millis(790);
/// The slowest page of the instance sweep: 1,000 instances of DescribeInstances, 7.4 s.
pub const SLOWEST_SWEEP_PAGE: Duration = Duration::from_millis(7400);

/// Options for the adapter tests: no client-side limits, two attempts, every observe a refresh
/// (TTL 0). Each attempt may take 12 times the slowest call measured, since `make e2e` runs four
/// adapter tests on one moto at once and a build may run beside them; an operation three attempts'
/// worth.
pub fn test_options() -> ObserverOptions {
    let attempt = SLOWEST_CALL * 12;
    with_timeouts(attempt, attempt * 3)
}

/// [`test_options`] with other call timeouts.
pub fn with_timeouts(attempt: Duration, operation: Duration) -> ObserverOptions {
    let timeouts = Timeouts {
        connect: Duration::from_secs(3),
        attempt,
        operation,
    };
    // Eight times the slowest 1,000-instance page measured, an operation two attempts.
    let sweep_timeouts = Timeouts {
        attempt: SLOWEST_SWEEP_PAGE * 8,
        operation: SLOWEST_SWEEP_PAGE * 16,
        ..timeouts
    };
    observer_options(Duration::ZERO, timeouts, sweep_timeouts)
}

/// An observer in `region` whose every call goes through `proxy`.
pub async fn observer(
    bed: &Bed,
    proxy: &FaultProxy,
    region: &str,
    options: ObserverOptions,
) -> Result<AwsObserver> {
    let config = bed.aws_config_at(&proxy.url(), region).await?;
    Ok(AwsObserver::new(&config, options))
}

/// A selector term matching the tag `k` = `v`.
pub fn tag_term(k: &str, v: &str) -> SelectorTerm {
    SelectorTerm {
        tags: BTreeMap::from([(k.to_owned(), v.to_owned())]),
        ..Default::default()
    }
}

/// The cause and detail of an unknown fact; an error for a known one.
pub fn cause<T: std::fmt::Debug>(o: &Observed<T>) -> Result<(UnknownCause, String)> {
    match o {
        Observed::Unknown(u) => Ok((u.cause, u.detail.clone())),
        other => bail!("expected unknown, got {other:?}"),
    }
}

/// How many of the cluster's instances run in each VPC.
pub fn instance_vpcs(facts: &AwsFacts) -> Result<BTreeMap<String, usize>> {
    let instances = facts
        .cluster_instances
        .found()
        .context("instances not found")?;
    let mut by_vpc = BTreeMap::new();
    for i in instances {
        *by_vpc
            .entry(i.vpc_id.clone().unwrap_or_default())
            .or_default() += 1;
    }
    Ok(by_vpc)
}

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

/// Options for the adapter tests: no client-side limits, two attempts, every observe a refresh
/// (TTL 0), and timeouts generous enough for a moto that other tests keep busy.
pub fn test_options() -> ObserverOptions {
    with_timeouts(Duration::from_secs(20), Duration::from_secs(60))
}

/// [`test_options`] with other call timeouts.
pub fn with_timeouts(attempt: Duration, operation: Duration) -> ObserverOptions {
    let timeouts = Timeouts {
        connect: Duration::from_secs(3),
        attempt,
        operation,
    };
    // moto answers a 1,000-instance page in several seconds.
    let sweep_timeouts = Timeouts {
        attempt: Duration::from_secs(60),
        operation: Duration::from_secs(120),
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

//! [`ObserverOptions`]: the observer's TTLs, rate limits, SDK settings and sweep knobs, with
//! defaults for a real account. No IO.

use crate::limits::RateLimits;
use crate::sdk::SdkOptions;
use std::time::Duration;

/// Knobs of the observer. The defaults suit a real account; tests shrink them.
#[derive(Clone, Debug, PartialEq)]
pub struct ObserverOptions {
    /// How long a found/absent answer is reused. 60 s: an AWS-side change shows at the first
    /// refresh a minute after it, like Karpenter's own 1-minute EC2 caches (its 15-minute
    /// instance-profile cache is why the operator must not copy that one).
    pub ttl: Duration,
    /// IAM's answers about the controller role's permissions (policy simulations, the role's own
    /// policies). Each EC2NodeClass asks simulations of its own (the questions carry its node
    /// role and tags), so at `ttl` twenty classes would spend the IAM rate budget (0.5 calls a
    /// second) every minute and make every reconcile after a cluster change wait on it (the
    /// benchmark's aws-auth edits took over 60 s). Permissions change rarely; a change shows
    /// within this long.
    pub permissions_ttl: Duration,
    /// STS GetCallerIdentity: the account of the operator's own credentials does not change.
    pub account_ttl: Duration,
    /// A failure is reported (as unknown) for this long before the call is tried again, so an
    /// outage or throttling is not answered with more calls.
    pub error_ttl: Duration,
    /// Cache entries nobody asked for in this long are dropped (deleted EC2NodeClasses).
    pub idle_eviction: Duration,
    pub sdk: SdkOptions,
    pub rate_limits: RateLimits,
    /// A call that would wait longer than this for the client-side limiter is not made and is
    /// reported unknown (throttled); it bounds how long one observation can take.
    pub max_rate_limit_wait: Duration,
    /// DescribeInstances `MaxResults` (EC2 allows 5..=1000).
    pub instance_page_size: i32,
    /// Also sweep instances by `eks:eks-cluster-name=<name>` (Karpenter >= 1.0's own listing
    /// filter) in a second query. Off by default: every Karpenter version tags its instances
    /// `kubernetes.io/cluster/<name>=owned` (its IAM policy requires that tag on launch), so the
    /// first query already finds them, and the second would double the pages.
    pub sweep_eks_cluster_name_tag: bool,
}

impl Default for ObserverOptions {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(60),
            permissions_ttl: Duration::from_secs(600),
            account_ttl: Duration::from_secs(3600),
            error_ttl: Duration::from_secs(15),
            idle_eviction: Duration::from_secs(1800),
            sdk: SdkOptions::default(),
            rate_limits: RateLimits::default(),
            max_rate_limit_wait: Duration::from_secs(20),
            instance_page_size: 1000,
            sweep_eks_cluster_name_tag: false,
        }
    }
}

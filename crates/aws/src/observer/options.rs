//! [`ObserverOptions`]: the observer's TTLs, rate limits, SDK settings and sweep knobs, with
//! defaults for a real account. No IO.

use crate::cache::Ttls;
use crate::limits::RateLimits;
use crate::sdk::SdkOptions;
use std::time::Duration;

/// Knobs of the observer. The defaults suit a real account; tests shrink them.
#[derive(Clone, Debug, PartialEq)]
pub struct ObserverOptions {
    /// How long a found/absent answer is reused before a read refreshes it. 15 minutes: the
    /// operator's reads share the account's API budget with Karpenter, and each answer read
    /// every 5-minute refresh cost 12 calls an hour per key (606 an hour at twenty classes, run
    /// 16 in docs/benchmarks.md). What shortens it where it matters is the evidence that
    /// something broke: a class edited, Karpenter's verdict on it changed, or a launch failed
    /// revalidates every answer the class read at once ([`crate::AwsObserver::revalidate`]).
    /// Karpenter's own 15-minute instance-profile cache hides a deleted profile from its status,
    /// but not the launches that then fail.
    pub ttl: Duration,
    /// Each TTL is brought forward by a random part of up to a tenth of it (see
    /// `crate::cache::Ttls::jitter`), so keys read together are not all refreshed together.
    ///
    /// IAM's answers about the controller role's permissions (policy simulations, the role's own
    /// policies). Classes whose questions differ only in names the role's policies cannot tell
    /// apart share one simulation (`controller/simulation.rs`), but classes with their own node role or
    /// tags ask their own, so at `ttl` many such classes would spend the IAM rate budget
    /// (0.5 calls a second) every minute. Permissions change rarely; a change shows within this
    /// long.
    pub permissions_ttl: Duration,
    /// The region's instance types and where each is offered (`InstanceTypesAvailable`): AWS
    /// adds types a few times a year and offerings change as rarely, and a full read is about a
    /// dozen pages, so the answers are kept for hours.
    pub catalog_ttl: Duration,
    /// STS GetCallerIdentity and the account's EBS defaults: the account of the operator's own
    /// credentials does not change, and its defaults rarely do.
    pub account_ttl: Duration,
    /// How long after its TTL an answer is still handed out while one refresh runs in the
    /// background (stale-while-revalidate): a reconcile never waits on AWS for a key read within
    /// `ttl + stale`, and a refresh that answers something else re-evaluates the EC2NodeClasses
    /// that read it. 5 minutes, the default refresh interval, so the periodic refresh of every
    /// class keeps its keys served from memory. Zero makes readers wait for every due refresh.
    pub stale: Duration,
    /// A failure is reported (as unknown) for this long before the call is tried again, so an
    /// outage or throttling is not answered with more calls.
    pub error_ttl: Duration,
    /// A refusal (access denied, another account's object) is reported for this long before the
    /// call is tried again: it lasts until someone changes a policy, and a denied call every
    /// 15 s would fill the account's CloudTrail. A call the endpoint does not implement is asked
    /// again after its family's period, like an answer.
    pub refused_ttl: Duration,
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

/// The cache settings of each family of AWS facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Families {
    /// Everything not below: profiles, roles, the cluster, access entries, Pod Identity, security
    /// groups, subnets and the VPC network, instances, the queue, KMS keys and grants.
    pub general: Ttls,
    /// IAM's answers about the controller's permissions and the role's policies.
    pub permissions: Ttls,
    /// The account's identity and EBS defaults.
    pub account: Ttls,
    /// The region's instance types and their offerings.
    pub catalog: Ttls,
}

impl ObserverOptions {
    /// Each family's TTL, jitter, stale window, error TTL and idle eviction.
    pub fn families(&self) -> Families {
        let family = |ttl: Duration| Ttls {
            ttl,
            jitter: ttl / 10,
            stale: self.stale,
            error_ttl: self.error_ttl,
            refused_ttl: self.refused_ttl,
            idle: self.idle_eviction,
        };
        Families {
            general: family(self.ttl),
            permissions: family(self.permissions_ttl),
            account: family(self.account_ttl),
            catalog: family(self.catalog_ttl),
        }
    }
}

impl Default for ObserverOptions {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(900),
            permissions_ttl: Duration::from_secs(1800),
            account_ttl: Duration::from_secs(3600),
            catalog_ttl: Duration::from_secs(6 * 3600),
            stale: Duration::from_secs(300),
            error_ttl: Duration::from_secs(15),
            refused_ttl: Duration::from_secs(300),
            idle_eviction: Duration::from_secs(1800),
            sdk: SdkOptions::default(),
            rate_limits: RateLimits::default(),
            max_rate_limit_wait: Duration::from_secs(20),
            instance_page_size: 1000,
            sweep_eks_cluster_name_tag: false,
        }
    }
}

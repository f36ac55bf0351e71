//! What the observer answers beyond the facts ([`AwsObservation`]); what it is asked
//! ([`AwsRequest`]) is the core's plan. Plain data, no IO.

use karpenter_health_checks::facts::AwsFacts;
use std::time::Duration;

pub use karpenter_health_checks::plan::{AwsRequest, ControllerRequest};

/// One fact whose latest read failed while an older good answer is kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleFact {
    /// The `AwsFacts` field (`node_role.attached_policy_arns` for the nested one).
    pub fact: &'static str,
    /// Age of the kept answer.
    pub age: Duration,
}

/// An observation with the diagnostics the plain [`AwsFacts`] have no room for.
#[derive(Clone, Debug)]
pub struct AwsObservation {
    /// What to evaluate: unknown where the latest read failed.
    pub facts: AwsFacts,
    /// The last found/absent answer of every fact, where one was ever read (best effort for facts
    /// that depend on another: they follow the current answer of what they depend on).
    pub last_good: AwsFacts,
    /// The facts that are unknown now but have an older good answer in `last_good`.
    pub stale: Vec<StaleFact>,
}

//! The KarpenterHealth API: the custom resource, its closed vocabulary of conditions and reasons,
//! and read-only mirrors of the Karpenter kinds the checks read. Pure data, no IO.
#![forbid(unsafe_code)]

pub mod conditions;
pub mod health;
pub mod karpenter;

pub use conditions::{ConditionStatus, ConditionType, Reason, ReasonMeta, Severity};
pub use health::{
    DetectedEnvironment, Finding, KarpenterHealth, KarpenterHealthSpec, KarpenterHealthStatus,
    SubjectRef,
};

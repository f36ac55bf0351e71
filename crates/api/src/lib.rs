//! The KarpenterHealth API: the custom resource, its closed vocabulary of conditions, reasons and
//! warnings, and read-only mirrors of the Karpenter kinds the checks read. Pure data, no IO.
#![forbid(unsafe_code)]
// A function over 80 lines (clippy.toml) is cut along what its parts decide; tests are exempt.
#![warn(clippy::too_many_lines)]

pub mod conditions;
pub mod health;
pub mod karpenter;
pub mod vocabulary;

pub use conditions::{ConditionStatus, ConditionType, Reason, ReasonMeta, Severity, Warning};
pub use health::{
    AcceptedFinding, DetectedEnvironment, Finding, KarpenterHealth, KarpenterHealthSpec,
    KarpenterHealthStatus, SubjectRef, custom_resource_definition,
};

//! The closed list of warning findings: problems worth reporting that never change a condition.
//! Pure data, no IO. Declared in the API crate's vocabulary table, next to the condition each
//! belongs to; re-exported here so the rules name them as `warnings::Warning`.

pub use karpenter_health_api::Warning;

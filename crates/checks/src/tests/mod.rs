//! Crate-level tests: one file of scenarios per condition, named like its rule module in
//! `rules/` (`structure.rs` holds them to that), and the cross-cutting ones: one sentence per
//! reason, properties over arbitrary facts, the rendered status and what is observed when. Pure.

// One module per `.rs` file of this directory (a new condition's test file is declared by being
// there), and the proptest strategies' folder.
automod::dir!("src/tests");
mod strategies;

use karpenter_health_api::{ConditionType, KarpenterHealthStatus, Reason};

/// The (condition, reason) of every False condition, Ready excluded.
pub(super) fn failures(status: &KarpenterHealthStatus) -> Vec<(String, String)> {
    status
        .conditions
        .iter()
        .filter(|c| c.status == "False" && c.type_ != "Ready")
        .map(|c| (c.type_.clone(), c.reason.clone()))
        .collect()
}

/// A (condition, reason) as `failures` lists it.
pub(super) fn pair(ty: ConditionType, reason: Reason) -> (String, String) {
    (ty.as_str().to_owned(), reason.as_str().to_owned())
}

/// The message of condition `ty`, empty when it is absent.
pub(super) fn message(status: &KarpenterHealthStatus, ty: ConditionType) -> &str {
    status
        .condition(ty)
        .map(|c| c.message.as_str())
        .unwrap_or_default()
}

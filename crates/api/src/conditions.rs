//! What the vocabulary's types mean beyond the table: which conditions a reason applies to, the
//! summary's sub-conditions, and the docs anchors of reasons and warnings. Pure, no IO.
//!
//! The condition types, reasons and warnings themselves are declared once, in the table of
//! `crate::vocabulary`, and re-exported here.

use std::fmt;

mod status;

pub use crate::vocabulary::{ConditionType, Reason, Warning};
pub use status::{ConditionStatus, Severity};

impl ConditionType {
    /// The sub-conditions that feed the summary `Ready`: every type but `Ready` itself.
    pub fn sub_conditions() -> &'static [ConditionType] {
        &Self::ALL[..Self::ALL.len() - 1]
    }
}

impl fmt::Display for ConditionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which conditions a reason may be used on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasonScope {
    /// Only on this condition.
    Only(ConditionType),
    /// On any sub-condition (causes of `Unknown` shared by all checks).
    AnySubCondition,
}

/// Everything the docs and the renderer need to know about one reason.
#[derive(Clone, Copy, Debug)]
pub struct ReasonMeta {
    pub scope: ReasonScope,
    pub status: ConditionStatus,
    /// What the reason means, one sentence.
    pub meaning: &'static str,
    /// What to do about it, one sentence.
    pub remediation: &'static str,
}

impl Reason {
    /// Whether this reason may be used on `condition` (the closed list per condition). `Ready`
    /// carries its own reasons, or the one reason of the sub-conditions that keep it from `True`,
    /// so `kubectl get` names the problem rather than a category.
    pub fn applies_to(self, condition: ConditionType) -> bool {
        let meta = self.meta();
        match meta.scope {
            ReasonScope::Only(c) if c == condition => true,
            _ if condition == ConditionType::Ready => meta.status != ConditionStatus::True,
            ReasonScope::Only(_) => false,
            ReasonScope::AnySubCondition => true,
        }
    }

    /// The anchor of this reason in docs/checks.md.
    pub fn docs_anchor(self) -> String {
        format!("docs/checks.md#{}", self.as_str().to_ascii_lowercase())
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Warning {
    /// The anchor of this warning in docs/checks.md.
    pub fn docs_anchor(self) -> String {
        format!("docs/checks.md#{}", self.as_str().to_ascii_lowercase())
    }
}

#[cfg(test)]
mod tests;

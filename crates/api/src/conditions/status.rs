//! A condition's status and a finding's severity: the two small closed sets every condition and
//! finding carries. Pure data, no IO.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A condition's status: only these three values exist (conditions.md rule 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }

    /// Parses the wire form; anything else is treated as `Unknown`, as the API conventions say a
    /// missing or unrecognised status must be.
    pub fn parse(s: &str) -> Self {
        match s {
            "True" => Self::True,
            "False" => Self::False,
            _ => Self::Unknown,
        }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How bad a finding is. `Error` findings make their condition False; `Warning` and `Info` are
/// reported in `status.findings` only and never change a condition.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum Severity {
    Error,
    Warning,
    Info,
}

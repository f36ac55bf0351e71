//! The one vocabulary table of KarpenterHealth: per condition, its printer column, where its facts
//! come from, the reasons it may carry, the warnings its check reports and what the check cannot
//! see. Pure data, no IO. The table is written one file per condition in `vocabulary/table/`
//! (numbered in the conditions' order), which the crate's build script joins into the one
//! `vocabulary!` invocation included here.
//!
//! Everything that names conditions is generated from this table: the enums and their texts (the
//! macros in `vocabulary/macros.rs`), the CRD's printer columns (`health.rs`), and by `make
//! generate` docs/checks.md and the Helm chart's condition lists, alerts' unit tests and values
//! schema (`karpenter_health_checks::generated`, whose test fails when a committed one is stale).

#[macro_use]
mod macros;
mod lab;
mod oracle;

pub use lab::Lab;
use lab::*;
use oracle::*;
pub use oracle::{ORACLE_RELEASES, Oracle};

include!(concat!(env!("OUT_DIR"), "/vocabulary_table.rs"));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::ConditionStatus;

    #[test]
    fn every_reason_that_can_be_false_says_whether_the_lab_proves_it() {
        for &reason in Reason::ALL {
            if reason.meta().status == ConditionStatus::False {
                assert!(
                    reason.lab().is_some(),
                    "{reason} has no `lab` entry in its condition's file of vocabulary/table/"
                );
            }
        }
        let proven = Reason::ALL
            .iter()
            .filter(|r| matches!(r.lab(), Some(Lab::Proven(_))))
            .count();
        assert!(
            proven >= 13,
            "the five classic failures and at least eight more: {proven}"
        );
    }

    #[test]
    fn a_lab_entry_is_a_reason_of_its_own_condition() {
        for &reason in Reason::ALL {
            if let Some(condition) = reason.lab_entry_of() {
                assert!(
                    reason.applies_to(condition),
                    "{reason}'s lab entry is under {condition}, not its own condition"
                );
            }
        }
    }
}

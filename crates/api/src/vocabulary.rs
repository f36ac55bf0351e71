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
            .filter(|r| r.lab().and_then(Lab::test).is_some())
            .count();
        // 17 when issue 51 began; it asked for at least eight more. A proof lost is a regression.
        assert!(
            proven >= 33,
            "the lab proves at least 33 reasons against the real Karpenter: {proven}"
        );
    }

    /// A renamed or deleted lab test must not leave "proven" standing: each `file::function` is a
    /// test function of `e2e/tests/lab/<file>.rs`, a module of the `lab` test binary.
    #[test]
    fn every_proving_lab_test_exists() {
        let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e/tests/lab");
        for &reason in Reason::ALL {
            let Some(path) = reason.lab().and_then(Lab::test) else {
                continue;
            };
            let (file, function) = path
                .split_once("::")
                .unwrap_or_else(|| panic!("{reason}: {path:?} is not file::function"));
            let source = std::fs::read_to_string(tests.join(format!("{file}.rs")))
                .unwrap_or_else(|e| panic!("{reason}: e2e/tests/lab/{file}.rs: {e}"));
            let declared = source.lines().collect::<Vec<_>>().windows(2).any(|pair| {
                pair[0].trim_start().starts_with("#[tokio::test")
                    && pair[1]
                        .trim_start()
                        .starts_with(&format!("async fn {function}("))
            });
            assert!(
                declared,
                "{reason}: e2e/tests/lab/{file}.rs has no test function {function}"
            );
        }
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

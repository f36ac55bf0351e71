//! The rules: one module per sub-condition, each a pure function from the facts to an
//! [`Outcome`] (status, reason, message, findings). No IO.
//!
//! Every rule follows the same discipline, enforced by [`crate::verdict::Check`]: a problem proven by observed
//! facts makes the condition `False`; a fact that could not be observed makes it `Unknown` with
//! the shared reason of its cause, never `False`; warnings are findings only.

// One module per `.rs` file of this directory: a new rule is a new file, and its `RULE` is
// listed in `RULES` below by the build script.
automod::dir!(pub "src/rules");

use crate::facts::{Facts, Settings};
use crate::plan::Context;
use jiff::Timestamp;
use karpenter_health_api::ConditionType;
use std::sync::OnceLock;

pub use crate::verdict::{Outcome, unknown_reason};
use crate::verdict::{Rule, Run};

/// Every rule, in the order of their file names; [`in_order`] puts them in the table's order.
pub(crate) static RULES: &[&Rule] = include!(concat!(env!("OUT_DIR"), "/registered_rules.rs"));

/// The rules in `ConditionType::sub_conditions()` order. A sub-condition without a rule, or
/// with two, fails `every_sub_condition_has_exactly_one_rule`.
fn in_order() -> &'static [&'static Rule] {
    static ORDER: OnceLock<Vec<&'static Rule>> = OnceLock::new();
    ORDER.get_or_init(|| {
        ConditionType::sub_conditions()
            .iter()
            .filter_map(|ty| RULES.iter().copied().find(|rule| rule.condition == *ty))
            .collect()
    })
}

/// Runs every rule, in `ConditionType::sub_conditions()` order. `Ready` is folded by the
/// renderer.
pub fn evaluate_all(facts: &Facts, settings: &Settings, now: Timestamp) -> Vec<Outcome> {
    let ctx = Context::new(facts, settings, now);
    let mut outcomes = Vec::with_capacity(RULES.len());
    for rule in in_order() {
        let outcome = match rule.run {
            Run::Alone(check) => check(&ctx),
            Run::AfterEarlier(check) => check(&ctx, &outcomes),
        };
        debug_assert_eq!(outcome.condition, rule.condition);
        outcomes.push(outcome);
    }
    outcomes
}

#[cfg(test)]
mod registry_tests {
    use super::*;

    #[test]
    fn every_sub_condition_has_exactly_one_rule() {
        for ty in ConditionType::sub_conditions() {
            let rules = RULES.iter().filter(|rule| rule.condition == *ty).count();
            assert_eq!(
                rules, 1,
                "{ty} has {rules} rules registered in rules::RULES"
            );
        }
        assert_eq!(RULES.len(), ConditionType::sub_conditions().len());
    }
}

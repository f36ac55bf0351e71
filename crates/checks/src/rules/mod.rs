//! The rules: one module per sub-condition, each a pure function from the facts to an
//! [`Outcome`] (status, reason, message, findings). No IO.
//!
//! Every rule follows the same discipline, enforced by [`crate::verdict::Check`]: a problem proven by observed
//! facts makes the condition `False`; a fact that could not be observed makes it `Unknown` with
//! the shared reason of its cause, never `False`; warnings are findings only.

pub mod amis;
pub mod capacity_reservations;
pub mod cluster_identity;
pub mod controller_can_launch;
pub mod drift;
pub mod instance_profile;
pub mod instance_types;
pub mod interruption_handling;
pub mod karpenter_status;
pub mod karpenter_version;
pub mod labels_allowed;
pub mod limits;
pub mod metadata_options;
pub mod node_network;
pub mod node_role;
pub mod node_role_mapped;
pub mod nodeclaims_registered;
pub mod security_groups;
pub mod spot_ready;
pub mod subnets;
pub mod volume_encryption;

use crate::facts::{Facts, Settings};
use crate::plan::Context;
use jiff::Timestamp;
use karpenter_health_api::ConditionType;

pub use crate::verdict::{Outcome, unknown_reason};

/// Runs every rule, in `ConditionType::sub_conditions()` order. `Ready` is folded by the
/// renderer.
pub fn evaluate_all(facts: &Facts, settings: &Settings, now: Timestamp) -> Vec<Outcome> {
    let ctx = Context::new(facts, settings, now);
    let mut outcomes = vec![
        instance_profile::check(&ctx),
        node_role::check(&ctx),
        node_role_mapped::check(&ctx),
        security_groups::check(&ctx),
        cluster_identity::check(&ctx),
        metadata_options::check(&ctx),
        labels_allowed::check(&ctx),
        karpenter_status::check(&ctx),
    ];
    // Registration problems are explained by the other outcomes, so this rule runs last.
    let registration = nodeclaims_registered::check(&ctx, &outcomes);
    outcomes.push(registration);
    // The controller's own wiring (issue 11): after registration in `ConditionType::ALL` order.
    outcomes.push(controller_can_launch::check(&ctx));
    outcomes.push(interruption_handling::check(&ctx));
    outcomes.push(spot_ready::check(&ctx));
    // Where nodes land (issue 12).
    outcomes.push(subnets::check(&ctx));
    outcomes.push(node_network::check(&ctx));
    // What a launched node needs to boot and what this Karpenter needs to run (issue 12).
    outcomes.push(volume_encryption::check(&ctx));
    outcomes.push(karpenter_version::check(&ctx));
    // Before a launch fails (issue 25): whether the NodePools leave any instance type.
    outcomes.push(instance_types::check(&ctx));
    outcomes.push(limits::check(&ctx));
    outcomes.push(drift::check(&ctx));
    outcomes.push(amis::check(&ctx));
    outcomes.push(capacity_reservations::check(&ctx));
    debug_assert!(
        outcomes
            .iter()
            .map(|o| o.condition)
            .eq(ConditionType::sub_conditions().iter().copied())
    );
    outcomes
}

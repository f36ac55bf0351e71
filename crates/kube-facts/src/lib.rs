//! IO adapter for Kubernetes: watches the objects the checks read, keeps them in trimmed caches,
//! and snapshots them as the check engine's cluster facts. Does IO (watches); the snapshot and
//! the translation helpers are pure.
#![forbid(unsafe_code)]
// A function over 80 lines (clippy.toml) is cut along what its parts decide; tests are exempt.
#![warn(clippy::too_many_lines)]

mod api_errors;
pub mod changes;
pub mod cilium;
pub mod daemonset_pods;
pub mod daemonsets;
pub mod disruption_events;
pub mod drain;
pub mod index;
pub mod inputs;
pub mod karpenter_settings;
pub mod lean_node_claim;
pub mod listed;
pub mod load_balancer_controller;
pub mod node_claims;
pub mod pending_pods;
pub mod pods;
pub mod snapshot;
pub mod trim;
pub mod watch_health;
pub mod watches;

pub use inputs::WatchTargets;
pub use snapshot::Overrides;
pub use watches::{KubeFacts, Triggers};

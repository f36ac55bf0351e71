//! The operator shell: watches EC2NodeClasses and what surrounds them, and keeps one
//! KarpenterHealth per EC2NodeClass up to date. Does IO; all judgement is in the check engine.
#![forbid(unsafe_code)]
// A function over 80 lines (clippy.toml) is cut along what its parts decide; tests are exempt.
#![warn(clippy::too_many_lines)]

pub mod coalesce;
pub mod config;
pub mod context;
pub mod controller;
pub mod copied_labels;
pub mod crd;
pub mod error;
pub mod health_object;
pub mod http;
pub mod lanes;
pub mod leader;
pub mod metrics;
pub mod one_shot;
pub mod readiness;
pub mod reconcile;
pub mod shutdown;
pub mod triggers;

pub use config::{EvaluationConfig, OperatorConfig};
pub use context::AwsPort;
pub use controller::{run, run_with};
pub use error::Error;
pub use shutdown::shutdown_signal;

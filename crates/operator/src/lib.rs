//! The operator shell: watches EC2NodeClasses and what surrounds them, and keeps one
//! KarpenterHealth per EC2NodeClass up to date. Does IO; all judgement is in the check engine.
#![forbid(unsafe_code)]

pub mod config;
pub mod controller;
pub mod crd;
pub mod error;
pub mod health_object;

pub use config::OperatorConfig;
pub use controller::run;
pub use error::Error;

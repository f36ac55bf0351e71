//! IO adapter for AWS: reads IAM, EC2, EKS, STS, SQS and EventBridge facts for the checks, through narrow ports,
//! a shared single-flight TTL cache and client-side rate limits, and classifies every failure
//! into the engine's tri-state. Does IO.
//!
//! Entry point: [`AwsObserver`] (or the [`AwsFactsSource`] port the operator holds).
#![forbid(unsafe_code)]
// A function over 80 lines (clippy.toml) is cut along what its parts decide; tests are exempt.
#![warn(clippy::too_many_lines)]

pub mod cache;
pub mod classify;
#[cfg(feature = "fake")]
pub mod fake;
pub mod limits;
pub mod metrics;
pub mod observer;
pub mod policy;
pub mod ports;
pub mod sdk;

pub use cache::{Changed, read_as, read_reporting};
pub use limits::{Rate, RateLimits};
pub use metrics::{CallCount, CallStats, Outcome};
pub use observer::{
    AwsFactsSource, AwsObservation, AwsObserver, AwsRequest, ControllerRequest, ObserverOptions,
    REVALIDATE_MIN_AGE, ServiceAccountRef, StaleFact,
};
pub use sdk::{SdkOptions, Timeouts};

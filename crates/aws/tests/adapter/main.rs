//! The AWS adapter's tests over the in-memory fake (no moto, no bed): the observer's facts,
//! calls, caches and failures, and the policy the scoped IAM documents grant; one module per
//! concern, in one test binary so that the suite links once. No IO.

mod common;

mod accounts;
mod calls;
mod catalog;
mod facts;
mod iam_policy;
mod network;
mod shared_simulations;
mod staleness;
mod volumes;

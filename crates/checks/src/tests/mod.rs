//! Crate-level tests: table-driven reason tests, field-failure scenarios and properties. Pure.

mod properties;
mod reasons;
mod scenarios;
mod strategies;

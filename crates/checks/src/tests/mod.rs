//! Crate-level tests: table-driven reason tests, field-failure scenarios and properties. Pure.

mod amis;
mod aws_auth_scenarios;
mod capacity_reservations;
mod drift;
mod identity;
mod instance_types;
mod interruption;
mod limits;
mod network;
mod observation;
mod properties;
mod reasons;
mod scenarios;
mod strategies;
mod volumes_and_versions;

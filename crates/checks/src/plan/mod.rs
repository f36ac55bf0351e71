//! The plan: what the core knows of one EC2NodeClass before any rule judges it. What the class
//! and its NodePools select (AMI alias and images, volume keys, subnets, interruption queue,
//! capacity types, instance types), what must be read from AWS for them ([`AwsRequest`]), and
//! what is derived once and shared by the rules ([`Context`]: versions, cluster names, the node
//! role). Pure, no IO.
//!
//! The shell and the AWS adapter take what to read from here; rules take what they share from
//! here, never from one another.

pub mod ami_alias;
pub mod capacity;
mod context;
pub mod images;
pub mod instance_types;
pub(crate) mod permissions;
pub mod request;
pub mod subnets;
pub mod volume_keys;

pub(crate) use context::{Context, RoleName};
pub use request::{AwsRequest, ControllerRequest, ServiceAccountRef};

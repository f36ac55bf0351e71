//! The karpenter-health command line.
#![forbid(unsafe_code)]
fn main() {}

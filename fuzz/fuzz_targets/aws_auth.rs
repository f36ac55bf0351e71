//! Fuzzes the aws-auth parser with arbitrary text, and the whole engine with that text as
//! `mapRoles`: problems are fine, panics are bugs. No IO.
#![no_main]

use karpenter_health_checks::aws_auth::{parse_map_roles, parse_map_users};
use karpenter_health_checks::facts::{Facts, Settings};
use karpenter_health_checks::{evaluate, testing};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (roles, _problems) = parse_map_roles(text);
    assert!(roles.iter().all(|r| !r.rolearn.trim().is_empty() && r.entry >= 1));
    let _ = parse_map_users(text);
    // CONFIG_MAP mode: aws-auth alone decides NodeRoleMapped, so every branch of the rule runs.
    let facts = Facts::healthy()
        .with_authentication_mode(None)
        .with_map_roles(text);
    let status = evaluate(&facts, &Settings::default(), None, testing::now());
    assert_eq!(status.conditions.len(), 10);
});

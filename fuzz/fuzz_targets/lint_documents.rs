//! Fuzzes lint's multi-document reader and the whole offline lint with arbitrary text: invalid
//! documents are findings, panics are bugs, and every finding's line is inside the input. No IO.
#![no_main]

use karpenter_health_lint::lint::{Options, Source, lint};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count().max(1);
    for options in [
        Options::default(),
        Options {
            karpenter_version: Some(semver::Version::new(1, 6, 0)),
            region: Some("us-iso-east-1".into()),
            node_role: Some("KarpenterNodeRole".into()),
            controller_role: Some("arn:aws:iam::111122223333:role/KarpenterControllerRole".into()),
        },
    ] {
        for f in lint(&[Source { path: "-", text }], &options) {
            assert!(f.line >= 1 && f.line <= lines, "{f:?} outside {lines} lines");
        }
    }
});

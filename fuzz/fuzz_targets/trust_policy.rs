//! Fuzzes the trust-policy decoder and parser (percent-encoded or plain JSON). No IO.
#![no_main]

use karpenter_health_checks::trust_policy;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(policy) = trust_policy::parse(text) {
        let _ = policy.allows_assume_role(&["ec2.amazonaws.com"]);
    }
});

//! Fuzzes the ARN parser: never a panic, and what parses prints back to an equal ARN. No IO.
#![no_main]

use karpenter_health_checks::arn;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = arn::parse(text);
    let _ = arn::name_of(text);
    if let Ok(iam) = arn::parse_iam(text) {
        assert_eq!(
            arn::parse_iam(&iam.to_string()).as_ref(),
            Ok(&iam),
            "{text:?}"
        );
        let bare = arn::parse_iam(&iam.without_path()).expect("the path-less form parses");
        assert!(!bare.has_path() && bare.same_principal(&iam), "{text:?}");
    }
});

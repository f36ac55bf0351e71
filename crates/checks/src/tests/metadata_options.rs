//! Scenarios of `MetadataOptionsSupported`: the IPv6 metadata endpoint option in isolated
//! regions, refused before Karpenter 1.7 and fine after it and in eu-isoe, and Unknown when the
//! version is unknown. Pure.

use super::reasons::status;
use super::{failures, message, pair};
use crate::facts::Facts;
use crate::testing::*;
use karpenter_health_api::{ConditionType, Reason};

#[test]
fn the_isolated_region_ipv6_option_with_karpenter_1_0_fails_metadata_options_only() {
    // Issue #7667: Karpenter 1.0.1 in us-iso-east-1 with the CRD-defaulted option.
    let facts = Facts::healthy()
        .with_region("us-iso-east-1")
        .with_karpenter_version("1.0.1")
        .with(|f| f.cluster.node_class.spec.metadata_options = None);
    let status = status(&facts);
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::MetadataOptionsSupported,
            Reason::HttpProtocolIPv6UnsupportedInRegion
        )]
    );
    let m = message(&status, ConditionType::MetadataOptionsSupported);
    assert!(m.contains("us-iso-east-1") && m.contains("1.7.0"), "{m}");
}

#[test]
fn the_isolated_region_ipv6_option_is_fine_from_karpenter_1_7_and_in_eu_isoe() {
    for (region, version) in [("us-isof-south-1", "1.7.0"), ("eu-isoe-west-1", "1.0.1")] {
        let facts = Facts::healthy()
            .with_region(region)
            .with_karpenter_version(version);
        assert!(failures(&status(&facts)).is_empty(), "{region} {version}");
    }
}

#[test]
fn the_isolated_region_without_a_known_version_is_unknown_not_false() {
    let facts = Facts::healthy()
        .with_region("us-iso-west-1")
        .with(|f| f.cluster.karpenter = unknown(crate::facts::UnknownCause::AccessDenied));
    let status = status(&facts);
    let c = status
        .condition(ConditionType::MetadataOptionsSupported)
        .expect("present");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("Unknown", "AwsAccessDenied")
    );
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        a_commercial_region_is_metadata_options_accepted:
            Facts::healthy() => MetadataOptionsSupported is True because MetadataOptionsAccepted;
        karpenter_1_6_in_us_isob_east_1_is_http_protocol_ipv6_unsupported_in_region:
            Facts::healthy().with_region("us-isob-east-1").with_karpenter_version("v1.6.2")
            => MetadataOptionsSupported is False because HttpProtocolIPv6UnsupportedInRegion;
    }
}

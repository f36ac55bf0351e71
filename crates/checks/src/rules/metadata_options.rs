//! `MetadataOptionsSupported`: EC2 in this region accepts the metadata options Karpenter sends.
//! Pure: no IO.
//!
//! In the isolated partitions `aws-iso`, `aws-iso-b` and `aws-iso-f`, EC2 rejects
//! `httpProtocolIPv6`; Karpenter before 1.7.0 always sends it (aws/karpenter-provider-aws #7081,
//! #7667; fixed by PR #8404 in `pkg/providers/amifamily/resolver.go`).
//! `eu-isoe-*` was removed from Karpenter's list (PR #8631) because EC2 accepts it there now.

use crate::plan::Context;
use crate::verdict::{Check, Outcome, Rule, Why};
use crate::{clip, version};
use karpenter_health_api::{ConditionType, Reason};

/// Whether EC2 in `region` rejects `httpProtocolIPv6` (`us-iso-*`, `us-isob-*`, `us-isof-*`).
pub fn rejects_http_protocol_ipv6(region: &str) -> bool {
    ["us-iso-", "us-isob-", "us-isof-"]
        .iter()
        .any(|prefix| region.starts_with(prefix))
}

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::MetadataOptionsSupported, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::MetadataOptionsSupported, "metadata-options");
    let Some(region) = ctx.facts.aws.region.as_deref().filter(|r| !r.is_empty()) else {
        c.unknown(Why::new(
            Reason::RegionUnknown,
            "The operator's AWS region is not known.",
        ));
        return c.finish(Reason::MetadataOptionsAccepted, "");
    };
    let region = clip(region, 64);
    if !rejects_http_protocol_ipv6(&region) {
        return c.finish(
            Reason::MetadataOptionsAccepted,
            format!("EC2 in {region} accepts every metadata option Karpenter sends."),
        );
    }
    // With the CRD default, the API server fills httpProtocolIPv6 in; with metadataOptions
    // absent altogether, Karpenter's code default sets it. Only a stored object whose
    // metadataOptions lacks the field (CRD default removed, the documented workaround) avoids it.
    let how = match &ctx.facts.cluster.node_class.spec.metadata_options {
        None => Some("by default"),
        Some(options) => options.http_protocol_ipv6.as_ref().map(|_| "explicitly"),
    };
    let Some(how) = how else {
        return c.finish(
            Reason::MetadataOptionsAccepted,
            format!(
                "The EC2NodeClass does not set httpProtocolIPv6, which EC2 in {region} rejects."
            ),
        );
    };
    let mut ok_message = String::new();
    match &ctx.version {
        Err(why) => c.unknown(Why::new(
            why.reason,
            format!(
                "{} Whether Karpenter sends httpProtocolIPv6, which EC2 in {region} rejects, \
                 depends on it.",
                why.message
            ),
        )),
        Ok(v) if !version::at_least(v, version::HTTP_PROTOCOL_IPV6_FIX) => c.fail(
            Reason::HttpProtocolIPv6UnsupportedInRegion,
            format!(
                "The EC2NodeClass sets httpProtocolIPv6 {how} and Karpenter {v} sends it, but EC2 \
                 in {region} rejects it, so no node launches. Upgrade Karpenter to 1.7.0 or later, \
                 or remove the default from the EC2NodeClass CRD and the field from the object."
            ),
            vec![ctx.node_class_subject()],
        ),
        Ok(v) => {
            ok_message = format!("Karpenter {v} no longer sends httpProtocolIPv6 in {region}.")
        }
    }
    c.finish(Reason::MetadataOptionsAccepted, ok_message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_iso_iso_b_and_iso_f_regions_reject_the_option() {
        for region in [
            "us-iso-east-1",
            "us-iso-west-1",
            "us-isob-east-1",
            "us-isof-south-1",
        ] {
            assert!(rejects_http_protocol_ipv6(region), "{region}");
        }
        for region in [
            "eu-isoe-west-1",
            "us-east-1",
            "us-gov-west-1",
            "cn-north-1",
            "",
        ] {
            assert!(!rejects_http_protocol_ipv6(region), "{region}");
        }
    }
}

//! EC2 DescribeInstanceTypeOfferings by availability zone for regions moto ships no offerings
//! for (its data covers the commercial regions only, so an isolated region answers none). AWS
//! offers a region's instance types in the region's zones (EC2 API reference,
//! DescribeInstanceTypeOfferings); the bed emulates that simply: every instance type moto lists,
//! in every zone the region's subnets are in. Does IO (reads moto with the real EC2 client).

use std::collections::BTreeSet;

/// Whether the request asks for offerings by availability zone (the awsQuery form body).
pub(super) fn by_zone(body: &str) -> bool {
    body.split('&')
        .any(|pair| pair == "LocationType=availability-zone")
}

/// Whether moto's answer lists no offering at all.
pub(super) fn is_empty(answer: &[u8]) -> bool {
    !String::from_utf8_lossy(answer).contains("<item>")
}

/// The emulated answer for `region`: (HTTP status, ec2Query XML).
pub(super) async fn offerings(upstream: &str, region: &str) -> (u16, String) {
    match read(upstream, region).await {
        Ok((types, zones)) => {
            let mut items = String::new();
            for zone in &zones {
                for t in &types {
                    items.push_str(&format!(
                        "<item><instanceType>{}</instanceType><locationType>availability-zone\
                         </locationType><location>{}</location></item>",
                        super::aws_wire::xml_escape(t),
                        super::aws_wire::xml_escape(zone)
                    ));
                }
            }
            (
                200,
                format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
                     <DescribeInstanceTypeOfferingsResponse \
                     xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\
                     <requestId>fault-proxy</requestId>\
                     <instanceTypeOfferingSet>{items}</instanceTypeOfferingSet>\
                     </DescribeInstanceTypeOfferingsResponse>"
                ),
            )
        }
        Err(e) => (
            500,
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error>\
                 <Code>InternalError</Code><Message>{}</Message></Error></Errors>\
                 <RequestID>fault-proxy</RequestID></Response>",
                super::aws_wire::xml_escape(&e.to_string())
            ),
        ),
    }
}

/// Every instance type moto lists, and the zones of the region's subnets.
async fn read(upstream: &str, region: &str) -> anyhow::Result<(Vec<String>, BTreeSet<String>)> {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region.to_owned()))
        .endpoint_url(upstream)
        .credentials_provider(aws_credential_types::Credentials::new(
            "testing", "testing", None, None, "proxy",
        ))
        .load()
        .await;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let mut types = Vec::new();
    let mut token = None;
    loop {
        let page = ec2
            .describe_instance_types()
            .set_next_token(token)
            .send()
            .await?;
        types.extend(
            page.instance_types()
                .iter()
                .filter_map(|t| t.instance_type().map(|n| n.as_str().to_owned())),
        );
        match page.next_token() {
            Some(next) if !next.is_empty() => token = Some(next.to_owned()),
            _ => break,
        }
    }
    let zones = ec2
        .describe_subnets()
        .send()
        .await?
        .subnets()
        .iter()
        .filter_map(|s| s.availability_zone().map(str::to_owned))
        .collect();
    Ok((types, zones))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_zone_offerings_with_no_item_are_emulated() {
        assert!(by_zone(
            "Action=DescribeInstanceTypeOfferings&LocationType=availability-zone&Version=2016-11-15"
        ));
        assert!(!by_zone(
            "Action=DescribeInstanceTypeOfferings&LocationType=region"
        ));
        assert!(is_empty(b"<instanceTypeOfferingSet/>"));
        assert!(!is_empty(
            b"<instanceTypeOfferingSet><item><instanceType>m5.large</instanceType></item>"
        ));
    }
}

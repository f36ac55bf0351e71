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

/// One offering item per instance type and zone, in the shape of EC2's answer.
pub(super) fn items(types: &[String], zones: &BTreeSet<String>) -> Vec<String> {
    zones
        .iter()
        .flat_map(|zone| {
            types.iter().map(move |t| {
                format!(
                    "<item><instanceType>{}</instanceType><locationType>availability-zone\
                     </locationType><location>{}</location></item>",
                    super::aws_wire::xml_escape(t),
                    super::aws_wire::xml_escape(zone)
                )
            })
        })
        .collect()
}

async fn client(upstream: &str, region: &str) -> aws_sdk_ec2::Client {
    aws_sdk_ec2::Client::new(&super::upstream::moto_config(upstream, region).await)
}

/// Every instance type moto lists in `region` (fixed data: read once per region by the proxy).
pub(super) async fn instance_type_names(
    upstream: &str,
    region: &str,
) -> anyhow::Result<Vec<String>> {
    let ec2 = client(upstream, region).await;
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
    Ok(types)
}

/// The zones of the region's subnets now (tests add subnets, so read at every listing).
pub(super) async fn subnet_zones(upstream: &str, region: &str) -> anyhow::Result<BTreeSet<String>> {
    let ec2 = client(upstream, region).await;
    Ok(ec2
        .describe_subnets()
        .send()
        .await?
        .subnets()
        .iter()
        .filter_map(|s| s.availability_zone().map(str::to_owned))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_zone_offerings_are_emulated() {
        assert!(by_zone(
            "Action=DescribeInstanceTypeOfferings&LocationType=availability-zone&Version=2016-11-15"
        ));
        assert!(!by_zone(
            "Action=DescribeInstanceTypeOfferings&LocationType=region"
        ));
    }

    #[test]
    fn every_type_is_offered_in_every_zone() {
        let zones: BTreeSet<String> = ["z-1a".into(), "z-1b".into()].into();
        let items = items(&["m5.large".into(), "c5.large".into()], &zones);
        assert_eq!(items.len(), 4);
        assert!(items[0].contains("<instanceType>m5.large</instanceType>"));
        assert!(items[0].contains("<location>z-1a</location>"));
        assert!(items[3].contains("<location>z-1b</location>"));
    }
}

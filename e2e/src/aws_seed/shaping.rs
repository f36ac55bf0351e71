//! Shapes a seeded VPC the way real accounts have it: a subnet nearly out of addresses (network
//! interfaces holding them, as ENIs of other workloads do) and egress through an inspection
//! endpoint (a Gateway Load Balancer endpoint as the default route's target). Does IO (moto,
//! through the AWS SDK).

use super::AwsSeeder;
use anyhow::{Context, Result, ensure};

impl AwsSeeder {
    /// Creates network interfaces in `subnet` until `leave` addresses are free; returns them.
    pub async fn fill_subnet(&self, subnet: &str, leave: u32) -> Result<Vec<String>> {
        let mut enis = Vec::new();
        loop {
            let free = self
                .ec2
                .describe_subnets()
                .subnet_ids(subnet)
                .send()
                .await?
                .subnets()
                .first()
                .and_then(|s| s.available_ip_address_count())
                .context("the subnet's free address count")?;
            let free = u32::try_from(free).unwrap_or_default();
            if free <= leave {
                ensure!(free == leave, "{subnet} has {free} free, wanted {leave}");
                return Ok(enis);
            }
            let eni = self
                .ec2
                .create_network_interface()
                .subnet_id(subnet)
                .send()
                .await
                .with_context(|| format!("an ENI in {subnet}"))?;
            enis.extend(
                eni.network_interface()
                    .and_then(|n| n.network_interface_id())
                    .map(str::to_owned),
            );
        }
    }

    /// Deletes network interfaces.
    pub async fn delete_network_interfaces(&self, ids: &[String]) -> Result<()> {
        for id in ids {
            self.ec2
                .delete_network_interface()
                .network_interface_id(id)
                .send()
                .await?;
        }
        Ok(())
    }

    /// A Gateway Load Balancer endpoint in `subnet` (what Network Firewall and third-party
    /// inspection appliances put in front of egress); returns its id.
    pub async fn inspection_endpoint(&self, vpc: &str, subnet: &str) -> Result<String> {
        let out = self
            .ec2
            .create_vpc_endpoint()
            .vpc_id(vpc)
            .vpc_endpoint_type(aws_sdk_ec2::types::VpcEndpointType::GatewayLoadBalancer)
            .service_name(format!(
                "com.amazonaws.vpce.{}.vpce-svc-0inspection",
                self.region
            ))
            .subnet_ids(subnet)
            .send()
            .await
            .context("creating a Gateway Load Balancer endpoint")?;
        out.vpc_endpoint()
            .and_then(|e| e.vpc_endpoint_id())
            .map(str::to_owned)
            .context("endpoint id")
    }

    /// Points `route_table`'s default route at VPC endpoint `endpoint`.
    pub async fn default_route_to_endpoint(&self, route_table: &str, endpoint: &str) -> Result<()> {
        self.ec2
            .create_route()
            .route_table_id(route_table)
            .destination_cidr_block("0.0.0.0/0")
            .vpc_endpoint_id(endpoint)
            .send()
            .await
            .with_context(|| format!("a default route to {endpoint}"))?;
        Ok(())
    }
}

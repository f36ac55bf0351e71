//! The seeder's VPC side: VPCs, subnets, DNS attributes, NAT egress, route tables and default
//! routes, VPC endpoints and security groups. Does IO (moto, through the AWS SDK).

use super::{AwsSeeder, Network, tag_spec, tag_specs};
use anyhow::{Context, Result};
use aws_sdk_ec2::types::ResourceType;

impl AwsSeeder {
    pub async fn vpc(&self, cidr: &str, tags: &[(&str, &str)]) -> Result<String> {
        let vpc = self
            .ec2
            .create_vpc()
            .cidr_block(cidr)
            .set_tag_specifications(tag_specs(ResourceType::Vpc, tags))
            .send()
            .await?;
        Ok(vpc
            .vpc()
            .and_then(|v| v.vpc_id())
            .context("vpc id")?
            .to_owned())
    }

    /// A subnet, in `zone` or one moto picks; moto knows no zones in the isolated regions, so
    /// there a zone of another region must be named.
    pub async fn subnet(
        &self,
        vpc: &str,
        cidr: &str,
        zone: Option<&str>,
        tags: &[(&str, &str)],
    ) -> Result<String> {
        let subnet = self
            .ec2
            .create_subnet()
            .vpc_id(vpc)
            .cidr_block(cidr)
            .set_availability_zone(zone.map(str::to_owned))
            .set_tag_specifications(tag_specs(ResourceType::Subnet, tags))
            .send()
            .await?;
        Ok(subnet
            .subnet()
            .and_then(|s| s.subnet_id())
            .context("subnet id")?
            .to_owned())
    }

    /// The region's available zones, by name. moto puts a subnet created without a zone in a
    /// random one, and zones differ in what they offer (us-east-1e has no m5): a test names it.
    pub async fn zones(&self) -> Result<Vec<String>> {
        let answer = self.ec2.describe_availability_zones().send().await?;
        let mut zones: Vec<String> = answer
            .availability_zones()
            .iter()
            .filter_map(|z| z.zone_name().map(str::to_owned))
            .collect();
        zones.sort();
        Ok(zones)
    }

    /// A VPC and one subnet spanning all of it.
    pub async fn network(&self, cidr: &str) -> Result<Network> {
        let vpc = self.vpc(cidr, &[]).await?;
        let subnet = self.subnet(&vpc, cidr, None, &[]).await?;
        Ok(Network { vpc, subnet })
    }

    /// Turns on both DNS attributes of `vpc` (moto, like EC2, creates VPCs with host names off).
    pub async fn enable_vpc_dns(&self, vpc: &str, on: bool) -> Result<()> {
        let value = || {
            aws_sdk_ec2::types::AttributeBooleanValue::builder()
                .value(on)
                .build()
        };
        // EC2 takes one attribute per call.
        self.ec2
            .modify_vpc_attribute()
            .vpc_id(vpc)
            .enable_dns_support(value())
            .send()
            .await
            .context("enableDnsSupport")?;
        self.ec2
            .modify_vpc_attribute()
            .vpc_id(vpc)
            .enable_dns_hostnames(value())
            .send()
            .await
            .context("enableDnsHostnames")?;
        Ok(())
    }

    /// The usual private-subnet egress: an internet gateway on `vpc`, a NAT gateway in
    /// `public_subnet`, and a route table sending `private_subnet`'s default route to the NAT
    /// gateway. Returns the route table's id.
    pub async fn nat_egress(
        &self,
        vpc: &str,
        public_subnet: &str,
        private_subnet: &str,
    ) -> Result<String> {
        let igw = self
            .ec2
            .create_internet_gateway()
            .send()
            .await?
            .internet_gateway()
            .and_then(|g| g.internet_gateway_id())
            .context("internet gateway id")?
            .to_owned();
        self.ec2
            .attach_internet_gateway()
            .internet_gateway_id(&igw)
            .vpc_id(vpc)
            .send()
            .await?;
        let allocation = self
            .ec2
            .allocate_address()
            .domain(aws_sdk_ec2::types::DomainType::Vpc)
            .send()
            .await?
            .allocation_id()
            .context("allocation id")?
            .to_owned();
        let nat = self
            .ec2
            .create_nat_gateway()
            .subnet_id(public_subnet)
            .allocation_id(allocation)
            .send()
            .await?
            .nat_gateway()
            .and_then(|n| n.nat_gateway_id())
            .context("NAT gateway id")?
            .to_owned();
        let route_table = self.route_table(vpc).await?;
        self.default_route_to_nat(&route_table, &nat).await?;
        self.ec2
            .associate_route_table()
            .route_table_id(&route_table)
            .subnet_id(private_subnet)
            .send()
            .await?;
        Ok(route_table)
    }

    /// Associates `route_table` with `subnet`.
    pub async fn associate_route_table(&self, route_table: &str, subnet: &str) -> Result<()> {
        self.ec2
            .associate_route_table()
            .route_table_id(route_table)
            .subnet_id(subnet)
            .send()
            .await
            .context("associating the route table")?;
        Ok(())
    }

    /// A route table of `vpc` without associations.
    pub async fn route_table(&self, vpc: &str) -> Result<String> {
        Ok(self
            .ec2
            .create_route_table()
            .vpc_id(vpc)
            .send()
            .await?
            .route_table()
            .and_then(|t| t.route_table_id())
            .context("route table id")?
            .to_owned())
    }

    /// Adds `0.0.0.0/0 → nat` to `route_table`.
    pub async fn default_route_to_nat(&self, route_table: &str, nat: &str) -> Result<()> {
        self.ec2
            .create_route()
            .route_table_id(route_table)
            .destination_cidr_block("0.0.0.0/0")
            .nat_gateway_id(nat)
            .send()
            .await
            .context("creating the default route")?;
        Ok(())
    }

    /// The NAT gateway `route_table`'s default route points at, if any.
    pub async fn default_route_nat(&self, route_table: &str) -> Result<Option<String>> {
        let out = self
            .ec2
            .describe_route_tables()
            .route_table_ids(route_table)
            .send()
            .await?;
        Ok(out
            .route_tables()
            .iter()
            .flat_map(|t| t.routes())
            .filter(|r| r.destination_cidr_block() == Some("0.0.0.0/0"))
            .find_map(|r| r.nat_gateway_id().map(str::to_owned)))
    }

    /// Deletes `route_table`'s default route.
    pub async fn delete_default_route(&self, route_table: &str) -> Result<()> {
        self.ec2
            .delete_route()
            .route_table_id(route_table)
            .destination_cidr_block("0.0.0.0/0")
            .send()
            .await
            .context("deleting the default route")?;
        Ok(())
    }

    /// The endpoints a private cluster needs: interface endpoints for ec2, ecr.api, ecr.dkr, sts
    /// and ssm in `subnet` with private DNS, and the s3 gateway endpoint on `route_table`.
    /// Returns their ids.
    pub async fn private_cluster_endpoints(
        &self,
        vpc: &str,
        subnet: &str,
        route_table: &str,
    ) -> Result<Vec<String>> {
        use aws_sdk_ec2::types::VpcEndpointType;
        let mut ids = Vec::new();
        for service in ["ec2", "ecr.api", "ecr.dkr", "sts", "ssm"] {
            let out = self
                .ec2
                .create_vpc_endpoint()
                .vpc_id(vpc)
                .service_name(format!("com.amazonaws.{}.{service}", self.region))
                .vpc_endpoint_type(VpcEndpointType::Interface)
                .subnet_ids(subnet)
                .private_dns_enabled(true)
                .send()
                .await
                .with_context(|| format!("creating the {service} endpoint"))?;
            ids.extend(
                out.vpc_endpoint()
                    .and_then(|e| e.vpc_endpoint_id())
                    .map(str::to_owned),
            );
        }
        let out = self
            .ec2
            .create_vpc_endpoint()
            .vpc_id(vpc)
            .service_name(format!("com.amazonaws.{}.s3", self.region))
            .vpc_endpoint_type(VpcEndpointType::Gateway)
            .route_table_ids(route_table)
            .send()
            .await
            .context("creating the s3 gateway endpoint")?;
        ids.extend(
            out.vpc_endpoint()
                .and_then(|e| e.vpc_endpoint_id())
                .map(str::to_owned),
        );
        Ok(ids)
    }

    /// Deletes the VPC endpoints `ids`.
    pub async fn delete_vpc_endpoints(&self, ids: &[String]) -> Result<()> {
        self.ec2
            .delete_vpc_endpoints()
            .set_vpc_endpoint_ids(Some(ids.to_vec()))
            .send()
            .await
            .context("deleting VPC endpoints")?;
        Ok(())
    }

    /// A security group named and described `name`.
    pub async fn security_group(
        &self,
        vpc: &str,
        name: &str,
        tags: &[(&str, &str)],
    ) -> Result<String> {
        let sg = self
            .ec2
            .create_security_group()
            .group_name(name)
            .description(name)
            .vpc_id(vpc)
            .tag_specifications(tag_spec(ResourceType::SecurityGroup, tags))
            .send()
            .await?;
        Ok(sg.group_id().context("group id")?.to_owned())
    }

    /// Deletes the security group `id`.
    pub async fn delete_security_group(&self, id: &str) -> Result<()> {
        self.ec2
            .delete_security_group()
            .group_id(id)
            .send()
            .await
            .with_context(|| format!("deleting security group {id}"))?;
        Ok(())
    }
}

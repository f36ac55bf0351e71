//! The fake's answers to the EC2 port, from the fake's state; DescribeImages refuses more
//! filter values than EC2 takes. No IO.

use super::*;

impl Ec2Api for FakeAws {
    fn describe_security_groups<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<SecurityGroupFacts>>> {
        let filters = filters.to_vec();
        self.answer("DescribeSecurityGroups", move |s| {
            let found: Vec<_> = s
                .security_groups
                .iter()
                .filter(|g| sg_matches(g, &filters))
                .cloned()
                .collect();
            page(found, 1000, next_token)
        })
    }

    fn describe_instances<'a>(
        &'a self,
        filters: &'a [Filter],
        max_results: i32,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<InstanceFacts>>> {
        let filters = filters.to_vec();
        let this = self.clone();
        let answer = self.answer("DescribeInstances", move |s| {
            let found: Vec<_> = s
                .instances
                .iter()
                .filter(|i| instance_matches(i, &filters))
                .cloned()
                .collect();
            page(
                found,
                usize::try_from(max_results).unwrap_or(1000),
                next_token,
            )
        });
        async move {
            this.lock().instance_page_sizes.push(max_results);
            answer.await
        }
        .boxed()
    }

    fn describe_subnets<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<SubnetFacts>>> {
        let filters = filters.to_vec();
        self.answer("DescribeSubnets", move |s| {
            let found: Vec<_> = s
                .subnets
                .iter()
                .filter(|x| subnet_matches(x, &filters))
                .cloned()
                .collect();
            page(found, 1000, next_token)
        })
    }

    fn describe_route_tables<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<RouteTableFacts>>> {
        let filters = filters.to_vec();
        self.answer("DescribeRouteTables", move |s| {
            page(by_vpc(&s.route_tables, &filters), 100, next_token)
        })
    }

    fn describe_nat_gateways<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<NatGatewayFacts>>> {
        let filters = filters.to_vec();
        self.answer("DescribeNatGateways", move |s| {
            page(by_vpc(&s.nat_gateways, &filters), 1000, next_token)
        })
    }

    fn describe_vpc_endpoints<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<VpcEndpointFacts>>> {
        let filters = filters.to_vec();
        self.answer("DescribeVpcEndpoints", move |s| {
            page(by_vpc(&s.vpc_endpoints, &filters), 1000, next_token)
        })
    }

    fn describe_vpc_attribute<'a>(
        &'a self,
        vpc_id: &'a str,
        attribute: VpcAttribute,
    ) -> BoxFuture<'a, PortResult<bool>> {
        let vpc = vpc_id.to_owned();
        self.answer("DescribeVpcAttribute", move |s| {
            Ok(s.vpc_attributes
                .get(&(vpc, attribute))
                .copied()
                .unwrap_or(true))
        })
    }

    fn get_ebs_encryption_by_default(&self) -> BoxFuture<'_, PortResult<bool>> {
        self.answer("GetEbsEncryptionByDefault", |s| {
            Ok(s.ebs_encryption_by_default)
        })
    }

    fn get_ebs_default_kms_key_id(&self) -> BoxFuture<'_, PortResult<String>> {
        self.answer("GetEbsDefaultKmsKeyId", |s| {
            Ok(s.ebs_default_kms_key_id.clone())
        })
    }

    fn describe_instance_types(
        &self,
        next_token: Option<String>,
    ) -> BoxFuture<'_, PortResult<Page<InstanceTypeFacts>>> {
        self.answer("DescribeInstanceTypes", move |s| {
            page(
                s.instance_types.clone(),
                s.instance_type_page_size,
                next_token,
            )
        })
    }

    fn describe_instance_type_offerings(
        &self,
        next_token: Option<String>,
    ) -> BoxFuture<'_, PortResult<Page<(String, String)>>> {
        self.answer("DescribeInstanceTypeOfferings", move |s| {
            page(
                s.instance_type_offerings.clone(),
                s.instance_type_page_size,
                next_token,
            )
        })
    }

    fn describe_open_capacity_reservations(
        &self,
        next_token: Option<String>,
    ) -> BoxFuture<'_, PortResult<Page<CapacityReservationFacts>>> {
        self.answer("DescribeCapacityReservations", move |s| {
            page(
                s.open_capacity_reservations.clone(),
                s.instance_type_page_size,
                next_token,
            )
        })
    }

    fn describe_images(
        &self,
        ids: &[String],
        next_token: Option<String>,
    ) -> BoxFuture<'_, PortResult<Page<ImageFacts>>> {
        let ids = ids.to_vec();
        self.answer("DescribeImages", move |s| {
            // EC2's own limit on the values of one filter.
            if ids.len() > 200 {
                return Err(CallError::new(
                    ErrorKind::Unsupported,
                    "The maximum number of filter values specified on a single call is 200",
                )
                .with_code("FilterLimitExceeded")
                .with_status(400));
            }
            let found = s
                .images
                .iter()
                .filter(|i| ids.contains(&i.id))
                .cloned()
                .collect();
            page(found, s.instance_type_page_size, next_token)
        })
    }
}

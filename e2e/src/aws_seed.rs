//! Seeds the bed's moto server with the AWS side of a Karpenter setup, in one region: IAM roles
//! and instance profiles, VPCs and subnets, security groups, instances and EKS clusters. One
//! seeder serves the adapter tests, the operator tests and the benchmark; where they differ they
//! pass parameters. Does IO (moto, through the AWS SDK and, for EKS, raw HTTP).

use crate::Bed;
use anyhow::{Context, Result, ensure};
use aws_sdk_ec2::types::{InstanceType, ResourceType, Tag, TagSpecification};
use http_body_util::{BodyExt, Full};
use serde_json::json;

/// The trust policy of a node role: EC2 may assume it.
pub const EC2_TRUST: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;

/// The AWS-managed policies a node role needs, with ECR access as most guides attach it
/// (`AmazonEC2ContainerRegistryReadOnly`).
pub const NODE_POLICIES: [&str; 4] = [
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    "AmazonSSMManagedInstanceCore",
];

/// The same with the narrower ECR policy AWS recommends today (`AmazonEC2ContainerRegistryPullOnly`).
pub const NODE_POLICIES_PULL_ONLY: [&str; 4] = [
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
];

/// The ARN of the AWS-managed policy `name` in `partition`.
pub fn managed_policy_arn(partition: &str, name: &str) -> String {
    format!("arn:{partition}:iam::aws:policy/{name}")
}

/// The partition (`aws`, `aws-iso`, ...) and account of an ARN.
pub fn partition_and_account(arn: &str) -> (String, String) {
    let mut parts = arn.split(':');
    let partition = parts.nth(1).unwrap_or("aws").to_owned();
    let account = parts.nth(2).unwrap_or_default().to_owned();
    (partition, account)
}

/// One EC2 tag.
pub fn tag(k: &str, v: &str) -> Tag {
    Tag::builder().key(k).value(v).build()
}

/// Tags for a resource that RunInstances, CreateVpc, ... create.
pub fn tag_spec(kind: ResourceType, tags: &[(&str, &str)]) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .set_tags(Some(tags.iter().map(|(k, v)| tag(k, v)).collect()))
        .build()
}

/// `tag_spec` only when there are tags, so untagged resources are created without any.
fn tag_specs(kind: ResourceType, tags: &[(&str, &str)]) -> Option<Vec<TagSpecification>> {
    (!tags.is_empty()).then(|| vec![tag_spec(kind, tags)])
}

/// A VPC with one subnet.
#[derive(Clone, Debug)]
pub struct Network {
    pub vpc: String,
    pub subnet: String,
}

/// Seeds moto with the Rust SDK, in one region.
#[derive(Debug)]
pub struct AwsSeeder {
    iam: aws_sdk_iam::Client,
    ec2: aws_sdk_ec2::Client,
    moto: String,
    region: String,
}

impl AwsSeeder {
    pub async fn new(bed: &Bed, region: &str) -> Result<Self> {
        let config = bed.aws_config(region).await?;
        Ok(Self {
            iam: aws_sdk_iam::Client::new(&config),
            ec2: aws_sdk_ec2::Client::new(&config),
            moto: bed.moto_url()?.to_owned(),
            region: region.to_owned(),
        })
    }

    /// A role under `path` that `trust` lets assume it; returns its ARN (whose partition follows
    /// the region: moto keeps `aws-iso` IAM apart from `aws`).
    pub async fn role(&self, name: &str, path: &str, trust: &str) -> Result<String> {
        let role = self
            .iam
            .create_role()
            .role_name(name)
            .path(path)
            .assume_role_policy_document(trust)
            .send()
            .await
            .with_context(|| format!("creating role {name}"))?;
        Ok(role.role().context("created role")?.arn().to_owned())
    }

    /// A node role under `path` trusting EC2, with the AWS-managed `policies` (names) attached in
    /// its partition; returns its ARN.
    pub async fn node_role(&self, name: &str, path: &str, policies: &[&str]) -> Result<String> {
        let arn = self.role(name, path, EC2_TRUST).await?;
        let (partition, _) = partition_and_account(&arn);
        for policy in policies {
            self.iam
                .attach_role_policy()
                .role_name(name)
                .policy_arn(managed_policy_arn(&partition, policy))
                .send()
                .await
                .with_context(|| format!("attaching {policy}"))?;
        }
        Ok(arn)
    }

    /// Detaches the AWS-managed policy `policy` (a name) from the role `role_arn`.
    pub async fn detach_policy(&self, role_arn: &str, policy: &str) -> Result<()> {
        let (partition, _) = partition_and_account(role_arn);
        let name = role_arn.rsplit('/').next().unwrap_or(role_arn);
        self.iam
            .detach_role_policy()
            .role_name(name)
            .policy_arn(managed_policy_arn(&partition, policy))
            .send()
            .await
            .with_context(|| format!("detaching {policy} from {name}"))?;
        Ok(())
    }

    /// An instance profile holding `role`, or no role.
    pub async fn instance_profile(&self, name: &str, role: Option<&str>) -> Result<()> {
        self.iam
            .create_instance_profile()
            .instance_profile_name(name)
            .send()
            .await?;
        if let Some(role) = role {
            self.iam
                .add_role_to_instance_profile()
                .instance_profile_name(name)
                .role_name(role)
                .send()
                .await?;
        }
        Ok(())
    }

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
    /// there a VPC has no subnet.
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

    /// A VPC and one subnet spanning all of it.
    pub async fn network(&self, cidr: &str) -> Result<Network> {
        let vpc = self.vpc(cidr, &[]).await?;
        let subnet = self.subnet(&vpc, cidr, None, &[]).await?;
        Ok(Network { vpc, subnet })
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

    /// `count` instances in `subnet` with `tags`, in batches of at most 1,000 per RunInstances.
    pub async fn instances(
        &self,
        subnet: &str,
        count: i32,
        tags: &[(&str, &str)],
    ) -> Result<Vec<String>> {
        let mut ids = Vec::new();
        let mut left = count;
        while left > 0 {
            let n = left.min(1000);
            let out = self
                .ec2
                .run_instances()
                .image_id("ami-12c6146b")
                .instance_type(InstanceType::T3Micro)
                .min_count(n)
                .max_count(n)
                .subnet_id(subnet)
                .tag_specifications(tag_spec(ResourceType::Instance, tags))
                .send()
                .await?;
            ids.extend(
                out.instances()
                    .iter()
                    .filter_map(|i| i.instance_id().map(str::to_owned)),
            );
            left -= n;
        }
        Ok(ids)
    }

    /// `count` instances with one RunInstances each (8 at a time). moto pages DescribeInstances
    /// by reservation, EC2 by instance: one instance per reservation makes moto page like EC2.
    pub async fn single_instances(
        &self,
        subnet: &str,
        count: usize,
        tags: &[(&str, &str)],
    ) -> Result<()> {
        use futures::StreamExt;
        let results: Vec<Result<Vec<String>>> = futures::stream::iter(0..count)
            .map(|_| self.instances(subnet, 1, tags))
            .buffer_unordered(8)
            .collect()
            .await;
        for r in results {
            r?;
        }
        Ok(())
    }

    pub async fn terminate(&self, ids: &[String]) -> Result<()> {
        self.ec2
            .terminate_instances()
            .set_instance_ids(Some(ids.to_vec()))
            .send()
            .await?;
        Ok(())
    }

    /// EKS CreateCluster sent as raw JSON: the SDK's request shape has no `vpcId` (real EKS
    /// derives it from the subnets), and moto stores `resourcesVpcConfig` exactly as sent; the
    /// cluster-identity check compares it.
    pub async fn eks_cluster(
        &self,
        name: &str,
        role_arn: &str,
        vpc: &str,
        subnet: Option<&str>,
    ) -> Result<()> {
        let body = json!({
            "name": name,
            "roleArn": role_arn,
            "resourcesVpcConfig": { "subnetIds": subnet.into_iter().collect::<Vec<_>>(), "vpcId": vpc },
        });
        let auth = format!(
            "AWS4-HMAC-SHA256 Credential=testing/20240101/{}/eks/aws4_request, SignedHeaders=host, Signature=0",
            self.region
        );
        let req = hyper::Request::post(format!("{}/clusters", self.moto))
            .header("content-type", "application/json")
            .header("authorization", auth)
            .body(Full::new(bytes::Bytes::from(body.to_string())))?;
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http();
        let resp = client.request(req).await?;
        let status = resp.status();
        let text = resp.into_body().collect().await?.to_bytes();
        ensure!(
            status.is_success(),
            "EKS CreateCluster: {status} {}",
            String::from_utf8_lossy(&text)
        );
        Ok(())
    }
}

//! Seeds the bed's moto server with the AWS side of a Karpenter setup, in one region: IAM roles
//! and instance profiles, VPCs and subnets, security groups, instances and EKS clusters. One
//! seeder serves the adapter tests, the operator tests and the benchmark; where they differ they
//! pass parameters. Does IO (moto, through the AWS SDK and, for EKS, raw HTTP).

mod interruption;
mod network;
mod shaping;

pub use interruption::{INTERRUPTION_RULES, interruption_queue_policy};

use crate::Bed;
use anyhow::{Context, Result, ensure};
use aws_sdk_ec2::types::{InstanceType, ResourceType, Tag, TagSpecification};
use http_body_util::{BodyExt, Full};
use serde_json::json;

mod instances;

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
    sqs: aws_sdk_sqs::Client,
    events: aws_sdk_eventbridge::Client,
    kms: aws_sdk_kms::Client,
    moto: String,
    region: String,
}

impl AwsSeeder {
    pub async fn new(bed: &Bed, region: &str) -> Result<Self> {
        let config = bed.aws_config(region).await?;
        Ok(Self {
            iam: aws_sdk_iam::Client::new(&config),
            ec2: aws_sdk_ec2::Client::new(&config),
            sqs: aws_sdk_sqs::Client::new(&config),
            events: aws_sdk_eventbridge::Client::new(&config),
            kms: aws_sdk_kms::Client::new(&config),
            moto: bed.moto_url()?.to_owned(),
            region: region.to_owned(),
        })
    }

    /// A customer-managed KMS key with `policy` (KMS's default, delegating to the account root,
    /// when `None`); returns its id.
    pub async fn kms_key(&self, policy: Option<&str>) -> Result<String> {
        let out = self
            .kms
            .create_key()
            .set_policy(policy.map(str::to_owned))
            .description("karpenter-health e2e volumes")
            .send()
            .await
            .context("creating a KMS key")?;
        Ok(out
            .key_metadata()
            .context("created key")?
            .key_id()
            .to_owned())
    }

    /// Enables or disables the KMS key `id`.
    pub async fn set_kms_key_enabled(&self, id: &str, enabled: bool) -> Result<()> {
        if enabled {
            self.kms.enable_key().key_id(id).send().await?;
        } else {
            self.kms.disable_key().key_id(id).send().await?;
        }
        Ok(())
    }

    /// Replaces the key policy of the KMS key `id`.
    pub async fn put_key_policy(&self, id: &str, policy: &str) -> Result<()> {
        self.kms
            .put_key_policy()
            .key_id(id)
            .policy_name("default")
            .policy(policy)
            .send()
            .await
            .with_context(|| format!("putting the key policy of {id}"))?;
        Ok(())
    }

    /// Grants `grantee` the `operations` (KMS's names: `Decrypt`, `CreateGrant`, ...) on the KMS
    /// key `id`; returns the grant id.
    pub async fn kms_grant(&self, id: &str, grantee: &str, operations: &[&str]) -> Result<String> {
        let out = self
            .kms
            .create_grant()
            .key_id(id)
            .grantee_principal(grantee)
            .set_operations(Some(
                operations
                    .iter()
                    .map(|o| aws_sdk_kms::types::GrantOperation::from(*o))
                    .collect(),
            ))
            .send()
            .await
            .with_context(|| format!("granting {grantee} the use of {id}"))?;
        out.grant_id().map(str::to_owned).context("created grant")
    }

    /// Revokes the grant `grant` on the KMS key `id`.
    pub async fn revoke_kms_grant(&self, id: &str, grant: &str) -> Result<()> {
        self.kms
            .revoke_grant()
            .key_id(id)
            .grant_id(grant)
            .send()
            .await
            .with_context(|| format!("revoking grant {grant} of {id}"))?;
        Ok(())
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

    /// Registers an image named `name` (owned by the account, as a build of one's own is) and
    /// returns its id.
    pub async fn register_image(&self, name: &str) -> Result<String> {
        let out = self
            .ec2
            .register_image()
            .name(name)
            .architecture(aws_sdk_ec2::types::ArchitectureValues::X8664)
            .root_device_name("/dev/xvda")
            .send()
            .await?;
        out.image_id()
            .map(str::to_owned)
            .context("RegisterImage named no image")
    }

    /// Disables image `id`: it can no longer launch (EC2 DisableImage).
    pub async fn disable_image(&self, id: &str) -> Result<()> {
        self.ec2.disable_image().image_id(id).send().await?;
        Ok(())
    }

    /// Re-enables image `id` (EC2 EnableImage).
    pub async fn enable_image(&self, id: &str) -> Result<()> {
        self.ec2.enable_image().image_id(id).send().await?;
        Ok(())
    }

    /// Deregisters image `id`.
    pub async fn deregister_image(&self, id: &str) -> Result<()> {
        self.ec2.deregister_image().image_id(id).send().await?;
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

    /// EKS CreateCluster sent as raw JSON: the SDK's request shape has no `vpcId` (real EKS
    /// derives it from the subnets), and moto stores `resourcesVpcConfig` exactly as sent; the
    /// cluster-identity check compares it.
    pub async fn eks_cluster(
        &self,
        name: &str,
        role_arn: &str,
        vpc: &str,
        subnet: Option<&str>,
        kubernetes: &str,
    ) -> Result<()> {
        let body = json!({
            "name": name,
            "version": kubernetes,
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

    /// The OIDC issuer moto gave the EKS cluster `name` (`https://...`).
    pub async fn cluster_issuer(&self, name: &str) -> Result<String> {
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(self.region.clone()))
            .endpoint_url(&self.moto)
            .credentials_provider(aws_credential_types::Credentials::new(
                "testing", "testing", None, None, "bed",
            ))
            .load()
            .await;
        let eks = aws_sdk_eks::Client::new(&config);
        let out = eks.describe_cluster().name(name).send().await?;
        out.cluster()
            .and_then(|c| c.identity())
            .and_then(|i| i.oidc())
            .and_then(|o| o.issuer())
            .map(str::to_owned)
            .context("the cluster has no OIDC issuer")
    }

    /// An IAM OIDC provider for `issuer`, or the one that exists already (moto gives every
    /// cluster of a region the same issuer, so tests in one region share it); returns its ARN.
    pub async fn oidc_provider(&self, issuer: &str) -> Result<String> {
        let host_path = issuer.trim_start_matches("https://");
        let existing = self.iam.list_open_id_connect_providers().send().await?;
        if let Some(arn) = existing
            .open_id_connect_provider_list()
            .iter()
            .filter_map(|p| p.arn())
            .find(|arn| arn.ends_with(&format!(":oidc-provider/{host_path}")))
        {
            return Ok(arn.to_owned());
        }
        let out = self
            .iam
            .create_open_id_connect_provider()
            .url(issuer)
            .client_id_list("sts.amazonaws.com")
            .thumbprint_list("9e99a48a9960b14926bb7f3b02e22da2b0ab7280")
            .send()
            .await
            .context("creating the OIDC provider")?;
        out.open_id_connect_provider_arn()
            .map(str::to_owned)
            .context("created provider")
    }

    pub async fn delete_oidc_provider(&self, arn: &str) -> Result<()> {
        self.iam
            .delete_open_id_connect_provider()
            .open_id_connect_provider_arn(arn)
            .send()
            .await
            .context("deleting the OIDC provider")?;
        Ok(())
    }

    /// Replaces a role's trust policy.
    pub async fn set_trust(&self, role: &str, trust: &str) -> Result<()> {
        self.iam
            .update_assume_role_policy()
            .role_name(role)
            .policy_document(trust)
            .send()
            .await
            .with_context(|| format!("updating the trust of {role}"))?;
        Ok(())
    }

    /// Puts (or replaces) the inline policy `policy` of `role`.
    pub async fn put_role_policy(&self, role: &str, policy: &str, document: &str) -> Result<()> {
        self.iam
            .put_role_policy()
            .role_name(role)
            .policy_name(policy)
            .policy_document(document)
            .send()
            .await
            .with_context(|| format!("putting {policy} on {role}"))?;
        Ok(())
    }

    /// Creates the spot service-linked role (under its service path) unless it exists.
    pub async fn ensure_spot_service_linked_role(&self) -> Result<()> {
        let exists = self
            .iam
            .get_role()
            .role_name("AWSServiceRoleForEC2Spot")
            .send()
            .await
            .is_ok();
        if !exists {
            let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"spot.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
            self.role(
                "AWSServiceRoleForEC2Spot",
                "/aws-service-role/spot.amazonaws.com/",
                trust,
            )
            .await?;
        }
        Ok(())
    }

    /// Deletes the spot service-linked role if it exists.
    pub async fn delete_spot_service_linked_role(&self) -> Result<()> {
        let _ = self
            .iam
            .delete_role()
            .role_name("AWSServiceRoleForEC2Spot")
            .send()
            .await;
        Ok(())
    }
}

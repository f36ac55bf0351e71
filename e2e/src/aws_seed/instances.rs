//! The seeder's reads and writes of EC2 instances and launch templates: what Karpenter launched,
//! as EC2 (moto) has it. Does IO (moto, through the AWS SDK).

use super::AwsSeeder;
use anyhow::{Context, Result};

impl AwsSeeder {
    /// The instances tagged `key`=`value` that are not terminated.
    pub async fn live_instances_tagged(&self, key: &str, value: &str) -> Result<Vec<String>> {
        let out = self
            .ec2
            .describe_instances()
            .filters(
                aws_sdk_ec2::types::Filter::builder()
                    .name(format!("tag:{key}"))
                    .values(value)
                    .build(),
            )
            .send()
            .await?;
        Ok(out
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .filter(|i| {
                i.state()
                    .and_then(|s| s.name())
                    .is_none_or(|n| n.as_str() != "terminated")
            })
            .filter_map(|i| i.instance_id().map(str::to_owned))
            .collect())
    }

    /// The metadata options (`HttpTokens`, `HttpPutResponseHopLimit`) of the newest version of
    /// each launch template tagged `karpenter.k8s.aws/ec2nodeclass`=`node_class`, as Karpenter
    /// wrote them (moto keeps a version's data as it was sent).
    pub async fn launch_template_metadata(&self, node_class: &str) -> Result<Vec<(String, i32)>> {
        let templates = self
            .ec2
            .describe_launch_templates()
            .filters(
                aws_sdk_ec2::types::Filter::builder()
                    .name("tag:karpenter.k8s.aws/ec2nodeclass")
                    .values(node_class)
                    .build(),
            )
            .send()
            .await?;
        let mut options = Vec::new();
        for id in templates
            .launch_templates()
            .iter()
            .filter_map(|t| t.launch_template_id())
        {
            let versions = self
                .ec2
                .describe_launch_template_versions()
                .launch_template_id(id)
                .versions("$Latest")
                .send()
                .await?;
            for data in versions
                .launch_template_versions()
                .iter()
                .filter_map(|v| v.launch_template_data())
            {
                let metadata = data.metadata_options();
                options.push((
                    metadata
                        .and_then(|m| m.http_tokens())
                        .map_or_else(String::new, |t| t.as_str().to_owned()),
                    metadata
                        .and_then(|m| m.http_put_response_hop_limit())
                        .unwrap_or(0),
                ));
            }
        }
        Ok(options)
    }

    /// EC2's description of instance `id`.
    async fn instance(&self, id: &str) -> Result<aws_sdk_ec2::types::Instance> {
        let out = self
            .ec2
            .describe_instances()
            .instance_ids(id)
            .send()
            .await?;
        out.reservations()
            .iter()
            .flat_map(|r| r.instances())
            .next()
            .cloned()
            .with_context(|| format!("EC2 describes no instance {id}"))
    }

    /// What EC2 says instance `id` runs with: its metadata options (HttpTokens, hop limit) and
    /// its lifecycle (`spot`, or `on-demand` when EC2 names none).
    pub async fn instance_metadata(&self, id: &str) -> Result<(String, i32, String)> {
        let instance = self.instance(id).await?;
        let metadata = instance.metadata_options();
        Ok((
            metadata
                .and_then(|m| m.http_tokens())
                .map_or_else(String::new, |t| t.as_str().to_owned()),
            metadata
                .and_then(|m| m.http_put_response_hop_limit())
                .unwrap_or(0),
            instance
                .instance_lifecycle()
                .map_or_else(|| "on-demand".to_owned(), |l| l.as_str().to_owned()),
        ))
    }

    /// The state of instance `id` (`running`, `shutting-down`, `terminated`, ...).
    pub async fn instance_state(&self, id: &str) -> Result<String> {
        self.instance(id)
            .await?
            .state()
            .and_then(|s| s.name())
            .map(|n| n.as_str().to_owned())
            .with_context(|| format!("EC2 gives instance {id} no state"))
    }

    pub async fn terminate(&self, ids: &[String]) -> Result<()> {
        self.ec2
            .terminate_instances()
            .set_instance_ids(Some(ids.to_vec()))
            .send()
            .await?;
        Ok(())
    }
}

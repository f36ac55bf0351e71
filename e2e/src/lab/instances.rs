//! The EC2 side of a lab: the instances Karpenter launched for the test's NodePool and their
//! states, and another cluster's instances beside them, read and made in moto. Does IO (moto).

use super::Lab;
use anyhow::{Context as _, Result};
use std::time::Duration;

impl Lab {
    /// Two instances as another cluster's Karpenter launches them, in a VPC of their own: one
    /// tagged with this cluster's name (a cluster sharing it), one with another name. Their ids.
    pub async fn other_clusters_instances(&self) -> Result<(String, String)> {
        let aws = &self.fx.aws;
        let vpc = aws.vpc("10.90.0.0/16", &[]).await?;
        let subnet = aws.subnet(&vpc, "10.90.1.0/24", None, &[]).await?;
        let other = format!("{}-elsewhere", self.fx.cluster);
        let mut ids = Vec::new();
        for cluster in [&self.fx.cluster, &other] {
            let owned = format!("kubernetes.io/cluster/{cluster}");
            let launched = aws
                .instances(
                    &subnet,
                    1,
                    &[
                        ("eks:eks-cluster-name", cluster),
                        (&owned, "owned"),
                        ("karpenter.sh/nodepool", "default"),
                        ("karpenter.k8s.aws/ec2nodeclass", "default"),
                    ],
                )
                .await?;
            ids.push(
                launched
                    .into_iter()
                    .next()
                    .context("no instance launched")?,
            );
        }
        Ok((ids[0].clone(), ids[1].clone()))
    }

    /// The instances Karpenter launched for this test's NodePool that still live.
    pub async fn launched_instances(&self) -> Result<Vec<String>> {
        self.fx
            .aws
            .live_instances_tagged("karpenter.sh/nodepool", &self.fx.name)
            .await
    }

    /// The EC2 state of instance `id`.
    pub async fn instance_state(&self, id: &str) -> Result<String> {
        self.fx.aws.instance_state(id).await
    }

    /// Waits until instance `id` is in one of `states`.
    pub async fn wait_instance_state(
        &self,
        id: &str,
        states: &[&str],
        deadline: Duration,
    ) -> Result<()> {
        crate::wait_for(
            &format!("instance {id} in {states:?}"),
            deadline,
            || async {
                let state = self.instance_state(id).await?;
                Ok(states.contains(&state.as_str()).then_some(()))
            },
        )
        .await
    }
}

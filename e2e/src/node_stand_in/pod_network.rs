//! The stand-in's VPC CNI: whether a node's Pod network is ready (its aws-node Pod runs) and how
//! many Pod addresses a node of a type gets. Does IO (reads the bed's DaemonSet and Pods).

use anyhow::{Context as _, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

/// Where the VPC CNI runs, when the cluster has it (`kube-system/aws-node`): a node's network is
/// ready only once its aws-node Pod runs. Until then the kubelet reports the container runtime's
/// network not ready and the Node keeps its `not-ready` taint, so only Pods that tolerate it (the
/// DaemonSets EKS installs tolerate every taint) land there first, as on EKS.
pub(super) struct PodNetwork {
    aws_node: bool,
    running_on: std::collections::BTreeSet<String>,
}

impl PodNetwork {
    pub(super) async fn read(client: &kube::Client) -> Result<Self> {
        let aws_node =
            Api::<k8s_openapi::api::apps::v1::DaemonSet>::namespaced(client.clone(), "kube-system")
                .get_opt("aws-node")
                .await
                .context("reading kube-system/aws-node")?
                .is_some();
        let mut running_on = std::collections::BTreeSet::new();
        if aws_node {
            let pods = Api::<Pod>::namespaced(client.clone(), "kube-system")
                .list(&ListParams::default().labels("k8s-app=aws-node"))
                .await
                .context("listing the aws-node Pods")?;
            running_on.extend(pods.items.into_iter().filter_map(|p| {
                let running = p.status.as_ref()?.phase.as_deref() == Some("Running");
                running.then_some(p.spec?.node_name?)
            }));
        }
        Ok(Self {
            aws_node,
            running_on,
        })
    }

    pub(super) fn ready_on(&self, node: Option<&str>) -> bool {
        !self.aws_node || node.is_some_and(|n| self.running_on.contains(n))
    }
}

/// The Pod addresses the VPC CNI gives a node in its default mode (secondary IPv4 addresses):
/// its ENIs × (IPv4 addresses per ENI − 1), the primary address of each ENI being the ENI's own
/// (EC2's "IP addresses per network interface per instance type" table; the CNI's README). A
/// type not listed here gets no limit.
pub(super) fn pod_addresses(instance_type: &str) -> Option<usize> {
    let (enis, per_eni) = match instance_type {
        "t3.micro" => (2, 2),
        "m5.large" | "c5.large" => (3, 10),
        "m5.xlarge" | "c5.xlarge" => (4, 15),
        _ => return None,
    };
    Some(enis * (per_eni - 1))
}

//! Instance metadata out of reach of a workload that needs it on a NodePool's nodes. With IMDSv2
//! required, a Pod reaches instance metadata only when the token's response may travel the extra
//! hop from the node into the Pod's network namespace: `httpPutResponseHopLimit` 2 or more
//! (EC2 user guide, "Instance metadata access considerations": "in a container environment …
//! set the hop limit to 2"); Karpenter's default is 1 (aws/karpenter-provider-aws
//! `pkg/apis/v1/ec2nodeclass.go`, written into the launch template by
//! `pkg/providers/launchtemplate/types.go`). Pure: no IO.
//!
//! Judged for the one workload whose need the cluster's objects prove: the AWS Load Balancer
//! Controller, which exits at start when it cannot find its VPC (kubernetes-sigs/
//! aws-load-balancer-controller `pkg/aws/cloud.go` `getVpcID`, `main.go`: "unable to initialize
//! AWS cloud") and reads it from instance metadata unless its Deployment passes `--aws-vpc-id` or
//! `--aws-vpc-tags`. A warning, never a False: its Pods may run on other nodes (a managed node
//! group's) for as long as nothing moves them. Workloads that merely may read metadata (an AWS
//! SDK's last resort for credentials or region; the EBS CSI driver, which falls back to the
//! Kubernetes API) are not judged: nothing proves they fail.

use crate::clip;
use crate::facts::{LoadBalancerControllerFacts, Observed};
use crate::plan::Context;
use crate::karpenter_release::Sure;
use crate::pod_fit::NodeClaimTemplate;
use crate::verdict::{Check, Why};
use crate::warnings::Warning;
use karpenter_health_api::SubjectRef;
use karpenter_health_api::karpenter::{MetadataOptions, NodePool};

/// Who reaches the instance metadata of this class's nodes, from its `metadataOptions` with the
/// EC2NodeClass CRD's defaults (`httpEndpoint: enabled`, `httpTokens: required`,
/// `httpPutResponseHopLimit: 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    /// Every Pod: IMDSv1 is allowed (its answers are not hop-limited), or the hop limit lets the
    /// token reach a Pod's network namespace.
    Everyone,
    /// Host-network Pods only: IMDSv2 is required and the token's response dies after one hop.
    HostNetworkOnly { hop_limit: i64 },
    /// Nobody: the metadata endpoint is disabled.
    Nobody,
}

fn reach(options: Option<&MetadataOptions>) -> Reach {
    let endpoint = options.and_then(|o| o.http_endpoint.as_deref()).unwrap_or("enabled");
    let tokens = options.and_then(|o| o.http_tokens.as_deref()).unwrap_or("required");
    let hop_limit = options.and_then(|o| o.http_put_response_hop_limit).unwrap_or(1);
    if endpoint == "disabled" {
        Reach::Nobody
    } else if tokens == "required" && hop_limit < 2 {
        Reach::HostNetworkOnly { hop_limit }
    } else {
        Reach::Everyone
    }
}

/// Warns of each NodePool of `pools` whose nodes the AWS Load Balancer Controller can run on
/// while it needs instance metadata they keep from it; returns what the True message says of it
/// (empty when there is nothing to judge).
pub(super) fn judge(ctx: &Context, c: &mut Check, pools: &[&NodePool]) -> String {
    let controller = match &ctx.facts.cluster.load_balancer_controller {
        Observed::Found(found) => found,
        Observed::Absent => return String::new(),
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved(
                "The AWS Load Balancer Controller's Deployment (kube-system/aws-load-balancer-controller)",
                u,
            ));
            return String::new();
        }
    };
    if !needs_metadata(controller) {
        return String::new();
    }
    let reach = reach(ctx.facts.cluster.node_class.spec.metadata_options.as_ref());
    let (why, fix) = match reach {
        Reach::Everyone => {
            return "The AWS Load Balancer Controller reads its VPC id from instance metadata, \
                    which this EC2NodeClass lets Pods reach."
                .to_owned();
        }
        Reach::HostNetworkOnly { .. } if controller.host_network => {
            return "The AWS Load Balancer Controller reads its VPC id from instance metadata \
                    on the host network, which this EC2NodeClass allows."
                .to_owned();
        }
        Reach::HostNetworkOnly { hop_limit } => (
            format!(
                "keeps from Pods that are not host-network (metadataOptions httpTokens: \
                 required, httpPutResponseHopLimit: {hop_limit}: the token's answer dies at the \
                 hop into the Pod)"
            ),
            "or set spec.metadataOptions.httpPutResponseHopLimit: 2 in this EC2NodeClass",
        ),
        Reach::Nobody => (
            "keeps from every Pod (metadataOptions httpEndpoint: disabled)".to_owned(),
            "or enable spec.metadataOptions.httpEndpoint in this EC2NodeClass",
        ),
    };
    let (namespace, name) = (&controller.pod.namespace, &controller.pod.name);
    for pool in pools {
        if !may_run_on(ctx, controller, pool) {
            continue;
        }
        let pool_name = pool.metadata.name.as_deref().unwrap_or_default();
        c.warn(
            Warning::MetadataOutOfReach,
            format!(
                "NodePool {}: the AWS Load Balancer Controller (Deployment {namespace}/{name}) \
                 can run on its nodes and reads its VPC id from instance metadata (it passes \
                 neither --aws-vpc-id nor --aws-vpc-tags), which this EC2NodeClass {why}; on \
                 such a node it exits at start (\"failed to get VPC ID\"). Pass --aws-vpc-id \
                 (its Helm chart's vpcId) {fix}.",
                clip(pool_name, 128)
            ),
            vec![
                ctx.node_class_subject(),
                SubjectRef::new("NodePool", pool_name),
                SubjectRef::namespaced("Deployment", namespace, name),
            ],
        );
    }
    String::new()
}

/// Whether the controller's Deployment, as written, leaves it to instance metadata to find its
/// VPC: it runs, passes neither flag, and nothing else may name its VPC.
fn needs_metadata(controller: &LoadBalancerControllerFacts) -> bool {
    controller.replicas > 0 && !controller.vpc_id_configured && !controller.vpc_source_unjudged
}

/// Whether Karpenter may launch a node of `pool` for the controller's Pods (a label Karpenter
/// neither knows nor finds in the NodePool keeps them off it); what runs on a node errs toward a
/// warning, so what the model cannot decide may.
fn may_run_on(ctx: &Context, controller: &LoadBalancerControllerFacts, pool: &NodePool) -> bool {
    NodeClaimTemplate::for_release(pool, &ctx.release(), Sure::May).may_take(&controller.pod)
}

//! Verdict against behaviour for instance metadata kept from a workload that needs it
//! (NodesFitWorkloads, MetadataOutOfReach). The AWS Load Balancer Controller is installed as its
//! chart renders it from AWS's EKS guide (no `--aws-vpc-id`), so it reads its VPC id from
//! instance metadata at start (kubernetes-sigs/aws-load-balancer-controller `pkg/aws/cloud.go`
//! `getVpcID`). Its Pod is pending; the real Karpenter launches a node of the test's NodePool for
//! it, from a launch template whose metadata options are the class's: with Karpenter's defaults,
//! IMDSv2 required and a hop limit of 1 (aws/karpenter-provider-aws
//! `pkg/providers/launchtemplate/types.go`), which lets the token's answer reach only the host
//! network, not the controller's Pod. karpenter-health warns and turns nothing False. The twin
//! sets the hop limit to 2: the warning goes, and Karpenter's next node comes from a launch
//! template with that limit, on spot. Each node's instance is read from EC2: it runs with the
//! template's metadata options, on-demand and spot alike. Does IO (the bed, moto, Karpenter's
//! process).
//!
//! What the lab does not show: the controller exiting. The module proxy serves none of its
//! releases and the stand-in runs no container; the exit is read in its source (above).

use anyhow::{Result, ensure};
use karpenter_health_api::KarpenterHealthStatus;
use karpenter_health_e2e::health_status::{finding_message, has_finding, nothing_false};
use karpenter_health_e2e::lab::{Lab, launched_instance_of};
use karpenter_health_e2e::wait_for;
use serde_json::json;
use std::time::Duration;

/// A launch, its registration and the scheduler binding the controller's Pod.
const SETTLE: Duration = Duration::from_secs(120);

fn warned(s: &KarpenterHealthStatus) -> bool {
    has_finding(s, "MetadataOutOfReach")
}

/// Waits until Karpenter has written a launch template for the test's class with hop limit
/// `hop_limit`; returns every such template's (HttpTokens, hop limit).
async fn launch_template_with(lab: &Lab, hop_limit: i32) -> Result<Vec<(String, i32)>> {
    wait_for(
        &format!("a launch template with hop limit {hop_limit}"),
        SETTLE,
        || async {
            let options = lab.fx.aws.launch_template_metadata(&lab.fx.name).await?;
            Ok(options
                .iter()
                .any(|(_, limit)| *limit == hop_limit)
                .then_some(options))
        },
    )
    .await
}

/// Waits for a registered NodeClaim of the test's NodePool and asserts what its instance runs
/// with, as EC2 describes it: IMDSv2 required, `hop_limit`, on `lifecycle` capacity.
async fn registered_instance_runs_with(lab: &Lab, hop_limit: i32, lifecycle: &str) -> Result<()> {
    let claim = lab.wait_node_claim("Registered", SETTLE).await?;
    let instance = lab
        .fx
        .aws
        .instance_metadata(&launched_instance_of(&claim)?)
        .await?;
    ensure!(
        instance == ("required".to_owned(), hop_limit, lifecycle.to_owned()),
        "the instance runs with {instance:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_load_balancer_controller_lands_where_karpenters_hop_limit_keeps_metadata_from_it()
-> Result<()> {
    let lab = Lab::start("lab-imds", "eu-west-1").await?;
    let outcome: Result<()> = async {
        let operator = lab.fx.start_operator(None, false).await?;
        lab.fx
            .install_load_balancer_controller(&lab.fx.name, &[])
            .await?;
        let status = lab
            .fx
            .wait_status("MetadataOutOfReach, nothing False", |s| {
                warned(s) && nothing_false(s) && s.conditions.iter().all(|c| c.reason != "Pending")
            })
            .await?;
        let warning = finding_message(&status, "MetadataOutOfReach");
        ensure!(
            warning.contains(&format!("NodePool {}", lab.fx.name))
                && warning.contains("httpPutResponseHopLimit: 1"),
            "{warning}"
        );

        // What the real Karpenter does: a node for the controller's Pod, launched with the
        // class's defaults, IMDSv2 required and the token's answer limited to one hop.
        let options = launch_template_with(&lab, 1).await?;
        ensure!(
            options.iter().all(|o| o == &("required".to_owned(), 1)),
            "Karpenter's launch templates: {options:?}"
        );
        // And the instance runs with them, as EC2 launches a fleet's instances from the template.
        registered_instance_runs_with(&lab, 1, "on-demand").await?;
        let node = wait_for("the controller's Pod bound", SETTLE, || async {
            lab.controller_pod_node().await
        })
        .await?;
        let status = lab.fx.wait_status("still warned", warned).await?;
        ensure!(
            nothing_false(&status),
            "a condition turned False: {status:?}"
        );

        // A controller that names its VPC needs no metadata, whatever the hop limit.
        lab.fx
            .install_load_balancer_controller(&lab.fx.name, &["--aws-vpc-id=vpc-0abc"])
            .await?;
        lab.fx
            .wait_status("no warning with --aws-vpc-id", |s| {
                !warned(s) && nothing_false(s)
            })
            .await?;

        // The healthy twin: the class lets the token's answer into Pods. The controller and its
        // node go first, so that Karpenter does not replace the node for drift meanwhile.
        lab.fx.remove_load_balancer_controller().await?;
        lab.delete_node_claims().await?;
        wait_for("the NodeClaims gone", SETTLE, || async {
            Ok(lab.node_claims().await?.is_empty().then_some(()))
        })
        .await?;
        lab.fx
            .patch_node_class_spec(json!({"metadataOptions": {"httpPutResponseHopLimit": 2}}))
            .await?;
        // On spot this time: EC2 launches a fleet's spot instances from the template as well.
        // The account has EC2's spot service-linked role, as one that ran spot before has (the
        // lab's Karpenter role may not create it: SpotReady would rightly be False).
        lab.fx.aws.ensure_spot_service_linked_role().await?;
        lab.spot_only().await?;
        lab.fx
            .install_load_balancer_controller(&lab.fx.name, &[])
            .await?;
        // Karpenter's node for the controller comes from a template with that limit.
        let options = launch_template_with(&lab, 2).await?;
        ensure!(
            options.contains(&("required".to_owned(), 2)),
            "Karpenter's launch templates: {options:?}"
        );
        registered_instance_runs_with(&lab, 2, "spot").await?;
        let twin_node = wait_for("the controller's Pod bound again", SETTLE, || async {
            lab.controller_pod_node().await
        })
        .await?;
        ensure!(twin_node != node, "the twin's Pod went back to {node}");
        let status = lab.fx.wait_healthy("with hop limit 2").await?;
        ensure!(!warned(&status), "still warned: {status:?}");
        operator.stop().await
    }
    .await;
    let cleanup = lab.fx.remove_load_balancer_controller().await;
    let role = lab.fx.aws.delete_spot_service_linked_role().await;
    lab.finish(outcome.and(cleanup).and(role)).await
}

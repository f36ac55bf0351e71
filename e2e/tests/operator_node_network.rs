//! Where nodes land, end to end (issue 12) on the real API server, moto and the fault proxy:
//! `SubnetsReady` (a zone out of addresses, the VPC CNI's warm target raising what a node takes,
//! a subnet in another VPC) and `NodeNetworkReady` (a private subnet without a NAT route, then
//! healthy through the VPC endpoints; VPC DNS off). Each scenario starts all True, breaks one
//! thing the way users break it, waits for exactly the expected condition and reason, repairs it
//! and waits for True again; scenarios of one kind share a seeded setup and an operator. And AWS
//! denying the new reads is Unknown with the cause, never False. Does IO (API server, moto, fault
//! proxy).

use anyhow::Result;
use k8s_openapi::api::apps::v1::DaemonSet;
use karpenter_health_api::{ConditionType, Reason};
use karpenter_health_e2e::apply_json;
use karpenter_health_e2e::fault_proxy::{Fault, FaultProxy};
use karpenter_health_e2e::fixture::{Fixture, REFRESH};
use karpenter_health_e2e::health_status::message;
use karpenter_health_e2e::status_log::StatusLog;
use kube::api::{Api, DeleteParams};
use serde_json::json;

const VERSION: &str = "1.8.6";

/// A kube-system/aws-node DaemonSet whose CNI keeps `warm_ips` addresses warm per node.
fn aws_node(warm_ips: u32) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "aws-node", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "aws-node"}},
            "template": {
                "metadata": {"labels": {"k8s-app": "aws-node"}},
                "spec": {"containers": [{
                    "name": "aws-node",
                    "image": "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.19.0",
                    "env": [
                        {"name": "WARM_ENI_TARGET", "value": "1"},
                        {"name": "WARM_IP_TARGET", "value": warm_ips.to_string()},
                    ],
                }]},
            },
        },
    })
}

async fn delete_aws_node(fx: &Fixture) -> Result<()> {
    match Api::<DaemonSet>::namespaced(fx.admin.clone(), "kube-system")
        .delete("aws-node", &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_zones_the_cni_warm_target_and_a_subnet_in_another_vpc_are_caught_before_a_launch()
-> Result<()> {
    let fx = Fixture::seed("subnets", "eu-west-1", VERSION).await?;
    let outcome: Result<()> = async {
        let subnet = fx.subnet.clone().expect("the fixture's subnet");
        // moto's DescribeCluster leaves the VPC out: the adapter derives it from the cluster's
        // own subnets.
        let operator = fx.start_operator(None, true).await?;
        let status = fx.wait_healthy("for the seeded subnets").await?;
        let text = message(&status, ConditionType::SubnetsReady);
        assert!(text.contains(&subnet), "{text}");

        // A /28 subnet (11 free addresses in moto, as in EC2) is all Karpenter launches into.
        let small = fx.aws.subnet(&fx.vpc, "10.40.2.0/28", None, &[]).await?;
        fx.aws
            .associate_route_table(&fx.route_table, &small)
            .await?;
        // At once: route tables are read with the subnet set they are asked for, so the new
        // subnet is never judged by an answer from before its association.
        fx.set_status_subnets(&[&small]).await?;
        let status = fx
            .wait_only_failed(ConditionType::SubnetsReady, Reason::SubnetsOutOfAddresses)
            .await?;
        let text = message(&status, ConditionType::SubnetsReady);
        assert!(
            text.contains(&small) && text.contains("at most 11 free") && text.contains("16"),
            "{text}"
        );
        fx.set_status_subnets(&[&subnet]).await?;
        fx.wait_healthy("with the roomy subnet back").await?;

        // The VPC CNI keeps 400 addresses warm: a node takes 401, more than the /24 has free.
        apply_json(&fx.admin, &[aws_node(400)]).await?;
        let status = fx
            .wait_only_failed(ConditionType::SubnetsReady, Reason::SubnetsOutOfAddresses)
            .await?;
        let text = message(&status, ConditionType::SubnetsReady);
        assert!(text.contains("401") && text.contains(&subnet), "{text}");
        apply_json(&fx.admin, &[aws_node(10)]).await?;
        fx.wait_healthy("with WARM_IP_TARGET=10").await?;
        delete_aws_node(&fx).await?;

        // A subnet of another VPC, healthy in itself, is selected as well (#9090).
        let other_vpc = fx.aws.vpc("10.43.0.0/16", &[]).await?;
        let other_public = fx.aws.subnet(&other_vpc, "10.43.0.0/24", None, &[]).await?;
        let other = fx.aws.subnet(&other_vpc, "10.43.1.0/24", None, &[]).await?;
        fx.aws.nat_egress(&other_vpc, &other_public, &other).await?;
        fx.aws.enable_vpc_dns(&other_vpc, true).await?;
        fx.set_status_subnets(&[&subnet, &other]).await?;
        let status = fx
            .wait_only_failed(ConditionType::SubnetsReady, Reason::SubnetInOtherVpc)
            .await?;
        let text = message(&status, ConditionType::SubnetsReady);
        assert!(
            text.contains(&other) && text.contains(&other_vpc) && text.contains(&fx.vpc),
            "names the subnet and both VPCs: {text}"
        );
        fx.set_status_subnets(&[&subnet]).await?;
        fx.wait_healthy("with the other VPC's subnet deselected")
            .await?;
        operator.stop().await
    }
    .await;
    let cleanup = delete_aws_node(&fx).await;
    fx.finish(outcome.and(cleanup)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_subnet_without_a_nat_route_fails_until_the_vpc_endpoints_exist() -> Result<()> {
    let fx = Fixture::seed("egress", "eu-west-2", VERSION).await?;
    let outcome: Result<()> = async {
        let subnet = fx.subnet.clone().expect("the fixture's subnet");
        let operator = fx.start_operator(None, true).await?;
        fx.wait_healthy("behind the NAT gateway").await?;

        // The NAT route is removed and there are no endpoints (#1157, #6550).
        fx.aws.delete_default_route(&fx.route_table).await?;
        let status = fx
            .wait_only_failed(ConditionType::NodeNetworkReady, Reason::SubnetNoEgressRoute)
            .await?;
        let text = message(&status, ConditionType::NodeNetworkReady);
        assert!(
            text.contains(&subnet)
                && text.contains(&fx.route_table)
                && text.contains("ecr.dkr")
                && text.contains("s3"),
            "names the subnet, its route table and the endpoints: {text}"
        );

        // The same subnet with the endpoints of a private cluster: healthy without a NAT route.
        let endpoints = fx
            .aws
            .private_cluster_endpoints(&fx.vpc, &subnet, &fx.route_table)
            .await?;
        let status = fx.wait_healthy("with the VPC endpoints").await?;
        let text = message(&status, ConditionType::NodeNetworkReady);
        assert!(text.contains(&subnet), "{text}");

        // VPC DNS host names off.
        fx.aws.enable_vpc_dns(&fx.vpc, false).await?;
        let status = fx
            .wait_only_failed(ConditionType::NodeNetworkReady, Reason::VpcDnsDisabled)
            .await?;
        let text = message(&status, ConditionType::NodeNetworkReady);
        assert!(
            text.contains(&fx.vpc) && text.contains("enableDnsHostnames"),
            "{text}"
        );
        fx.aws.enable_vpc_dns(&fx.vpc, true).await?;
        fx.wait_healthy("with VPC DNS on again").await?;
        fx.aws.delete_vpc_endpoints(&endpoints).await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_denying_the_network_reads_is_unknown_with_the_cause_never_false() -> Result<()> {
    let fx = Fixture::seed("netdeny", "eu-west-3", VERSION).await?;
    let outcome: Result<()> = async {
        let proxy = FaultProxy::start(fx.bed.moto_url()?).await?;
        let operator = fx.start_operator(Some(&proxy.url()), true).await?;
        fx.wait_healthy("before AWS denies anything").await?;
        assert!(proxy.count("ec2", "DescribeRouteTables") > 0);

        let log = StatusLog::start(&fx.admin, &fx.name);
        for op in [
            "DescribeRouteTables",
            "DescribeNatGateways",
            "DescribeVpcEndpoints",
            "DescribeVpcAttribute",
        ] {
            proxy.inject("ec2", Some(op), Fault::AccessDenied);
        }
        fx.wait_status("NodeNetworkReady Unknown with AwsAccessDenied", |s| {
            s.condition(ConditionType::NodeNetworkReady)
                .is_some_and(|c| c.status == "Unknown" && c.reason == "AwsAccessDenied")
        })
        .await?;
        proxy.inject("ec2", Some("DescribeSubnets"), Fault::AccessDenied);
        let status = fx
            .wait_status(
                "both network conditions Unknown with AwsAccessDenied",
                |s| {
                    [ConditionType::SubnetsReady, ConditionType::NodeNetworkReady]
                        .into_iter()
                        .all(|ty| {
                            s.condition(ty).is_some_and(|c| {
                                c.status == "Unknown" && c.reason == "AwsAccessDenied"
                            })
                        })
                },
            )
            .await?;
        let text = message(&status, ConditionType::SubnetsReady);
        assert!(text.contains("DescribeSubnets"), "names the call: {text}");
        tokio::time::sleep(REFRESH * 2).await;
        proxy.clear_faults();
        fx.wait_healthy("once AWS answers again").await?;
        for held in log.stop() {
            for c in held.conditions.iter().filter(|c| c.type_ != "Ready") {
                assert!(
                    c.status != "False",
                    "False while AWS denied the reads: {c:?}"
                );
            }
        }
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

//! Where nodes land, end to end (issues 12 and 22) on the real API server, moto and the fault
//! proxy: `SubnetsReady` (a zone short of the VPC CNI's warm pool is a warning; one that cannot
//! fit a node and one Pod fails; custom networking needs one address; a subnet in another VPC)
//! and `NodeNetworkReady` (a private subnet without a NAT route, then healthy through the VPC
//! endpoints, then through an inspection endpoint; VPC DNS off). Each scenario starts all True, breaks one
//! thing the way users break it, waits for exactly the expected condition and reason, repairs it
//! and waits for True again; scenarios of one kind share a seeded setup and an operator. And AWS
//! denying the new reads is Unknown with the cause, never False. Does IO (API server, moto, fault
//! proxy).
//!
//! Karpenter's state is written by hand here, not produced by the lab's real controller: moto
//! launches whatever the network, so the lab cannot show a node that cannot reach AWS.

use anyhow::Result;
use karpenter_health_api::{ConditionType, Reason};
use karpenter_health_e2e::fault_proxy::{Fault, FaultProxy};
use karpenter_health_e2e::fixture::{Fixture, REFRESH};
use karpenter_health_e2e::health_status::{finding_message, message};
use karpenter_health_e2e::status_log::StatusLog;

const VERSION: &str = "1.8.6";

/// Whether SubnetsReady is True and a warning finding says a zone is short of addresses.
fn short_of_the_warm_pool(s: &karpenter_health_api::KarpenterHealthStatus) -> bool {
    s.condition(ConditionType::SubnetsReady)
        .is_some_and(|c| c.status == "True")
        && s.findings
            .iter()
            .any(|f| f.reason == "ZoneSubnetsLowOnAddresses")
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

        // A /28 subnet (11 free addresses in moto, as in EC2) is all Karpenter launches into,
        // with the VPC CNI in its default mode: short of a warm pool (16 assumed), but a node and
        // its Pods' first addresses fit, so it is a warning, never False (issue 22).
        fx.install_aws_node(&[("WARM_ENI_TARGET", "1")]).await?;
        let small = fx.aws.subnet(&fx.vpc, "10.40.2.0/28", None, &[]).await?;
        fx.aws
            .associate_route_table(&fx.route_table, &small)
            .await?;
        let log = StatusLog::start(&fx.admin, &fx.name);
        // At once: route tables are read with the subnet set they are asked for, so the new
        // subnet is never judged by an answer from before its association.
        fx.set_status_subnets(&[&small]).await?;
        let status = fx
            .wait_status("a warning for the /28 short of the warm pool", |s| {
                short_of_the_warm_pool(s)
                    && message(s, ConditionType::SubnetsReady).contains(&small)
            })
            .await?;
        let warning = finding_message(&status, "ZoneSubnetsLowOnAddresses");
        assert!(warning.contains("at most 11 free"), "{warning}");
        // The VPC CNI keeps 400 addresses warm on the roomy /24: a warning too.
        fx.set_status_subnets(&[&subnet]).await?;
        fx.install_aws_node(&[("WARM_IP_TARGET", "400")]).await?;
        let status = fx
            .wait_status("a warning for WARM_IP_TARGET=400", |s| {
                short_of_the_warm_pool(s) && s.findings.iter().any(|f| f.message.contains("401"))
            })
            .await?;
        assert!(message(&status, ConditionType::SubnetsReady).contains(&subnet));
        log.assert_never_false(ConditionType::SubnetsReady).await;

        // Other workloads' ENIs take all but one address of the /28: a node and one Pod no
        // longer fit where Pods take addresses from the node's subnet.
        fx.install_aws_node(&[("WARM_ENI_TARGET", "1")]).await?;
        let enis = fx.aws.fill_subnet(&small, 1).await?;
        fx.set_status_subnets(&[&small]).await?;
        let status = fx
            .wait_only_failed(ConditionType::SubnetsReady, Reason::SubnetsOutOfAddresses)
            .await?;
        let text = message(&status, ConditionType::SubnetsReady);
        assert!(
            text.contains(&small)
                && text.contains("at most 1 free")
                && text.contains("2 addresses"),
            "{text}"
        );
        // With custom networking the Pods' addresses come from ENIConfig subnets: the node's
        // own address fits.
        fx.install_aws_node(&[("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "true")])
            .await?;
        fx.wait_healthy("with custom networking on the nearly full /28")
            .await?;
        fx.aws.delete_network_interfaces(&enis).await?;
        fx.set_status_subnets(&[&subnet]).await?;
        fx.wait_healthy("with the roomy subnet back").await?;
        fx.remove_aws_node().await?;

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
    let cleanup = fx.remove_aws_node().await;
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

        // Egress through an inspection endpoint (a Gateway Load Balancer endpoint as the default
        // route's target) and no VPC endpoints: the path is not followed, never False. The
        // route comes before the endpoints go, so the setup is never broken while the log runs
        // (the other order left a real moment with neither, which the operator may rightly
        // catch as False: it did once its AWS answers were refreshed behind the reconciles).
        let log = StatusLog::start(&fx.admin, &fx.name);
        let inspection = fx.aws.inspection_endpoint(&fx.vpc, &subnet).await?;
        fx.aws
            .default_route_to_endpoint(&fx.route_table, &inspection)
            .await?;
        fx.aws.delete_vpc_endpoints(&endpoints).await?;
        let status = fx
            .wait_status(
                "NodeNetworkReady True, not inspected beyond the endpoint",
                |s| {
                    s.condition(ConditionType::NodeNetworkReady)
                        .is_some_and(|c| c.reason == "NodeEgressNotInspected")
                },
            )
            .await?;
        let text = message(&status, ConditionType::NodeNetworkReady);
        assert!(text.contains(&inspection), "names the endpoint: {text}");
        log.assert_never_false(ConditionType::NodeNetworkReady)
            .await;
        fx.aws.delete_default_route(&fx.route_table).await?;
        let endpoints = fx
            .aws
            .private_cluster_endpoints(&fx.vpc, &subnet, &fx.route_table)
            .await?;
        fx.wait_healthy("with the VPC endpoints again").await?;

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
        for held in log.stop().await {
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

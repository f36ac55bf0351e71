//! The operator end to end on the real kube-apiserver and moto, one test per failure users hit:
//! each starts from a healthy seeded setup (every condition True, see
//! `karpenter_health_e2e::fixture`), breaks one thing the way users break it, waits for exactly
//! the expected condition and reason, repairs it and waits for True again. The operator runs
//! in-process as the bed's non-admin user, bound to the roles shipped in deploy/rbac.yaml, so
//! those roles are proven sufficient (`rbac` proves them minimal; `resilience`
//! covers AWS outages and API server restarts). Does IO (API server, moto).
//!
//! Isolation on the shared bed: every test has its own EC2/EKS region, unique IAM and cluster
//! names, its own namespace holding its Karpenter Deployment and ServiceAccount (the operator's
//! `--karpenter-namespace`), and prefixed cluster-scoped objects, all removed at the end. The
//! singleton kube-system/aws-auth is shared: a test adds its own entries and removes them again.
//!
//! Karpenter's state is written by hand here, not produced by the lab's real controller: the
//! classic failures against the real controller are in the lab's `classic_failures`; here each verdict is
//! driven through Karpenter releases (0.37 to 1.9) the lab cannot build and states it cannot age
//! (15-minute registrations).

use anyhow::Result;
use k8s_openapi::jiff::SignedDuration;
use karpenter_health_api::karpenter::NodeClaim;
use karpenter_health_api::{ConditionType, Reason};
use karpenter_health_e2e::fault_proxy::FaultProxy;
use karpenter_health_e2e::fixture::{Fixture, REFRESH, rfc3339_ago};
use karpenter_health_e2e::health_status::{assert_only_failed, finding_names, message};
use karpenter_health_e2e::names::unique;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_profile_arn_fails_the_profile_check_and_karpenters_stuck_validation_is_named()
-> Result<()> {
    let fx = Fixture::seed("arn", "us-west-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        fx.wait_healthy("for the seeded setup").await?;

        // The user pastes the profile's ARN where Karpenter wants its name.
        fx.patch_node_class_spec(json!({"instanceProfile": fx.profile_arn}))
            .await?;
        let status = fx
            .wait_only_failed(
                ConditionType::InstanceProfileReady,
                Reason::InstanceProfileIsArn,
            )
            .await?;
        let text = message(&status, ConditionType::InstanceProfileReady);
        assert!(
            text.contains(&fx.profile_arn) && text.contains(&format!("{:?}", fx.profile)),
            "names the ARN and the name to use instead: {text}"
        );

        // Karpenter then reports the profile ready while validation never concludes.
        let long = SignedDuration::from_mins(45);
        let now = SignedDuration::ZERO;
        fx.write_karpenter_status(&[
            ("InstanceProfileReady", "True", "InstanceProfileReady", now),
            (
                "ValidationSucceeded",
                "Unknown",
                "AwaitingReconciliation",
                long,
            ),
            ("Ready", "Unknown", "UnhealthyDependents", long),
        ])
        .await?;
        let status = fx
            .wait_failed(&[
                (
                    ConditionType::InstanceProfileReady,
                    Reason::InstanceProfileIsArn,
                ),
                (
                    ConditionType::KarpenterStatusConsistent,
                    Reason::ValidationStuck,
                ),
            ])
            .await?;
        assert_only_failed(
            &status,
            &[
                ConditionType::InstanceProfileReady,
                ConditionType::KarpenterStatusConsistent,
            ],
        );
        let stuck = message(&status, ConditionType::KarpenterStatusConsistent);
        assert!(stuck.contains("spec.instanceProfile is an ARN"), "{stuck}");
        // An absolute time (45 minutes before the write), never an age that would change the
        // message at every evaluation.
        let since: jiff::Timestamp = stuck
            .split("ValidationSucceeded has been Unknown since ")
            .nth(1)
            .and_then(|rest| rest.split([' ', ',']).next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no absolute time in {stuck}"));
        let age = jiff::Timestamp::now().duration_since(since);
        assert!(
            (SignedDuration::from_mins(44)..SignedDuration::from_mins(47)).contains(&age),
            "{stuck}"
        );
        assert!(
            message(&status, ConditionType::InstanceProfileReady)
                .contains("although Karpenter reports InstanceProfileReady=True"),
            "{}",
            message(&status, ConditionType::InstanceProfileReady)
        );

        // The fix: the name again, and Karpenter validates.
        fx.patch_node_class_spec(json!({"instanceProfile": fx.profile}))
            .await?;
        fx.karpenter_reports_ready().await?;
        fx.wait_healthy("after the profile name is restored")
            .await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_role_mapped_instead_of_the_node_role_and_the_nodeclaim_stuck_unregistered_are_named()
-> Result<()> {
    let fx = Fixture::seed("map", "eu-west-1", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        let long_ago = rfc3339_ago(SignedDuration::from_mins(40));
        let registered = fx
            .node_claim(
                "registered",
                "aws:///eu-west-1a/i-0aaaaaaaaaaaaaaa1",
                json!([
                    {"type": "Launched", "status": "True", "reason": "Launched", "lastTransitionTime": long_ago},
                    {"type": "Registered", "status": "True", "reason": "Registered", "lastTransitionTime": long_ago},
                ]),
            )
            .await?;
        let status = fx.wait_healthy("with a registered NodeClaim").await?;
        assert!(
            message(&status, ConditionType::NodeClaimsRegistered).contains("None of the 1 NodeClaim"),
            "{}",
            message(&status, ConditionType::NodeClaimsRegistered)
        );

        // aws-auth gets the controller's role where the node role belongs, and the next node
        // launches but never joins.
        fx.map_roles(&[&fx.controller_role_arn]).await?;
        let stuck = fx
            .node_claim(
                "stuck",
                "aws:///eu-west-1a/i-0bbbbbbbbbbbbbbb2",
                json!([
                    {"type": "Launched", "status": "True", "reason": "Launched", "lastTransitionTime": rfc3339_ago(SignedDuration::from_mins(20))},
                    {"type": "Registered", "status": "Unknown", "reason": "NodeNotFound", "message": "Node not registered with cluster", "lastTransitionTime": rfc3339_ago(SignedDuration::from_mins(20))},
                ]),
            )
            .await?;
        let status = fx
            .wait_failed(&[
                (ConditionType::NodeRoleMapped, Reason::ControllerRoleMappedInstead),
                (ConditionType::NodeClaimsRegistered, Reason::NodeClaimsNotRegistering),
            ])
            .await?;
        assert_only_failed(
            &status,
            &[ConditionType::NodeRoleMapped, ConditionType::NodeClaimsRegistered],
        );
        let mapped = message(&status, ConditionType::NodeRoleMapped);
        assert!(
            mapped.contains(&fx.controller_role_arn) && mapped.contains(&fx.node_role_arn),
            "{mapped}"
        );
        let registration = message(&status, ConditionType::NodeClaimsRegistered);
        assert!(
            registration.contains(&stuck)
                && !registration.contains(&registered)
                && registration.contains("NodeRoleMapped=False (ControllerRoleMappedInstead)"),
            "names the stuck NodeClaim and the likely cause: {registration}"
        );
        assert!(finding_names(&status, ConditionType::NodeClaimsRegistered, "NodeClaim", &stuck));
        assert!(finding_names(&status, ConditionType::NodeRoleMapped, "ConfigMap", "aws-auth"));

        // The fix: map the node role; the waiting node then registers.
        fx.map_roles(&[&fx.node_role_arn]).await?;
        Api::<NodeClaim>::all(fx.admin.clone())
            .patch_status(
                &stuck,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": [
                    {"type": "Launched", "status": "True", "reason": "Launched", "lastTransitionTime": rfc3339_ago(SignedDuration::from_mins(21))},
                    {"type": "Registered", "status": "True", "reason": "Registered", "lastTransitionTime": rfc3339_ago(SignedDuration::ZERO)},
                ]}})),
            )
            .await?;
        fx.wait_healthy("after the node role is mapped and the node registered")
            .await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_pod_selecting_a_node_role_label_is_named_while_the_installed_crds_restrict_it()
-> Result<()> {
    let fx = Fixture::seed("labels", "eu-west-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        fx.wait_healthy("under Karpenter 1.8.6").await?;

        // A workload asks for nodes labelled node-role.kubernetes.io/web; it stays Pending.
        // For a scheduler the bed does not run: until a scheduler judges it, the Pod is not one
        // Karpenter provisions for, and nothing is judged. The test then writes that verdict.
        let pods = fx
            .unjudged_pod(
                "web",
                json!({"node-role.kubernetes.io/web": "", "karpenter.sh/nodepool": fx.name}),
            )
            .await?;
        tokio::time::sleep(REFRESH * 2).await;
        // A Pending Pod without PodScheduled=False/Unschedulable must not count.
        fx.wait_healthy("while the scheduler has not judged the Pod")
            .await?;
        fx.mark_unschedulable("web").await?;
        let status = fx
            .wait_only_failed(ConditionType::LabelsAllowed, Reason::RestrictedLabelDomain)
            .await?;
        let text = message(&status, ConditionType::LabelsAllowed);
        // The bed's API server (1.34) keeps and enforces the CRDs' CEL rules, so the operator
        // reads the restriction from the installed CRD rather than from the controller version.
        assert!(
            text.contains(&format!("{}/web", fx.name))
                && text.contains("node-role.kubernetes.io/web")
                && text.contains("installed NodePool CRD rejects"),
            "names the Pod, the key and where the rule comes from: {text}"
        );
        assert!(finding_names(
            &status,
            ConditionType::LabelsAllowed,
            "Pod",
            "web"
        ));

        // Karpenter 1.9 accepts the label, but only with its own CRDs: a controller upgraded
        // without them still has every NodeClaim with the key refused by the old CRD's rule.
        fx.set_karpenter_version("1.9.0").await?;
        tokio::time::sleep(REFRESH * 2).await;
        let status = fx
            .wait_only_failed(ConditionType::LabelsAllowed, Reason::RestrictedLabelDomain)
            .await?;
        assert!(
            message(&status, ConditionType::LabelsAllowed).contains("installed NodePool CRD"),
            "{}",
            message(&status, ConditionType::LabelsAllowed)
        );
        let pending = pods.get("web").await?;
        assert_eq!(
            pending.status.and_then(|s| s.phase).as_deref(),
            Some("Pending")
        );
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_cluster_of_the_same_name_and_a_security_group_of_another_cluster_are_caught()
-> Result<()> {
    let fx = Fixture::seed("identity", "eu-central-1", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        fx.wait_healthy("for the seeded setup").await?;

        // A second cluster, created from the same template, runs Karpenter nodes with this
        // cluster's name in its own VPC.
        let other_vpc = fx.aws.vpc("10.41.0.0/16", &[]).await?;
        let other_subnet = fx.aws.subnet(&other_vpc, "10.41.1.0/24", None, &[]).await?;
        let cluster_tag = format!("kubernetes.io/cluster/{}", fx.cluster);
        let foreign = fx
            .aws
            .instances(
                &other_subnet,
                2,
                &[
                    (cluster_tag.as_str(), "owned"),
                    ("eks:eks-cluster-name", fx.cluster.as_str()),
                    ("karpenter.sh/nodepool", "default"),
                ],
            )
            .await?;
        let status = fx
            .wait_only_failed(
                ConditionType::ClusterIdentityUnique,
                Reason::ClusterNameSharedWithOtherCluster,
            )
            .await?;
        let text = message(&status, ConditionType::ClusterIdentityUnique);
        for id in &foreign {
            assert!(
                text.contains(id.as_str()) && text.contains(&other_vpc),
                "{text}"
            );
            assert!(finding_names(
                &status,
                ConditionType::ClusterIdentityUnique,
                "EC2Instance",
                id
            ));
        }
        fx.aws.terminate(&foreign).await?;
        fx.wait_healthy("after the other cluster's instances are gone")
            .await?;

        // A selector term added for a shared group picks a group tagged for another cluster.
        let team = unique("shared");
        let other_cluster = format!("{}-other", fx.cluster);
        let shared = fx
            .aws
            .security_group(
                &fx.vpc,
                &team,
                &[
                    ("team", &team),
                    (&format!("kubernetes.io/cluster/{other_cluster}"), "owned"),
                ],
            )
            .await?;
        let own_term = json!({"tags": {"karpenter.sh/discovery": fx.cluster}});
        fx.patch_node_class_spec(
            json!({"securityGroupSelectorTerms": [own_term, {"tags": {"team": team}}]}),
        )
        .await?;
        let status = fx
            .wait_only_failed(
                ConditionType::SecurityGroupsReady,
                Reason::SecurityGroupTaggedForOtherCluster,
            )
            .await?;
        let text = message(&status, ConditionType::SecurityGroupsReady);
        assert!(
            text.contains(&shared) && text.contains(&other_cluster),
            "{text}"
        );
        assert!(finding_names(
            &status,
            ConditionType::SecurityGroupsReady,
            "SecurityGroup",
            &shared
        ));

        fx.patch_node_class_spec(json!({"securityGroupSelectorTerms": [own_term]}))
            .await?;
        fx.wait_healthy("after the shared group's term is removed")
            .await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn karpenter_before_1_7_in_an_isolated_region_fails_metadata_options_and_1_7_passes()
-> Result<()> {
    let fx = Fixture::seed("iso", "us-iso-east-1", "1.7.0").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        let status = fx
            .wait_healthy("under Karpenter 1.7.0 in us-iso-east-1")
            .await?;
        assert!(
            message(&status, ConditionType::MetadataOptionsSupported)
                .contains("no longer sends httpProtocolIPv6 in us-iso-east-1"),
            "{}",
            message(&status, ConditionType::MetadataOptionsSupported)
        );

        // Rolled back to a release that still sends httpProtocolIPv6.
        fx.set_karpenter_version("1.0.1").await?;
        let status = fx
            .wait_only_failed(
                ConditionType::MetadataOptionsSupported,
                Reason::HttpProtocolIPv6UnsupportedInRegion,
            )
            .await?;
        let text = message(&status, ConditionType::MetadataOptionsSupported);
        assert!(
            text.contains("us-iso-east-1") && text.contains("1.0.1") && text.contains("1.7.0"),
            "{text}"
        );

        fx.set_karpenter_version("1.7.0").await?;
        fx.wait_healthy("after upgrading to 1.7.0 again").await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selected_security_group_in_another_vpc_is_caught_before_any_launch_fails() -> Result<()>
{
    let fx = Fixture::seed("sgvpc", "eu-north-1", "1.8.6").await?;
    let outcome: Result<()> = async {
        // moto's DescribeCluster leaves the VPC out; the proxy adds it as EKS answers.
        let proxy = FaultProxy::start(fx.bed.moto_url()?).await?;
        proxy.set_cluster_vpc(&fx.cluster, &fx.vpc);
        let operator = fx.start_operator(Some(&proxy.url()), true).await?;
        fx.wait_healthy("with the cluster's VPC known").await?;

        // A group of another VPC carries the discovery tag the selector matches.
        let other_vpc = fx.aws.vpc("10.42.0.0/16", &[]).await?;
        let stray = fx
            .aws
            .security_group(
                &other_vpc,
                &format!("{}-stray", fx.cluster),
                &[("karpenter.sh/discovery", fx.cluster.as_str())],
            )
            .await?;
        let status = fx
            .wait_only_failed(
                ConditionType::SecurityGroupsReady,
                Reason::SecurityGroupInOtherVpc,
            )
            .await?;
        let text = message(&status, ConditionType::SecurityGroupsReady);
        assert!(
            text.contains(&stray) && text.contains(&other_vpc) && text.contains(&fx.vpc),
            "names the group and both VPCs: {text}"
        );

        fx.aws.delete_security_group(&stray).await?;
        fx.wait_healthy("after the stray group is gone").await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

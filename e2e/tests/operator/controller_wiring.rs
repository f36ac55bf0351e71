//! The Karpenter controller's own wiring end to end (issue 11) on the real API server, moto and
//! the fault proxy, which serves IAM's policy simulator from the roles' policies in moto: each
//! scenario starts all True, breaks one thing the way users break it, waits for exactly the
//! expected condition and reason, repairs it and waits for True again. Scenarios of one kind
//! share a seeded setup and an operator (they run one after another, each repaired before the
//! next), so the per-reason runs cost one bed and one operator per test. Does IO (API server,
//! moto, fault proxy).
//!
//! Karpenter's state is written by hand here, not produced by the lab's real controller: moto
//! enforces no IAM policy, so the real controller is never refused; the verdicts are proven against
//! the gap proxy's IAM simulator.

use anyhow::Result;
use k8s_openapi::api::core::v1::ServiceAccount;
use karpenter_health_api::{ConditionType, Reason};
use karpenter_health_e2e::aws_seed::{
    INTERRUPTION_RULES, interruption_queue_policy, partition_and_account,
};
use karpenter_health_e2e::fault_proxy::{Fault, FaultProxy, PodIdentityAssociation};
use karpenter_health_e2e::fixture::{
    CONTROLLER_POLICY, Fixture, REFRESH, controller_policy, irsa_trust, without_statement,
};
use karpenter_health_e2e::health_status::message;
use karpenter_health_e2e::status_log::StatusLog;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

const VERSION: &str = "1.8.6";

/// Puts the controller policy `good` without its statement `sid`, waits for ControllerCanLaunch
/// to fail with `reason` alone, puts `good` back and waits for every condition True, whose
/// ControllerCanLaunch message must say it verified `action`. Returns the failed message.
async fn without_then_with(
    fx: &Fixture,
    good: &str,
    sid: &str,
    reason: Reason,
    action: &str,
) -> Result<String> {
    fx.aws
        .put_role_policy(
            &fx.controller_role,
            CONTROLLER_POLICY,
            &without_statement(good, sid),
        )
        .await?;
    let status = fx
        .wait_only_failed(ConditionType::ControllerCanLaunch, reason)
        .await?;
    let failed = message(&status, ConditionType::ControllerCanLaunch);
    fx.aws
        .put_role_policy(&fx.controller_role, CONTROLLER_POLICY, good)
        .await?;
    let status = fx.wait_healthy(&format!("with {sid} again")).await?;
    let text = message(&status, ConditionType::ControllerCanLaunch);
    assert!(text.contains(action), "{text}");
    Ok(failed.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_role_its_pass_role_its_irsa_and_pod_identity_trust_and_the_oidc_provider_are_checked()
-> Result<()> {
    let fx = Fixture::seed("ctl", "eu-north-1", VERSION).await?;
    let outcome: Result<()> = async {
        let proxy = FaultProxy::start(fx.bed.moto_url()?).await?;
        proxy.serve_simulator();
        let operator = fx.start_operator(Some(&proxy.url()), true).await?;
        let status = fx.wait_healthy("for the seeded controller").await?;
        let text = message(&status, ConditionType::ControllerCanLaunch);
        assert!(text.contains("IAM's policy simulator"), "{text}");
        assert!(proxy.count("iam", "SimulatePrincipalPolicy") > 0);

        // PassRole granted on another role only (#6659: the controller role named instead).
        let (partition, account) = partition_and_account(&fx.node_role_arn);
        let other = format!("arn:{partition}:iam::{account}:role/SomeOtherRole");
        let good_policy = controller_policy(&fx.cluster, &fx.node_role_arn);
        fx.aws
            .put_role_policy(
                &fx.controller_role,
                CONTROLLER_POLICY,
                &controller_policy(&fx.cluster, &other),
            )
            .await?;
        let status = fx
            .wait_only_failed(
                ConditionType::ControllerCanLaunch,
                Reason::ControllerCannotPassNodeRole,
            )
            .await?;
        let text = message(&status, ConditionType::ControllerCanLaunch);
        assert!(
            text.contains(&fx.node_role_arn) && text.contains("iam:PassRole"),
            "{text}"
        );
        fx.aws
            .put_role_policy(&fx.controller_role, CONTROLLER_POLICY, &good_policy)
            .await?;
        fx.wait_healthy("after PassRole is granted again").await?;

        // PassRole granted on the node role's name under another IAM path.
        let name = fx.node_role_arn.rsplit('/').next().unwrap_or_default();
        let with_path = format!("arn:{partition}:iam::{account}:role/nodes/{name}");
        fx.aws
            .put_role_policy(
                &fx.controller_role,
                CONTROLLER_POLICY,
                &controller_policy(&fx.cluster, &with_path),
            )
            .await?;
        fx.wait_failed(&[(
            ConditionType::ControllerCanLaunch,
            Reason::ControllerCannotPassNodeRole,
        )])
        .await?;
        fx.aws
            .put_role_policy(&fx.controller_role, CONTROLLER_POLICY, &good_policy)
            .await?;
        fx.wait_healthy("after PassRole names the role's real path")
            .await?;

        // The policy lacks Karpenter's AllowSSMReadActions: the class's alias cannot resolve.
        let text = without_then_with(
            &fx,
            &good_policy,
            "AllowSSMReadActions",
            Reason::ControllerCannotReadAmiParameters,
            "ssm:GetParameter",
        )
        .await?;
        assert!(
            text.contains("ssm:GetParameter")
                && text.contains("parameter/aws/service/eks/optimized-ami/"),
            "{text}"
        );
        // Without Karpenter's AllowRegionalReadActions no image of any class resolves.
        let text = without_then_with(
            &fx,
            &good_policy,
            "AllowRegionalReadActions",
            Reason::ControllerCannotDescribeImages,
            "ec2:DescribeImages",
        )
        .await?;
        assert!(text.contains("ec2:DescribeImages on *"), "{text}");

        // The IRSA trust names another ServiceAccount (Karpenter moved to its own namespace).
        let good_trust = irsa_trust(&fx.oidc_provider_arn, &fx.issuer_host_path, &fx.name);
        fx.aws
            .set_trust(
                &fx.controller_role,
                &irsa_trust(&fx.oidc_provider_arn, &fx.issuer_host_path, "karpenter"),
            )
            .await?;
        let status = fx
            .wait_failed(&[(
                ConditionType::ControllerCanLaunch,
                Reason::ControllerTrustMismatch,
            )])
            .await?;
        let text = message(&status, ConditionType::ControllerCanLaunch);
        assert!(
            text.contains("system:serviceaccount:karpenter:karpenter"),
            "{text}"
        );
        fx.aws.set_trust(&fx.controller_role, &good_trust).await?;
        fx.wait_healthy("after the trust names the ServiceAccount again")
            .await?;

        // The cluster's OIDC provider is missing from IAM.
        fx.aws.delete_oidc_provider(&fx.oidc_provider_arn).await?;
        fx.wait_failed(&[(
            ConditionType::ControllerCanLaunch,
            Reason::OidcProviderMissing,
        )])
        .await?;
        let recreated = fx
            .aws
            .oidc_provider(&format!("https://{}", fx.issuer_host_path))
            .await?;
        assert_eq!(recreated, fx.oidc_provider_arn);
        fx.wait_healthy("after the OIDC provider is created again")
            .await?;

        // The controller moves to EKS Pod Identity (no IRSA annotation, an association for its
        // ServiceAccount) with a trust that lacks sts:TagSession, which Pod Identity needs.
        proxy.set_pod_identity(
            &fx.cluster,
            vec![PodIdentityAssociation {
                namespace: fx.name.clone(),
                service_account: "karpenter".into(),
                id: "a-controller".into(),
                role_arn: fx.controller_role_arn.clone(),
                target_role_arn: None,
            }],
        );
        fx.aws
            .set_trust(
                &fx.controller_role,
                &pod_identity_trust(&["sts:AssumeRole"]),
            )
            .await?;
        let accounts: Api<ServiceAccount> = Api::namespaced(fx.admin.clone(), &fx.name);
        accounts
            .patch(
                "karpenter",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {"eks.amazonaws.com/role-arn": null}}}),
                ),
            )
            .await?;
        let status = fx
            .wait_only_failed(
                ConditionType::ControllerCanLaunch,
                Reason::PodIdentityTrustMissing,
            )
            .await?;
        let text = message(&status, ConditionType::ControllerCanLaunch);
        assert!(text.contains("sts:TagSession"), "{text}");
        fx.aws
            .set_trust(
                &fx.controller_role,
                &pod_identity_trust(&["sts:AssumeRole", "sts:TagSession"]),
            )
            .await?;
        let status = fx
            .wait_healthy("after the trust admits Pod Identity with sts:TagSession")
            .await?;
        let text = message(&status, ConditionType::ControllerCanLaunch);
        assert!(text.contains("EKS Pod Identity"), "{text}");
        assert!(proxy.count("eks", "ListPodIdentityAssociations") > 0);
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

/// A trust policy admitting EKS Pod Identity's service principal to `actions`.
fn pod_identity_trust(actions: &[&str]) -> String {
    json!({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow",
        "Principal": {"Service": "pods.eks.amazonaws.com"},
        "Action": actions,
    }]})
    .to_string()
}

/// Karpenter's queue, policy and rules for `fx`; returns the queue's name and ARN.
async fn interruption_queue(fx: &Fixture) -> Result<(String, String)> {
    let name = fx.cluster.clone();
    let arn = fx.aws.interruption_queue(&name).await?;
    let (_, account) = partition_and_account(&fx.node_role_arn);
    assert_eq!(arn, format!("arn:aws:sqs:{}:{account}:{name}", fx.region));
    Ok((name, arn))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_interruption_queue_its_name_policy_and_rules_and_the_spot_service_linked_role_are_checked()
-> Result<()> {
    let fx = Fixture::seed("irq", "eu-south-1", VERSION).await?;
    let outcome: Result<()> = async {
        let (queue, arn) = interruption_queue(&fx).await?;
        fx.set_karpenter_env(VERSION, &[("INTERRUPTION_QUEUE", queue.as_str())]).await?;
        let operator = fx.start_operator(None, true).await?;
        let status = fx.wait_healthy("with the interruption queue").await?;
        assert!(message(&status, ConditionType::InterruptionHandlingReady).contains(&arn));

        // The queue given as its ARN (kubernetes-sigs/karpenter#1799).
        fx.set_karpenter_env(VERSION, &[("INTERRUPTION_QUEUE", arn.as_str())]).await?;
        let status = fx
            .wait_only_failed(ConditionType::InterruptionHandlingReady, Reason::InterruptionQueueNotAName)
            .await?;
        let text = message(&status, ConditionType::InterruptionHandlingReady);
        assert!(text.contains(&format!("{queue:?}")), "names the queue name to use: {text}");
        fx.set_karpenter_env(VERSION, &[("INTERRUPTION_QUEUE", queue.as_str())]).await?;
        fx.wait_healthy("with the queue's name again").await?;

        // A queue name SQS does not have.
        let missing = format!("{queue}-typo");
        fx.set_karpenter_env(VERSION, &[("INTERRUPTION_QUEUE", missing.as_str())]).await?;
        fx.wait_failed(&[(ConditionType::InterruptionHandlingReady, Reason::InterruptionQueueNotFound)])
            .await?;
        fx.set_karpenter_env(VERSION, &[("INTERRUPTION_QUEUE", queue.as_str())]).await?;
        fx.wait_healthy("with the existing queue again").await?;

        // A queue policy that admits SQS but not EventBridge (hand-written instead of the
        // template's): the rules match, but their messages are refused.
        let sqs_only = json!({"Statement": [
            {"Effect": "Allow", "Principal": {"Service": "sqs.amazonaws.com"},
             "Action": "sqs:SendMessage", "Resource": arn},
        ]})
        .to_string();
        fx.aws.set_queue_policy(&queue, &sqs_only).await?;
        let status = fx
            .wait_failed(&[(ConditionType::InterruptionHandlingReady, Reason::InterruptionQueuePolicyMissing)])
            .await?;
        let text = message(&status, ConditionType::InterruptionHandlingReady);
        assert!(text.contains("events.amazonaws.com"), "{text}");
        fx.aws.set_queue_policy(&queue, &interruption_queue_policy(&arn)).await?;
        fx.wait_healthy("with the template's queue policy again").await?;

        // The queue without the EventBridge rules that feed it.
        for (rule, _, _) in INTERRUPTION_RULES {
            fx.aws.delete_rule(&format!("{queue}-{rule}")).await?;
        }
        let status = fx
            .wait_failed(&[(ConditionType::InterruptionHandlingReady, Reason::InterruptionRulesMissing)])
            .await?;
        let text = message(&status, ConditionType::InterruptionHandlingReady);
        // On-demand NodePools get no spot interruptions: those kinds are warnings, the instance
        // state and scheduled changes every node gets are missing (issue 22).
        assert!(
            text.contains("instance state changes") && !text.contains("spot interruption"),
            "{text}"
        );
        assert!(
            status
                .findings
                .iter()
                .any(|f| f.reason == "InterruptionRuleNotYetNeeded"
                    && f.message.contains("spot interruption warnings")),
            "{:?}",
            status.findings
        );
        for (rule, source, detail) in INTERRUPTION_RULES {
            fx.aws.rule(&format!("{queue}-{rule}"), source, detail, &arn).await?;
        }
        fx.wait_healthy("with the rules again").await?;

        // A spot NodePool in an account without the spot service-linked role.
        fx.aws.delete_spot_service_linked_role().await?;
        fx.patch_node_pool_requirements(json!([
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
        ]))
        .await?;
        let status = fx
            .wait_only_failed(ConditionType::SpotReady, Reason::SpotServiceLinkedRoleMissing)
            .await?;
        let text = message(&status, ConditionType::SpotReady);
        assert!(text.contains("iam:CreateServiceLinkedRole"), "{text}");
        // The controller's role may have EC2 create the role, as EC2 does at the first spot
        // launch. This operator has no IAM simulator (moto has none), and the role's own
        // policies cannot show a service control policy's denial: Unknown, never True or False.
        let (partition, account) =
            karpenter_health_e2e::aws_seed::partition_and_account(&fx.node_role_arn);
        let arn = format!(
            "arn:{partition}:iam::{account}:role/aws-service-role/spot.amazonaws.com/AWSServiceRoleForEC2Spot"
        );
        fx.aws
            .put_role_policy(
                &fx.controller_role,
                "AllowSpotServiceLinkedRole",
                &json!({"Version": "2012-10-17", "Statement": [{
                    "Effect": "Allow", "Action": "iam:CreateServiceLinkedRole", "Resource": arn,
                    "Condition": {"StringEquals": {"iam:AWSServiceName": "spot.amazonaws.com"}},
                }]})
                .to_string(),
            )
            .await?;
        let status = fx
            .wait_status("SpotReady Unknown while the role's own policies allow it", |s| {
                s.condition(ConditionType::SpotReady)
                    .is_some_and(|c| c.status == "Unknown" && c.reason == "PolicyUndecided")
            })
            .await?;
        let text = message(&status, ConditionType::SpotReady);
        assert!(text.contains("service control policy"), "{text}");
        fx.aws.ensure_spot_service_linked_role().await?;
        fx.wait_healthy("once the spot service-linked role exists").await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_denying_the_new_reads_is_unknown_with_the_cause_never_false() -> Result<()> {
    let fx = Fixture::seed("deny", "ap-south-1", VERSION).await?;
    let outcome: Result<()> = async {
        let (queue, _) = interruption_queue(&fx).await?;
        fx.set_karpenter_env(VERSION, &[("INTERRUPTION_QUEUE", queue.as_str())])
            .await?;
        let proxy = FaultProxy::start(fx.bed.moto_url()?).await?;
        proxy.serve_simulator();
        let operator = fx.start_operator(Some(&proxy.url()), true).await?;
        fx.wait_healthy("before AWS denies anything").await?;

        // The simulator denied: the role's own policies decide, still True.
        let log = StatusLog::start(&fx.admin, &fx.name);
        proxy.inject("iam", Some("SimulatePrincipalPolicy"), Fault::AccessDenied);
        fx.wait_status(
            "ControllerCanLaunch decided from the role's own policies",
            |s| {
                s.condition(ConditionType::ControllerCanLaunch)
                    .is_some_and(|c| {
                        c.status == "True" && c.message.contains("the role's own policies")
                    })
            },
        )
        .await?;

        // The fallback denied as well, and SQS and EventBridge too: Unknown with the cause.
        proxy.inject("iam", Some("ListRolePolicies"), Fault::AccessDenied);
        proxy.inject("sqs", None, Fault::AccessDenied);
        proxy.inject("events", None, Fault::AccessDenied);
        fx.wait_status("the new conditions Unknown with AwsAccessDenied", |s| {
            let unknown = |ty| {
                s.condition(ty)
                    .is_some_and(|c| c.status == "Unknown" && c.reason == "AwsAccessDenied")
            };
            unknown(ConditionType::ControllerCanLaunch)
                && unknown(ConditionType::InterruptionHandlingReady)
        })
        .await?;
        tokio::time::sleep(REFRESH * 2).await;
        proxy.clear_faults();
        fx.wait_healthy("once AWS answers again").await?;
        for held in log.stop().await {
            for ty in [
                ConditionType::ControllerCanLaunch,
                ConditionType::InterruptionHandlingReady,
                ConditionType::SpotReady,
            ] {
                let c = held.condition(ty);
                assert!(
                    c.is_none_or(|c| c.status != "False"),
                    "False while AWS denied the reads: {c:?}"
                );
            }
        }
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

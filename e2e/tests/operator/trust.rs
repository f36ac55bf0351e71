//! Setups real accounts have (issue 22), end to end on the real API server, moto and the fault
//! proxy, whose IAM simulator is independent of the product's evaluator: what works must never
//! be False (a status log proves it over the healthy variants), what is broken must be False
//! with its reason, and what cannot be seen is Unknown with the cause. Each test starts all True,
//! walks its setups, repairs what it broke and ends all True. Does IO (API server, moto, fault
//! proxy).
//!
//! Karpenter's state is written by hand here, not produced by the lab's real controller: these
//! verdicts must hold Unknown or True under faults and edge data, which needs Karpenter's status
//! frozen in a chosen shape.

use anyhow::Result;
use k8s_openapi::api::core::v1::ServiceAccount;
use karpenter_health_api::{ConditionType, KarpenterHealth, KarpenterHealthStatus, Reason};
use karpenter_health_e2e::aws_seed::partition_and_account;
use karpenter_health_e2e::fault_proxy::{FaultProxy, PodIdentityAssociation};
use karpenter_health_e2e::fixture::{
    CONTROLLER_POLICY, DEADLINE, Fixture, controller_policy, irsa_trust, kms_for_ebs_policy,
    without_statement,
};
use karpenter_health_e2e::health_status::{message, subnet_zone};
use karpenter_health_e2e::status_log::StatusLog;
use karpenter_health_e2e::{apply_json, wait_for};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

fn is(s: &KarpenterHealthStatus, ty: ConditionType, status: &str, reason: &str) -> bool {
    s.condition(ty)
        .is_some_and(|c| c.status == status && c.reason == reason)
}

/// Waits until `count` (a proxy counter) has grown by `by`: the operator read AWS again since.
async fn read_again(what: &str, by: usize, count: impl Fn() -> usize) -> Result<()> {
    let from = count();
    wait_for(what, DEADLINE, || {
        let now = count();
        async move { Ok((now >= from + by).then_some(())) }
    })
    .await
}

const CAPACITY_RESERVATION_DETAIL: &str = "EC2 Capacity Reservation Instance Interruption Warning";

/// A queue policy scoping EventBridge to the account's rules with `ArnEquals` and a wildcard, as
/// AWS's examples write `aws:SourceArn` conditions.
fn arn_equals_queue_policy(queue_arn: &str, region: &str, account: &str) -> String {
    json!({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"},
         "Action": "sqs:SendMessage", "Resource": queue_arn,
         "Condition": {"ArnEquals": {"aws:SourceArn": format!("arn:aws:events:{region}:{account}:rule/*")}}},
        {"Effect": "Allow", "Principal": {"Service": "sqs.amazonaws.com"},
         "Action": "sqs:SendMessage", "Resource": queue_arn},
    ]})
    .to_string()
}

/// Points 1, 5, 7 and 10: interruption rules that cannot matter yet, an `ArnEquals` queue
/// policy, rules on a custom event bus, and a queue encrypted with the AWS managed SQS key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interruption_rules_custom_buses_arn_conditions_and_encrypted_queues() -> Result<()> {
    let fx = Fixture::seed("tr-int", "ap-south-1", "1.10.0").await?;
    let outcome: Result<()> = async {
        let queue = format!("{}-q", fx.name);
        // The four rules the Terraform eks//modules/karpenter module creates.
        let queue_arn = fx.aws.interruption_queue(&queue).await?;
        fx.set_karpenter_env("1.10.0", &[("INTERRUPTION_QUEUE", &queue)])
            .await?;
        let operator = fx.start_operator(None, true).await?;
        let status = fx
            .wait_healthy("with the Terraform module's four rules on Karpenter 1.10")
            .await?;
        assert!(
            status
                .findings
                .iter()
                .any(|f| f.reason == "InterruptionRuleNotYetNeeded"),
            "the missing capacity-reservation rule is a warning: {:?}",
            status.findings
        );

        // Point 1: an ordinary reservation selected (not interruptible: EC2 warns of no
        // interruption for it) leaves the fifth rule a warning. An interruptible one needs the
        // rule; Karpenter reports it in status.capacityReservations[].interruptible, which the
        // v1.8.6 CRDs of this bed do not have (crates/checks tests/interruption_handling.rs covers it).
        let zone = subnet_zone(&status)?;
        fx.patch_node_class_spec(
            json!({"capacityReservationSelectorTerms": [{"id": "cr-0123456789abcdef0"}]}),
        )
        .await?;
        fx.karpenter_found_reservations(&[("cr-0123456789abcdef0", &zone, "active")])
            .await?;
        let status = fx
            .wait_healthy("with an ordinary capacity reservation selected")
            .await?;
        assert!(
            status
                .findings
                .iter()
                .any(|f| f.reason == "InterruptionRuleNotYetNeeded"),
            "the rule for interruptible reservations is still only a warning: {:?}",
            status.findings
        );
        fx.aws
            .rule(
                &format!("{queue}-odcr"),
                "aws.ec2",
                CAPACITY_RESERVATION_DETAIL,
                &queue_arn,
            )
            .await?;
        fx.wait_status("no warning once the fifth rule exists", |s| {
            !s.findings
                .iter()
                .any(|f| f.reason == "InterruptionRuleNotYetNeeded")
        })
        .await?;

        let log = StatusLog::start(&fx.admin, &fx.name);
        // Point 5: the queue policy scopes EventBridge with ArnEquals and a wildcard.
        let (_, account) = partition_and_account(&fx.node_role_arn);
        fx.aws
            .set_queue_policy(
                &queue,
                &arn_equals_queue_policy(&queue_arn, &fx.region, &account),
            )
            .await?;
        read_again("the queue policy read twice", 2, || {
            fx.proxy.count("sqs", "GetQueueAttributes")
        })
        .await?;
        fx.wait_healthy("with an ArnEquals queue policy").await?;

        // Point 7: the rules live on a custom event bus that the default bus feeds.
        for kind in ["spot", "rebalance", "state", "health", "odcr"] {
            fx.aws.delete_rule(&format!("{queue}-{kind}")).await?;
        }
        let bus = format!("{}-bus", fx.name);
        let bus_arn = fx.aws.event_bus(&bus).await?;
        for (kind, source, detail) in karpenter_health_e2e::aws_seed::INTERRUPTION_RULES
            .iter()
            .copied()
            .chain([("odcr", "aws.ec2", CAPACITY_RESERVATION_DETAIL)])
        {
            fx.aws
                .rule_on_bus(
                    &bus,
                    &format!("{queue}-{kind}"),
                    &json!({"source": [source], "detail-type": [detail]}),
                    &queue_arn,
                )
                .await?;
        }
        // Nothing forwards AWS's events to that bus yet: unknown, never "missing".
        let status = fx
            .wait_status("InterruptionHandlingReady Unknown for the unfed bus", |s| {
                is(
                    s,
                    ConditionType::InterruptionHandlingReady,
                    "Unknown",
                    "PolicyUndecided",
                )
            })
            .await?;
        let text = message(&status, ConditionType::InterruptionHandlingReady);
        assert!(
            text.contains("default bus only") && text.contains(&bus),
            "{text}"
        );
        fx.aws
            .rule_on_bus(
                "default",
                &format!("{}-to-bus", fx.name),
                &json!({"source": ["aws.ec2", "aws.health"]}),
                &bus_arn,
            )
            .await?;
        fx.wait_healthy("with the default bus forwarding to the custom bus")
            .await?;
        log.assert_never_false(ConditionType::InterruptionHandlingReady)
            .await;

        // Point 10: the queue is encrypted with the AWS managed key for SQS.
        use aws_sdk_sqs::types::QueueAttributeName::{KmsMasterKeyId, Policy};
        let policy = arn_equals_queue_policy(&queue_arn, &fx.region, &account);
        fx.aws
            .set_queue_attributes(
                &queue,
                &[(KmsMasterKeyId, "alias/aws/sqs"), (Policy, &policy)],
            )
            .await?;
        let status = fx
            .wait_only_failed(
                ConditionType::InterruptionHandlingReady,
                Reason::InterruptionQueueKeyUnusable,
            )
            .await?;
        let text = message(&status, ConditionType::InterruptionHandlingReady);
        assert!(text.contains("alias/aws/sqs"), "{text}");
        fx.aws
            .set_queue_attributes(&queue, &[(KmsMasterKeyId, ""), (Policy, &policy)])
            .await?;
        fx.wait_healthy("without SSE-KMS").await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

/// An SCP as AWS's examples write them: everything allowed, `RunInstances` denied unless
/// `condition` holds.
fn scp_denying_run_instances_unless(condition: serde_json::Value) -> Vec<String> {
    vec![
        json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "*", "Resource": "*"}]})
        .to_string(),
        json!({"Version": "2012-10-17", "Statement": [
            {"Effect": "Deny", "Action": "ec2:RunInstances",
             "Resource": "arn:aws:ec2:*:*:instance/*", "Condition": condition}]})
        .to_string(),
    ]
}

/// Points 4, 9 and 11: SCPs that need context, a key left to IAM policies, and what a launch
/// touches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scps_a_key_left_to_iam_and_what_a_launch_touches() -> Result<()> {
    let fx = Fixture::seed("tr-iam", "ap-northeast-1", "1.8.6").await?;
    let outcome: Result<()> = async {
        let proxy = FaultProxy::start(fx.bed.moto_url()?).await?;
        proxy.serve_simulator();
        let operator = fx.start_operator(Some(&proxy.url()), true).await?;
        let status = fx.wait_healthy("with the simulator served").await?;
        // Point 11: the True message says what it verified, the resources included.
        let text = message(&status, ConditionType::ControllerCanLaunch);
        for what in [
            "subnet",
            "security-group",
            "image",
            "volume",
            "IAM's policy simulator",
        ] {
            assert!(text.contains(what), "{what}: {text}");
        }

        let log = StatusLog::start(&fx.admin, &fx.name);
        // Point 4: an SCP requiring IMDSv2 is decided from the class's own httpTokens.
        proxy.set_service_control_policies(scp_denying_run_instances_unless(
            json!({"StringNotEquals": {"ec2:MetadataHttpTokens": "required"}}),
        ));
        read_again("two simulations under the IMDSv2 SCP", 2, || {
            proxy.count("iam", "SimulatePrincipalPolicy")
        })
        .await?;
        fx.wait_healthy("under an SCP requiring IMDSv2").await?;
        // An SCP limiting instance types needs a key the operator cannot know: undecided.
        proxy.set_service_control_policies(scp_denying_run_instances_unless(
            json!({"StringNotEquals": {"ec2:InstanceType": ["m5.large", "m5.xlarge"]}}),
        ));
        let status = fx
            .wait_status(
                "ControllerCanLaunch Unknown under the instance-type SCP",
                |s| {
                    is(
                        s,
                        ConditionType::ControllerCanLaunch,
                        "Unknown",
                        "PolicyUndecided",
                    )
                },
            )
            .await?;
        let text = message(&status, ConditionType::ControllerCanLaunch);
        assert!(text.contains("ec2:InstanceType"), "{text}");
        proxy.set_service_control_policies(Vec::new());
        fx.wait_healthy("without SCPs").await?;
        log.assert_never_false(ConditionType::ControllerCanLaunch)
            .await;

        // Point 11: without the statement for the images, security groups and subnets a launch
        // uses, Karpenter cannot launch.
        let good = controller_policy(&fx.cluster, &fx.node_role_arn);
        let without = without_statement(&good, "AllowScopedEC2InstanceAccessActions");
        fx.aws
            .put_role_policy(&fx.controller_role, CONTROLLER_POLICY, &without)
            .await?;
        let status = fx
            .wait_only_failed(
                ConditionType::ControllerCanLaunch,
                Reason::ControllerCannotLaunchInstances,
            )
            .await?;
        let text = message(&status, ConditionType::ControllerCanLaunch);
        assert!(
            text.contains("subnet/*") && text.contains("image/*"),
            "{text}"
        );
        fx.aws
            .put_role_policy(&fx.controller_role, CONTROLLER_POLICY, &good)
            .await?;
        fx.wait_healthy("with the launch statements back").await?;

        // Point 9: a customer managed key with KMS's default policy leaves its use to IAM; the
        // controller's policies do not allow EC2's uses of it yet.
        let key = fx.aws.kms_key(None).await?;
        fx.patch_node_class_spec(json!({"blockDeviceMappings": [{
            "deviceName": "/dev/xvda",
            "ebs": {"volumeSize": "20Gi", "volumeType": "gp3", "encrypted": true, "kmsKeyID": key},
        }]}))
        .await?;
        let status = fx
            .wait_only_failed(
                ConditionType::VolumeEncryptionReady,
                Reason::KmsKeyNotAllowedForController,
            )
            .await?;
        let text = message(&status, ConditionType::VolumeEncryptionReady);
        assert!(
            text.contains(&fx.controller_role) && text.contains("kms:"),
            "{text}"
        );
        fx.aws
            .put_role_policy(
                &fx.controller_role,
                "KarpenterKms",
                &kms_for_ebs_policy(&fx.region),
            )
            .await?;
        fx.wait_healthy("with the controller allowed to use the key through EC2")
            .await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

/// Sets (or with `None` removes) annotation `key` of this test's Karpenter ServiceAccount.
async fn annotate(fx: &Fixture, key: &str, value: Option<&str>) -> Result<()> {
    Api::<ServiceAccount>::namespaced(fx.admin.clone(), &fx.name)
        .patch(
            "karpenter",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {key: value}}})),
        )
        .await?;
    Ok(())
}

/// Point 6: an IRSA audience, a controller role of another account, and a Pod Identity
/// association with a target role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn irsa_audiences_roles_of_other_accounts_and_pod_identity_target_roles() -> Result<()> {
    let fx = Fixture::seed("tr-id", "ap-southeast-1", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        fx.wait_healthy("with IRSA").await?;
        let audience = "karpenter.example.com";
        let sts_trust = irsa_trust(&fx.oidc_provider_arn, &fx.issuer_host_path, &fx.name);
        let custom_trust = sts_trust.replace("sts.amazonaws.com", audience);

        // The trust names a custom audience; the ServiceAccount's token still says sts.
        fx.aws.set_trust(&fx.controller_role, &custom_trust).await?;
        let status = fx
            .wait_only_failed(
                ConditionType::ControllerCanLaunch,
                Reason::ControllerTrustMismatch,
            )
            .await?;
        let text = message(&status, ConditionType::ControllerCanLaunch);
        assert!(text.contains("aud sts.amazonaws.com"), "{text}");
        // The ServiceAccount asks for that audience: the trust admits its token.
        annotate(&fx, "eks.amazonaws.com/audience", Some(audience)).await?;
        fx.wait_healthy("with the audience annotation").await?;

        // The controller role lives in another account: never "not found" from this one.
        let log = StatusLog::start(&fx.admin, &fx.name);
        let foreign = "arn:aws:iam::999988887777:role/KarpenterController";
        annotate(&fx, "eks.amazonaws.com/role-arn", Some(foreign)).await?;
        let status = fx
            .wait_status("ControllerCanLaunch Unknown for the other account", |s| {
                is(
                    s,
                    ConditionType::ControllerCanLaunch,
                    "Unknown",
                    "AwsOtherAccount",
                )
            })
            .await?;
        let text = message(&status, ConditionType::ControllerCanLaunch);
        assert!(text.contains("999988887777"), "{text}");
        log.assert_never_false(ConditionType::ControllerCanLaunch)
            .await;

        // EKS Pod Identity with a target role: the association's role assumes the controller
        // role, whose trust admits that role.
        let via = fx
            .aws
            .role(
                &format!("{}-pod-identity", fx.name),
                "/",
                &json!({"Version": "2012-10-17", "Statement": [{
                    "Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
                    "Action": ["sts:AssumeRole", "sts:TagSession"]}]})
                .to_string(),
            )
            .await?;
        fx.aws
            .set_trust(
                &fx.controller_role,
                &json!({"Version": "2012-10-17", "Statement": [{
                    "Effect": "Allow", "Principal": {"AWS": via},
                    "Action": ["sts:AssumeRole", "sts:TagSession"]}]})
                .to_string(),
            )
            .await?;
        let association = |target: &str| PodIdentityAssociation {
            namespace: fx.name.clone(),
            service_account: "karpenter".into(),
            id: "a-karpenter".into(),
            role_arn: via.clone(),
            target_role_arn: Some(target.to_owned()),
        };
        fx.proxy
            .set_pod_identity(&fx.cluster, vec![association(&fx.controller_role_arn)]);
        annotate(&fx, "eks.amazonaws.com/role-arn", None).await?;
        let status = fx.wait_healthy("with a Pod Identity target role").await?;
        let text = message(&status, ConditionType::ControllerCanLaunch);
        assert!(text.contains("target role"), "{text}");
        // The target role in another account: unknown, never a missing role.
        let log = StatusLog::start(&fx.admin, &fx.name);
        fx.proxy
            .set_pod_identity(&fx.cluster, vec![association(foreign)]);
        fx.wait_status(
            "ControllerCanLaunch Unknown for the other account's target",
            |s| {
                is(
                    s,
                    ConditionType::ControllerCanLaunch,
                    "Unknown",
                    "AwsOtherAccount",
                )
            },
        )
        .await?;
        log.assert_never_false(ConditionType::ControllerCanLaunch)
            .await;

        // Back to IRSA as seeded.
        fx.proxy.set_pod_identity(&fx.cluster, Vec::new());
        fx.aws.set_trust(&fx.controller_role, &sts_trust).await?;
        annotate(&fx, "eks.amazonaws.com/audience", None).await?;
        annotate(
            &fx,
            "eks.amazonaws.com/role-arn",
            Some(&fx.controller_role_arn),
        )
        .await?;
        fx.wait_healthy("with IRSA again").await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

/// Point 8: a pending Pod with a rejected label key that NodePools of two classes could take
/// fails both, naming the Pod (before, it was a warning on each and True).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_key_on_a_pod_two_classes_could_take_fails_both() -> Result<()> {
    let fx = Fixture::seed("tr-lbl", "sa-east-1", "1.8.6").await?;
    let other = format!("{}-b", fx.name);
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        fx.wait_healthy("with one class").await?;
        // A second class and NodePool like the first.
        apply_json(
            &fx.admin,
            &[
                json!({
                    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                    "metadata": {"name": other},
                    "spec": {
                        "instanceProfile": fx.profile,
                        "amiSelectorTerms": [{"alias": "al2023@latest"}],
                        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": fx.cluster}}],
                        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": fx.cluster}}],
                    },
                }),
                json!({
                    "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                    "metadata": {"name": other},
                    "spec": {"template": {"spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": other},
                        "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                    }}},
                }),
            ],
        )
        .await?;
        // A workload selecting node-role.kubernetes.io/web, pinned to neither NodePool.
        let pods = fx
            .pending_pod("web", json!({"node-role.kubernetes.io/web": ""}))
            .await?;
        // The bed's kube-scheduler finds no Node for it and marks it Unschedulable.
        let status = fx
            .wait_only_failed(ConditionType::LabelsAllowed, Reason::RestrictedLabelDomain)
            .await?;
        let text = message(&status, ConditionType::LabelsAllowed);
        assert!(text.contains(&format!("{}/web", fx.name)), "{text}");
        let healths: Api<KarpenterHealth> = Api::all(fx.admin.clone());
        wait_for("the second class's LabelsAllowed False", DEADLINE, || async {
            Ok(healths
                .get_opt(&other)
                .await?
                .and_then(|h| h.status)
                .filter(|s| {
                    is(s, ConditionType::LabelsAllowed, "False", "RestrictedLabelDomain")
                })
                .map(|_| ()))
        })
        .await?;
        pods.delete("web", &DeleteParams::default().grace_period(0))
            .await?;
        fx.wait_healthy("once the Pod is gone").await?;
        operator.stop().await
    }
    .await;
    let removed = async {
        let _ = Api::<karpenter_health_api::karpenter::NodePool>::all(fx.admin.clone())
            .delete(&other, &DeleteParams::default())
            .await;
        let _ = Api::<karpenter_health_api::karpenter::EC2NodeClass>::all(fx.admin.clone())
            .delete(&other, &DeleteParams::default())
            .await;
    };
    removed.await;
    fx.finish(outcome).await
}

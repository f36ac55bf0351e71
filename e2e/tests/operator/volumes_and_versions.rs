//! What a launched node needs to boot and what this Karpenter needs to run (issue 12), end to
//! end on the real API server, moto (KMS, EBS default encryption) and the fault proxy (EC2
//! GetEbsDefaultKmsKeyId, which moto lacks): each scenario starts all True, breaks one thing the
//! way users break it, waits for exactly the expected condition and reason, repairs it and waits
//! for True again; and AWS denying the new reads is Unknown with the cause, never False. Does IO
//! (API server, moto, fault proxy).
//!
//! Karpenter's state is written by hand here, not produced by the lab's real controller: moto
//! emulates no KMS failure at launch, and older releases' CRDs and versions cannot be built in the
//! lab.

use anyhow::{Context, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_health_api::{ConditionType, Reason};
use karpenter_health_e2e::fault_proxy::Fault;
use karpenter_health_e2e::fixture::{Fixture, REFRESH};
use karpenter_health_e2e::health_status::message;
use karpenter_health_e2e::status_log::StatusLog;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// A key policy that lets only Lambda use the key: EC2 gets nothing and the account root is not
/// delegated to (#1407, #3767: nodes then terminate seconds after launch).
fn lambda_only_policy(region: &str) -> String {
    json!({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": "*"},
        "Action": ["kms:Decrypt", "kms:GenerateDataKey*", "kms:CreateGrant", "kms:DescribeKey"],
        "Resource": "*",
        "Condition": {"StringEquals": {"kms:ViaService": format!("lambda.{region}.amazonaws.com")}},
    }]})
    .to_string()
}

/// The policy AWS documents for EBS: every principal of the account, through EC2 in the region.
fn ec2_via_service_policy(region: &str) -> String {
    json!({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": "*"},
        "Action": ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*",
                   "kms:CreateGrant", "kms:DescribeKey"],
        "Resource": "*",
        "Condition": {"StringEquals": {
            "kms:ViaService": format!("ec2.{region}.amazonaws.com"),
            "kms:CallerAccount": "123456789012",
        }},
    }]})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_kms_key_and_a_key_policy_without_ec2_fail_volume_encryption() -> Result<()> {
    let fx = Fixture::seed("vol", "eu-west-3", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        let status = fx.wait_healthy("with the AWS-managed default key").await?;
        let text = message(&status, ConditionType::VolumeEncryptionReady);
        assert!(text.contains("alias/aws/ebs"), "{text}");
        assert!(fx.proxy.count("ec2", "GetEbsDefaultKmsKeyId") > 0);

        // The class's volume names a customer-managed key that EC2 may use.
        let key = fx
            .aws
            .kms_key(Some(&ec2_via_service_policy(&fx.region)))
            .await?;
        fx.patch_node_class_spec(json!({"blockDeviceMappings": [{
            "deviceName": "/dev/xvda",
            "ebs": {"volumeSize": "20Gi", "volumeType": "gp3", "encrypted": true, "kmsKeyID": key},
        }]}))
        .await?;
        let status = fx.wait_healthy("with the class's own key").await?;
        let text = message(&status, ConditionType::VolumeEncryptionReady);
        assert!(text.contains(&key), "{text}");

        // The key is disabled.
        fx.aws.set_kms_key_enabled(&key, false).await?;
        fx.wait_only_failed(ConditionType::VolumeEncryptionReady, Reason::KmsKeyDisabled)
            .await?;
        fx.aws.set_kms_key_enabled(&key, true).await?;
        fx.wait_healthy("after the key is enabled again").await?;

        // The key policy lets Lambda, not EC2, use the key.
        fx.aws
            .put_key_policy(&key, &lambda_only_policy(&fx.region))
            .await?;
        let status = fx
            .wait_only_failed(
                ConditionType::VolumeEncryptionReady,
                Reason::KmsKeyPolicyDeniesEc2,
            )
            .await?;
        let text = message(&status, ConditionType::VolumeEncryptionReady);
        assert!(text.contains("kms:CreateGrant"), "{text}");
        // A grant to the controller's role lets it use the key beyond the key policy.
        let grant = fx
            .aws
            .kms_grant(
                &key,
                &fx.controller_role_arn,
                &[
                    "CreateGrant",
                    "Decrypt",
                    "GenerateDataKeyWithoutPlaintext",
                    "ReEncryptFrom",
                    "ReEncryptTo",
                    "DescribeKey",
                ],
            )
            .await?;
        fx.wait_healthy("with a grant to the controller's role")
            .await?;
        assert!(fx.proxy.count("kms", "ListGrants") > 0);
        fx.aws.revoke_kms_grant(&key, &grant).await?;
        fx.wait_failed(&[(
            ConditionType::VolumeEncryptionReady,
            Reason::KmsKeyPolicyDeniesEc2,
        )])
        .await?;
        fx.aws
            .put_key_policy(&key, &ec2_via_service_policy(&fx.region))
            .await?;
        fx.wait_healthy("after the key policy admits EC2 again")
            .await?;

        // AWS denies the new reads: Unknown with the cause, never False.
        let log = StatusLog::start(&fx.admin, &fx.name);
        fx.proxy.inject("kms", None, Fault::AccessDenied);
        fx.proxy
            .inject("ec2", Some("GetEbsDefaultKmsKeyId"), Fault::AccessDenied);
        fx.proxy.inject(
            "ec2",
            Some("GetEbsEncryptionByDefault"),
            Fault::AccessDenied,
        );
        fx.wait_status("VolumeEncryptionReady Unknown with AwsAccessDenied", |s| {
            s.condition(ConditionType::VolumeEncryptionReady)
                .is_some_and(|c| c.status == "Unknown" && c.reason == "AwsAccessDenied")
        })
        .await?;
        tokio::time::sleep(REFRESH * 2).await;
        fx.proxy.clear_faults();
        fx.wait_healthy("once AWS answers again").await?;
        for held in log.stop().await {
            let c = held.condition(ConditionType::VolumeEncryptionReady);
            assert!(
                c.is_none_or(|c| c.status != "False"),
                "False while AWS denied the reads: {c:?}"
            );
        }
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

const NODE_CLASS_CRD: &str = "ec2nodeclasses.karpenter.k8s.aws";

/// Sets (or with `None` removes) a conversion webhook on the EC2NodeClass CRD. The CRD serves one
/// version, so the API server never calls it and other tests' reads are not affected.
async fn set_conversion_webhook(fx: &Fixture, service: Option<(&str, &str)>) -> Result<()> {
    let conversion = match service {
        Some((namespace, name)) => json!({
            "strategy": "Webhook",
            "webhook": {"conversionReviewVersions": ["v1"],
                        "clientConfig": {"service": {"namespace": namespace, "name": name,
                                                     "port": 8443}}},
        }),
        None => json!({"strategy": "None", "webhook": null}),
    };
    Api::<CustomResourceDefinition>::all(fx.admin.clone())
        .patch(
            NODE_CLASS_CRD,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"conversion": conversion}})),
        )
        .await?;
    Ok(())
}

/// Serves (or stops serving) a `v1beta1` copy of the EC2NodeClass CRD's `v1`, so the API server
/// converts between versions, as Karpenter 1.0's CRDs did. Objects stay stored as `v1`.
async fn serve_v1beta1(fx: &Fixture, serve: bool) -> Result<()> {
    let crds = Api::<CustomResourceDefinition>::all(fx.admin.clone());
    let mut crd = crds.get(NODE_CLASS_CRD).await?;
    crd.spec.versions.retain(|v| v.name != "v1beta1");
    if serve {
        let mut old = crd
            .spec
            .versions
            .iter()
            .find(|v| v.name == "v1")
            .cloned()
            .context("the CRD serves v1")?;
        old.name = "v1beta1".into();
        old.storage = false;
        old.served = true;
        crd.spec.versions.push(old);
    }
    crds.replace(NODE_CLASS_CRD, &PostParams::default(), &crd)
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsupported_kubernetes_version_and_a_leftover_conversion_webhook_fail_version_compatibility()
-> Result<()> {
    let fx = Fixture::seed_on("ver", "us-east-2", "1.8.6", "1.31").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        let status = fx.wait_healthy("with Karpenter 1.8.6 on 1.31").await?;
        let text = message(&status, ConditionType::KarpenterVersionCompatible);
        assert!(
            text.contains("Kubernetes 1.31") && text.contains("EKS DescribeCluster"),
            "{text}"
        );

        // Karpenter 1.0.1 on Kubernetes 1.31, which needs 1.0.5.
        fx.set_karpenter_version("1.0.1").await?;
        let status = fx
            .wait_only_failed(
                ConditionType::KarpenterVersionCompatible,
                Reason::KubernetesVersionUnsupported,
            )
            .await?;
        let text = message(&status, ConditionType::KarpenterVersionCompatible);
        assert!(text.contains("1.0.5"), "{text}");
        fx.set_karpenter_version("1.8.6").await?;
        fx.wait_healthy("after Karpenter is upgraded").await?;

        // A conversion webhook left on a Karpenter CRD, pointing at a Service that is gone. While
        // the CRD serves one version the API server never calls it: a warning, still True.
        let webhook: Result<()> = async {
            set_conversion_webhook(&fx, Some((&fx.name, "karpenter"))).await?;
            fx.wait_status("the unused conversion webhook's warning", |s| {
                s.condition(ConditionType::KarpenterVersionCompatible)
                    .is_some_and(|c| c.status == "True")
                    && s.findings
                        .iter()
                        .any(|w| w.reason == "UnusedConversionWebhookUnreachable")
            })
            .await?;
            // Serving v1beta1 as well makes the API server convert through it.
            serve_v1beta1(&fx, true).await?;
            let status = fx
                .wait_only_failed(
                    ConditionType::KarpenterVersionCompatible,
                    Reason::WebhookServiceMissing,
                )
                .await?;
            let text = message(&status, ConditionType::KarpenterVersionCompatible);
            assert!(text.contains(NODE_CLASS_CRD), "{text}");
            Ok(())
        }
        .await;
        // Undone whatever happened: the CRD is shared by every test of the run.
        let unserve = serve_v1beta1(&fx, false).await;
        let undo = set_conversion_webhook(&fx, None).await;
        webhook.and(unserve).and(undo)?;
        fx.wait_healthy("after the conversion webhook is removed")
            .await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

/// An EKS minor newer than the built-in compatibility matrix is Unknown, never False, until the
/// operator is given the row at run time (`--kubernetes-compatibility`, the chart's
/// `settings.kubernetesCompatibility`); the same build then judges it True and names the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compatibility_row_given_at_run_time_judges_a_kubernetes_newer_than_the_release()
-> Result<()> {
    let fx = Fixture::seed_on("compat", "us-east-2", "1.8.6", "1.37").await?;
    let outcome: Result<()> = async {
        let log = StatusLog::start(&fx.admin, &fx.name);
        let operator = fx.start_operator(None, true).await?;
        let status = fx
            .wait_status("1.37 not in the matrix", |s| {
                s.condition(ConditionType::KarpenterVersionCompatible)
                    .is_some_and(|c| c.reason == "KubernetesVersionNotInMatrix")
            })
            .await?;
        let text = message(&status, ConditionType::KarpenterVersionCompatible);
        assert!(
            text.contains("Kubernetes 1.37") && text.contains("--kubernetes-compatibility 1.37="),
            "{text}"
        );
        operator.stop().await?;

        let rows =
            karpenter_health_checks::karpenter_versions::parse_compatibility_override("1.37=1.8.0")
                .map_err(anyhow::Error::msg)?;
        let operator = fx
            .start_operator_with(None, |config| {
                config.evaluation.kubernetes_compatibility = rows;
            })
            .await?;
        let status = fx
            .wait_status("1.37 judged from the given row", |s| {
                s.condition(ConditionType::KarpenterVersionCompatible)
                    .is_some_and(|c| c.status == "True")
            })
            .await?;
        let text = message(&status, ConditionType::KarpenterVersionCompatible);
        assert!(
            text.contains("Karpenter 1.8.6 supports Kubernetes 1.37")
                && text.contains("the compatibility rows this operator was given"),
            "{text}"
        );
        operator.stop().await?;
        log.assert_never_false(ConditionType::KarpenterVersionCompatible)
            .await;
        Ok(())
    }
    .await;
    fx.finish(outcome).await
}

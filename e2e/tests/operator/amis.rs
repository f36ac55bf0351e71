//! AMIs for this and the next Kubernetes version (issue 25), end to end on the real API server,
//! moto and the gap proxy's public SSM parameters (AWS's EKS-optimized image ids, which moto
//! lacks). The class starts all True on `al2023@latest`; releases pinned and published for the
//! cluster's version stay True whether AWS has published the next version or not (a status log
//! proves no False among them), one missing for the next version once AWS publishes it is a
//! warning, a release never built for the cluster's version turns `AmisResolvable` False with
//! `AmiAliasNotPublished`, SSM denying the reads is Unknown with the cause, never False. Without
//! an alias: a shared image of another account, named as its owner builds it, is never judged
//! against `amiFamily` (no False), and `amiFamily` AL2 on an official AL2023 build is
//! `AmiFamilyMismatch` until repaired. Images selected by id: one EC2 deprecates within days is
//! a warning, one disabled while another remains a warning (a status log proves no False), all
//! gone `AmiUnavailable` until one is re-enabled. Does IO (API server, moto, fault proxy).
//!
//! Karpenter's state is written by hand here, not produced by the lab's real controller: the image
//! states here (releases AWS never built, another family's images, deprecations) are not in the gap
//! proxy's catalogue; the lab proves AmiUnavailable (lab `reasons`).

use anyhow::{Context, Result};
use karpenter_health_api::{ConditionType, KarpenterHealthStatus, Reason, Severity};
use karpenter_health_aws::REVALIDATE_MIN_AGE;
use karpenter_health_e2e::fault_proxy::Fault;
use karpenter_health_e2e::fault_proxy::public_parameters::al2023_recommended;
use karpenter_health_e2e::fixture::{Fixture, KUBERNETES_VERSION, REFRESH};
use karpenter_health_e2e::health_status::message;
use karpenter_health_e2e::status_log::{StatusLog, from_first_unknown};
use serde_json::json;

/// The parameter AWS publishes for a pinned AL2023 release's x86_64 standard image (EKS user
/// guide, "Retrieve recommended Amazon Linux AMI IDs").
fn pinned(minor: &str, release: &str) -> String {
    format!(
        "/aws/service/eks/optimized-ami/{minor}/amazon-linux-2023/x86_64/standard/\
         amazon-eks-node-al2023-x86_64-standard-{minor}-{release}/image_id"
    )
}

fn warnings(status: &KarpenterHealthStatus) -> Vec<&str> {
    status
        .findings
        .iter()
        .filter(|f| {
            f.condition_type == ConditionType::AmisResolvable && f.severity == Severity::Warning
        })
        .map(|f| f.reason.as_str())
        .collect()
}

async fn select_alias(fx: &Fixture, alias: &str) -> Result<()> {
    fx.patch_node_class_spec(json!({"amiSelectorTerms": [{"alias": alias}], "amiFamily": null}))
        .await?;
    fx.karpenter_reports_ready().await
}

/// Waits until `AmisResolvable` is True with a message containing `text`.
async fn wait_true_saying(fx: &Fixture, text: &str) -> Result<KarpenterHealthStatus> {
    fx.wait_status(&format!("AmisResolvable True saying {text:?}"), |s| {
        s.condition(ConditionType::AmisResolvable)
            .is_some_and(|c| c.status == "True" && c.message.contains(text))
    })
    .await
}

fn no_false(held: &[KarpenterHealthStatus], what: &str) {
    for s in held {
        let c = s.condition(ConditionType::AmisResolvable);
        assert!(c.is_none_or(|c| c.status != "False"), "False {what}: {c:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alias_aws_never_built_for_the_cluster_version_is_ami_alias_not_published() -> Result<()>
{
    let fx = Fixture::seed("amis", "us-west-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        let now = KUBERNETES_VERSION;
        let next = "1.30";
        assert_eq!(now, "1.29", "the steps below name the next version");
        // AWS has not published images for the next version yet.
        for name in al2023_recommended(next) {
            fx.proxy.set_public_parameter(&name, None);
        }
        // Release A is built for this version only, B for both, C for this version only.
        fx.proxy
            .set_public_parameter(&pinned(now, "v20240701"), Some("ami-0a0000000000000a1"));
        for minor in [now, next] {
            fx.proxy
                .set_public_parameter(&pinned(minor, "v20240807"), Some("ami-0b0000000000000b1"));
        }
        fx.proxy
            .set_public_parameter(&pinned(now, "v20240901"), Some("ami-0c0000000000000c1"));

        let operator = fx.start_operator(None, true).await?;
        fx.wait_healthy("with al2023@latest").await?;
        assert!(fx.proxy.count("ssm", "GetParameter") > 0);

        let log = StatusLog::start(&fx.admin, &fx.name);
        select_alias(&fx, "al2023@v20240701").await?;
        let status = wait_true_saying(&fx, "no EKS image for Kubernetes 1.30").await?;
        // The next version's parameters were read by now (the status says so), not necessarily
        // at the edit: on a busy bed the read comes seconds later.
        let read_next = tokio::time::Instant::now();
        assert!(warnings(&status).is_empty(), "{:?}", status.findings);
        select_alias(&fx, "al2023@v20240807").await?;
        wait_true_saying(&fx, "and for Kubernetes 1.30").await?;

        // AWS publishes the next version; release C was never built for it. The recommended
        // parameters were read absent above and are kept for hours: the class's edit is the
        // evidence that revalidates them (answers older than REVALIDATE_MIN_AGE).
        for name in al2023_recommended(next) {
            fx.proxy
                .set_public_parameter(&name, Some("ami-0d0000000000000d1"));
        }
        tokio::time::sleep_until(read_next + REVALIDATE_MIN_AGE + REFRESH).await;
        select_alias(&fx, "al2023@v20240901").await?;
        let status = fx
            .wait_status("the warning about Kubernetes 1.30", |s| {
                warnings(s).contains(&"AmiAliasNotPublishedForNextMinor")
            })
            .await?;
        let c = status
            .condition(ConditionType::AmisResolvable)
            .context("AmisResolvable")?;
        assert_eq!(c.status, "True", "a warning, not a failure: {c:?}");
        assert!(
            !c.message.contains("1.30"),
            "True never contradicts it: {}",
            c.message
        );
        no_false(
            &log.stop().await,
            "for releases published for the cluster's version",
        );

        // A release never built for 1.29.
        select_alias(&fx, "al2023@v20230101").await?;
        let status = fx
            .wait_only_failed(ConditionType::AmisResolvable, Reason::AmiAliasNotPublished)
            .await?;
        let text = message(&status, ConditionType::AmisResolvable);
        assert!(
            text.contains("al2023@v20230101") && text.contains("Kubernetes 1.29"),
            "{text}"
        );

        // SSM denies: a release not read before is Unknown, never False.
        let log = StatusLog::start(&fx.admin, &fx.name);
        fx.proxy
            .inject("ssm", Some("GetParameter"), Fault::AccessDenied);
        select_alias(&fx, "al2023@v20241024").await?;
        fx.wait_status("AmisResolvable Unknown with AwsAccessDenied", |s| {
            s.condition(ConditionType::AmisResolvable)
                .is_some_and(|c| c.status == "Unknown" && c.reason == "AwsAccessDenied")
        })
        .await?;
        let held = log.stop().await;
        fx.proxy.clear_faults();
        let denied = from_first_unknown(&held, ConditionType::AmisResolvable)
            .context("an Unknown status")?;
        no_false(denied, "while SSM denied the reads");

        select_alias(&fx, "al2023@v20240807").await?;
        fx.wait_healthy("on a release published for both versions")
            .await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ami_family_user_data_for_another_familys_images_is_ami_family_mismatch() -> Result<()> {
    let fx = Fixture::seed("amifam", "us-west-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        fx.wait_healthy("with al2023@latest").await?;

        // An image another account owns and shares with this one, selected by id, named as
        // its owner builds it: EC2 lists it (the gap proxy, since moto shows no other
        // account's images).
        let log = StatusLog::start(&fx.admin, &fx.name);
        let shared = "ami-0acc0acc0acc0acc1";
        fx.proxy
            .share_image(shared, "111122223333", "acme-hardened-al2023-2024-10");
        fx.set_status_amis(&[(shared, "acme-hardened-al2023-2024-10")])
            .await?;
        fx.patch_node_class_spec(
            json!({"amiSelectorTerms": [{"id": shared}], "amiFamily": "AL2023"}),
        )
        .await?;
        fx.karpenter_reports_ready().await?;
        wait_true_saying(&fx, "resolved image is an EKS build of another family").await?;
        tokio::time::sleep(REFRESH * 2).await;
        no_false(&log.stop().await, "for a shared image of another account");

        // AL2's bootstrap.sh user data on an official AL2023 build: nodes never join. EC2 has
        // it (registered in moto's account under the name its builder gives it).
        let official = fx
            .aws
            .register_image("amazon-eks-node-al2023-x86_64-standard-1.29-v20240807")
            .await?;
        let official = official.as_str();
        fx.set_status_amis(&[(
            official,
            "amazon-eks-node-al2023-x86_64-standard-1.29-v20240807",
        )])
        .await?;
        fx.patch_node_class_spec(
            json!({"amiSelectorTerms": [{"id": official}], "amiFamily": "AL2"}),
        )
        .await?;
        fx.karpenter_reports_ready().await?;
        let status = fx
            .wait_only_failed(ConditionType::AmisResolvable, Reason::AmiFamilyMismatch)
            .await?;
        let text = message(&status, ConditionType::AmisResolvable);
        assert!(
            text.contains(official) && text.contains("amiFamily is AL2"),
            "{text}"
        );
        fx.patch_node_class_spec(json!({"amiFamily": "AL2023"}))
            .await?;
        fx.karpenter_reports_ready().await?;
        fx.wait_healthy("once amiFamily matches the images").await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_named_by_id_that_ec2_no_longer_has_are_ami_unavailable() -> Result<()> {
    let fx = Fixture::seed("amiids", "us-west-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        fx.wait_healthy("with al2023@latest").await?;

        // Two images of one's own, selected by id.
        let a = fx.aws.register_image("team-al2023-2026-10").await?;
        let b = fx.aws.register_image("team-al2023-2026-11").await?;
        let log = StatusLog::start(&fx.admin, &fx.name);
        fx.set_status_amis(&[(&a, "team-al2023-2026-10"), (&b, "team-al2023-2026-11")])
            .await?;
        fx.patch_node_class_spec(
            json!({"amiSelectorTerms": [{"id": a}, {"id": b}], "amiFamily": "AL2023"}),
        )
        .await?;
        fx.karpenter_reports_ready().await?;
        wait_true_saying(&fx, "EC2 has its 2 image(s) available").await?;
        assert!(fx.proxy.count("ec2", "DescribeImages") > 0);

        // EC2 deprecates one in ten days: a warning ahead, launches go on.
        let in_ten_days = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(240);
        fx.proxy.deprecate_image(&a, &in_ten_days.to_string());
        let status = fx
            .wait_status("the deprecation warning", |s| {
                warnings(s).contains(&"AmiDeprecationAhead")
            })
            .await?;
        let found = status
            .findings
            .iter()
            .find(|f| f.reason == "AmiDeprecationAhead")
            .context("the warning")?;
        assert!(
            found.message.contains(&a)
                && found
                    .message
                    .contains(&in_ten_days.strftime("%Y-%m-%d").to_string()),
            "{}",
            found.message
        );

        // One is disabled: the other still launches, a warning only.
        fx.aws.disable_image(&b).await?;
        fx.wait_status("the warning about the disabled image", |s| {
            warnings(s).contains(&"AmiSomeUnavailable")
        })
        .await?;
        no_false(&log.stop().await, "while one image selected by id remains");

        // The other is deregistered: nothing the terms name can launch.
        fx.aws.deregister_image(&a).await?;
        let status = fx
            .wait_only_failed(ConditionType::AmisResolvable, Reason::AmiUnavailable)
            .await?;
        let text = message(&status, ConditionType::AmisResolvable);
        assert!(
            text.contains(&format!("{a} is deregistered"))
                && text.contains(&format!("{b} (team-al2023-2026-11) is disabled")),
            "{text}"
        );

        // Re-enabled: one image launches again.
        fx.aws.enable_image(&b).await?;
        fx.wait_status("AmisResolvable True again", |s| {
            s.condition(ConditionType::AmisResolvable)
                .is_some_and(|c| c.status == "True")
        })
        .await?;
        select_alias(&fx, "al2023@latest").await?;
        fx.set_status_amis(&[]).await?;
        fx.wait_healthy("back on the alias").await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

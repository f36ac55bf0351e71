//! Accepted findings end to end on the real API server: an instance profile given as an ARN makes
//! InstanceProfileReady False (InstanceProfileIsArn); an annotation on the EC2NodeClass accepts it until a time, and the class is
//! healthy to `kubectl wait` while `status.accepted` lists it; at that time it counts again, the
//! condition and its Event say the acceptance has passed, and a warning names it; a malformed
//! annotation is a warning and accepts nothing; a fleet rule accepts it for the classes its
//! pattern matches, and the central switch turns the annotation into a warning. Does IO (API
//! server, moto through the fault proxy).

use anyhow::{Result, ensure};
use k8s_openapi::api::events::v1::Event;
use karpenter_health_api::{ConditionType, KarpenterHealthStatus, Reason};
use karpenter_health_e2e::fixture::Fixture;
use karpenter_health_e2e::health_status::message;
use karpenter_health_e2e::{kubectl, wait_for};
use kube::api::{Api, ListParams};
use serde_json::json;
use std::time::Duration;

const ANNOTATION: &str = "accept.karpenter-health.io/InstanceProfileIsArn";

async fn annotate(fx: &Fixture, value: Option<&str>) -> Result<()> {
    fx.patch_node_class_metadata(json!({"annotations": {ANNOTATION: value}}))
        .await
}

async fn profile_as_arn(fx: &Fixture) -> Result<()> {
    fx.patch_node_class_spec(json!({"instanceProfile": fx.profile_arn}))
        .await
}

fn accepted_by(s: &KarpenterHealthStatus, source: &str) -> bool {
    s.condition(ConditionType::InstanceProfileReady)
        .is_some_and(|c| c.status == "True" && c.reason == "FindingAccepted")
        && s.condition(ConditionType::Ready)
            .is_some_and(|c| c.status == "True" && c.reason == "PassedWithAcceptedFindings")
        && s.accepted
            .iter()
            .any(|a| a.reason == "InstanceProfileIsArn" && a.source == source)
}

fn warned(s: &KarpenterHealthStatus, code: &str, says: &str) -> bool {
    s.findings
        .iter()
        .any(|f| f.reason == code && f.message.contains(says))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_finding_stops_counting_until_its_time_then_counts_again() -> Result<()> {
    let fx = Fixture::seed("accept", "us-west-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        fx.wait_healthy("before the ARN").await?;
        profile_as_arn(&fx).await?;
        fx.wait_only_failed(
            ConditionType::InstanceProfileReady,
            Reason::InstanceProfileIsArn,
        )
        .await?;

        // A malformed annotation accepts nothing and says which.
        annotate(&fx, Some("next week: later")).await?;
        let status = fx
            .wait_status("the malformed annotation's warning", |s| {
                warned(s, "AcceptanceInvalid", ANNOTATION)
            })
            .await?;
        ensure!(
            status
                .condition(ConditionType::InstanceProfileReady)
                .is_some_and(|c| c.status == "False"),
            "a malformed acceptance accepted: {status:?}"
        );

        // Accepted until 45 s from now: healthy to kubectl wait, listed as accepted.
        let until = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(45);
        let until = until.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        annotate(
            &fx,
            Some(&format!(
                "{until}: the profile moves to its name next release"
            )),
        )
        .await?;
        let status = fx
            .wait_status("the ARN accepted", |s| {
                accepted_by(s, &format!("annotation {ANNOTATION}"))
            })
            .await?;
        let text = message(&status, ConditionType::InstanceProfileReady);
        ensure!(
            text.contains(&format!("until {until}")) && text.contains(&fx.profile_arn),
            "{text}"
        );
        ensure!(
            status
                .findings
                .iter()
                .all(|f| f.reason != "InstanceProfileIsArn")
        );
        kubectl(
            &fx.bed,
            &[
                "wait",
                "--for=condition=Ready",
                &format!("karpenterhealth/{}", fx.name),
                "--timeout=30s",
            ],
        )?;

        // At that time it counts again; the condition, a warning and the Event say why.
        let status = fx
            .wait_status("the acceptance expired", |s| {
                s.condition(ConditionType::InstanceProfileReady)
                    .is_some_and(|c| c.status == "False" && c.reason == "InstanceProfileIsArn")
                    && warned(s, "AcceptanceExpired", &until)
            })
            .await?;
        let text = message(&status, ConditionType::InstanceProfileReady);
        ensure!(
            text.contains("that has passed, so it counts again"),
            "{text}"
        );
        ensure!(status.accepted.is_empty());
        let events: Api<Event> = Api::namespaced(fx.admin.clone(), "default");
        let name = fx.name.clone();
        wait_for("the Event of the expiry", Duration::from_secs(30), || {
            let (events, name) = (events.clone(), name.clone());
            async move {
                let found = events
                    .list(&ListParams::default())
                    .await?
                    .items
                    .into_iter()
                    .find(|e| {
                        e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
                            && e.reason.as_deref() == Some("InstanceProfileIsArn")
                            && e.note
                                .as_deref()
                                .is_some_and(|n| n.contains("that has passed"))
                    });
                Ok(found)
            }
        })
        .await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_rule_accepts_for_the_classes_it_matches_and_the_switch_refuses_annotations()
-> Result<()> {
    let fx = Fixture::seed("fleet", "us-west-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        profile_as_arn(&fx).await?;
        annotate(&fx, Some("2099-01-31: the team's own")).await?;
        let pattern = format!("{}*", &fx.name[..fx.name.len() - 3]);
        let rules = karpenter_health_checks::acceptance::parse_fleet(&format!(
            r#"[{{"nodeClasses": "{pattern}", "reason": "InstanceProfileIsArn", "until": "2099-06-30", "why": "the platform accepts it"}}]"#
        ))
        .map_err(anyhow::Error::msg)?;
        let operator = fx
            .start_operator_with(None, |config| {
                config.evaluation.acceptances = karpenter_health_operator::config::FleetRules(rules);
                config.evaluation.accept_annotations = false;
            })
            .await?;
        let status = fx
            .wait_status("accepted by the fleet rule, the annotation refused", |s| {
                accepted_by(s, &format!("fleet rule 1 ({pattern})"))
                    && warned(s, "AcceptanceInvalid", "--accept-annotations=false")
            })
            .await?;
        ensure!(status.accepted.len() == 1, "{:?}", status.accepted);
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}

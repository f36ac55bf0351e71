//! The rendered status across every condition: a healthy setup comes out all True with no
//! findings and the detected environment, warnings never change a condition, and
//! `lastTransitionTime` moves only when a status flips. Pure.

use super::reasons::status;
use crate::evaluate;
use crate::facts::{Facts, Observed, Settings};
use crate::testing::*;
use karpenter_health_api::Severity;

#[test]
fn a_healthy_setup_comes_out_all_true_with_no_findings() {
    let status = status(&Facts::healthy());
    for c in &status.conditions {
        assert_eq!(c.status, "True", "{}: {} {}", c.type_, c.reason, c.message);
        assert_eq!(c.observed_generation, Some(1));
        assert_eq!(c.last_transition_time.0, now());
    }
    assert!(status.findings.is_empty(), "{:#?}", status.findings);
    assert_eq!(status.node_class_generation, Some(1));
    let detected = status.detected.expect("detected");
    assert_eq!(detected.cluster_name.as_deref(), Some(CLUSTER));
    assert_eq!(detected.karpenter_version.as_deref(), Some("1.8.6"));
    assert_eq!(detected.region.as_deref(), Some(REGION));
    assert_eq!(
        detected.authentication_mode.as_deref(),
        Some("API_AND_CONFIG_MAP")
    );
}

#[test]
fn warnings_never_change_a_condition() {
    let facts = Facts::healthy().with(|f| {
        if let Some(Observed::Found(r)) = &mut f.aws.node_role {
            r.attached_policy_arns = Observed::Found(
                [
                    "AmazonEKSWorkerNodePolicy",
                    "AmazonEKS_CNI_Policy",
                    "AmazonEC2ContainerRegistryReadOnly",
                ]
                .iter()
                .map(|p| managed_policy_arn(p))
                .collect(),
            );
        }
        f.aws.security_groups = Observed::Found(vec![
            security_group(
                "sg-0a",
                &[
                    ("karpenter.sh/discovery", CLUSTER),
                    ("kubernetes.io/cluster/demo", "owned"),
                ],
            ),
            security_group(
                "sg-0b",
                &[
                    ("karpenter.sh/discovery", CLUSTER),
                    ("kubernetes.io/cluster/demo", "shared"),
                ],
            ),
        ]);
    });
    let status = status(&facts);
    assert!(
        status.conditions.iter().all(|c| c.status == "True"),
        "{:#?}",
        status.conditions
    );
    let codes: Vec<&str> = status.findings.iter().map(|f| f.reason.as_str()).collect();
    assert_eq!(
        codes,
        [
            "NodeRoleMissingSsmPolicy",
            "MultipleSecurityGroupsTaggedForCluster",
            "SecurityGroupStatusStale"
        ]
    );
    assert!(
        status
            .findings
            .iter()
            .all(|f| f.severity == Severity::Warning)
    );
}

#[test]
fn last_transition_time_is_kept_while_the_status_holds_and_moves_when_it_flips() {
    let settings = Settings::default();
    let first = evaluate(&Facts::healthy(), &settings, None, mins_ago(10));
    let same = evaluate(&Facts::healthy(), &settings, Some(&first), now());
    assert_eq!(first.conditions, same.conditions);
    assert_eq!(same.last_evaluated.as_ref().map(|t| t.0), Some(now()));
    let broken = Facts::healthy().with(|f| f.aws.node_role = Some(Observed::Absent));
    let flipped = evaluate(&broken, &settings, Some(&same), now());
    for c in &flipped.conditions {
        // The controller's permissions name the node role: unknown without it.
        let moved =
            c.type_ == "NodeRoleReady" || c.type_ == "Ready" || c.type_ == "ControllerCanLaunch";
        let want = if moved { now() } else { mins_ago(10) };
        assert_eq!(c.last_transition_time.0, want, "{}", c.type_);
    }
}

#[test]
fn a_finding_keeps_the_time_it_was_first_seen_until_it_goes_away() {
    let settings = Settings::default();
    let broken = Facts::healthy().with(|f| f.aws.node_role = Some(Observed::Absent));
    let since = |status: &karpenter_health_api::KarpenterHealthStatus, reason: &str| {
        status
            .findings
            .iter()
            .find(|f| f.reason == reason)
            .and_then(|f| f.first_seen.as_ref().map(|t| t.0))
    };
    let first = evaluate(&broken, &settings, None, mins_ago(30));
    assert_eq!(since(&first, "NodeRoleNotFound"), Some(mins_ago(30)));
    let later = evaluate(&broken, &settings, Some(&first), mins_ago(10));
    assert_eq!(since(&later, "NodeRoleNotFound"), Some(mins_ago(30)));
    // A new finding next to it starts at its own time.
    let worse = broken.clone().with(|f| f.aws.security_groups = Observed::Found(Vec::new()));
    let both = evaluate(&worse, &settings, Some(&later), mins_ago(5));
    assert_eq!(since(&both, "NodeRoleNotFound"), Some(mins_ago(30)));
    let new_reasons: Vec<&str> = both
        .findings
        .iter()
        .filter(|f| f.first_seen.as_ref().map(|t| t.0) == Some(mins_ago(5)))
        .map(|f| f.reason.as_str())
        .collect();
    assert!(!new_reasons.is_empty(), "{:#?}", both.findings);
    assert!(new_reasons.iter().all(|r| *r != "NodeRoleNotFound"));
    // Gone, then back: it starts again.
    let fixed = evaluate(&Facts::healthy(), &settings, Some(&both), mins_ago(3));
    assert!(fixed.findings.is_empty(), "{:#?}", fixed.findings);
    let again = evaluate(&broken, &settings, Some(&fixed), now());
    assert_eq!(since(&again, "NodeRoleNotFound"), Some(now()));
}

//! The sentences of the shared reasons and of `Ready` (`sentences!`, in `tests/mod.rs`): given
//! these facts, this condition has this status and reason; each condition's own are in its test
//! file. `every_reason_is_proven_by_a_sentence` reads them all and fails when a reason has no
//! row. Pure.

use crate::evaluate;
use crate::facts::{Facts, Observed, Settings, UnknownCause};
use crate::testing::*;
use karpenter_health_api::{
    ConditionStatus, ConditionType, KarpenterHealthStatus, Reason, Severity,
};

/// What the sentences of every test file use (a glob, so a file uses what it needs).
pub(super) mod prelude {
    pub(crate) use crate::facts::{Facts, Observed, Setting, UnknownCause};
    pub(crate) use crate::testing::*;
}

/// Evaluates `facts` at the fixture's `now` with default settings.
pub(crate) fn status(facts: &Facts) -> KarpenterHealthStatus {
    evaluate(facts, &Settings::default(), None, now())
}

/// One condition of `facts`' evaluation: its status, reason and message, and the codes of the
/// warnings its check reported.
pub(crate) fn condition_of(
    facts: &Facts,
    ty: ConditionType,
) -> (String, String, String, Vec<String>) {
    let s = status(facts);
    let c = s.condition(ty).expect("every condition is present");
    let warnings = s
        .findings
        .iter()
        .filter(|f| f.condition_type == ty && f.severity == Severity::Warning)
        .map(|f| f.reason.clone())
        .collect();
    (
        c.status.clone(),
        c.reason.clone(),
        c.message.clone(),
        warnings,
    )
}

/// Asserts the condition's status and reason, that a False reason comes with an Error finding,
/// and that `Ready` agrees.
pub(crate) fn expect(facts: Facts, ty: ConditionType, want: ConditionStatus, reason: Reason) {
    let status = status(&facts);
    let c = status.condition(ty).expect("every condition is present");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        (want.as_str(), reason.as_str()),
        "{ty}: {}",
        c.message
    );
    assert!(!c.message.is_empty(), "{ty} has an empty message");
    if want == ConditionStatus::False && ty != ConditionType::Ready {
        assert!(
            status.findings.iter().any(|f| f.condition_type == ty
                && f.severity == Severity::Error
                && f.reason == reason.as_str()),
            "{ty} False without an Error finding: {:#?}",
            status.findings
        );
        let ready = status.condition(ConditionType::Ready).expect("Ready");
        assert_eq!(ready.status, "False");
    }
}

fn break_aws(f: &mut Facts, cause: UnknownCause) {
    f.aws.node_role = Some(unknown(cause));
}

/// The sentences of the shared causes and of `Ready`.
pub(crate) mod by_reason {
    use super::*;

    sentences! {
        // Shared Unknown causes.
        an_iam_access_denied_makes_node_role_ready_unknown_with_aws_access_denied:
            Facts::healthy().with(|f| break_aws(f, UnknownCause::AccessDenied))
            => NodeRoleReady is Unknown because AwsAccessDenied;
        a_throttled_security_group_lookup_makes_security_groups_ready_unknown_with_aws_throttled:
            Facts::healthy().with(|f| f.aws.security_groups = unknown(UnknownCause::Throttled))
            => SecurityGroupsReady is Unknown because AwsThrottled;
        an_unreachable_iam_makes_instance_profile_ready_unknown_with_aws_unavailable:
            Facts::healthy().with(|f| f.aws.instance_profile = Some(unknown(UnknownCause::Unavailable)))
            => InstanceProfileReady is Unknown because AwsUnavailable;
        an_endpoint_without_access_entries_in_api_mode_makes_node_role_mapped_unknown_with_aws_unsupported:
            Facts::healthy().with_authentication_mode(Some("API"))
                .with(|f| f.aws.node_role_access_entries = unknown(UnknownCause::Unsupported))
            => NodeRoleMapped is Unknown because AwsUnsupported;
        an_unsynced_aws_auth_watch_makes_node_role_mapped_unknown_with_not_observed:
            Facts::healthy().with_authentication_mode(None)
                .with(|f| f.cluster.aws_auth = unknown(UnknownCause::NotObserved))
            => NodeRoleMapped is Unknown because NotObserved;
        an_unreadable_karpenter_image_tag_in_an_isolated_region_is_karpenter_version_unknown:
            Facts::healthy().with_region("us-iso-east-1").with_karpenter_version("latest")
            => MetadataOptionsSupported is Unknown because KarpenterVersionUnknown;
        karpenter_settings_without_a_cluster_name_make_cluster_identity_unknown_with_cluster_name_unknown:
            Facts::healthy().with(|f| if let Observed::Found(k) = &mut f.cluster.karpenter { k.cluster_name = None })
            => ClusterIdentityUnique is Unknown because ClusterNameUnknown;
        an_operator_without_a_region_cannot_judge_metadata_options_and_says_region_unknown:
            Facts::healthy().with(|f| f.aws.region = None)
            => MetadataOptionsSupported is Unknown because RegionUnknown;

        an_unevaluable_condition_in_the_queue_policy_is_policy_undecided:
            Facts::healthy().with_interruption_queue(QUEUE, Some(Observed::Found(crate::facts::QueueFacts {
                policy: Some(r#"{"Statement":[{"Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"*","Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}]}"#.into()),
                ..healthy_queue()
            })))
            => InterruptionHandlingReady is Unknown because PolicyUndecided;

        // Accepted findings (acceptance.rs).
        an_instance_profile_arn_accepted_until_a_date_is_finding_accepted:
            Facts::healthy().with_instance_profile_spec("arn:aws:iam::111122223333:instance-profile/p", false)
                .with_acceptance("InstanceProfileIsArn", "2099-01-31: the profile moves to a name in the next release")
            => InstanceProfileReady is True because FindingAccepted;

        // Ready.
        an_accepted_finding_alone_is_passed_with_accepted_findings:
            Facts::healthy().with_node_pool_label("karpenter.sh/team", "a")
                .with_acceptance("RestrictedLabelDomain", "2099-01-31: the label goes with the next NodePool release")
            => Ready is True because PassedWithAcceptedFindings;
        all_sub_conditions_true_is_all_checks_passed:
            Facts::healthy() => Ready is True because AllChecksPassed;
        one_false_sub_condition_names_its_reason_on_ready:
            Facts::healthy().with_instance_profile_spec("arn:aws:iam::111122223333:instance-profile/p", false)
            => Ready is False because InstanceProfileIsArn;
        false_sub_conditions_with_different_reasons_are_multiple_checks_failed:
            Facts::healthy()
                .with_instance_profile_spec("arn:aws:iam::111122223333:instance-profile/p", false)
                .with(|f| f.aws.security_groups = Observed::Found(vec![security_group("sg-0unrelated", &[("team", "x")])]))
            => Ready is False because MultipleChecksFailed;
        one_unknown_and_no_false_sub_condition_names_its_cause_on_ready:
            Facts::healthy().with(|f| f.aws.security_groups = unknown(UnknownCause::Throttled))
            => Ready is Unknown because AwsThrottled;
        unknown_sub_conditions_with_different_causes_are_multiple_checks_unknown:
            Facts::healthy().with(|f| {
                f.aws.security_groups = unknown(UnknownCause::Throttled);
                f.aws.node_role = Some(unknown(UnknownCause::AccessDenied));
            })
            => Ready is Unknown because MultipleChecksUnknown;
    }
}

#[test]
fn not_ready_names_the_false_then_the_unknown_sub_conditions_and_is_absent_when_ready() {
    assert_eq!(status(&Facts::healthy()).not_ready, None);
    let broken = Facts::healthy()
        .with_instance_profile_spec("arn:aws:iam::111122223333:instance-profile/p", false)
        .with(|f| f.aws.security_groups = unknown(UnknownCause::Throttled));
    assert_eq!(status(&broken).not_ready.as_deref(), Some("Profile,SGs?"));
}

#[test]
fn the_pending_status_before_the_first_evaluation_is_pending() {
    let outcomes = [];
    let status = crate::render::render(&Facts::healthy(), &outcomes, Vec::new(), None, now());
    for &ty in ConditionType::sub_conditions() {
        assert_eq!(
            status.condition(ty).map(|c| c.reason.as_str()),
            Some("Pending")
        );
    }
}

/// The reasons the `sentences!` of every test file prove: what follows `because` in them.
fn proven_reasons() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tests");
    let mut proven = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("src/tests is readable") {
        let path = entry.expect("a directory entry").path();
        let Ok(source) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Some((_, sentences)) = source.split_once("sentences! {") else {
            continue;
        };
        proven.extend(sentences.split(" because ").skip(1).filter_map(|rest| {
            let (reason, _) = rest.split_once(';')?;
            Some(reason.trim().to_owned())
        }));
    }
    proven
}

#[test]
fn every_reason_is_proven_by_a_sentence() {
    let proven = proven_reasons();
    assert!(proven.contains(&"InstanceProfileIsArn".to_owned()), "{proven:?}");
    let mut missing: Vec<Reason> = Reason::ALL
        .iter()
        .copied()
        .filter(|r| !proven.iter().any(|p| p == r.as_str()) && *r != Reason::Pending)
        .collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "reasons without a sentence test (a `sentences!` row in the condition's test file): {missing:?}"
    );
}

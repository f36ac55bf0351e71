//! The rules: one module per sub-condition, each a pure function from the facts to an
//! [`Outcome`] (status, reason, message, findings). No IO.
//!
//! Every rule follows the same discipline, enforced by [`Check`]: a problem proven by observed
//! facts makes the condition `False`; a fact that could not be observed makes it `Unknown` with
//! the shared reason of its cause, never `False`; warnings are findings only.

pub mod amis;
pub mod capacity_reservations;
pub mod cluster_identity;
pub mod controller_can_launch;
pub mod drift;
pub mod instance_profile;
pub mod instance_types;
pub mod interruption_handling;
pub mod karpenter_status;
pub mod karpenter_version;
pub mod labels_allowed;
pub mod limits;
pub mod metadata_options;
pub mod node_network;
pub mod node_role;
pub mod node_role_mapped;
pub mod nodeclaims_registered;
pub mod security_groups;
pub mod spot_ready;
pub mod subnets;
pub mod terminating;
pub mod volume_encryption;

use crate::facts::{Facts, Observed, Settings, UnknownCause, Unobserved};
use crate::warnings::Warning;
use crate::{arn, clip, version};
use jiff::{SignedDuration, Timestamp};
use karpenter_health_api::karpenter::{KarpenterCondition, find_condition};
use karpenter_health_api::{ConditionStatus, ConditionType, Finding, Reason, Severity, SubjectRef};
use semver::Version;

/// At most this many problem messages are joined into one condition message; the rest are in
/// `status.findings`.
const MAX_MESSAGES_PER_CONDITION: usize = 5;
/// Subjects kept per finding (the API allows 10).
pub(crate) const MAX_SUBJECTS: usize = 10;

/// What one rule concluded about its condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub condition: ConditionType,
    pub status: ConditionStatus,
    pub reason: Reason,
    pub message: String,
    pub findings: Vec<Finding>,
}

/// Runs every rule, in `ConditionType::sub_conditions()` order. `Ready` is folded by the
/// renderer.
pub fn evaluate_all(facts: &Facts, settings: &Settings, now: Timestamp) -> Vec<Outcome> {
    let ctx = Context::new(facts, settings, now);
    let mut outcomes = vec![
        instance_profile::check(&ctx),
        node_role::check(&ctx),
        node_role_mapped::check(&ctx),
        security_groups::check(&ctx),
        cluster_identity::check(&ctx),
        metadata_options::check(&ctx),
        labels_allowed::check(&ctx),
        karpenter_status::check(&ctx),
    ];
    // Registration problems are explained by the other outcomes, so this rule runs last.
    let registration = nodeclaims_registered::check(&ctx, &outcomes);
    outcomes.push(registration);
    // The controller's own wiring (issue 11): after registration in `ConditionType::ALL` order.
    outcomes.push(controller_can_launch::check(&ctx));
    outcomes.push(interruption_handling::check(&ctx));
    outcomes.push(spot_ready::check(&ctx));
    // Where nodes land (issue 12).
    outcomes.push(subnets::check(&ctx));
    outcomes.push(node_network::check(&ctx));
    // What a launched node needs to boot and what this Karpenter needs to run (issue 12).
    outcomes.push(volume_encryption::check(&ctx));
    outcomes.push(karpenter_version::check(&ctx));
    // Before a launch fails (issue 25): whether the NodePools leave any instance type.
    outcomes.push(instance_types::check(&ctx));
    outcomes.push(limits::check(&ctx));
    outcomes.push(drift::check(&ctx));
    outcomes.push(amis::check(&ctx));
    outcomes.push(capacity_reservations::check(&ctx));
    debug_assert!(
        outcomes
            .iter()
            .map(|o| o.condition)
            .eq(ConditionType::sub_conditions().iter().copied())
    );
    outcomes
}

/// The shared `Unknown` reason for a cause.
pub fn unknown_reason(cause: UnknownCause) -> Reason {
    match cause {
        UnknownCause::AccessDenied => Reason::AwsAccessDenied,
        UnknownCause::Throttled => Reason::AwsThrottled,
        UnknownCause::Unavailable => Reason::AwsUnavailable,
        UnknownCause::Unsupported => Reason::AwsUnsupported,
        UnknownCause::NotObserved => Reason::NotObserved,
        UnknownCause::OtherAccount => Reason::AwsOtherAccount,
    }
}

fn cause_text(cause: UnknownCause) -> &'static str {
    match cause {
        UnknownCause::AccessDenied => "access denied",
        UnknownCause::Throttled => "throttled",
        UnknownCause::Unavailable => "endpoint unavailable",
        UnknownCause::Unsupported => "call not supported by the endpoint",
        UnknownCause::NotObserved => "not observed yet",
        UnknownCause::OtherAccount => "in another account",
    }
}

/// Why a condition is `Unknown`: a shared (or condition-specific `Unknown`) reason and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Why {
    pub reason: Reason,
    pub message: String,
}

impl Why {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }

    /// `what` could not be observed; the message names the cause and the failing call.
    pub fn unobserved(what: &str, u: &Unobserved) -> Self {
        Self {
            reason: unknown_reason(u.cause),
            message: format!(
                "{what} could not be observed ({}): {}.",
                cause_text(u.cause),
                clip(u.detail.trim_end_matches('.'), 512)
            ),
        }
    }
}

struct Failure {
    reason: Reason,
    message: String,
    subjects: Vec<SubjectRef>,
}

/// Accumulates one rule's verdict: failures (proven problems), unknowns and warnings.
pub(crate) struct Check {
    condition: ConditionType,
    check: &'static str,
    failures: Vec<Failure>,
    unknowns: Vec<Why>,
    warnings: Vec<Finding>,
}

impl Check {
    pub fn new(condition: ConditionType, check: &'static str) -> Self {
        Self {
            condition,
            check,
            failures: Vec::new(),
            unknowns: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// A problem proven by observed facts. The first failure recorded names the condition's
    /// reason, so rules record them in order of precedence.
    pub fn fail(&mut self, reason: Reason, message: impl Into<String>, subjects: Vec<SubjectRef>) {
        debug_assert_eq!(reason.meta().status, ConditionStatus::False, "{reason}");
        self.failures.push(Failure {
            reason,
            message: message.into(),
            subjects,
        });
    }

    /// A fact the verdict needs is unknown.
    pub fn unknown(&mut self, why: Why) {
        debug_assert_eq!(
            why.reason.meta().status,
            ConditionStatus::Unknown,
            "{}",
            why.reason
        );
        if !self.unknowns.contains(&why) {
            self.unknowns.push(why);
        }
    }

    /// Whether `warning` was recorded, so a True message can leave out what it contradicts.
    pub fn warned(&self, warning: Warning) -> bool {
        self.warnings.iter().any(|w| w.reason == warning.as_str())
    }

    pub fn warn(
        &mut self,
        warning: Warning,
        message: impl Into<String>,
        subjects: Vec<SubjectRef>,
    ) {
        debug_assert_eq!(warning.condition(), self.condition);
        self.warnings.push(Finding {
            check: self.check.to_owned(),
            severity: Severity::Warning,
            condition_type: self.condition,
            reason: warning.as_str().to_owned(),
            message: message.into(),
            remediation: warning.remediation().to_owned(),
            subjects,
        });
    }

    pub fn has_failed(&self) -> bool {
        !self.failures.is_empty()
    }

    /// Whether a warning was recorded: a True message must then not claim what it contradicts.
    pub fn has_warnings(&self) -> bool {
        !self.warnings.is_empty()
    }

    /// The outcome: `False` on any failure, else `Unknown` on any unknown, else `True` with
    /// `ok` and `ok_message`.
    pub fn finish(self, ok: Reason, ok_message: impl Into<String>) -> Outcome {
        let Check {
            condition,
            check,
            failures,
            unknowns,
            warnings,
        } = self;
        let (status, reason, message) = if let Some(first) = failures.first() {
            let messages = failures.iter().map(|f| f.message.as_str());
            (
                ConditionStatus::False,
                first.reason,
                join_bounded(messages, failures.len()),
            )
        } else if let Some(first) = unknowns.first() {
            let messages = unknowns.iter().map(|u| u.message.as_str());
            (
                ConditionStatus::Unknown,
                first.reason,
                join_bounded(messages, unknowns.len()),
            )
        } else {
            (ConditionStatus::True, ok, ok_message.into())
        };
        debug_assert!(reason.applies_to(condition), "{reason} on {condition}");
        debug_assert_eq!(reason.meta().status, status, "{reason}");
        let mut findings: Vec<Finding> = failures
            .into_iter()
            .map(|f| Finding {
                check: check.to_owned(),
                severity: Severity::Error,
                condition_type: condition,
                reason: f.reason.as_str().to_owned(),
                message: f.message,
                remediation: f.reason.meta().remediation.to_owned(),
                subjects: f.subjects,
            })
            .collect();
        findings.extend(warnings);
        Outcome {
            condition,
            status,
            reason,
            message,
            findings,
        }
    }
}

fn join_bounded<'a>(messages: impl Iterator<Item = &'a str>, total: usize) -> String {
    let mut out: Vec<&str> = messages.take(MAX_MESSAGES_PER_CONDITION).collect();
    let more;
    if total > MAX_MESSAGES_PER_CONDITION {
        more = format!(
            "({} more in status.findings.)",
            total - MAX_MESSAGES_PER_CONDITION
        );
        out.push(&more);
    }
    out.join(" ")
}

/// Lists at most `max` items, then "and N more".
pub(crate) fn list_bounded<S: AsRef<str>>(items: &[S], max: usize) -> String {
    let shown: Vec<&str> = items.iter().take(max).map(AsRef::as_ref).collect();
    match items.len().saturating_sub(max) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// A point in time for messages, to the second (`2026-11-22T21:10:05Z`). Messages carry absolute
/// times, never ages: an unchanged finding then keeps its exact message, so the status is not
/// rewritten and no Event fires again on every evaluation.
pub(crate) fn at(t: jiff::Timestamp) -> String {
    format!("{t:.0}")
}

/// A duration for humans: `3d4h`, `2h5m`, `12m`, `40s`.
pub(crate) fn human(d: SignedDuration) -> String {
    let secs = d.as_secs().max(0);
    let (days, hours, mins) = (secs / 86_400, secs % 86_400 / 3_600, secs % 3_600 / 60);
    match (days, hours, mins) {
        (0, 0, 0) => format!("{secs}s"),
        (0, 0, m) => format!("{m}m"),
        (0, h, 0) => format!("{h}h"),
        (0, h, m) => format!("{h}h{m}m"),
        (d, 0, _) => format!("{d}d"),
        (d, h, _) => format!("{d}d{h}h"),
    }
}

/// Where the node role's name comes from, and whether it is known.
#[derive(Clone, Debug)]
pub(crate) enum RoleName {
    Known(String),
    /// A fact needed to learn it could not be observed.
    Unobserved(Why),
    /// The observed facts say there is no role to check (e.g. the profile holds none).
    Unresolvable(String),
}

/// Facts derived once and shared by several rules.
pub(crate) struct Context<'a> {
    pub facts: &'a Facts,
    pub settings: &'a Settings,
    pub now: Timestamp,
    pub node_class_name: &'a str,
    /// The installed Karpenter's version.
    pub version: Result<Version, Why>,
    /// The cluster name Karpenter is configured with.
    pub karpenter_cluster_name: Result<&'a str, Why>,
    /// This cluster's name: the operator's flag, else Karpenter's setting.
    pub cluster_name: Result<&'a str, Why>,
    pub node_role: RoleName,
}

impl<'a> Context<'a> {
    pub fn new(facts: &'a Facts, settings: &'a Settings, now: Timestamp) -> Self {
        let karpenter_cluster_name = karpenter_cluster_name(facts);
        let cluster_name = match facts.cluster.configured_cluster_name.as_deref() {
            Some(name) if !name.is_empty() => Ok(name),
            _ => karpenter_cluster_name.clone(),
        };
        Self {
            facts,
            settings,
            now,
            node_class_name: facts
                .cluster
                .node_class
                .metadata
                .name
                .as_deref()
                .unwrap_or_default(),
            version: karpenter_version(facts),
            karpenter_cluster_name,
            cluster_name,
            node_role: node_role_name(facts),
        }
    }

    pub fn node_class_subject(&self) -> SubjectRef {
        SubjectRef::new("EC2NodeClass", self.node_class_name)
    }

    /// One of Karpenter's own conditions on the EC2NodeClass.
    pub fn karpenter_condition(&self, type_: &str) -> Option<&'a KarpenterCondition> {
        let status = self.facts.cluster.node_class.status.as_ref()?;
        find_condition(&status.conditions, type_)
    }

    pub fn karpenter_condition_status(&self, type_: &str) -> Option<ConditionStatus> {
        self.karpenter_condition(type_)
            .map(|c| ConditionStatus::parse(&c.status))
    }

    /// How long ago `t` was (negative durations, from clock skew, count as zero).
    pub fn age(&self, t: Timestamp) -> SignedDuration {
        self.now.duration_since(t).max(SignedDuration::ZERO)
    }
}

fn karpenter_version(facts: &Facts) -> Result<Version, Why> {
    match &facts.cluster.karpenter {
        Observed::Unknown(u) => Err(Why::unobserved("The Karpenter controller", u)),
        Observed::Absent => Err(Why::new(
            Reason::KarpenterVersionUnknown,
            "No Karpenter controller was found, so its version is unknown.",
        )),
        Observed::Found(k) => match k.version.as_deref() {
            None => Err(Why::new(
                Reason::KarpenterVersionUnknown,
                "The Karpenter controller's version could not be read from its image.",
            )),
            Some(raw) => version::parse(raw).map_err(|e| {
                Why::new(
                    Reason::KarpenterVersionUnknown,
                    format!("The Karpenter version {e}."),
                )
            }),
        },
    }
}

fn karpenter_cluster_name(facts: &Facts) -> Result<&str, Why> {
    match &facts.cluster.karpenter {
        Observed::Unknown(u) => Err(Why::unobserved("The Karpenter controller's settings", u)),
        Observed::Absent => Err(Why::new(
            Reason::ClusterNameUnknown,
            "No Karpenter controller was found, so its cluster name is unknown.",
        )),
        Observed::Found(k) => match k.cluster_name.as_deref() {
            Some(name) if !name.is_empty() => Ok(name),
            _ => Err(Why::new(
                Reason::ClusterNameUnknown,
                "Karpenter's settings carry no cluster name.",
            )),
        },
    }
}

fn node_role_name(facts: &Facts) -> RoleName {
    let spec = &facts.cluster.node_class.spec;
    if let Some(role) = spec.role.as_deref().filter(|r| !r.is_empty()) {
        return RoleName::Known(arn::name_of(role).to_owned());
    }
    if let Some(Observed::Found(role)) = &facts.aws.node_role {
        return RoleName::Known(role.name.clone());
    }
    let Some(profile) = spec.instance_profile.as_deref() else {
        return RoleName::Unresolvable(
            "The EC2NodeClass names neither spec.role nor spec.instanceProfile.".into(),
        );
    };
    // An ARN is looked up by the name in it, so its answer resolves the role like a name's.
    let profile = clip(profile, 128);
    match &facts.aws.instance_profile {
        None => RoleName::Unobserved(Why::new(
            Reason::NotObserved,
            format!("Instance profile {profile} has not been looked up yet."),
        )),
        Some(Observed::Unknown(u)) => {
            RoleName::Unobserved(Why::unobserved(&format!("Instance profile {profile}"), u))
        }
        Some(Observed::Absent) => RoleName::Unresolvable(format!(
            "Instance profile {profile} does not exist, so it names no node role."
        )),
        Some(Observed::Found(p)) => match p.roles.first() {
            Some(role) => RoleName::Known(role.name.clone()),
            None => RoleName::Unresolvable(format!("Instance profile {profile} holds no role.")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unknown_cause_maps_to_an_unknown_reason_for_every_sub_condition() {
        for cause in [
            UnknownCause::AccessDenied,
            UnknownCause::Throttled,
            UnknownCause::Unavailable,
            UnknownCause::Unsupported,
            UnknownCause::NotObserved,
            UnknownCause::OtherAccount,
        ] {
            let reason = unknown_reason(cause);
            assert_eq!(reason.meta().status, ConditionStatus::Unknown);
            for &c in ConditionType::sub_conditions() {
                assert!(reason.applies_to(c), "{reason} on {c}");
            }
        }
    }

    #[test]
    fn durations_read_like_a_human_wrote_them() {
        assert_eq!(human(SignedDuration::from_secs(40)), "40s");
        assert_eq!(human(SignedDuration::from_mins(12)), "12m");
        assert_eq!(human(SignedDuration::from_mins(125)), "2h5m");
        assert_eq!(human(SignedDuration::from_hours(76)), "3d4h");
        assert_eq!(human(SignedDuration::from_secs(-5)), "0s");
        let t = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        assert_eq!(at(t), "2027-01-15T08:00:00Z");
    }

    #[test]
    fn long_lists_are_bounded() {
        let items: Vec<String> = (0..8).map(|i| format!("i-{i}")).collect();
        assert_eq!(list_bounded(&items, 3), "i-0, i-1, i-2 and 5 more");
        assert_eq!(list_bounded(&items[..2], 3), "i-0, i-1");
    }
}

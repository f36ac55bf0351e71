//! A rule's verdict and how it is accumulated: [`Check`] turns proven problems into `False`,
//! facts that could not be observed into `Unknown` with their cause ([`Why`]), and warnings into
//! findings only, then [`Outcome`]. Pure, no IO.

use crate::clip;
use crate::facts::{Observed, UnknownCause, Unobserved};
use crate::plan::Context;
use crate::warnings::Warning;
use karpenter_health_api::karpenter::NodePool;
use karpenter_health_api::{ConditionStatus, ConditionType, Finding, Reason, Severity, SubjectRef};

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
    /// When failures decided a `False`, the first fact the check could not see as well (its
    /// reason and message): what the condition is once every failure is accepted.
    pub unknown_beneath: Option<(Reason, String)>,
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
            first_seen: None,
        });
    }

    pub fn has_failed(&self) -> bool {
        !self.failures.is_empty()
    }

    /// Whether a warning was recorded: a True message must then not claim what it contradicts.
    pub fn has_warnings(&self) -> bool {
        !self.warnings.is_empty()
    }

    /// The class's NodePools sorted by name, when there are any; else the outcome: `True` with
    /// `ok` when no NodePool uses the class, `Unknown` with the cause when they are not known.
    pub fn node_pools(
        mut self,
        pools: &Observed<Vec<NodePool>>,
        ok: Reason,
    ) -> Result<(Self, Vec<&NodePool>), Outcome> {
        match pools {
            Observed::Found(pools) if !pools.is_empty() => {
                let mut pools: Vec<&NodePool> = pools.iter().collect();
                pools.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
                Ok((self, pools))
            }
            Observed::Found(_) | Observed::Absent => {
                Err(self.finish(ok, "No NodePool uses this EC2NodeClass."))
            }
            Observed::Unknown(u) => {
                self.unknown(Why::unobserved("The NodePools of this EC2NodeClass", u));
                Err(self.finish(ok, ""))
            }
        }
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
                first_seen: None,
            })
            .collect();
        findings.extend(warnings);
        let unknown_beneath = (status == ConditionStatus::False)
            .then(|| unknowns.first().map(|u| (u.reason, u.message.clone())))
            .flatten();
        Outcome {
            condition,
            status,
            reason,
            message,
            findings,
            unknown_beneath,
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
}

/// How a rule runs: from the facts alone, or also from the outcomes of the rules before it in
/// `ConditionType::sub_conditions()` order (registration problems are explained by those).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Run {
    Alone(fn(&Context) -> Outcome),
    AfterEarlier(fn(&Context, &[Outcome]) -> Outcome),
}

/// One rule: the sub-condition it decides and how it runs. Each rule module declares its own as
/// `RULE`, and the crate's build script lists every module's `RULE` into `rules::RULES`, so the
/// registry is no list kept by hand.
#[derive(Debug)]
pub(crate) struct Rule {
    pub(crate) condition: ConditionType,
    pub(crate) run: Run,
}

impl Rule {
    /// A rule judged from the facts alone.
    pub(crate) const fn alone(condition: ConditionType, check: fn(&Context) -> Outcome) -> Self {
        Self {
            condition,
            run: Run::Alone(check),
        }
    }

    /// A rule that also reads the outcomes of the rules before it.
    pub(crate) const fn after_earlier(
        condition: ConditionType,
        check: fn(&Context, &[Outcome]) -> Outcome,
    ) -> Self {
        Self {
            condition,
            run: Run::AfterEarlier(check),
        }
    }
}

//! Accepted findings. A team accepts a finding on the EC2NodeClass it owns, with an annotation
//! `accept.karpenter-health.io/<Reason or warning>: "<until>: <why>"`; a platform team accepts
//! one for many classes with a fleet rule (the chart's `acceptances.rules`). Until its date an
//! accepted finding stays visible in `status.accepted` but stops counting: its condition is
//! `True` with reason `FindingAccepted`, `Ready` does not fold it in, and no alert fires. After the
//! date it counts again and a warning says so. What cannot be read accepts nothing and is a
//! warning naming it; so is an acceptance its check did not find. Pure: no IO, `now` passed in.
//!
//! Only what a check proved can be accepted: the reason of a `False`, or a warning. An `Unknown`
//! (the check could not see) never is: there is nothing proven to accept.

use crate::verdict::Outcome;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_health_api::conditions::ReasonScope;
use karpenter_health_api::{
    AcceptedFinding, ConditionStatus, ConditionType, Finding, Reason, Severity, SubjectRef, Warning,
};

/// The one condition a reason belongs to; `None` for the shared reasons.
fn condition_of(reason: Reason) -> Option<ConditionType> {
    match reason.meta().scope {
        ReasonScope::Only(c) => Some(c),
        ReasonScope::AnySubCondition => None,
    }
}
use std::collections::BTreeMap;

/// The annotation prefix: the name after it is the reason or warning accepted.
pub const ANNOTATION_PREFIX: &str = "accept.karpenter-health.io/";

/// What an acceptance names: the reason of a `False`, or a warning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accepted {
    Reason(Reason),
    Warning(Warning),
}

impl Accepted {
    /// The reason or warning called `name`, if it is one a finding can carry: a `False` reason
    /// of one condition, or a warning. Shared reasons are causes of `Unknown` and are refused.
    pub fn named(name: &str) -> Result<Self, String> {
        if let Some(&reason) = Reason::ALL.iter().find(|r| r.as_str() == name) {
            return if reason.meta().status == ConditionStatus::False
                && condition_of(reason).is_some()
            {
                Ok(Accepted::Reason(reason))
            } else {
                Err(format!(
                    "{name} is not a finding: only the reason of a False condition or a warning can be accepted"
                ))
            };
        }
        Warning::ALL
            .iter()
            .find(|w| w.as_str() == name)
            .map(|&w| Accepted::Warning(w))
            .ok_or_else(|| format!("{name} is no reason or warning of karpenter-health"))
    }

    pub fn name(self) -> &'static str {
        match self {
            Accepted::Reason(r) => r.as_str(),
            Accepted::Warning(w) => w.as_str(),
        }
    }

    pub fn condition(self) -> ConditionType {
        match self {
            // `named` admits only reasons of one condition.
            Accepted::Reason(r) => condition_of(r).unwrap_or(ConditionType::Ready),
            Accepted::Warning(w) => w.condition(),
        }
    }
}

/// One acceptance in force for a class.
#[derive(Clone, Debug, PartialEq)]
pub struct Acceptance {
    pub what: Accepted,
    /// `None`: for this evaluation only (`check --accept`).
    pub until: Option<Timestamp>,
    /// The end as its author wrote it, for messages (`2027-01-31` means through that day).
    pub until_text: String,
    pub why: String,
    /// Who accepted it, as `status.accepted[].source` names it.
    pub source: String,
}

/// A platform team's acceptance for the classes whose names match `nodeClasses` (`*` matches
/// any run of characters), as the chart's `acceptances.rules` gives it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetRule {
    pub node_classes: String,
    pub reason: String,
    pub until: String,
    pub why: String,
}

/// Where acceptances may come from.
#[derive(Clone, Debug, PartialEq)]
pub struct AcceptancePolicy {
    /// Whether the classes' own annotations count (a platform team may forbid them).
    pub annotations_allowed: bool,
    pub fleet: Vec<FleetRule>,
    /// `check --accept`: for one run, every class, no date.
    pub one_shot: Vec<Accepted>,
}

impl Default for AcceptancePolicy {
    fn default() -> Self {
        Self {
            annotations_allowed: true,
            fleet: Vec::new(),
            one_shot: Vec::new(),
        }
    }
}

/// Reads the fleet rules as the operator is given them (a JSON list).
pub fn parse_fleet(json: &str) -> Result<Vec<FleetRule>, String> {
    if json.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str(json).map_err(|e| {
        format!("the acceptance rules are not a list of {{nodeClasses, reason, until, why}}: {e}")
    })
}

/// The end of an acceptance: a date (`2027-01-31`, accepted through that day, UTC) or an RFC
/// 3339 time.
pub fn parse_until(text: &str) -> Result<Timestamp, String> {
    let text = text.trim();
    if let Ok(date) = text.parse::<jiff::civil::Date>() {
        return date
            .tomorrow()
            .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC))
            .map(|z| z.timestamp())
            .map_err(|e| format!("{text:?}: {e}"));
    }
    text.parse::<Timestamp>().map_err(|_| {
        format!("{text:?} is not a date such as 2027-01-31 or a time such as 2027-01-31T18:00:00Z")
    })
}

/// How many of `class_names` each fleet rule's pattern matches, in the rules' order: a rule that
/// matches none is stale or mistyped, and no class can report it (each reports only the rules
/// that match it), so the operator exports the counts.
pub fn fleet_rule_matches<'a>(
    rules: &[FleetRule],
    class_names: impl Iterator<Item = &'a str> + Clone,
) -> Vec<usize> {
    rules
        .iter()
        .map(|rule| {
            class_names
                .clone()
                .filter(|name| matches(&rule.node_classes, name))
                .count()
        })
        .collect()
}

/// `*` matches any run of characters; everything else itself.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => {
            name.starts_with(head)
                && (0..=name.len() - head.len()).any(|i| {
                    name.is_char_boundary(head.len() + i) && matches(rest, &name[head.len() + i..])
                })
        }
    }
}

/// The acceptances that apply to class `name`, and a warning for each that cannot be read.
fn collect(
    name: &str,
    annotations: Option<&BTreeMap<String, String>>,
    policy: &AcceptancePolicy,
) -> (Vec<Acceptance>, Vec<String>) {
    let mut found = Vec::new();
    let mut invalid = Vec::new();
    for (key, value) in annotations.into_iter().flatten() {
        let Some(what) = key.strip_prefix(ANNOTATION_PREFIX) else {
            continue;
        };
        let source = format!("annotation {key}");
        if !policy.annotations_allowed {
            invalid.push(format!(
                "{source} accepts nothing: this operator takes acceptances only from its fleet rules (--accept-annotations=false)."
            ));
            continue;
        }
        let read = Accepted::named(what).and_then(|what| {
            let (until, why) = value
                .split_once(": ")
                .ok_or_else(|| format!("{value:?} is not \"<until>: <why>\""))?;
            let why = why.trim();
            if why.is_empty() {
                return Err("it gives no reason after the date".to_owned());
            }
            Ok(Acceptance {
                what,
                until: Some(parse_until(until)?),
                until_text: until.trim().to_owned(),
                why: why.to_owned(),
                source: source.clone(),
            })
        });
        match read {
            Ok(a) => found.push(a),
            Err(e) => invalid.push(format!("{source} accepts nothing: {e}.")),
        }
    }
    for (i, rule) in policy.fleet.iter().enumerate() {
        if !matches(&rule.node_classes, name) {
            continue;
        }
        let source = format!("fleet rule {} ({})", i + 1, rule.node_classes);
        let read = Accepted::named(&rule.reason).and_then(|what| {
            if rule.why.trim().is_empty() {
                return Err("it gives no reason (why)".to_owned());
            }
            Ok(Acceptance {
                what,
                until: Some(parse_until(&rule.until)?),
                until_text: rule.until.trim().to_owned(),
                why: rule.why.trim().to_owned(),
                source: source.clone(),
            })
        });
        match read {
            Ok(a) => found.push(a),
            Err(e) => invalid.push(format!("{source} accepts nothing: {e}.")),
        }
    }
    found.extend(policy.one_shot.iter().map(|&what| Acceptance {
        what,
        until: None,
        until_text: String::new(),
        why: "accepted for this run".to_owned(),
        source: "check --accept".to_owned(),
    }));
    (found, invalid)
}

fn warning(code: Warning, message: String, class: &str) -> Finding {
    Finding {
        check: "acceptance".to_owned(),
        severity: Severity::Warning,
        condition_type: code.condition(),
        reason: code.as_str().to_owned(),
        message,
        remediation: code.remediation().to_owned(),
        subjects: vec![SubjectRef::new("EC2NodeClass", class)],
        first_seen: None,
    }
}

/// Applies the class's acceptances to its outcomes: what they accept moves to the returned list
/// and stops counting; the warnings about acceptances are added to `Ready`'s outcome.
pub fn apply(
    mut outcomes: Vec<Outcome>,
    class: &str,
    annotations: Option<&BTreeMap<String, String>>,
    policy: &AcceptancePolicy,
    now: Timestamp,
) -> (Vec<Outcome>, Vec<AcceptedFinding>) {
    let (acceptances, invalid) = collect(class, annotations, policy);
    let mut notes: Vec<Finding> = invalid
        .into_iter()
        .map(|m| warning(Warning::AcceptanceInvalid, m, class))
        .collect();
    let mut accepted = Vec::new();
    for a in &acceptances {
        let Some(outcome) = outcomes
            .iter_mut()
            .find(|o| o.condition == a.what.condition())
        else {
            continue;
        };
        if a.until.is_some_and(|u| u <= now) {
            // Said on the condition too, so the Event of its turn back to False says why.
            let found = outcome.findings.iter().any(|f| f.reason == a.what.name());
            if found && outcome.status == ConditionStatus::False {
                // First, so a clipped Event note keeps it.
                outcome.message = format!(
                    "{} accepted {} until {}; that has passed, so it counts again. {}",
                    a.source,
                    a.what.name(),
                    a.until_text,
                    outcome.message
                );
            }
            notes.push(warning(
                Warning::AcceptanceExpired,
                format!(
                    "{} accepted {} until {} ({}); that has passed, so it counts again.",
                    a.source,
                    a.what.name(),
                    a.until_text,
                    a.why
                ),
                class,
            ));
            continue;
        }
        let taken = take(outcome, a);
        if taken.is_empty() {
            // Unused only where the check saw: an Unknown may hide the very finding.
            if outcome.status != ConditionStatus::Unknown {
                notes.push(warning(
                    Warning::AcceptanceUnused,
                    format!(
                        "{} accepts {}, which {} did not find on this EC2NodeClass.",
                        a.source,
                        a.what.name(),
                        a.what.condition()
                    ),
                    class,
                ));
            }
            continue;
        }
        accepted.extend(taken.into_iter().map(|f| AcceptedFinding {
            condition_type: f.condition_type,
            reason: f.reason,
            message: f.message,
            until: a.until.map(Time),
            why: a.why.clone(),
            source: a.source.clone(),
        }));
    }
    // `Ready` is folded later and has no outcome here: its warnings ride on the first outcome's
    // findings, which keep their own condition type.
    if let Some(first) = outcomes.first_mut() {
        first.findings.extend(notes);
    }
    (outcomes, accepted)
}

/// Takes the findings `a` accepts out of `outcome`, and re-decides its status from what is left.
fn take(outcome: &mut Outcome, a: &Acceptance) -> Vec<Finding> {
    let name = a.what.name();
    let severity = match a.what {
        Accepted::Reason(_) => Severity::Error,
        Accepted::Warning(_) => Severity::Warning,
    };
    let (taken, kept): (Vec<Finding>, Vec<Finding>) = std::mem::take(&mut outcome.findings)
        .into_iter()
        .partition(|f| f.severity == severity && f.reason == name);
    outcome.findings = kept;
    if taken.is_empty() || severity != Severity::Error {
        return taken;
    }
    let remaining: Vec<&Finding> = outcome
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .collect();
    let until = if a.until.is_some() {
        format!("until {}", a.until_text)
    } else {
        "for this run".to_owned()
    };
    let note = format!("{name} accepted {until} by {} ({}).", a.source, a.why);
    if let Some(first) = remaining.first() {
        // Still False for what was not accepted.
        if let Some(&reason) = Reason::ALL.iter().find(|r| r.as_str() == first.reason) {
            outcome.reason = reason;
        }
        let rest: Vec<&str> = remaining.iter().map(|f| f.message.as_str()).collect();
        outcome.message = format!("{} {note}", rest.join(" "));
    } else if let Some((reason, message)) = outcome.unknown_beneath.clone() {
        // What the failures hid: the check could not see everything.
        outcome.status = ConditionStatus::Unknown;
        outcome.reason = reason;
        outcome.message = format!("{message} {note}");
    } else {
        outcome.status = ConditionStatus::True;
        outcome.reason = Reason::FindingAccepted;
        outcome.message = format!("{note} Found: {}", taken[0].message);
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fleet_rule_counts_the_classes_it_matches() {
        let rule = |pattern: &str| FleetRule {
            node_classes: pattern.to_owned(),
            reason: "SubnetsOutOfAddresses".to_owned(),
            until: "2099-01-31".to_owned(),
            why: "known".to_owned(),
        };
        let classes = ["batch-gpu", "batch-cpu", "web"];
        assert_eq!(
            fleet_rule_matches(
                &[rule("batch-*"), rule("bacth-*"), rule("web")],
                classes.iter().copied()
            ),
            [2, 0, 1]
        );
    }

    #[test]
    fn patterns_match_with_stars() {
        assert!(matches("batch-*", "batch-gpu"));
        assert!(matches("*", "anything"));
        assert!(matches("*-gpu", "batch-gpu"));
        assert!(matches("a*b*c", "aXbYc"));
        assert!(!matches("batch-*", "default"));
        assert!(!matches("batch", "batch-gpu"));
        assert!(matches("", ""));
    }

    #[test]
    fn dates_end_after_their_day_and_times_are_exact() {
        assert_eq!(
            parse_until("2027-01-31").unwrap(),
            "2027-02-01T00:00:00Z".parse::<Timestamp>().unwrap()
        );
        assert_eq!(
            parse_until("2027-01-31T18:00:00Z").unwrap(),
            "2027-01-31T18:00:00Z".parse::<Timestamp>().unwrap()
        );
        assert!(parse_until("next week").unwrap_err().contains("not a date"));
        assert!(parse_until("2027-02-30").is_err());
    }

    #[test]
    fn only_false_reasons_and_warnings_can_be_accepted() {
        assert_eq!(
            Accepted::named("InstanceProfileIsArn"),
            Ok(Accepted::Reason(Reason::InstanceProfileIsArn))
        );
        assert_eq!(
            Accepted::named("NodeRoleMissingSsmPolicy"),
            Ok(Accepted::Warning(Warning::NodeRoleMissingSsmPolicy))
        );
        assert!(
            Accepted::named("AwsAccessDenied")
                .unwrap_err()
                .contains("only the reason of a False")
        );
        assert!(
            Accepted::named("InstanceProfileValid")
                .unwrap_err()
                .contains("only the reason of a False")
        );
        assert!(
            Accepted::named("SubnetsOutOfAdresses")
                .unwrap_err()
                .contains("no reason or warning")
        );
    }

    #[test]
    fn fleet_rules_read_from_json_and_refuse_unknown_fields() {
        let rules = parse_fleet(
            r#"[{"nodeClasses": "batch-*", "reason": "SpotServiceLinkedRoleMissing", "until": "2027-01-31", "why": "no spot yet"}]"#,
        )
        .unwrap();
        assert_eq!(rules[0].node_classes, "batch-*");
        assert!(
            parse_fleet(r#"[{"nodeClass": "x"}]"#)
                .unwrap_err()
                .contains("acceptance rules")
        );
        assert_eq!(parse_fleet(""), Ok(Vec::new()));
    }
}

//! The files generated from the vocabulary table (`crates/api/src/vocabulary/table/`), besides the
//! CRD (`make crds`): docs/checks.md and the Helm chart's lists of conditions (the alerted types,
//! the alerts' unit tests, the values schema's alert names, the README's alert row). Pure: each
//! file's text is made from its current text; `examples/generate.rs` reads and writes them, and a
//! test fails when a committed one is stale.

use karpenter_health_api::conditions::ConditionStatus;
use karpenter_health_api::{ConditionType, Reason};
use std::fmt::Write;

pub use crate::docs::REGENERATE;

/// One generated file: its path from the repository root and how its text is made.
#[derive(Debug)]
pub struct Generated {
    pub path: &'static str,
    /// The new text from the current one (empty when the file does not exist yet). A file that
    /// is generated whole ignores it; one that is generated in part replaces its generated part,
    /// and answers an error when it cannot find that part.
    pub render: fn(&str) -> Result<String, String>,
}

/// Every generated file.
pub const FILES: &[Generated] = &[
    Generated {
        path: "docs/checks.md",
        render: |_| Ok(crate::docs::docs_markdown()),
    },
    Generated {
        path: "deploy/charts/karpenter-health/templates/_conditions.tpl",
        render: |_| Ok(condition_types_template()),
    },
    Generated {
        path: "deploy/charts/karpenter-health/tests/conditions.test.yaml",
        render: |_| Ok(condition_alert_tests()),
    },
    Generated {
        path: "deploy/charts/karpenter-health/values.schema.json",
        render: schema_alert_names,
    },
    Generated {
        path: "deploy/charts/karpenter-health/README.md",
        render: readme_alert_row,
    },
];

/// The sub-conditions that get an alert on False: those that can be False, by a current
/// reason or one an earlier release set (a condition whose checks only warn has none to fire).
fn sub_conditions() -> impl Iterator<Item = ConditionType> {
    ConditionType::sub_conditions()
        .iter()
        .copied()
        .filter(|&ty| can_be_false(ty))
}

fn can_be_false(ty: ConditionType) -> bool {
    Reason::ALL
        .iter()
        .any(|r| r.applies_to(ty) && r.meta().status == ConditionStatus::False)
        || !ty.retired_reasons().is_empty()
}

fn false_alert(ty: ConditionType) -> String {
    format!("KarpenterHealth{ty}False")
}

/// `karpenter-health.conditionTypes`: the sub-conditions `_rules.tpl` alerts on, in the table's
/// order.
fn condition_types_template() -> String {
    let types: Vec<&str> = sub_conditions().map(ConditionType::as_str).collect();
    format!(
        "{{{{/* Generated from crates/api/src/vocabulary/table/ by `{REGENERATE}`; do not edit.\n\
         Every sub-condition, in the table's order: `_rules.tpl` gives each an alert on False. */}}}}\n\
         {{{{- define \"karpenter-health.conditionTypes\" -}}}}\n{}\n{{{{- end -}}}}\n",
        types.join(" ")
    )
}

/// The reason a test of `ty`'s alert fires with: its first False reason, else the first it no
/// longer sets (a leader of an earlier release may still publish it).
fn false_reason(ty: ConditionType) -> String {
    Reason::ALL
        .iter()
        .find(|r| r.applies_to(ty) && r.meta().status == ConditionStatus::False)
        .map(|r| r.as_str().to_owned())
        .or_else(|| ty.retired_reasons().first().map(|(r, _)| (*r).to_owned()))
        .unwrap_or_else(|| panic!("{ty} has no False reason, current or retired"))
}

/// The promtool unit tests of every sub-condition's False alert: it fires after its `for` in the
/// leader only, never for Unknown or True, and resolves after the repair.
fn condition_alert_tests() -> String {
    let mut out = format!(
        "# Generated from crates/api/src/vocabulary/table/ by `{REGENERATE}`; do not edit.\n\
         # promtool unit tests of every sub-condition's False alert (templates/_rules.tpl), rendered\n\
         # with default values; the alerts of another kind are tested in alerts.test.yaml.\n\
         rule_files:\n- rules.yaml\nevaluation_interval: 1m\ntests:\n"
    );
    for ty in sub_conditions() {
        let alert = false_alert(ty);
        let reason = false_reason(ty);
        let series = |instance: &str, class: &str, status: &str, reason: Option<&str>| {
            let reason = reason
                .map(|r| format!(",reason=\"{r}\""))
                .unwrap_or_default();
            format!(
                "karpenter_health_condition{{job=\"karpenter-health\",instance=\"{instance}\",\
                 pod=\"{instance}\",node_class=\"{class}\",type=\"{ty}\",status=\"{status}\"{reason}}}"
            )
        };
        let fired = |class: &str| {
            format!(
                "    exp_alerts:\n    - exp_labels:\n        severity: warning\n        \
                 job: karpenter-health\n        node_class: {class}\n        type: {ty}\n        \
                 status: 'False'\n        reason: {reason}\n      exp_annotations:\n        \
                 summary: 'EC2NodeClass {class}: {ty} is False'\n        description: A check of \
                 {ty} ran and found a problem for EC2NodeClass {class}. `kubectl describe \
                 karpenterhealth {class}` names the reason and the fix.\n        runbook_url: \
                 https://github.com/karpenter-health/karpenter-health/blob/v{version}/docs/checks.md#{}\n",
                reason.to_ascii_lowercase(),
                // The chart's default runbooks are the docs of its appVersion, the workspace's.
                version = env!("CARGO_PKG_VERSION"),
            )
        };
        let not_fired = |at: &str, alertname: &str| {
            format!("  - eval_time: {at}\n    alertname: {alertname}\n    exp_alerts: []\n")
        };
        let _ = write!(
            out,
            "- name: '{alert}: fires after 5m of False in the leader, not before, not for a \
             standby''s stale series'\n  interval: 1m\n  input_series:\n  \
             - series: karpenter_health_leader{{job=\"karpenter-health\",instance=\"a\",pod=\"a\"}}\n    values: 1x20\n  \
             - series: karpenter_health_leader{{job=\"karpenter-health\",instance=\"b\",pod=\"b\"}}\n    values: '0x20'\n  \
             - series: {}\n    values: 1x20\n  - series: {}\n    values: '0x20'\n  \
             - series: {}\n    values: '0x20'\n  - series: {}\n    values: 1x20\n  alert_rule_test:\n{}  \
             - eval_time: 6m\n    alertname: {alert}\n{}{}",
            series("a", "broken", "False", Some(&reason)),
            series("a", "broken", "True", None),
            series("a", "broken", "Unknown", Some("AwsAccessDenied")),
            series("b", "stale", "False", Some(&reason)),
            not_fired("4m", &alert),
            fired("broken"),
            not_fired("6m", "KarpenterHealthConditionUnknown"),
        );
        let _ = write!(
            out,
            "- name: '{alert}: does not fire for Unknown or True, and resolves after the repair'\n  \
             interval: 1m\n  input_series:\n  \
             - series: karpenter_health_leader{{job=\"karpenter-health\",instance=\"a\",pod=\"a\"}}\n    values: 1x60\n  \
             - series: {}\n    values: 1x60\n  - series: {}\n    values: '0x60'\n  \
             - series: {}\n    values: 1x9 0x50\n  - series: {}\n    values: 0x9 1x50\n  \
             alert_rule_test:\n  - eval_time: 8m\n    alertname: {alert}\n{}{}{}",
            series("a", "unseen", "Unknown", Some("AwsAccessDenied")),
            series("a", "unseen", "False", Some(&reason)),
            series("a", "repaired", "False", Some(&reason)),
            series("a", "repaired", "True", None),
            fired("repaired"),
            not_fired("20m", &alert),
            not_fired("40m", &alert),
        );
    }
    out
}

/// Replaces the lines strictly between the first line containing `begin` (searched from the
/// first line containing `after`) and the next line starting, once trimmed, with `end`.
fn replace_between(
    text: &str,
    after: &str,
    begin: &str,
    end: &str,
    body: &[String],
) -> Result<String, String> {
    let lines: Vec<&str> = text.lines().collect();
    let from = lines
        .iter()
        .position(|l| l.contains(after))
        .ok_or_else(|| format!("no line contains {after:?}"))?;
    let open = (from..lines.len())
        .find(|&i| lines[i].contains(begin))
        .ok_or_else(|| format!("no line contains {begin:?} after {after:?}"))?;
    let close = (open + 1..lines.len())
        .find(|&i| lines[i].trim_start().starts_with(end))
        .ok_or_else(|| format!("no line starts with {end:?} after {begin:?}"))?;
    let mut out: Vec<String> = lines[..=open].iter().map(|l| (*l).to_owned()).collect();
    out.extend(body.iter().cloned());
    out.extend(lines[close..].iter().map(|l| (*l).to_owned()));
    Ok(out.join("\n") + "\n")
}

/// The values schema's `prometheusRule.alerts.propertyNames.enum`: every alert of the chart, so
/// a misspelt override is refused.
fn schema_alert_names(current: &str) -> Result<String, String> {
    let names: Vec<String> = sub_conditions()
        .map(false_alert)
        .chain([
            "KarpenterHealthConditionUnknown".to_owned(),
            "KarpenterHealthNoLeader".to_owned(),
            "KarpenterHealthStale".to_owned(),
        ])
        .collect();
    let last = names.len() - 1;
    let body: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("              \"{n}\"{}", if i == last { "" } else { "," }))
        .collect();
    replace_between(current, "\"propertyNames\"", "\"enum\": [", "]", &body)
}

/// The chart README's row of the per-condition alerts, naming every sub-condition.
fn readme_alert_row(current: &str) -> Result<String, String> {
    const ROW: &str = "| `KarpenterHealth<Condition>False`";
    let listed: Vec<String> = sub_conditions().map(|ty| format!("`{ty}`")).collect();
    let row = format!(
        "{ROW}, one per sub-condition ({}) | a check ran and found a problem | `5m` / `warning` | \
         `<docsBaseURL>#<reason>` |",
        listed.join(", ")
    );
    if !current.lines().any(|l| l.starts_with(ROW)) {
        return Err(format!("no line starts with {ROW:?}"));
    }
    let mut out: Vec<String> = current
        .lines()
        .map(|l| {
            if l.starts_with(ROW) {
                row.clone()
            } else {
                l.to_owned()
            }
        })
        .collect();
    out.push(String::new());
    Ok(out.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every generated file as committed is what the table makes of it: a condition, reason or
    /// column added to the table and not regenerated fails here, naming the file.
    #[test]
    fn the_committed_generated_files_are_current() {
        for file in FILES {
            let path = format!("{}/../../{}", env!("CARGO_MANIFEST_DIR"), file.path);
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            let want = (file.render)(&committed).unwrap_or_else(|e| panic!("{}: {e}", file.path));
            assert!(
                committed == want,
                "{} is stale or missing; regenerate it from the repository root with `{REGENERATE}`",
                file.path
            );
        }
    }

    #[test]
    fn a_partly_generated_file_names_what_it_cannot_find() {
        let err = schema_alert_names("{}").unwrap_err();
        assert!(err.contains("propertyNames"), "{err}");
        let err = readme_alert_row("# a chart\n").unwrap_err();
        assert!(err.contains("KarpenterHealth<Condition>False"), "{err}");
    }

    #[test]
    fn every_sub_condition_alert_is_tested_with_a_reason_of_its_own() {
        let tests: serde_yaml::Value =
            serde_yaml::from_str(&condition_alert_tests()).expect("valid YAML");
        for ty in sub_conditions() {
            let reason = false_reason(ty);
            let own = Reason::parse(&reason).map_or_else(
                || ty.retired_reasons().iter().any(|(r, _)| *r == reason),
                |r| r.applies_to(ty),
            );
            assert!(own, "{ty}: {reason}");
            let alert = false_alert(ty);
            let cases = tests["tests"]
                .as_sequence()
                .expect("tests")
                .iter()
                .filter(|t| t["name"].as_str().is_some_and(|n| n.starts_with(&alert)))
                .count();
            assert_eq!(cases, 2, "{alert}");
        }
    }
}

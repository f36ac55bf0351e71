//! The hand-kept lists outside Rust that name every condition, checked against the vocabulary
//! table: the Helm chart's alerted condition types (`templates/_rules.tpl`), its alert names
//! (`values.schema.json`), the alerts' promtool unit tests (`tests/alerts.test.yaml`), the
//! chart README's alert table, and docs/architecture.md's table of where each condition's facts
//! come from. Reads those files from the repository (test IO only); a failure names the file
//! and the condition to add or remove.

use karpenter_health_api::{ConditionType, Reason};
use std::collections::BTreeSet;

const CHART: &str = "deploy/charts/karpenter-health";

/// A file of the repository, by its path from the repository root.
fn read(path: &str) -> String {
    let full = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn sub_conditions() -> Vec<&'static str> {
    ConditionType::sub_conditions()
        .iter()
        .map(|ty| ty.as_str())
        .collect()
}

/// The chart's alert of a False sub-condition.
fn false_alert(condition: &str) -> String {
    format!("KarpenterHealth{condition}False")
}

/// Fails naming what `path` lacks and what it has that the table does not.
fn assert_same_list(path: &str, got: &[String], want: &[String]) {
    let missing: Vec<&String> = want.iter().filter(|w| !got.contains(w)).collect();
    let extra: Vec<&String> = got.iter().filter(|g| !want.contains(g)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{path} drifts from crates/api/src/vocabulary.rs: add {missing:?}, remove {extra:?}"
    );
    assert_eq!(
        got, want,
        "{path}: same entries, but not in the table's order"
    );
}

fn owned(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn the_chart_alerts_on_every_sub_condition_and_nothing_else() {
    let path = format!("{CHART}/templates/_rules.tpl");
    let rules = read(&path);
    let (_, after) = rules
        .split_once("{{- define \"karpenter-health.conditionTypes\" -}}\n")
        .expect("_rules.tpl defines karpenter-health.conditionTypes");
    let line = after.lines().next().unwrap_or_default();
    let got = owned(&line.split_whitespace().collect::<Vec<_>>());
    assert_same_list(&path, &got, &owned(&sub_conditions()));
}

#[test]
fn the_values_schema_names_every_alert_of_the_chart_and_nothing_else() {
    let path = format!("{CHART}/values.schema.json");
    let schema: serde_json::Value = serde_json::from_str(&read(&path)).expect("valid JSON");
    let names =
        &schema["properties"]["prometheusRule"]["properties"]["alerts"]["propertyNames"]["enum"];
    let got: Vec<String> = names
        .as_array()
        .expect("prometheusRule.alerts.propertyNames.enum")
        .iter()
        .filter_map(|n| n.as_str().map(str::to_owned))
        .collect();
    let mut want: Vec<String> = sub_conditions().into_iter().map(false_alert).collect();
    want.extend(owned(&[
        "KarpenterHealthConditionUnknown",
        "KarpenterHealthNoLeader",
    ]));
    assert_same_list(&path, &got, &want);
}

/// The reasons an alert test may show on `condition`: its own, and those it no longer sets (a
/// leader of an earlier release may still publish them).
fn reasons_of(condition: ConditionType) -> BTreeSet<String> {
    Reason::ALL
        .iter()
        .filter(|r| r.applies_to(condition))
        .map(|r| r.as_str().to_owned())
        .chain(
            condition
                .retired_reasons()
                .iter()
                .map(|(r, _)| (*r).to_owned()),
        )
        .collect()
}

#[test]
fn every_condition_alert_has_a_unit_test_that_fires_with_one_of_its_reasons() {
    let path = format!("{CHART}/tests/alerts.test.yaml");
    let file: serde_yaml::Value = serde_yaml::from_str(&read(&path)).expect("valid YAML");
    let cases: Vec<&serde_yaml::Value> = file["tests"]
        .as_sequence()
        .expect("tests")
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_sequence().into_iter().flatten())
        .collect();
    let mut fired = BTreeSet::new();
    for case in &cases {
        let alert = case["alertname"].as_str().unwrap_or_default();
        let Some(condition) = alert
            .strip_prefix("KarpenterHealth")
            .and_then(|a| a.strip_suffix("False"))
        else {
            continue;
        };
        let ty = ConditionType::parse(condition)
            .filter(|ty| *ty != ConditionType::Ready)
            .unwrap_or_else(|| panic!("{path}: {alert} alerts on no sub-condition of the table"));
        for expected in case["exp_alerts"].as_sequence().into_iter().flatten() {
            let labels = &expected["exp_labels"];
            assert_eq!(labels["type"].as_str(), Some(condition), "{path}: {alert}");
            let reason = labels["reason"].as_str().unwrap_or_default();
            assert!(
                reasons_of(ty).contains(reason),
                "{path}: {alert} fires with {reason:?}, not a reason of {condition}"
            );
            let runbook = expected["exp_annotations"]["runbook_url"].as_str();
            let anchor = format!("docs/checks.md#{}", reason.to_ascii_lowercase());
            assert!(
                runbook.is_some_and(|r| r.ends_with(&anchor)),
                "{path}: {alert}: runbook {runbook:?} is not {anchor}"
            );
            fired.insert(condition.to_owned());
        }
    }
    let untested: Vec<&str> = sub_conditions()
        .into_iter()
        .filter(|c| !fired.contains(*c))
        .collect();
    assert!(
        untested.is_empty(),
        "{path}: no test expects {:?} to fire",
        untested.into_iter().map(false_alert).collect::<Vec<_>>()
    );
}

#[test]
fn the_chart_readme_lists_every_alerted_condition() {
    let path = format!("{CHART}/README.md");
    let readme = read(&path);
    let row = readme
        .lines()
        .find(|l| l.starts_with("| `KarpenterHealth<Condition>False`"))
        .expect("the README's alert table has the KarpenterHealth<Condition>False row");
    let (_, listed) = row.split_once('(').expect("the row lists the conditions");
    let (listed, _) = listed.split_once(')').expect("the list is closed");
    let got: Vec<String> = listed
        .split(", ")
        .map(|c| c.trim_matches('`').to_owned())
        .collect();
    assert_same_list(&path, &got, &owned(&sub_conditions()));
}

#[test]
fn the_architecture_doc_says_where_every_conditions_facts_come_from() {
    let path = "docs/architecture.md";
    let doc = read(path);
    let (_, table) = doc
        .split_once("## Where each condition's facts come from\n")
        .expect("the section exists");
    let got: Vec<String> = table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            l.strip_prefix("| `")?
                .split_once('`')
                .map(|(c, _)| c.to_owned())
        })
        .collect();
    let all: Vec<&str> = ConditionType::ALL.iter().map(|t| t.as_str()).collect();
    assert_same_list(path, &got, &owned(&all));
}

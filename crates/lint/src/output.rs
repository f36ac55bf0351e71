//! Renders findings as human text, JSON or SARIF 2.1.0 (through serde-sarif's typed model, so
//! GitHub and GitLab code scanning read it). Pure: returns text, prints nothing.

use crate::model::{Finding, Rule, Severity};
use serde::Serialize;
use serde_sarif::sarif;
use std::collections::BTreeSet;

pub const SARIF_SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";
const TOOL: &str = "karpenter-health";

/// `path:line: Reason: message`, then the remediation, one finding after another.
pub fn text(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        out.push_str(&format!(
            "{}:{}: {}: {} (document {}, {})\n  fix: {}\n",
            f.path,
            f.line,
            f.rule,
            f.message,
            f.document,
            match f.severity() {
                Severity::Error => "error",
                Severity::Warning => "warning",
            },
            f.rule.remediation()
        ));
    }
    let errors = findings
        .iter()
        .filter(|f| f.severity() == Severity::Error)
        .count();
    out.push_str(&format!(
        "{errors} error(s), {} warning(s)\n",
        findings.len() - errors
    ));
    out
}

#[derive(Serialize)]
struct JsonFinding<'a> {
    path: &'a str,
    line: usize,
    document: usize,
    reason: &'a str,
    severity: Severity,
    message: &'a str,
    remediation: &'a str,
    docs: String,
}

/// A JSON array, one object per finding.
pub fn json(findings: &[Finding]) -> serde_json::Result<String> {
    let rows: Vec<JsonFinding<'_>> = findings
        .iter()
        .map(|f| JsonFinding {
            path: &f.path,
            line: f.line,
            document: f.document,
            reason: f.rule.id(),
            severity: f.severity(),
            message: &f.message,
            remediation: f.rule.remediation(),
            docs: f.rule.help_uri(),
        })
        .collect();
    serde_json::to_string_pretty(&rows)
}

fn level(severity: Severity) -> sarif::ResultLevel {
    match severity {
        Severity::Error => sarif::ResultLevel::Error,
        Severity::Warning => sarif::ResultLevel::Warning,
    }
}

/// One SARIF run: a rule per reason reported, a result per finding.
pub fn sarif(findings: &[Finding]) -> serde_json::Result<String> {
    let used: BTreeSet<Rule> = findings.iter().map(|f| f.rule).collect();
    let rules: Vec<sarif::ReportingDescriptor> = used
        .iter()
        .map(|r| {
            sarif::ReportingDescriptor::builder()
                .id(r.id())
                .name(r.id())
                .short_description(
                    sarif::MultiformatMessageString::builder()
                        .text(r.meaning())
                        .build(),
                )
                .help(
                    sarif::MultiformatMessageString::builder()
                        .text(r.remediation())
                        .build(),
                )
                .help_uri(r.help_uri())
                .default_configuration(
                    sarif::ReportingConfiguration::builder()
                        .level(serde_json::json!(level(r.severity()).to_string()))
                        .build(),
                )
                .build()
        })
        .collect();
    let results: Vec<sarif::Result> = findings
        .iter()
        .map(|f| {
            let region = sarif::Region::builder()
                .start_line(i64::try_from(f.line).unwrap_or(i64::MAX))
                .build();
            let location = sarif::Location::builder()
                .physical_location(
                    sarif::PhysicalLocation::builder()
                        .artifact_location(
                            sarif::ArtifactLocation::builder()
                                .uri(sarif_uri(&f.path))
                                .build(),
                        )
                        .region(region)
                        .build(),
                )
                .build();
            sarif::Result::builder()
                .rule_id(f.rule.id())
                .rule_index(
                    i64::try_from(used.iter().position(|r| *r == f.rule).unwrap_or(0)).unwrap_or(0),
                )
                .level(level(f.severity()))
                .message(
                    sarif::Message::builder()
                        .text(format!("{} {}", f.message, f.rule.remediation()))
                        .build(),
                )
                .locations(vec![location])
                .build()
        })
        .collect();
    let driver = sarif::ToolComponent::builder()
        .name(TOOL)
        .version(env!("CARGO_PKG_VERSION"))
        .rules(rules)
        .build();
    let run = sarif::Run::builder()
        .tool(sarif::Tool::builder().driver(driver).build())
        .results(results)
        .build();
    let log = sarif::Sarif::builder()
        .schema(SARIF_SCHEMA)
        .version(serde_json::json!("2.1.0"))
        .runs(vec![run])
        .build();
    serde_json::to_string_pretty(&log)
}

/// A relative path as a URI reference: forward slashes, no `./`; stdin as `stdin`.
fn sarif_uri(path: &str) -> String {
    if path == "-" {
        return "stdin".to_owned();
    }
    let p = path.replace('\\', "/");
    p.strip_prefix("./").unwrap_or(&p).to_owned()
}

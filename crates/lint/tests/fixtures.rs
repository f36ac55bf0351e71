//! The fixtures under `tests/fixtures/`: each file says, in `# lint:` and `# expect: LINE DOC
//! Reason` comments, the flags it is linted with and exactly what lint must report.
#![allow(clippy::unwrap_used)]

use clap::Parser;
use karpenter_health_lint::{LintArgs, Rule, run_with_stdin};
use serde_sarif::sarif::{ResultLevel, Sarif};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: LintArgs,
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
    out.sort();
}

fn args(extra: &[&str], paths: &[&str]) -> LintArgs {
    let argv = ["lint"].iter().chain(extra).chain(paths).copied();
    Cli::try_parse_from(argv).unwrap().args
}

/// Runs lint with `-o json` and returns (line, document, reason) of every finding, and the exit
/// code.
fn lint_json(
    args: &LintArgs,
    stdin: &str,
) -> (
    BTreeSet<(usize, usize, String)>,
    Vec<serde_json::Value>,
    i32,
) {
    let mut out = Vec::new();
    let mut input = stdin.as_bytes();
    let code = run_with_stdin(args, &mut input, &mut out).unwrap();
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out).unwrap();
    let found = rows
        .iter()
        .map(|r| {
            (
                r["line"].as_u64().unwrap() as usize,
                r["document"].as_u64().unwrap() as usize,
                r["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    (found, rows, code)
}

struct Fixture {
    path: PathBuf,
    flags: Vec<String>,
    expected: BTreeSet<(usize, usize, String)>,
}

fn read_fixture(path: &Path) -> Fixture {
    let text = std::fs::read_to_string(path).unwrap();
    let mut flags = Vec::new();
    let mut expected = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# lint:") {
            flags.extend(rest.split_whitespace().map(str::to_owned));
        } else if let Some(rest) = line.strip_prefix("# expect:") {
            let parts: Vec<&str> = rest.split_whitespace().collect();
            assert_eq!(parts.len(), 3, "{}: {line}", path.display());
            expected.insert((
                parts[0].parse().unwrap(),
                parts[1].parse().unwrap(),
                parts[2].to_owned(),
            ));
        }
    }
    Fixture {
        path: path.to_owned(),
        flags,
        expected,
    }
}

fn lint_fixture(
    f: &Fixture,
) -> (
    BTreeSet<(usize, usize, String)>,
    Vec<serde_json::Value>,
    i32,
) {
    let mut flags: Vec<&str> = f.flags.iter().map(String::as_str).collect();
    flags.extend(["-o", "json"]);
    lint_json(&args(&flags, &[f.path.to_str().unwrap()]), "")
}

#[test]
fn every_fixture_reports_exactly_what_it_expects() {
    let mut files = Vec::new();
    yaml_files(&fixtures(), &mut files);
    assert!(files.len() >= 15, "{files:?}");
    for path in files
        .iter()
        .filter(|p| !p.starts_with(fixtures().join("helm")))
    {
        let fixture = read_fixture(path);
        let (found, rows, code) = lint_fixture(&fixture);
        assert_eq!(found, fixture.expected, "{}: {rows:#?}", path.display());
        let errors = rows.iter().any(|r| r["severity"] == "error");
        assert_eq!(code, i32::from(errors), "{}", path.display());
        for row in &rows {
            assert_eq!(row["path"], path.to_str().unwrap());
            let reason = row["reason"].as_str().unwrap();
            let rule = Rule::emittable().into_iter().find(|r| r.id() == reason);
            let rule = rule.unwrap_or_else(|| panic!("{reason} is emitted but has no anchor"));
            assert_eq!(row["remediation"], rule.remediation());
            assert!(!row["message"].as_str().unwrap().is_empty());
        }
    }
}

#[test]
fn every_rule_lint_can_emit_has_a_fixture_producing_it() {
    let mut files = Vec::new();
    yaml_files(&fixtures(), &mut files);
    let mut produced = BTreeSet::new();
    for path in &files {
        let (found, _, _) = lint_fixture(&read_fixture(path));
        produced.extend(found.into_iter().map(|(_, _, reason)| reason));
    }
    for rule in Rule::emittable() {
        assert!(
            produced.contains(rule.id()),
            "no fixture produces {rule}: add tests/fixtures/{rule}/"
        );
        let folder = fixtures().join(rule.id());
        assert!(folder.is_dir(), "missing {}", folder.display());
    }
}

#[test]
fn the_healthy_set_yields_nothing_even_with_every_flag() {
    let dir = fixtures().join("healthy");
    let flags = [
        "--karpenter-version",
        "1.8.6",
        "--region",
        "us-iso-east-1",
        "--node-role",
        "KarpenterNodeRole",
        "--controller-role",
        "arn:aws:iam::111122223333:role/KarpenterControllerRole",
        "--fail-on",
        "warning",
        "-o",
        "json",
    ];
    let (found, rows, code) = lint_json(&args(&flags, &[dir.to_str().unwrap()]), "");
    assert!(found.is_empty(), "{rows:#?}");
    assert_eq!(code, 0);
}

#[test]
fn a_broken_document_is_reported_at_its_line_and_the_others_are_still_linted() {
    let path = fixtures().join("InvalidDocument/broken.yaml");
    let (found, rows, code) = lint_json(&args(&["-o", "json"], &[path.to_str().unwrap()]), "");
    assert_eq!(code, 1);
    let expected: BTreeSet<_> = [
        (11, 1, "InvalidDocument".to_owned()),
        (18, 2, "InvalidDocument".to_owned()),
        (27, 3, "InstanceProfileIsArn".to_owned()),
    ]
    .into();
    assert_eq!(found, expected);
    let messages: Vec<&str> = rows
        .iter()
        .map(|r| r["message"].as_str().unwrap())
        .collect();
    assert!(messages[0].contains("is not valid YAML"), "{}", messages[0]);
    assert!(!messages[0].contains("at line"), "{}", messages[0]);
    assert!(
        messages[1].contains("spec: invalid type: integer `5`"),
        "{}",
        messages[1]
    );
}

#[test]
fn a_helm_rendered_stream_on_stdin_is_linted_with_its_lines() {
    let stream = std::fs::read_to_string(fixtures().join("helm/rendered.yaml")).unwrap();
    let flags = ["--karpenter-version", "1.8.6", "-o", "json"];
    let (found, rows, code) = lint_json(&args(&flags, &["-"]), &stream);
    let expected: BTreeSet<_> = [
        (10, 0, "NodeRoleIsArn".to_owned()),
        (30, 1, "RestrictedLabelDomain".to_owned()),
        (43, 2, "NodeRoleMappingMissingGroups".to_owned()),
    ]
    .into();
    assert_eq!(found, expected, "{rows:#?}");
    assert!(rows.iter().all(|r| r["path"] == "-"));
    assert_eq!(code, 1);
}

#[test]
fn fail_on_warning_turns_a_warning_into_exit_code_1() {
    let path = fixtures().join("AwsAuthUnparsable/aws-auth.yaml");
    let path = path.to_str().unwrap();
    let (_, _, code) = lint_json(&args(&["-o", "json"], &[path]), "");
    assert_eq!(code, 0, "a warning alone passes by default");
    let (_, _, code) = lint_json(&args(&["-o", "json", "--fail-on", "warning"], &[path]), "");
    assert_eq!(code, 1);
}

#[test]
fn text_output_is_path_line_reason_message() {
    let path = fixtures().join("NodeRoleIsArn/ec2nodeclass.yaml");
    let path = path.to_str().unwrap();
    let mut out = Vec::new();
    let code = run_with_stdin(&args(&[], &[path]), &mut &b""[..], &mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    let first = out.lines().next().unwrap();
    assert!(
        first.starts_with(&format!("{path}:8: NodeRoleIsArn: spec.role is the ARN")),
        "{out}"
    );
    assert!(
        out.contains("fix: Set spec.role to the role's name"),
        "{out}"
    );
    assert_eq!(code, 1);
}

#[test]
fn sarif_output_reads_back_through_the_typed_model() {
    let dir = fixtures().join("InvalidDocument");
    let aws_auth = fixtures().join("AwsAuthUnparsable/aws-auth.yaml");
    let argv = [dir.to_str().unwrap(), aws_auth.to_str().unwrap()];
    let mut out = Vec::new();
    let code = run_with_stdin(&args(&["-o", "sarif"], &argv), &mut &b""[..], &mut out).unwrap();
    assert_eq!(code, 1);
    let log: Sarif = serde_json::from_slice(&out).unwrap();
    assert_eq!(log.version, serde_json::json!("2.1.0"));
    assert_eq!(log.runs.len(), 1);
    let run = &log.runs[0];
    let rules = run.tool.driver.rules.as_ref().unwrap();
    let rule_ids: BTreeSet<&str> = rules.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        rule_ids,
        [
            "AwsAuthUnparsable",
            "InstanceProfileIsArn",
            "InvalidDocument"
        ]
        .into()
    );
    let is_arn = rules
        .iter()
        .find(|r| r.id == "InstanceProfileIsArn")
        .unwrap();
    assert_eq!(
        is_arn.help_uri.as_deref(),
        Some("docs/checks.md#instanceprofileisarn")
    );
    let results = run.results.as_ref().unwrap();
    let got: Vec<(String, String, i64, String)> = results
        .iter()
        .map(|r| {
            let loc = r.locations.as_ref().unwrap()[0]
                .physical_location
                .as_ref()
                .unwrap();
            let level = match r.level.as_ref().unwrap() {
                ResultLevel::Error => "error",
                ResultLevel::Warning => "warning",
                other => panic!("unexpected level {other:?}"),
            };
            (
                r.rule_id.clone().unwrap(),
                loc.artifact_location.as_ref().unwrap().uri.clone().unwrap(),
                loc.region.as_ref().unwrap().start_line.unwrap(),
                level.to_owned(),
            )
        })
        .collect();
    let broken = dir.join("broken.yaml").to_str().unwrap().to_owned();
    let aws_auth = aws_auth.to_str().unwrap().to_owned();
    assert_eq!(
        got,
        vec![
            (
                "AwsAuthUnparsable".to_owned(),
                aws_auth,
                14,
                "warning".to_owned()
            ),
            (
                "InvalidDocument".to_owned(),
                broken.clone(),
                11,
                "error".to_owned()
            ),
            (
                "InvalidDocument".to_owned(),
                broken.clone(),
                18,
                "error".to_owned()
            ),
            (
                "InstanceProfileIsArn".to_owned(),
                broken,
                27,
                "error".to_owned()
            ),
        ]
    );
    let message = results[3].message.text.as_deref().unwrap();
    assert!(
        message.ends_with(
            "Set spec.instanceProfile to the profile name (the last segment of the ARN)."
        ),
        "{message}"
    );
}

#[test]
fn the_readme_documents_every_flag_of_lint() {
    use clap::CommandFactory;
    let readme = include_str!("../../../README.md");
    let command = Cli::command();
    for arg in command.get_arguments() {
        if let Some(long) = arg.get_long() {
            assert!(
                readme.contains(&format!("`--{long}`")),
                "README lacks `--{long}`"
            );
        }
    }
}

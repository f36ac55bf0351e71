//! Renders the result of `karpenter-health check` as a table, JSON, YAML or Markdown, and decides
//! its exit code. Pure: no IO, the caller prints what it returns.

use karpenter_health_api::{
    ConditionStatus, ConditionType, KarpenterHealth, KarpenterHealthSpec, KarpenterHealthStatus,
    Reason,
};
use karpenter_health_operator::one_shot::{ClassOutcome, ClassReport};
use serde_json::json;

/// The documented exit codes of `check`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// Every EC2NodeClass is Ready.
    AllTrue = 0,
    /// Some condition is False: a problem was proven.
    SomethingFalse = 1,
    /// Nothing is False, but something could not be seen (Unknown, or a class that cannot be read).
    SomethingUnknown = 2,
    /// The check could not run: no cluster, no credentials, no such EC2NodeClass.
    CouldNotRun = 3,
}

/// The exit code for these reports: the worst Ready among them.
pub fn exit_code(reports: &[ClassReport]) -> ExitCode {
    let mut code = ExitCode::AllTrue;
    for report in reports {
        let this = match &report.outcome {
            ClassOutcome::Malformed(_) => ExitCode::SomethingUnknown,
            ClassOutcome::Evaluated(status) => match ready_of(status) {
                ConditionStatus::True => ExitCode::AllTrue,
                ConditionStatus::False => ExitCode::SomethingFalse,
                ConditionStatus::Unknown => ExitCode::SomethingUnknown,
            },
        };
        code = match (code, this) {
            (ExitCode::SomethingFalse, _) | (_, ExitCode::SomethingFalse) => {
                ExitCode::SomethingFalse
            }
            (ExitCode::SomethingUnknown, _) | (_, ExitCode::SomethingUnknown) => {
                ExitCode::SomethingUnknown
            }
            _ => ExitCode::AllTrue,
        };
    }
    code
}

fn ready_of(status: &KarpenterHealthStatus) -> ConditionStatus {
    status
        .condition(ConditionType::Ready)
        .map_or(ConditionStatus::Unknown, |c| {
            ConditionStatus::parse(&c.status)
        })
}

/// The reports as a `KarpenterHealthList`, the shape `kubectl get karpenterhealth -o json`
/// prints, so scripts read `check` and the operator's objects alike. A class that cannot be read
/// carries an annotation saying why, and no status.
pub fn as_list(reports: &[ClassReport]) -> serde_json::Value {
    let items: Vec<serde_json::Value> = reports
        .iter()
        .map(|report| {
            let mut health = KarpenterHealth::new(
                &report.name,
                KarpenterHealthSpec {
                    node_class_name: report.name.clone(),
                },
            );
            match &report.outcome {
                ClassOutcome::Evaluated(status) => health.status = Some(status.as_ref().clone()),
                ClassOutcome::Malformed(error) => {
                    health.metadata.annotations = Some(
                        [(
                            "karpenter-health.io/malformed".to_owned(),
                            format!("the EC2NodeClass cannot be read: {error}"),
                        )]
                        .into(),
                    );
                }
            }
            serde_json::to_value(&health).unwrap_or_default()
        })
        .collect();
    json!({
        "apiVersion": "karpenter-health.io/v1alpha1",
        "kind": "KarpenterHealthList",
        "items": items,
    })
}

/// One row of a class's table: a condition with its status, reason and fix.
struct Row {
    condition: String,
    status: ConditionStatus,
    reason: String,
    fix: String,
    message: String,
}

fn rows(status: &KarpenterHealthStatus) -> Vec<Row> {
    status
        .conditions
        .iter()
        .map(|c| {
            let condition_status = ConditionStatus::parse(&c.status);
            let fix = match (condition_status, Reason::parse(&c.reason)) {
                (ConditionStatus::True, _) | (_, None) => String::new(),
                (_, Some(reason)) => reason.meta().remediation.to_owned(),
            };
            Row {
                condition: c.type_.clone(),
                status: condition_status,
                reason: c.reason.clone(),
                fix,
                message: c.message.clone(),
            }
        })
        .collect()
}

/// Colours for the table; all empty when the output is not a terminal or `NO_COLOR` is set.
#[derive(Clone, Copy, Debug, Default)]
pub struct Palette {
    pub colour: bool,
}

impl Palette {
    fn paint(self, status: ConditionStatus, text: &str) -> String {
        if !self.colour {
            return text.to_owned();
        }
        let style = match status {
            ConditionStatus::True => anstyle::AnsiColor::Green.on_default(),
            ConditionStatus::False => anstyle::AnsiColor::Red.on_default().bold(),
            ConditionStatus::Unknown => anstyle::AnsiColor::Yellow.on_default(),
        };
        format!("{style}{text}{style:#}")
    }

    fn bold(self, text: &str) -> String {
        if !self.colour {
            return text.to_owned();
        }
        let style = anstyle::Style::new().bold();
        format!("{style}{text}{style:#}")
    }
}

/// The human table: per EC2NodeClass a headline with Ready, then its conditions (condition,
/// status, reason, one-line fix), and under each non-True condition its message.
pub fn table(reports: &[ClassReport], palette: Palette) -> String {
    let mut out = String::new();
    if reports.is_empty() {
        out.push_str("No EC2NodeClass to check.\n");
    }
    for report in reports {
        let status = match &report.outcome {
            ClassOutcome::Malformed(error) => {
                out.push_str(&format!(
                    "{}  {}\n  the EC2NodeClass cannot be read: {error}\n\n",
                    palette.bold(&format!("EC2NodeClass {}", report.name)),
                    palette.paint(ConditionStatus::Unknown, "Unknown"),
                ));
                continue;
            }
            ClassOutcome::Evaluated(status) => status,
        };
        let ready = status.condition(ConditionType::Ready);
        let ready_status = ready_of(status);
        out.push_str(&format!(
            "{}  Ready={}  {}\n",
            palette.bold(&format!("EC2NodeClass {}", report.name)),
            palette.paint(ready_status, ready_status.as_str()),
            ready.map_or("", |c| c.reason.as_str()),
        ));
        let rows: Vec<Row> = rows(status)
            .into_iter()
            .filter(|r| r.condition != ConditionType::Ready.as_str())
            .collect();
        let width = |f: fn(&Row) -> usize, header: &str| {
            rows.iter().map(f).max().unwrap_or(0).max(header.len())
        };
        let (cw, sw, rw) = (
            width(|r| r.condition.len(), "CONDITION"),
            width(|r| r.status.as_str().len(), "STATUS"),
            width(|r| r.reason.len(), "REASON"),
        );
        out.push_str(&format!(
            "  {:cw$}  {:sw$}  {:rw$}  FIX\n",
            "CONDITION", "STATUS", "REASON"
        ));
        for row in &rows {
            let padded_status = format!("{:sw$}", row.status.as_str());
            out.push_str(
                format!(
                    "  {:cw$}  {}  {:rw$}  {}",
                    row.condition,
                    palette.paint(row.status, &padded_status),
                    row.reason,
                    row.fix
                )
                .trim_end(),
            );
            out.push('\n');
            if row.status != ConditionStatus::True && !row.message.is_empty() {
                out.push_str(&format!("      {}\n", row.message));
            }
        }
        out.push('\n');
    }
    out
}

/// Markdown for an incident ticket: a section per EC2NodeClass with a table of conditions and
/// the messages of the non-True ones.
pub fn markdown(reports: &[ClassReport]) -> String {
    let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    let mut out = String::from("# karpenter-health check\n\n");
    if reports.is_empty() {
        out.push_str("No EC2NodeClass to check.\n");
    }
    for report in reports {
        let status = match &report.outcome {
            ClassOutcome::Malformed(error) => {
                out.push_str(&format!(
                    "## EC2NodeClass `{}`: cannot be read\n\n{}\n\n",
                    report.name,
                    cell(error)
                ));
                continue;
            }
            ClassOutcome::Evaluated(status) => status,
        };
        let ready = status.condition(ConditionType::Ready);
        out.push_str(&format!(
            "## EC2NodeClass `{}`: Ready {} ({})\n\n",
            report.name,
            ready_of(status).as_str(),
            ready.map_or("", |c| c.reason.as_str())
        ));
        out.push_str("| Condition | Status | Reason | Fix |\n|---|---|---|---|\n");
        let rows = rows(status);
        for row in rows
            .iter()
            .filter(|r| r.condition != ConditionType::Ready.as_str())
        {
            out.push_str(&format!(
                "| {} | {} | `{}` | {} |\n",
                row.condition,
                row.status.as_str(),
                row.reason,
                cell(&row.fix)
            ));
        }
        let details: Vec<&Row> = rows
            .iter()
            .filter(|r| r.status != ConditionStatus::True)
            .filter(|r| r.condition != ConditionType::Ready.as_str())
            .collect();
        if !details.is_empty() {
            out.push('\n');
            for row in details {
                out.push_str(&format!(
                    "- **{}** ({}): {}\n",
                    row.condition,
                    row.status.as_str(),
                    cell(&row.message)
                ));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    fn condition(ty: ConditionType, status: &str, reason: Reason, message: &str) -> Condition {
        Condition {
            type_: ty.as_str().into(),
            status: status.into(),
            reason: reason.as_str().into(),
            message: message.into(),
            last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
            observed_generation: Some(1),
        }
    }

    fn report(name: &str, conditions: Vec<Condition>) -> ClassReport {
        ClassReport {
            name: name.into(),
            outcome: ClassOutcome::Evaluated(Box::new(KarpenterHealthStatus {
                conditions,
                ..KarpenterHealthStatus::default()
            })),
        }
    }

    fn healthy(name: &str) -> ClassReport {
        report(
            name,
            vec![
                condition(
                    ConditionType::InstanceProfileReady,
                    "True",
                    Reason::InstanceProfileValid,
                    "",
                ),
                condition(ConditionType::Ready, "True", Reason::AllChecksPassed, ""),
            ],
        )
    }

    fn broken(name: &str) -> ClassReport {
        report(
            name,
            vec![
                condition(
                    ConditionType::InstanceProfileReady,
                    "False",
                    Reason::InstanceProfileIsArn,
                    "spec.instanceProfile is an ARN",
                ),
                condition(
                    ConditionType::Ready,
                    "False",
                    Reason::InstanceProfileIsArn,
                    "False: InstanceProfileReady (InstanceProfileIsArn).",
                ),
            ],
        )
    }

    fn unknown(name: &str) -> ClassReport {
        report(
            name,
            vec![condition(
                ConditionType::Ready,
                "Unknown",
                Reason::AwsUnavailable,
                "",
            )],
        )
    }

    #[test]
    fn the_exit_code_is_the_worst_ready() {
        assert_eq!(exit_code(&[]), ExitCode::AllTrue);
        assert_eq!(exit_code(&[healthy("a")]), ExitCode::AllTrue);
        assert_eq!(
            exit_code(&[healthy("a"), unknown("b")]),
            ExitCode::SomethingUnknown
        );
        assert_eq!(
            exit_code(&[unknown("a"), broken("b"), healthy("c")]),
            ExitCode::SomethingFalse
        );
        let malformed = ClassReport {
            name: "m".into(),
            outcome: ClassOutcome::Malformed("bad".into()),
        };
        assert_eq!(exit_code(&[malformed]), ExitCode::SomethingUnknown);
    }

    #[test]
    fn the_table_names_the_class_the_failing_condition_and_its_fix_without_colour() {
        let text = table(&[broken("arn-profile")], Palette::default());
        assert!(
            text.starts_with("EC2NodeClass arn-profile  Ready=False  InstanceProfileIsArn\n"),
            "{text}"
        );
        let fix = Reason::InstanceProfileIsArn.meta().remediation;
        let line = text
            .lines()
            .find(|l| l.contains("InstanceProfileReady"))
            .unwrap_or_default();
        assert!(line.contains("False") && line.ends_with(fix), "{line}");
        assert!(
            text.contains("      spec.instanceProfile is an ARN\n"),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'), "no escape codes without colour");
        let coloured = table(&[broken("arn-profile")], Palette { colour: true });
        assert!(coloured.contains("\u{1b}["), "{coloured}");
    }

    #[test]
    fn markdown_escapes_cells_and_lists_messages() {
        let mut r = broken("a|b");
        if let ClassOutcome::Evaluated(s) = &mut r.outcome {
            s.conditions[0].message = "x | y".into();
        }
        let text = markdown(&[r]);
        assert!(text.contains("## EC2NodeClass `a|b`: Ready False (InstanceProfileIsArn)"));
        assert!(text.contains("| InstanceProfileReady | False | `InstanceProfileIsArn` |"));
        assert!(
            text.contains("- **InstanceProfileReady** (False): x \\| y"),
            "{text}"
        );
    }

    #[test]
    fn the_json_list_has_the_custom_resource_shape() {
        let list = as_list(&[broken("a")]);
        assert_eq!(list["kind"], "KarpenterHealthList");
        let item = &list["items"][0];
        assert_eq!(item["kind"], "KarpenterHealth");
        assert_eq!(item["metadata"]["name"], "a");
        let status: KarpenterHealthStatus =
            serde_json::from_value(item["status"].clone()).expect("status shape");
        assert_eq!(
            status
                .condition(ConditionType::Ready)
                .map(|c| c.status.as_str()),
            Some("False")
        );
    }
}

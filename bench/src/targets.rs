//! The targets of issue 13 ("Scale and speed") and where a run's results stand against each:
//! measured value, target, ratio, met. Rows measured only by the large run (50,000 NodeClaims,
//! 100 EC2NodeClasses) point there in a smaller run. Pure, no IO.

use crate::change_to_status::EDIT_DEADLINE;
use crate::results::{Edit, Results};
use crate::state::ms;
use crate::stats::{Summary, median, summary};

/// The scale of the large run (`make bench-large`).
pub const LARGE_NODE_CLAIMS: usize = 50_000;
pub const LARGE_NODE_CLASSES: usize = 100;

/// The class count the idle AWS calls target is stated for.
const AWS_CALLS_TARGET_CLASSES: usize = 20;

/// What a row shows as its result.
#[derive(Clone, Debug, PartialEq)]
pub enum Measured {
    Value {
        value: f64,
        unit: &'static str,
        digits: usize,
    },
    /// Measured by another run, or not in this one: why.
    Elsewhere(String),
}

/// One target row: the measure, the result, and the limit (the result must be at most that).
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub measure: String,
    pub result: Measured,
    pub limit: f64,
    pub limit_unit: &'static str,
}

impl Target {
    /// Result ÷ limit, when both are numbers and the limit is not 0.
    pub fn ratio(&self) -> Option<f64> {
        match self.result {
            Measured::Value { value, .. } if self.limit > 0.0 && value.is_finite() => {
                Some(value / self.limit)
            }
            _ => None,
        }
    }

    pub fn met(&self) -> Option<bool> {
        match self.result {
            Measured::Value { value, .. } if value.is_finite() => Some(value <= self.limit),
            _ => None,
        }
    }
}

fn value(value: f64, unit: &'static str, digits: usize) -> Measured {
    if value.is_finite() {
        Measured::Value {
            value,
            unit,
            digits,
        }
    } else {
        Measured::Elsewhere("not measured".into())
    }
}

fn target(measure: impl Into<String>, result: Measured, limit: f64, unit: &'static str) -> Target {
    Target {
        measure: measure.into(),
        result,
        limit,
        limit_unit: unit,
    }
}

/// Change-to-status of `edits` as `pick` reads it, a timed-out edit counted as the deadline (it
/// took at least that long; leaving it out would flatter the p99); and how many timed out.
fn latencies<'a>(
    edits: impl IntoIterator<Item = &'a Edit>,
    pick: fn(&Edit) -> Option<f64>,
) -> (Summary, usize) {
    let deadline = ms(EDIT_DEADLINE);
    let mut timed_out = 0;
    let values: Vec<f64> = edits
        .into_iter()
        .filter_map(|e| {
            if e.timed_out {
                timed_out += 1;
                Some(deadline)
            } else {
                pick(e)
            }
        })
        .collect();
    (summary(&values), timed_out)
}

/// ", k timed out" for a measure's text, when any did.
fn timeouts(timed_out: usize) -> String {
    if timed_out == 0 {
        String::new()
    } else {
        format!(
            ", {timed_out} timed out and counted as {} s",
            EDIT_DEADLINE.as_secs()
        )
    }
}

fn see_large() -> Measured {
    Measured::Elsewhere("see `make bench-large`".into())
}

fn no_storm() -> Measured {
    Measured::Elsewhere("no storm in this run".into())
}

fn is_large(r: &Results) -> bool {
    r.scale.node_claims >= LARGE_NODE_CLAIMS && r.scale.node_classes >= LARGE_NODE_CLASSES
}

/// Change-to-status p99 of the quiet edits on the last class.
fn last_class_p99(r: &Results, limit: f64) -> Target {
    let (last, timed_out) = latencies(&r.edits, |e| e.last_ms);
    target(
        format!(
            "change-to-status p99, last of {} EC2NodeClasses ({} quiet edits{})",
            r.scale.node_classes,
            last.n,
            timeouts(timed_out)
        ),
        value(last.p99, "ms", 0),
        limit,
        "ms",
    )
}

/// The same at the large run's scale, pointing there in a smaller run.
fn large_last_class_p99(r: &Results, limit: f64) -> Target {
    let (last, _) = latencies(&r.edits, |e| e.last_ms);
    target(
        format!(
            "at {LARGE_NODE_CLAIMS} NodeClaims / {LARGE_NODE_CLASSES} EC2NodeClasses: change-to-status p99, last class"
        ),
        if is_large(r) {
            value(last.p99, "ms", 0)
        } else {
            see_large()
        },
        limit,
        "ms",
    )
}

fn memory_per_node_claim(r: &Results) -> Target {
    match (r.memory_steps.first(), r.memory_steps.last()) {
        (Some(lo), Some(hi)) if hi.node_claims > lo.node_claims => target(
            format!(
                "marginal memory per NodeClaim (steady, {} → {} NodeClaims)",
                lo.node_claims, hi.node_claims
            ),
            value(
                (hi.steady_mib - lo.steady_mib) * 1024.0 / (hi.node_claims - lo.node_claims) as f64,
                "KiB",
                2,
            ),
            0.5,
            "KiB",
        ),
        _ => target(
            "marginal memory per NodeClaim",
            Measured::Elsewhere("needs --memory-steps below the full scale".into()),
            0.5,
            "KiB",
        ),
    }
}

fn cold_start_ratio(r: &Results, limit: f64) -> Target {
    let cold = median(
        &r.cold_starts
            .iter()
            .map(|c| c.ready_and_evaluated_s)
            .collect::<Vec<_>>(),
    );
    target(
        format!(
            "cold start to ready and every one of {} classes evaluated ({} s, median of {}) ÷ the API server's own list of every NodeClaim ({} s)",
            r.scale.node_classes,
            fmt(cold, 2),
            r.cold_starts.len(),
            fmt(r.seeding.list_all_node_claims_s, 2)
        ),
        if r.seeding.list_all_node_claims_s > 0.0 {
            value(cold / r.seeding.list_all_node_claims_s, "×", 2)
        } else {
            Measured::Elsewhere("no NodeClaim list timed".into())
        },
        limit,
        "×",
    )
}

fn needless_writes(r: &Results) -> Target {
    let needless: Vec<f64> = r
        .storms
        .iter()
        .filter_map(|s| s.needless_writes())
        .collect();
    // What of them changed the stored status (the rest wrote what the API server already held).
    let (stored, stamp_only) =
        r.storms
            .iter()
            .filter(|s| !s.changes_status)
            .fold((0.0, 0.0), |(stored, stamp), s| {
                (
                    stored + (s.window.status_changes_seen - s.edit_writes).max(0.0),
                    stamp + s.window.stamp_only_changes_seen,
                )
            });
    target(
        format!(
            "storm: needless status writes (Pod storms: writes beyond edits × classes; {} of them changed the stored status, {} only its lastEvaluated)",
            fmt(stored, 0),
            fmt(stamp_only, 0)
        ),
        if needless.is_empty() {
            Measured::Elsewhere("no Pod storm in this run".into())
        } else {
            value(needless.iter().sum(), "", 0)
        },
        0.0,
        "",
    )
}

fn storm_last_class_p99(r: &Results) -> Target {
    let (storm_last, storm_timed_out) =
        latencies(r.storms.iter().flat_map(|s| &s.edits), |e| e.last_ms);
    target(
        format!(
            "storm: change-to-status p99 of the aws-auth edits during the storms, last class ({} edits{})",
            storm_last.n,
            timeouts(storm_timed_out)
        ),
        if r.storms.is_empty() {
            no_storm()
        } else {
            value(storm_last.p99, "ms", 0)
        },
        250.0,
        "ms",
    )
}

fn idle_aws_calls(r: &Results, limit: f64, stated_at: usize) -> Target {
    target(
        format!(
            "AWS calls per hour, idle ({:.0} s window), at {} EC2NodeClasses (target stated at {stated_at})",
            r.idle.window.seconds, r.scale.node_classes
        ),
        value(r.idle.window.aws_calls_per_hour, "", 0),
        limit,
        "",
    )
}

/// Every issue 13 target, against `r`.
pub fn issue_13(r: &Results) -> Vec<Target> {
    let (first, _) = latencies(&r.edits, |e| e.first_ms);
    let mut rows = vec![
        last_class_p99(r, 100.0),
        target(
            "change-to-status p99, first EC2NodeClass",
            value(first.p99, "ms", 0),
            40.0,
            "ms",
        ),
        target(
            format!(
                "RSS steady at {} NodeClaims (median over {:.0} s idle)",
                r.scale.node_claims, r.idle.window.seconds
            ),
            value(r.idle.rss_mib.p50, "MiB", 1),
            40.0,
            "MiB",
        ),
        target(
            "RSS peak through cold starts and forced relists",
            value(r.peak_overall_mib, "MiB", 1),
            64.0,
            "MiB",
        ),
        memory_per_node_claim(r),
        cold_start_ratio(r, 1.1),
        target(
            format!(
                "at {LARGE_NODE_CLAIMS} NodeClaims / {LARGE_NODE_CLASSES} EC2NodeClasses: RSS steady"
            ),
            if is_large(r) {
                value(r.idle.rss_mib.p50, "MiB", 1)
            } else {
                see_large()
            },
            64.0,
            "MiB",
        ),
        large_last_class_p99(r, 250.0),
    ];
    let busiest = r.storms.iter().max_by(|a, b| {
        a.reconciles_per_class_per_s
            .total_cmp(&b.reconciles_per_class_per_s)
    });
    rows.push(target(
        "storm: reconciles per class per second, window average (busiest class of the busiest storm)",
        busiest.map_or_else(no_storm, |s| value(s.reconciles_per_class_per_s, "/s", 2)),
        2.0,
        "/s",
    ));
    let peak = r.storms.iter().max_by(|a, b| {
        a.peak_reconciles_per_class_per_s
            .total_cmp(&b.peak_reconciles_per_class_per_s)
    });
    rows.push(target(
        "storm: reconciles per class per second, highest 1 s of any class",
        peak.map_or_else(no_storm, |s| {
            value(s.peak_reconciles_per_class_per_s, "/s", 2)
        }),
        2.0,
        "/s",
    ));
    rows.push(needless_writes(r));
    rows.push(storm_last_class_p99(r));
    rows.push(idle_aws_calls(r, 84.0, AWS_CALLS_TARGET_CLASSES));
    rows
}

/// Every issue 23 target ("Derive once, write apart, never wait on AWS"), against `r`.
pub fn issue_23(r: &Results) -> Vec<Target> {
    let classes = r.scale.node_classes;
    let edits = r.edits.len();
    vec![
        cold_start_ratio(r, 1.2),
        if classes >= LARGE_NODE_CLASSES {
            idle_aws_calls(r, 150.0, LARGE_NODE_CLASSES)
        } else {
            idle_aws_calls(r, 100.0, AWS_CALLS_TARGET_CLASSES)
        },
        last_class_p99(r, 100.0),
        storm_last_class_p99(r),
        large_last_class_p99(r, 250.0),
        memory_per_node_claim(r),
        needless_writes(r),
        target(
            format!(
                "API requests per aws-auth edit at {classes} EC2NodeClasses (KarpenterHealth and Event requests the API server counted over {edits} edits, every verb but WATCH)"
            ),
            match r.edit_window.api_requests {
                Some(requests) if edits > 0 => value(requests / edits as f64, "", 1),
                _ => Measured::Elsewhere("not measured in this run".into()),
            },
            25.0,
            "",
        ),
    ]
}

fn fmt(v: f64, digits: usize) -> String {
    if v.is_finite() {
        // `+ 0.0` turns a negative zero into zero.
        format!("{:.digits$}", v + 0.0)
    } else {
        "–".into()
    }
}

/// The Markdown table of `rows`, headed by `issue`'s number.
pub fn markdown(issue: u32, rows: &[Target]) -> String {
    let mut o = format!(
        "| Issue {issue} target | Result | Target | Ratio | Met |\n|---|---|---|---|---|\n"
    );
    for t in rows {
        let result = match &t.result {
            Measured::Value {
                value,
                unit,
                digits,
            } => with_unit(&fmt(*value, *digits), unit),
            Measured::Elsewhere(why) => why.clone(),
        };
        let limit = with_unit(&format!("≤ {}", t.limit), t.limit_unit);
        let ratio = t.ratio().map_or_else(|| "–".into(), |r| fmt(r, 2));
        let met = match t.met() {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "–",
        };
        o.push_str(&format!(
            "| {} | {result} | {limit} | {ratio} | {met} |\n",
            t.measure
        ));
    }
    o
}

fn with_unit(number: &str, unit: &str) -> String {
    match unit {
        "" => number.to_owned(),
        "×" => format!("{number}×"),
        _ => format!("{number} {unit}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Storm, Window};

    #[test]
    fn large_rows_point_to_the_large_run_below_its_scale() {
        let r = Results::default();
        let rows = issue_13(&r);
        let large: Vec<&Target> = rows
            .iter()
            .filter(|t| t.measure.starts_with("at 50000"))
            .collect();
        assert_eq!(large.len(), 2);
        assert!(
            large
                .iter()
                .all(|t| t.result == Measured::Elsewhere("see `make bench-large`".into()))
        );
    }

    fn edit(last_ms: Option<f64>, timed_out: bool) -> Edit {
        Edit {
            broken: true,
            write_rtt_ms: 1.0,
            own_watch_ms: None,
            first_ms: last_ms,
            last_ms,
            aws_calls: None,
            timed_out,
            returned_at: std::time::Instant::now(),
        }
    }

    #[test]
    fn a_timed_out_edit_counts_as_the_deadline() {
        let edits = [edit(Some(10.0), false), edit(None, true)];
        let (last, timed_out) = latencies(&edits, |e| e.last_ms);
        assert_eq!(timed_out, 1);
        assert_eq!(last.n, 2);
        assert_eq!(last.max, ms(EDIT_DEADLINE));
        assert_eq!(timeouts(0), "");
        assert_eq!(timeouts(1), ", 1 timed out and counted as 60 s");
    }

    #[test]
    fn needless_writes_count_only_loads_that_change_no_status() {
        let storm = |changes_status, other_writes| Storm {
            changes_status,
            other_writes,
            window: Window::default(),
            ..Storm::default()
        };
        let r = Results {
            storms: vec![storm(false, 3.0), storm(true, 40.0), storm(false, 0.0)],
            ..Results::default()
        };
        let row = issue_13(&r)
            .into_iter()
            .find(|t| t.measure.starts_with("storm: needless"))
            .expect("row");
        assert_eq!(row.met(), Some(false));
        assert!(matches!(row.result, Measured::Value { value, .. } if value == 3.0));
        assert!(markdown(13, &[row]).contains("| **no** |"));
    }

    #[test]
    fn issue_23_counts_requests_per_edit_and_states_the_call_budget_by_scale() {
        let mut r = Results {
            edits: vec![edit(Some(10.0), false); 4],
            ..Results::default()
        };
        r.edit_window.api_requests = Some(90.0);
        let rows = issue_23(&r);
        let requests = rows
            .iter()
            .find(|t| t.measure.starts_with("API requests per aws-auth edit"))
            .expect("row");
        assert!(matches!(requests.result, Measured::Value { value, .. } if value == 22.5));
        assert_eq!(requests.met(), Some(true));
        let calls = |r: &Results| {
            issue_23(r)
                .into_iter()
                .find(|t| t.measure.starts_with("AWS calls per hour"))
                .expect("row")
                .limit
        };
        assert_eq!(calls(&r), 100.0);
        r.scale.node_classes = LARGE_NODE_CLASSES;
        assert_eq!(calls(&r), 150.0);
        r.edit_window.api_requests = None;
        assert!(
            issue_23(&r)
                .iter()
                .any(|t| t.result == Measured::Elsewhere("not measured in this run".into()))
        );
        assert!(markdown(23, &rows).starts_with("| Issue 23 target |"));
    }
}

//! The storm section of the bench's Markdown report: one column per storm, then the aws-auth edits
//! of all storms as latency series. Pure, no IO.

use crate::results::{Edit, Results, Storm};
use crate::table::{edit_stats, f, row};
use std::fmt::Write as _;

/// One row of the storm table: a measure and its cell for each storm.
fn storm_row(o: &mut String, name: &str, storms: &[Storm], cell: impl Fn(&Storm) -> String) {
    let cells: Vec<String> = storms.iter().map(cell).collect();
    let _ = writeln!(o, "| {name} | {} |", cells.join(" | "));
}

/// The storms: one column each, then the edits of all of them as latency series.
pub fn storms(o: &mut String, r: &Results) {
    if r.storms.is_empty() {
        return;
    }
    let storms = &r.storms;
    let _ = writeln!(
        o,
        "\nStorms (aws-auth edits back to back through each, as in the edits phase; the window runs from just before the storm's writes to the last edit landing, at least {} s after the writes; {} EC2NodeClasses):\n",
        storms.first().map_or(0.0, |s| s.tail_s),
        r.scale.node_classes
    );
    let names: Vec<&str> = storms.iter().map(|s| s.name.as_str()).collect();
    let _ = writeln!(
        o,
        "| Storm | {} |\n|---|{}",
        names.join(" | "),
        "---|".repeat(storms.len())
    );
    storm_row(o, "writes took (objects/s)", storms, |s| {
        format!(
            "{} s ({})",
            f(s.load_s, 1),
            f(s.objects as f64 / s.load_s.max(1e-9), 0)
        )
    });
    storm_row(o, "window", storms, |s| {
        format!("{} s", f(s.window.seconds, 1))
    });
    storm_row(o, "aws-auth edits (timed out)", storms, |s| {
        format!(
            "{} ({})",
            s.edits.len(),
            s.edits.iter().filter(|e| e.timed_out).count()
        )
    });
    storm_row(o, "change-to-status, first class, p50 / p99", storms, |s| {
        let e = edit_stats(&s.edits);
        format!("{} / {} ms", f(e.first.p50, 1), f(e.first.p99, 1))
    });
    storm_row(o, "change-to-status, last class, p50 / p99", storms, |s| {
        let e = edit_stats(&s.edits);
        format!("{} / {} ms", f(e.last.p50, 1), f(e.last.p99, 1))
    });
    storm_row(
        o,
        "reconciles per class per second, window average (busiest class)",
        storms,
        |s| {
            format!(
                "{} ({})",
                f(s.reconciles_per_class_per_s, 2),
                s.busiest_class
            )
        },
    );
    storm_row(
        o,
        "reconciles per class per second, highest 1 s (class)",
        storms,
        |s| {
            format!(
                "{} ({})",
                f(s.peak_reconciles_per_class_per_s, 2),
                s.peak_class
            )
        },
    );
    storm_row(o, "reconciles, all classes", storms, |s| {
        f(s.window.reconciles, 0)
    });
    storm_row(
        o,
        "status writes: all / the edits' (edits × classes) / the rest",
        storms,
        |s| {
            format!(
                "{} / {} / {}",
                f(s.window.status_patches, 0),
                f(s.edit_writes, 0),
                f(s.other_writes, 0)
            )
        },
    );
    storm_row(
        o,
        "status changes a watch saw (of them only lastEvaluated moved)",
        storms,
        |s| {
            format!(
                "{} ({})",
                f(s.window.status_changes_seen, 0),
                f(s.window.stamp_only_changes_seen, 0)
            )
        },
    );
    storm_row(o, "needless status writes", storms, |s| {
        s.needless_writes().map_or_else(
            || "– (the NodeClaim counts in the status change)".into(),
            |n| f(n, 0),
        )
    });
    storm_row(o, "AWS calls per hour", storms, |s| {
        f(s.window.aws_calls_per_hour, 0)
    });
    storm_row(o, "operator CPU", storms, |s| {
        format!("{} s", f(s.window.cpu_s, 2))
    });
    storm_row(o, "RSS before / peak (VmHWM) / after", storms, |s| {
        format!(
            "{} / {} / {} MiB",
            f(s.rss_before_mib, 1),
            f(s.peak_mib, 1),
            f(s.rss_after_mib, 1)
        )
    });
    let quiet_writes = r.scale.node_classes as f64 * r.edits.len() as f64;
    if quiet_writes > 0.0 {
        let _ = writeln!(
            o,
            "\nFor comparison, the quiet edits phase: {} status writes for {} edits × {} classes ({} per edit and class), {} of them seen by a watch as a change.",
            f(r.edit_window.status_patches, 0),
            r.edits.len(),
            r.scale.node_classes,
            f(r.edit_window.status_patches / quiet_writes, 2),
            f(r.edit_window.status_changes_seen, 0)
        );
    }
    let all: Vec<Edit> = storms.iter().flat_map(|s| s.edits.clone()).collect();
    let e = edit_stats(&all);
    let _ = writeln!(
        o,
        "\nChange-to-status of the aws-auth edits during all storms (ms, as in the latency table):\n"
    );
    let _ = writeln!(
        o,
        "| Series | n | p50 | p90 | p99 | max | mean |\n|---|---|---|---|---|---|---|"
    );
    row(o, "first EC2NodeClass, during the storms", &e.first, 1);
    row(o, "last EC2NodeClass, during the storms", &e.last, 1);
    row(
        o,
        "aws-auth write round trip, during the storms",
        &e.write_rtt,
        1,
    );
}

//! The cells and rows of the bench report's Markdown tables, and the latency summaries of the
//! edits its sections share. Pure, no IO.

use crate::results::Edit;
use crate::stats::{Summary, summary};
use std::fmt::Write as _;

/// A number with `digits` decimals; `–` when it is not finite.
pub fn f(v: f64, digits: usize) -> String {
    if v.is_finite() {
        // `+ 0.0` turns a negative zero into zero.
        format!("{:.digits$}", v + 0.0)
    } else {
        "–".into()
    }
}

/// One row of a latency table: count, p50, p90, p99, max and mean.
pub fn row(out: &mut String, name: &str, s: &Summary, digits: usize) {
    let _ = writeln!(
        out,
        "| {name} | {} | {} | {} | {} | {} | {} |",
        s.n,
        f(s.p50, digits),
        f(s.p90, digits),
        f(s.p99, digits),
        f(s.max, digits),
        f(s.mean, digits)
    );
}

/// Latency summaries over the edits, for reuse by the report and the caller.
pub struct EditStats {
    pub first: Summary,
    pub last: Summary,
    pub own_watch: Summary,
    pub write_rtt: Summary,
    pub timed_out: usize,
}

pub fn edit_stats(edits: &[Edit]) -> EditStats {
    let pick = |g: fn(&Edit) -> Option<f64>| -> Vec<f64> { edits.iter().filter_map(g).collect() };
    EditStats {
        first: summary(&pick(|e| e.first_ms)),
        last: summary(&pick(|e| e.last_ms)),
        own_watch: summary(&pick(|e| e.own_watch_ms)),
        write_rtt: summary(&pick(|e| Some(e.write_rtt_ms))),
        timed_out: edits.iter().filter(|e| e.timed_out).count(),
    }
}

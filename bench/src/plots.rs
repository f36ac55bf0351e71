//! The bench's plots, drawn from its own results as SVG next to results.md: the operator's RSS
//! over the whole run with the phases shaded, and the change-to-status latency as a cumulative
//! distribution (first and last class; quiet edits and edits during the storms). Writes files
//! (IO); the series are computed purely from the results.

use crate::results::{Edit, RSS_TIMELINE_POINTS, Results};
use crate::timeline::{Phase, PhaseSpan, RssPoint, segments};
use anyhow::{Result, anyhow};
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use std::path::Path;

pub const RSS_PLOT: &str = "rss.svg";
pub const LATENCY_PLOT: &str = "change-to-status.svg";

/// The issue 13 targets drawn on the latency plot: first class, last class, and the edits during
/// a storm (or at 50,000 NodeClaims).
const LATENCY_TARGETS_MS: [f64; 3] = [40.0, 100.0, 250.0];

const ORANGE: RGBColor = RGBColor(230, 120, 0);
const PURPLE: RGBColor = RGBColor(140, 60, 170);
const LIGHT_BLUE: RGBColor = RGBColor(60, 150, 230);
const DARK_BLUE: RGBColor = RGBColor(0, 40, 160);
const PINK: RGBColor = RGBColor(220, 80, 180);
const DARK_PURPLE: RGBColor = RGBColor(100, 20, 120);
const TARGET_RED: RGBColor = RGBColor(200, 30, 30);

fn phase_color(phase: Phase) -> RGBColor {
    match phase {
        Phase::ColdStart => BLUE,
        Phase::Idle => GREEN,
        Phase::WatchProbes => CYAN,
        Phase::Edits => ORANGE,
        Phase::Relist => RED,
        Phase::Storm => PURPLE,
    }
}

/// plotters' errors carry the backend's error type; the bench only reports them.
fn drawing<T, E: std::fmt::Display>(result: Result<T, E>) -> Result<T> {
    result.map_err(|e| anyhow!("drawing a plot: {e}"))
}

/// Writes every plot the results have data for into `out`; returns their file names.
pub fn write(results: &Results, out: &Path) -> Result<Vec<String>> {
    let mut written = Vec::new();
    if !results.rss_timeline.is_empty() {
        rss_plot(&results.rss_timeline, &results.phases, &out.join(RSS_PLOT))?;
        written.push(RSS_PLOT.to_owned());
    }
    let series = latency_series(results);
    if series.iter().any(|s| !s.values.is_empty()) {
        latency_plot(&series, &out.join(LATENCY_PLOT))?;
        written.push(LATENCY_PLOT.to_owned());
    }
    Ok(written)
}

fn rss_plot(rss: &[RssPoint], phases: &[PhaseSpan], path: &Path) -> Result<()> {
    let minutes = |s: f64| s / 60.0;
    let x_max = rss
        .iter()
        .map(|p| p.t_s)
        .chain(phases.iter().map(|p| p.to_s))
        .fold(0.0, f64::max);
    let y_max = rss.iter().map(|p| p.mib).fold(0.0, f64::max) * 1.15 + 1.0;
    let root = SVGBackend::new(path, (1200, 520)).into_drawing_area();
    drawing(root.fill(&WHITE))?;
    let mut chart = drawing(
        ChartBuilder::on(&root)
            .caption("Operator RSS over the run", ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..minutes(x_max).max(0.1), 0.0..y_max),
    )?;
    drawing(
        chart
            .configure_mesh()
            .x_desc("minutes since the run began")
            .y_desc("RSS (MiB)")
            .draw(),
    )?;
    for phase in Phase::ALL {
        let spans: Vec<&PhaseSpan> = phases.iter().filter(|s| s.phase == phase).collect();
        if spans.is_empty() {
            continue;
        }
        let color = phase_color(phase);
        drawing(chart.draw_series(spans.iter().map(|s| {
            Rectangle::new(
                [(minutes(s.from_s), 0.0), (minutes(s.to_s), y_max)],
                color.mix(0.15).filled(),
            )
        })))?
        .label(phase.label())
        .legend(move |(x, y)| {
            Rectangle::new([(x, y - 6), (x + 16, y + 6)], color.mix(0.4).filled())
        });
        // Spans of one kind often follow each other (the four storms): a line where each begins.
        drawing(chart.draw_series(spans.iter().map(|s| {
            PathElement::new(
                [(minutes(s.from_s), 0.0), (minutes(s.from_s), y_max)],
                color.mix(0.5).stroke_width(1),
            )
        })))?;
    }
    // A line only within one operator process: between two, nothing ran.
    let first = rss.first().map_or(0.0, |p| p.t_s);
    let last = rss.last().map_or(0.0, |p| p.t_s);
    let gap_s = (3.0 * (last - first) / RSS_TIMELINE_POINTS as f64).max(1.0);
    for (i, part) in segments(rss, gap_s).into_iter().enumerate() {
        let line = drawing(chart.draw_series(LineSeries::new(
            part.iter().map(|p| (minutes(p.t_s), p.mib)),
            BLACK.stroke_width(1),
        )))?;
        if i == 0 {
            line.label("VmRSS (highest sample per plotted point)")
                .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK));
        }
    }
    drawing(
        chart
            .configure_series_labels()
            // RSS starts high after each cold start and grows, so the lower right stays clear.
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw(),
    )?;
    drawing(root.present())
}

/// One line of the latency plot.
struct LatencySeries {
    name: &'static str,
    color: RGBColor,
    dashed: bool,
    values: Vec<f64>,
}

fn latency_series(results: &Results) -> Vec<LatencySeries> {
    let storm_edits: Vec<&Edit> = results.storms.iter().flat_map(|s| &s.edits).collect();
    let pick = |edits: &[&Edit], g: fn(&Edit) -> Option<f64>| -> Vec<f64> {
        edits.iter().filter_map(|e| g(e)).collect()
    };
    let quiet: Vec<&Edit> = results.edits.iter().collect();
    vec![
        LatencySeries {
            name: "first class, quiet edits",
            color: LIGHT_BLUE,
            dashed: true,
            values: pick(&quiet, |e| e.first_ms),
        },
        LatencySeries {
            name: "last class, quiet edits",
            color: DARK_BLUE,
            dashed: false,
            values: pick(&quiet, |e| e.last_ms),
        },
        LatencySeries {
            name: "first class, edits during the storms",
            color: PINK,
            dashed: true,
            values: pick(&storm_edits, |e| e.first_ms),
        },
        LatencySeries {
            name: "last class, edits during the storms",
            color: DARK_PURPLE,
            dashed: false,
            values: pick(&storm_edits, |e| e.last_ms),
        },
    ]
}

/// The steps of an empirical cumulative distribution: for each sorted value, the fraction below
/// it and the fraction at or below it.
fn cdf_steps(values: &[f64], floor: f64) -> Vec<(f64, f64)> {
    let mut sorted: Vec<f64> = values.iter().map(|v| v.max(floor)).collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    sorted
        .iter()
        .enumerate()
        .flat_map(|(i, v)| [(*v, i as f64 / n), (*v, (i + 1) as f64 / n)])
        .collect()
}

fn latency_plot(series: &[LatencySeries], path: &Path) -> Result<()> {
    // Log scale: the first class lands in tens of ms, the last of 100 in seconds.
    let floor = 1.0;
    let x_max = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .chain(LATENCY_TARGETS_MS)
        .fold(floor, f64::max)
        * 1.3;
    let root = SVGBackend::new(path, (1000, 560)).into_drawing_area();
    drawing(root.fill(&WHITE))?;
    let mut chart = drawing(
        ChartBuilder::on(&root)
            .caption(
                "Change-to-status latency of aws-auth edits (cumulative)",
                ("sans-serif", 22),
            )
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d((floor..x_max).log_scale(), 0.0..1.0),
    )?;
    drawing(
        chart
            .configure_mesh()
            .x_desc("from the aws-auth write returning to the bench's watch seeing the status (ms, log scale)")
            .y_desc("fraction of edits")
            .x_label_formatter(&|ms| format!("{ms:.0}"))
            .draw(),
    )?;
    let target_style = TARGET_RED.mix(0.7).stroke_width(1);
    for (i, target) in LATENCY_TARGETS_MS.iter().enumerate() {
        let line = drawing(chart.draw_series(std::iter::once(DashedPathElement::new(
            [(*target, 0.0), (*target, 1.0)],
            3,
            3,
            target_style,
        ))))?;
        if i == 0 {
            line.label("issue 13 targets (40, 100, 250 ms)")
                .legend(move |(x, y)| {
                    DashedPathElement::new([(x, y), (x + 20, y)], 3, 3, target_style)
                });
        }
    }
    for s in series.iter().filter(|s| !s.values.is_empty()) {
        let steps = cdf_steps(&s.values, floor);
        let style = s.color.stroke_width(2);
        let label = format!("{} (n {})", s.name, s.values.len());
        let color = s.color;
        if s.dashed {
            drawing(chart.draw_series(DashedLineSeries::new(steps, 6, 4, style)))?
                .label(label)
                .legend(move |(x, y)| {
                    DashedPathElement::new([(x, y), (x + 20, y)], 6, 4, color.stroke_width(2))
                });
        } else {
            drawing(chart.draw_series(LineSeries::new(steps, style)))?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
    }
    drawing(
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw(),
    )?;
    drawing(root.present())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_steps_rise_to_one() {
        let steps = cdf_steps(&[30.0, 10.0, 0.2], 1.0);
        assert_eq!(
            steps,
            vec![
                (1.0, 0.0),
                (1.0, 1.0 / 3.0),
                (10.0, 1.0 / 3.0),
                (10.0, 2.0 / 3.0),
                (30.0, 2.0 / 3.0),
                (30.0, 1.0)
            ]
        );
    }
}

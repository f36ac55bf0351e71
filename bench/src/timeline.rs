//! The run's timeline: every RSS sample of every operator process the bench started, and the
//! phases of the run marked on it (cold starts, idle, edits, relists, storms), as seconds since
//! the run began; downsampled for results.json and the RSS plot. Pure data behind a lock, no IO.

use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// What a marked span of the run was doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    ColdStart,
    Idle,
    WatchProbes,
    Edits,
    Relist,
    Storm,
}

impl Phase {
    pub const ALL: [Phase; 6] = [
        Phase::ColdStart,
        Phase::Idle,
        Phase::WatchProbes,
        Phase::Edits,
        Phase::Relist,
        Phase::Storm,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Phase::ColdStart => "cold starts",
            Phase::Idle => "idle",
            Phase::WatchProbes => "watch probes",
            Phase::Edits => "aws-auth edits",
            Phase::Relist => "forced relists",
            Phase::Storm => "storms",
        }
    }
}

/// One marked span, in seconds since the run began.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseSpan {
    pub phase: Phase,
    pub name: String,
    pub from_s: f64,
    pub to_s: f64,
}

/// One point of the RSS series: seconds since the run began, MiB.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RssPoint {
    pub t_s: f64,
    pub mib: f64,
}

#[derive(Default)]
struct Recorded {
    rss_kib: Vec<(Instant, u64)>,
    phases: Vec<(Phase, String, Instant, Instant)>,
}

/// Shared by every RSS sampler and phase of one run.
#[derive(Clone)]
pub struct Timeline {
    origin: Instant,
    recorded: Arc<Mutex<Recorded>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Timeline {
    pub fn new(origin: Instant) -> Self {
        Self {
            origin,
            recorded: Arc::default(),
        }
    }

    pub fn record_rss(&self, at: Instant, kib: u64) {
        lock(&self.recorded).rss_kib.push((at, kib));
    }

    pub fn mark(&self, phase: Phase, name: impl Into<String>, from: Instant, to: Instant) {
        lock(&self.recorded)
            .phases
            .push((phase, name.into(), from, to));
    }

    fn seconds(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.origin).as_secs_f64()
    }

    pub fn phases(&self) -> Vec<PhaseSpan> {
        lock(&self.recorded)
            .phases
            .iter()
            .map(|(phase, name, from, to)| PhaseSpan {
                phase: *phase,
                name: name.clone(),
                from_s: self.seconds(*from),
                to_s: self.seconds(*to),
            })
            .collect()
    }

    /// The RSS series with at most about `max_points` points (see [`downsample`]).
    pub fn rss(&self, max_points: usize) -> Vec<RssPoint> {
        let points: Vec<RssPoint> = lock(&self.recorded)
            .rss_kib
            .iter()
            .map(|(at, kib)| RssPoint {
                t_s: self.seconds(*at),
                mib: *kib as f64 / 1024.0,
            })
            .collect();
        downsample(&points, max_points)
    }
}

/// At most about `max_points` points out of a time-ordered series: the span is cut into
/// `max_points` equal time buckets and each keeps its highest sample (a peak must survive), at the
/// time of that sample. A bucket without a sample stays empty, so gaps (no operator running) stay
/// gaps.
pub fn downsample(points: &[RssPoint], max_points: usize) -> Vec<RssPoint> {
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return Vec::new();
    };
    if points.len() <= max_points || max_points == 0 {
        return points.to_vec();
    }
    let width = (last.t_s - first.t_s) / max_points as f64;
    let mut out: Vec<RssPoint> = Vec::with_capacity(max_points);
    let mut bucket = usize::MAX;
    for p in points {
        let b = (((p.t_s - first.t_s) / width) as usize).min(max_points - 1);
        match out.last_mut() {
            Some(kept) if b == bucket => {
                if p.mib > kept.mib {
                    *kept = *p;
                }
            }
            _ => {
                bucket = b;
                out.push(*p);
            }
        }
    }
    out
}

/// The series cut where consecutive points lie more than `gap_s` apart (between two operator
/// processes), so a plot does not draw a line across the gap.
pub fn segments(points: &[RssPoint], gap_s: f64) -> Vec<&[RssPoint]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..points.len() {
        if points[i].t_s - points[i - 1].t_s > gap_s {
            out.push(&points[start..i]);
            start = i;
        }
    }
    if start < points.len() {
        out.push(&points[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(values: &[(f64, f64)]) -> Vec<RssPoint> {
        values
            .iter()
            .map(|&(t_s, mib)| RssPoint { t_s, mib })
            .collect()
    }

    #[test]
    fn downsampling_keeps_each_buckets_peak() {
        let points: Vec<RssPoint> = (0..1000)
            .map(|i| RssPoint {
                t_s: f64::from(i) * 0.05,
                mib: if i == 537 { 99.0 } else { 10.0 },
            })
            .collect();
        let out = downsample(&points, 100);
        assert!(out.len() <= 100);
        assert!(out.iter().any(|p| p.mib == 99.0));
        assert_eq!(downsample(&points[..10], 100).len(), 10);
    }

    #[test]
    fn segments_split_at_gaps() {
        let points = series(&[(0.0, 1.0), (0.05, 1.0), (5.0, 2.0), (5.05, 2.0)]);
        let parts = segments(&points, 1.0);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[1].len(), 2);
    }
}

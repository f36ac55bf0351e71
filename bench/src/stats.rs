//! Order statistics of the bench's samples (nearest-rank percentiles) and quantiles estimated
//! from a Prometheus histogram. Pure: no IO.

use serde::Serialize;

/// Percentiles of a sample set, in the samples' unit.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

/// Nearest-rank percentile of sorted samples: the smallest sample with at least `p` of the
/// samples at or below it.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

pub fn summary(samples: &[f64]) -> Summary {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return Summary {
            n: 0,
            min: f64::NAN,
            p50: f64::NAN,
            p90: f64::NAN,
            p99: f64::NAN,
            max: f64::NAN,
            mean: f64::NAN,
        };
    }
    Summary {
        n: sorted.len(),
        min: sorted[0],
        p50: percentile(&sorted, 0.50),
        p90: percentile(&sorted, 0.90),
        p99: percentile(&sorted, 0.99),
        max: sorted[sorted.len() - 1],
        mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
    }
}

pub fn median(samples: &[f64]) -> f64 {
    summary(samples).p50
}

/// The `q` quantile of a cumulative histogram (upper bound, count), interpolated linearly inside
/// the bucket as Prometheus' `histogram_quantile` does; `None` without observations.
pub fn histogram_quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let target = q * total;
    let mut lower = (0.0, 0.0);
    for &(bound, count) in buckets {
        if count >= target {
            if bound.is_infinite() {
                return Some(lower.0);
            }
            let in_bucket = count - lower.1;
            let fraction = if in_bucket > 0.0 {
                (target - lower.1) / in_bucket
            } else {
                1.0
            };
            return Some(lower.0 + (bound - lower.0) * fraction);
        }
        lower = (bound, count);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = summary(&v);
        assert_eq!((s.p50, s.p90, s.p99, s.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(summary(&[3.0]).p99, 3.0);
        assert!(summary(&[]).p50.is_nan());
    }

    #[test]
    fn histogram_quantiles_interpolate_within_the_bucket() {
        let b = [(0.1, 50.0), (0.2, 100.0), (f64::INFINITY, 100.0)];
        assert_eq!(histogram_quantile(&b, 0.5), Some(0.1));
        let q = histogram_quantile(&b, 0.75).unwrap_or_default();
        assert!((q - 0.15).abs() < 1e-9);
        assert_eq!(histogram_quantile(&[(f64::INFINITY, 0.0)], 0.5), None);
    }
}

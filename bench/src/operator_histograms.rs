//! The operator's own account of the run, read from its /metrics at the end: its
//! change-to-status histogram (trigger arrival → status written) and reconcile durations, as
//! bucket-interpolated quantiles. Does IO (the operator's /metrics).

use crate::observe::scrape;
use crate::results::OperatorHistogram;
use crate::stats::histogram_quantile;
use anyhow::Result;

pub async fn read(address: &str) -> Result<OperatorHistogram> {
    let last = scrape(address).await?;
    let buckets = last.buckets("karpenter_health_change_to_status_seconds");
    Ok(OperatorHistogram {
        count: buckets.last().map_or(0.0, |b| b.1),
        p50_ms: histogram_quantile(&buckets, 0.5).map(|s| s * 1000.0),
        p90_ms: histogram_quantile(&buckets, 0.9).map(|s| s * 1000.0),
        p99_ms: histogram_quantile(&buckets, 0.99).map(|s| s * 1000.0),
        reconcile: {
            let b = last.buckets("karpenter_health_reconcile_duration_seconds");
            [0.5, 0.9, 0.99]
                .iter()
                .map(|q| histogram_quantile(&b, *q).map(|s| s * 1000.0))
                .collect()
        },
        reconciles: last.sum("karpenter_health_reconcile_duration_seconds_count"),
        reconcile_errors: last.sum("karpenter_health_reconcile_errors_total"),
    })
}

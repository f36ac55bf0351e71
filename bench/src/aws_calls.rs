//! AWS calls per hour, by operation, over a window of the run, with the status writes,
//! reconciles and CPU seconds of the same window: the operator's /metrics and /proc read at both
//! ends. Does IO (the operator's /metrics, /proc).

use crate::observe::{Scrape, cpu_seconds, scrape};
use crate::results::Window;
use anyhow::Result;
use std::collections::BTreeMap;
use std::time::Instant;

/// Every AWS call the operator has counted.
pub fn total_aws_calls(s: &Scrape) -> f64 {
    s.sum("karpenter_health_aws_calls_total")
}

/// The series that grew from `before` to `after`, by how much.
fn delta(after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect()
}

/// The operator's counters when a window opened.
pub struct WindowStart {
    before: Scrape,
    cpu_before: f64,
    /// When the window opened (after the counters were read).
    pub from: Instant,
}

/// Opens a window on the operator at `address` (process `pid`).
pub async fn start(address: &str, pid: u32) -> Result<WindowStart> {
    let before = scrape(address).await?;
    let cpu_before = cpu_seconds(pid)?;
    Ok(WindowStart {
        before,
        cpu_before,
        from: Instant::now(),
    })
}

impl WindowStart {
    /// Closes the window at `to` and reads the counters again.
    pub async fn end(self, to: Instant, address: &str, pid: u32) -> Result<Window> {
        let seconds = (to - self.from).as_secs_f64();
        let after = scrape(address).await?;
        let calls = delta(&after.aws_calls(), &self.before.aws_calls());
        let grown = |name: &str| after.sum(name) - self.before.sum(name);
        Ok(Window {
            seconds,
            aws_calls_per_hour: calls.values().sum::<f64>() / seconds * 3600.0,
            aws_calls_by_operation_per_hour: calls
                .iter()
                .map(|(k, v)| (k.clone(), v / seconds * 3600.0))
                .collect(),
            status_patches: grown("karpenter_health_status_patches_total"),
            reconciles: grown("karpenter_health_reconcile_duration_seconds_count"),
            cpu_s: cpu_seconds(pid)? - self.cpu_before,
            // The caller has the bench's own watch: `Window::with_changes_seen`.
            status_changes_seen: 0.0,
            stamp_only_changes_seen: 0.0,
            // The caller has the API server's client: `observe::apiserver_requests`.
            api_requests: None,
        })
    }
}

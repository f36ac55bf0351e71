//! What the lab reads in the real Karpenter's log: waiting for a line about this test's objects,
//! from the start or after a mark. Does IO (Karpenter's log, through its process).

use super::Lab;
use super::controller::LogMark;
use anyhow::{Context as _, Result};
use serde_json::Value;
use std::time::{Duration, Instant};

impl Lab {
    /// Waits until Karpenter logged `message` (within a JSON log line's `message`) for this test's
    /// objects (`fields` all present in the line's text: a NodePool's name, a Pod's), and
    /// returns the line.
    pub async fn wait_logged(
        &self,
        message: &str,
        fields: &[&str],
        deadline: Duration,
    ) -> Result<Value> {
        self.wait_logged_since(&LogMark::default(), message, fields, deadline)
            .await
    }

    /// [`Lab::wait_logged`], of what Karpenter logged after `mark` only.
    pub async fn wait_logged_since(
        &self,
        mark: &LogMark,
        message: &str,
        fields: &[&str],
        deadline: Duration,
    ) -> Result<Value> {
        let started = Instant::now();
        let what = format!("Karpenter to log {message:?} {fields:?}");
        let line = crate::wait_for(&what, deadline, || async {
            Ok(self
                .karpenter
                .logged_since(mark, message)
                .into_iter()
                .find(|line| {
                    let text = line.to_string();
                    fields.iter().all(|f| text.contains(f))
                }))
        })
        .await
        .with_context(|| format!("Karpenter's log ends:\n{}", self.karpenter.log_tail(15)))?;
        eprintln!("lab: {what} after {:.1} s", started.elapsed().as_secs_f64());
        Ok(line)
    }
}

//! The idle window: nothing changes for `--idle`, so the operator only refreshes; its steady RSS,
//! AWS calls per hour, status writes, reconciles and CPU. Does IO (waits, the operator's /metrics,
//! /proc).

use crate::aws_calls;
use crate::observe::RssSampler;
use crate::operator::Operator;
use crate::results::Idle;
use crate::state::{Bench, mib};
use crate::stats::summary;
use crate::timeline::Phase;
use anyhow::Result;
use std::time::Instant;

impl Bench {
    pub async fn idle(&self, op: &mut Operator, sampler: &RssSampler) -> Result<Idle> {
        println!("bench: idle window of {} s", self.args.idle.as_secs_f64());
        let window = aws_calls::start(&op.address, op.pid).await?;
        let changes_before = self.health.status_changes();
        let from = window.from;
        tokio::time::sleep(self.args.idle).await;
        op.check_alive()?;
        let to = Instant::now();
        self.timeline.mark(Phase::Idle, "idle", from, to);
        let window = window
            .end(to, &op.address, op.pid)
            .await?
            .with_changes_seen(changes_before, self.health.status_changes());
        let rss: Vec<f64> = sampler.between(from, to).iter().map(|k| mib(*k)).collect();
        let idle = Idle {
            window,
            rss_mib: summary(&rss),
        };
        println!("bench: idle: {idle:?}");
        Ok(idle)
    }
}

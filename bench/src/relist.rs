//! Forced relists: the API server restarted on the same etcd (every watch of the operator must
//! list again), each followed by an aws-auth edit that must land; the recovery time and the RSS
//! peak of each, and the settled RSS afterwards. Does IO (restarts the bed's API server, /proc).

use crate::observe::{RssSampler, memory, reset_peak};
use crate::operator::Operator;
use crate::results::Relist;
use crate::state::{Bench, mib};
use crate::stats::{Summary, summary};
use crate::timeline::Phase;
use anyhow::Result;
use std::time::{Duration, Instant};

impl Bench {
    /// `--relists` API server restarts, each with the RSS peak of its own.
    pub async fn relists(&mut self, op: &mut Operator) -> Result<Vec<Relist>> {
        let mut relists = Vec::new();
        for r in 0..self.args.relists {
            let rss_before = memory(op.pid)?.rss_kib;
            let from = Instant::now();
            reset_peak(op.pid)?;
            let restart = self
                .bed
                .restart_api_server(self.args.bed_script.as_deref())
                .await?;
            let restarted_at = Instant::now();
            let edit = self
                .edit(&op.address, Duration::from_secs(300), true)
                .await?;
            let recovery_s = edit
                .last_ms
                .map(|l| (edit.returned_at - restarted_at).as_secs_f64() + l / 1000.0);
            tokio::time::sleep(self.args.settle).await;
            op.check_alive()?;
            let m = memory(op.pid)?;
            self.timeline.mark(
                Phase::Relist,
                format!("relist {}", r + 1),
                from,
                Instant::now(),
            );
            let relist = Relist {
                restart_s: restart.as_secs_f64(),
                recovery_s,
                rss_before_mib: mib(rss_before),
                peak_mib: mib(m.hwm_kib),
                rss_after_mib: mib(m.rss_kib),
                edit_timed_out: edit.timed_out,
            };
            println!("bench: relist {}: {relist:?}", r + 1);
            relists.push(relist);
        }
        Ok(relists)
    }

    /// Repairs aws-auth if the last edit left it broken, then the RSS samples of one settle
    /// window.
    pub async fn settled_after_relists(
        &mut self,
        op: &Operator,
        sampler: &RssSampler,
    ) -> Result<Summary> {
        if self.broken {
            let edit = self
                .edit(&op.address, Duration::from_secs(300), true)
                .await?;
            if edit.timed_out {
                println!("bench: the final repair did not land");
            }
        }
        let from = Instant::now();
        tokio::time::sleep(self.args.settle).await;
        let post: Vec<f64> = sampler
            .between(from, Instant::now())
            .iter()
            .map(|k| mib(*k))
            .collect();
        Ok(summary(&post))
    }
}

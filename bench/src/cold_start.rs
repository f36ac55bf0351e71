//! Cold start and memory per NodeClaim: the operator binary started on a clean slate (no
//! KarpenterHealth), timed until /readyz answers and every KarpenterHealth is evaluated, with its
//! peak and settled RSS; one cold start at each smaller NodeClaim count (seeding the NodeClaims up
//! to it) for the memory per NodeClaim, and several at full scale. Does IO (spawns the operator,
//! API server, /proc).

use crate::node_claims;
use crate::observe::{self, RssSampler, memory};
use crate::operator::Operator;
use crate::results::{ColdStart, MemoryStep, Results};
use crate::state::{Bench, mib};
use crate::stats::median;
use crate::timeline::Phase;
use anyhow::{Result, bail};
use karpenter_health_api::KarpenterHealth;
use kube::api::{Api, DeleteParams, ListParams};
use std::time::{Duration, Instant};

impl Bench {
    async fn delete_healths(&self) -> Result<()> {
        let api: Api<KarpenterHealth> = Api::all(self.client.clone());
        api.delete_collection(&DeleteParams::default(), &ListParams::default())
            .await?;
        let classes = self.classes.clone();
        self.health
            .wait(
                "every KarpenterHealth deleted",
                Duration::from_secs(60),
                |s| classes.iter().all(|c| !s.contains_key(c)).then_some(()),
            )
            .await
    }

    /// Starts the operator on a clean slate (no KarpenterHealth) and times its start; returns it
    /// running with its RSS sampler.
    async fn cold_start(&mut self, label: &str) -> Result<(Operator, RssSampler, ColdStart)> {
        self.delete_healths().await?;
        let log = self
            .args
            .out
            .join(format!("operator-{:02}-{label}.log", self.starts));
        self.starts += 1;
        let mut op = Operator::spawn(
            &self.binary,
            &self.bed,
            &self.aws_endpoint,
            &log,
            &self.args.operator_args,
            &self.args.operator_env,
        )?;
        let sampler = RssSampler::start(op.pid, Duration::from_millis(50), self.timeline.clone());
        let deadline = self.startup_deadline();
        let ready_at = loop {
            if observe::ready(&op.address).await {
                break Instant::now();
            }
            op.check_alive()?;
            if op.started.elapsed() > deadline {
                bail!("the operator was not ready within {deadline:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let classes = self.classes.clone();
        let started = op.started;
        let evaluated = self
            .health
            .wait("every KarpenterHealth evaluated", deadline, |s| {
                let mut last = started;
                for c in classes.iter() {
                    let at = s.get(c)?.evaluated_at?;
                    if at < started {
                        return None;
                    }
                    last = last.max(at);
                }
                Some(last)
            })
            .await?;
        let peak_at_evaluation = memory(op.pid)?.hwm_kib;
        tokio::time::sleep(self.args.settle).await;
        op.check_alive()?;
        let now = Instant::now();
        self.timeline.mark(
            Phase::ColdStart,
            format!("cold start {label}"),
            started,
            now,
        );
        let last_write = self
            .health
            .snapshot()
            .iter()
            .filter(|(name, _)| self.classes.contains(name))
            .filter_map(|(_, seen)| seen.last_write_at)
            .max()
            .unwrap_or(evaluated);
        let settled: Vec<f64> = sampler
            .between(now - self.args.settle / 2, now)
            .iter()
            .map(|k| mib(*k))
            .collect();
        let result = ColdStart {
            ready_s: (ready_at - started).as_secs_f64(),
            first_evaluation_s: (evaluated - started).as_secs_f64(),
            ready_and_evaluated_s: (ready_at.max(evaluated) - started).as_secs_f64(),
            last_write_s: (last_write - started).as_secs_f64(),
            peak_at_evaluation_mib: mib(peak_at_evaluation),
            peak_mib: mib(memory(op.pid)?.hwm_kib),
            steady_mib: median(&settled),
        };
        println!(
            "bench: cold start [{label}]: ready {:.2} s, every KarpenterHealth evaluated {:.2} s, last status write {:.2} s, peak {:.1} MiB, settled {:.1} MiB",
            result.ready_s,
            result.first_evaluation_s,
            result.last_write_s,
            result.peak_mib,
            result.steady_mib
        );
        Ok((op, sampler, result))
    }

    /// One cold start at each of `--memory-steps` below the full scale and `--cold-starts` at
    /// full scale, seeding the NodeClaims (spread over `pools`) as the scale grows. Records the
    /// cold starts, memory steps, shutdowns and NodeClaim seeding in `results`; returns the last
    /// operator, still running, with its RSS sampler.
    pub async fn cold_starts_by_scale(
        &mut self,
        pools: &[(String, String)],
        results: &mut Results,
    ) -> Result<(Operator, RssSampler)> {
        let mut seeded = 0;
        let mut steps: Vec<usize> = self
            .args
            .memory_steps
            .iter()
            .copied()
            .filter(|n| *n < self.args.node_claims)
            .collect();
        steps.sort_unstable();
        steps.dedup();
        steps.push(self.args.node_claims);
        let mut seeding_time = Duration::ZERO;
        let mut last_operator = None;
        for (i, &target) in steps.iter().enumerate() {
            if target > seeded {
                let took = node_claims::seed(
                    &self.client,
                    pools,
                    self.args.node_classes,
                    seeded,
                    target,
                    self.args.seed_concurrency,
                )
                .await?;
                println!(
                    "bench: seeded NodeClaims {seeded}..{target} in {:.1} s",
                    took.as_secs_f64()
                );
                seeding_time += took;
                seeded = target;
            }
            let full = i == steps.len() - 1;
            let runs = if full {
                self.args.cold_starts.max(1)
            } else {
                1
            };
            let mut step_runs = Vec::new();
            for run in 0..runs {
                let (op, sampler, cold) = self.cold_start(&format!("{target}-claims")).await?;
                step_runs.push(cold.clone());
                if full {
                    results.cold_starts.push(cold);
                }
                if full && run == runs - 1 {
                    last_operator = Some((op, sampler));
                } else {
                    let took = op.stop().await?;
                    results.shutdowns_s.push(took.as_secs_f64());
                }
            }
            results.memory_steps.push(MemoryStep {
                node_claims: target,
                steady_mib: median(&step_runs.iter().map(|c| c.steady_mib).collect::<Vec<_>>()),
                peak_mib: median(&step_runs.iter().map(|c| c.peak_mib).collect::<Vec<_>>()),
                runs: step_runs.len(),
            });
        }
        results.seeding.node_claims_s = seeding_time.as_secs_f64();
        results.seeding.node_claims_per_s = seeded as f64 / seeding_time.as_secs_f64().max(1e-9);
        last_operator.ok_or_else(|| anyhow::anyhow!("no operator running"))
    }
}

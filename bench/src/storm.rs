//! Storms: bursts of watched writes, each measured over its own window while aws-auth edits keep
//! running as in the edits phase. The Pod storm creates and then deletes `--storm-pods` benign
//! Pending Pods, which should change no status; the NodeClaim storm creates `--storm-node-claims`
//! healthy NodeClaims spread over `--storm-over` and then deletes them, which changes only each
//! class's NodeClaim count. Per window: reconciles per class per second from the operator's
//! per-class counter (scraped every second), status writes beyond the edits' own, the edits'
//! change-to-status latency and the RSS peak. Does IO (API server, the operator's /metrics,
//! /proc).

use crate::aws_calls;
use crate::change_to_status::EDIT_DEADLINE;
use crate::node_claims;
use crate::observe::{memory, reset_peak, scrape};
use crate::operator::Operator;
use crate::pods;
use crate::results::{Edit, RatePoint, Storm};
use crate::state::{Bench, jitter, mib};
use crate::timeline::Phase;
use anyhow::Result;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The operator's completed reconciles, by EC2NodeClass.
const RECONCILES_BY_CLASS: &str = "karpenter_health_reconciles_total";

/// One scrape of the per-class reconcile counters: seconds since the window opened, counts.
type CounterSample = (f64, BTreeMap<String, f64>);

/// What one storm's load is.
struct Load<F> {
    name: String,
    objects: usize,
    /// Whether the load legitimately changes a status (a class's NodeClaim count); if not, every
    /// status write the edits do not explain is needless.
    changes_status: bool,
    /// The writes themselves; returns how long they took.
    writes: F,
}

impl Bench {
    /// The Pod storm and then the NodeClaim storm, each creation followed by the deletion of what
    /// it created (so the cluster is back at the seeded scale). Skipped when their flags are 0.
    pub async fn storms(
        &mut self,
        op: &mut Operator,
        pools: &[(String, String)],
    ) -> Result<Vec<Storm>> {
        let mut storms = Vec::new();
        let concurrency = self.args.seed_concurrency;
        let pods = self.args.storm_pods;
        if pods > 0 {
            pods::prepare_namespace(&self.client).await?;
            let pool_names: Vec<String> = pools.iter().map(|(name, _)| name.clone()).collect();
            let writes = pods::create_pending(self.client.clone(), pool_names, pods, concurrency);
            let load = Load {
                name: format!("{pods} Pending Pods created"),
                objects: pods,
                changes_status: false,
                writes,
            };
            storms.push(self.storm(op, load).await?);
            let writes = pods::delete(self.client.clone(), pods, concurrency);
            let load = Load {
                name: format!("{pods} Pending Pods deleted"),
                objects: pods,
                changes_status: false,
                writes,
            };
            storms.push(self.storm(op, load).await?);
        }
        let claims = self.args.storm_node_claims;
        if claims > 0 {
            // Numbered after the seeded ones, so their names and classes follow the same scheme.
            let numbers = self.args.node_claims..self.args.node_claims + claims;
            let over = self.args.storm_over;
            let (client, owned_pools, classes) =
                (self.client.clone(), pools.to_vec(), self.args.node_classes);
            let range = numbers.clone();
            let writes = async move {
                node_claims::seed_paced(&client, &owned_pools, classes, range, concurrency, over)
                    .await
            };
            let load = Load {
                name: format!("{claims} NodeClaims created over {} s", over.as_secs_f64()),
                objects: claims,
                changes_status: true,
                writes,
            };
            storms.push(self.storm(op, load).await?);
            let (client, owned_pools) = (self.client.clone(), pools.to_vec());
            let writes = async move {
                node_claims::delete(&client, &owned_pools, numbers, concurrency).await
            };
            let load = Load {
                name: format!("{claims} NodeClaims deleted"),
                objects: claims,
                changes_status: true,
                writes,
            };
            storms.push(self.storm(op, load).await?);
        }
        Ok(storms)
    }

    /// Runs `load` while aws-auth edits go on back to back, and measures the window from just
    /// before the load until `--storm-tail` after it (and the last edit landed).
    async fn storm<F>(&mut self, op: &mut Operator, load: Load<F>) -> Result<Storm>
    where
        F: Future<Output = Result<Duration>>,
    {
        println!("bench: storm: {}", load.name);
        let rss_before = memory(op.pid)?.rss_kib;
        reset_peak(op.pid)?;
        let window = aws_calls::start(&op.address, op.pid).await?;
        let changes_before = self.health.status_changes();
        let opened = window.from;
        let tail = self.args.storm_tail;
        // `closing` stops the edits (after the one in flight); `stopped` the counter scrapes once
        // the edits are done too.
        let (closing_tx, closing) = watch::channel(false);
        let (stopped_tx, stopped) = watch::channel(false);
        let writes = load.writes;
        let load_then_tail = async move {
            let took = writes.await;
            tokio::time::sleep(tail).await;
            let _ = closing_tx.send(true);
            took
        };
        let address = op.address.clone();
        let edits = self.edits_until(&address, closing);
        let work = async move {
            let done = tokio::try_join!(load_then_tail, edits);
            let _ = stopped_tx.send(true);
            done
        };
        let (done, samples) = tokio::join!(work, sample_counters(&address, opened, stopped));
        let (took, edits) = done?;
        let closed = Instant::now();
        self.timeline
            .mark(Phase::Storm, load.name.clone(), opened, closed);
        let window = window
            .end(closed, &op.address, op.pid)
            .await?
            .with_changes_seen(changes_before, self.health.status_changes());
        op.check_alive()?;
        let m = memory(op.pid)?;
        let rates = class_rates(&samples);
        let edit_writes = (edits.len() * self.classes.len()) as f64;
        let storm = Storm {
            name: load.name,
            objects: load.objects,
            load_s: took.as_secs_f64(),
            changes_status: load.changes_status,
            edit_writes,
            other_writes: window.status_patches - edit_writes,
            window,
            tail_s: tail.as_secs_f64(),
            reconciles_per_class_per_s: rates.busiest_average,
            busiest_class: rates.busiest_class,
            peak_reconciles_per_class_per_s: rates.peak,
            peak_class: rates.peak_class,
            rates: rates.series,
            edits,
            rss_before_mib: mib(rss_before),
            peak_mib: mib(m.hwm_kib),
            rss_after_mib: mib(m.rss_kib),
        };
        println!(
            "bench: storm [{}]: writes {:.1} s, window {:.1} s, {} edits, reconciles per class per second {:.2} (window average, {}) / {:.2} (highest 1 s), status writes {} ({} for the edits), RSS peak {:.1} MiB",
            storm.name,
            storm.load_s,
            storm.window.seconds,
            storm.edits.len(),
            storm.reconciles_per_class_per_s,
            storm.busiest_class,
            storm.peak_reconciles_per_class_per_s,
            storm.window.status_patches,
            storm.edit_writes,
            storm.peak_mib
        );
        Ok(storm)
    }

    /// aws-auth edits, each timed as in the edits phase, with a short jittered pause in between,
    /// until `closing` turns true.
    async fn edits_until(
        &mut self,
        address: &str,
        mut closing: watch::Receiver<bool>,
    ) -> Result<Vec<Edit>> {
        let mut edits = Vec::new();
        for i in 0.. {
            if *closing.borrow_and_update() {
                break;
            }
            edits.push(self.edit(address, EDIT_DEADLINE, false).await?);
            tokio::select! {
                () = tokio::time::sleep(jitter(i, 100, 400)) => {}
                _ = closing.changed() => {}
            }
        }
        Ok(edits)
    }
}

/// Scrapes the per-class reconcile counters every second, from the start until `stopped`, and
/// once more at the end.
async fn sample_counters(
    address: &str,
    opened: Instant,
    mut stopped: watch::Receiver<bool>,
) -> Vec<CounterSample> {
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let stop = tokio::select! {
            _ = tick.tick() => false,
            _ = stopped.wait_for(|s| *s) => true,
        };
        // A failed scrape leaves a longer interval; the rates divide by the real time between.
        if let Ok(s) = scrape(address).await {
            let at = opened.elapsed().as_secs_f64();
            samples.push((at, s.by_label(RECONCILES_BY_CLASS, "node_class")));
        }
        if stop {
            return samples;
        }
    }
}

/// The reconcile rates of a storm window.
#[derive(Debug, Default, PartialEq)]
struct ClassRates {
    /// The highest of the classes' average reconciles per second over the window, and whose.
    busiest_average: f64,
    busiest_class: String,
    /// The highest reconciles per second of any class between two consecutive scrapes, and
    /// whose.
    peak: f64,
    peak_class: String,
    series: Vec<RatePoint>,
}

/// Reconcile rates from counter scrapes (a class missing from a scrape had not reconciled yet:
/// 0).
fn class_rates(samples: &[CounterSample]) -> ClassRates {
    let mut rates = ClassRates::default();
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return rates;
    };
    let count = |s: &CounterSample, class: &str| s.1.get(class).copied().unwrap_or(0.0);
    let span = last.0 - first.0;
    if span > 0.0 {
        for class in last.1.keys() {
            let average = (count(last, class) - count(first, class)) / span;
            if average > rates.busiest_average {
                rates.busiest_average = average;
                rates.busiest_class = class.clone();
            }
        }
    }
    for pair in samples.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        let seconds = after.0 - before.0;
        if seconds <= 0.0 {
            continue;
        }
        let mut busiest = 0.0;
        let mut all = 0.0;
        for class in after.1.keys() {
            let rate = (count(after, class) - count(before, class)) / seconds;
            all += rate;
            if rate > busiest {
                busiest = rate;
                if rate > rates.peak {
                    rates.peak = rate;
                    rates.peak_class = class.clone();
                }
            }
        }
        rates.series.push(RatePoint {
            t_s: after.0,
            busiest_class_per_s: busiest,
            all_classes_per_s: all,
        });
    }
    rates
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, counts: &[(&str, f64)]) -> CounterSample {
        (
            t,
            counts.iter().map(|(c, v)| ((*c).to_owned(), *v)).collect(),
        )
    }

    #[test]
    fn rates_per_class_average_and_one_second_peak() {
        let samples = [
            sample(0.0, &[("a", 10.0)]),
            sample(1.0, &[("a", 11.0), ("b", 4.0)]),
            sample(2.0, &[("a", 12.0), ("b", 4.0)]),
            sample(4.0, &[("a", 14.0), ("b", 5.0)]),
        ];
        let rates = class_rates(&samples);
        // a: 4 in 4 s; b: 5 in 4 s (absent at first = 0).
        assert_eq!(rates.busiest_class, "b");
        assert!((rates.busiest_average - 1.25).abs() < 1e-9);
        // b's 4 in the first second is the highest 1 s rate.
        assert_eq!(rates.peak_class, "b");
        assert!((rates.peak - 4.0).abs() < 1e-9);
        assert_eq!(rates.series.len(), 3);
        assert!((rates.series[0].all_classes_per_s - 5.0).abs() < 1e-9);
        assert!((rates.series[2].busiest_class_per_s - 1.0).abs() < 1e-9);
    }

    #[test]
    fn no_samples_no_rates() {
        assert_eq!(class_rates(&[]), ClassRates::default());
    }
}

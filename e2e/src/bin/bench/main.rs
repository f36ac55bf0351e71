//! The karpenter-health benchmark (a benchmark, not a test): on a running bed it seeds 10,000
//! NodeClaims, 50 NodePools and 20 EC2NodeClasses, runs the operator binary as a child process and
//! measures cold start, steady and peak RSS (also across forced relists), change-to-status latency
//! of aws-auth edits against the API server's own watch delivery, and AWS calls per hour; writes
//! the figures as JSON and Markdown. Does IO (bed, moto, child process, files).
//!
//! Run it through `bash e2e/bench.sh`, which starts and stops a bed of its own.
#![forbid(unsafe_code)]

mod observe;
mod operator;
mod report;
mod seed;
mod stats;

use anyhow::{Context, Result, bail};
use clap::Parser;
use k8s_openapi::api::core::v1::ConfigMap;
use karpenter_health_api::KarpenterHealth;
use karpenter_health_e2e::Bed;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use observe::{ConfigMapTracker, HealthTracker, RssSampler, Scrape, memory, reset_peak, scrape};
use operator::Operator;
use report::*;
use stats::{median, summary};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Flags of the benchmark; the defaults are the documented full-scale run.
#[derive(Debug, Parser)]
#[command(
    name = "bench",
    about = "karpenter-health benchmark on a running bed (KH_BED_DIR)"
)]
struct Args {
    #[arg(long, default_value_t = 10_000)]
    node_claims: usize,
    #[arg(long, default_value_t = 50)]
    node_pools: usize,
    #[arg(long, default_value_t = 20)]
    node_classes: usize,
    /// aws-auth edits (alternately breaking and repairing the node role mapping).
    #[arg(long, default_value_t = 100)]
    edits: usize,
    /// ConfigMap writes timed through the bench's own watch (API server watch delivery).
    #[arg(long, default_value_t = 100)]
    watch_probes: usize,
    /// Operator cold starts at full scale (the last one stays up for the other phases).
    #[arg(long, default_value_t = 5)]
    cold_starts: usize,
    /// API server restarts (each a forced relist of every watch).
    #[arg(long, default_value_t = 5)]
    relists: usize,
    /// Idle window for steady RSS and AWS calls per hour (two default refresh intervals).
    #[arg(long, default_value = "600s", value_parser = karpenter_health_operator::config::parse_duration)]
    idle: Duration,
    /// How long RSS is sampled after each cold start and relist before it counts as settled.
    #[arg(long, default_value = "30s", value_parser = karpenter_health_operator::config::parse_duration)]
    settle: Duration,
    /// NodeClaim counts below the full scale at which one cold start measures steady RSS, for
    /// the memory per NodeClaim.
    #[arg(long, value_delimiter = ',', default_value = "0,5000")]
    memory_steps: Vec<usize>,
    /// Concurrent requests while seeding NodeClaims.
    #[arg(long, default_value_t = 32)]
    seed_concurrency: usize,
    /// The operator binary (default: the workspace's release build).
    #[arg(long)]
    operator: Option<PathBuf>,
    /// Environment for the operator, `KEY=VALUE` (e.g. MALLOC_ARENA_MAX=2 for an allocator
    /// experiment).
    #[arg(long, value_parser = parse_env)]
    operator_env: Vec<(String, String)>,
    /// Extra arguments for `karpenter-health run`.
    #[arg(long, allow_hyphen_values = true, num_args = 1..)]
    operator_args: Vec<String>,
    /// Directory for results (results.json, results.md, operator logs).
    #[arg(long)]
    out: PathBuf,
    /// The bed script (for restart-apiserver).
    #[arg(long)]
    bed_script: Option<PathBuf>,
    /// Free text for the report (build profile, commit, command).
    #[arg(long, default_value = "")]
    build_info: String,
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("`{s}` is not KEY=VALUE"))
}

struct Bench {
    args: Args,
    bed: Bed,
    client: kube::Client,
    health: HealthTracker,
    config_maps: ConfigMapTracker,
    classes: Arc<Vec<String>>,
    binary: PathBuf,
    broken: bool,
    starts: usize,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `a - b` in milliseconds, negative when `a` came first.
fn signed_ms(a: Instant, b: Instant) -> f64 {
    if a >= b { ms(a - b) } else { -ms(b - a) }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn jitter(i: usize, base_ms: u64, spread_ms: u64) -> Duration {
    Duration::from_millis(base_ms + seed::mix(i as u64 ^ 0xbe4c) % spread_ms)
}

/// CPU seconds (user + system) a process has used.
fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the parenthesised command: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').context("stat format")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11).context("utime")?.parse::<f64>()?
        + fields.get(12).context("stime")?.parse::<f64>()?;
    Ok(ticks / 100.0)
}

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
            &log,
            &self.args.operator_args,
            &self.args.operator_env,
        )?;
        let sampler = RssSampler::start(op.pid, Duration::from_millis(50));
        let ready_at = loop {
            if observe::ready(&op.address).await {
                break Instant::now();
            }
            op.check_alive()?;
            if op.started.elapsed() > Duration::from_secs(300) {
                bail!("the operator was not ready within 300 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let classes = self.classes.clone();
        let started = op.started;
        let evaluated = self
            .health
            .wait(
                "every KarpenterHealth evaluated",
                Duration::from_secs(300),
                |s| {
                    let mut last = started;
                    for c in classes.iter() {
                        let at = s.get(c)?.evaluated_at?;
                        if at < started {
                            return None;
                        }
                        last = last.max(at);
                    }
                    Some(last)
                },
            )
            .await?;
        let peak_at_evaluation = memory(op.pid)?.hwm_kib;
        tokio::time::sleep(self.args.settle).await;
        op.check_alive()?;
        let now = Instant::now();
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

    /// Writes aws-auth with the node role mapping broken or repaired, retrying while the API
    /// server is away; returns (write start, write returned, resourceVersion).
    async fn write_aws_auth(&self, broken: bool) -> Result<(Instant, Instant, String)> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), "kube-system");
        let mut tries = 0;
        loop {
            let start = Instant::now();
            match api
                .patch(
                    "aws-auth",
                    &PatchParams::apply("karpenter-health-e2e").force(),
                    &Patch::Apply(seed::aws_auth(broken)),
                )
                .await
            {
                Ok(cm) => {
                    return Ok((
                        start,
                        Instant::now(),
                        cm.resource_version().unwrap_or_default(),
                    ));
                }
                Err(e) if tries < 60 => {
                    tries += 1;
                    if tries == 1 {
                        println!("bench: aws-auth write failed ({e}); retrying");
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e).context("writing aws-auth"),
            }
        }
    }

    /// One aws-auth edit: flips the mapping and times until every EC2NodeClass's NodeRoleMapped
    /// changed, as seen by the bench's own KarpenterHealth watch.
    async fn edit(&mut self, address: &str, deadline: Duration, poll: bool) -> Result<Edit> {
        let broken = !self.broken;
        let want = if broken { "False" } else { "True" };
        let calls_before = scrape(address).await.ok().map(|s| total_aws_calls(&s));
        let (start, returned, rv) = self.write_aws_auth(broken).await?;
        self.broken = broken;
        let classes = self.classes.clone();
        let watched = self.health.wait(
            "NodeRoleMapped to change on every EC2NodeClass",
            deadline,
            |s| {
                let mut at = Vec::with_capacity(classes.len());
                for c in classes.iter() {
                    let (status, arrived) = s.get(c)?.node_role_mapped.as_ref()?;
                    if status != want || *arrived < start {
                        return None;
                    }
                    at.push(*arrived);
                }
                Some(at)
            },
        );
        // After an API server restart the bench's own watch may itself be backing off: polling
        // with GET (every 200 ms) bounds what is measured to the operator's recovery.
        let polled = async {
            if !poll {
                return futures::future::pending::<Result<Vec<Instant>>>().await;
            }
            let api: Api<KarpenterHealth> = Api::all(self.client.clone());
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let Ok(list) = api.list(&ListParams::default()).await else {
                    continue;
                };
                let now = Instant::now();
                let done = classes.iter().all(|c| {
                    list.items.iter().any(|h| {
                        h.name_any() == *c
                            && h.status
                                .as_ref()
                                .and_then(|s| {
                                    s.condition(karpenter_health_api::ConditionType::NodeRoleMapped)
                                })
                                .is_some_and(|cond| cond.status == want)
                    })
                });
                if done {
                    return Ok(vec![now; classes.len()]);
                }
            }
        };
        let landed = tokio::select! {
            watched = watched => watched,
            polled = polled => polled,
        };
        let own_watch_ms = self
            .config_maps
            .arrival("aws-auth", &rv, Duration::from_secs(5))
            .await
            .ok()
            .map(|at| signed_ms(at, returned));
        let calls_after = scrape(address).await.ok().map(|s| total_aws_calls(&s));
        let aws_calls = match (calls_before, calls_after) {
            (Some(b), Some(a)) => Some(a - b),
            _ => None,
        };
        let (first_ms, last_ms, timed_out) = match landed {
            Ok(at) => {
                let first = at.iter().min().copied().unwrap_or(returned);
                let last = at.iter().max().copied().unwrap_or(returned);
                (
                    Some(signed_ms(first, returned)),
                    Some(signed_ms(last, returned)),
                    false,
                )
            }
            Err(e) => {
                println!("bench: edit to {want} did not land: {e:#}");
                (None, None, true)
            }
        };
        Ok(Edit {
            broken,
            write_rtt_ms: ms(returned - start),
            own_watch_ms,
            first_ms,
            last_ms,
            aws_calls,
            timed_out,
            returned_at: returned,
        })
    }

    async fn watch_probe(&self, i: usize) -> Result<WatchProbe> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), "kube-system");
        let value = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kh-bench-probe", "namespace": "kube-system"},
            "data": {"i": i.to_string()},
        });
        let start = Instant::now();
        let cm = api
            .patch(
                "kh-bench-probe",
                &PatchParams::apply("karpenter-health-bench").force(),
                &Patch::Apply(value),
            )
            .await?;
        let returned = Instant::now();
        let rv = cm.resource_version().unwrap_or_default();
        let arrived = self
            .config_maps
            .arrival("kh-bench-probe", &rv, Duration::from_secs(10))
            .await?;
        Ok(WatchProbe {
            write_rtt_ms: ms(returned - start),
            from_return_ms: signed_ms(arrived, returned),
            from_start_ms: signed_ms(arrived, start),
        })
    }

    async fn restart_apiserver(&self) -> Result<Duration> {
        let script = self.args.bed_script.clone().unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("bed")
                .join("bed.sh")
        });
        let started = Instant::now();
        let out = tokio::process::Command::new("bash")
            .arg(&script)
            .arg("restart-apiserver")
            .arg(&self.bed.dir)
            .output()
            .await?;
        if !out.status.success() {
            bail!(
                "restart-apiserver failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(started.elapsed())
    }

    /// Counts of (condition type, status, reason) over every KarpenterHealth now.
    fn condition_summary(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for seen in self.health.snapshot().values() {
            for (ty, (status, reason)) in &seen.conditions {
                *counts
                    .entry(format!("{ty}={status} ({reason})"))
                    .or_insert(0) += 1;
            }
        }
        counts
    }
}

fn total_aws_calls(s: &Scrape) -> f64 {
    s.sum("karpenter_health_aws_calls_total")
}

fn delta(after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect()
}

fn log_lines(dir: &std::path::Path) -> (usize, usize, usize) {
    let (mut watch_errors, mut gone, mut warnings) = (0, 0, 0);
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "log")
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                for line in text.lines() {
                    if line.contains("WARN") {
                        warnings += 1;
                    }
                    if line.contains("watch failed") {
                        watch_errors += 1;
                        if line.contains("410") || line.contains("too old") {
                            gone += 1;
                        }
                    }
                }
            }
        }
    }
    (watch_errors, gone, warnings)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.out)?;
    let bed = Bed::from_env()?;
    let client = bed.admin_client().await?;
    let binary = args
        .operator
        .clone()
        .unwrap_or_else(operator::default_binary);
    if !binary.exists() {
        bail!(
            "no operator binary at {} (build it: cargo build --release -p karpenter-health)",
            binary.display()
        );
    }
    let mut results = Results {
        date: jiff::Timestamp::now().to_string(),
        machine: Machine::detect(&client).await,
        build_info: args.build_info.clone(),
        scale: Scale {
            node_claims: args.node_claims,
            node_pools: args.node_pools,
            node_classes: args.node_classes,
        },
        ..Results::default()
    };
    println!("bench: {:?}", results.machine);
    karpenter_health_e2e::install_health_crd(&client).await?;

    // Seed: AWS, then Karpenter's install, EC2NodeClasses and NodePools.
    let t = Instant::now();
    let aws = seed::aws(&bed).await?;
    results.seeding.aws_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let pools = seed::kubernetes(&client, &aws, args.node_classes, args.node_pools).await?;
    results.seeding.kubernetes_s = t.elapsed().as_secs_f64();
    let classes: Vec<String> = (0..args.node_classes).map(seed::node_class_name).collect();
    let health = HealthTracker::start(&client);
    let config_maps = ConfigMapTracker::start(&client);
    let mut bench = Bench {
        args,
        bed,
        client: client.clone(),
        health,
        config_maps,
        classes: Arc::new(classes),
        binary,
        broken: false,
        starts: 0,
    };

    // Memory steps: one cold start at each smaller NodeClaim count.
    let mut seeded = 0;
    let mut steps: Vec<usize> = bench
        .args
        .memory_steps
        .iter()
        .copied()
        .filter(|n| *n < bench.args.node_claims)
        .collect();
    steps.sort_unstable();
    steps.dedup();
    steps.push(bench.args.node_claims);
    let mut seeding_time = Duration::ZERO;
    let mut last_operator = None;
    for (i, &target) in steps.iter().enumerate() {
        if target > seeded {
            let took = seed::node_claims(
                &client,
                &pools,
                bench.args.node_classes,
                seeded,
                target,
                bench.args.seed_concurrency,
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
            bench.args.cold_starts.max(1)
        } else {
            1
        };
        let mut step_runs = Vec::new();
        for run in 0..runs {
            let (op, sampler, cold) = bench.cold_start(&format!("{target}-claims")).await?;
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
    let (wire_bytes, wire_count, list_took) = seed::node_claim_list(&client).await?;
    results.seeding.list_all_node_claims_s = list_took.as_secs_f64();
    results.seeding.wire_bytes_per_node_claim = wire_bytes as f64 / wire_count.max(1) as f64;
    results.seeding.node_claims_listed = wire_count;
    let (mut op, sampler) = last_operator.context("no operator running")?;
    let address = op.address.clone();

    results.baseline = bench.condition_summary();
    let not_mapped: Vec<&String> = results
        .baseline
        .keys()
        .filter(|k| k.starts_with("NodeRoleMapped=") && !k.starts_with("NodeRoleMapped=True"))
        .collect();
    if !not_mapped.is_empty() {
        bail!(
            "the seeded setup is not healthy for NodeRoleMapped: {:#?}",
            results.baseline
        );
    }
    println!("bench: baseline conditions: {:#?}", results.baseline);

    // Idle: steady RSS, AWS calls and CPU over the idle window.
    println!("bench: idle window of {} s", bench.args.idle.as_secs_f64());
    let before = scrape(&address).await?;
    let cpu_before = cpu_seconds(op.pid)?;
    let idle_from = Instant::now();
    tokio::time::sleep(bench.args.idle).await;
    op.check_alive()?;
    let idle_to = Instant::now();
    let after = scrape(&address).await?;
    let idle_s = (idle_to - idle_from).as_secs_f64();
    let rss: Vec<f64> = sampler
        .between(idle_from, idle_to)
        .iter()
        .map(|k| mib(*k))
        .collect();
    let calls = delta(&after.aws_calls(), &before.aws_calls());
    results.idle = Idle {
        seconds: idle_s,
        rss_mib: summary(&rss),
        aws_calls_per_hour: calls.values().sum::<f64>() / idle_s * 3600.0,
        aws_calls_by_operation_per_hour: calls
            .iter()
            .map(|(k, v)| (k.clone(), v / idle_s * 3600.0))
            .collect(),
        status_patches: after.sum("karpenter_health_status_patches_total")
            - before.sum("karpenter_health_status_patches_total"),
        reconciles: after.sum("karpenter_health_reconcile_duration_seconds_count")
            - before.sum("karpenter_health_reconcile_duration_seconds_count"),
        cpu_s: cpu_seconds(op.pid)? - cpu_before,
    };
    println!("bench: idle: {:?}", results.idle);

    // The API server's own watch delivery on this bed.
    for i in 0..bench.args.watch_probes {
        results.watch_probes.push(bench.watch_probe(i).await?);
        tokio::time::sleep(jitter(i, 50, 150)).await;
    }

    // aws-auth edits.
    let before = scrape(&address).await?;
    let cpu_before = cpu_seconds(op.pid)?;
    let edits_from = Instant::now();
    for i in 0..bench.args.edits {
        let edit = bench.edit(&address, Duration::from_secs(60), false).await?;
        if i % 10 == 9 {
            println!(
                "bench: edit {}: first {:?} ms, last {:?} ms, own watch {:?} ms",
                i + 1,
                edit.first_ms,
                edit.last_ms,
                edit.own_watch_ms
            );
        }
        results.edits.push(edit);
        tokio::time::sleep(jitter(i, 300, 1000)).await;
    }
    let edits_s = edits_from.elapsed().as_secs_f64();
    let after = scrape(&address).await?;
    let calls = delta(&after.aws_calls(), &before.aws_calls());
    results.edit_window = Window {
        seconds: edits_s,
        aws_calls_per_hour: calls.values().sum::<f64>() / edits_s * 3600.0,
        aws_calls_by_operation_per_hour: calls
            .iter()
            .map(|(k, v)| (k.clone(), v / edits_s * 3600.0))
            .collect(),
        status_patches: after.sum("karpenter_health_status_patches_total")
            - before.sum("karpenter_health_status_patches_total"),
        reconciles: after.sum("karpenter_health_reconcile_duration_seconds_count")
            - before.sum("karpenter_health_reconcile_duration_seconds_count"),
        cpu_s: cpu_seconds(op.pid)? - cpu_before,
    };

    // Forced relists: restart the API server, then one edit must land; RSS peak of each.
    for r in 0..bench.args.relists {
        let rss_before = memory(op.pid)?.rss_kib;
        reset_peak(op.pid)?;
        let restart = bench.restart_apiserver().await?;
        let restarted_at = Instant::now();
        let edit = bench.edit(&address, Duration::from_secs(300), true).await?;
        let recovery_s = edit
            .last_ms
            .map(|l| (edit.returned_at - restarted_at).as_secs_f64() + l / 1000.0);
        tokio::time::sleep(bench.args.settle).await;
        op.check_alive()?;
        let m = memory(op.pid)?;
        let relist = Relist {
            restart_s: restart.as_secs_f64(),
            recovery_s,
            rss_before_mib: mib(rss_before),
            peak_mib: mib(m.hwm_kib),
            rss_after_mib: mib(m.rss_kib),
            edit_timed_out: edit.timed_out,
        };
        println!("bench: relist {}: {relist:?}", r + 1);
        results.relists.push(relist);
    }
    if bench.broken {
        let edit = bench.edit(&address, Duration::from_secs(300), true).await?;
        if edit.timed_out {
            println!("bench: the final repair did not land");
        }
    }
    let post_from = Instant::now();
    tokio::time::sleep(bench.args.settle).await;
    let post: Vec<f64> = sampler
        .between(post_from, Instant::now())
        .iter()
        .map(|k| mib(*k))
        .collect();
    results.post_relist_rss_mib = summary(&post);
    results.peak_overall_mib = mib(memory(op.pid)?.hwm_kib).max(
        results
            .relists
            .iter()
            .map(|r| r.peak_mib)
            .chain(results.cold_starts.iter().map(|c| c.peak_mib))
            .fold(0.0, f64::max),
    );

    let last = scrape(&address).await?;
    let buckets = last.buckets("karpenter_health_change_to_status_seconds");
    results.operator_histogram = OperatorHistogram {
        count: buckets.last().map_or(0.0, |b| b.1),
        p50_ms: stats::histogram_quantile(&buckets, 0.5).map(|s| s * 1000.0),
        p90_ms: stats::histogram_quantile(&buckets, 0.9).map(|s| s * 1000.0),
        p99_ms: stats::histogram_quantile(&buckets, 0.99).map(|s| s * 1000.0),
        reconcile: {
            let b = last.buckets("karpenter_health_reconcile_duration_seconds");
            [0.5, 0.9, 0.99]
                .iter()
                .map(|q| stats::histogram_quantile(&b, *q).map(|s| s * 1000.0))
                .collect()
        },
        reconciles: last.sum("karpenter_health_reconcile_duration_seconds_count"),
        reconcile_errors: last.sum("karpenter_health_reconcile_errors_total"),
    };
    drop(sampler);
    let took = op.stop().await?;
    results.shutdowns_s.push(took.as_secs_f64());
    let (watch_errors, gone, warnings) = log_lines(&bench.args.out);
    results.logs = Logs {
        watch_errors,
        gone_410: gone,
        warnings,
    };

    let out = bench.args.out.clone();
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&results)?,
    )?;
    let markdown = report::markdown(&results);
    std::fs::write(out.join("results.md"), &markdown)?;
    println!("{markdown}");
    Ok(())
}

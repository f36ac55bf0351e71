//! The karpenter-health benchmark (a benchmark, not a test): on a running bed it seeds 10,000
//! NodeClaims, 50 NodePools and 20 EC2NodeClasses, runs the operator binary as a child process and
//! measures cold start, steady and peak RSS (also across forced relists), change-to-status latency
//! of aws-auth edits against the API server's own watch delivery, AWS calls per hour, and what
//! storms of Pending Pods and NodeClaims cost; writes the figures as JSON and Markdown, with SVG
//! plots. Does IO (bed, moto, child process, files).
//!
//! Run it through `bash e2e/bench.sh`, which starts and stops a bed of its own. This file only
//! orchestrates: each measurement is a module of its own.
#![forbid(unsafe_code)]

mod aws_calls;
mod change_to_status;
mod cold_start;
mod idle;
mod logs;
mod node_claims;
mod observe;
mod operator;
mod operator_histograms;
mod plots;
mod pods;
mod relist;
mod report;
mod results;
mod seed;
mod state;
mod stats;
mod storm;
mod storm_report;
mod table;
mod targets;
mod timeline;
mod transient;
mod watch_delivery;

use anyhow::{Result, bail};
use clap::Parser;
use karpenter_health_e2e::Bed;
use karpenter_health_e2e::fault_proxy::FaultProxy;
use observe::memory;
use results::{Machine, RSS_TIMELINE_POINTS, Results, Scale};
use state::{Bench, mib};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use timeline::Timeline;

/// Flags of the benchmark; the defaults are the documented full-scale run.
#[derive(Debug, Parser)]
#[command(
    name = "bench",
    about = "karpenter-health benchmark on a running bed (KH_BED_DIR)",
    // A flag given twice takes the last value, so `make bench-large BENCH_FLAGS=...` can
    // override the large run's own flags.
    args_override_self = true
)]
struct Args {
    #[arg(long, default_value_t = 10_000)]
    node_claims: usize,
    #[arg(long, default_value_t = 50)]
    node_pools: usize,
    #[arg(long, default_value_t = 20)]
    node_classes: usize,
    /// Every this many EC2NodeClasses one has a node role, instance profile and KMS key of its
    /// own (0: every class shares them), so IAM and KMS questions differ among classes.
    #[arg(long, default_value_t = 0)]
    distinct_every: usize,
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
    /// Pending Pods created at once (and then deleted) in the Pod storm; 0 skips it.
    #[arg(long, default_value_t = 5000)]
    storm_pods: usize,
    /// NodeClaims created (and then deleted) in the NodeClaim storm; 0 skips it.
    #[arg(long, default_value_t = 1000)]
    storm_node_claims: usize,
    /// The NodeClaim storm's creations spread evenly over this long.
    #[arg(long, default_value = "60s", value_parser = karpenter_health_operator::config::parse_duration)]
    storm_over: Duration,
    /// How long a storm's window stays open after its writes, so the reconciles they caused
    /// count.
    #[arg(long, default_value = "10s", value_parser = karpenter_health_operator::config::parse_duration)]
    storm_tail: Duration,
    /// Concurrent requests while seeding NodeClaims (and in the storms).
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

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let timeline = Timeline::new(Instant::now());
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
            distinct_every: args.distinct_every,
        },
        ..Results::default()
    };
    println!("bench: {:?}", results.machine);
    karpenter_health_e2e::install_health_crd(&client).await?;

    // Seed: AWS, then Karpenter's install, EC2NodeClasses and NodePools.
    let t = Instant::now();
    let variety = seed::Variety {
        every: args.distinct_every,
    };
    let aws = seed::aws(&bed, args.node_classes, variety).await?;
    results.seeding.aws_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let pools = seed::kubernetes(&client, &aws, args.node_classes, args.node_pools).await?;
    results.seeding.kubernetes_s = t.elapsed().as_secs_f64();
    // The operator reaches moto through the fault proxy, which answers IAM's policy simulator
    // from moto's policies as IAM would; kept alive (and serving) until the run ends.
    let proxy = FaultProxy::start(bed.moto_url()?).await?;
    proxy.serve_simulator();
    let mut bench = Bench::new(
        args,
        bed,
        proxy.url(),
        client.clone(),
        binary,
        timeline.clone(),
    );

    // Cold starts and memory per NodeClaim, seeding the NodeClaims on the way; the last
    // operator stays up for the other phases.
    let (mut op, sampler) = bench.cold_starts_by_scale(&pools, &mut results).await?;
    let (wire_bytes, wire_count, list_took) = node_claims::timed_list(&client).await?;
    results.seeding.list_all_node_claims_s = list_took.as_secs_f64();
    results.seeding.wire_bytes_per_node_claim = wire_bytes as f64 / wire_count.max(1) as f64;
    results.seeding.node_claims_listed = wire_count;

    results.baseline = bench.healthy_baseline()?;
    results.idle = bench.idle(&mut op, &sampler).await?;
    results.watch_probes = bench.watch_probes().await?;
    (results.edits, results.edit_window) = bench.edits(&op).await?;
    results.relists = bench.relists(&mut op).await?;
    results.post_relist_rss_mib = bench.settled_after_relists(&op, &sampler).await?;
    results.peak_overall_mib = results.peak_overall(mib(memory(op.pid)?.hwm_kib));
    // Last, so the figures above stay comparable with runs that had no storms.
    results.storms = bench.storms(&mut op, &pools).await?;
    results.operator_histogram = operator_histograms::read(&op.address).await?;

    drop(sampler);
    let took = op.stop().await?;
    results.shutdowns_s.push(took.as_secs_f64());
    results.logs = logs::count(&bench.args.out);

    let out = bench.args.out.clone();
    results.rss_timeline = timeline.rss(RSS_TIMELINE_POINTS);
    results.phases = timeline.phases();
    results.plots = plots::write(&results, &out)?;
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&results)?,
    )?;
    let markdown = report::markdown(&results);
    std::fs::write(out.join("results.md"), &markdown)?;
    println!("{markdown}");
    Ok(())
}

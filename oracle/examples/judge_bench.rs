//! The oracle's and the engine's cost per scenario, side by side (docs/benchmarks.md): generated
//! scenarios judged by the oracle of one release (one process, asked one scenario at a time) and
//! by the engine (facts built and evaluated in this process), each timed per scenario; prints
//! the median, 90th and 99th percentile and the scenarios per second of each.
//!
//!   cargo run --release -p karpenter-health-oracle --example judge_bench -- [COUNT] [RELEASE]

use karpenter_health_oracle::engine;
use karpenter_health_oracle::generate;
use karpenter_health_oracle::oracle::Oracle;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::time::{Duration, Instant};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

fn report(what: &str, mut times: Vec<Duration>) {
    times.sort();
    let total: Duration = times.iter().sum();
    println!(
        "{what:>7}: {} scenarios, median {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, {:.1} scenarios/s",
        times.len(),
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.9).as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3,
        times.len() as f64 / total.as_secs_f64().max(1e-9)
    );
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(500);
    let release = args.next().unwrap_or_else(|| "v1.14.1".to_owned());
    let mut oracle = Oracle::build_and_start(&release)?;
    let crds = oracle.crds()?;
    let mut seed = [0u8; 32];
    seed[0] = 42;
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed),
    );
    let strategy = generate::spec();
    let (mut oracle_times, mut engine_times) = (Vec::new(), Vec::new());
    for i in 0..count {
        let spec = strategy
            .new_tree(&mut runner)
            .map_err(|e| anyhow::anyhow!("generating: {e}"))?
            .current();
        let scenario = spec.render(&format!("bench-{i}"));
        let started = Instant::now();
        let answer = oracle.ask(&scenario)?;
        oracle_times.push(started.elapsed());
        anyhow::ensure!(answer.error.is_empty(), "the oracle: {}", answer.error);
        let started = Instant::now();
        let (_, status) = engine::judge(&scenario, &release, &crds)?;
        engine_times.push(started.elapsed());
        std::hint::black_box(status);
    }
    println!("Karpenter {release}, {count} generated scenarios (seed 42):");
    report("oracle", oracle_times);
    report("engine", engine_times);
    Ok(())
}

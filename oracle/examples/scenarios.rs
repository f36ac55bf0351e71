//! Prints generated scenarios, one JSON line each, as the differential suite makes them: the input
//! the oracle's benchmark (docs/benchmarks.md) and a hand run of `oracle` read.
//!
//!   cargo run -p karpenter-health-oracle --example scenarios -- [COUNT] [SEED]

use karpenter_health_oracle::generate;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

fn main() {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let strategy = generate::spec();
    for i in 0..count {
        let spec = match strategy.new_tree(&mut runner) {
            Ok(tree) => tree.current(),
            Err(e) => {
                eprintln!("generating: {e}");
                std::process::exit(1);
            }
        };
        let scenario = spec.render(&format!("generated-{i}"));
        match serde_json::to_string(&scenario) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("encoding: {e}");
                std::process::exit(1);
            }
        }
    }
}

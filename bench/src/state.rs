//! The state one benchmark run carries from measurement to measurement: its flags, the bed, the
//! bench's own watches, the EC2NodeClasses, the operator binary, whether aws-auth is broken right
//! now, the run's timeline; and the unit conversions every measurement uses. Starting the watches
//! is IO (the API server); the rest is pure.

use crate::Args;
use crate::node_claims::mix;
use crate::observe::{ConfigMapTracker, HealthTracker};
use crate::seed;
use crate::timeline::Timeline;
use anyhow::{Result, bail};
use karpenter_health_e2e::Bed;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Bench {
    pub args: Args,
    pub bed: Bed,
    /// Where the operator sends its AWS calls: the fault proxy in front of moto, which serves
    /// IAM's policy simulator (moto has none; without it every simulation is a retried 5xx).
    pub aws_endpoint: String,
    pub client: kube::Client,
    pub health: HealthTracker,
    pub config_maps: ConfigMapTracker,
    /// The EC2NodeClasses' names.
    pub classes: Arc<Vec<String>>,
    pub binary: PathBuf,
    /// aws-auth maps the controller role instead of the node role now.
    pub broken: bool,
    /// Operator starts so far (numbers the log files).
    pub starts: usize,
    /// RSS samples and phase marks of the whole run.
    pub timeline: Timeline,
}

impl Bench {
    /// The run on a seeded bed: starts the bench's own watches on KarpenterHealths and on the
    /// ConfigMaps of kube-system.
    pub fn new(
        args: Args,
        bed: Bed,
        aws_endpoint: String,
        client: kube::Client,
        binary: PathBuf,
        timeline: Timeline,
    ) -> Self {
        let classes: Vec<String> = (0..args.node_classes).map(seed::node_class_name).collect();
        let health = HealthTracker::start(&client);
        let config_maps = ConfigMapTracker::start(&client);
        Self {
            args,
            bed,
            aws_endpoint,
            client,
            health,
            config_maps,
            classes: Arc::new(classes),
            binary,
            broken: false,
            starts: 0,
            timeline,
        }
    }

    /// Every node role the seeded classes use: what a healthy aws-auth maps.
    pub fn node_roles(&self) -> Vec<String> {
        seed::Variety {
            every: self.args.distinct_every,
        }
        .node_roles(self.args.node_classes)
    }

    /// How long an operator start may take to be ready, and then to evaluate every class: the
    /// API server lists about 1,000 NodeClaims a second on the bench's bed, so 50,000 need far
    /// more than the 300 s that are plenty at 10,000.
    pub fn startup_deadline(&self) -> Duration {
        Duration::from_secs(300) + Duration::from_millis(10 * self.args.node_claims as u64)
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

    /// The condition counts before the edits; fails unless NodeRoleMapped is True everywhere,
    /// which the edits start from.
    pub fn healthy_baseline(&self) -> Result<BTreeMap<String, usize>> {
        let baseline = self.condition_summary();
        let not_mapped: Vec<&String> = baseline
            .keys()
            .filter(|k| k.starts_with("NodeRoleMapped=") && !k.starts_with("NodeRoleMapped=True"))
            .collect();
        if !not_mapped.is_empty() {
            bail!("the seeded setup is not healthy for NodeRoleMapped: {baseline:#?}");
        }
        println!("bench: baseline conditions: {baseline:#?}");
        Ok(baseline)
    }
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `a - b` in milliseconds, negative when `a` came first.
pub fn signed_ms(a: Instant, b: Instant) -> f64 {
    if a >= b { ms(a - b) } else { -ms(b - a) }
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A pause of `base_ms` plus a deterministic spread below `spread_ms`, different for each `i`.
pub fn jitter(i: usize, base_ms: u64, spread_ms: u64) -> Duration {
    Duration::from_millis(base_ms + mix(i as u64 ^ 0xbe4c) % spread_ms)
}

//! The bench's results, one type per measurement, serialised as results.json; plus the machine
//! description. The types are pure data; `Machine::detect` reads /proc and asks the API server
//! its version (IO).

use crate::stats::Summary;
use crate::timeline::{PhaseSpan, RssPoint};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Instant;

#[derive(Clone, Debug, Default, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub kernel: String,
    pub apiserver: String,
}

impl Machine {
    pub async fn detect(client: &kube::Client) -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        Self {
            cpu: cpuinfo
                .lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
                .unwrap_or_default(),
            cores: std::thread::available_parallelism().map_or(0, usize::from),
            memory_gib: mem_kib / 1024.0 / 1024.0,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_owned(),
            apiserver: client
                .apiserver_version()
                .await
                .map(|v| v.git_version)
                .unwrap_or_default(),
        }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Scale {
    pub node_claims: usize,
    pub node_pools: usize,
    pub node_classes: usize,
    /// Every this many classes one has a node role and KMS key of its own (0: none).
    pub distinct_every: usize,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Seeding {
    pub aws_s: f64,
    pub kubernetes_s: f64,
    pub node_claims_s: f64,
    pub node_claims_per_s: f64,
    pub node_claims_listed: usize,
    pub wire_bytes_per_node_claim: f64,
    /// The bench's own paginated list of every NodeClaim (500 per page, raw JSON, not decoded).
    pub list_all_node_claims_s: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ColdStart {
    pub ready_s: f64,
    pub first_evaluation_s: f64,
    /// Both: /readyz answered 200 and every KarpenterHealth was evaluated.
    pub ready_and_evaluated_s: f64,
    /// The last status write of the start-up (no further write in the settle window).
    pub last_write_s: f64,
    pub peak_at_evaluation_mib: f64,
    pub peak_mib: f64,
    pub steady_mib: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct MemoryStep {
    pub node_claims: usize,
    pub steady_mib: f64,
    pub peak_mib: f64,
    pub runs: usize,
}

/// The idle window: AWS calls, status writes, reconciles and CPU as in any [`Window`], and the
/// steady RSS.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Idle {
    #[serde(flatten)]
    pub window: Window,
    pub rss_mib: Summary,
}

/// What the operator did over a window of the run, from its /metrics and /proc.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Window {
    pub seconds: f64,
    pub aws_calls_per_hour: f64,
    pub aws_calls_by_operation_per_hour: BTreeMap<String, f64>,
    pub status_patches: f64,
    /// Status writes the bench's own watch saw change a KarpenterHealth (the API server stores
    /// nothing for a write of what it already holds), and of those the ones that moved only
    /// `lastEvaluated`.
    pub status_changes_seen: f64,
    pub stamp_only_changes_seen: f64,
    pub reconciles: f64,
    pub cpu_s: f64,
    /// Requests the API server counted on KarpenterHealths and Events in the window (every verb
    /// but WATCH: the operator's applies, status writes and Events), where measured.
    pub api_requests: Option<f64>,
}

impl Window {
    /// Records the bench watch's status change counts from the window's start (`before`) to now
    /// (`after`), as `HealthTracker::status_changes` returns them.
    pub fn with_changes_seen(mut self, before: (u64, u64), after: (u64, u64)) -> Self {
        self.status_changes_seen = after.0.saturating_sub(before.0) as f64;
        self.stamp_only_changes_seen = after.1.saturating_sub(before.1) as f64;
        self
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Edit {
    /// This edit broke the mapping (else repaired it).
    pub broken: bool,
    pub write_rtt_ms: f64,
    /// aws-auth's own watch event at the bench, from the write returning.
    pub own_watch_ms: Option<f64>,
    /// First and last EC2NodeClass's changed status at the bench, from the write returning.
    pub first_ms: Option<f64>,
    pub last_ms: Option<f64>,
    /// AWS calls the operator made between just before the write and just after the landing.
    pub aws_calls: Option<f64>,
    pub timed_out: bool,
    #[serde(skip)]
    pub returned_at: Instant,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct WatchProbe {
    pub write_rtt_ms: f64,
    pub from_return_ms: f64,
    pub from_start_ms: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Relist {
    pub restart_s: f64,
    /// From the API server being back (restart script returned) to an aws-auth edit landing on
    /// every EC2NodeClass.
    pub recovery_s: Option<f64>,
    pub rss_before_mib: f64,
    pub peak_mib: f64,
    pub rss_after_mib: f64,
    pub edit_timed_out: bool,
}

/// One storm window (see `storm`): the load, what the operator did meanwhile, and the aws-auth
/// edits that ran through it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Storm {
    pub name: String,
    pub objects: usize,
    /// How long the storm's own writes (creates and status writes, or deletes) took.
    pub load_s: f64,
    /// The load legitimately changes a status (a class's NodeClaim count in a message); if not,
    /// `other_writes` are needless.
    pub changes_status: bool,
    /// The window: from just before the load to `tail_s` after it and the last edit.
    pub window: Window,
    pub tail_s: f64,
    /// The highest of the classes' average reconciles per second over the window, and whose.
    pub reconciles_per_class_per_s: f64,
    pub busiest_class: String,
    /// The highest reconciles per second of one class between two scrapes a second apart.
    pub peak_reconciles_per_class_per_s: f64,
    pub peak_class: String,
    /// Status writes the edits explain: each rewrites every class's status once.
    pub edit_writes: f64,
    /// The window's status writes less `edit_writes`.
    pub other_writes: f64,
    pub edits: Vec<Edit>,
    pub rss_before_mib: f64,
    /// VmHWM over the window (reset when it opened).
    pub peak_mib: f64,
    pub rss_after_mib: f64,
    /// Reconciles per second between consecutive scrapes.
    pub rates: Vec<RatePoint>,
}

impl Storm {
    /// Status writes that changed nothing a reader could see: `other_writes` of a load that
    /// should change no status.
    pub fn needless_writes(&self) -> Option<f64> {
        (!self.changes_status).then_some(self.other_writes.max(0.0))
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RatePoint {
    /// Seconds since the storm window opened.
    pub t_s: f64,
    pub busiest_class_per_s: f64,
    pub all_classes_per_s: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct OperatorHistogram {
    pub count: f64,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// `karpenter_health_reconcile_duration_seconds` p50, p90, p99 (ms) over the whole run.
    pub reconcile: Vec<Option<f64>>,
    pub reconciles: f64,
    pub reconcile_errors: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Logs {
    pub watch_errors: usize,
    pub gone_410: usize,
    pub warnings: usize,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Results {
    pub date: String,
    pub machine: Machine,
    pub build_info: String,
    pub scale: Scale,
    pub seeding: Seeding,
    pub memory_steps: Vec<MemoryStep>,
    pub cold_starts: Vec<ColdStart>,
    pub shutdowns_s: Vec<f64>,
    pub baseline: BTreeMap<String, usize>,
    pub idle: Idle,
    pub watch_probes: Vec<WatchProbe>,
    pub edits: Vec<Edit>,
    pub edit_window: Window,
    pub relists: Vec<Relist>,
    pub post_relist_rss_mib: Summary,
    pub peak_overall_mib: f64,
    pub operator_histogram: OperatorHistogram,
    pub logs: Logs,
    pub storms: Vec<Storm>,
    /// RSS of every operator process over the run (seconds since the run began), downsampled to
    /// the peak of each of at most `RSS_TIMELINE_POINTS` equal time buckets.
    pub rss_timeline: Vec<RssPoint>,
    pub phases: Vec<PhaseSpan>,
    /// The SVG plots written next to results.md.
    pub plots: Vec<String>,
}

/// The most points results.json keeps of the RSS series (a 30-minute run samples 36,000).
pub const RSS_TIMELINE_POINTS: usize = 3000;

impl Results {
    /// The highest RSS peak of the run: the operator's `peak_now_mib`, and every cold start's and
    /// forced relist's own.
    pub fn peak_overall(&self, peak_now_mib: f64) -> f64 {
        peak_now_mib.max(
            self.relists
                .iter()
                .map(|r| r.peak_mib)
                .chain(self.cold_starts.iter().map(|c| c.peak_mib))
                .fold(0.0, f64::max),
        )
    }
}

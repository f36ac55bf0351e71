//! What the bench watches and samples: its own watch on every KarpenterHealth (arrival time of
//! each condition change), its own watch on ConfigMaps (the API server's watch delivery), the
//! operator's RSS and CPU from /proc, and the operator's /metrics and /readyz. Does IO.

use crate::timeline::Timeline;
use anyhow::{Context, Result, bail};
use futures::StreamExt;
use http_body_util::{BodyExt, Empty};
use k8s_openapi::api::core::v1::ConfigMap;
use karpenter_health_api::{ConditionType, KarpenterHealth, KarpenterHealthStatus};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// One KarpenterHealth as the bench last saw it.
#[derive(Clone, Debug)]
pub struct HealthSeen {
    /// `status` of NodeRoleMapped, and when the event that changed it arrived.
    pub node_role_mapped: Option<(String, Instant)>,
    /// Evaluated (lastEvaluated set, no condition Pending), and when that was first seen.
    pub evaluated_at: Option<Instant>,
    /// Condition type → status, for the baseline summary.
    pub conditions: BTreeMap<String, (String, String)>,
    /// Arrival of the latest event that carried a different status (the operator's last write).
    pub last_write_at: Option<Instant>,
    /// Events that carried a different status: the operator's writes that the API server stored
    /// as a change (a write of what is already there stores nothing, so no event).
    pub status_changes: u64,
    /// Of those, the ones in which only `lastEvaluated` moved.
    pub stamp_only_changes: u64,
    last_status: Option<String>,
    last_status_unstamped: Option<String>,
}

/// The bench's own view of every KarpenterHealth, updated by a watch task.
#[derive(Clone)]
pub struct HealthTracker {
    state: Arc<Mutex<HashMap<String, HealthSeen>>>,
    changed: watch::Receiver<u64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Spawns a watch on `api` (running until the process ends) that hands each event to `record`
/// with its arrival time; each event `record` reports as a change bumps the returned counter.
fn spawn_watch<K>(
    api: Api<K>,
    mut record: impl FnMut(watcher::Result<watcher::Event<K>>, Instant) -> bool + Send + 'static,
) -> watch::Receiver<u64>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let (tx, changed) = watch::channel(0u64);
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = events.next().await {
            let arrived = Instant::now();
            if record(event, arrived) {
                tx.send_modify(|v| *v += 1);
            }
        }
    });
    changed
}

/// Why [`until_changed`] gave up.
enum WaitEnd {
    WatchEnded,
    TimedOut,
}

/// Waits until `check` finds what it looks for, checking again after each change the watch
/// behind `changed` reports, for at most `deadline`.
async fn until_changed<T>(
    changed: &watch::Receiver<u64>,
    deadline: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> Result<T, WaitEnd> {
    let mut changed = changed.clone();
    let until = tokio::time::Instant::now() + deadline;
    loop {
        changed.borrow_and_update();
        if let Some(v) = check() {
            return Ok(v);
        }
        match tokio::time::timeout_at(until, changed.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(WaitEnd::WatchEnded),
            Err(_) => return Err(WaitEnd::TimedOut),
        }
    }
}

impl HealthTracker {
    /// Starts watching KarpenterHealths; the task runs until the process ends.
    pub fn start(client: &kube::Client) -> Self {
        let api: Api<KarpenterHealth> = Api::all(client.clone());
        let state: Arc<Mutex<HashMap<String, HealthSeen>>> = Arc::default();
        let writer = state.clone();
        let changed = spawn_watch(api, move |event, arrived| {
            match event {
                Ok(watcher::Event::Apply(h) | watcher::Event::InitApply(h)) => {
                    update(&mut lock(&writer), &h, arrived);
                }
                Ok(watcher::Event::Delete(h)) => {
                    lock(&writer).remove(&h.name_any());
                }
                Ok(_) => {}
                Err(_) => return false,
            }
            true
        });
        Self { state, changed }
    }

    pub fn snapshot(&self) -> HashMap<String, HealthSeen> {
        lock(&self.state).clone()
    }

    /// Status changes seen so far over every KarpenterHealth: (all, only `lastEvaluated` moved).
    pub fn status_changes(&self) -> (u64, u64) {
        lock(&self.state)
            .values()
            .fold((0, 0), |(all, stamp), seen| {
                (all + seen.status_changes, stamp + seen.stamp_only_changes)
            })
    }

    /// Waits until `done` holds for the current state, or fails after `deadline`.
    pub async fn wait<T>(
        &self,
        what: &str,
        deadline: Duration,
        mut done: impl FnMut(&HashMap<String, HealthSeen>) -> Option<T>,
    ) -> Result<T> {
        match until_changed(&self.changed, deadline, || done(&lock(&self.state))).await {
            Ok(v) => Ok(v),
            Err(WaitEnd::WatchEnded) => {
                bail!("the KarpenterHealth watch ended while waiting for {what}")
            }
            Err(WaitEnd::TimedOut) => bail!("timed out after {deadline:?} waiting for {what}"),
        }
    }
}

fn update(state: &mut HashMap<String, HealthSeen>, health: &KarpenterHealth, arrived: Instant) {
    let name = health.name_any();
    let entry = state.entry(name).or_insert(HealthSeen {
        node_role_mapped: None,
        evaluated_at: None,
        conditions: BTreeMap::new(),
        last_write_at: None,
        status_changes: 0,
        stamp_only_changes: 0,
        last_status: None,
        last_status_unstamped: None,
    });
    let Some(status) = &health.status else {
        return;
    };
    let serialized = serde_json::to_string(status).ok();
    if serialized != entry.last_status {
        let unstamped = serde_json::to_string(&KarpenterHealthStatus {
            last_evaluated: None,
            ..status.clone()
        })
        .ok();
        if entry.last_status.is_some() {
            entry.status_changes += 1;
            if unstamped == entry.last_status_unstamped {
                entry.stamp_only_changes += 1;
            }
        }
        entry.last_status = serialized;
        entry.last_status_unstamped = unstamped;
        entry.last_write_at = Some(arrived);
    }
    if let Some(c) = status.condition(ConditionType::NodeRoleMapped) {
        let unchanged = entry
            .node_role_mapped
            .as_ref()
            .is_some_and(|(s, _)| *s == c.status);
        if !unchanged {
            entry.node_role_mapped = Some((c.status.clone(), arrived));
        }
    }
    let evaluated = status.last_evaluated.is_some()
        && !status.conditions.is_empty()
        && status.conditions.iter().all(|c| c.reason != "Pending");
    if evaluated && entry.evaluated_at.is_none() {
        entry.evaluated_at = Some(arrived);
    } else if !evaluated {
        entry.evaluated_at = None;
    }
    entry.conditions = status
        .conditions
        .iter()
        .map(|c| (c.type_.clone(), (c.status.clone(), c.reason.clone())))
        .collect();
}

/// The bench's own watch on the ConfigMaps of kube-system: when each (name, resourceVersion)
/// arrived. Measures the API server's own watch delivery for the same writes the operator sees.
#[derive(Clone)]
pub struct ConfigMapTracker {
    seen: Arc<Mutex<HashMap<(String, String), Instant>>>,
    changed: watch::Receiver<u64>,
}

impl ConfigMapTracker {
    pub fn start(client: &kube::Client) -> Self {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
        let seen: Arc<Mutex<HashMap<(String, String), Instant>>> = Arc::default();
        let writer = seen.clone();
        let changed = spawn_watch(api, move |event, arrived| {
            let Ok(watcher::Event::Apply(cm)) = event else {
                return false;
            };
            let key = (cm.name_any(), cm.resource_version().unwrap_or_default());
            lock(&writer).entry(key).or_insert(arrived);
            true
        });
        Self { seen, changed }
    }

    /// When the watch delivered `name` at `resource_version`.
    pub async fn arrival(
        &self,
        name: &str,
        resource_version: &str,
        deadline: Duration,
    ) -> Result<Instant> {
        let key = (name.to_owned(), resource_version.to_owned());
        until_changed(&self.changed, deadline, || {
            lock(&self.seen).get(&key).copied()
        })
        .await
        .map_err(|_| {
            anyhow::anyhow!("ConfigMap {name}@{resource_version} not delivered in {deadline:?}")
        })
    }
}

/// VmRSS and VmHWM of a process, in KiB.
#[derive(Clone, Copy, Debug, Default)]
pub struct Memory {
    pub rss_kib: u64,
    pub hwm_kib: u64,
}

pub fn memory(pid: u32) -> Result<Memory> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok(Memory {
        rss_kib: field("VmRSS:"),
        hwm_kib: field("VmHWM:"),
    })
}

/// CPU seconds (user + system) a process has used.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the parenthesised command: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').context("stat format")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11).context("utime")?.parse::<f64>()?
        + fields.get(12).context("stime")?.parse::<f64>()?;
    Ok(ticks / 100.0)
}

/// Resets VmHWM to the current RSS (`clear_refs` 5, Linux ≥ 4.0), so a phase's peak is its own.
pub fn reset_peak(pid: u32) -> Result<()> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .with_context(|| format!("resetting the peak RSS of {pid}"))
}

/// Samples a process's RSS every `every` into a shared series (and the run's timeline), until
/// dropped.
pub struct RssSampler {
    samples: Arc<Mutex<Vec<(Instant, u64)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    pub fn start(pid: u32, every: Duration, timeline: Timeline) -> Self {
        let samples: Arc<Mutex<Vec<(Instant, u64)>>> = Arc::default();
        let writer = samples.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                match memory(pid) {
                    Ok(m) => {
                        let now = Instant::now();
                        lock(&writer).push((now, m.rss_kib));
                        timeline.record_rss(now, m.rss_kib);
                    }
                    Err(_) => return,
                }
            }
        });
        Self { samples, task }
    }

    /// The RSS samples (KiB) taken in `[from, to]`.
    pub fn between(&self, from: Instant, to: Instant) -> Vec<u64> {
        lock(&self.samples)
            .iter()
            .filter(|(at, _)| *at >= from && *at <= to)
            .map(|(_, kib)| *kib)
            .collect()
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn http_get(url: &str) -> Result<(u16, String)> {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<bytes::Bytes>>();
    let response = tokio::time::timeout(
        Duration::from_secs(5),
        client.get(url.parse().context("url")?),
    )
    .await
    .context("HTTP timeout")??;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

pub async fn ready(address: &str) -> bool {
    matches!(
        http_get(&format!("http://{address}/readyz")).await,
        Ok((200, _))
    )
}

/// The resources whose requests count as the operator's writes: its KarpenterHealths (applies and
/// status writes) and Events. Nothing else writes them on the bench's bed.
pub const OPERATOR_WRITTEN: [&str; 2] = ["karpenterhealths", "events"];

/// Requests the API server has counted (`apiserver_request_total`) on `resources`, every verb
/// but WATCH (a watch is one long request, whoever holds it).
pub async fn apiserver_requests(client: &kube::Client, resources: &[&str]) -> Result<f64> {
    let request = hyper::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await?;
    Ok(parse_metrics(&text)
        .samples
        .iter()
        .filter(|(name, labels, _)| {
            name == "apiserver_request_total"
                && labels
                    .get("resource")
                    .is_some_and(|r| resources.contains(&r.as_str()))
                && labels.get("verb").is_none_or(|v| v != "WATCH")
        })
        .map(|(_, _, value)| value)
        .sum())
}

/// The operator's /metrics, parsed into `name{labels}` → value.
#[derive(Clone, Debug, Default)]
pub struct Scrape {
    pub samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

pub async fn scrape(address: &str) -> Result<Scrape> {
    let (status, text) = http_get(&format!("http://{address}/metrics")).await?;
    if status != 200 {
        bail!("/metrics answered {status}");
    }
    Ok(parse_metrics(&text))
}

fn parse_metrics(text: &str) -> Scrape {
    let mut samples = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = match line.rsplit_once(' ') {
            Some(parts) => parts,
            None => continue,
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let labels = labels
            .split("\",")
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.trim().to_owned(), v.trim_matches('"').to_owned()))
            .collect();
        samples.push((name.to_owned(), labels, value));
    }
    Scrape { samples }
}

impl Scrape {
    /// Sum of every series of `name`.
    pub fn sum(&self, name: &str) -> f64 {
        self.samples
            .iter()
            .filter(|(n, _, _)| n == name)
            .map(|(_, _, v)| v)
            .sum()
    }

    /// Each series of `name` by the value of its label `label` (summed over its other labels).
    pub fn by_label(&self, name: &str, label: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for (n, labels, value) in &self.samples {
            if n == name
                && let Some(key) = labels.get(label)
            {
                *out.entry(key.clone()).or_insert(0.0) += value;
            }
        }
        out
    }

    /// AWS calls by `service operation`.
    pub fn aws_calls(&self) -> BTreeMap<String, f64> {
        let mut calls = BTreeMap::new();
        for (name, labels, value) in &self.samples {
            if name == "karpenter_health_aws_calls_total" {
                let key = format!(
                    "{} {}",
                    labels.get("service").map_or("?", String::as_str),
                    labels.get("operation").map_or("?", String::as_str)
                );
                *calls.entry(key).or_insert(0.0) += value;
            }
        }
        calls
    }

    /// Cumulative buckets (upper bound, count) of a histogram.
    pub fn buckets(&self, name: &str) -> Vec<(f64, f64)> {
        let bucket = format!("{name}_bucket");
        let mut out: Vec<(f64, f64)> = self
            .samples
            .iter()
            .filter(|(n, _, _)| *n == bucket)
            .filter_map(|(_, labels, v)| {
                let le = labels.get("le")?;
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                Some((bound, *v))
            })
            .collect();
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_lines_parse_with_labels() {
        let s = parse_metrics(
            "# TYPE x counter\nkarpenter_health_aws_calls_total{service=\"ec2\",operation=\"DescribeInstances\",outcome=\"ok\"} 3\n\
             karpenter_health_change_to_status_seconds_bucket{le=\"0.05\"} 7\n\
             karpenter_health_change_to_status_seconds_bucket{le=\"+Inf\"} 9\n# EOF\n",
        );
        assert_eq!(s.aws_calls().get("ec2 DescribeInstances"), Some(&3.0));
        let per_class = parse_metrics(
            "karpenter_health_reconciles_total{node_class=\"a\"} 4\nkarpenter_health_reconciles_total{node_class=\"b\"} 2\n",
        )
        .by_label("karpenter_health_reconciles_total", "node_class");
        assert_eq!(per_class.get("a"), Some(&4.0));
        assert_eq!(per_class.get("b"), Some(&2.0));
        assert_eq!(
            s.buckets("karpenter_health_change_to_status_seconds"),
            vec![(0.05, 7.0), (f64::INFINITY, 9.0)]
        );
    }
}

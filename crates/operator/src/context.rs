//! What every reconcile shares: the clients, the caches, the AWS port, the metrics and the status
//! writer, with the per-class bookkeeping (locks, failures, the last decision). Sets up the AWS
//! adapter (IO); the reconcile's steps live in [`crate::reconcile`].

use crate::config::OperatorConfig;
use crate::metrics::Metrics;
use crate::reconcile::write::{StatusWriter, WrittenStatuses};
use crate::triggers::TriggerTimes;
use karpenter_health_api::{KarpenterHealth, KarpenterHealthStatus};
use karpenter_health_aws::{AwsFactsSource, AwsObserver, ObserverOptions};
use karpenter_health_kube_facts::{KubeFacts, Overrides};
use kube::Client;
use kube::runtime::reflector::Store;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The AWS side as the controller sees it: the facts port, and the adapter's call counters when
/// the real adapter is used.
#[derive(Clone)]
pub struct AwsPort {
    pub source: Arc<dyn AwsFactsSource>,
    pub stats: Option<AwsObserver>,
}

impl std::fmt::Debug for AwsPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsPort")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl AwsPort {
    /// The real adapter over a given SDK configuration (tests point it at moto or a proxy).
    pub fn from_sdk_config(sdk_config: &aws_config::SdkConfig, options: ObserverOptions) -> Self {
        let observer = AwsObserver::new(sdk_config, options);
        Self {
            source: Arc::new(observer.clone()),
            stats: Some(observer),
        }
    }

    /// The real adapter over the standard credential chain and endpoint overrides.
    pub async fn from_environment(region: Option<String>) -> Self {
        Self::from_sdk_config(
            &sdk_config_from_environment(region).await,
            ObserverOptions::default(),
        )
    }
}

/// The SDK configuration from the standard chain (environment, profile, SSO, IRSA, Pod Identity,
/// instance metadata), with `region` overriding the chain's region when given.
pub async fn sdk_config_from_environment(region: Option<String>) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    if let Some(region) = region {
        loader = loader.region(aws_config::Region::new(region));
    }
    loader.load().await
}

/// Shared state of all reconciles.
pub struct Context {
    pub client: Client,
    pub config: OperatorConfig,
    pub settings: karpenter_health_checks::Settings,
    pub overrides: Overrides,
    pub kube_facts: KubeFacts,
    pub aws: AwsPort,
    pub metrics: Arc<Metrics>,
    pub healths: Store<KarpenterHealth>,
    /// The status this process last wrote per EC2NodeClass: fresher than the watch cache right
    /// after a write, so a quick second reconcile neither re-writes nor re-announces it.
    pub written: WrittenStatuses,
    /// When a watched change first asked for each EC2NodeClass, for the latency histogram.
    pub triggered_at: TriggerTimes,
    /// When this process first saw each EC2NodeClass at its current generation.
    pub generation_seen: Mutex<HashMap<String, (i64, jiff::Timestamp)>>,
    /// What each EC2NodeClass last showed of itself (its generation and Karpenter's conditions
    /// on it), as [`evidence_of`] fingerprints it: a change revalidates its AWS answers.
    pub evidence: Mutex<HashMap<String, u64>>,
    /// Consecutive transient failures per EC2NodeClass, for the error policy's backoff.
    pub failures: Mutex<HashMap<String, u32>>,
    /// Writes the decisions, apart from the reconciles that make them.
    pub writer: Arc<StatusWriter>,
    /// One lock per EC2NodeClass, held by its reconcile in either lane.
    pub class_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// The status last decided for `name`: the decision the writer holds unwritten, else this
    /// process's last write, else the cache's.
    pub fn previous_status(
        &self,
        name: &str,
        stored: Option<&KarpenterHealth>,
    ) -> Option<KarpenterHealthStatus> {
        self.writer
            .pending(name)
            .or_else(|| self.written.lock().ok().and_then(|w| w.get(name).cloned()))
            .or_else(|| stored.and_then(|h| h.status.clone()))
    }

    /// Drops the lock of a deleted class (a reconcile holding it keeps its own handle).
    pub fn forget_class_lock(&self, name: &str) {
        self.class_locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(name);
    }

    /// The lock of `name`'s reconciles.
    pub fn class_lock(&self, name: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.class_locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(name.to_owned())
            .or_default()
            .clone()
    }

    /// Counts one more consecutive failure of `name` and returns how many there are now.
    pub fn count_failure(&self, name: &str) -> u32 {
        let Ok(mut failures) = self.failures.lock() else {
            return 1;
        };
        let count = failures.entry(name.to_owned()).or_default();
        *count = count.saturating_add(1);
        *count
    }

    /// Forgets `name`'s failures after a successful reconcile.
    pub fn reset_failures(&self, name: &str) {
        if let Ok(mut failures) = self.failures.lock() {
            failures.remove(name);
        }
    }
}

//! What every reconcile shares: the clients, the caches, the AWS port and the metrics, and the
//! gather step that reads them. Does IO (through the AWS port).

use crate::config::OperatorConfig;
use crate::metrics::Metrics;
use crate::status_writer::StatusWriter;
use crate::triggers::TriggerTimes;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_api::{KarpenterHealth, KarpenterHealthStatus};
use karpenter_health_aws::{AwsFactsSource, AwsObserver, AwsRequest, ObserverOptions};
use karpenter_health_checks::Facts;
use karpenter_health_checks::facts::ClusterFacts;
use karpenter_health_kube_facts::{KubeFacts, Overrides};
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};
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

/// The status this process last wrote per EC2NodeClass, shared with the trigger that ignores the
/// watch events of those very writes.
pub type WrittenStatuses = Arc<Mutex<HashMap<String, KarpenterHealthStatus>>>;

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

/// A fingerprint of what an EC2NodeClass shows of its own health: its generation, each of
/// Karpenter's conditions on it (type, status, reason), and which of its NodeClaims failed to
/// launch. Messages and times are left out: they change without anything breaking.
pub fn evidence_of(node_class: &EC2NodeClass, cluster: &ClusterFacts) -> u64 {
    use karpenter_health_api::ConditionStatus;
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    node_class.metadata.generation.hash(&mut hasher);
    if let Some(status) = &node_class.status {
        for c in &status.conditions {
            (&c.type_, &c.status, &c.reason).hash(&mut hasher);
        }
    }
    for claim in cluster.node_claims.found().into_iter().flatten() {
        if claim
            .launched
            .is_some_and(|c| c.status == ConditionStatus::False)
        {
            claim.name.hash(&mut hasher);
        }
    }
    hasher.finish()
}

impl Context {
    /// 1. gather (IO): the cluster facts from the caches, the AWS facts from the adapter.
    ///
    /// Also tells whether an AWS answer was served past its period while its refresh ran: the
    /// facts may then mix answers of different ages, and a new False must be confirmed with
    /// [`Context::reread_aws`] before it is published.
    pub async fn gather(&self, node_class: &EC2NodeClass) -> (Facts, bool) {
        let mut cluster = self.kube_facts.snapshot(node_class, &self.overrides);
        cluster.node_class_generation_seen_at = self.generation_seen_at(node_class);
        let request = AwsRequest::for_class(node_class, &cluster);
        let name = node_class.name_any();
        if self.evidence_changed(&name, evidence_of(node_class, &cluster)) {
            // The class was edited, Karpenter's view of it changed (a condition turned False, a
            // reason changed), or a launch failed: what AWS answered before may be what broke.
            self.aws.source.revalidate(&name);
        }
        // Read as this class: a changed answer for any key it reads re-evaluates it.
        let (aws, served_due) =
            karpenter_health_aws::read_reporting(&name, false, self.aws.source.observe(&request))
                .await;
        (Facts { cluster, aws }, served_due)
    }

    /// The AWS facts of `facts` read again, waiting for the refresh of every answer past its
    /// period instead of serving it: a False about to be published stands on answers of one
    /// moment, not on a fresh answer next to a stale one (a route added and endpoints deleted in
    /// between would read as neither, a false alarm).
    pub async fn reread_aws(&self, node_class: &EC2NodeClass, facts: Facts) -> Facts {
        let request = AwsRequest::for_class(node_class, &facts.cluster);
        let (aws, _) = karpenter_health_aws::read_reporting(
            &node_class.name_any(),
            true,
            self.aws.source.observe(&request),
        )
        .await;
        Facts { aws, ..facts }
    }

    /// Records `evidence` for `name`; whether it differs from what was recorded before (a first
    /// sight is no change: the answers were just read).
    pub fn evidence_changed(&self, name: &str, evidence: u64) -> bool {
        let Ok(mut seen) = self.evidence.lock() else {
            return false;
        };
        seen.insert(name.to_owned(), evidence)
            .is_some_and(|before| before != evidence)
    }

    fn generation_seen_at(&self, node_class: &EC2NodeClass) -> Option<jiff::Timestamp> {
        let generation = node_class.metadata.generation?;
        let mut seen = self.generation_seen.lock().ok()?;
        let entry = seen
            .entry(node_class.name_any())
            .or_insert((generation, jiff::Timestamp::now()));
        if entry.0 != generation {
            *entry = (generation, jiff::Timestamp::now());
        }
        Some(entry.1)
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_health_api::karpenter::{EC2NodeClassStatus, KarpenterCondition};
    use karpenter_health_checks::facts::Observed;

    fn class(generation: i64, conditions: &[(&str, &str, &str, &str)]) -> EC2NodeClass {
        let mut class = EC2NodeClass::new("default", Default::default());
        class.metadata.generation = Some(generation);
        class.status = Some(EC2NodeClassStatus {
            conditions: conditions
                .iter()
                .map(|(type_, status, reason, message)| KarpenterCondition {
                    type_: (*type_).into(),
                    status: (*status).into(),
                    reason: Some((*reason).into()),
                    message: Some((*message).into()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
        class
    }

    fn evidence(class: &EC2NodeClass) -> u64 {
        evidence_of(class, &ClusterFacts::default())
    }

    #[test]
    fn a_failed_launch_is_evidence_a_launch_under_way_is_not() {
        use karpenter_health_api::ConditionStatus;
        use karpenter_health_checks::facts::{ClaimCondition, NodeClaimFacts};
        let class = class(1, &[]);
        let claim = |name: &str, status| NodeClaimFacts {
            name: name.into(),
            created: None,
            deleting: false,
            instance_id: None,
            launched: Some(ClaimCondition {
                status,
                last_transition: None,
            }),
            registered: None,
            ..Default::default()
        };
        let with = |claims: Vec<NodeClaimFacts>| {
            evidence_of(
                &class,
                &ClusterFacts {
                    node_claims: Observed::Found(claims),
                    ..Default::default()
                },
            )
        };
        let quiet = with(vec![claim("a", ConditionStatus::True)]);
        assert_eq!(
            quiet,
            with(vec![
                claim("a", ConditionStatus::True),
                claim("b", ConditionStatus::Unknown)
            ])
        );
        assert_ne!(
            quiet,
            with(vec![
                claim("a", ConditionStatus::True),
                claim("b", ConditionStatus::False)
            ])
        );
    }

    #[test]
    fn an_edit_or_a_change_in_karpenters_verdict_is_evidence_a_new_message_is_not() {
        let base = evidence(&class(1, &[("Ready", "True", "Ready", "")]));
        assert_eq!(
            base,
            evidence(&class(1, &[("Ready", "True", "Ready", "reworded")]))
        );
        assert_ne!(base, evidence(&class(2, &[("Ready", "True", "Ready", "")])));
        assert_ne!(
            base,
            evidence(&class(1, &[("Ready", "False", "Ready", "")]))
        );
        assert_ne!(
            base,
            evidence(&class(
                1,
                &[("Ready", "True", "InstanceProfileNotFound", "")]
            ))
        );
    }
}

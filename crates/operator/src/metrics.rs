//! Prometheus metrics of the operator: condition states, findings, reconcile cost, AWS calls and
//! the change-to-status latency. Holds the registry; no IO (the HTTP module serves it).

use karpenter_health_api::{ConditionStatus, ConditionType, KarpenterHealthStatus, Severity};
use karpenter_health_aws::CallStats;
use karpenter_health_checks::acceptance::FleetRule;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConditionLabels {
    node_class: String,
    r#type: String,
    status: String,
    /// The condition's reason on the series of its current status (so an alert can link to that
    /// reason's runbook); empty, which Prometheus reads as absent, on the others.
    reason: String,
    /// The EC2NodeClass's labels named by `--copy-labels` (e.g. `team`), so its alerts carry them.
    #[prometheus(flatten)]
    copied: Vec<(String, String)>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FindingLabels {
    node_class: String,
    check: String,
    severity: String,
    #[prometheus(flatten)]
    copied: Vec<(String, String)>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeClassLabels {
    node_class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FleetRuleLabels {
    /// The rule's place in the list, from 1, as `status.accepted` names it (`fleet rule N`).
    rule: String,
    node_classes: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    error: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AwsCallLabels {
    service: String,
    operation: String,
    outcome: String,
}

/// Every metric the operator exports, under the `karpenter_health_` prefix.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    condition: Family<ConditionLabels, Gauge>,
    findings: Family<FindingLabels, Gauge>,
    reconcile_duration: Histogram,
    reconciles: Family<NodeClassLabels, Counter>,
    reconcile_errors: Family<ErrorLabels, Counter>,
    status_patches: Counter,
    change_to_status: Histogram,
    aws_calls: Family<AwsCallLabels, Counter>,
    leader: Gauge,
    fleet_rule_classes: Family<FleetRuleLabels, Gauge>,
    /// The fleet rules (by index) last seen matching no class, so each is logged once.
    fleet_rules_unmatched: Mutex<std::collections::BTreeSet<usize>>,
    aws_seen: Mutex<BTreeMap<(String, String, String), u64>>,
    findings_seen: Mutex<BTreeMap<String, Vec<FindingLabels>>>,
    /// The current-status series (the one carrying a reason) per EC2NodeClass and type.
    conditions_seen: Mutex<BTreeMap<(String, String), ConditionLabels>>,
    /// The copied labels each EC2NodeClass's series carry: when they change, its series are
    /// replaced, not doubled.
    copied_seen: Mutex<BTreeMap<String, Vec<(String, String)>>>,
}

const LATENCY_BUCKETS: [f64; 12] = [
    0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
];

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("karpenter_health");
        let condition = Family::<ConditionLabels, Gauge>::default();
        registry.register(
            "condition",
            "1 for the status a KarpenterHealth condition has, 0 for the others",
            condition.clone(),
        );
        let findings = Family::<FindingLabels, Gauge>::default();
        registry.register(
            "findings",
            "Findings by EC2NodeClass, check and severity",
            findings.clone(),
        );
        let reconcile_duration = Histogram::new(LATENCY_BUCKETS);
        registry.register(
            "reconcile_duration_seconds",
            "Time of one reconcile: gather, evaluate, render, patch",
            reconcile_duration.clone(),
        );
        let reconciles = Family::<NodeClassLabels, Counter>::default();
        registry.register(
            "reconciles",
            "Completed reconciles by EC2NodeClass (a storm of watched changes must not multiply them)",
            reconciles.clone(),
        );
        let reconcile_errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "reconcile_errors",
            "Reconciles that could not observe or write, by error",
            reconcile_errors.clone(),
        );
        let status_patches = Counter::default();
        registry.register(
            "status_patches",
            "Status writes (the first Pending write, then only on change)",
            status_patches.clone(),
        );
        let change_to_status = Histogram::new(LATENCY_BUCKETS);
        registry.register(
            "change_to_status_seconds",
            "From a watched Kubernetes change arriving to the changed status being written",
            change_to_status.clone(),
        );
        let aws_calls = Family::<AwsCallLabels, Counter>::default();
        registry.register(
            "aws_calls",
            "AWS API calls by service, operation and outcome",
            aws_calls.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica reconciles (holds the Lease, or runs without leader election)",
            leader.clone(),
        );
        let fleet_rule_classes = Family::<FleetRuleLabels, Gauge>::default();
        registry.register(
            "acceptance_rule_classes",
            "EC2NodeClasses each fleet acceptance rule matches (0: stale or mistyped, it accepts nothing)",
            fleet_rule_classes.clone(),
        );
        Self {
            registry,
            leader,
            fleet_rule_classes,
            fleet_rules_unmatched: Mutex::default(),
            condition,
            findings,
            reconcile_duration,
            reconciles,
            reconcile_errors,
            status_patches,
            change_to_status,
            aws_calls,
            aws_seen: Mutex::default(),
            findings_seen: Mutex::default(),
            conditions_seen: Mutex::default(),
            copied_seen: Mutex::default(),
        }
    }
}

impl Metrics {
    /// Records the conditions and findings of one EC2NodeClass's latest status, each series
    /// carrying the class's `copied` labels (Prometheus names and values).
    pub fn record_status(
        &self,
        node_class: &str,
        copied: &[(String, String)],
        status: &KarpenterHealthStatus,
    ) {
        let before = self
            .copied_seen
            .lock()
            .ok()
            .and_then(|mut seen| seen.insert(node_class.to_owned(), copied.to_vec()));
        if let Some(before) = before.filter(|before| before != copied) {
            self.forget_series(node_class, &before);
        }
        for ty in ConditionType::ALL {
            let (current, reason) = status
                .condition(*ty)
                .map_or((ConditionStatus::Unknown, String::new()), |c| {
                    (ConditionStatus::parse(&c.status), c.reason.clone())
                });
            for candidate in [
                ConditionStatus::True,
                ConditionStatus::False,
                ConditionStatus::Unknown,
            ] {
                let is_current = candidate == current;
                let labels = ConditionLabels {
                    node_class: node_class.to_owned(),
                    r#type: ty.as_str().to_owned(),
                    status: candidate.as_str().to_owned(),
                    reason: if is_current {
                        reason.clone()
                    } else {
                        String::new()
                    },
                    copied: copied.to_vec(),
                };
                if is_current {
                    self.replace_current_condition(&labels);
                }
                self.condition
                    .get_or_create(&labels)
                    .set(i64::from(is_current));
            }
        }
        let mut counts: BTreeMap<(String, Severity), i64> = BTreeMap::new();
        for finding in &status.findings {
            *counts
                .entry((finding.check.clone(), finding.severity))
                .or_default() += 1;
        }
        let labels: Vec<FindingLabels> = counts
            .iter()
            .map(|((check, severity), count)| {
                let labels = FindingLabels {
                    node_class: node_class.to_owned(),
                    check: check.clone(),
                    severity: format!("{severity:?}"),
                    copied: copied.to_vec(),
                };
                self.findings.get_or_create(&labels).set(*count);
                labels
            })
            .collect();
        self.replace_findings(node_class, labels);
    }

    /// Drops the series of a deleted EC2NodeClass.
    pub fn forget(&self, node_class: &str) {
        let copied = self
            .copied_seen
            .lock()
            .ok()
            .and_then(|mut seen| seen.remove(node_class))
            .unwrap_or_default();
        self.forget_series(node_class, &copied);
        self.reconciles.remove(&NodeClassLabels {
            node_class: node_class.to_owned(),
        });
    }

    /// Drops the condition and finding series of an EC2NodeClass (with the copied labels they
    /// were written with).
    fn forget_series(&self, node_class: &str, copied: &[(String, String)]) {
        for ty in ConditionType::ALL {
            for status in [
                ConditionStatus::True,
                ConditionStatus::False,
                ConditionStatus::Unknown,
            ] {
                self.condition.remove(&ConditionLabels {
                    node_class: node_class.to_owned(),
                    r#type: ty.as_str().to_owned(),
                    status: status.as_str().to_owned(),
                    reason: String::new(),
                    copied: copied.to_vec(),
                });
            }
            if let Ok(mut seen) = self.conditions_seen.lock()
                && let Some(old) = seen.remove(&(node_class.to_owned(), ty.as_str().to_owned()))
            {
                self.condition.remove(&old);
            }
        }
        self.replace_findings(node_class, Vec::new());
    }

    /// Makes `current` the one series of its condition carrying a reason: the one it replaces
    /// (another status or reason) is removed, and so is the empty-reason twin of `current`.
    fn replace_current_condition(&self, current: &ConditionLabels) {
        let Ok(mut seen) = self.conditions_seen.lock() else {
            return;
        };
        let key = (current.node_class.clone(), current.r#type.clone());
        if let Some(old) = seen.insert(key, current.clone())
            && old != *current
        {
            self.condition.remove(&old);
        }
        self.condition.remove(&ConditionLabels {
            reason: String::new(),
            ..current.clone()
        });
    }

    fn replace_findings(&self, node_class: &str, current: Vec<FindingLabels>) {
        if let Ok(mut seen) = self.findings_seen.lock() {
            for old in seen.remove(node_class).unwrap_or_default() {
                if !current.contains(&old) {
                    self.findings.remove(&old);
                }
            }
            seen.insert(node_class.to_owned(), current);
        }
    }

    pub fn observe_reconcile(&self, node_class: &str, took: Duration) {
        self.reconcile_duration.observe(took.as_secs_f64());
        self.reconciles
            .get_or_create(&NodeClassLabels {
                node_class: node_class.to_owned(),
            })
            .inc();
    }

    pub fn reconcile_error(&self, label: &str) {
        self.reconcile_errors
            .get_or_create(&ErrorLabels {
                error: label.to_owned(),
            })
            .inc();
    }

    /// How many EC2NodeClasses each fleet rule matches (`rules` and `counts` in the same order);
    /// logs a rule once when it comes to match none.
    pub fn record_fleet_rule_matches(&self, rules: &[FleetRule], counts: &[usize]) {
        let Ok(mut unmatched) = self.fleet_rules_unmatched.lock() else {
            return;
        };
        for (index, (rule, &count)) in rules.iter().zip(counts).enumerate() {
            let labels = FleetRuleLabels {
                rule: (index + 1).to_string(),
                node_classes: rule.node_classes.clone(),
                reason: rule.reason.clone(),
            };
            self.fleet_rule_classes
                .get_or_create(&labels)
                .set(i64::try_from(count).unwrap_or(i64::MAX));
            if count > 0 {
                unmatched.remove(&index);
            } else if unmatched.insert(index) {
                tracing::warn!(
                    rule = index + 1,
                    node_classes = %rule.node_classes,
                    reason = %rule.reason,
                    "fleet acceptance rule matches no EC2NodeClass, so it accepts nothing: is it stale or mistyped?"
                );
            }
        }
    }

    /// Whether this replica is the one reconciling.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    pub fn status_patched(&self) {
        self.status_patches.inc();
    }

    /// Status writes so far.
    pub fn status_patches(&self) -> u64 {
        self.status_patches.get()
    }

    pub fn observe_change_to_status(&self, took: Duration) {
        self.change_to_status.observe(took.as_secs_f64());
    }

    /// Brings the AWS call counters up to the adapter's snapshot (they only grow).
    pub fn sync_aws_calls(&self, stats: &CallStats) {
        let Ok(mut seen) = self.aws_seen.lock() else {
            return;
        };
        for call in &stats.calls {
            let key = (
                call.service.to_owned(),
                call.operation.to_owned(),
                call.outcome.to_owned(),
            );
            let before = seen.insert(key.clone(), call.count).unwrap_or(0);
            let labels = AwsCallLabels {
                service: key.0,
                operation: key.1,
                outcome: key.2,
            };
            self.aws_calls
                .get_or_create(&labels)
                .inc_by(call.count.saturating_sub(before));
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn condition_gauges_mark_exactly_the_current_status() {
        let metrics = Metrics::default();
        let status = KarpenterHealthStatus::pending(Time(jiff::Timestamp::UNIX_EPOCH), Some(1));
        metrics.record_status("default", &[], &status);
        let text = metrics.encode();
        assert!(text.contains(
            r#"karpenter_health_condition{node_class="default",type="Ready",status="Unknown",reason="Pending"} 1"#
        ), "{text}");
        assert!(text.contains(
            r#"karpenter_health_condition{node_class="default",type="Ready",status="True",reason=""} 0"#
        ), "{text}");
        // A new reason or status moves the reason: exactly one series per condition carries one.
        let mut changed = status.clone();
        for condition in &mut changed.conditions {
            if condition.type_ == "Ready" {
                condition.status = "False".into();
                condition.reason = "InstanceProfileIsArn".into();
            }
        }
        metrics.record_status("default", &[], &changed);
        let text = metrics.encode();
        let ready: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| {
                l.starts_with(r#"karpenter_health_condition{node_class="default",type="Ready""#)
            })
            .collect();
        let want: std::collections::BTreeSet<&str> = [
            r#"karpenter_health_condition{node_class="default",type="Ready",status="False",reason="InstanceProfileIsArn"} 1"#,
            r#"karpenter_health_condition{node_class="default",type="Ready",status="True",reason=""} 0"#,
            r#"karpenter_health_condition{node_class="default",type="Ready",status="Unknown",reason=""} 0"#,
        ]
        .into();
        assert_eq!(ready, want, "{text}");
        metrics.forget("default");
        assert!(!metrics.encode().contains(r#"node_class="default""#));
    }

    #[test]
    fn copied_labels_ride_on_every_series_and_a_relabelled_class_leaves_no_old_series() {
        let metrics = Metrics::default();
        let status = KarpenterHealthStatus::pending(Time(jiff::Timestamp::UNIX_EPOCH), Some(1));
        let team = |t: &str| vec![("team".to_owned(), t.to_owned())];
        metrics.record_status("default", &team("payments"), &status);
        let text = metrics.encode();
        assert!(text.contains(
            r#"karpenter_health_condition{node_class="default",type="Ready",status="Unknown",reason="Pending",team="payments"} 1"#
        ), "{text}");
        metrics.record_status("default", &team("search"), &status);
        let text = metrics.encode();
        assert!(!text.contains(r#"team="payments""#), "{text}");
        let series = text
            .lines()
            .filter(|l| l.starts_with("karpenter_health_condition{"))
            .count();
        assert_eq!(series, 3 * ConditionType::ALL.len(), "{text}");
        assert!(
            text.lines()
                .filter(|l| l.starts_with("karpenter_health_condition{"))
                .all(|l| l.contains(r#"team="search""#)),
            "{text}"
        );
        metrics.record_status("default", &[], &status);
        assert!(!metrics.encode().contains("team="));
        metrics.record_status("default", &team("search"), &status);
        metrics.forget("default");
        assert!(!metrics.encode().contains(r#"node_class="default""#));
    }

    #[test]
    fn each_fleet_rule_exports_how_many_classes_it_matches() {
        let metrics = Metrics::default();
        let rules = karpenter_health_checks::acceptance::parse_fleet(
            r#"[{"nodeClasses": "batch-*", "reason": "SubnetsOutOfAddresses", "until": "2099-01-31", "why": "x"},
                {"nodeClasses": "bacth-*", "reason": "SubnetsOutOfAddresses", "until": "2099-01-31", "why": "x"}]"#,
        )
        .unwrap();
        metrics.record_fleet_rule_matches(&rules, &[2, 0]);
        let text = metrics.encode();
        assert!(text.contains(r#"karpenter_health_acceptance_rule_classes{rule="1",node_classes="batch-*",reason="SubnetsOutOfAddresses"} 2"#), "{text}");
        assert!(text.contains(r#"karpenter_health_acceptance_rule_classes{rule="2",node_classes="bacth-*",reason="SubnetsOutOfAddresses"} 0"#), "{text}");
    }

    #[test]
    fn aws_call_counters_follow_the_adapter_snapshot() {
        let metrics = Metrics::default();
        let snapshot = |count| CallStats {
            calls: vec![karpenter_health_aws::CallCount {
                service: "ec2",
                operation: "DescribeSecurityGroups",
                outcome: "ok",
                count,
            }],
            ..CallStats::default()
        };
        metrics.sync_aws_calls(&snapshot(3));
        metrics.sync_aws_calls(&snapshot(5));
        assert!(metrics.encode().contains(
            r#"karpenter_health_aws_calls_total{service="ec2",operation="DescribeSecurityGroups",outcome="ok"} 5"#
        ));
    }
}

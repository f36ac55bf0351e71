//! The operator's settings, from flags or environment variables. No IO.

use crate::copied_labels::{CopiedLabels, parse_copied_labels};
use karpenter_health_checks::Settings;
use karpenter_health_checks::acceptance::{AcceptancePolicy, Accepted, FleetRule};
use karpenter_health_checks::karpenter_versions::CompatibilityOverride;
use karpenter_health_kube_facts::{Overrides, WatchTargets};
use std::net::SocketAddr;
use std::time::Duration;

/// What every evaluation needs to know, shared by `run` and `check`; each flag can also be set
/// by the environment variable named.
#[derive(Clone, Debug, clap::Args)]
pub struct EvaluationConfig {
    /// The EKS cluster's real name. Karpenter's own setting is compared against it; without it,
    /// Karpenter's CLUSTER_NAME is used for the AWS lookups.
    #[arg(long, env = "KH_CLUSTER_NAME")]
    pub cluster_name: Option<String>,

    /// AWS region; defaults to the standard chain (AWS_REGION, profile, instance metadata).
    #[arg(long, env = "KH_REGION")]
    pub region: Option<String>,

    /// The Karpenter version, for a controller whose Deployment the operator cannot read (run
    /// outside this cluster, or in a namespace it may not read). Without it, and without a
    /// readable Deployment, version-dependent checks are Unknown, never guessed.
    #[arg(long, env = "KH_KARPENTER_VERSION")]
    pub karpenter_version: Option<String>,

    /// Namespace of the Karpenter controller's Deployment and ServiceAccount.
    #[arg(long, env = "KH_KARPENTER_NAMESPACE", default_value = "kube-system")]
    pub karpenter_namespace: String,

    /// Name of the Karpenter controller's Deployment.
    #[arg(long, env = "KH_KARPENTER_DEPLOYMENT", default_value = "karpenter")]
    pub karpenter_deployment: String,

    /// Name of the Karpenter controller's ServiceAccount (its IAM role annotation names the
    /// controller role).
    #[arg(
        long,
        env = "KH_KARPENTER_SERVICE_ACCOUNT",
        default_value = "karpenter"
    )]
    pub karpenter_service_account: String,

    /// How long a launched NodeClaim may stay unregistered before NodeClaimsRegistered=False,
    /// from its Registered condition's last transition. Below 15m: Karpenter deletes a NodeClaim
    /// that has not registered 15 minutes after that, so a longer timeout would never fire.
    #[arg(long, env = "KH_REGISTRATION_TIMEOUT", default_value = "8m", value_parser = parse_registration_timeout)]
    pub registration_timeout: Duration,

    /// How long a registered NodeClaim may stay uninitialized (a startup taint left, a node
    /// never Ready, a requested resource never registered) before NodesFitWorkloads names it,
    /// from its Registered condition's last transition. Karpenter itself never gives up on it.
    #[arg(long, env = "KH_INITIALIZATION_TIMEOUT", default_value = "10m", value_parser = parse_duration)]
    pub initialization_timeout: Duration,

    /// How long Karpenter's ValidationSucceeded may stay Unknown (with InstanceProfileReady=True)
    /// before KarpenterStatusConsistent=False ValidationStuck.
    #[arg(long, env = "KH_VALIDATION_STUCK_AFTER", default_value = "10m", value_parser = parse_duration)]
    pub validation_stuck_after: Duration,

    /// How long Karpenter's status may lag the EC2NodeClass generation before StatusStale.
    #[arg(long, env = "KH_STATUS_STALE_AFTER", default_value = "10m", value_parser = parse_duration)]
    pub status_stale_after: Duration,

    /// How old an unclaimed instance with this cluster's name must be to count as another
    /// cluster's (Karpenter garbage-collects its own orphans well within this).
    #[arg(long, env = "KH_ORPHAN_INSTANCE_AFTER", default_value = "10m", value_parser = parse_duration)]
    pub orphan_instance_after: Duration,

    /// How long a NodeClaim may be terminating (with no terminationGracePeriod) before the
    /// NodeClaimTerminatingLong warning; from then on the Pods on its Node and their
    /// PodDisruptionBudgets are read to name what holds it.
    #[arg(long, env = "KH_TERMINATING_LONG_AFTER", default_value = "1h", value_parser = parse_duration)]
    pub terminating_long_after: Duration,

    /// How long a pending Pod must have been unschedulable, with no NodeClaim of its class still
    /// registering, before LimitsLeaveRoom=False blames NodePool limits or vCPU quotas for it
    /// (Karpenter counts a launching NodeClaim against the limits while its Pod still waits).
    #[arg(long, env = "KH_WAITING_ON_LIMITS_AFTER", default_value = "2m", value_parser = parse_duration)]
    pub waiting_on_limits_after: Duration,

    /// How soon the cluster's scheduler tries an unschedulable Pod again whatever changed
    /// (`Settings::scheduler_retries_within`): not a flag, since EKS runs kube-scheduler with its
    /// defaults; the lab's bed, whose scheduler flushes every 15 s, sets it.
    #[arg(skip = Duration::from_secs(6 * 60))]
    pub scheduler_retries_within: Duration,

    /// Rows of the Kubernetes-Karpenter compatibility matrix over the built-in one, written
    /// `1.37=1.15.0,1.38=1.17.0` (a Kubernetes minor and the first Karpenter release supporting
    /// it, from karpenter.sh's compatibility page): a minor newer than this release knows is then
    /// judged without a new release. A given row wins over a built-in one.
    #[arg(long, env = "KH_KUBERNETES_COMPATIBILITY", default_value = "", value_parser = parse_compatibility, hide_default_value = true)]
    pub kubernetes_compatibility: CompatibilityOverride,

    /// Whether an EC2NodeClass's own annotations `accept.karpenter-health.io/<Reason>:
    /// "<until>: <why>"` accept its findings; `false` leaves acceptances to the fleet rules (an
    /// annotation is then reported, never silently obeyed).
    #[arg(long, env = "KH_ACCEPT_ANNOTATIONS", default_value_t = true, action = clap::ArgAction::Set)]
    pub accept_annotations: bool,

    /// Fleet-wide acceptances, a JSON list of `{"nodeClasses": "batch-*", "reason":
    /// "<Reason or warning>", "until": "2027-01-31", "why": "..."}`: the classes whose names match
    /// (`*` any run of characters) do not count that finding until the date.
    #[arg(long, env = "KH_ACCEPTANCES", default_value = "", value_parser = parse_acceptances, hide_default_value = true)]
    pub acceptances: FleetRules,

    /// Namespaces whose pending Pods are never judged (tenants), comma-separated: the API server
    /// leaves them out of the pending-Pod watch, so no condition blames or counts their Pods.
    #[arg(long, env = "KH_EXCLUDE_POD_NAMESPACES", default_value = "", value_parser = parse_namespaces, hide_default_value = true)]
    pub exclude_pod_namespaces: Namespaces,

    /// Findings accepted for one run and every class (`check --accept`), not a flag of `run`.
    #[arg(skip)]
    pub one_shot_acceptances: Vec<Accepted>,
}

/// The fleet rules as one clap value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetRules(pub Vec<FleetRule>);

fn parse_acceptances(text: &str) -> Result<FleetRules, String> {
    karpenter_health_checks::acceptance::parse_fleet(text).map(FleetRules)
}

/// Namespace names as one clap value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Namespaces(pub Vec<String>);

/// Parses `tenant-a,tenant-b`; refuses a name that is no namespace name (a DNS label), naming it.
fn parse_namespaces(text: &str) -> Result<Namespaces, String> {
    let mut names = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let label = name.len() <= 63
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !label {
            return Err(format!("`{name}` is not a namespace name"));
        }
        if !names.iter().any(|n: &String| n == name) {
            names.push(name.to_owned());
        }
    }
    Ok(Namespaces(names))
}

fn parse_compatibility(text: &str) -> Result<CompatibilityOverride, String> {
    karpenter_health_checks::karpenter_versions::parse_compatibility_override(text)
}

/// Flags of `karpenter-health run`; each can also be set by the environment variable named.
#[derive(Clone, Debug, clap::Args)]
pub struct OperatorConfig {
    #[command(flatten)]
    pub evaluation: EvaluationConfig,

    /// How often every EC2NodeClass is re-evaluated, to notice AWS-side changes; Kubernetes-side
    /// changes are acted on immediately.
    #[arg(long, env = "KH_REFRESH_INTERVAL", default_value = "5m", value_parser = parse_interval)]
    pub refresh_interval: Duration,

    /// How many EC2NodeClasses are reconciled at once, in each of the two lanes (user changes;
    /// NodeClaim and pending-Pod storms and AWS refreshes). Status writes run apart from both.
    #[arg(long, env = "KH_CONCURRENCY", default_value_t = 4)]
    pub concurrency: u16,

    /// The shortest time between two reconciles of one EC2NodeClass asked for by NodeClaim or
    /// pending-Pod changes: a storm of them (a large scale-up) costs each class one reconcile at
    /// once and at most one more per interval. Other changes act at once.
    #[arg(long, env = "KH_BULK_TRIGGER_INTERVAL", default_value = "500ms", value_parser = parse_interval)]
    pub bulk_trigger_interval: Duration,

    /// Install or update the KarpenterHealth CRD at start (needs RBAC on CRDs).
    #[arg(long, env = "KH_INSTALL_CRD", default_value_t = false)]
    pub install_crd: bool,

    /// Address of the /metrics, /livez and /readyz endpoints; `off` disables them.
    #[arg(long, env = "KH_HTTP_ADDRESS", default_value = "0.0.0.0:8080", value_parser = parse_address)]
    pub http_address: ListenAddress,

    /// Take a Lease before reconciling, so that only one of several replicas writes.
    #[arg(long, env = "KH_LEADER_ELECT", default_value_t = false)]
    pub leader_elect: bool,

    /// Namespace of the leader-election Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "kube-system")]
    pub lease_namespace: String,

    /// Name of the leader-election Lease.
    #[arg(long, env = "KH_LEASE_NAME", default_value = "karpenter-health")]
    pub lease_name: String,

    /// This replica's identity in the Lease; defaults to the Pod name, else the host name.
    #[arg(long, env = "POD_NAME")]
    pub lease_identity: Option<String>,

    /// Labels copied from each EC2NodeClass onto its KarpenterHealth and into its metric series
    /// (so alerts carry them and Alertmanager can route by team), comma-separated label keys such
    /// as `team,example.com/owner`; a key becomes a Prometheus label with `_` for `.`, `/`, `-`.
    #[arg(long, env = "KH_COPY_LABELS", default_value = "", value_parser = parse_copied_labels, hide_default_value = true)]
    pub copy_labels: CopiedLabels,
}

impl EvaluationConfig {
    /// What the flags default to.
    pub fn defaults() -> Self {
        Self {
            cluster_name: None,
            region: None,
            karpenter_version: None,
            karpenter_namespace: "kube-system".into(),
            karpenter_deployment: "karpenter".into(),
            karpenter_service_account: "karpenter".into(),
            registration_timeout: Duration::from_secs(480),
            initialization_timeout: Duration::from_secs(600),
            validation_stuck_after: Duration::from_secs(600),
            status_stale_after: Duration::from_secs(600),
            orphan_instance_after: Duration::from_secs(600),
            terminating_long_after: Duration::from_secs(3600),
            waiting_on_limits_after: Duration::from_secs(120),
            scheduler_retries_within: Duration::from_secs(6 * 60),
            kubernetes_compatibility: CompatibilityOverride::new(),
            accept_annotations: true,
            acceptances: FleetRules::default(),
            exclude_pod_namespaces: Namespaces::default(),
            one_shot_acceptances: Vec::new(),
        }
    }

    /// The check engine's thresholds.
    pub fn settings(&self) -> Settings {
        let signed =
            |d: Duration| jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX);
        Settings {
            validation_stuck_after: signed(self.validation_stuck_after),
            registration_timeout: signed(self.registration_timeout),
            initialization_timeout: signed(self.initialization_timeout),
            status_stale_after: signed(self.status_stale_after),
            orphan_instance_after: signed(self.orphan_instance_after),
            terminating_long_after: signed(self.terminating_long_after),
            waiting_on_limits_after: signed(self.waiting_on_limits_after),
            scheduler_retries_within: signed(self.scheduler_retries_within),
            kubernetes_compatibility: self.kubernetes_compatibility.clone(),
            acceptances: AcceptancePolicy {
                annotations_allowed: self.accept_annotations,
                fleet: self.acceptances.0.clone(),
                one_shot: self.one_shot_acceptances.clone(),
            },
        }
    }

    pub fn watch_targets(&self) -> WatchTargets {
        WatchTargets {
            karpenter_namespace: self.karpenter_namespace.clone(),
            karpenter_deployment: self.karpenter_deployment.clone(),
            karpenter_service_account: self.karpenter_service_account.clone(),
            excluded_pod_namespaces: self.exclude_pod_namespaces.0.clone(),
        }
    }

    pub fn overrides(&self) -> Overrides {
        Overrides {
            karpenter_version: self.karpenter_version.clone(),
            cluster_name: self.cluster_name.clone(),
        }
    }
}

impl OperatorConfig {
    /// Defaults for tests and embedding: what `karpenter-health run` does without flags, minus
    /// the HTTP endpoints.
    pub fn for_tests() -> Self {
        Self {
            evaluation: EvaluationConfig::defaults(),
            refresh_interval: Duration::from_secs(300),
            concurrency: 4,
            bulk_trigger_interval: Duration::from_millis(500),
            install_crd: false,
            http_address: ListenAddress(None),
            leader_elect: false,
            lease_namespace: "kube-system".into(),
            lease_name: "karpenter-health".into(),
            lease_identity: None,
            copy_labels: CopiedLabels::default(),
        }
    }

    pub fn settings(&self) -> Settings {
        self.evaluation.settings()
    }

    pub fn watch_targets(&self) -> WatchTargets {
        self.evaluation.watch_targets()
    }

    pub fn overrides(&self) -> Overrides {
        self.evaluation.overrides()
    }
}

/// Parses a duration in jiff's friendly format (`90s`, `5m`, `1h30m`, `250ms`, `1h 30m`) or
/// ISO 8601 (`PT5M`). Negative durations and overflow are refused.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let signed: jiff::SignedDuration = s
        .trim()
        .parse()
        .map_err(|e| format!("`{s}` is not a duration like 30s, 5m or 1h30m: {e}"))?;
    Duration::try_from(signed).map_err(|_| format!("`{s}` is negative"))
}

/// Like [`parse_duration`], but refuses zero: for intervals that would otherwise hot-loop.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let duration = parse_duration(s)?;
    if duration.is_zero() {
        return Err(format!(
            "`{s}` would re-run continuously; give more than zero"
        ));
    }
    Ok(duration)
}

/// Karpenter deletes a NodeClaim that has not registered this long after its `Registered`
/// condition's last transition (kubernetes-sigs/karpenter `liveness.go`, `registrationTimeout`).
const KARPENTER_REGISTRATION_TTL: Duration = Duration::from_secs(15 * 60);

/// A registration timeout that can fire before Karpenter deletes the NodeClaim.
pub fn parse_registration_timeout(s: &str) -> Result<Duration, String> {
    let timeout = parse_interval(s)?;
    if timeout >= KARPENTER_REGISTRATION_TTL {
        return Err(format!(
            "`{s}` would never fire: Karpenter deletes an unregistered NodeClaim 15 minutes after \
             its Registered condition changed; use less, such as 8m"
        ));
    }
    Ok(timeout)
}

/// Where to serve HTTP; `None` when turned off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenAddress(pub Option<SocketAddr>);

/// Parses a socket address, or `off`.
fn parse_address(s: &str) -> Result<ListenAddress, String> {
    if s.eq_ignore_ascii_case("off") {
        return Ok(ListenAddress(None));
    }
    s.parse()
        .map(|a| ListenAddress(Some(a)))
        .map_err(|e| format!("`{s}` is not an address like 0.0.0.0:8080: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn durations_parse_with_units_and_reject_garbage() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse_duration("PT5M"), Ok(Duration::from_secs(300)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("-5m").is_err());
    }

    #[test]
    fn durations_never_overflow() {
        assert!(parse_duration("99999999999999999999999h").is_err());
        assert!(parse_duration(&format!("{}h", u64::MAX)).is_err());
    }

    #[test]
    fn a_registration_timeout_karpenter_would_outrun_is_refused() {
        assert_eq!(
            parse_registration_timeout("8m"),
            Ok(Duration::from_secs(480))
        );
        assert!(parse_registration_timeout("14m59s").is_ok());
        let error = parse_registration_timeout("15m").unwrap_err();
        assert!(error.contains("never fire"), "{error}");
        assert!(parse_registration_timeout("1h").is_err());
        assert!(parse_registration_timeout("0s").is_err());
    }

    #[test]
    fn a_zero_refresh_interval_is_refused() {
        assert!(parse_interval("0s").is_err());
        assert_eq!(parse_interval("1s"), Ok(Duration::from_secs(1)));
        let parsed = Cli::try_parse_from(["test", "--refresh-interval", "0s"]);
        assert!(parsed.is_err(), "a zero refresh interval must be refused");
        let parsed = Cli::try_parse_from(["test", "--refresh-interval", "1h30m"]).unwrap();
        assert_eq!(parsed.config.refresh_interval, Duration::from_secs(5_400));
    }

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        config: OperatorConfig,
    }

    #[test]
    fn the_http_address_can_be_turned_off() {
        assert_eq!(parse_address("off"), Ok(ListenAddress(None)));
        let address = "127.0.0.1:9000".parse().unwrap();
        assert_eq!(
            parse_address("127.0.0.1:9000"),
            Ok(ListenAddress(Some(address)))
        );
        assert!(parse_address("nowhere").is_err());
    }

    #[test]
    fn excluded_namespaces_are_names_and_reach_the_watch() {
        assert_eq!(
            parse_namespaces(" tenant-a,tenant-b,tenant-a,"),
            Ok(Namespaces(vec!["tenant-a".into(), "tenant-b".into()]))
        );
        let error = parse_namespaces("tenant-a,Tenant_B").unwrap_err();
        assert!(error.contains("`Tenant_B`"), "{error}");
        let mut config = OperatorConfig::for_tests();
        config.evaluation.exclude_pod_namespaces = parse_namespaces("tenant-a").unwrap();
        assert_eq!(
            karpenter_health_kube_facts::inputs::pending_pod_fields(
                &config.watch_targets().excluded_pod_namespaces
            ),
            "status.phase=Pending,spec.nodeName=,metadata.namespace!=tenant-a"
        );
    }

    #[test]
    fn thresholds_reach_the_engine() {
        let mut config = OperatorConfig::for_tests();
        config.evaluation.registration_timeout = Duration::from_secs(60);
        assert_eq!(
            config.settings().registration_timeout,
            jiff::SignedDuration::from_secs(60)
        );
    }
}

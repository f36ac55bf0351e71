//! The operator's settings, from flags or environment variables. No IO.

use karpenter_health_checks::Settings;
use karpenter_health_kube_facts::{Overrides, WatchTargets};
use std::net::SocketAddr;
use std::time::Duration;

/// Flags of `karpenter-health run`; each can also be set by the environment variable named.
#[derive(Clone, Debug, clap::Args)]
pub struct OperatorConfig {
    /// The EKS cluster's real name. Karpenter's own setting is compared against it; without it,
    /// Karpenter's CLUSTER_NAME is used for the AWS lookups.
    #[arg(long, env = "KH_CLUSTER_NAME")]
    pub cluster_name: Option<String>,

    /// AWS region; defaults to the standard chain (AWS_REGION, profile, instance metadata).
    #[arg(long, env = "KH_REGION")]
    pub region: Option<String>,

    /// The Karpenter version, for clusters where the operator cannot read Karpenter's Deployment
    /// (EKS Auto Mode, a controller outside the cluster). Without it, and without a readable
    /// Deployment, version-dependent checks are Unknown, never guessed.
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

    /// How often every EC2NodeClass is re-evaluated, to notice AWS-side changes; Kubernetes-side
    /// changes are acted on immediately.
    #[arg(long, env = "KH_REFRESH_INTERVAL", default_value = "5m", value_parser = parse_duration)]
    pub refresh_interval: Duration,

    /// How long a launched NodeClaim may stay unregistered before NodeClaimsRegistered=False.
    #[arg(long, env = "KH_REGISTRATION_TIMEOUT", default_value = "15m", value_parser = parse_duration)]
    pub registration_timeout: Duration,

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

    /// How many EC2NodeClasses are reconciled at once.
    #[arg(long, env = "KH_CONCURRENCY", default_value_t = 4)]
    pub concurrency: u16,

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
}

impl OperatorConfig {
    /// Defaults for tests and embedding: what `karpenter-health run` does without flags, minus
    /// the HTTP endpoints.
    pub fn for_tests() -> Self {
        Self {
            cluster_name: None,
            region: None,
            karpenter_version: None,
            karpenter_namespace: "kube-system".into(),
            karpenter_deployment: "karpenter".into(),
            karpenter_service_account: "karpenter".into(),
            refresh_interval: Duration::from_secs(300),
            registration_timeout: Duration::from_secs(900),
            validation_stuck_after: Duration::from_secs(600),
            status_stale_after: Duration::from_secs(600),
            orphan_instance_after: Duration::from_secs(600),
            concurrency: 4,
            install_crd: false,
            http_address: ListenAddress(None),
            leader_elect: false,
            lease_namespace: "kube-system".into(),
            lease_name: "karpenter-health".into(),
            lease_identity: None,
        }
    }

    /// The check engine's thresholds.
    pub fn settings(&self) -> Settings {
        let signed =
            |d: Duration| jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX);
        Settings {
            validation_stuck_after: signed(self.validation_stuck_after),
            registration_timeout: signed(self.registration_timeout),
            status_stale_after: signed(self.status_stale_after),
            orphan_instance_after: signed(self.orphan_instance_after),
        }
    }

    pub fn watch_targets(&self) -> WatchTargets {
        WatchTargets {
            karpenter_namespace: self.karpenter_namespace.clone(),
            karpenter_deployment: self.karpenter_deployment.clone(),
            karpenter_service_account: self.karpenter_service_account.clone(),
        }
    }

    pub fn overrides(&self) -> Overrides {
        Overrides {
            karpenter_version: self.karpenter_version.clone(),
            cluster_name: self.cluster_name.clone(),
        }
    }
}

/// Parses durations such as `90s`, `5m`, `1h`, `250ms`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{s}` is not a duration like 30s or 5m"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" | "" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("`{s}` has an unknown unit (use ms, s, m or h)")),
    }
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

    #[test]
    fn durations_parse_with_units_and_reject_garbage() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("5 minutes").is_err());
        assert!(parse_duration("m").is_err());
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
    fn thresholds_reach_the_engine() {
        let mut config = OperatorConfig::for_tests();
        config.registration_timeout = Duration::from_secs(60);
        assert_eq!(
            config.settings().registration_timeout,
            jiff::SignedDuration::from_secs(60)
        );
    }
}

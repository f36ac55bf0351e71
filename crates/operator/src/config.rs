//! The operator's settings, from flags or environment variables. No IO.

use std::time::Duration;

/// Flags of `karpenter-health run`; each can also be set by the environment variable named.
#[derive(Clone, Debug, clap::Args)]
pub struct OperatorConfig {
    /// Install or update the KarpenterHealth CRD at start (needs RBAC on CRDs).
    #[arg(long, env = "KH_INSTALL_CRD", default_value_t = false)]
    pub install_crd: bool,

    /// How often every EC2NodeClass is re-evaluated, to notice AWS-side changes; Kubernetes-side
    /// changes are acted on immediately.
    #[arg(long, env = "KH_REFRESH_INTERVAL", default_value = "5m", value_parser = parse_duration)]
    pub refresh_interval: Duration,

    /// How many EC2NodeClasses are reconciled at once.
    #[arg(long, env = "KH_CONCURRENCY", default_value_t = 4)]
    pub concurrency: u16,
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
}

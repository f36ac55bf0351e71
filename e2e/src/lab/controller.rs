//! The real Karpenter controller as a process on the bed: which release, its binary (built by
//! `e2e/bed/build-karpenter.sh`), its chart's settings, and starting it as the kubelet would
//! start its container (again after an exit at start). Does IO (processes, files).

use crate::Bed;
use anyhow::{Context as _, Result, bail};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The Karpenter release the lab runs unless `KH_KARPENTER_RELEASE` names another (a folder of
/// `e2e/bed/karpenter/`).
pub const DEFAULT_RELEASE: &str = "v1.14.1";
/// The Kubernetes version the lab's EKS cluster reports: the bed's API server's (`/version`,
/// which is what Karpenter reads), so both sides agree.
pub const KUBERNETES_VERSION: &str = "1.34";

/// Whether `release` (`v1.8.6`) is older than `version`.
pub fn release_before(release: &str, version: (u64, u64, u64)) -> bool {
    let mut parts = release
        .trim_start_matches('v')
        .split('.')
        .map(|p| p.parse::<u64>().unwrap_or(0));
    let ours = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    ours < version
}

/// The release under test.
pub fn release() -> String {
    std::env::var("KH_KARPENTER_RELEASE").unwrap_or_else(|_| DEFAULT_RELEASE.to_owned())
}

fn bed_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bed").join(name)
}

/// The controller binary of `release`, built (or found in the cache) by `build-karpenter.sh`.
pub fn binary(release: &str) -> Result<PathBuf> {
    let out = std::process::Command::new("bash")
        .arg(bed_script("build-karpenter.sh"))
        .arg(release)
        .stderr(Stdio::inherit())
        .output()
        .context("running e2e/bed/build-karpenter.sh")?;
    if !out.status.success() {
        bail!("build-karpenter.sh {release} failed");
    }
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

/// Karpenter's settings, as its chart names them.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// `settings.clusterName`.
    pub cluster_name: String,
    /// `settings.clusterEndpoint`.
    pub cluster_endpoint: String,
    /// `settings.interruptionQueue` (the queue must exist before Karpenter starts).
    pub interruption_queue: Option<String>,
    /// `settings.featureGates.*`, as the chart joins them (`ReservedCapacity=true,...`).
    pub feature_gates: Option<String>,
    /// `settings.isolatedVPC`: no Pricing API (moto has none) and no instance-profile garbage
    /// collection (moto's ListInstanceProfiles ignores the path prefix Karpenter lists by, so
    /// Karpenter would delete every other test's profiles).
    pub isolated_vpc: bool,
    /// `settings.disableDryRun`: Karpenter validates a class without its dry-run launches.
    pub disable_dry_run: bool,
}

impl Settings {
    /// The env vars the chart's `deployment.yaml` gives the controller container.
    pub fn chart_env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("CLUSTER_NAME".to_owned(), self.cluster_name.clone()),
            ("CLUSTER_ENDPOINT".to_owned(), self.cluster_endpoint.clone()),
            ("ISOLATED_VPC".to_owned(), self.isolated_vpc.to_string()),
        ];
        if let Some(queue) = &self.interruption_queue {
            env.push(("INTERRUPTION_QUEUE".to_owned(), queue.clone()));
        }
        if self.disable_dry_run {
            env.push(("DISABLE_DRY_RUN".to_owned(), "true".to_owned()));
        }
        if let Some(gates) = &self.feature_gates {
            env.push(("FEATURE_GATES".to_owned(), gates.clone()));
        }
        env
    }
}

/// A place in a Karpenter log ([`KarpenterProcess::mark`]); the default is its start.
#[derive(Clone, Debug, Default)]
pub struct LogMark {
    log: Option<PathBuf>,
    offset: u64,
}

/// How many times [`KarpenterProcess::start`] starts Karpenter before an exit at start fails
/// the test (a Deployment's container would go on restarting, backing off).
const STARTS: u32 = 3;

/// A Karpenter process that exited before it was ready.
struct StartExit {
    status: std::process::ExitStatus,
    log_tail: String,
}

/// A running Karpenter controller; killed on drop.
#[derive(Debug)]
pub struct KarpenterProcess {
    child: tokio::process::Child,
    /// Its log (JSON lines).
    pub log: PathBuf,
    pub release: String,
    pub metrics_port: u16,
    /// How many times it exited at start before it was ready (each kept as `<log>.exit-N`):
    /// reported by [`crate::lab::Lab::finish`], never hidden.
    pub exits_at_start: u32,
}

impl KarpenterProcess {
    /// Starts Karpenter `release` on the bed with `settings`, reading AWS at `aws_url` in
    /// `region`, and waits until it serves its readiness probe. Karpenter panics when a read
    /// it needs at start fails (`lo.Must0` around the first instance-type listing in
    /// `pkg/operator/operator.go`) and relies on its container being restarted; so the lab
    /// starts it again, as the kubelet would, up to [`STARTS`] times, keeping each exited
    /// attempt's log beside the next (`<log>.exit-N`) and saying so on stderr.
    pub async fn start(
        bed: &Bed,
        release: &str,
        aws_url: &str,
        region: &str,
        settings: &Settings,
        log: PathBuf,
    ) -> Result<Self> {
        let (metrics_port, probe_port) = (crate::free_port()?, crate::free_port()?);
        let mut command = tokio::process::Command::new(binary(release)?);
        command
            .envs(settings.chart_env())
            .env("KUBECONFIG", bed.admin_kubeconfig())
            .env("AWS_REGION", region)
            .env("AWS_ENDPOINT_URL", aws_url)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            // Neither the credential chain nor the region lookup may reach for IMDS.
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("DISABLE_LEADER_ELECTION", "true")
            .env("METRICS_PORT", metrics_port.to_string())
            .env("HEALTH_PROBE_PORT", probe_port.to_string())
            .env("LOG_LEVEL", "debug")
            .kill_on_drop(true);
        let mut attempt = 1;
        loop {
            let started = Self::start_once(&mut command, release, &log, metrics_port, probe_port);
            match started.await? {
                Ok(mut process) => {
                    process.exits_at_start = attempt - 1;
                    return Ok(process);
                }
                Err(exit) if attempt < STARTS => {
                    let mut kept = log.clone().into_os_string();
                    kept.push(format!(".exit-{attempt}"));
                    let kept = PathBuf::from(kept);
                    std::fs::rename(&log, &kept)
                        .with_context(|| format!("keeping {}", log.display()))?;
                    eprintln!(
                        "lab: Karpenter {release} exited at start (attempt {attempt}, {}), \
                         started again as the kubelet would; its log: {}\n{}",
                        exit.status,
                        kept.display(),
                        exit.log_tail
                    );
                    attempt += 1;
                }
                Err(exit) => bail!(
                    "Karpenter {release} exited ({}) at start, {STARTS} times; the last:\n{}",
                    exit.status,
                    exit.log_tail
                ),
            }
        }
    }

    /// One start of `command`, logging to `log`: the ready process, or how it exited before it
    /// was ready.
    async fn start_once(
        command: &mut tokio::process::Command,
        release: &str,
        log: &Path,
        metrics_port: u16,
        probe_port: u16,
    ) -> Result<std::result::Result<Self, StartExit>> {
        let stderr =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        command.stdout(stderr.try_clone()?).stderr(stderr);
        let child = command.spawn().context("starting Karpenter")?;
        let mut process = Self {
            child,
            log: log.to_owned(),
            release: release.to_owned(),
            metrics_port,
            exits_at_start: 0,
        };
        let started = Instant::now();
        // Karpenter reads the region's instance types and offerings before it serves anything.
        while started.elapsed() < Duration::from_secs(90) {
            if let Some(status) = process.child.try_wait()? {
                return Ok(Err(StartExit {
                    status,
                    log_tail: process.log_tail(30),
                }));
            }
            if matches!(crate::http_get(probe_port, "/readyz").await, Ok((200, _))) {
                return Ok(Ok(process));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        bail!(
            "Karpenter {release} was not ready within 90 s:\n{}",
            process.log_tail(30)
        )
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Its log lines (JSON) whose `message` contains `message` (releases word the same event
    /// differently: v1.8's `ignoring pod, label is restricted; specify a well known label ...`
    /// carries the key after the phrase).
    pub fn logged(&self, message: &str) -> Vec<Value> {
        self.logged_since(&LogMark::default(), message)
    }

    /// Where its log ends now: [`KarpenterProcess::logged_since`] then reads only what Karpenter
    /// logs afterwards (a line a healthy start also logs is evidence only after the fault).
    pub fn mark(&self) -> LogMark {
        LogMark {
            log: Some(self.log.clone()),
            offset: std::fs::metadata(&self.log).map_or(0, |m| m.len()),
        }
    }

    /// [`KarpenterProcess::logged`], of the lines logged after `mark` (all of a log started
    /// since, after a restart).
    pub fn logged_since(&self, mark: &LogMark, message: &str) -> Vec<Value> {
        let text = std::fs::read(&self.log).unwrap_or_default();
        let from = if mark.log.as_ref() == Some(&self.log) {
            usize::try_from(mark.offset)
                .unwrap_or(usize::MAX)
                .min(text.len())
        } else {
            0
        };
        String::from_utf8_lossy(&text[from..])
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["message"].as_str().is_some_and(|m| m.contains(message)))
            .collect()
    }

    pub async fn stop(mut self) -> Result<()> {
        self.kill().await
    }

    /// Kills the process and waits for it to be gone.
    pub async fn kill(&mut self) -> Result<()> {
        self.child.kill().await?;
        Ok(())
    }
}

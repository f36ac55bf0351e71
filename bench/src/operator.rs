//! The operator under test as a child process of the bench: started with the bed's kubeconfig
//! and the bench's AWS endpoint (the fault proxy in front of moto), stopped with SIGTERM. Does IO (spawns and signals a process).

use anyhow::{Context, Result, bail};
use karpenter_health_e2e::Bed;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// A running `karpenter-health run`.
pub struct Operator {
    child: Child,
    pub pid: u32,
    pub address: String,
    pub started: Instant,
}

/// A free loopback port for the operator's HTTP endpoints.
fn free_address() -> Result<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.to_string())
}

impl Operator {
    /// Starts `binary run` against the bed and `aws_endpoint`, logging to `log`. `started` is taken just before the
    /// spawn, so cold start includes process start-up.
    pub fn spawn(
        binary: &Path,
        bed: &Bed,
        aws_endpoint: &str,
        log: &Path,
        extra_args: &[String],
        env: &[(String, String)],
    ) -> Result<Self> {
        let address = free_address()?;
        let log_file =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let started = Instant::now();
        let child = Command::new(binary)
            .arg("run")
            .arg("--http-address")
            .arg(&address)
            .args(extra_args)
            .env("KUBECONFIG", bed.admin_kubeconfig())
            .env("AWS_ENDPOINT_URL", aws_endpoint)
            .env("AWS_REGION", crate::seed::REGION)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env_remove("AWS_PROFILE")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(std::process::Stdio::null())
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let pid = child.id().context("operator has no pid")?;
        Ok(Self {
            child,
            pid,
            address,
            started,
        })
    }

    /// Fails if the process has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("the operator exited: {status}");
        }
        Ok(())
    }

    /// SIGTERM, then waits for the exit; returns how long shutting down took.
    pub async fn stop(mut self) -> Result<Duration> {
        let asked = Instant::now();
        let status = std::process::Command::new("kill")
            .arg("-TERM")
            .arg(self.pid.to_string())
            .status()?;
        if !status.success() {
            bail!("could not signal the operator ({status})");
        }
        match tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await {
            Ok(exit) => {
                exit?;
                Ok(asked.elapsed())
            }
            Err(_) => {
                self.child.kill().await?;
                bail!("the operator did not stop within 30 s of SIGTERM; killed")
            }
        }
    }
}

/// The default operator binary: the release build of this workspace.
pub fn default_binary() -> PathBuf {
    // The release build beside this (debug) bench binary: <target>/debug/bench → <target>/release.
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("release/karpenter-health")))
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/karpenter-health")
        })
}

//! The `karpenter-health` binary as a child process, for what only a real process shows: signals,
//! exit codes, a kill without clean-up, its log on stderr. Does IO (processes, files).

use anyhow::{Context as _, Result, bail};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A running operator process; killed on drop.
#[derive(Debug)]
pub struct OperatorProcess {
    child: tokio::process::Child,
    /// Where its stderr (the log) goes.
    pub log: PathBuf,
}

impl OperatorProcess {
    /// Starts `karpenter-health args…` with `env` added, its stderr written to `log`.
    pub fn spawn(args: &[&str], env: &[(&str, &str)], log: PathBuf) -> Result<Self> {
        let binary = crate::karpenter_health_binary()?;
        let stderr =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut command = tokio::process::Command::new(binary);
        command
            .args(args)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true);
        let child = command.spawn().context("starting karpenter-health")?;
        Ok(Self { child, log })
    }

    /// Sends SIGTERM, as the kubelet does on a Pod's deletion.
    pub fn terminate(&self) -> Result<()> {
        let pid = self.child.id().context("the process already exited")?;
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()?;
        if !status.success() {
            bail!("kill -TERM {pid} failed");
        }
        Ok(())
    }

    /// Kills the process at once (SIGKILL): no clean-up, no Lease release.
    pub async fn kill(&mut self) -> Result<()> {
        self.child.kill().await?;
        Ok(())
    }

    /// Waits up to `deadline` for the process to exit; its exit code and how long it took.
    pub async fn wait_exit(&mut self, deadline: Duration) -> Result<(Option<i32>, Duration)> {
        let started = Instant::now();
        let status = tokio::time::timeout(deadline, self.child.wait())
            .await
            .with_context(|| format!("the process did not exit within {deadline:?}"))??;
        Ok((status.code(), started.elapsed()))
    }

    /// What it has logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

//! The `karpenter-health` binary as a child process, for what only a real process shows: signals,
//! exit codes, a kill without clean-up, its log on stderr. Does IO (processes, files).

use crate::Bed;
use anyhow::{Context as _, Result, bail};
use std::path::{Path, PathBuf};
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

/// A replica of `karpenter-health run --leader-elect` on the bed: its Lease, identity, HTTP port,
/// and where it reads Kubernetes and AWS.
#[derive(Clone, Debug)]
pub struct Replica<'a> {
    pub lease: &'a str,
    pub identity: &'a str,
    pub port: u16,
    /// Its kubeconfig (the bed's admin one unless a test relays the API server).
    pub kubeconfig: PathBuf,
    /// Its AWS endpoint (moto, or a proxy in front of it).
    pub aws_url: String,
}

impl<'a> Replica<'a> {
    /// On the bed's admin identity and moto itself.
    pub fn on(bed: &Bed, lease: &'a str, identity: &'a str, port: u16) -> Result<Self> {
        Ok(Self {
            lease,
            identity,
            port,
            kubeconfig: bed.admin_kubeconfig(),
            aws_url: bed.moto_url()?.to_owned(),
        })
    }

    /// Starts the binary, in `default`'s Lease, logging to the bed's `logs/<lease>-<identity>.log`.
    pub fn spawn(&self, bed: &Bed) -> Result<OperatorProcess> {
        let address = format!("127.0.0.1:{}", self.port);
        let log = bed
            .dir
            .join(format!("logs/{}-{}.log", self.lease, self.identity));
        OperatorProcess::spawn(
            &[
                "run",
                "--leader-elect",
                "--lease-name",
                self.lease,
                "--lease-namespace",
                "default",
                "--lease-identity",
                self.identity,
                "--http-address",
                &address,
                "--region",
                "us-east-2",
            ],
            &[
                ("KUBECONFIG", path_str(&self.kubeconfig)?),
                ("AWS_ENDPOINT_URL", &self.aws_url),
                ("AWS_ACCESS_KEY_ID", "testing"),
                ("AWS_SECRET_ACCESS_KEY", "testing"),
            ],
            log,
        )
    }
}

fn path_str(path: &Path) -> Result<&str> {
    path.to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))
}

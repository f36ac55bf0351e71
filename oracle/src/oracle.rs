//! Karpenter's side of a comparison: one oracle process per release (`oracle/build.sh` builds
//! it), asked one scenario per line. Does IO (a child process and its pipes).

use crate::engine::ReleaseCrds;
use crate::scenario::Scenario;
use anyhow::{Context, bail};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// A Go map or slice that may be `null`.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Karpenter's decision for one Pod (the oracle's `PodOutcome`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct PodOutcome {
    /// Karpenter skipped the Pod before scheduling, with why.
    pub ignored: String,
    pub node_pool: String,
    #[serde(deserialize_with = "nullable")]
    pub instance_types: Vec<String>,
    /// The scheduler's error.
    pub error: String,
    /// A NodeClaim was made for it and launched.
    pub launched: bool,
    pub launch_error: String,
}

impl PodOutcome {
    /// Why nothing launched for it, in Karpenter's words; empty when something did.
    pub fn why_not(&self) -> &str {
        if self.launched {
            ""
        } else if !self.ignored.is_empty() {
            &self.ignored
        } else if !self.error.is_empty() {
            &self.error
        } else {
            &self.launch_error
        }
    }
}

/// What one NodePool does alone (the oracle's `NodePoolOutcome`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct NodePoolOutcome {
    pub skipped: String,
    pub probe: PodOutcome,
    pub offered: usize,
    #[serde(deserialize_with = "nullable")]
    pub pods: BTreeMap<String, PodOutcome>,
}

/// The oracle's answer for one scenario.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct Answer {
    pub name: String,
    pub release: String,
    pub error: String,
    #[serde(deserialize_with = "nullable")]
    pub pods: BTreeMap<String, PodOutcome>,
    #[serde(deserialize_with = "nullable")]
    pub node_pools: BTreeMap<String, NodePoolOutcome>,
}

/// A running oracle of one release.
#[derive(Debug)]
pub struct Oracle {
    pub release: String,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Oracle {
    /// Starts the oracle binary at `path`, built for `release`.
    pub fn start(release: &str, path: &Path) -> anyhow::Result<Self> {
        let mut child = Command::new(path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting the oracle {}", path.display()))?;
        let stdin = child.stdin.take().context("the oracle's stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("the oracle's stdout")?);
        Ok(Self {
            release: release.to_owned(),
            child,
            stdin,
            stdout,
        })
    }

    /// Builds (or finds cached) and starts the oracle of `release` with `oracle/build.sh`.
    pub fn build_and_start(release: &str) -> anyhow::Result<Self> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("build.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg(release)
            .stderr(Stdio::inherit())
            .output()
            .context("running oracle/build.sh")?;
        if !out.status.success() {
            bail!("oracle/build.sh {release} failed");
        }
        let path = String::from_utf8(out.stdout)?.trim().to_owned();
        Self::start(release, Path::new(&path))
    }

    fn line(&mut self, request: &str) -> anyhow::Result<String> {
        self.stdin.write_all(request.as_bytes())?;
        self.stdin.write_all(b"\n")?;
        self.stdin.flush()?;
        let mut answer = String::new();
        if self.stdout.read_line(&mut answer)? == 0 {
            bail!("the oracle of {} exited", self.release);
        }
        Ok(answer)
    }

    /// What Karpenter decides in `scenario`.
    pub fn ask(&mut self, scenario: &Scenario) -> anyhow::Result<Answer> {
        let answer = self.line(&serde_json::to_string(scenario)?)?;
        serde_json::from_str(&answer).context("the oracle's answer")
    }

    /// The release's own CRDs.
    pub fn crds(&mut self) -> anyhow::Result<ReleaseCrds> {
        #[derive(Deserialize)]
        struct Crds {
            crds: Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>,
        }
        let answer: Crds = serde_json::from_str(&self.line(r#"{"crds":true}"#)?)?;
        Ok(ReleaseCrds(answer.crds))
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The releases there are oracle modules for (`oracle/build.sh --list`), or those
/// `KH_ORACLE_RELEASES` names (space-separated).
pub fn releases() -> anyhow::Result<Vec<String>> {
    if let Ok(chosen) = std::env::var("KH_ORACLE_RELEASES")
        && !chosen.trim().is_empty()
    {
        return Ok(chosen.split_whitespace().map(str::to_owned).collect());
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("build.sh");
    let out = Command::new("bash").arg(&script).arg("--list").output()?;
    Ok(String::from_utf8(out.stdout)?
        .lines()
        .map(str::to_owned)
        .collect())
}

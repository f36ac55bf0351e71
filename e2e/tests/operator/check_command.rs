//! `karpenter-health check` end to end: the built binary run as a user bound to read verbs only,
//! against the bed's API server and moto. It agrees with the operator on a broken EC2NodeClass,
//! exits with the documented codes (0, 1, 2 with AWS unreachable, 3 when it cannot run), makes only
//! read requests (the API server's audit log says so), and answers as a kubectl plugin. Does IO
//! (API server, moto, child processes).
//!
//! One scenario per test, each on a class of its own; every test also fails when the reader made
//! a request that is not a read. Karpenter's state is written by hand here, not produced by the
//! lab's real controller: the one-shot check is compared with the operator on one frozen state.

use anyhow::{Context as _, Result, bail};
use karpenter_health_api::{ConditionType, KarpenterHealthStatus, Reason};
use karpenter_health_e2e::audit;
use karpenter_health_e2e::fixture::Fixture;
use karpenter_health_e2e::health_status::{condition_is, summary};
use karpenter_health_e2e::{Bed, apply_json, free_port, karpenter_health_binary};
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const READER: &str = "karpenter-health-reader";
const READ_ONLY_ROLE: &str = "kh-e2e-read-only";

/// What one run of the binary printed and how it exited.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Result<Value> {
        serde_json::from_str(&self.stdout).with_context(|| format!("not JSON: {self:?}"))
    }

    /// The status of the one item of a `-o json` list.
    fn status(&self) -> Result<KarpenterHealthStatus> {
        let list = self.json()?;
        if list["kind"] != "KarpenterHealthList"
            || list["items"].as_array().map(Vec::len) != Some(1)
        {
            bail!("expected a list of one KarpenterHealth: {list}");
        }
        Ok(serde_json::from_value(list["items"][0]["status"].clone())?)
    }
}

/// Runs `program args…` as the reader, with moto (or `aws_endpoint`) as AWS and dummy
/// credentials; `env` adds or overrides variables.
async fn run(
    program: &Path,
    args: &[&str],
    bed: &Bed,
    aws_endpoint: &str,
    env: &[(&str, &str)],
) -> Result<Run> {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .env("KUBECONFIG", bed.reader_kubeconfig())
        .env("AWS_ENDPOINT_URL", aws_endpoint)
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("NO_COLOR", "1")
        .env_remove("AWS_PROFILE")
        .env_remove("RUST_LOG");
    for (key, value) in env {
        // An empty value removes the variable (as if it were never set).
        if value.is_empty() {
            command.env_remove(key);
        } else {
            command.env(key, value);
        }
    }
    let output = command.output().await.context("running check")?;
    Ok(Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout)?,
        stderr: String::from_utf8(output.stderr)?,
    })
}

/// Binds the reader to get, list and watch on everything, and nothing else.
async fn bind_reader_read_only(admin: &kube::Client) -> Result<()> {
    apply_json(
        admin,
        &[
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": READ_ONLY_ROLE},
                "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]
            }),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": READ_ONLY_ROLE},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READ_ONLY_ROLE},
                "subjects": [{"kind": "User", "name": READER, "apiGroup": "rbac.authorization.k8s.io"}]
            }),
        ],
    )
    .await
}

async fn unbind_reader(admin: &kube::Client) -> Result<()> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    Api::<ClusterRoleBinding>::all(admin.clone())
        .delete(READ_ONLY_ROLE, &DeleteParams::default())
        .await?;
    Api::<ClusterRole>::all(admin.clone())
        .delete(READ_ONLY_ROLE, &DeleteParams::default())
        .await?;
    Ok(())
}

/// `Type=Status(Reason)` of every condition, for comparing two evaluations of the same facts.
fn verdicts(status: &KarpenterHealthStatus) -> BTreeSet<(String, String, String)> {
    status
        .conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
        .collect()
}

/// A seeded class, the reader bound read-only, and what a scenario needs to run `check` on it.
struct Cli {
    fx: Fixture,
    binary: PathBuf,
    /// Through the fixture's proxy, which serves what moto lacks (EC2 GetEbsDefaultKmsKeyId).
    moto: String,
    audit_log: PathBuf,
    audit_from: u64,
}

impl Cli {
    /// Seeds a class named after `prefix` and binds the reader to read verbs only.
    async fn seed(prefix: &str) -> Result<Self> {
        let fx = Fixture::seed(prefix, "eu-west-1", "1.8.6").await?;
        bind_reader_read_only(&fx.admin).await?;
        let audit_log = fx.bed.dir.join("logs/audit.log");
        Ok(Self {
            binary: karpenter_health_binary()?,
            moto: fx.proxy.url(),
            audit_from: audit::offset(&audit_log),
            audit_log,
            fx,
        })
    }

    /// `check` on the seeded class, then `more`.
    fn args(&self, more: &[&str]) -> Vec<String> {
        let fx = &self.fx;
        let class = fx.name.as_str();
        let scope = [
            "check",
            "--node-class",
            class,
            "--karpenter-namespace",
            class,
            "--region",
            &fx.region,
        ];
        scope
            .iter()
            .copied()
            .chain(more.iter().copied())
            .map(str::to_owned)
            .collect()
    }

    /// Runs `check` on the seeded class with `more` against `aws` (the fixture's when `None`).
    async fn check(&self, more: &[&str], aws: Option<&str>) -> Result<Run> {
        let aws = aws.unwrap_or(&self.moto);
        run(
            &self.binary,
            &args(&self.args(more)),
            &self.fx.bed,
            aws,
            &[],
        )
        .await
    }

    /// The reader's requests since the seed.
    fn requests(&self) -> Result<Vec<audit::Request>> {
        audit::requests_since(&self.audit_log, self.audit_from, READER)
    }

    /// Fails `outcome` when the reader made any request but a read; unbinds it and cleans up.
    async fn finish(self, outcome: Result<()>) -> Result<()> {
        let only_reads = self.requests().and_then(|requests| {
            let writes: Vec<_> = requests
                .iter()
                .filter(|r| !["get", "list", "watch"].contains(&r.verb.as_str()))
                .collect();
            if writes.is_empty() {
                Ok(())
            } else {
                bail!("check wrote: {writes:?}")
            }
        });
        let unbound = unbind_reader(&self.fx.admin).await;
        self.fx.finish(outcome.and(only_reads).and(unbound)).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_class_exits_0_with_every_condition_true_and_check_only_reads() -> Result<()> {
    let cli = Cli::seed("chkok").await?;
    let outcome = async {
        let healthy = cli.check(&["-o", "json"], None).await?;
        let status = healthy.status()?;
        assert_eq!(healthy.code, 0, "{}\n{}", summary(&status), healthy.stderr);
        assert!(
            status.conditions.iter().all(|c| c.status == "True"),
            "{}",
            summary(&status)
        );
        // The inputs were really read (and `finish` holds that nothing was written).
        let requests = cli.requests()?;
        for resource in [
            "ec2nodeclasses",
            "nodepools",
            "nodeclaims",
            "pods",
            "configmaps",
        ] {
            assert!(
                requests
                    .iter()
                    .any(|r| r.verb == "list" && r.resource == resource && r.code == 200),
                "check lists {resource}: {requests:?}"
            );
        }
        Ok(())
    }
    .await;
    cli.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_aws_exits_2_and_every_aws_check_says_why_it_cannot_see() -> Result<()> {
    let cli = Cli::seed("chkblind").await?;
    let outcome = async {
        let closed = format!("http://127.0.0.1:{}", free_port()?);
        let blind = cli.check(&["-o", "json"], Some(&closed)).await?;
        let status = blind.status()?;
        assert_eq!(blind.code, 2, "{}\n{}", summary(&status), blind.stderr);
        let unknown: Vec<_> = status
            .conditions
            .iter()
            .filter(|c| c.status == "Unknown" && c.type_ != ConditionType::Ready.as_str())
            .collect();
        assert!(!unknown.is_empty(), "{}", summary(&status));
        for condition in &unknown {
            assert_eq!(
                condition.reason,
                Reason::AwsUnavailable.as_str(),
                "{}",
                summary(&status)
            );
            assert!(
                condition.message.contains("127.0.0.1") || condition.message.contains("connect"),
                "the cause is named: {}",
                condition.message
            );
        }
        assert!(
            condition_is(
                &status,
                ConditionType::Ready,
                "Unknown",
                Reason::AwsUnavailable
            ),
            "{}",
            summary(&status)
        );
        Ok(())
    }
    .await;
    cli.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_arn_exits_1_in_every_format_and_check_agrees_with_the_operator() -> Result<()> {
    let cli = Cli::seed("chkarn").await?;
    let outcome = async {
        let fx = &cli.fx;
        let class = fx.name.as_str();
        // The user pastes the profile's ARN: check proves it, as the operator does.
        fx.patch_node_class_spec(json!({"instanceProfile": fx.profile_arn}))
            .await?;
        let table = cli.check(&[], None).await?;
        assert_eq!(table.code, 1, "{table:?}");
        let headline = format!("EC2NodeClass {class}  Ready=False  InstanceProfileIsArn");
        assert!(table.stdout.starts_with(&headline), "{}", table.stdout);
        let fix = Reason::InstanceProfileIsArn.meta().remediation;
        assert!(
            table
                .stdout
                .lines()
                .any(|l| l.trim_start().starts_with("InstanceProfileReady") && l.ends_with(fix)),
            "the failing condition with its fix: {}",
            table.stdout
        );
        assert!(table.stdout.contains(&fx.profile_arn), "{}", table.stdout);
        assert!(!table.stdout.contains('\u{1b}'), "NO_COLOR is honoured");

        // Accepted for this run, the proven finding no longer counts: exit 0, listed as accepted.
        let accepted = cli
            .check(&["--accept", "InstanceProfileIsArn", "-o", "json"], None)
            .await?;
        assert_eq!(accepted.code, 0, "{accepted:?}");
        let status = accepted.status()?;
        assert!(
            condition_is(
                &status,
                ConditionType::InstanceProfileReady,
                "True",
                Reason::FindingAccepted
            ) && status
                .accepted
                .iter()
                .any(|a| a.reason == "InstanceProfileIsArn" && a.source == "check --accept"),
            "{status:?}"
        );

        let broken = cli.check(&["-o", "json"], None).await?;
        assert_eq!(broken.code, 1, "{broken:?}");
        let from_check = broken.status()?;
        let markdown = cli.check(&["-o", "markdown"], None).await?;
        assert!(
            markdown.stdout.contains(&format!(
                "## EC2NodeClass `{class}`: Ready False (InstanceProfileIsArn)"
            )),
            "{}",
            markdown.stdout
        );
        let yaml = cli.check(&["-o", "yaml"], None).await?;
        let from_yaml: Value = serde_yaml::from_str(&yaml.stdout)?;
        assert_eq!(from_yaml["kind"], "KarpenterHealthList");
        let yaml_status: KarpenterHealthStatus =
            serde_json::from_value(from_yaml["items"][0]["status"].clone())?;
        // Two runs, so the times differ; the verdicts and findings may not.
        assert_eq!(
            verdicts(&yaml_status),
            verdicts(&from_check),
            "yaml and json"
        );
        assert_eq!(yaml_status.findings, from_check.findings, "yaml and json");

        // The operator, reading the same cluster and AWS, reaches the same verdicts.
        let operator = fx.start_operator(None, false).await?;
        // Its first evaluation may precede its first lists (conditions then Unknown,
        // NotObserved); check lists before it evaluates, so compare once every watch has listed.
        let from_operator = fx
            .wait_status(
                "InstanceProfileReady=False(InstanceProfileIsArn) with every watch listed",
                |s| {
                    condition_is(
                        s,
                        ConditionType::InstanceProfileReady,
                        "False",
                        Reason::InstanceProfileIsArn,
                    ) && s.conditions.iter().all(|c| c.reason != "NotObserved")
                },
            )
            .await;
        operator.stop().await?;
        assert_eq!(
            verdicts(&from_check),
            verdicts(&from_operator?),
            "check and the operator disagree"
        );
        Ok(())
    }
    .await;
    cli.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_exits_3_without_the_class_aws_credentials_or_a_cluster() -> Result<()> {
    let cli = Cli::seed("chkcannot").await?;
    let home = tempfile_dir("check-home")?;
    let outcome = async {
        let fx = &cli.fx;
        let missing = run(
            &cli.binary,
            &[
                "check",
                "--node-class",
                "no-such-class",
                "--region",
                &fx.region,
            ],
            &fx.bed,
            &cli.moto,
            &[],
        )
        .await?;
        assert_eq!(missing.code, 3, "{missing:?}");
        assert!(
            missing
                .stderr
                .contains("EC2NodeClass no-such-class does not exist"),
            "{missing:?}"
        );
        let no_credentials = run(
            &cli.binary,
            &args(&cli.args(&["-o", "json"])),
            &fx.bed,
            &cli.moto,
            &[
                ("AWS_ACCESS_KEY_ID", ""),
                ("AWS_SECRET_ACCESS_KEY", ""),
                ("HOME", home.to_str().unwrap_or_default()),
            ],
        )
        .await?;
        assert_eq!(no_credentials.code, 3, "{no_credentials:?}");
        assert!(
            no_credentials.stderr.contains("no AWS credentials"),
            "{no_credentials:?}"
        );
        let no_cluster = home.join("kubeconfig");
        std::fs::write(
            &no_cluster,
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{}'}}}}]\n\
                 users: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\n\
                 current-context: x\n",
                free_port()?
            ),
        )?;
        let unreachable = cli
            .check(&["--kubeconfig", no_cluster.to_str().unwrap_or_default()], None)
            .await?;
        assert_eq!(unreachable.code, 3, "{unreachable:?}");
        assert!(
            unreachable.stderr.contains("could not run"),
            "{unreachable:?}"
        );
        Ok(())
    }
    .await;
    let _ = std::fs::remove_dir_all(home);
    cli.finish(outcome).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_runs_as_a_kubectl_plugin_with_the_same_verdicts() -> Result<()> {
    let cli = Cli::seed("chkplugin").await?;
    let plugins = tempfile_dir("check-plugin")?;
    let outcome = async {
        // kubectl finds `kubectl-karpenter_health` on PATH and runs it.
        let plugin = plugins.join("kubectl-karpenter_health");
        std::os::unix::fs::symlink(&cli.binary, &plugin)?;
        let path = format!(
            "{}:{}",
            plugins.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let direct = cli.check(&["-o", "json"], None).await?;
        let mut kubectl_args = vec!["karpenter-health"];
        let json_args = cli.args(&["-o", "json"]);
        kubectl_args.extend(args(&json_args));
        let via_kubectl = run(
            Path::new("kubectl"),
            &kubectl_args,
            &cli.fx.bed,
            &cli.moto,
            &[("PATH", &path)],
        )
        .await?;
        assert_eq!(via_kubectl.code, direct.code, "{via_kubectl:?}");
        assert_eq!(
            verdicts(&via_kubectl.status()?),
            verdicts(&direct.status()?)
        );
        let help = run(
            Path::new("kubectl"),
            &["karpenter-health", "check", "--help"],
            &cli.fx.bed,
            &cli.moto,
            &[("PATH", &path)],
        )
        .await?;
        assert!(
            help.stdout
                .contains("Usage: kubectl karpenter-health check [OPTIONS]"),
            "{help:?}"
        );
        Ok(())
    }
    .await;
    let _ = std::fs::remove_dir_all(plugins);
    cli.finish(outcome).await
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// A fresh empty directory under the system's temporary directory.
fn tempfile_dir(label: &str) -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "kh-{label}-{}",
        karpenter_health_e2e::names::unique("t")
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

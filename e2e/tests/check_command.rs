//! `karpenter-health check` end to end: the built binary run as a user bound to read verbs only,
//! against the bed's API server and moto. It agrees with the operator on a broken EC2NodeClass,
//! exits with the documented codes (0, 1, 2 with AWS unreachable, 3 when it cannot run), makes only
//! read requests (the API server's audit log says so), and answers as a kubectl plugin. Does IO
//! (API server, moto, child processes).
//!
//! Karpenter's state is written by hand here, not produced by the lab's real controller: the one-
//! shot check is compared with the operator on one frozen state.

use anyhow::{Context as _, Result, bail};
use karpenter_health_api::{ConditionType, KarpenterHealthStatus, Reason};
use karpenter_health_e2e::audit;
use karpenter_health_e2e::fixture::Fixture;
use karpenter_health_e2e::health_status::{condition_is, summary};
use karpenter_health_e2e::{Bed, apply_json, free_port, karpenter_health_binary};
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_agrees_with_the_operator_exits_by_the_worst_condition_and_only_reads() -> Result<()>
{
    let fx = Fixture::seed("chk", "eu-west-1", "1.8.6").await?;
    bind_reader_read_only(&fx.admin).await?;
    let outcome = scenario(&fx).await;
    let unbound = unbind_reader(&fx.admin).await;
    fx.finish(outcome.and(unbound)).await
}

async fn scenario(fx: &Fixture) -> Result<()> {
    let binary = karpenter_health_binary()?;
    // Through the fixture's proxy, which serves what moto lacks (EC2 GetEbsDefaultKmsKeyId).
    let moto = fx.proxy.url();
    let audit_log = fx.bed.dir.join("logs/audit.log");
    let audit_from = audit::offset(&audit_log);
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
    let with = |more: &[&str]| -> Vec<String> {
        scope
            .iter()
            .copied()
            .chain(more.iter().copied())
            .map(str::to_owned)
            .collect()
    };

    // The seeded setup is healthy: exit 0, every condition True.
    let json_args = with(&["-o", "json"]);
    let healthy = run(&binary, &args(&json_args), &fx.bed, &moto, &[]).await?;
    let status = healthy.status()?;
    assert_eq!(healthy.code, 0, "{}\n{}", summary(&status), healthy.stderr);
    assert!(
        status.conditions.iter().all(|c| c.status == "True"),
        "{}",
        summary(&status)
    );

    // AWS unreachable: nothing is proven False, the AWS-derived checks say why they cannot see.
    let closed = format!("http://127.0.0.1:{}", free_port()?);
    let blind = run(&binary, &args(&json_args), &fx.bed, &closed, &[]).await?;
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

    // The user pastes the profile's ARN: check proves it, as the operator does.
    fx.patch_node_class_spec(json!({"instanceProfile": fx.profile_arn}))
        .await?;
    let table = run(&binary, &args(&with(&[])), &fx.bed, &moto, &[]).await?;
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

    let broken = run(&binary, &args(&json_args), &fx.bed, &moto, &[]).await?;
    assert_eq!(broken.code, 1, "{broken:?}");
    let from_check = broken.status()?;
    let markdown = run(
        &binary,
        &args(&with(&["-o", "markdown"])),
        &fx.bed,
        &moto,
        &[],
    )
    .await?;
    assert!(
        markdown.stdout.contains(&format!(
            "## EC2NodeClass `{class}`: Ready False (InstanceProfileIsArn)"
        )),
        "{}",
        markdown.stdout
    );
    let yaml = run(&binary, &args(&with(&["-o", "yaml"])), &fx.bed, &moto, &[]).await?;
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
    // Its first evaluation may precede its first lists (conditions then Unknown, NotObserved);
    // check lists before it evaluates, so compare once every watch has listed.
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

    // Could not run: no such EC2NodeClass; no AWS credentials; no cluster.
    let missing = run(
        &binary,
        &[
            "check",
            "--node-class",
            "no-such-class",
            "--region",
            &fx.region,
        ],
        &fx.bed,
        &moto,
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
    let home = tempfile_dir("check-home")?;
    let no_credentials = run(
        &binary,
        &args(&json_args),
        &fx.bed,
        &moto,
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
    let unreachable = run(
        &binary,
        &args(&with(&[
            "--kubeconfig",
            no_cluster.to_str().unwrap_or_default(),
        ])),
        &fx.bed,
        &moto,
        &[],
    )
    .await?;
    assert_eq!(unreachable.code, 3, "{unreachable:?}");
    assert!(
        unreachable.stderr.contains("could not run"),
        "{unreachable:?}"
    );

    // As a kubectl plugin: kubectl finds `kubectl-karpenter_health` on PATH and runs it.
    let plugins = tempfile_dir("check-plugin")?;
    let plugin = plugins.join("kubectl-karpenter_health");
    std::os::unix::fs::symlink(&binary, &plugin)?;
    let path = format!(
        "{}:{}",
        plugins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut kubectl_args = vec!["karpenter-health"];
    kubectl_args.extend(args(&json_args));
    let via_kubectl = run(
        Path::new("kubectl"),
        &kubectl_args,
        &fx.bed,
        &moto,
        &[("PATH", &path)],
    )
    .await?;
    assert_eq!(via_kubectl.code, 1, "{via_kubectl:?}");
    assert_eq!(verdicts(&via_kubectl.status()?), verdicts(&from_check));
    let help = run(
        Path::new("kubectl"),
        &["karpenter-health", "check", "--help"],
        &fx.bed,
        &moto,
        &[("PATH", &path)],
    )
    .await?;
    assert!(
        help.stdout
            .contains("Usage: kubectl karpenter-health check [OPTIONS]"),
        "{help:?}"
    );

    // Every request the reader made was a read, and the inputs were really read.
    let requests = audit::requests_since(&audit_log, audit_from, READER)?;
    let writes: Vec<_> = requests
        .iter()
        .filter(|r| !["get", "list", "watch"].contains(&r.verb.as_str()))
        .collect();
    assert!(writes.is_empty(), "check wrote: {writes:?}");
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
    for dir in [home, plugins] {
        let _ = std::fs::remove_dir_all(dir);
    }
    Ok(())
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

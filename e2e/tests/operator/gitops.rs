//! How GitOps tools read a KarpenterHealth the operator wrote, on the real API server: `kubectl
//! wait --for=condition=Ready` (kstatus' convention) and Argo CD's health check
//! (`deploy/argocd/health.lua`, run by `deploy/argocd/test.sh` under Lua 5.1) on the objects as
//! they were while pending, healthy, broken and blind. Does IO (API server, moto, child
//! processes).
//!
//! Karpenter's state is written by hand here, not produced by the lab's real controller: what is
//! checked is what GitOps tools read of the operator's status.

use anyhow::{Context, Result, ensure};
use karpenter_health_api::{ConditionType, KarpenterHealth, KarpenterHealthStatus};
use karpenter_health_e2e::fault_proxy::Fault;
use karpenter_health_e2e::fixture::Fixture;
use karpenter_health_e2e::status_log::StatusLog;
use kube::api::Api;
use std::path::Path;

/// Writes the object as Argo CD would see it, with `status`, to `dir/<health>-<name>.json`.
fn write_object(
    dir: &Path,
    health: &str,
    name: &str,
    object: &KarpenterHealth,
    status: &KarpenterHealthStatus,
) -> Result<()> {
    let mut value = serde_json::to_value(object)?;
    value["status"] = serde_json::to_value(status)?;
    std::fs::write(
        dir.join(format!("{health}-{name}.json")),
        serde_json::to_string_pretty(&value)?,
    )?;
    Ok(())
}

fn ready_reason(s: &KarpenterHealthStatus) -> Option<(&str, &str)> {
    s.condition(ConditionType::Ready)
        .map(|c| (c.status.as_str(), c.reason.as_str()))
}

/// `kubectl wait` for `condition` on this test's KarpenterHealth, as the bed's admin.
fn kubectl_wait(fx: &Fixture, condition: &str) -> Result<()> {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(fx.bed.admin_kubeconfig())
        .args([
            "wait",
            &format!("--for=condition={condition}"),
            &format!("karpenterhealth/{}", fx.name),
            "--timeout=60s",
        ])
        .output()
        .context("running kubectl wait")?;
    ensure!(
        out.status.success(),
        "kubectl wait --for=condition={condition}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_wait_and_argo_cds_health_check_read_the_status() -> Result<()> {
    let fx = Fixture::seed("gitops", "ca-central-1", "1.8.6").await?;
    let dir = fx.bed.dir.join(format!("argocd-{}", fx.name));
    std::fs::create_dir_all(&dir)?;
    let outcome: Result<()> = async {
        let log = StatusLog::start(&fx.admin, &fx.name);
        let operator = fx.start_operator(None, true).await?;
        fx.wait_healthy("as seeded").await?;
        let healths: Api<KarpenterHealth> = Api::all(fx.admin.clone());
        let object = healths.get(&fx.name).await?;
        let status = object.status.clone().context("a status")?;
        ensure!(
            status.observed_generation == object.metadata.generation,
            "observedGeneration must be the object's own generation for kstatus: {:?} vs {:?}",
            status.observed_generation,
            object.metadata.generation
        );
        kubectl_wait(&fx, "Ready")?;
        write_object(&dir, "Healthy", "evaluated", &object, &status)?;

        // Broken: the node role is no longer mapped in aws-auth.
        fx.map_roles(&[]).await?;
        let broken = fx
            .wait_status("Ready False", |s| {
                ready_reason(s).is_some_and(|(st, _)| st == "False")
            })
            .await?;
        kubectl_wait(&fx, "Ready=false")?;
        write_object(&dir, "Degraded", "unmapped", &object, &broken)?;
        let node_role = fx.node_role_arn.clone();
        fx.map_roles(&[&node_role]).await?;
        fx.wait_healthy("with the node role mapped again").await?;

        // Blind: AWS denies every read, so checks are Unknown.
        for service in ["iam", "ec2", "eks", "sts"] {
            fx.proxy.inject(service, None, Fault::AccessDenied);
        }
        let blind = fx
            .wait_status("Ready Unknown", |s| {
                ready_reason(s).is_some_and(|(st, _)| st == "Unknown")
            })
            .await?;
        write_object(&dir, "Progressing", "blind", &object, &blind)?;
        fx.proxy.clear_faults();
        fx.wait_healthy("once AWS answers again").await?;
        operator.stop().await?;

        // The first status the operator wrote: every check Pending.
        let pending = log
            .stop()
            .await
            .into_iter()
            .find(|s| ready_reason(s).is_some_and(|(_, reason)| reason == "Pending"))
            .context("the watch saw no Pending status")?;
        write_object(&dir, "Progressing", "pending", &object, &pending)?;
        // And an object without a status yet.
        let mut bare = serde_json::to_value(&object)?;
        bare.as_object_mut().map(|o| o.remove("status"));
        std::fs::write(dir.join("Progressing-new.json"), bare.to_string())?;

        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/argocd/test.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .arg(&dir)
            .output()
            .context("running deploy/argocd/test.sh")?;
        eprintln!("{}", String::from_utf8_lossy(&out.stdout));
        ensure!(
            out.status.success(),
            "Argo CD's health check on real statuses: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    }
    .await;
    fx.finish(outcome).await
}

//! The foundation on a real kube-apiserver: the CRD is served with its printer columns, one
//! KarpenterHealth follows each EC2NodeClass (owned, garbage-collected with it), malformed
//! EC2NodeClasses are skipped without stopping the watch, and the binary stops on SIGTERM. Does IO
//! (API server, moto, runs the operator binary and kubectl).

use anyhow::Result;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_api::{ConditionType, KarpenterHealth};
use karpenter_health_e2e::{
    Bed, OperatorHandle, apply_yaml, install_health_crd, kubectl, wait_for,
};
use kube::api::{Api, DeleteParams};
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(30);

fn config() -> karpenter_health_operator::OperatorConfig {
    karpenter_health_operator::OperatorConfig::for_tests()
}

fn node_class_yaml(name: &str) -> String {
    format!(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: {name}}}
spec:
  role: KarpenterNodeRole-e2e
  amiSelectorTerms: [{{alias: al2023@latest}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: e2e}}}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: e2e}}}}]
"#
    )
}

#[tokio::test]
async fn crd_is_served_and_kubectl_shows_the_printer_columns() -> Result<()> {
    let bed = Bed::from_env()?;
    let client = bed.admin_client().await?;
    install_health_crd(&client).await?;
    let operator =
        OperatorHandle::start(client.clone(), config(), bed.aws_port("us-east-1").await?);
    apply_yaml(&client, &node_class_yaml("fnd-columns")).await?;
    let healths: Api<KarpenterHealth> = Api::all(client.clone());
    wait_for(
        "KarpenterHealth fnd-columns with status",
        DEADLINE,
        || async {
            Ok(healths
                .get_opt("fnd-columns")
                .await?
                .filter(|h| h.status.is_some()))
        },
    )
    .await?;

    let table = kubectl(&bed, &["get", "kh", "fnd-columns"])?;
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "READY",
            "REASON",
            "PROFILE",
            "ROLE",
            "MAPPED",
            "SGS",
            "REGISTERED",
            "AGE"
        ]
    );
    let row = table.lines().nth(1).unwrap_or_default();
    assert!(
        row.starts_with("fnd-columns") && row.contains("Unknown"),
        "{row}"
    );
    assert!(
        table.lines().all(|l| l.len() <= 120),
        "kubectl get kh must fit 120 columns:\n{table}"
    );
    // `kubectl get karpenter` lists KarpenterHealth beside Karpenter's own kinds.
    assert!(kubectl(&bed, &["get", "karpenter"])?.contains("karpenterhealth"));

    Api::<EC2NodeClass>::all(client)
        .delete("fnd-columns", &DeleteParams::default())
        .await?;
    operator.stop().await
}

#[tokio::test]
async fn each_node_class_gets_one_owned_health_that_is_collected_with_it() -> Result<()> {
    let bed = Bed::from_env()?;
    let client = bed.admin_client().await?;
    install_health_crd(&client).await?;
    let operator =
        OperatorHandle::start(client.clone(), config(), bed.aws_port("us-east-1").await?);
    apply_yaml(&client, &node_class_yaml("fnd-owned")).await?;
    let node_classes: Api<EC2NodeClass> = Api::all(client.clone());
    let healths: Api<KarpenterHealth> = Api::all(client.clone());

    let health = wait_for(
        "KarpenterHealth fnd-owned with status",
        DEADLINE,
        || async {
            Ok(healths
                .get_opt("fnd-owned")
                .await?
                .filter(|h| h.status.is_some()))
        },
    )
    .await?;
    let node_class = node_classes.get("fnd-owned").await?;
    let owner = &health
        .metadata
        .owner_references
        .as_ref()
        .expect("owner reference")[0];
    assert_eq!(owner.kind, "EC2NodeClass");
    assert_eq!(Some(&owner.uid), node_class.metadata.uid.as_ref());
    assert_eq!(health.spec.node_class_name, "fnd-owned");
    let status = health.status.expect("status");
    // Every condition is present from the first write, with the generation it describes.
    for ty in ConditionType::ALL {
        let condition = status
            .condition(*ty)
            .unwrap_or_else(|| panic!("{ty} missing"));
        assert_eq!(
            condition.observed_generation, node_class.metadata.generation,
            "{ty}"
        );
    }
    assert_eq!(status.conditions.len(), ConditionType::ALL.len());

    // Deleting the EC2NodeClass lets the garbage collector remove its KarpenterHealth.
    node_classes
        .delete("fnd-owned", &DeleteParams::default())
        .await?;
    wait_for(
        "KarpenterHealth fnd-owned to be garbage-collected",
        Duration::from_secs(60),
        || async { Ok(healths.get_opt("fnd-owned").await?.is_none().then_some(())) },
    )
    .await?;
    operator.stop().await
}

#[tokio::test]
async fn a_malformed_node_class_is_skipped_and_the_watch_goes_on() -> Result<()> {
    let bed = Bed::from_env()?;
    let client = bed.admin_client().await?;
    install_health_crd(&client).await?;
    let operator =
        OperatorHandle::start(client.clone(), config(), bed.aws_port("us-east-1").await?);
    // Wrong types where Karpenter's schema wants strings and lists. The bed's minimal CRDs (like
    // a cluster whose CRD is older or broken) store it; Karpenter's real CRDs make the API server
    // refuse it, and then there is nothing malformed for the operator to see.
    let malformed = apply_yaml(
        &client,
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: fnd-malformed}\n\
         spec: {role: 42, securityGroupSelectorTerms: not-a-list}\n",
    )
    .await;
    let stored = match malformed {
        Ok(_) => true,
        Err(error) => {
            let text = format!("{error:#}");
            assert!(text.contains("spec.role"), "unexpected rejection: {text}");
            eprintln!("the API server's schema refused the malformed EC2NodeClass: {text}");
            false
        }
    };
    apply_yaml(&client, &node_class_yaml("fnd-after-malformed")).await?;
    let healths: Api<KarpenterHealth> = Api::all(client.clone());
    wait_for("KarpenterHealth fnd-after-malformed", DEADLINE, || async {
        Ok(healths
            .get_opt("fnd-after-malformed")
            .await?
            .filter(|h| h.status.is_some()))
    })
    .await?;
    assert!(healths.get_opt("fnd-malformed").await?.is_none());

    let node_classes: Api<EC2NodeClass> = Api::all(client);
    if stored {
        // Deleting needs no typed read of the malformed object.
        node_classes
            .delete("fnd-malformed", &DeleteParams::default())
            .await?;
    }
    node_classes
        .delete("fnd-after-malformed", &DeleteParams::default())
        .await?;
    operator.stop().await
}

#[tokio::test]
async fn the_binary_installs_its_crd_and_stops_cleanly_on_sigterm() -> Result<()> {
    let bed = Bed::from_env()?;
    // The binary sits beside this test's own executable (target/debug/deps/..), wherever the
    // target directory is; `make e2e` builds it first.
    let binary = match std::env::var_os("KH_BIN") {
        Some(path) => std::path::PathBuf::from(path),
        None => std::env::current_exe()?
            .parent()
            .and_then(|deps| deps.parent())
            .map(|debug| debug.join("karpenter-health"))
            .ok_or_else(|| anyhow::anyhow!("cannot locate the target directory"))?,
    };
    anyhow::ensure!(
        binary.is_file(),
        "{} is missing: run `cargo build -p karpenter-health`",
        binary.display()
    );
    let mut child = ChildGuard(
        std::process::Command::new(&binary)
            .args(["run", "--install-crd", "--http-address", "127.0.0.1:0"])
            .env("KUBECONFIG", bed.admin_kubeconfig())
            .env("AWS_ENDPOINT_URL", bed.moto_url()?)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?,
    );
    let client = bed.admin_client().await?;
    // The binary is up and working once it has made the KarpenterHealth of a new EC2NodeClass.
    apply_yaml(&client, &node_class_yaml("fnd-binary")).await?;
    let healths: Api<KarpenterHealth> = Api::all(client.clone());
    wait_for(
        "the binary to create KarpenterHealth fnd-binary",
        DEADLINE,
        || async {
            Ok(healths
                .get_opt("fnd-binary")
                .await?
                .filter(|h| h.status.is_some()))
        },
    )
    .await?;
    Api::<EC2NodeClass>::all(client)
        .delete("fnd-binary", &DeleteParams::default())
        .await?;
    std::process::Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()?;
    let status = wait_for("the operator process to exit", DEADLINE, || {
        let exited = child.0.try_wait();
        async move { Ok(exited?) }
    })
    .await?;
    assert!(status.success(), "operator exited with {status}");
    Ok(())
}

/// Kills the child process if the test ends early, so a failing test leaves nothing running.
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

//! The foundation on a real kube-apiserver: the CRD is served with its printer columns, one
//! KarpenterHealth follows each EC2NodeClass (owned, garbage-collected with it), malformed
//! EC2NodeClasses are skipped without stopping the watch, and the binary stops on SIGTERM. Does IO
//! (API server, moto, runs the operator binary and kubectl).

use anyhow::Result;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceValidation, JSONSchemaProps,
};
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_api::{ConditionType, KarpenterHealth};
use karpenter_health_e2e::fault_proxy::FaultProxy;
use karpenter_health_e2e::{
    Bed, OperatorHandle, apply_yaml, install_health_crd, kubectl, minimal_node_class_yaml, wait_for,
};
use kube::api::{Api, DeleteParams, PostParams};
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(30);

fn config() -> karpenter_health_operator::OperatorConfig {
    karpenter_health_operator::OperatorConfig::for_tests()
}

#[tokio::test]
async fn crd_is_served_and_kubectl_shows_the_printer_columns() -> Result<()> {
    let bed = Bed::from_env()?;
    let client = bed.admin_client().await?;
    install_health_crd(&client).await?;
    let operator =
        OperatorHandle::start(client.clone(), config(), bed.aws_port("us-east-1").await?);
    apply_yaml(&client, &minimal_node_class_yaml("fnd-columns")).await?;
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

    // The default view names what is wrong: Ready's reason and the not-True sub-conditions,
    // as the object holds them (compared until they agree: a re-evaluation may land between).
    let table = wait_for(
        "kubectl get kh to show the stored status",
        DEADLINE,
        || async {
            let status = healths
                .get("fnd-columns")
                .await?
                .status
                .filter(|s| s.last_evaluated.is_some())
                .unwrap_or_default();
            let table = kubectl(&bed, &["get", "kh", "fnd-columns"])?;
            let ready = status
                .condition(karpenter_health_api::ConditionType::Ready)
                .map(|c| (c.status.clone(), c.reason.clone()))
                .unwrap_or_default();
            let not_ready = status.not_ready.clone().unwrap_or_default();
            let row = table.lines().nth(1).unwrap_or_default().to_owned();
            let cells: Vec<&str> = row.split_whitespace().collect();
            let shown = ready.0 != "True"
                && !not_ready.is_empty()
                && cells.get(..4) == Some(&["fnd-columns", &ready.0, &ready.1, &not_ready][..]);
            Ok(shown.then_some(table))
        },
    )
    .await?;
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
            "NOT",
            "READY",
            "LAST",
            "EVALUATED",
            "AGE"
        ]
    );
    let wide = kubectl(&bed, &["get", "kh", "fnd-columns", "-o", "wide"])?;
    assert!(
        wide.lines().next().unwrap_or_default().contains("PROFILE"),
        "{wide}"
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
    apply_yaml(&client, &minimal_node_class_yaml("fnd-owned")).await?;
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

/// Several EC2NodeClasses waiting at a cold start are all evaluated: their first reconciles all
/// find the KarpenterHealth cache not yet listed, and none of them may be left behind.
#[tokio::test]
async fn every_node_class_present_at_a_cold_start_is_evaluated() -> Result<()> {
    let bed = Bed::from_env()?;
    let client = bed.admin_client().await?;
    install_health_crd(&client).await?;
    let names = [
        "fnd-cold-a",
        "fnd-cold-b",
        "fnd-cold-c",
        "fnd-cold-d",
        "fnd-cold-e",
    ];
    for name in names {
        apply_yaml(&client, &minimal_node_class_yaml(name)).await?;
    }
    let operator =
        OperatorHandle::start(client.clone(), config(), bed.aws_port("us-east-1").await?);
    let healths: Api<KarpenterHealth> = Api::all(client.clone());
    for name in names {
        wait_for(
            &format!("KarpenterHealth {name} with status"),
            DEADLINE,
            || async { Ok(healths.get_opt(name).await?.filter(|h| h.status.is_some())) },
        )
        .await?;
    }
    let node_classes: Api<EC2NodeClass> = Api::all(client);
    for name in names {
        node_classes.delete(name, &DeleteParams::default()).await?;
    }
    operator.stop().await
}

/// The status is the operator's: a deleted KarpenterHealth comes back with its full status at
/// once, and a hand edit of its status is put back, both long before the periodic refresh (5m
/// here), so from the watch on KarpenterHealths alone.
#[tokio::test]
async fn a_deleted_or_hand_edited_health_gets_its_full_status_back_at_once() -> Result<()> {
    let bed = Bed::from_env()?;
    let client = bed.admin_client().await?;
    install_health_crd(&client).await?;
    // Through the proxy, which answers GetEbsDefaultKmsKeyId (moto's 500 for it is retried for
    // seconds), so the first evaluation is complete and every later one decides the same.
    let aws = FaultProxy::start(bed.moto_url()?).await?;
    let operator = OperatorHandle::start(
        client.clone(),
        config(),
        bed.aws_port_at(&aws.url(), "us-east-1").await?,
    );
    apply_yaml(&client, &minimal_node_class_yaml("fnd-restored")).await?;
    let healths: Api<KarpenterHealth> = Api::all(client.clone());
    let complete = |h: &KarpenterHealth| {
        h.status
            .as_ref()
            .is_some_and(|s| s.conditions.len() == ConditionType::ALL.len())
    };
    // Decided: past the Pending status written before the first AWS reads return, and the same
    // over a second (an evaluation made before every watch had listed is followed by another). A
    // fixed "settle" sleep here once took a status that was still to change.
    let evaluated = |h: &KarpenterHealth| {
        complete(h)
            && h.status
                .as_ref()
                .and_then(|s| s.condition(ConditionType::Ready))
                .is_some_and(|c| c.reason != "Pending")
    };
    let without_time = |h: &KarpenterHealth| {
        h.status
            .clone()
            .map(|s| karpenter_health_api::KarpenterHealthStatus {
                last_evaluated: None,
                ..s
            })
    };
    let first = {
        let started = std::time::Instant::now();
        let mut previous: Option<KarpenterHealth> = None;
        loop {
            let now = healths.get_opt("fnd-restored").await?.filter(evaluated);
            if let (Some(before), Some(now)) = (&previous, &now)
                && without_time(before) == without_time(now)
            {
                break now.clone();
            }
            anyhow::ensure!(
                started.elapsed() < DEADLINE,
                "fnd-restored's status did not settle within {DEADLINE:?}: {now:#?}"
            );
            previous = now;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    let decided = first.status.clone().expect("status");
    let ready_of = |s: &karpenter_health_api::KarpenterHealthStatus| {
        s.condition(ConditionType::Ready)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
    };

    healths
        .delete("fnd-restored", &DeleteParams::default())
        .await?;
    let restored = wait_for(
        "the re-created KarpenterHealth with its status",
        DEADLINE,
        || async {
            Ok(healths
                .get_opt("fnd-restored")
                .await?
                .filter(|h| h.metadata.uid != first.metadata.uid)
                .filter(complete))
        },
    )
    .await?;
    assert_eq!(
        ready_of(restored.status.as_ref().expect("status")),
        ready_of(&decided),
        "the re-created object carries the decided status, not Pending"
    );

    // Someone edits the status by hand; the operator puts its own back.
    let edited = serde_json::json!({"status": {"observedGeneration": 999}});
    healths
        .patch_status(
            "fnd-restored",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&edited),
        )
        .await?;
    wait_for("the hand edit to be put back", DEADLINE, || async {
        let status = healths.get("fnd-restored").await?.status;
        Ok(status
            .filter(|s| s.observed_generation != Some(999))
            .map(|_| ()))
    })
    .await?;

    Api::<EC2NodeClass>::all(client)
        .delete("fnd-restored", &DeleteParams::default())
        .await?;
    operator.stop().await
}

/// The EC2NodeClass CRD with every served version's schema loosened to "any spec, any status",
/// like an older or hand-edited CRD under which a malformed object could be stored.
fn loosened(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let loose: JSONSchemaProps = serde_json::from_value(serde_json::json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }
    }))
    .expect("a valid schema");
    for version in &mut crd.spec.versions {
        version.schema = Some(CustomResourceValidation {
            open_api_v3_schema: Some(loose.clone()),
        });
    }
    crd.metadata.managed_fields = None;
    crd.status = None;
    crd
}

/// Replaces the CRD `name` with `crd`'s spec (retrying on a write conflict).
async fn replace_crd_spec(
    crds: &Api<CustomResourceDefinition>,
    crd: &CustomResourceDefinition,
) -> Result<()> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    wait_for("the CRD replaced", DEADLINE, || async {
        let mut current = crds.get(&name).await?;
        current.spec = crd.spec.clone();
        match crds.replace(&name, &PostParams::default(), &current).await {
            Ok(_) => Ok(Some(())),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
            Err(error) => Err(error.into()),
        }
    })
    .await
}

#[tokio::test]
async fn a_malformed_node_class_is_skipped_and_the_watch_goes_on() -> Result<()> {
    let bed = Bed::from_env()?;
    let client = bed.admin_client().await?;
    install_health_crd(&client).await?;
    // How a malformed object gets into a real cluster: stored under a looser schema (an older CRD,
    // a hand edit), then the schema is tightened. The API server keeps serving the stored object
    // as it is; only the operator's own skip path stands between it and every other class.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let strict = crds.get("ec2nodeclasses.karpenter.k8s.aws").await?;
    replace_crd_spec(&crds, &loosened(strict.clone())).await?;
    let malformed_yaml = "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\n\
                          metadata: {name: fnd-malformed}\n\
                          spec: {role: 42, securityGroupSelectorTerms: not-a-list}\n";
    // The API server takes a moment to switch to the new schema.
    let stored = wait_for("the malformed EC2NodeClass stored", DEADLINE, || async {
        Ok(apply_yaml(&client, malformed_yaml).await.ok())
    })
    .await;
    replace_crd_spec(&crds, &strict).await?;
    stored?;

    // It is really stored malformed: served as written, and not readable as an EC2NodeClass.
    let node_classes: Api<EC2NodeClass> = Api::all(client.clone());
    let raw = kubectl(
        &bed,
        &["get", "ec2nodeclass", "fnd-malformed", "-o", "json"],
    )?;
    let raw: serde_json::Value = serde_json::from_str(&raw)?;
    assert_eq!(raw["spec"]["role"], 42, "stored as written: {raw}");
    assert!(
        node_classes.get("fnd-malformed").await.is_err(),
        "a typed read of the malformed EC2NodeClass must fail"
    );

    // The operator starts with the malformed object in its first list, skips it, and evaluates
    // the classes before and after it.
    apply_yaml(&client, &minimal_node_class_yaml("fnd-before-malformed")).await?;
    let operator =
        OperatorHandle::start(client.clone(), config(), bed.aws_port("us-east-1").await?);
    apply_yaml(&client, &minimal_node_class_yaml("fnd-after-malformed")).await?;
    let healths: Api<KarpenterHealth> = Api::all(client.clone());
    for name in ["fnd-before-malformed", "fnd-after-malformed"] {
        wait_for(&format!("KarpenterHealth {name}"), DEADLINE, || async {
            Ok(healths.get_opt(name).await?.filter(|h| h.status.is_some()))
        })
        .await?;
    }
    assert!(healths.get_opt("fnd-malformed").await?.is_none());

    // Deleting needs no typed read of the malformed object.
    for name in [
        "fnd-malformed",
        "fnd-before-malformed",
        "fnd-after-malformed",
    ] {
        node_classes.delete(name, &DeleteParams::default()).await?;
    }
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
    apply_yaml(&client, &minimal_node_class_yaml("fnd-binary")).await?;
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

//! A first run as a new user tries it: the operator started before its CRD is installed serves
//! `/livez`, keeps `/readyz` unready with the fix in its body, says what to do once (not every
//! retry), and starts on its own once the CRD is applied. Does IO (API server, child process).

use anyhow::{Result, ensure};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_health_api::KarpenterHealth;
use karpenter_health_e2e::process::OperatorProcess;
use karpenter_health_e2e::{Bed, free_port, http_get, install_health_crd, wait_for};
use kube::CustomResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use std::time::Duration;

const ADVICE: &str = "karpenter-health crd | kubectl apply -f -";

#[tokio::test]
async fn before_the_crd_is_installed_readyz_says_what_to_do_and_the_log_says_it_once() -> Result<()>
{
    let bed = Bed::from_env()?;
    let admin = bed.admin_client().await?;
    let deadline = Duration::from_secs(60);
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    if crds.get_opt(KarpenterHealth::crd_name()).await?.is_some() {
        crds.delete(KarpenterHealth::crd_name(), &DeleteParams::default())
            .await?;
    }
    let healths: Api<KarpenterHealth> = Api::all(admin.clone());
    wait_for(
        "the KarpenterHealth kind to stop being served",
        deadline,
        || async {
            Ok(healths
                .list(&ListParams::default())
                .await
                .is_err()
                .then_some(()))
        },
    )
    .await?;

    let port = free_port()?;
    let address = format!("127.0.0.1:{port}");
    let kubeconfig = bed.admin_kubeconfig();
    let mut operator = OperatorProcess::spawn(
        &["run", "--http-address", &address, "--region", "us-east-1"],
        &[
            ("KUBECONFIG", kubeconfig.to_str().unwrap_or_default()),
            ("AWS_ENDPOINT_URL", bed.moto_url()?),
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
        ],
        bed.dir.join("logs/first-run.log"),
    )?;
    let outcome = async {
        // The first answers may precede the first look at the CRDs; then it names the fix.
        let (_, body) = wait_for("/readyz to say what to do", deadline, || async {
            Ok(http_get(port, "/readyz")
                .await
                .ok()
                .filter(|(code, body)| *code == 503 && body.contains(ADVICE)))
        })
        .await?;
        ensure!(body.contains(ADVICE), "/readyz body: {body}");
        let (live, _) = http_get(port, "/livez").await?;
        ensure!(live == 200, "/livez must answer while waiting");
        // Two retries later (every 5 s), the advice is still logged once.
        tokio::time::sleep(Duration::from_secs(11)).await;
        let log = operator.log_text();
        let said = log.matches(ADVICE).count();
        ensure!(said == 1, "the advice was logged {said} times:\n{log}");
        ensure!(
            !log.contains("404 page not found"),
            "no raw API errors while waiting:\n{log}"
        );

        install_health_crd(&admin).await?;
        wait_for(
            "/readyz to turn ready once the CRD is served",
            deadline,
            || async {
                Ok(http_get(port, "/readyz")
                    .await
                    .ok()
                    .filter(|(code, _)| *code == 200))
            },
        )
        .await?;
        ensure!(
            operator.log_text().contains("the CRDs are served now"),
            "{}",
            operator.log_text()
        );
        Ok(())
    }
    .await;
    operator.terminate()?;
    let (code, _) = operator.wait_exit(Duration::from_secs(10)).await?;
    outcome?;
    ensure!(code == Some(0), "exit code {code:?}");
    Ok(())
}

//! Rust side of the local test bed started by `e2e/bed/bed.sh up`: clients for the real
//! kube-apiserver and moto server, waiting with a deadline, the operator in-process, and applying
//! YAML or JSON. Does IO (reads the bed's env file, talks to the bed).
//!
//! What the tests and the benchmark share lives in the modules below; the test files under
//! `e2e/tests/` hold only scenarios.
#![forbid(unsafe_code)]

/// The API server's audit log of the operator's requests, compared with RBAC rules.
pub mod audit;
/// Observer options and fact readers for the AWS adapter tests.
pub mod aws_observer;
/// Seeding moto: IAM roles and profiles, VPCs, security groups, instances, EKS clusters.
pub mod aws_seed;
/// A fault-injecting proxy in front of moto that also counts calls.
pub use karpenter_health_aws_gaps as fault_proxy;
/// One operator test's healthy seeded setup, its edits and its waits.
pub mod fixture;
/// Reading a KarpenterHealth status in assertions.
pub mod health_status;
/// What Karpenter writes (Deployment, ServiceAccount, status conditions), as JSON.
pub mod karpenter;
/// The real Karpenter controller as a process on the bed, with the node stand-in.
pub mod lab;
/// Unique names for tests sharing a bed.
pub mod names;
/// Whether an instance's kubelet is let in: aws-auth through the authenticator's own code.
pub mod node_authentication;
/// The kubelet's stand-in: Nodes for the instances the real Karpenter launched.
pub mod node_stand_in;
/// The `karpenter-health` binary as a child process (signals, kills, its log).
pub mod process;
/// The shipped RBAC bound to the bed's operator user, and authorizer questions.
pub mod rbac;
/// Every status a KarpenterHealth had while a test ran.
pub mod status_log;
/// A TCP relay in front of the API server that can stall like a network partition.
pub mod tcp_relay;

use anyhow::{Context, Result, bail, ensure};
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A running bed, as described by the `env` file `bed.sh up` wrote.
#[derive(Clone, Debug)]
pub struct Bed {
    pub dir: PathBuf,
    env: BTreeMap<String, String>,
}

impl Bed {
    /// The bed named by `KH_BED_DIR`, else `e2e/.bed`. Fails with a hint when none is up.
    pub fn from_env() -> Result<Self> {
        let dir = std::env::var_os("KH_BED_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".bed"));
        let env_file = dir.join("env");
        let text = std::fs::read_to_string(&env_file).with_context(|| {
            format!(
                "no test bed at {} (start one with `make e2e-up`)",
                dir.display()
            )
        })?;
        let env = text
            .lines()
            .filter_map(|l| l.strip_prefix("export "))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
            .collect();
        Ok(Self { dir, env })
    }

    /// A value the bed exported (`KH_MOTO_URL`, `KH_APISERVER_PORT`, ...).
    pub fn var(&self, key: &str) -> Result<&str> {
        self.env
            .get(key)
            .map(String::as_str)
            .with_context(|| format!("bed env has no {key}"))
    }

    pub fn moto_url(&self) -> Result<&str> {
        self.var("KH_MOTO_URL")
    }

    /// Path of the admin (system:masters) kubeconfig.
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// Path of the kubeconfig of the non-admin `karpenter-health-operator` user, which has only
    /// what the project's ClusterRole grants once it is bound.
    pub fn operator_kubeconfig(&self) -> PathBuf {
        self.dir.join("operator.kubeconfig")
    }

    /// Path of the kubeconfig of the `karpenter-health-reader` user, who has no permission until
    /// a test binds it (to read verbs only, for `karpenter-health check`).
    pub fn reader_kubeconfig(&self) -> PathBuf {
        self.dir.join("reader.kubeconfig")
    }

    /// A copy of the admin kubeconfig that reaches the API server through loopback `port` (a
    /// [`tcp_relay::TcpRelay`]), written to the bed's folder as `kubeconfig-via-<port>`.
    pub fn admin_kubeconfig_via(&self, port: u16) -> Result<PathBuf> {
        let apiserver = self.var("KH_APISERVER_PORT")?;
        let text = std::fs::read_to_string(self.admin_kubeconfig())?;
        let from = format!("https://127.0.0.1:{apiserver}");
        ensure!(text.contains(&from), "the admin kubeconfig names no {from}");
        let path = self.dir.join(format!("kubeconfig-via-{port}"));
        std::fs::write(
            &path,
            text.replace(&from, &format!("https://127.0.0.1:{port}")),
        )?;
        Ok(path)
    }

    /// The API server's address on loopback.
    pub fn api_server_address(&self) -> Result<std::net::SocketAddr> {
        Ok(([127, 0, 0, 1], self.var("KH_APISERVER_PORT")?.parse()?).into())
    }

    pub async fn admin_client(&self) -> Result<kube::Client> {
        client_from(&self.admin_kubeconfig()).await
    }

    /// The admin, with kube's retries of 429, 503 and 504 off: a test that wants the API
    /// server's refusal itself (an eviction a PodDisruptionBudget refuses) gets it at once.
    pub async fn admin_client_without_retries(&self) -> Result<kube::Client> {
        let kubeconfig = Kubeconfig::read_from(self.admin_kubeconfig())?;
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        config.default_retry = false;
        Ok(kube::Client::try_from(config)?)
    }

    pub async fn operator_client(&self) -> Result<kube::Client> {
        client_from(&self.operator_kubeconfig()).await
    }

    /// SDK config pointed at the bed's moto server, with dummy credentials and `region`.
    /// moto keeps EC2 state per region, so a test can take a region of its own for isolation;
    /// IAM is global, so IAM names must be unique per test.
    pub async fn aws_config(&self, region: &str) -> Result<aws_config::SdkConfig> {
        self.aws_config_at(self.moto_url()?, region).await
    }

    /// SDK config for any endpoint (e.g. a fault proxy in front of moto).
    pub async fn aws_config_at(
        &self,
        endpoint: &str,
        region: &str,
    ) -> Result<aws_config::SdkConfig> {
        self.aws_config_signed_as(endpoint, region, BED_ACCESS_KEY)
            .await
    }

    /// [`Bed::aws_config_at`] signing with `access_key`, so the gap proxy can tell this caller
    /// from the others (and hold it to a policy).
    pub async fn aws_config_signed_as(
        &self,
        endpoint: &str,
        region: &str,
        access_key: &str,
    ) -> Result<aws_config::SdkConfig> {
        // moto accepts any credentials; static ones keep the host's own out of the tests.
        let credentials =
            aws_credential_types::Credentials::new(access_key, "testing", None, None, "bed");
        Ok(aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(region.to_owned()))
            .endpoint_url(endpoint)
            .credentials_provider(credentials)
            .load()
            .await)
    }
}

/// The access key everything in the bed signs with unless a test names another.
pub const BED_ACCESS_KEY: &str = "testing";

pub(crate) async fn client_from(path: &Path) -> Result<kube::Client> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// Polls `probe` until it returns `Some`, or fails after `deadline` naming `what` and the last
/// observation, so a failing e2e test says what it was waiting for.
pub async fn wait_for<T, F, Fut>(what: &str, deadline: Duration, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let start = Instant::now();
    let mut last_error = None;
    loop {
        match probe().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        if start.elapsed() > deadline {
            match last_error {
                Some(e) => {
                    bail!("timed out after {deadline:?} waiting for {what}; last error: {e:#}")
                }
                None => bail!("timed out after {deadline:?} waiting for {what}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An operator running in this test process, stopped by [`OperatorHandle::stop`] or on drop.
#[derive(Debug)]
pub struct OperatorHandle {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<()>>>,
}

impl OperatorHandle {
    /// Starts the operator with `client` (admin, or the restricted operator identity), reading
    /// AWS through `aws` (moto, or a fault proxy in front of it).
    pub fn start(
        client: kube::Client,
        config: karpenter_health_operator::OperatorConfig,
        aws: karpenter_health_operator::AwsPort,
    ) -> Self {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let task = tokio::spawn(karpenter_health_operator::run_with(
            client, config, aws, shutdown,
        ));
        Self {
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Asks the operator to stop and waits until it has, failing if it returned an error.
    pub async fn stop(mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .context("operator did not stop within 30s")??,
            None => Ok(()),
        }
    }
}

impl Drop for OperatorHandle {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A minimal valid EC2NodeClass named `name`, for tests that need one to exist rather than a
/// healthy AWS side behind it.
pub fn minimal_node_class_yaml(name: &str) -> String {
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

/// Applies every document of a multi-document YAML string by server-side apply, resolving each
/// kind through discovery. Returns the applied objects' names in order.
pub async fn apply_yaml(client: &kube::Client, yaml: &str) -> Result<Vec<String>> {
    use kube::api::{Api, DynamicObject, Patch, PatchParams};
    use serde::Deserialize;
    let mut names = Vec::new();
    for document in serde_yaml::Deserializer::from_str(yaml) {
        let value = serde_json::Value::deserialize(document)?;
        if value.is_null() {
            continue;
        }
        let object: DynamicObject = serde_json::from_value(value.clone())?;
        let types = object
            .types
            .clone()
            .context("object without apiVersion/kind")?;
        let gvk = kube::core::GroupVersionKind::try_from(&types)?;
        let (resource, caps) = kube::discovery::pinned_kind(client, &gvk).await?;
        let name = object
            .metadata
            .name
            .clone()
            .context("object without a name")?;
        let api: Api<DynamicObject> = match (caps.scope, object.metadata.namespace.as_deref()) {
            (kube::discovery::Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(client.clone(), ns, &resource)
            }
            (kube::discovery::Scope::Namespaced, None) => {
                Api::default_namespaced_with(client.clone(), &resource)
            }
            (kube::discovery::Scope::Cluster, _) => Api::all_with(client.clone(), &resource),
        };
        api.patch(
            &name,
            &PatchParams::apply("karpenter-health-e2e").force(),
            &Patch::Apply(&value),
        )
        .await
        .with_context(|| format!("applying {} {name}", gvk.kind))?;
        names.push(name);
    }
    Ok(names)
}

impl Bed {
    /// Restarts the bed's API server (same port, same etcd) with the bed script `script` (by
    /// default this crate's `bed/bed.sh`) and waits until it serves again; returns how long that
    /// took.
    pub async fn restart_api_server(&self, script: Option<&Path>) -> Result<Duration> {
        let default_script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("bed")
            .join("bed.sh");
        let started = Instant::now();
        let output = tokio::process::Command::new("bash")
            .arg(script.unwrap_or(&default_script))
            .arg("restart-apiserver")
            .arg(&self.dir)
            .output()
            .await?;
        if !output.status.success() {
            bail!(
                "restart-apiserver failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(started.elapsed())
    }

    /// The operator's AWS port on this bed's moto server in `region`, with the adapter's
    /// production defaults.
    pub async fn aws_port(&self, region: &str) -> Result<karpenter_health_operator::AwsPort> {
        self.aws_port_at(self.moto_url()?, region).await
    }

    /// The operator's AWS port on any endpoint (a fault proxy in front of moto, which also
    /// answers what moto lacks), with the adapter's production defaults.
    pub async fn aws_port_at(
        &self,
        endpoint: &str,
        region: &str,
    ) -> Result<karpenter_health_operator::AwsPort> {
        let config = self.aws_config_at(endpoint, region).await?;
        Ok(karpenter_health_operator::AwsPort::from_sdk_config(
            &config,
            Default::default(),
        ))
    }
}

/// Applies JSON objects by server-side apply (JSON is YAML).
pub async fn apply_json(client: &kube::Client, objects: &[serde_json::Value]) -> Result<()> {
    let docs: Vec<String> = objects.iter().map(serde_json::Value::to_string).collect();
    apply_yaml(client, &docs.join("\n---\n")).await?;
    Ok(())
}

/// Runs kubectl against the bed as admin and returns its standard output.
pub fn kubectl(bed: &Bed, args: &[&str]) -> Result<String> {
    let output = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(bed.admin_kubeconfig())
        .args(args)
        .output()
        .context("running kubectl")?;
    if !output.status.success() {
        bail!(
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8(output.stdout)?)
}

/// The `karpenter-health` binary built beside this test (`make e2e` builds it first).
pub fn karpenter_health_binary() -> Result<PathBuf> {
    // A test runs as <target>/<profile>/deps/<test>-<hash>; the binary is <target>/<profile>/.
    let exe = std::env::current_exe()?;
    let binary = exe
        .parent()
        .and_then(Path::parent)
        .map(|profile| profile.join("karpenter-health"))
        .context("locating the target directory")?;
    if !binary.exists() {
        bail!(
            "{} is missing: build it with `cargo build -p karpenter-health`",
            binary.display()
        );
    }
    Ok(binary)
}

/// Installs the KarpenterHealth CRD the way `karpenter-health run --install-crd` does.
pub async fn install_health_crd(client: &kube::Client) -> Result<()> {
    karpenter_health_operator::crd::install(client).await?;
    Ok(())
}

/// A plain HTTP/1.0 GET on loopback (the operator's probes and metrics): status code and body.
pub async fn http_get(port: u16, path: &str) -> Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let code = response
        .split_whitespace()
        .nth(1)
        .context("no status line")?
        .parse()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((code, body))
}

/// Deletes every object of `api` matching `labels`, and waits until none is left. A
/// deletecollection of thousands of objects can outlast the API server's request deadline on a
/// loaded machine (a 500 "context deadline exceeded" after part of the work); it is retried,
/// since deleting what is left is always safe, until a listing shows nothing.
pub async fn delete_all_labelled<K>(api: &kube::Api<K>, labels: &str) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    use kube::api::{DeleteParams, ListParams};
    let selector = ListParams::default().labels(labels);
    wait_for(
        &format!("every object labelled {labels} deleted"),
        Duration::from_secs(300),
        || async {
            match api
                .delete_collection(&DeleteParams::default(), &selector)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code >= 500 => {}
                Err(e) => return Err(e.into()),
            }
            let left = api.list_metadata(&selector.clone().limit(1)).await?;
            Ok(left.items.is_empty().then_some(()))
        },
    )
    .await
}

/// A TCP port on loopback that nothing listens on right now.
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

//! The lab: the real Karpenter controller (aws/karpenter-provider-aws `cmd/controller`, built
//! from its Go module by `e2e/bed/build-karpenter.sh`) as a process on the bed, talking to moto
//! through the test's gap proxy, with the node stand-in making the Nodes its instances would.
//! Does IO (processes, the bed, moto).
//!
//! Karpenter is configured the way its Helm chart configures it (the chart's `settings.*` become
//! the env vars of [`Settings::chart_env`]); the same env is written into the test's Karpenter
//! Deployment (scaled to zero), which is where karpenter-health reads Karpenter's settings. What
//! only a process outside the cluster needs (its kubeconfig, the AWS endpoint, ports, no leader
//! election, no IMDS) is added by [`KarpenterProcess::start`].

use crate::Bed;
use crate::fixture::Fixture;
use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::{Event, Pod};
use karpenter_health_api::karpenter::{EC2NodeClass, NodeClaim, NodePool};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The Karpenter release the lab runs unless `KH_KARPENTER_RELEASE` names another (a folder of
/// `e2e/bed/karpenter/`).
pub const DEFAULT_RELEASE: &str = "v1.14.1";
/// The Kubernetes version the lab's EKS cluster reports: the bed's API server's (`/version`,
/// which is what Karpenter reads), so both sides agree.
pub const KUBERNETES_VERSION: &str = "1.34";

/// Whether `release` (`v1.8.6`) is older than `version`.
pub fn release_before(release: &str, version: (u64, u64, u64)) -> bool {
    let mut parts = release
        .trim_start_matches('v')
        .split('.')
        .map(|p| p.parse::<u64>().unwrap_or(0));
    let ours = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    ours < version
}

/// The release under test.
pub fn release() -> String {
    std::env::var("KH_KARPENTER_RELEASE").unwrap_or_else(|_| DEFAULT_RELEASE.to_owned())
}

fn bed_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bed").join(name)
}

/// The controller binary of `release`, built (or found in the cache) by `build-karpenter.sh`.
pub fn binary(release: &str) -> Result<PathBuf> {
    let out = std::process::Command::new("bash")
        .arg(bed_script("build-karpenter.sh"))
        .arg(release)
        .stderr(Stdio::inherit())
        .output()
        .context("running e2e/bed/build-karpenter.sh")?;
    if !out.status.success() {
        bail!("build-karpenter.sh {release} failed");
    }
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

/// Karpenter's settings, as its chart names them.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// `settings.clusterName`.
    pub cluster_name: String,
    /// `settings.clusterEndpoint`.
    pub cluster_endpoint: String,
    /// `settings.interruptionQueue` (the queue must exist before Karpenter starts).
    pub interruption_queue: Option<String>,
    /// `settings.featureGates.*`, as the chart joins them (`ReservedCapacity=true,...`).
    pub feature_gates: Option<String>,
    /// `settings.isolatedVPC`: no Pricing API (moto has none) and no instance-profile garbage
    /// collection (moto's ListInstanceProfiles ignores the path prefix Karpenter lists by, so
    /// Karpenter would delete every other test's profiles).
    pub isolated_vpc: bool,
}

impl Settings {
    /// The env vars the chart's `deployment.yaml` gives the controller container.
    pub fn chart_env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("CLUSTER_NAME".to_owned(), self.cluster_name.clone()),
            ("CLUSTER_ENDPOINT".to_owned(), self.cluster_endpoint.clone()),
            ("ISOLATED_VPC".to_owned(), self.isolated_vpc.to_string()),
        ];
        if let Some(queue) = &self.interruption_queue {
            env.push(("INTERRUPTION_QUEUE".to_owned(), queue.clone()));
        }
        if let Some(gates) = &self.feature_gates {
            env.push(("FEATURE_GATES".to_owned(), gates.clone()));
        }
        env
    }
}

/// How many times [`KarpenterProcess::start`] starts Karpenter before an exit at start fails
/// the test (a Deployment's container would go on restarting, backing off).
const STARTS: u32 = 3;

/// A Karpenter process that exited before it was ready.
struct StartExit {
    status: std::process::ExitStatus,
    log_tail: String,
}

/// A running Karpenter controller; killed on drop.
#[derive(Debug)]
pub struct KarpenterProcess {
    child: tokio::process::Child,
    /// Its log (JSON lines).
    pub log: PathBuf,
    pub release: String,
    pub metrics_port: u16,
}

impl KarpenterProcess {
    /// Starts Karpenter `release` on the bed with `settings`, reading AWS at `aws_url` in
    /// `region`, and waits until it serves its readiness probe. Karpenter panics when a read
    /// it needs at start fails (`lo.Must0` around the first instance-type listing in
    /// `pkg/operator/operator.go`) and relies on its container being restarted; so the lab
    /// starts it again, as the kubelet would, up to [`STARTS`] times, keeping each exited
    /// attempt's log beside the next (`<log>.exit-N`) and saying so on stderr.
    pub async fn start(
        bed: &Bed,
        release: &str,
        aws_url: &str,
        region: &str,
        settings: &Settings,
        log: PathBuf,
    ) -> Result<Self> {
        let mut attempt = 1;
        loop {
            match Self::start_once(bed, release, aws_url, region, settings, log.clone()).await? {
                Ok(process) => return Ok(process),
                Err(exit) if attempt < STARTS => {
                    let mut kept = log.clone().into_os_string();
                    kept.push(format!(".exit-{attempt}"));
                    let kept = PathBuf::from(kept);
                    std::fs::rename(&log, &kept)
                        .with_context(|| format!("keeping {}", log.display()))?;
                    eprintln!(
                        "lab: Karpenter {release} exited at start (attempt {attempt}, {}), \
                         started again as the kubelet would; its log: {}\n{}",
                        exit.status,
                        kept.display(),
                        exit.log_tail
                    );
                    attempt += 1;
                }
                Err(exit) => bail!(
                    "Karpenter {release} exited ({}) at start, {STARTS} times; the last:\n{}",
                    exit.status,
                    exit.log_tail
                ),
            }
        }
    }

    /// One start: the ready process, or how it exited before it was ready.
    async fn start_once(
        bed: &Bed,
        release: &str,
        aws_url: &str,
        region: &str,
        settings: &Settings,
        log: PathBuf,
    ) -> Result<std::result::Result<Self, StartExit>> {
        let binary = binary(release)?;
        let (metrics_port, probe_port) = (crate::free_port()?, crate::free_port()?);
        let stderr =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut command = tokio::process::Command::new(binary);
        command
            .envs(settings.chart_env())
            .env("KUBECONFIG", bed.admin_kubeconfig())
            .env("AWS_REGION", region)
            .env("AWS_ENDPOINT_URL", aws_url)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            // Neither the credential chain nor the region lookup may reach for IMDS.
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("DISABLE_LEADER_ELECTION", "true")
            .env("METRICS_PORT", metrics_port.to_string())
            .env("HEALTH_PROBE_PORT", probe_port.to_string())
            .env("LOG_LEVEL", "debug")
            .stdout(stderr.try_clone()?)
            .stderr(stderr)
            .kill_on_drop(true);
        let child = command.spawn().context("starting Karpenter")?;
        let mut process = Self {
            child,
            log,
            release: release.to_owned(),
            metrics_port,
        };
        let started = Instant::now();
        // Karpenter reads the region's instance types and offerings before it serves anything.
        while started.elapsed() < Duration::from_secs(90) {
            if let Some(status) = process.child.try_wait()? {
                return Ok(Err(StartExit {
                    status,
                    log_tail: process.log_tail(30),
                }));
            }
            if matches!(crate::http_get(probe_port, "/readyz").await, Ok((200, _))) {
                return Ok(Ok(process));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        bail!(
            "Karpenter {release} was not ready within 90 s:\n{}",
            process.log_tail(30)
        )
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Its log lines (JSON) whose `message` is `message`.
    pub fn logged(&self, message: &str) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["message"] == message)
            .collect()
    }

    pub async fn stop(mut self) -> Result<()> {
        self.child.kill().await?;
        Ok(())
    }
}

/// Whether Karpenter's `conditions` (of an EC2NodeClass or a NodeClaim) hold `type_` with
/// `status`.
fn carries(
    conditions: Option<&[karpenter_health_api::karpenter::KarpenterCondition]>,
    type_: &str,
    status: &str,
) -> bool {
    conditions
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == type_ && c.status == status)
}

/// One lab scenario: the test's seeded AWS and cluster (a [`Fixture`] whose EC2NodeClass status
/// is Karpenter's own), the real Karpenter, and the node stand-in.
pub struct Lab {
    pub fx: Fixture,
    pub karpenter: KarpenterProcess,
    settings: Settings,
    stand_in: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lab")
            .field("fx", &self.fx)
            .field("karpenter", &self.karpenter)
            .finish_non_exhaustive()
    }
}

impl Lab {
    /// Seeds `test`'s setup in `region` (nothing of Karpenter's status written by hand), deploys
    /// Karpenter's settings, starts the release under test and the node stand-in.
    pub async fn start(test: &str, region: &str) -> Result<Self> {
        Self::start_with(test, region, |_| {}).await
    }

    /// [`Lab::start`] with the EC2NodeClass's spec changed by `spec` (a merge patch made from
    /// the seeded fixture) before Karpenter first sees it.
    pub async fn start_with_class(
        test: &str,
        region: &str,
        spec: impl FnOnce(&Fixture) -> Value,
    ) -> Result<Self> {
        Self::start_seeded(test, region, |_| {}, Some(spec)).await
    }

    /// [`Lab::start`] with the test's own changes to Karpenter's settings.
    pub async fn start_with(
        test: &str,
        region: &str,
        configure: impl FnOnce(&mut Settings),
    ) -> Result<Self> {
        Self::start_seeded(test, region, configure, None::<fn(&Fixture) -> Value>).await
    }

    async fn start_seeded(
        test: &str,
        region: &str,
        configure: impl FnOnce(&mut Settings),
        spec: Option<impl FnOnce(&Fixture) -> Value>,
    ) -> Result<Self> {
        let release = release();
        let fx = Fixture::seed_for_lab(test, region, release.trim_start_matches('v')).await?;
        if let Some(spec) = spec {
            fx.patch_node_class_spec(spec(&fx)).await?;
        }
        let mut settings = Settings {
            cluster_name: fx.cluster.clone(),
            cluster_endpoint: format!("https://127.0.0.1:{}", fx.bed.var("KH_APISERVER_PORT")?),
            isolated_vpc: true,
            ..Settings::default()
        };
        configure(&mut settings);
        let env = settings.chart_env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        crate::apply_json(
            &fx.admin,
            &[crate::karpenter::deployment(
                &fx.name,
                release.trim_start_matches('v'),
                &env,
            )],
        )
        .await?;
        let log = fx
            .bed
            .dir
            .join("logs")
            .join(format!("karpenter-{}.log", fx.name));
        let karpenter = KarpenterProcess::start(
            &fx.bed,
            &release,
            &fx.proxy.url(),
            &fx.region,
            &settings,
            log,
        )
        .await?;
        eprintln!("lab: Karpenter {release} ready");
        let stand_in = tokio::spawn({
            let client = fx.admin.clone();
            async move {
                if let Err(e) = crate::node_stand_in::run(client).await {
                    eprintln!("node stand-in stopped: {e:#}");
                }
            }
        });
        Ok(Self {
            fx,
            karpenter,
            settings,
            stand_in,
        })
    }

    /// Stops Karpenter and starts it again with the same settings (its caches empty, as after a
    /// Pod restart or an upgrade); its new log is the old one's `.restart.log` sibling.
    pub async fn restart_karpenter(&mut self) -> Result<()> {
        // The old process must be gone before the new one reconciles.
        self.karpenter.child.kill().await?;
        let log = self.karpenter.log.with_extension("restart.log");
        let release = self.karpenter.release.clone();
        self.karpenter = KarpenterProcess::start(
            &self.fx.bed,
            &release,
            &self.fx.proxy.url(),
            &self.fx.region,
            &self.settings,
            log,
        )
        .await?;
        Ok(())
    }

    /// Creates a Pod in the test's namespace that requests `cpu` and selects this test's
    /// NodePool, for the scheduler to find unschedulable and Karpenter to provision for.
    pub async fn workload(&self, name: &str, cpu: &str) -> Result<()> {
        self.pod(name, cpu, json!({"karpenter.sh/nodepool": self.fx.name}))
            .await
    }

    /// Deletes Pod `name` of the test's namespace.
    pub async fn delete_pod(&self, name: &str) -> Result<()> {
        Api::<Pod>::namespaced(self.fx.admin.clone(), &self.fx.name)
            .delete(name, &DeleteParams::default())
            .await?;
        Ok(())
    }

    /// Waits until the scheduler bound Pod `name` to a Node; on timeout the error holds the Pod's
    /// conditions and every Node's taints (what the scheduler weighed).
    pub async fn wait_pod_bound(&self, name: &str, deadline: Duration) -> Result<String> {
        let pods = Api::<Pod>::namespaced(self.fx.admin.clone(), &self.fx.name);
        let bound = crate::wait_for(&format!("Pod {name} bound to a Node"), deadline, || async {
            let pod = pods.get(name).await?;
            Ok(pod.spec.and_then(|s| s.node_name))
        })
        .await;
        if bound.is_err() {
            let pod = pods.get(name).await?;
            let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(self.fx.admin.clone())
                .list(&ListParams::default())
                .await?;
            let taints: Vec<String> = nodes
                .items
                .iter()
                .map(|n| {
                    let keys: Vec<String> = n
                        .spec
                        .iter()
                        .flat_map(|s| s.taints.iter().flatten())
                        .map(|t| format!("{}:{}", t.key, t.effect))
                        .collect();
                    format!(
                        "{} {keys:?}",
                        n.metadata.name.as_deref().unwrap_or_default()
                    )
                })
                .collect();
            let conditions = serde_json::to_string(&pod.status.map(|s| s.conditions))?;
            return bound.with_context(|| {
                format!("Pod {name}: {conditions}; Nodes and taints: {taints:?}")
            });
        }
        bound
    }

    /// A Pod that selects this test's NodePool and the node label `key`=`value`.
    pub async fn workload_selecting(&self, name: &str, key: &str, value: &str) -> Result<()> {
        self.pod(
            name,
            "250m",
            json!({"karpenter.sh/nodepool": self.fx.name, key: value}),
        )
        .await
    }

    async fn pod(&self, name: &str, cpu: &str, node_selector: Value) -> Result<()> {
        let pods: Api<Pod> = Api::namespaced(self.fx.admin.clone(), &self.fx.name);
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": self.fx.name},
            "spec": {
                "nodeSelector": node_selector,
                "automountServiceAccountToken": false,
                "containers": [{"name": "app", "image": "nginx",
                                "resources": {"requests": {"cpu": cpu}}}],
            },
        }))?;
        // Refused (403) until the namespace's default ServiceAccount exists.
        crate::wait_for("the Pod's creation", Duration::from_secs(30), || async {
            match pods.create(&PostParams::default(), &pod).await {
                Ok(_) => Ok(Some(())),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(Some(())),
                Err(e) => Err(e.into()),
            }
        })
        .await
    }

    /// Adds the node label `key`=`value` to this test's NodePool's template (Karpenter turns it
    /// into a requirement of every NodeClaim it makes there).
    pub async fn label_node_pool(&self, key: &str, value: &str) -> Result<()> {
        Api::<NodePool>::all(self.fx.admin.clone())
            .patch(
                &self.fx.name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"spec": {"template": {"metadata": {
                    "labels": {key: value}}}}})),
            )
            .await?;
        Ok(())
    }

    /// Waits for an Event about Pod `pod` of this test with `reason` whose message contains
    /// `contains`.
    pub async fn wait_events_of_pod(
        &self,
        pod: &str,
        reason: &str,
        contains: &str,
    ) -> Result<Value> {
        crate::wait_for(
            &format!("a {reason} Event of Pod {pod} saying {contains:?}"),
            Duration::from_secs(30),
            || async {
                let events = Api::<Event>::namespaced(self.fx.admin.clone(), &self.fx.name)
                    .list(
                        &ListParams::default()
                            .fields(&format!("involvedObject.name={pod},reason={reason}")),
                    )
                    .await?;
                Ok(events
                    .items
                    .into_iter()
                    .find(|e| e.message.as_deref().is_some_and(|m| m.contains(contains)))
                    .map(|e| json!({"reason": e.reason, "message": e.message})))
            },
        )
        .await
    }

    /// Two instances as another cluster's Karpenter launches them, in a VPC of their own: one
    /// tagged with this cluster's name (a cluster sharing it), one with another name. Their ids.
    pub async fn other_clusters_instances(&self) -> Result<(String, String)> {
        let aws = &self.fx.aws;
        let vpc = aws.vpc("10.90.0.0/16", &[]).await?;
        let subnet = aws.subnet(&vpc, "10.90.1.0/24", None, &[]).await?;
        let other = format!("{}-elsewhere", self.fx.cluster);
        let mut ids = Vec::new();
        for cluster in [&self.fx.cluster, &other] {
            let owned = format!("kubernetes.io/cluster/{cluster}");
            let launched = aws
                .instances(
                    &subnet,
                    1,
                    &[
                        ("eks:eks-cluster-name", cluster),
                        (&owned, "owned"),
                        ("karpenter.sh/nodepool", "default"),
                        ("karpenter.k8s.aws/ec2nodeclass", "default"),
                    ],
                )
                .await?;
            ids.push(
                launched
                    .into_iter()
                    .next()
                    .context("no instance launched")?,
            );
        }
        Ok((ids[0].clone(), ids[1].clone()))
    }

    /// The instances Karpenter launched for this test's NodePool that still live.
    pub async fn launched_instances(&self) -> Result<Vec<String>> {
        self.fx
            .aws
            .live_instances_tagged("karpenter.sh/nodepool", &self.fx.name)
            .await
    }

    /// The EC2 state of instance `id`.
    pub async fn instance_state(&self, id: &str) -> Result<String> {
        self.fx.aws.instance_state(id).await
    }

    /// Waits until instance `id` is in one of `states`.
    pub async fn wait_instance_state(
        &self,
        id: &str,
        states: &[&str],
        deadline: Duration,
    ) -> Result<()> {
        crate::wait_for(
            &format!("instance {id} in {states:?}"),
            deadline,
            || async {
                let state = self.instance_state(id).await?;
                Ok(states.contains(&state.as_str()).then_some(()))
            },
        )
        .await
    }

    /// Deletes the NodeClaims of this test's NodePool (as a user clears claims that never
    /// launched: Karpenter keeps a Pod's claim for its 5-minute launch timeout otherwise).
    pub async fn delete_node_claims(&self) -> Result<()> {
        let api = Api::<NodeClaim>::all(self.fx.admin.clone());
        for claim in self.node_claims().await? {
            if let Some(name) = claim.metadata.name {
                let _ = api.delete(&name, &DeleteParams::default()).await;
            }
        }
        Ok(())
    }

    /// The NodeClaims Karpenter made for this test's NodePool.
    pub async fn node_claims(&self) -> Result<Vec<NodeClaim>> {
        Ok(Api::<NodeClaim>::all(self.fx.admin.clone())
            .list(&ListParams::default().labels(&format!("karpenter.sh/nodepool={}", self.fx.name)))
            .await?
            .items)
    }

    /// Waits until Karpenter launched a NodeClaim for this test's NodePool and it is
    /// `condition` (`Launched`, `Registered`, `Initialized`), and returns it.
    pub async fn wait_node_claim(&self, condition: &str, deadline: Duration) -> Result<NodeClaim> {
        let what = format!("a NodeClaim of NodePool {} {condition}", self.fx.name);
        let started = Instant::now();
        let found = crate::wait_for(&what, deadline, || async {
            Ok(self.node_claims().await?.into_iter().find(|claim| {
                claim
                    .status
                    .iter()
                    .flat_map(|s| s.conditions.iter())
                    .any(|c| c.type_ == condition && c.status == "True")
            }))
        })
        .await
        .with_context(|| format!("Karpenter's log ends:\n{}", self.karpenter.log_tail(15)))?;
        // What the lab's deadlines are measured from (`cargo test ... -- --nocapture`).
        eprintln!("lab: {what} after {:.1} s", started.elapsed().as_secs_f64());
        Ok(found)
    }

    /// Waits until Karpenter logged `message` (a JSON log line's `message`) for this test's
    /// objects (`fields` all present in the line's text: a NodePool's name, a Pod's), and
    /// returns the line.
    pub async fn wait_logged(
        &self,
        message: &str,
        fields: &[&str],
        deadline: Duration,
    ) -> Result<Value> {
        let started = Instant::now();
        let what = format!("Karpenter to log {message:?} {fields:?}");
        let line = crate::wait_for(&what, deadline, || async {
            Ok(self.karpenter.logged(message).into_iter().find(|line| {
                let text = line.to_string();
                fields.iter().all(|f| text.contains(f))
            }))
        })
        .await?;
        eprintln!("lab: {what} after {:.1} s", started.elapsed().as_secs_f64());
        Ok(line)
    }

    /// This test's EC2NodeClass as Karpenter left it.
    pub async fn node_class(&self) -> Result<EC2NodeClass> {
        Ok(Api::<EC2NodeClass>::all(self.fx.admin.clone())
            .get(&self.fx.name)
            .await?)
    }

    /// Waits until this test's EC2NodeClass carries Karpenter's condition `type_` with `status`.
    pub async fn karpenter_condition(&self, type_: &str, status: &str) -> Result<()> {
        crate::wait_for(
            &format!("Karpenter's {type_}={status} on the EC2NodeClass"),
            Duration::from_secs(60),
            || async {
                let class = self.node_class().await?;
                let conditions = class.status.as_ref().map(|s| s.conditions.as_slice());
                Ok(carries(conditions, type_, status).then_some(()))
            },
        )
        .await
    }

    /// Waits until NodeClaim `name` carries Karpenter's condition `type_` with `status`.
    pub async fn karpenter_condition_of(
        &self,
        name: &str,
        type_: &str,
        status: &str,
    ) -> Result<()> {
        crate::wait_for(
            &format!("Karpenter's {type_}={status} on NodeClaim {name}"),
            Duration::from_secs(60),
            || async {
                let claim = Api::<NodeClaim>::all(self.fx.admin.clone())
                    .get(name)
                    .await?;
                let conditions = claim.status.as_ref().map(|s| s.conditions.as_slice());
                Ok(carries(conditions, type_, status).then_some(()))
            },
        )
        .await
    }

    /// The Events Karpenter wrote about object `name` with `reason`.
    pub async fn events(&self, name: &str, reason: &str) -> Result<Vec<Event>> {
        Ok(Api::<Event>::all(self.fx.admin.clone())
            .list(
                &ListParams::default()
                    .fields(&format!("involvedObject.name={name},reason={reason}")),
            )
            .await?
            .items)
    }

    /// Deletes the test's NodePool and waits (up to a minute) for Karpenter to terminate its
    /// NodeClaims, so no finalizer outlives the controller; then stops Karpenter and the
    /// stand-in and tears the fixture down. The body's error wins.
    pub async fn finish(self, outcome: Result<()>) -> Result<()> {
        let pools: Api<NodePool> = Api::all(self.fx.admin.clone());
        let _ = pools.delete(&self.fx.name, &DeleteParams::default()).await;
        let drained = crate::wait_for(
            "Karpenter to terminate the test's NodeClaims",
            Duration::from_secs(60),
            || async { Ok(self.node_claims().await?.is_empty().then_some(())) },
        )
        .await;
        let _ = self.karpenter.stop().await;
        self.stand_in.abort();
        // The gaps the lab leaves open, from what Karpenter asked and moto could not serve.
        for ((service, operation), (count, status)) in self.fx.proxy.unserved() {
            eprintln!("lab: moto could not serve {service} {operation} ({count}×, last {status})");
        }
        let outcome = outcome.and(drained);
        self.fx.finish(outcome).await
    }
}

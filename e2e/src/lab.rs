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

use crate::fixture::Fixture;
use anyhow::{Context as _, Result};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

mod controller;
mod instances;
mod logs;
mod objects;
pub use controller::*;
pub use objects::{KarpenterObject, carries, condition};
use objects::{TeardownOnDrop, karpenter_objects, release_node_pools};

/// How long Karpenter may take from a Pod marked Unschedulable to a NodeClaim that is Initialized
/// on the bed: its batching window (1 s idle, 10 s at most), the launch through the gap proxy,
/// registration and initialization by the stand-in. Measured 6-14 s on one bed alone; `make
/// test` runs the lab on five beds side by side on 2 cores, where a first launch was seen to take
/// over 60 s. Only ever waited for, never slept: a generous bound costs nothing when it passes.
pub const LAUNCH: Duration = Duration::from_secs(120);

/// Three of Karpenter's provisioner passes: it runs at least every 10 s while Pods wait
/// (kubernetes-sigs/karpenter `pkg/controllers/provisioning/provisioner.go`), and logs what it
/// skips ("ignoring nodepool, not ready") on each. Also slept for, to show that nothing happens.
pub const PROVISIONER_PASS: Duration = Duration::from_secs(30);

/// One lab scenario: the test's seeded AWS and cluster (a [`Fixture`] whose EC2NodeClass status
/// is Karpenter's own), the real Karpenter, and the node stand-in.
pub struct Lab {
    /// First, so that it is dropped while Karpenter still runs: a Lab dropped without
    /// [`Lab::finish`] (an assertion that panicked) releases its Karpenter objects anyway.
    teardown: TeardownOnDrop,
    pub fx: Fixture,
    pub karpenter: KarpenterProcess,
    settings: Settings,
    stand_in: tokio::task::JoinHandle<()>,
    /// Why the stand-in let no kubelet in, by instance, in the `authenticate` mode.
    pub refusals: crate::node_stand_in::Refusals,
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

    /// [`Lab::start`] with both: Karpenter's settings changed by `configure` and the class's
    /// spec by `spec`.
    pub async fn start_seeded_with(
        test: &str,
        region: &str,
        configure: impl FnOnce(&mut Settings),
        spec: impl FnOnce(&Fixture) -> Value,
    ) -> Result<Self> {
        Self::start_seeded(test, region, configure, Some(spec)).await
    }

    async fn start_seeded(
        test: &str,
        region: &str,
        configure: impl FnOnce(&mut Settings),
        spec: Option<impl FnOnce(&Fixture) -> Value>,
    ) -> Result<Self> {
        let release = release();
        let fx = Fixture::seed_for_lab(
            test,
            region,
            release.trim_start_matches('v'),
            KUBERNETES_VERSION,
        )
        .await?;
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
        let authentication =
            crate::node_authentication::NodeAuthentication::new(&fx.bed, &fx.region).await?;
        let refusals = crate::node_stand_in::Refusals::default();
        let stand_in = tokio::spawn({
            let client = fx.admin.clone();
            let refusals = refusals.clone();
            async move {
                if let Err(e) =
                    crate::node_stand_in::run(client, Some(authentication), refusals).await
                {
                    eprintln!("node stand-in stopped: {e:#}");
                }
            }
        });
        Ok(Self {
            teardown: TeardownOnDrop {
                kubeconfig: Some(fx.bed.admin_kubeconfig()),
                class: fx.name.clone(),
            },
            fx,
            karpenter,
            settings,
            stand_in,
            refusals,
        })
    }

    /// Changes Karpenter's settings as a user changes the chart's values: the Deployment's env
    /// (which karpenter-health reads) and the controller, restarted with them.
    pub async fn reconfigure_karpenter(
        &mut self,
        configure: impl FnOnce(&mut Settings),
    ) -> Result<()> {
        configure(&mut self.settings);
        let env = self.settings.chart_env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        crate::apply_json(
            &self.fx.admin,
            &[crate::karpenter::deployment(
                &self.fx.name,
                self.karpenter.release.trim_start_matches('v'),
                &env,
            )],
        )
        .await?;
        self.restart_karpenter().await
    }

    /// Stops Karpenter and starts it again with the same settings (its caches empty, as after a
    /// Pod restart or an upgrade); its new log is the old one's `.restart.log` sibling.
    pub async fn restart_karpenter(&mut self) -> Result<()> {
        // The old process must be gone before the new one reconciles.
        self.karpenter.kill().await?;
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

    /// Creates a Pod in the test's namespace that requests `cpu` and has `node_selector` (no
    /// NodePool pinned unless it says so).
    pub async fn workload_with(&self, name: &str, cpu: &str, node_selector: Value) -> Result<()> {
        self.pod(name, cpu, node_selector).await
    }

    /// Creates a second NodePool of this test's EC2NodeClass, `<test>-<suffix>`: on-demand
    /// m5.large, no limits, with `template` merged into its template (labels, taints). `finish`
    /// deletes it with the first.
    pub async fn add_node_pool(&self, suffix: &str, template: Value) -> Result<String> {
        let name = format!("{}-{suffix}", self.fx.name);
        let mut pool = json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": name},
            "spec": {"template": {"metadata": {}, "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": self.fx.name},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                ],
            }}},
        });
        if let (Some(into), Value::Object(extra)) = (pool.pointer_mut("/spec/template"), template) {
            for (section, fields) in extra {
                if let (Some(Value::Object(to)), Value::Object(fields)) =
                    (into.get_mut(&section), fields)
                {
                    to.extend(fields);
                }
            }
        }
        crate::apply_json(&self.fx.admin, &[pool]).await?;
        Ok(name)
    }

    /// Merges `patch` into the test's NodePool.
    pub async fn patch_node_pool(&self, patch: Value) -> Result<()> {
        karpenter_objects(&self.fx.admin, "NodePool")
            .patch(&self.fx.name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        Ok(())
    }

    /// Steers the node stand-in for the test's NodePool (the modes of
    /// [`crate::node_stand_in`]); `None`: its default, Nodes that join and agents that run.
    pub async fn steer_nodes(&self, mode: Option<&str>) -> Result<()> {
        self.patch_node_pool(json!({"metadata": {"annotations": {
            crate::node_stand_in::NODES_ANNOTATION: mode,
        }}}))
        .await
    }

    /// The healthy end of a twin whose node agents were held back: they run (the stand-in's
    /// default), the one NodeClaim initializes, Pod `pod` is bound to its node and every
    /// condition turns True (`setup` says with what), and no other NodeClaim was launched.
    pub async fn agents_run_and_pod_binds(
        &self,
        pod: &str,
        setup: &str,
        deadline: Duration,
    ) -> Result<()> {
        self.steer_nodes(None).await?;
        self.wait_node_claim("Initialized", deadline).await?;
        self.wait_pod_bound(pod, deadline).await?;
        self.fx.wait_healthy(setup).await?;
        let claims = self.node_claims().await?.len();
        anyhow::ensure!(claims == 1, "{claims} NodeClaims for one Pod");
        Ok(())
    }

    /// Lets the test's NodePool launch on-demand nodes of `types` only.
    pub async fn only_instance_types(&self, types: &[&str]) -> Result<()> {
        self.patch_node_pool(json!({"spec": {"template": {"spec": {"requirements": [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types},
        ]}}}}))
        .await
    }

    /// The Node the AWS Load Balancer Controller's live Pod
    /// ([`crate::fixture::Fixture::install_load_balancer_controller`]) is bound to, if it is.
    pub async fn controller_pod_node(&self) -> Result<Option<String>> {
        let pods = Api::<Pod>::namespaced(self.fx.admin.clone(), "kube-system")
            .list(
                &ListParams::default()
                    .labels("app.kubernetes.io/name=aws-load-balancer-controller"),
            )
            .await?;
        Ok(pods
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .find_map(|p| p.spec.and_then(|s| s.node_name)))
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
        karpenter_objects(&self.fx.admin, "NodePool")
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

    /// Deletes the NodeClaims of this test's NodePool (as a user clears claims that never
    /// launched: Karpenter keeps a Pod's claim for its 5-minute launch timeout otherwise).
    pub async fn delete_node_claims(&self) -> Result<()> {
        let api = karpenter_objects(&self.fx.admin, "NodeClaim");
        for claim in self.node_claims().await? {
            if let Some(name) = claim.metadata.name {
                let _ = api.delete(&name, &DeleteParams::default()).await;
            }
        }
        Ok(())
    }

    /// Lets the test's NodePool launch spot nodes only (of the architecture it allows).
    pub async fn spot_only(&self) -> Result<()> {
        self.patch_node_pool(json!({"spec": {"template": {"spec": {"requirements": [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        ]}}}}))
        .await
    }

    /// The NodeClaims Karpenter made for this test's NodePool.
    pub async fn node_claims(&self) -> Result<Vec<KarpenterObject>> {
        Ok(karpenter_objects(&self.fx.admin, "NodeClaim")
            .list(&ListParams::default().labels(&format!("karpenter.sh/nodepool={}", self.fx.name)))
            .await?
            .items)
    }

    /// Waits until Karpenter launched a NodeClaim for this test's NodePool and it is
    /// `condition` (`Launched`, `Registered`, `Initialized`), and returns it.
    pub async fn wait_node_claim(
        &self,
        condition: &str,
        deadline: Duration,
    ) -> Result<KarpenterObject> {
        let what = format!("a NodeClaim of NodePool {} {condition}", self.fx.name);
        let started = Instant::now();
        let found = crate::wait_for(&what, deadline, || async {
            Ok(self
                .node_claims()
                .await?
                .into_iter()
                .find(|claim| carries(claim, condition, "True")))
        })
        .await
        .with_context(|| format!("Karpenter's log ends:\n{}", self.karpenter.log_tail(15)))?;
        // What the lab's deadlines are measured from (`cargo test ... -- --nocapture`).
        eprintln!("lab: {what} after {:.1} s", started.elapsed().as_secs_f64());
        Ok(found)
    }

    /// This test's EC2NodeClass as Karpenter left it.
    pub async fn node_class(&self) -> Result<KarpenterObject> {
        let resource = kube::api::ApiResource {
            group: "karpenter.k8s.aws".into(),
            version: "v1".into(),
            api_version: "karpenter.k8s.aws/v1".into(),
            kind: "EC2NodeClass".into(),
            plural: "ec2nodeclasses".into(),
        };
        Ok(
            Api::<KarpenterObject>::all_with(self.fx.admin.clone(), &resource)
                .get(&self.fx.name)
                .await?,
        )
    }

    /// Waits until this test's EC2NodeClass carries Karpenter's condition `type_` with `status`.
    pub async fn karpenter_condition(&self, type_: &str, status: &str) -> Result<()> {
        crate::wait_for(
            &format!("Karpenter's {type_}={status} on the EC2NodeClass"),
            Duration::from_secs(60),
            || async { Ok(carries(&self.node_class().await?, type_, status).then_some(())) },
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
                let claim = karpenter_objects(&self.fx.admin, "NodeClaim")
                    .get(name)
                    .await?;
                Ok(carries(&claim, type_, status).then_some(()))
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
    pub async fn finish(mut self, outcome: Result<()>) -> Result<()> {
        self.teardown.kubeconfig = None;
        let drained = release_node_pools(&self.fx.admin, &self.fx.name).await;
        if self.karpenter.exits_at_start > 0 {
            // A start-up gap of the bed (a read Karpenter panics on) would hide behind the
            // restart: said in every test's output, with the kept logs.
            eprintln!(
                "lab: Karpenter {} exited {} time(s) at start before it was ready (logs: {}.exit-N)",
                self.karpenter.release,
                self.karpenter.exits_at_start,
                self.karpenter.log.display()
            );
        }
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

/// The instance id of a launched NodeClaim (its `status.providerID`, `aws:///<zone>/<id>`).
pub fn launched_instance_of(claim: &KarpenterObject) -> Result<String> {
    claim.data["status"]["providerID"]
        .as_str()
        .and_then(|p| p.rsplit('/').next())
        .map(str::to_owned)
        .context("the NodeClaim has no providerID")
}

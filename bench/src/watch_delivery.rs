//! The API server's own watch delivery on this bed, the floor under change-to-status latency:
//! writes of a probe ConfigMap timed until the bench's own ConfigMap watch delivers them. Does IO
//! (API server).

use crate::results::WatchProbe;
use crate::state::{Bench, jitter, ms, signed_ms};
use crate::timeline::Phase;
use anyhow::Result;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use std::time::{Duration, Instant};

impl Bench {
    async fn watch_probe(&self, i: usize) -> Result<WatchProbe> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), "kube-system");
        let value = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kh-bench-probe", "namespace": "kube-system"},
            "data": {"i": i.to_string()},
        });
        let start = Instant::now();
        let cm = api
            .patch(
                "kh-bench-probe",
                &PatchParams::apply("karpenter-health-bench").force(),
                &Patch::Apply(value),
            )
            .await?;
        let returned = Instant::now();
        let rv = cm.resource_version().unwrap_or_default();
        let arrived = self
            .config_maps
            .arrival("kh-bench-probe", &rv, Duration::from_secs(10))
            .await?;
        Ok(WatchProbe {
            write_rtt_ms: ms(returned - start),
            from_return_ms: signed_ms(arrived, returned),
            from_start_ms: signed_ms(arrived, start),
        })
    }

    /// `--watch-probes` probes, jittered apart.
    pub async fn watch_probes(&self) -> Result<Vec<WatchProbe>> {
        let mut probes = Vec::new();
        let from = Instant::now();
        for i in 0..self.args.watch_probes {
            probes.push(self.watch_probe(i).await?);
            tokio::time::sleep(jitter(i, 50, 150)).await;
        }
        self.timeline
            .mark(Phase::WatchProbes, "watch probes", from, Instant::now());
        Ok(probes)
    }
}

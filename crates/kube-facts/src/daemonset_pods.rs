//! Reads the requests of a DaemonSet's newest Pod, which Karpenter counts in place of its
//! template's (kubernetes-sigs/karpenter `provisioning/provisioner.go` `getDaemonSetPods`: the
//! cluster state's newest Pod of the DaemonSet, `state/cluster.go` `UpdateDaemonSet`), where an
//! admission webhook (the Vertical Pod Autoscaler) may have given them other requests than the
//! template's. Only the DaemonSets a verdict hangs on are read (the operator passes those its
//! findings name), one list of the DaemonSet's Pods each (label selector, served from the API
//! server's watch cache), so a cluster whose DaemonSets leave room costs no call. Does IO
//! (`read_newest`, [`DaemonSetPodReads::refresh`]); choosing the newest Pod is pure.

use crate::api_errors::cause_of_api_error;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use karpenter_health_checks::facts::Observed;
use kube::api::ListParams;
use kube::core::Selector;
use kube::{Api, Client, ResourceExt};
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// The most DaemonSets read per round; a verdict names at most eight.
pub const MAX_DAEMONSETS: usize = 32;

/// What was read of one DaemonSet's Pods: the CPU (millicores) and memory (bytes) requests of
/// its newest, `Absent` when it has none.
pub type NewestPod = Observed<(u64, u64)>;

#[derive(Debug, Default)]
struct Held {
    by_daemonset: BTreeMap<String, NewestPod>,
    /// Bumped on every change: the cluster-wide facts are derived anew when it moves.
    version: u64,
}

/// The newest Pods read, by DaemonSet (`namespace/name`); shared by the refresher and every
/// snapshot.
#[derive(Clone, Debug, Default)]
pub struct DaemonSetPodReads(Arc<RwLock<Held>>);

impl DaemonSetPodReads {
    /// Reads held for a one-shot evaluation.
    pub fn listed(reads: BTreeMap<String, NewestPod>) -> Self {
        Self(Arc::new(RwLock::new(Held {
            by_daemonset: reads,
            version: 1,
        })))
    }

    fn held(&self) -> std::sync::RwLockReadGuard<'_, Held> {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What was read of the DaemonSet `namespace/name`, if it was.
    pub fn of(&self, daemonset: &str) -> Option<NewestPod> {
        self.held().by_daemonset.get(daemonset).cloned()
    }

    /// A number that moves whenever what is held changes.
    pub fn version(&self) -> u64 {
        self.held().version
    }

    /// Whether any read is held (then it is refreshed even while no verdict names a DaemonSet).
    pub fn holds_any(&self) -> bool {
        !self.held().by_daemonset.is_empty()
    }

    /// The DaemonSets whose held read is what keeps their verdict away: a newest Pod asking
    /// other than its template (a Vertical Pod Autoscaler's), so a verdict no longer names the
    /// DaemonSet; dropping the read would count the template again and bring the finding back,
    /// once every refresh. They stay read while they exist.
    fn still_deciding(&self, daemonsets: &[Arc<DaemonSet>]) -> Vec<String> {
        let held = self.held();
        daemonsets
            .iter()
            .filter(|d| {
                let template = d
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.spec.as_ref())
                    .map(requests_of);
                matches!(held.by_daemonset.get(&key_of(d)),
                         Some(Observed::Found(read)) if Some(*read) != template)
            })
            .map(|d| key_of(d))
            .collect()
    }

    /// Reads the newest Pod of each of `wanted` (`namespace/name`) among `daemonsets`, and of
    /// each DaemonSet whose held read still decides its verdict, replacing what was held (any
    /// other DaemonSet is dropped); returns the DaemonSets whose answer changed.
    pub async fn refresh(
        &self,
        client: &Client,
        daemonsets: &[Arc<DaemonSet>],
        wanted: &[String],
    ) -> Vec<String> {
        let mut wanted = wanted.to_vec();
        wanted.extend(self.still_deciding(daemonsets));
        let read = read_all(client, daemonsets, &wanted).await;
        let mut held = self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let changed: Vec<String> = held
            .by_daemonset
            .keys()
            .chain(read.keys())
            .filter(|k| held.by_daemonset.get(*k) != read.get(*k))
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if !changed.is_empty() {
            held.by_daemonset = read;
            held.version += 1;
        }
        changed
    }
}

fn key_of(daemonset: &DaemonSet) -> String {
    format!(
        "{}/{}",
        daemonset.namespace().unwrap_or_default(),
        daemonset.name_any()
    )
}

/// Reads the newest Pod of each of `wanted` among `daemonsets`, up to [`MAX_DAEMONSETS`].
pub async fn read_all(
    client: &Client,
    daemonsets: &[Arc<DaemonSet>],
    wanted: &[String],
) -> BTreeMap<String, NewestPod> {
    let mut read = BTreeMap::new();
    for daemonset in daemonsets
        .iter()
        .filter(|d| wanted.contains(&key_of(d)))
        .take(MAX_DAEMONSETS)
    {
        read.insert(key_of(daemonset), read_newest(client, daemonset).await);
    }
    read
}

/// The requests of `daemonset`'s newest Pod, from a list of the Pods its selector matches in its
/// namespace (served from the watch cache: Karpenter's own view lags as much).
pub async fn read_newest(client: &Client, daemonset: &DaemonSet) -> NewestPod {
    let key = key_of(daemonset);
    let Some(selector) = daemonset
        .spec
        .as_ref()
        .and_then(|s| Selector::try_from(s.selector.clone()).ok())
    else {
        return Observed::not_observed(format!(
            "DaemonSet {key} has no selector to list its Pods by"
        ));
    };
    let params = ListParams::default().labels_from(&selector).match_any();
    let api: Api<Pod> = Api::namespaced(client.clone(), &daemonset.namespace().unwrap_or_default());
    match api.list(&params).await {
        Ok(list) => newest_of(daemonset, &list.items),
        Err(error) => Observed::unknown(
            cause_of_api_error(&error),
            format!("listing the Pods of DaemonSet {key}: {error}"),
        ),
    }
}

/// The requests of the newest of `pods` that `daemonset` controls (Karpenter's `IsControlledBy`
/// and greatest `creationTimestamp`), `Absent` when it controls none.
pub fn newest_of(daemonset: &DaemonSet, pods: &[Pod]) -> NewestPod {
    let uid = daemonset.uid();
    let controlled = |pod: &&Pod| {
        pod.owner_references().iter().any(|o| {
            o.controller == Some(true)
                && o.kind == "DaemonSet"
                && o.name == daemonset.name_any()
                && uid.as_ref().is_none_or(|u| *u == o.uid)
        })
    };
    let Some(newest) = pods
        .iter()
        .filter(controlled)
        .max_by_key(|p| p.creation_timestamp().map(|t| t.0))
    else {
        return Observed::Absent;
    };
    Observed::Found(newest.spec.as_ref().map(requests_of).unwrap_or_default())
}

/// A Pod's CPU (millicores) and memory (bytes) requests as Karpenter sums them.
fn requests_of(spec: &k8s_openapi::api::core::v1::PodSpec) -> (u64, u64) {
    let (cpu, memory) = karpenter_health_checks::pod_template::pod_requests(spec);
    ((cpu * 1000.0).round() as u64, memory.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn daemonset() -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"namespace": "monitoring", "name": "agent", "uid": "ds-1"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": []}}},
        }))
        .unwrap()
    }

    fn pod(name: &str, created: &str, cpu: &str, owner: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"namespace": "monitoring", "name": name, "creationTimestamp": created,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                              "name": "agent", "uid": owner, "controller": true}]},
            "spec": {"containers": [{"name": "agent", "resources": {"requests": {"cpu": cpu}}}]},
        }))
        .unwrap()
    }

    #[test]
    fn the_newest_pod_the_daemonset_controls_is_what_karpenter_counts() {
        let pods = [
            pod("agent-old", "2026-01-01T00:00:00Z", "2", "ds-1"),
            // A VPA lowered the newest Pod's request.
            pod("agent-new", "2026-01-02T00:00:00Z", "250m", "ds-1"),
            // Another DaemonSet of the same name, deleted and made anew: not this one's.
            pod("agent-other", "2026-01-03T00:00:00Z", "4", "ds-0"),
        ];
        assert_eq!(newest_of(&daemonset(), &pods), Observed::Found((250, 0)));
        assert_eq!(newest_of(&daemonset(), &[]), Observed::Absent);
    }

    #[test]
    fn a_read_asking_other_than_the_template_is_kept_while_the_daemonset_exists() {
        let mut ds = daemonset();
        let template = ds.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
        template.containers = pod("t", "2026-01-01T00:00:00Z", "2", "ds-1")
            .spec
            .unwrap()
            .containers;
        let ds = [Arc::new(ds)];
        let held = |read| {
            DaemonSetPodReads::listed(BTreeMap::from([("monitoring/agent".to_owned(), read)]))
        };
        // A VPA lowered the Pod's request: dropping the read would bring the finding back.
        let lowered = held(Observed::Found((250, 0)));
        assert_eq!(lowered.still_deciding(&ds), ["monitoring/agent"]);
        assert!(
            lowered.still_deciding(&[]).is_empty(),
            "gone with the DaemonSet"
        );
        // As the template asks, or no Pod: the template is what is counted anyway.
        assert!(
            held(Observed::Found((2000, 0)))
                .still_deciding(&ds)
                .is_empty()
        );
        assert!(held(Observed::Absent).still_deciding(&ds).is_empty());
    }
}

//! Every KarpenterHealth status the API server held for one object while a test ran, from a
//! watch (a watch delivers every write), so a test can prove a condition never flipped. Does IO
//! (watches the API server from a background task).

use futures::StreamExt;
use karpenter_health_api::{KarpenterHealth, KarpenterHealthStatus};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use std::sync::{Arc, Mutex, PoisonError};

/// The resource version of each write delivered, with its status if it had one.
type Writes = Arc<Mutex<Vec<(String, Option<KarpenterHealthStatus>)>>>;

#[derive(Debug)]
pub struct StatusLog {
    seen: Writes,
    api: Api<KarpenterHealth>,
    name: String,
    task: tokio::task::JoinHandle<()>,
}

/// How long `stop` waits for the watch to deliver the write the API server holds now.
const CATCH_UP: std::time::Duration = std::time::Duration::from_secs(20);

impl StatusLog {
    /// Starts recording the statuses of KarpenterHealth `name`.
    pub fn start(client: &kube::Client, name: &str) -> Self {
        let seen: Writes = Arc::default();
        let api: Api<KarpenterHealth> = Api::all(client.clone());
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let sink = seen.clone();
        let watched = api.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher(watched, config)
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(event) = stream.next().await {
                if let Ok(health) = event {
                    let version = health.metadata.resource_version.unwrap_or_default();
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((version, health.status));
                }
            }
        });
        Self {
            seen,
            api,
            name: name.to_owned(),
            task,
        }
    }

    /// Stops recording and returns every status seen, oldest first. A test usually stops right
    /// after its own read saw a status, which this watch may not have delivered yet: it first
    /// waits (up to `CATCH_UP`) until the watch has delivered the write the API server holds now.
    pub async fn stop(self) -> Vec<KarpenterHealthStatus> {
        if let Ok(Some(now)) = self.api.get_opt(&self.name).await
            && let Some(version) = now.metadata.resource_version
        {
            let deadline = tokio::time::Instant::now() + CATCH_UP;
            while !self.delivered(&version) && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
        self.task.abort();
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(PoisonError::into_inner))
            .into_iter()
            .filter_map(|(_, status)| status)
            .collect()
    }

    /// Stops recording and fails if `ty` was False in any status seen: the setups the log
    /// covered all work.
    pub async fn assert_never_false(self, ty: karpenter_health_api::ConditionType) {
        for held in self.stop().await {
            let c = held.condition(ty);
            assert!(
                c.is_none_or(|c| c.status != "False"),
                "{ty} False on a setup that works: {c:?}"
            );
        }
    }

    fn delivered(&self, version: &str) -> bool {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|(seen, _)| seen == version)
    }
}

/// The statuses held from the first one in which `ty` is Unknown on: a fault's first status may
/// still carry the verdict from before it, and from the first Unknown on none may be False.
/// `None` when `ty` was never Unknown.
pub fn from_first_unknown(
    held: &[KarpenterHealthStatus],
    ty: karpenter_health_api::ConditionType,
) -> Option<&[KarpenterHealthStatus]> {
    let first = held
        .iter()
        .position(|s| s.condition(ty).is_some_and(|c| c.status == "Unknown"))?;
    Some(&held[first..])
}

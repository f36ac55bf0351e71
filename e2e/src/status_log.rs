//! Every KarpenterHealth status the API server held for one object while a test ran, from a
//! watch (a watch delivers every write), so a test can prove a condition never flipped. Does IO
//! (watches the API server from a background task).

use futures::StreamExt;
use karpenter_health_api::{KarpenterHealth, KarpenterHealthStatus};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use std::sync::{Arc, Mutex, PoisonError};

#[derive(Debug)]
pub struct StatusLog {
    seen: Arc<Mutex<Vec<KarpenterHealthStatus>>>,
    task: tokio::task::JoinHandle<()>,
}

impl StatusLog {
    /// Starts recording the statuses of KarpenterHealth `name`.
    pub fn start(client: &kube::Client, name: &str) -> Self {
        let seen: Arc<Mutex<Vec<KarpenterHealthStatus>>> = Arc::default();
        let api: Api<KarpenterHealth> = Api::all(client.clone());
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let sink = seen.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, config)
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(event) = stream.next().await {
                if let Ok(health) = event
                    && let Some(status) = health.status
                {
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(status);
                }
            }
        });
        Self { seen, task }
    }

    /// Stops recording and returns every status seen, oldest first.
    pub fn stop(self) -> Vec<KarpenterHealthStatus> {
        self.task.abort();
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(PoisonError::into_inner))
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

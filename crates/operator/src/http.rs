//! The operator's HTTP endpoints: `/metrics` (Prometheus text), `/livez` (the process answers;
//! never touches the API server or AWS, so an outage cannot cause restart loops) and `/readyz`
//! (the CRDs are served and this replica's watch caches have synced; the reason when not).
//! Does IO (serves HTTP).

use crate::metrics::Metrics;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use std::net::SocketAddr;
use std::sync::Arc;

/// What the endpoints read.
#[derive(Clone)]
pub struct Probes {
    pub metrics: Arc<Metrics>,
    /// Whether the operator is ready to serve (CRDs served, caches synced), else why not.
    pub ready: Arc<dyn Fn() -> Result<(), String> + Send + Sync>,
    /// Refreshes counters kept elsewhere (the AWS adapter's) before a scrape.
    pub before_scrape: Arc<dyn Fn(&Metrics) + Send + Sync>,
}

impl std::fmt::Debug for Probes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probes").finish_non_exhaustive()
    }
}

async fn metrics(State(probes): State<Probes>) -> impl IntoResponse {
    (probes.before_scrape)(&probes.metrics);
    (
        [(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        probes.metrics.encode(),
    )
}

async fn livez() -> &'static str {
    "ok"
}

async fn readyz(State(probes): State<Probes>) -> (StatusCode, String) {
    match (probes.ready)() {
        Ok(()) => (StatusCode::OK, "ready".into()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

/// The router, separate from the listener so tests can drive it.
pub fn router(probes: Probes) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .with_state(probes)
}

/// Serves the endpoints until `shutdown` completes.
pub async fn serve(
    address: SocketAddr,
    probes: Probes,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    tracing::info!(%address, "serving /metrics, /livez and /readyz");
    axum::serve(listener, router(probes))
        .with_graceful_shutdown(shutdown)
        .await
}

//! `/healthz` (the process is alive) and `/readyz` (the controller is started and the
//! API server answers) for kubelet probes.

use axum::{Router, extract::State, http::StatusCode, routing::get};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Shared readiness flag, set once the controller has started.
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn set_ready(&self, ready: bool) {
        self.0.store(ready, Ordering::SeqCst);
    }
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

#[derive(Clone)]
struct HealthState {
    readiness: Readiness,
    client: kube::Client,
}

/// The probe routes.
pub fn router(readiness: Readiness, client: kube::Client) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(HealthState { readiness, client })
}

async fn readyz(State(state): State<HealthState>) -> (StatusCode, &'static str) {
    if !state.readiness.is_ready() {
        return (StatusCode::SERVICE_UNAVAILABLE, "not started");
    }
    match tokio::time::timeout(Duration::from_secs(2), state.client.apiserver_version()).await {
        Ok(Ok(_)) => (StatusCode::OK, "ok"),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "API server unreachable"),
    }
}

/// Serves the probes until the future is dropped.
pub async fn serve(
    listener: tokio::net::TcpListener,
    readiness: Readiness,
    client: kube::Client,
) -> std::io::Result<()> {
    axum::serve(listener, router(readiness, client)).await
}

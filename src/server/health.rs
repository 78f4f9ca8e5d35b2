//! `/healthz` (the process is alive) and `/readyz` (the controller is started, its
//! catalog server holds every catalog the leader publishes, and the API server answers)
//! for kubelet probes: a replica joins the catalog Service only once it can answer.
//! Served by the bounded accept loop of [`super::conn`], as every server.

use axum::{Router, extract::State, http::StatusCode, routing::get};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Shared readiness flags: the controller has started; the local catalog store has
/// caught up with the published catalogs (set by the catalog follower after its first
/// complete pass, or when this replica leads and produces the content itself).
#[derive(Clone, Default)]
pub struct Readiness {
    started: Arc<AtomicBool>,
    catalogs: Arc<AtomicBool>,
}

impl Readiness {
    pub fn set_ready(&self, ready: bool) {
        self.started.store(ready, Ordering::SeqCst);
    }
    pub fn is_ready(&self) -> bool {
        self.started.load(Ordering::SeqCst)
    }
    pub fn set_catalogs_synced(&self) {
        if !self.catalogs.swap(true, Ordering::SeqCst) {
            tracing::info!("the catalog store holds every published catalog; ready to serve");
        }
    }
    pub fn catalogs_synced(&self) -> bool {
        self.catalogs.load(Ordering::SeqCst)
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
    if !state.readiness.catalogs_synced() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "catalog content not yet stored",
        );
    }
    match tokio::time::timeout(Duration::from_secs(2), state.client.apiserver_version()).await {
        Ok(Ok(_)) => (StatusCode::OK, "ok"),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "API server unreachable"),
    }
}

/// Serves the probes until the future is dropped, through the bounded accept loop
/// of every server ([`super::conn`]: slots with eviction, per-peer limit, header, body
/// and idle timeouts), so that no client can hold the kubelet's probes off.
pub async fn serve(
    listener: tokio::net::TcpListener,
    readiness: Readiness,
    client: kube::Client,
) -> std::io::Result<()> {
    super::conn::serve(
        listener,
        None,
        router(readiness, client),
        super::conn::Limits::default(),
        std::future::pending(),
    )
    .await
}

//! The controller's listeners, bound before anything else starts (a port in use is an
//! error at start, not later), and the servers on them besides health and metrics:
//! the catalog content API, the opt-in profiling endpoints, and — in the catalogd role
//! with `--tls-cert`/`--tls-key` — catalogd's mutating admission webhook
//! ([`crate::server::webhook`]), served on every replica as controller-runtime serves
//! webhooks (docs/how-to/switch-from-upstream.md).

use super::{ControllerArgs, listen};
use crate::metrics::Metrics;
use crate::metrics::serving::Protection;
use anyhow::{Context, Result};
use std::sync::Arc;

pub(super) struct Listeners {
    pub health: tokio::net::TcpListener,
    /// Not in the operator-controller role (no catalog server).
    pub catalog: Option<tokio::net::TcpListener>,
    pub metrics: tokio::net::TcpListener,
    /// With --pprof-bind-address.
    pub pprof: Option<tokio::net::TcpListener>,
    /// catalogd's admission webhook (the catalogd role with certificates).
    pub webhook: Option<tokio::net::TcpListener>,
}

impl Listeners {
    pub async fn bind(args: &ControllerArgs, protection: &Protection) -> Result<Listeners> {
        let bind = |what: &'static str, address: String| async move {
            listen(&address)
                .await
                .with_context(|| format!("binding {what} address {address}"))
        };
        let health = bind("health probe", args.health_probe_bind_address.clone()).await?;
        let catalog = if args.role.runs_catalogs() {
            Some(bind("catalog server", args.catalog_server_bind_address.clone()).await?)
        } else {
            None
        };
        let metrics = bind("metrics", args.metrics_bind_address.clone()).await?;
        tracing::info!(address = %args.health_probe_bind_address, "serving /healthz and /readyz");
        let scheme = protection.scheme();
        tracing::info!(address = %args.metrics_bind_address, scheme, "serving /metrics");
        let pprof = match args.metrics_serving.pprof_address() {
            Some(address) => {
                let listener = bind("profiling", address.to_string()).await?;
                protection.check_profiling(&listener)?;
                tracing::info!(
                    address,
                    scheme,
                    "serving /debug/pprof/profile and /debug/pprof/heap"
                );
                Some(listener)
            }
            None => None,
        };
        let webhook = match &args.webhook {
            Some(w) => Some(bind("webhook server", w.bind_address.clone()).await?),
            None => None,
        };
        Ok(Listeners {
            health,
            catalog,
            metrics,
            pprof,
            webhook,
        })
    }
}

pub(super) type Serving =
    std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send>>;

/// The catalog server's TLS configuration, with --catalog-server-tls-cert and -key.
pub(super) fn catalog_tls(args: &ControllerArgs) -> Result<Option<Arc<rustls::ServerConfig>>> {
    match (&args.catalog_server_tls_cert, &args.catalog_server_tls_key) {
        (Some(cert), Some(key)) => Ok(Some(crate::server::tls::server_config_with(
            cert,
            key,
            &args.catalog_server.tls_options(),
        )?)),
        _ => Ok(None),
    }
}

/// The catalog content API (HTTPS with `tls`) within `limits`, with the request metrics.
pub(super) fn serve_catalogs(
    listener: Option<tokio::net::TcpListener>,
    storage_dir: std::path::PathBuf,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: crate::server::conn::Limits,
    metrics: Arc<Metrics>,
) -> Serving {
    let Some(listener) = listener else {
        return Box::pin(std::future::pending());
    };
    let router = crate::server::catalog::router(storage_dir).layer(
        axum::middleware::from_fn_with_state(metrics, crate::metrics::track_http),
    );
    Box::pin(crate::server::conn::serve(
        listener,
        tls,
        router,
        limits,
        std::future::pending(),
    ))
}

/// The profiling endpoints when --pprof-bind-address is set; never ends otherwise.
pub(super) fn serve_profiling(
    listener: Option<tokio::net::TcpListener>,
    protection: Protection,
) -> Serving {
    let Some(listener) = listener else {
        return Box::pin(std::future::pending());
    };
    Box::pin(async move {
        crate::metrics::profiling::activate_heap_profiling().await;
        protection
            .serve(listener, crate::metrics::profiling::router())
            .await
    })
}

/// catalogd's admission webhook on `listener`: TLS with the certificate files
/// (re-read when they change, as upstream's certwatcher) and the TLS options of every
/// server (`--tls-profile` in the catalogd role), HTTP/1.1 only (upstream turns
/// HTTP/2 off on its webhook and metrics servers), within the default connection
/// limits of every server ([`crate::server::conn::Limits`]: idle connections evicted
/// when the slots run out, so the API server always gets one); on every address of
/// the bind address, as before. Never ends without a listener.
pub(super) fn serve_webhook(
    listener: Option<tokio::net::TcpListener>,
    args: &ControllerArgs,
) -> Result<Serving> {
    let (Some(listener), Some(webhook)) = (listener, &args.webhook) else {
        return Ok(Box::pin(std::future::pending()));
    };
    let files = Some((webhook.cert.clone(), webhook.key.clone()));
    let options = args.catalog_server.tls_options();
    let tls = crate::metrics::tls::server_config(files, &options, &[b"http/1.1"])?;
    tracing::info!(address = %webhook.bind_address, path = crate::server::webhook::PATH, "serving the ClusterCatalog mutating admission webhook");
    Ok(Box::pin(crate::server::conn::serve(
        listener,
        Some(tls),
        crate::server::webhook::router(),
        crate::server::conn::Limits::default(),
        std::future::pending(),
    )))
}

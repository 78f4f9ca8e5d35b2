//! The controller process: connects to the API server, serves health probes and the
//! catalog content API, and runs the reconcilers (ClusterCatalog; ClusterExtension)
//! until SIGTERM/SIGINT.

pub mod catalog;
pub mod options;

pub use options::ControllerArgs;

use crate::server::health::{self, Readiness};
use anyhow::{Context, Result};
use kube::Client;
use std::sync::Arc;
use std::time::Duration;

/// Builds a client from `--kubeconfig`, `$KUBECONFIG`, `~/.kube/config` or the
/// in-cluster environment, and proves the API server answers.
pub async fn connect(kubeconfig: Option<&std::path::Path>) -> Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer().await.context(
            "no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or run in a cluster",
        )?,
    };
    let server = config.cluster_url.to_string();
    let client = Client::try_from(config).context("building Kubernetes client")?;
    let version = tokio::time::timeout(Duration::from_secs(10), client.apiserver_version())
        .await
        .map_err(|_| anyhow::anyhow!("the API server at {server} did not answer within 10s"))?
        .with_context(|| format!("cannot reach the API server at {server}"))?;
    tracing::info!(server, version = %version.git_version, "connected to the API server");
    Ok(client)
}

/// Runs the controller until a termination signal arrives.
pub async fn run(args: ControllerArgs) -> Result<()> {
    let client = connect(args.kubeconfig.as_deref()).await?;
    let readiness = Readiness::default();
    let health_listener = tokio::net::TcpListener::bind(&args.health_probe_bind_address)
        .await
        .with_context(|| {
            format!(
                "binding health probe address {}",
                args.health_probe_bind_address
            )
        })?;
    let catalog_listener = tokio::net::TcpListener::bind(&args.catalog_server_bind_address)
        .await
        .with_context(|| {
            format!(
                "binding catalog server address {}",
                args.catalog_server_bind_address
            )
        })?;
    tracing::info!(address = %args.health_probe_bind_address, "serving /healthz and /readyz");

    let storage_dir = args.cache_dir.join("catalogs");
    std::fs::create_dir_all(&storage_dir)
        .with_context(|| format!("creating {}", storage_dir.display()))?;
    let mut puller_config = crate::image::PullerConfig::new(args.cache_dir.join("images"));
    puller_config.insecure_registries = args.insecure_registries.clone();
    if let Some(ca) = &args.ca_bundle {
        puller_config = puller_config.with_ca_bundle_file(ca)?;
    }
    let puller = Arc::new(crate::image::ImagePuller::new(puller_config)?);
    let tls = match (&args.catalog_server_tls_cert, &args.catalog_server_tls_key) {
        (Some(cert), Some(key)) => Some(crate::server::tls::server_config(cert, key)?),
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let catalog_ctx = Arc::new(catalog::CatalogContext::new(
        client.clone(),
        puller,
        catalog::CatalogSettings {
            storage_dir: storage_dir.clone(),
            base_url: format!("{scheme}://{}", args.external_address),
            poll_unit: Duration::from_secs(args.poll_unit_seconds.max(1)),
            namespace: args.namespace.clone(),
            service_account: Some(args.service_account.clone()),
            global_pull_secret: args.global_pull_secret.clone(),
            lenient: args.lenient_catalogs,
            limits: crate::fbc::parse::Limits {
                max_total_bytes: args.max_catalog_bytes,
                ..Default::default()
            },
        },
    ));
    tracing::info!(address = %args.catalog_server_bind_address, scheme, "serving catalog content");

    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let health = health::serve(health_listener, readiness.clone(), client.clone());
    let router = crate::server::catalog::router(storage_dir);
    type Serving = std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send>>;
    let catalogs: Serving = match tls {
        Some(config) => Box::pin(crate::server::catalog::serve_tls(
            catalog_listener,
            config,
            router,
            std::future::pending(),
        )),
        None => Box::pin(crate::server::catalog::serve(
            catalog_listener,
            router,
            std::future::pending(),
        )),
    };
    let catalog_reconciler = catalog::run(catalog_ctx);
    readiness.set_ready(true);
    tokio::select! {
        result = health => result.context("health server failed")?,
        result = catalogs => result.context("catalog server failed")?,
        () = catalog_reconciler => tracing::info!("catalog reconciler stopped"),
        () = &mut shutdown => tracing::info!("termination signal received, shutting down"),
    }
    Ok(())
}

/// Resolves when SIGTERM or SIGINT arrives.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

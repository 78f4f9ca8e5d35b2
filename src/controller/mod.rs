//! The controller process: connects to the API server, serves health probes and the
//! catalog content API, and runs the reconcilers (ClusterCatalog; ClusterExtension)
//! until SIGTERM/SIGINT.

pub mod catalog;
pub mod extension;
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
    Ok(connect_with_config(kubeconfig).await?.1)
}

/// [`connect`], also returning the configuration (installer clients derive from it).
pub async fn connect_with_config(
    kubeconfig: Option<&std::path::Path>,
) -> Result<(kube::Config, Client)> {
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
    let client = Client::try_from(config.clone()).context("building Kubernetes client")?;
    let version = tokio::time::timeout(Duration::from_secs(10), client.apiserver_version())
        .await
        .map_err(|_| anyhow::anyhow!("the API server at {server} did not answer within 10s"))?
        .with_context(|| format!("cannot reach the API server at {server}"))?;
    tracing::info!(server, version = %version.git_version, "connected to the API server");
    Ok((config, client))
}

/// The global pull secret, then the controller ServiceAccount's `imagePullSecrets`, as
/// registry credentials. Missing or unreadable secrets are logged and skipped (public
/// images still pull).
pub async fn pull_secrets(
    client: &Client,
    namespace: &str,
    service_account: Option<&str>,
    global: Option<&str>,
) -> crate::image::DockerConfig {
    use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
    let secrets: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
    let mut names: Vec<String> = global.iter().map(|s| s.to_string()).collect();
    if let Some(sa) = service_account {
        let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(client.clone(), namespace);
        if let Ok(Some(account)) = accounts.get_opt(sa).await {
            names.extend(
                account
                    .image_pull_secrets
                    .into_iter()
                    .flatten()
                    .map(|r| r.name),
            );
        }
    }
    let mut config = crate::image::DockerConfig::default();
    for name in names {
        match secrets.get_opt(&name).await {
            Ok(Some(secret)) => match crate::image::DockerConfig::from_secret(&secret) {
                Ok(parsed) => config.merge(&parsed),
                Err(e) => {
                    tracing::warn!(secret = %name, error = %e, "ignoring unusable pull secret")
                }
            },
            Ok(None) => tracing::warn!(secret = %name, "pull secret not found"),
            Err(e) => tracing::warn!(secret = %name, error = %e, "reading pull secret"),
        }
    }
    config
}

/// Runs the controller until a termination signal arrives.
pub async fn run(args: ControllerArgs) -> Result<()> {
    let (config, client) = connect_with_config(args.kubeconfig.as_deref()).await?;
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
        puller.clone(),
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
    let content = crate::content::ContentClient::new(crate::content::ContentConfig::default())?;
    let extension_ctx = Arc::new(extension::ExtensionContext::new(
        client.clone(),
        config,
        puller,
        content,
        extension::ExtensionSettings {
            namespace: args.namespace.clone(),
            service_account: Some(args.service_account.clone()),
            global_pull_secret: args.global_pull_secret.clone(),
            cert_provider: crate::bundle::CertProvider::CertManager,
            minute: Duration::from_secs(args.poll_unit_seconds.max(1)),
        },
    ));
    let extension_reconciler = extension::run(extension_ctx);
    readiness.set_ready(true);
    tokio::select! {
        result = health => result.context("health server failed")?,
        result = catalogs => result.context("catalog server failed")?,
        () = catalog_reconciler => tracing::info!("catalog reconciler stopped"),
        () = extension_reconciler => tracing::info!("extension reconciler stopped"),
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

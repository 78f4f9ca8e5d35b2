//! The controller process: connects to the API server, serves health probes, and runs
//! the reconcilers (ClusterExtension, ClusterCatalog) until SIGTERM/SIGINT.

pub mod options;

pub use options::ControllerArgs;

use crate::server::health::{self, Readiness};
use anyhow::{Context, Result};
use kube::Client;
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
    tracing::info!(address = %args.health_probe_bind_address, "serving /healthz and /readyz");
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let health = health::serve(health_listener, readiness.clone(), client.clone());
    readiness.set_ready(true);
    tokio::select! {
        result = health => result.context("health server failed")?,
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

//! The controller process: connects to the API server, serves health probes, metrics
//! (HTTPS and authorized unless `--metrics-secure=false`), the opt-in profiling
//! endpoints, the catalog content API and (catalogd role) the admission webhook on
//! every replica (`serving.rs`), and runs the reconcilers
//! (ClusterCatalog; ClusterExtension) until SIGTERM/SIGINT — with `--leader-elect`
//! only while holding the Lease [`LEASE_NAME`], exiting non-zero when it is lost; until
//! then the replica runs the [`catalog::follower`], so that it serves the same catalog
//! content as the leader.

pub mod cache_gc;
pub mod cas_watch;
pub mod catalog;
pub mod common;
pub mod extension;
pub mod lease;
pub mod options;
pub mod pull_secrets;
mod serving;
pub mod status_schema;
pub mod workers;

pub use options::ControllerArgs;

use crate::metrics::Metrics;
use crate::metrics::serving::Protection;
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

/// A listener on `address` (`host:port`) with `SO_REUSEADDR`, as Go's net.Listen: a
/// restarted controller binds its ports again at once even while connections of the
/// previous process linger in TIME_WAIT.
pub async fn listen(address: &str) -> std::io::Result<tokio::net::TcpListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(address).await? {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(addr).and_then(|()| socket.listen(1024)) {
            Ok(listener) => return Ok(listener),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::AddrNotAvailable,
            format!("{address} resolves to no address"),
        )
    }))
}

/// Name of the leader-election Lease (in `--namespace`).
pub const LEASE_NAME: &str = "olmv1-controller";

/// What a program embedding the controller (the integration tests) can read of it
/// while it runs; clones share the values.
#[derive(Clone, Default)]
pub struct Observers {
    /// What the drift watches did and hold (`tests/drift.rs`).
    pub drift: extension::drift::Counters,
    /// The process's metrics, once it runs (its API request count, e2e/rollout_idle.rs).
    pub metrics: Arc<std::sync::OnceLock<Arc<Metrics>>>,
}

/// Runs the controller until a termination signal arrives (or, with
/// `--leader-elect`, until this replica loses the lease: then an error).
pub async fn run(args: ControllerArgs) -> Result<()> {
    run_observed(args, Observers::default()).await
}

/// [`run`], counting into `observers`.
pub async fn run_observed(args: ControllerArgs, observers: Observers) -> Result<()> {
    check(&args)?;
    let metrics = Arc::new(Metrics::new());
    let _ = observers.metrics.set(metrics.clone());
    let (config, plain_client) = connect_with_config(args.kubeconfig.as_deref()).await?;
    if let Some(host) = config.cluster_url.authority() {
        metrics.upstream.set_api_host(host.as_str());
    }
    if args.role.runs_catalogs() {
        metrics.upstream.controller_started("clustercatalog");
    }
    if args.role.runs_extensions() {
        metrics.upstream.controller_started("clusterextension");
    }
    common::set_long_watches(config.proxy_url.is_none());
    // The controller's own client counts its requests (olmv1_kube_api_requests_total).
    let client = crate::apply::client::controller_client(&config, Some(metrics.clone()))
        .context("building Kubernetes client")?;
    let readiness = Readiness::default();
    // The reviews of scrapes use the uncounted client: olmv1_kube_api_requests_total
    // stays the reconcilers' traffic.
    let protection = Protection::new(
        args.metrics_serving.metrics_secure,
        args.metrics_serving.cert_files(),
        &args.catalog_server.tls_options(),
        plain_client,
    )?;
    let listeners = serving::Listeners::bind(&args, &protection).await?;
    let storage_dir = args.cache_dir.join("catalogs");
    std::fs::create_dir_all(&storage_dir)
        .with_context(|| format!("creating {}", storage_dir.display()))?;
    let tls = serving::catalog_tls(&args)?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let parts = Reconcilers::new(&args, &client, config, &metrics, &storage_dir, scheme)?;
    let catalog_ctx = Arc::new(parts.catalog.with_readiness(readiness.clone()));
    let extension_ctx = Arc::new(parts.extension.with_drift_counters(observers.drift));
    if args.role.runs_catalogs() {
        tracing::info!(address = %args.catalog_server_bind_address, scheme, "serving catalog content");
    }
    tracing::info!(
        max_concurrent_reconciles = extension_ctx.workers.limit(),
        "ClusterExtension reconcile workers"
    );

    let cas = cas_watch::run(cas_watch::watched(
        &args,
        catalog_ctx.puller.clone(),
        extension_ctx.clone(),
    ));
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let health = health::serve(listeners.health, readiness.clone(), client.clone());
    let metrics_server =
        crate::metrics::serve(listeners.metrics, metrics.clone(), protection.clone());
    let profiling = serving::serve_profiling(listeners.pprof, protection);
    let webhook = serving::serve_webhook(listeners.webhook, &args)?;
    let catalogs = serving::serve_catalogs(
        listeners.catalog,
        storage_dir,
        tls,
        args.catalog_server.limits(),
        metrics.clone(),
    );

    // Leader election: the reconcilers run only on the lease holder; the others follow
    // the catalogs it publishes.
    let election = if args.leader_elect {
        Some(join_election(&client, &args).await?)
    } else {
        None
    };
    let lease_task = election.as_ref().map(|e| e.1.abort_handle());
    let namespace = args.namespace.clone();
    let contexts = Contexts {
        role: args.role,
        catalog: catalog_ctx,
        extension: extension_ctx,
    };
    let reconcilers = lead(election, namespace, metrics, contexts);
    readiness.set_ready(true);
    let result = tokio::select! {
        result = health => result.context("health server failed"),
        result = metrics_server => result.context("metrics server failed"),
        result = profiling => result.context("profiling server failed"),
        result = catalogs => result.context("catalog server failed"),
        result = webhook => result.context("webhook server failed"),
        result = reconcilers => result,
        () = parts.cache_gc.run() => Ok(()),
        () = cas => Ok(()),
        () = &mut shutdown => {
            tracing::info!("termination signal received, shutting down");
            Ok(())
        }
    };
    if let Some(task) = lease_task {
        released(task).await;
    }
    result
}

/// The arguments checks that stop the start before anything else happens.
fn check(args: &ControllerArgs) -> Result<()> {
    if args.leader_elect {
        args.lease_timing()
            .map_err(|e| anyhow::anyhow!("invalid leader-election timings: {e}"))?;
    }
    if let Some(path) = registries_conf(args) {
        // A broken file stops the start before anything else happens.
        crate::image::registries::RegistriesConf::load(&path)?;
    }
    if let Some(path) = signature_policy(args) {
        crate::image::signature::SignaturePolicy::load(&path)?;
    }
    if let Some(dir) = registries_d(args) {
        crate::image::signature::RegistriesD::load(&dir)?;
    }
    if let Some(value) = &args.global_pull_secret {
        pull_secrets::validate(value).map_err(anyhow::Error::msg)?;
    }
    Ok(())
}

/// Waits (a moment at most) for the lease task to end: its receiver is gone, so it
/// releases the lease (a standby takes over at once) and ends.
async fn released(task: tokio::task::AbortHandle) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while !task.is_finished() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The reconcilers' contexts and the cache GC, sharing one image puller and `metrics`.
struct Reconcilers {
    catalog: catalog::CatalogContext,
    extension: extension::ExtensionContext,
    cache_gc: cache_gc::CacheGc,
}

impl Reconcilers {
    fn new(
        args: &ControllerArgs,
        client: &Client,
        config: kube::Config,
        metrics: &Arc<Metrics>,
        storage_dir: &std::path::Path,
        scheme: &str,
    ) -> Result<Reconcilers> {
        let puller = Arc::new(image_puller(args)?);
        let cache_gc = cache_gc::CacheGc {
            client: client.clone(),
            namespace: args.namespace.clone(),
            puller: puller.clone(),
            catalogs_dir: storage_dir.to_path_buf(),
            interval: args.workers.cache_gc_interval,
            metrics: metrics.clone(),
        };
        let catalog = catalog::CatalogContext::new(
            client.clone(),
            puller.clone(),
            catalog_settings(args, storage_dir, scheme),
        )
        .with_metrics(metrics.clone());
        let extension = extension::ExtensionContext::new(
            client.clone(),
            config,
            puller,
            content_client(args)?,
            extension_settings(args),
        )
        .with_metrics(metrics.clone())
        .with_max_concurrent_reconciles(args.workers.max_concurrent_reconciles);
        Ok(Reconcilers {
            catalog,
            extension,
            cache_gc,
        })
    }
}

/// The image puller of both reconcilers: cache directory, insecure registries, CAs.
fn image_puller(args: &ControllerArgs) -> Result<crate::image::ImagePuller> {
    let mut config = crate::image::PullerConfig::new(args.cache_dir.join("images"));
    config.insecure_registries = args.insecure_registries.clone();
    config.pull_timeout = args.workers.pull_timeout;
    config.request_timeout = args.workers.registry_request_timeout;
    config.ca_bundle_pem = cas_watch::pull_cas(args)?;
    if let Some(path) = registries_conf(args) {
        config = config.with_registries_conf(&path)?;
        let conf = &config.registries;
        tracing::info!(file = %path.display(), registries = conf.registries.len(), "registries configuration loaded");
        conf.warn_unused();
    }
    if let Some(path) = signature_policy(args) {
        config = config.with_signature_policy(&path)?;
        let p = &config.signature_policy;
        tracing::info!(file = %path.display(), found = p.found, scopes = p.docker.len(), "signature policy loaded");
    }
    if let Some(dir) = registries_d(args) {
        config = config.with_registries_d(&dir)?;
        tracing::info!(dir = %dir.display(), "registries.d lookaside configuration loaded");
    }
    Ok(crate::image::ImagePuller::new(config)?)
}

/// The catalog content client of the extension reconciler: system roots plus the
/// CAs of --catalogd-cas-dir.
fn content_client(args: &ControllerArgs) -> Result<crate::content::ContentClient> {
    let mut config = crate::content::ContentConfig::default();
    if let Some(dir) = &args.catalogd_cas_dir {
        config = config.with_cas_dir(dir)?;
        tracing::info!(dir = %dir.display(), "trusting the catalog server CAs of this directory");
    }
    Ok(crate::content::ContentClient::new(config)?)
}

fn catalog_settings(
    args: &ControllerArgs,
    storage_dir: &std::path::Path,
    scheme: &str,
) -> catalog::CatalogSettings {
    catalog::CatalogSettings {
        storage_dir: storage_dir.to_path_buf(),
        base_url: format!("{scheme}://{}", args.external_address),
        poll_unit: Duration::from_secs(args.poll_unit_seconds.max(1)),
        namespace: args.namespace.clone(),
        service_account: Some(args.service_account.clone()),
        global_pull_secret: args.global_pull_secret.clone(),
        strict: args.strict_catalogs,
        limits: crate::fbc::parse::Limits {
            max_total_bytes: args.max_catalog_bytes,
            ..Default::default()
        },
    }
}

fn extension_settings(args: &ControllerArgs) -> extension::ExtensionSettings {
    extension::ExtensionSettings {
        namespace: args.namespace.clone(),
        service_account: Some(args.service_account.clone()),
        global_pull_secret: args.global_pull_secret.clone(),
        cert_provider: crate::bundle::CertProvider::CertManager,
        minute: Duration::from_secs(args.poll_unit_seconds.max(1)),
        young_rollout: Duration::from_secs(args.young_rollout_seconds),
        default_installer: args.default_installer(),
        service_account_field: match args.role {
            options::Role::OperatorController => extension::installer::ServiceAccountField::Ignored,
            _ => extension::installer::ServiceAccountField::Honoured,
        },
        wait_for_rollout: !args.skip_rollout_wait,
        install_timeout: Some(args.workers.install_timeout).filter(|t| !t.is_zero()),
        create_namespaces: args.create_install_namespaces,
    }
}

/// The reconcilers: at once without an election; with one, following the leader's
/// catalogs until this replica leads, then reconciling until it loses the lease.
async fn lead(
    election: Option<Election>,
    namespace: String,
    metrics: Arc<Metrics>,
    contexts: Contexts,
) -> Result<()> {
    let lease = contexts.role.lease_name();
    let Some((mut leader, _task, identity)) = election else {
        metrics.set_leader(true);
        contexts.catalog.readiness.set_catalogs_synced();
        run_reconcilers(contexts).await;
        return Ok(());
    };
    tracing::info!(lease, %namespace, %identity, "waiting to become the leader");
    if contexts.role.runs_catalogs() {
        catalog::follower::run(contexts.catalog.clone(), acquired(&mut leader)).await?;
    } else {
        // The operator-controller role serves no catalogs: it is ready while standing by.
        contexts.catalog.readiness.set_catalogs_synced();
        acquired(&mut leader).await?;
    }
    metrics.set_leader(true);
    // The leader produces the content itself (ingesting what it does not hold yet).
    contexts.catalog.readiness.set_catalogs_synced();
    tracing::info!(lease, %identity, "became the leader; starting the reconcilers");
    tokio::select! {
        () = run_reconcilers(contexts) => Ok(()),
        () = lost(&mut leader) => {
            metrics.set_leader(false);
            Err(anyhow::anyhow!(
                "lost the leader lease {namespace}/{lease} (identity {identity}); exiting so that the restarted process rejoins the election"
            ))
        }
    }
}

/// The reconcilers' contexts and which of them this process runs.
struct Contexts {
    role: options::Role,
    catalog: Arc<catalog::CatalogContext>,
    extension: Arc<extension::ExtensionContext>,
}

/// The registries.conf of the image puller: --registries-conf, else upstream's default
/// path when that file exists (as containers/image reads it without a flag).
fn registries_conf(args: &ControllerArgs) -> Option<std::path::PathBuf> {
    options::registries_conf_or(
        args.registries_conf.as_deref(),
        std::path::Path::new(options::DEFAULT_REGISTRIES_CONF),
    )
}

/// --signature-policy, else /etc/containers/policy.json when it exists.
fn signature_policy(args: &ControllerArgs) -> Option<std::path::PathBuf> {
    options::registries_conf_or(
        args.signature_policy.as_deref(),
        std::path::Path::new(options::DEFAULT_SIGNATURE_POLICY),
    )
}

/// --registries-d, else /etc/containers/registries.d when it exists.
fn registries_d(args: &ControllerArgs) -> Option<std::path::PathBuf> {
    options::registries_d_or(
        args.registries_d.as_deref(),
        std::path::Path::new(options::DEFAULT_REGISTRIES_D),
    )
}

type Election = (
    tokio::sync::watch::Receiver<bool>,
    tokio::task::JoinHandle<()>,
    String,
);

/// Starts competing for the Lease (created when missing) with [`lease::Elector`].
async fn join_election(client: &Client, args: &ControllerArgs) -> Result<Election> {
    let identity = args.leader_election_identity.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "olmv1".into());
        format!("{host}-{}", std::process::id())
    });
    let timing = args
        .lease_timing()
        .map_err(|e| anyhow::anyhow!("invalid leader-election timings: {e}"))?;
    tracing::info!(
        lease_duration = ?timing.lease_duration,
        renew_deadline = ?timing.renew_deadline,
        retry_period = ?timing.retry_period,
        "leader election"
    );
    let elector = lease::Elector {
        api: kube::Api::namespaced(client.clone(), &args.namespace),
        name: args.role.lease_name().to_string(),
        identity: identity.clone(),
        timing,
    };
    let (sender, receiver) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(elector.run(sender));
    Ok((receiver, task, identity))
}

/// Resolves when the lease says this replica is the leader (an error when the
/// elector stopped).
async fn acquired(leader: &mut tokio::sync::watch::Receiver<bool>) -> Result<()> {
    while !*leader.borrow_and_update() {
        leader
            .changed()
            .await
            .map_err(|_| anyhow::anyhow!("the leader elector stopped"))?;
    }
    Ok(())
}

/// Resolves when the lease says this replica is no longer the leader.
async fn lost(leader: &mut tokio::sync::watch::Receiver<bool>) {
    loop {
        if leader.changed().await.is_err() {
            return;
        }
        if !*leader.borrow_and_update() {
            return;
        }
    }
}

async fn run_reconcilers(contexts: Contexts) {
    let role = contexts.role;
    let catalogs = async {
        if role.runs_catalogs() {
            catalog::run(contexts.catalog).await
        } else {
            std::future::pending().await
        }
    };
    let extensions = async {
        if role.runs_extensions() {
            extension::run(contexts.extension).await
        } else {
            std::future::pending().await
        }
    };
    tokio::select! {
        () = catalogs => tracing::info!("catalog reconciler stopped"),
        () = extensions => tracing::info!("extension reconciler stopped"),
    }
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

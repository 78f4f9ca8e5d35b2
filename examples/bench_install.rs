//! Install latency and scale of the ClusterExtension controller on the local control
//! plane: 20 sequential installs (ClusterExtension created → `Installed=True`, p50/p95),
//! then 100 ClusterExtensions created at once (time until all are Installed), and the
//! resident memory of this process, which runs the controller (and the catalog server).
//! Each extension installs its own synthetic package (a CRD, a Deployment, RBAC) as a
//! generated least-privilege installer account.
//!
//! Needs the cached Kubernetes binaries (hack/build-kube.sh) and `docker-registry`.
//! `cargo run --release --example bench_install [-- <sequential> <concurrent>]`

use clap::Parser;
use kube::api::{Api, DynamicObject, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension, conditions};
use olmv1::preflight::permissions::rbac::{BundledRbac, installer_rbac};
use olmv1::testenv::demo::{self, BundleSpec};
use olmv1::testenv::{Binaries, ControlPlane, Lifetime, Options, manifests, registry};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Wrapper {
    #[command(flatten)]
    args: olmv1::controller::ControllerArgs,
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn free_port() -> anyhow::Result<u16> {
    Ok(olmv1::testenv::control_plane::free_port()?)
}

async fn installed(api: &Api<ClusterExtension>, name: &str) -> bool {
    api.get(name).await.ok().and_then(|e| {
        e.status
            .as_ref()
            .and_then(|s| conditions::find(&s.conditions, "Installed").map(|c| c.status == "True"))
    }) == Some(true)
}

/// Namespace, installer RBAC and the ClusterExtension for package `pkg`.
async fn create_extension(admin: &kube::Client, pkg: &str) -> anyhow::Result<String> {
    let ns = format!("ns-{pkg}");
    let ns_obj: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )?;
    manifests::apply_objects(admin, &[ns_obj]).await?;
    let rendered = demo::render(&BundleSpec::new(pkg, "1.0.0"), &ns)?;
    let rbac = installer_rbac(&rendered, &ns, pkg, BundledRbac::Include)?;
    let objects: Vec<DynamicObject> = [rbac.service_account, rbac.cluster_role, rbac.binding]
        .into_iter()
        .map(serde_json::from_value)
        .collect::<Result<_, _>>()?;
    manifests::apply_objects(admin, &objects).await?;
    let ext: ClusterExtension = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": pkg},
        "spec": {"namespace": ns, "serviceAccount": {"name": format!("{pkg}-installer")},
                 "source": {"sourceType": "Catalog", "catalog": {"packageName": pkg}}},
    }))?;
    Api::<ClusterExtension>::all(admin.clone())
        .create(&PostParams::default(), &ext)
        .await?;
    Ok(pkg.to_string())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let argv: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sequential = argv.first().copied().unwrap_or(20);
    let concurrent = argv.get(1).copied().unwrap_or(100);

    let tmp = tempfile::tempdir()?;
    let etcd = etcd_bin_vendored::etcd_bin_path()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .to_path_buf();
    let cp = ControlPlane::start(Options {
        binaries: Binaries::locate(Some(etcd))?,
        data_dir: tmp.path().join("data"),
        log_dir: tmp.path().join("logs"),
        controller_manager: true,
        lifetime: Lifetime::Supervised,
    })
    .await?;
    let admin = cp.admin_client().await?;
    let controller_kubeconfig = tmp.path().join("controller.kubeconfig");
    manifests::install_controller_identity(
        &admin,
        &olmv1::testenv::project_dir(),
        &cp.server,
        &cp.pki.ca_pem,
        &controller_kubeconfig,
    )
    .await?;
    let reg = registry::TestRegistry::start()?;

    // One catalog with a package per extension.
    let packages: Vec<String> = (0..sequential + concurrent)
        .map(|i| format!("bench{i}"))
        .collect();
    let mut fbc = Vec::new();
    for pkg in &packages {
        let spec = BundleSpec::new(pkg, "1.0.0");
        let image = demo::push_bundle(&reg, &spec).await?;
        fbc.extend(demo::catalog_fbc(pkg, &[(spec, image)]));
    }
    let pushed = registry::push_catalog_image(
        &reg,
        "catalogs/bench:v1",
        &BTreeMap::from([("all/catalog.json".to_string(), fbc)]),
    )
    .await?;

    let rss_before = rss_mib();
    let (health, catalogs, metrics) = (free_port()?, free_port()?, free_port()?);
    let cache = tmp.path().join("cache");
    let w = Wrapper::try_parse_from([
        "bench".to_string(),
        format!("--kubeconfig={}", controller_kubeconfig.display()),
        format!("--health-probe-bind-address=127.0.0.1:{health}"),
        format!("--catalog-server-bind-address=127.0.0.1:{catalogs}"),
        format!("--external-address=127.0.0.1:{catalogs}"),
        format!("--metrics-bind-address=127.0.0.1:{metrics}"),
        format!("--cache-dir={}", cache.display()),
        format!("--insecure-registry={}", reg.host()),
    ])?;
    tokio::spawn(async move {
        if let Err(e) = olmv1::controller::run(w.args).await {
            eprintln!("controller stopped: {e:#}");
        }
    });
    let catalog: ClusterCatalog = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog", "metadata": {"name": "bench"},
        "spec": {"source": {"type": "Image", "image": {"ref": pushed.reference}}},
    }))?;
    let catalogs_api: Api<ClusterCatalog> = Api::all(admin.clone());
    catalogs_api
        .create(&PostParams::default(), &catalog)
        .await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !catalogs_api.get("bench").await?.status.is_some_and(|s| {
        conditions::find(&s.conditions, "Serving").is_some_and(|c| c.status == "True")
    }) {
        anyhow::ensure!(Instant::now() < deadline, "catalog not serving");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let mut latencies = Vec::new();
    for pkg in &packages[..sequential] {
        create_extension(&admin, pkg).await?;
        let created = Instant::now();
        while !installed(&api, pkg).await {
            anyhow::ensure!(
                created.elapsed() < Duration::from_secs(60),
                "{pkg} not installed within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        latencies.push(created.elapsed());
    }
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "sequential installs ({sequential}): created → Installed p50 {:?}, p95 {:?}, max {:?}",
        pct(0.5),
        pct(0.95),
        latencies.last().copied().unwrap_or_default()
    );

    let start = Instant::now();
    let creates = packages[sequential..]
        .iter()
        .map(|pkg| create_extension(&admin, pkg));
    for r in futures::future::join_all(creates).await {
        r?;
    }
    let created = start.elapsed();
    loop {
        let list = api.list(&Default::default()).await?;
        let done = list
            .items
            .iter()
            .filter(|e| {
                e.status
                    .as_ref()
                    .and_then(|s| conditions::find(&s.conditions, "Installed"))
                    .is_some_and(|c| c.status == "True")
            })
            .count();
        if done >= sequential + concurrent {
            break;
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(300),
            "only {done} installed after 300 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "{concurrent} ClusterExtensions created at once ({created:?} to create them and their RBAC): all Installed after {:?}",
        start.elapsed()
    );
    println!(
        "process RSS (controller + catalog server + this client): {:.1} MiB before the controller started, {:.1} MiB with {} extensions installed",
        rss_before,
        rss_mib(),
        sequential + concurrent
    );
    Ok(())
}

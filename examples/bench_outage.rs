//! A registry outage at scale: N ClusterExtensions (default 1,000) whose bundle registry
//! refuses every pull (a local server answering `401 Unauthorized` to every request, or
//! `503 Service Unavailable` with `BENCH_OUTAGE_STATUS=503`: the puller then retries each
//! pull within the reconcile, 3.5 s a pull, and the 10 workers take about 15 minutes to
//! get every extension to report), the controller retrying each with its backoff. Once every extension reports
//! its failure (`Progressing=True`, `Retrying`), the controller's API requests per second
//! over an idle window (`olmv1_kube_api_requests_total`, the controller's own count) —
//! target ≤ 0.1 req/s (docs/design/benchmarks.md) — with the API server's count per
//! verb and resource beside it, and how many pulls the refusing registry saw (the
//! retries go on: they reach the registry, not the API server).
//!
//! The controller runs as its own process (the release `olmv1` binary, as in
//! `bench_install`); the catalog is served from a working local registry.
//! Needs the cached Kubernetes binaries (hack/build-kube.sh) and `docker-registry`.
//! `cargo build --release --bin olmv1 --example bench_outage && target/release/examples/bench_outage [<extensions> <idle seconds>]`

mod common;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension, conditions};
use olmv1::testenv::{manifests, registry};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sum of a counter family in a Prometheus text body, per label value of `label`s.
fn counters(body: &str, family: &str, labels: &[&str]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in body
        .lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
    {
        let key: Vec<&str> = labels
            .iter()
            .map(|label| {
                line.split(&format!("{label}=\""))
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .unwrap_or("")
            })
            .collect();
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *out.entry(key.join(" ")).or_default() += value;
    }
    out
}

/// The controller's API requests (total), from its /metrics.
async fn controller_requests(metrics_port: u16) -> anyhow::Result<f64> {
    let body = reqwest::get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .await?
        .text()
        .await?;
    Ok(counters(&body, "olmv1_kube_api_requests_total", &["verb"])
        .values()
        .sum())
}

/// The API server's request counts per verb and resource (every client's).
async fn apiserver_requests(admin: &kube::Client) -> anyhow::Result<BTreeMap<String, f64>> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let body = admin.request_text(request).await?;
    Ok(counters(
        &body,
        "apiserver_request_total",
        &["verb", "resource", "subresource"],
    ))
}

/// A registry that refuses every request with `status` (401 or 503); returns its address
/// and a count of the requests it refused.
async fn refusing_registry(status: u16) -> anyhow::Result<(String, Arc<AtomicU64>)> {
    let response: &'static [u8] = if status == 503 {
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    } else {
        b"HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Basic realm=\"outage\"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let host = listener.local_addr()?.to_string();
    let refused = Arc::new(AtomicU64::new(0));
    let count = refused.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                // One response per connection: enough for "refuses every pull".
                if socket.read(&mut buf).await.unwrap_or(0) > 0 {
                    count.fetch_add(1, Ordering::Relaxed);
                    let _ = socket.write_all(response).await;
                }
            });
        }
    });
    Ok((host, refused))
}

/// One package whose only bundle lives on the refusing registry.
fn catalog_entry(pkg: &str, registry: &str) -> String {
    let bundle = format!("{pkg}.v1.0.0");
    let docs = [
        json!({"schema": "olm.package", "name": pkg, "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "name": "stable", "package": pkg, "entries": [{"name": bundle}]}),
        json!({"schema": "olm.bundle", "name": bundle, "package": pkg,
               "image": format!("{registry}/bundles/{pkg}:v1.0.0"),
               "properties": [{"type": "olm.package", "value": {"packageName": pkg, "version": "1.0.0"}}]}),
    ];
    docs.iter().map(|d| format!("{d}\n")).collect()
}

/// Namespace, installer ServiceAccount and the ClusterExtension of package `pkg`.
async fn create_extension(admin: &kube::Client, pkg: &str) -> anyhow::Result<()> {
    let ns = format!("ns-{pkg}");
    let objects: Vec<DynamicObject> = [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": format!("{pkg}-installer"), "namespace": ns}}),
    ]
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
    Ok(())
}

/// How many extensions report the pull failure (`Progressing=True`, `Retrying`).
async fn retrying(api: &Api<ClusterExtension>) -> anyhow::Result<usize> {
    let list = api.list(&Default::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|e| {
            e.status
                .as_ref()
                .and_then(|s| conditions::find(&s.conditions, "Progressing"))
                .is_some_and(|c| c.reason == conditions::REASON_RETRYING)
        })
        .count())
}

async fn wait_serving(api: &Api<ClusterCatalog>, name: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !api.get(name).await?.status.is_some_and(|s| {
        conditions::find(&s.conditions, "Serving").is_some_and(|c| c.status == "True")
    }) {
        anyhow::ensure!(Instant::now() < deadline, "catalog {name} not serving");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let argv: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let count = argv.first().copied().unwrap_or(1000) as usize;
    let idle_seconds = argv.get(1).copied().unwrap_or(300);
    let olmv1_bin = std::env::var_os("BENCH_OLMV1_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            Some(exe.parent()?.parent()?.join("olmv1"))
        })
        .filter(|p| p.exists())
        .ok_or_else(|| {
            anyhow::anyhow!("the olmv1 binary is missing: cargo build --release --bin olmv1")
        })?;

    let tmp = tempfile::tempdir()?;
    let common::cluster::BenchCluster {
        cp: _cp,
        admin,
        controller_kubeconfig,
        ..
    } = common::cluster::start(tmp.path(), false).await?;
    let reg = registry::TestRegistry::start()?;
    let status = std::env::var("BENCH_OUTAGE_STATUS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(401);
    let (refusing, refused) = refusing_registry(status).await?;
    let packages: Vec<String> = (0..count).map(|i| format!("outage{i}")).collect();
    let fbc: String = packages
        .iter()
        .map(|p| catalog_entry(p, &refusing))
        .collect();
    let pushed = registry::push_catalog_image(
        &reg,
        "catalogs/outage:v1",
        &BTreeMap::from([("all/catalog.json".to_string(), fbc.into_bytes())]),
    )
    .await?;

    let free_port = olmv1::testenv::control_plane::free_port;
    let (health, catalogs, metrics) = (free_port()?, free_port()?, free_port()?);
    let log_path = std::env::temp_dir().join("bench_outage-controller.log");
    println!("controller log: {}", log_path.display());
    let log = std::fs::File::create(&log_path)?;
    let mut controller = tokio::process::Command::new(&olmv1_bin)
        .args([
            "controller".to_string(),
            "--leader-elect".to_string(),
            "--log-format=json".to_string(),
            format!("--kubeconfig={}", controller_kubeconfig.display()),
            format!("--health-probe-bind-address=127.0.0.1:{health}"),
            format!("--catalog-server-bind-address=127.0.0.1:{catalogs}"),
            format!("--external-address=127.0.0.1:{catalogs}"),
            format!("--metrics-bind-address=127.0.0.1:{metrics}"),
            "--metrics-secure=false".to_string(),
            format!("--cache-dir={}", tmp.path().join("cache").display()),
            format!("--insecure-registry={}", reg.host()),
            format!("--insecure-registry={refusing}"),
        ])
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()?;
    let catalog: ClusterCatalog = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog", "metadata": {"name": "outage"},
        "spec": {"source": {"type": "Image", "image": {"ref": pushed.reference}}},
    }))?;
    let catalogs_api: Api<ClusterCatalog> = Api::all(admin.clone());
    catalogs_api
        .create(&PostParams::default(), &catalog)
        .await?;
    wait_serving(&catalogs_api, "outage").await?;

    let start = Instant::now();
    let created: Vec<anyhow::Result<()>> = futures::stream::iter(&packages)
        .map(|pkg| create_extension(&admin, pkg))
        .buffer_unordered(32)
        .collect()
        .await;
    for r in created {
        r?;
    }
    println!("{count} extensions created in {:?}", start.elapsed());
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    loop {
        let failing = retrying(&api).await?;
        if failing >= count {
            break;
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(1800),
            "only {failing} of {count} report Retrying after 1800 s"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    println!(
        "all {count} report Progressing=Retrying after {:.1} s",
        start.elapsed().as_secs_f64()
    );
    // Every backoff reaches its cap (1 s, 2 s … 30 s: a minute) and the second full
    // reconcile of each (the first wrote the status) is done: two quiet 10 s windows in
    // a row (at most 10 minutes), then the window.
    let settle = Instant::now();
    let (mut quiet, mut last) = (0, controller_requests(metrics).await?);
    while (quiet < 2 || settle.elapsed() < Duration::from_secs(60))
        && settle.elapsed() < Duration::from_secs(600)
    {
        tokio::time::sleep(Duration::from_secs(10)).await;
        let now = controller_requests(metrics).await?;
        quiet = if now - last <= 2.0 { quiet + 1 } else { 0 };
        last = now;
    }
    println!("settled {:.0} s later", settle.elapsed().as_secs_f64());
    let (before, server_before, pulls_before) = (
        controller_requests(metrics).await?,
        apiserver_requests(&admin).await?,
        refused.load(Ordering::Relaxed),
    );
    let t = Instant::now();
    tokio::time::sleep(Duration::from_secs(idle_seconds)).await;
    let (after, server_after, pulls_after) = (
        controller_requests(metrics).await?,
        apiserver_requests(&admin).await?,
        refused.load(Ordering::Relaxed),
    );
    let seconds = t.elapsed().as_secs_f64();
    let by_resource: Vec<String> = server_after
        .iter()
        .filter_map(|(k, v)| {
            let d = v - server_before.get(k).copied().unwrap_or(0.0);
            (d > 0.0).then(|| format!("{k}: {d:.0}"))
        })
        .collect();
    println!(
        "{count} extensions in a registry outage ({status} to every request), idle for {seconds:.0}s: {:.0} API requests = {:.3} req/s; the registry refused {} requests ({:.1}/s); API server per verb/resource (all clients): {by_resource:?}",
        after - before,
        (after - before) / seconds,
        pulls_after - pulls_before,
        (pulls_after - pulls_before) as f64 / seconds,
    );
    println!(
        "still Retrying at the end: {} of {count}",
        retrying(&api).await?
    );
    controller.start_kill()?;
    Ok(())
}

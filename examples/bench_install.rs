//! Install latency, scale, memory and idle API traffic of the ClusterExtension
//! controller on the local control plane. The controller runs as its own process (the
//! release `olmv1` binary, `controller --leader-elect` as config/manager deploys it), so
//! the memory figures are the controller's alone:
//! - 20 sequential installs (ClusterExtension created → `Installed=True`, p50/p95/max) of
//!   a bundle with 5 CRDs, a Deployment and RBAC, each as its own generated
//!   least-privilege installer account;
//! - 100 ClusterExtensions created at once (time until all are Installed);
//! - the controller's resident memory (now and peak) with those 120 extensions installed
//!   and the 59 MB bench catalog (`shared/bench/cop-rendered-csvmeta-linear`) served as a
//!   second ClusterCatalog;
//! - API requests per second while nothing changes (the controller's own count,
//!   `olmv1_kube_api_requests_total`, which includes the installer clients).
//!
//! With `BENCH_ROLLOUT_WAIT=1` the controller waits for rollouts (no
//! `--skip-rollout-wait`): every Deployment stays not ready (no node), so the idle
//! figure is that of stuck rollouts (docs/concepts/rollout-status.md, "Readiness from
//! events"); then 20 more extensions are installed one after the other while the others
//! roll out (created → `Installed`, p50/p95/max), and the pods of one extension are
//! marked ready (as a kubelet would) and the time from its Deployment becoming
//! available to `Progressing=Succeeded` is printed. Their Deployments then carry
//! `progressDeadlineSeconds: 3600`: with Kubernetes' default (600 s) the deadlines of
//! the stuck rollouts pass inside the idle window, and the status each then reports
//! (`ProgressDeadlineExceeded`, a real change) was counted as idle traffic.
//!
//! Needs the cached Kubernetes binaries (hack/build-kube.sh) and `docker-registry`.
//! `cargo build --release --bin olmv1 --example bench_install && target/release/examples/bench_install [<sequential> <concurrent> <crds per bundle> <idle seconds>]`

mod common;
use kube::api::{Api, DynamicObject, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension, conditions};
use olmv1::preflight::permissions::rbac::{BundledRbac, installer_rbac};
use olmv1::testenv::demo::{self, BundleSpec};
use olmv1::testenv::{manifests, registry};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A field of /proc/<pid>/status in MiB (VmRSS, VmHWM).
fn proc_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// Sum of `olmv1_kube_api_requests_total` and the per-verb values, from /metrics.
async fn api_requests(metrics_port: u16) -> anyhow::Result<(f64, BTreeMap<String, f64>)> {
    let body = reqwest::get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .await?
        .text()
        .await?;
    let mut verbs = BTreeMap::new();
    for line in body
        .lines()
        .filter(|l| l.starts_with("olmv1_kube_api_requests_total{"))
    {
        let verb = line
            .split("verb=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("?")
            .to_string();
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        verbs.insert(verb, value);
    }
    Ok((verbs.values().sum(), verbs))
}
/// Sum and count of each phase of the controller's reconciles (`phase_duration`) and of
/// the whole reconciles, from /metrics.
async fn phases(metrics_port: u16) -> anyhow::Result<BTreeMap<String, (f64, f64)>> {
    let body = reqwest::get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .await?
        .text()
        .await?;
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for line in body.lines() {
        let (family, labels) = match line.split_once('{') {
            Some((f, rest)) => (f, rest),
            None => continue,
        };
        let key = if family.starts_with("olmv1_clusterextension_phase_duration") {
            labels
                .split("phase=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
        } else if family.starts_with("olmv1_reconcile_duration_seconds")
            && labels.contains("clusterextension")
        {
            Some("reconcile")
        } else {
            None
        };
        let (Some(key), Some(value)) = (
            key,
            line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()),
        ) else {
            continue;
        };
        let entry = out.entry(key.to_string()).or_default();
        if family.ends_with("_sum") {
            entry.0 += value;
        } else if family.ends_with("_count") {
            entry.1 += value;
        }
    }
    Ok(out)
}

/// The mean time per phase between two [`phases`] readings.
fn phase_means(
    before: &BTreeMap<String, (f64, f64)>,
    after: &BTreeMap<String, (f64, f64)>,
) -> String {
    after
        .iter()
        .map(|(k, (sum, count))| {
            let (s0, c0) = before.get(k).copied().unwrap_or_default();
            let n = count - c0;
            let mean = if n > 0.0 {
                (sum - s0) / n * 1000.0
            } else {
                0.0
            };
            format!("{k} {mean:.0} ms ×{n:.0}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn free_port() -> anyhow::Result<u16> {
    Ok(olmv1::testenv::control_plane::free_port()?)
}

fn is_installed(e: &ClusterExtension) -> bool {
    e.status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, "Installed"))
        .is_some_and(|c| c.status == "True")
}

/// Marks the pods of `pkg`'s Deployment ready (as a kubelet would; kube-controller-manager
/// makes the Deployment available) and returns the time from the Deployment being
/// available to the extension's `Progressing=Succeeded`.
async fn readiness_latency(
    admin: &kube::Client,
    api: &Api<ClusterExtension>,
    pkg: &str,
    crds: usize,
) -> anyhow::Result<Duration> {
    use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
    use kube::api::{ListParams, Patch, PatchParams};
    let ns = format!("ns-{pkg}");
    let deployment = spec(pkg, crds).deployment_name();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let now = jiff::Timestamp::now().to_string();
    let ready = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": now},
        {"type": "ContainersReady", "status": "True", "lastTransitionTime": now}],
        "containerStatuses": [{"name": "manager", "image": "example.com/manager:1",
            "imageID": "", "ready": true, "restartCount": 0, "started": true,
            "state": {"running": {"startedAt": now}}}]}});
    let selector = format!("app={deployment}");
    for pod in pods
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
    {
        let name = pod.metadata.name.unwrap_or_default();
        pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&ready))
            .await?;
    }
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let start = Instant::now();
    while deployments
        .get(&deployment)
        .await?
        .status
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
        < 1
    {
        anyhow::ensure!(start.elapsed() < Duration::from_secs(60), "never available");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let available = Instant::now();
    loop {
        let e = api.get(pkg).await?;
        let succeeded = e.status.as_ref().and_then(|s| {
            conditions::find(&s.conditions, "Progressing").map(|c| c.reason == "Succeeded")
        });
        if succeeded == Some(true) {
            return Ok(available.elapsed());
        }
        anyhow::ensure!(
            available.elapsed() < Duration::from_secs(60),
            "not rolled out"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Installs `packages` one after the other: created → `Installed=True` of each, sorted.
async fn sequential_installs(
    admin: &kube::Client,
    api: &Api<ClusterExtension>,
    packages: &[String],
    crds: usize,
) -> anyhow::Result<Vec<Duration>> {
    use futures::{StreamExt, TryStreamExt};
    use kube::api::{WatchEvent, WatchParams};
    let mut latencies = Vec::new();
    for pkg in packages {
        // Watched, as kubectl or Argo CD see it (polling every 20 ms, as before
        // 2026-11-28, added 10 ms on average and 50 GETs/s to the API server's load).
        let params = WatchParams::default()
            .fields(&format!("metadata.name={pkg}"))
            .timeout(60);
        let mut events = api.watch(&params, "0").await?.boxed();
        create_extension(admin, pkg, crds).await?;
        let created = Instant::now();
        loop {
            match events.try_next().await? {
                Some(WatchEvent::Added(e) | WatchEvent::Modified(e)) if is_installed(&e) => break,
                Some(WatchEvent::Error(e)) => anyhow::bail!("watching {pkg}: {e}"),
                Some(_) => {}
                None => anyhow::bail!("{pkg} not installed within 60 s"),
            }
        }
        latencies.push(created.elapsed());
    }
    latencies.sort();
    Ok(latencies)
}

/// Namespace, installer RBAC and the ClusterExtension for package `pkg`.
async fn create_extension(admin: &kube::Client, pkg: &str, crds: usize) -> anyhow::Result<String> {
    let ns = format!("ns-{pkg}");
    let ns_obj: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )?;
    manifests::apply_objects(admin, &[ns_obj]).await?;
    let rendered = demo::render(&spec(pkg, crds), &ns)?;
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

fn spec(pkg: &str, crds: usize) -> BundleSpec {
    let mut spec = BundleSpec::new(pkg, "1.0.0");
    spec.extra_crds = crds.saturating_sub(1);
    if std::env::var_os("BENCH_ROLLOUT_WAIT").is_some_and(|v| v == "1") {
        // Past the end of the run: the idle window measures stuck rollouts, not the
        // status change of their deadlines passing.
        spec.progress_deadline_seconds = Some(3600);
    }
    spec
}

/// The 59 MB catalog of shared/bench, decompressed.
fn bench_catalog() -> anyhow::Result<Option<Vec<u8>>> {
    let base = std::env::var_os("OLMV1_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    let file = base.join("bench/cop-rendered-csvmeta-linear.jsonl.zst");
    if !file.exists() {
        return Ok(None);
    }
    Ok(Some(zstd::stream::decode_all(std::fs::File::open(file)?)?))
}

async fn wait_serving(api: &Api<ClusterCatalog>, name: &str, seconds: u64) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(seconds);
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
    let argv: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sequential = argv.first().copied().unwrap_or(20);
    let concurrent = argv.get(1).copied().unwrap_or(100);
    let crds = argv.get(2).copied().unwrap_or(5).max(1);
    let idle_seconds = argv.get(3).copied().unwrap_or(60) as u64;
    let rollout_wait = std::env::var_os("BENCH_ROLLOUT_WAIT").is_some_and(|v| v == "1");
    // BENCH_OLMV1_BIN: another controller binary (e.g. main's, for a before/after).
    let olmv1_bin = std::env::var_os("BENCH_OLMV1_BIN")
        .map(PathBuf::from)
        .filter(|p| p.exists());
    let olmv1_bin = match olmv1_bin {
        Some(bin) => bin,
        None => std::env::current_exe()?
            .parent()
            .and_then(|examples| examples.parent())
            .map(|dir| dir.join("olmv1"))
            .filter(|p| p.exists())
            .ok_or_else(|| {
                anyhow::anyhow!("the olmv1 binary is missing: cargo build --release --bin olmv1")
            })?,
    };

    let tmp = tempfile::tempdir()?;
    // `_cp` keeps the control plane running until the end of main.
    let common::cluster::BenchCluster {
        cp: _cp,
        admin,
        controller_kubeconfig,
        ..
    } = common::cluster::start(tmp.path(), true).await?;
    let reg = registry::TestRegistry::start()?;

    // One catalog with a package per extension.
    // With BENCH_ROLLOUT_WAIT=1, `in_flight` more installs are measured at the end.
    let in_flight = if rollout_wait { 20 } else { 0 };
    let packages: Vec<String> = (0..sequential + concurrent + in_flight)
        .map(|i| format!("bench{i}"))
        .collect();
    let mut fbc = Vec::new();
    for pkg in &packages {
        let spec = spec(pkg, crds);
        let image = demo::push_bundle(&reg, &spec).await?;
        fbc.extend(demo::catalog_fbc(pkg, &[(spec, image)]));
    }
    let pushed = registry::push_catalog_image(
        &reg,
        "catalogs/bench:v1",
        &BTreeMap::from([("all/catalog.json".to_string(), fbc)]),
    )
    .await?;

    let (health, catalogs, metrics) = (free_port()?, free_port()?, free_port()?);
    let cache = tmp.path().join("cache");
    // Kept after the run, for reading what the controller did.
    let log_path = std::env::temp_dir().join("bench_install-controller.log");
    println!("controller log: {}", log_path.display());
    let log = std::fs::File::create(&log_path)?;
    // BENCH_CONTROLLER_WRAPPER runs the controller under a profiler, e.g.
    // "heaptrack -o /tmp/olmv1-controller" (then the figures include the profiler).
    let wrapper: Vec<String> = std::env::var("BENCH_CONTROLLER_WRAPPER")
        .map(|w| w.split_whitespace().map(String::from).collect())
        .unwrap_or_default();
    let mut command = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = tokio::process::Command::new(program);
            c.args(args).arg(&olmv1_bin);
            c
        }
        None => tokio::process::Command::new(&olmv1_bin),
    };
    let mut controller = command
        .args([
            "controller".to_string(),
            "--leader-elect".to_string(),
            // No node runs the operators here: their Deployments never become
            // available; BENCH_ROLLOUT_WAIT=1 measures exactly that (stuck rollouts).
            "--log-format=json".to_string(),
            format!("--kubeconfig={}", controller_kubeconfig.display()),
            format!("--health-probe-bind-address=127.0.0.1:{health}"),
            format!("--catalog-server-bind-address=127.0.0.1:{catalogs}"),
            format!("--external-address=127.0.0.1:{catalogs}"),
            format!("--metrics-bind-address=127.0.0.1:{metrics}"),
            // Plain HTTP on loopback: the benchmark reads the API request counters.
            "--metrics-secure=false".to_string(),
            format!("--cache-dir={}", cache.display()),
            format!("--insecure-registry={}", reg.host()),
        ])
        .args((!rollout_wait).then_some("--skip-rollout-wait"))
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()?;
    let pid = controller
        .id()
        .ok_or_else(|| anyhow::anyhow!("controller exited at once"))?;
    let catalog: ClusterCatalog = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog", "metadata": {"name": "bench"},
        "spec": {"source": {"type": "Image", "image": {"ref": pushed.reference}}},
    }))?;
    let catalogs_api: Api<ClusterCatalog> = Api::all(admin.clone());
    catalogs_api
        .create(&PostParams::default(), &catalog)
        .await?;
    wait_serving(&catalogs_api, "bench", 60).await?;
    println!(
        "controller (pid {pid}) serving the bench catalog: RSS {:.1} MiB (anonymous {:.1} MiB, file-backed {:.1} MiB)",
        proc_mib(pid, "VmRSS:"),
        proc_mib(pid, "RssAnon:"),
        proc_mib(pid, "RssFile:")
    );

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let latencies = sequential_installs(&admin, &api, &packages[..sequential], crds).await?;
    println!(
        "sequential installs ({sequential}, {crds} CRDs + a Deployment each): created → Installed p50 {:?}, p95 {:?}, max {:?}",
        common::pct(&latencies, 0.5),
        common::pct(&latencies, 0.95),
        latencies.last().copied().unwrap_or_default()
    );

    let start = Instant::now();
    let creates = packages[sequential..sequential + concurrent]
        .iter()
        .map(|pkg| create_extension(&admin, pkg, crds));
    for r in futures::future::join_all(creates).await {
        r?;
    }
    let created = start.elapsed();
    loop {
        let list = api.list(&Default::default()).await?;
        let done = list.items.iter().filter(|e| is_installed(e)).count();
        if done >= sequential + concurrent {
            break;
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(300),
            "only {done} installed after 300 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let all_installed = Instant::now();
    println!(
        "{concurrent} ClusterExtensions created at once ({created:?} to create them and their RBAC): all Installed after {:?}",
        start.elapsed()
    );
    println!(
        "controller RSS with {} extensions installed: {:.1} MiB (anonymous {:.1} MiB, file-backed {:.1} MiB; peak so far {:.1} MiB)",
        sequential + concurrent,
        proc_mib(pid, "VmRSS:"),
        proc_mib(pid, "RssAnon:"),
        proc_mib(pid, "RssFile:"),
        proc_mib(pid, "VmHWM:")
    );

    // The 59 MB catalog served as well.
    if let Some(content) = bench_catalog()? {
        let size = content.len();
        let pushed = registry::push_catalog_image(
            &reg,
            "catalogs/large:v1",
            &BTreeMap::from([("all/catalog.json".to_string(), content)]),
        )
        .await?;
        let large: ClusterCatalog = serde_json::from_value(json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
            "metadata": {"name": "large"},
            "spec": {"priority": -100, "source": {"type": "Image", "image": {"ref": pushed.reference}}},
        }))?;
        let t = Instant::now();
        catalogs_api.create(&PostParams::default(), &large).await?;
        wait_serving(&catalogs_api, "large", 300).await?;
        let served = reqwest::get(format!(
            "http://127.0.0.1:{catalogs}/catalogs/large/api/v1/all"
        ))
        .await?
        .bytes()
        .await?
        .len();
        println!(
            "bench catalog ({:.1} MB) Serving after {:?}; /api/v1/all returned {:.1} MB",
            size as f64 / 1e6,
            t.elapsed(),
            served as f64 / 1e6
        );
    } else {
        println!("shared/bench not found: the 59 MB catalog is not served in this run");
    }
    // Let the install churn settle (drift watches started, statuses written).
    tokio::time::sleep(Duration::from_secs(10)).await;
    println!(
        "controller RSS with {} extensions and both catalogs: {:.1} MiB (peak {:.1} MiB)",
        sequential + concurrent,
        proc_mib(pid, "VmRSS:"),
        proc_mib(pid, "VmHWM:")
    );

    // A rollout's first minute is checked every 15 s (docs/concepts/rollout-status.md,
    // "Readiness from events"): with BENCH_ROLLOUT_WAIT=1 the window starts after it.
    if rollout_wait {
        let first_minute = Duration::from_secs(75).saturating_sub(all_installed.elapsed());
        tokio::time::sleep(first_minute).await;
    }
    // "Nothing changing" starts when the reconciles that the new catalog caused (every
    // extension re-resolves) are over, and, with stuck rollouts, when
    // kube-controller-manager has caught up with the burst's Deployments (its client
    // sends about 20 requests/s: a status change of each of 1,000 Deployments takes
    // minutes, and each is a readiness change the controller reads): two quiet 5 s
    // windows in a row (at most 3 min plus 0.3 s per extension).
    let settle = Instant::now();
    let settle_limit = Duration::from_secs(180) + Duration::from_millis(300) * concurrent as u32;
    let mut quiet = 0;
    let (mut last, _) = api_requests(metrics).await?;
    while quiet < 2 && settle.elapsed() < settle_limit {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (now, _) = api_requests(metrics).await?;
        quiet = if now - last <= 5.0 { quiet + 1 } else { 0 };
        last = now;
    }
    println!(
        "settled {:?} after the catalog was served",
        settle.elapsed()
    );
    let (before, verbs_before) = api_requests(metrics).await?;
    let reconciles_before = phases(metrics).await?;
    let t = Instant::now();
    tokio::time::sleep(Duration::from_secs(idle_seconds)).await;
    let (after, verbs) = api_requests(metrics).await?;
    let in_window: BTreeMap<&String, f64> = verbs
        .iter()
        .map(|(verb, n)| (verb, n - verbs_before.get(verb).copied().unwrap_or(0.0)))
        .filter(|(_, n)| *n > 0.0)
        .collect();
    let reconciles = |p: &BTreeMap<String, (f64, f64)>| p.get("reconcile").map_or(0.0, |c| c.1);
    println!(
        "idle for {:?}: {:.0} API requests = {:.2} req/s (in the window by verb: {in_window:?}, {:.0} reconciles; totals since start by verb: {verbs:?})",
        t.elapsed(),
        after - before,
        (after - before) / t.elapsed().as_secs_f64(),
        reconciles(&phases(metrics).await?) - reconciles(&reconciles_before)
    );
    if rollout_wait {
        // Installs while the others are still rolling out (their Deployments never
        // become ready): what a user installing next to stuck extensions waits.
        let more = &packages[sequential + concurrent..];
        let before = phases(metrics).await?;
        let latencies = sequential_installs(&admin, &api, more, crds).await?;
        println!(
            "  where the time went (mean per phase): {}",
            phase_means(&before, &phases(metrics).await?)
        );
        println!(
            "sequential installs ({}, {crds} CRDs + a Deployment each) with {concurrent} rolling out: created → Installed p50 {:?}, p95 {:?}, max {:?}",
            more.len(),
            common::pct(&latencies, 0.5),
            common::pct(&latencies, 0.95),
            latencies.last().copied().unwrap_or_default()
        );
    }
    if rollout_wait && let Some(pkg) = packages.get(sequential) {
        let latency = readiness_latency(&admin, &api, pkg, crds).await?;
        println!("readiness reported {latency:?} after the Deployment became available");
    }
    println!(
        "controller RSS at the end: {:.1} MiB (anonymous {:.1} MiB, file-backed {:.1} MiB; peak {:.1} MiB)",
        proc_mib(pid, "VmRSS:"),
        proc_mib(pid, "RssAnon:"),
        proc_mib(pid, "RssFile:"),
        proc_mib(pid, "VmHWM:")
    );
    controller.start_kill()?;
    Ok(())
}

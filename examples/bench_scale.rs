//! 1,000 ClusterExtensions and ten ClusterCatalogs on the local control plane (no node),
//! the controller as its own process (the release `olmv1` binary, `controller
//! --leader-elect --skip-rollout-wait`, default worker limit):
//! - 1,000 small distinct bundles (a Deployment, its ServiceAccount and a Role + binding;
//!   no CRD) pushed to a local registry, listed in eight small catalogs (125 packages
//!   each); both large bench catalogs (`shared/bench`, 59 and 73 MB) as two more;
//! - each extension in its own namespace with its own installer ServiceAccount bound to
//!   the least-privilege RBAC generated from its rendered bundle;
//! - printed: time until the ten catalogs serve and the controller's RSS peak during
//!   their ingest; time from creating the 1,000 ClusterExtensions (at once) until all
//!   are Installed; the controller's RSS settled and at peak (VmRSS sampled every
//!   100 ms, VmHWM); kube-apiserver CPU seconds during the burst (utime+stime of its
//!   /proc/<pid>/stat); API requests per second while idle (the controller's own
//!   client count `olmv1_kube_api_requests_total`, installer clients included).
//!
//! `cargo build --release --bin olmv1 --example bench_scale && target/release/examples/bench_scale [<extensions> <idle seconds, default 300>]`
//! (`BENCH_OLMV1_BIN=<path>` runs another controller binary; `BENCH_CONTROLLER_ARGS`
//! adds controller flags.)
//! Needs the cached Kubernetes binaries (hack/build-kube.sh), `docker-registry`, and
//! `OLMV1_ETCD` or the etcd crate's binary.

mod common;
use anyhow::Context;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension, conditions};
use olmv1::preflight::permissions::rbac::{BundledRbac, installer_rbac};
use olmv1::testenv::demo::{self, BundleSpec};
use olmv1::testenv::{manifests, registry};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const SMALL_CATALOGS: usize = 8;

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

/// utime + stime of a process in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which ends with the last ')').
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after ")".
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    ticks / 100.0 // USER_HZ
}

/// The pid of the kube-apiserver whose command line mentions `data_dir`.
fn apiserver_pid(data_dir: &Path) -> Option<u32> {
    let needle = data_dir.to_string_lossy().to_string();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd);
        (comm.trim() == "kube-apiserver" && cmd.contains(&needle)).then_some(pid)
    })
}

/// Sum of `olmv1_kube_api_requests_total`, from /metrics.
async fn api_requests(metrics_port: u16) -> anyhow::Result<f64> {
    let body = reqwest::get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .await?
        .text()
        .await?;
    Ok(body
        .lines()
        .filter(|l| l.starts_with("olmv1_kube_api_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(olmv1::testenv::control_plane::free_port()?)
}

/// The bundle of `pkg`: the demo bundle without its CRD and cluster permissions (a
/// Deployment, ServiceAccount, Role and RoleBinding).
fn bundle_files(pkg: &str) -> anyhow::Result<(BundleSpec, BTreeMap<String, Vec<u8>>)> {
    let spec = BundleSpec::new(pkg, "1.0.0");
    let mut files = demo::bundle_files(&spec);
    files.retain(|path, _| !path.ends_with(".crd.json"));
    let csv_path = format!("manifests/{pkg}.clusterserviceversion.json");
    let mut csv: Value = serde_json::from_slice(
        files
            .get(&csv_path)
            .with_context(|| format!("{csv_path} missing"))?,
    )?;
    csv["spec"]["customresourcedefinitions"] = json!({"owned": []});
    csv["spec"]["install"]["spec"]["clusterPermissions"] = json!([]);
    files.insert(csv_path, serde_json::to_vec_pretty(&csv)?);
    Ok((spec, files))
}

/// Renders the bundle for `namespace` (as the controller will), for its installer RBAC.
fn render(
    files: &BTreeMap<String, Vec<u8>>,
    pkg: &str,
    namespace: &str,
) -> anyhow::Result<Vec<Value>> {
    let dir = tempfile::tempdir()?;
    for (path, data) in files {
        let p = dir.path().join(path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, data)?;
    }
    std::fs::create_dir_all(dir.path().join("metadata"))?;
    let mut annotations = String::from("annotations:\n");
    for (k, v) in registry::bundle_labels(pkg, &["stable"]) {
        annotations.push_str(&format!("  {k}: {}\n", Value::String(v)));
    }
    std::fs::write(dir.path().join("metadata/annotations.yaml"), annotations)?;
    let bundle = olmv1::bundle::load_dir(dir.path(), &Default::default())?;
    Ok(olmv1::bundle::render(
        &bundle,
        namespace,
        None,
        &Default::default(),
    )?)
}

/// FBC of one package with one bundle, without the CRD's `olm.gvk` property.
fn catalog_entry(spec: &BundleSpec, image: &str) -> Vec<u8> {
    let pkg = &spec.package;
    let docs = [
        json!({"schema": "olm.package", "name": pkg, "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "name": "stable", "package": pkg, "entries": [{"name": spec.bundle_name()}]}),
        json!({"schema": "olm.bundle", "name": spec.bundle_name(), "package": pkg, "image": image,
               "properties": [{"type": "olm.package", "value": {"packageName": pkg, "version": spec.version}}]}),
    ];
    docs.iter()
        .map(|d| format!("{d}\n"))
        .collect::<String>()
        .into_bytes()
}

/// Namespace, installer ServiceAccount + RBAC of extension `pkg`.
async fn prepare_extension(
    admin: &kube::Client,
    pkg: &str,
    rendered: &[Value],
) -> anyhow::Result<()> {
    let ns = format!("ns-{pkg}");
    let ns_obj: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )?;
    manifests::apply_objects(admin, &[ns_obj]).await?;
    let rbac = installer_rbac(rendered, &ns, pkg, BundledRbac::Include)?;
    let objects: Vec<DynamicObject> = [rbac.service_account, rbac.cluster_role, rbac.binding]
        .into_iter()
        .map(serde_json::from_value)
        .collect::<Result<_, _>>()?;
    manifests::apply_objects(admin, &objects).await?;
    Ok(())
}

fn bench_dir() -> PathBuf {
    std::env::var_os("OLMV1_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"))
        .join("bench")
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

async fn count_true(api: &Api<ClusterExtension>, condition: &str) -> anyhow::Result<usize> {
    let mut done = 0;
    let mut params = kube::api::ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await?;
        done += page
            .items
            .iter()
            .filter(|e| {
                e.status
                    .as_ref()
                    .and_then(|s| conditions::find(&s.conditions, condition))
                    .is_some_and(|c| c.status == "True")
            })
            .count();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(done),
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let argv: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let count = argv.first().copied().unwrap_or(1000);
    // At least one whole cycle of kube-rs's default watch timeout (290 s): a shorter
    // window can miss the re-opening of every watch and understate the idle traffic.
    let idle_seconds = argv.get(1).copied().unwrap_or(300) as u64;
    // BENCH_OLMV1_BIN: another controller binary (e.g. the release one from a debug
    // build of this benchmark).
    let olmv1_bin = std::env::var_os("BENCH_OLMV1_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::current_exe()
                .ok()?
                .parent()
                .and_then(|examples| examples.parent())
                .map(|dir| dir.join("olmv1"))
        })
        .filter(|p| p.exists())
        .ok_or_else(|| {
            anyhow::anyhow!("the olmv1 binary is missing: cargo build --release --bin olmv1")
        })?;
    println!("load average at start: {}", load_average());

    let tmp = tempfile::tempdir()?;
    let common::cluster::BenchCluster {
        cp,
        admin,
        controller_kubeconfig,
        data_dir,
    } = common::cluster::start(tmp.path(), false).await?;
    let apiserver = apiserver_pid(&data_dir)
        .ok_or_else(|| anyhow::anyhow!("kube-apiserver process not found"))?;
    let reg = Arc::new(registry::TestRegistry::start()?);

    // Bundles, rendered objects and the small catalogs.
    let t = Instant::now();
    let packages: Vec<String> = (0..count).map(|i| format!("scale{i:04}")).collect();
    let pushed: Vec<(String, BundleSpec, String, Vec<Value>)> =
        futures::stream::iter(packages.iter().cloned())
            .map(|pkg| {
                let reg = reg.clone();
                async move {
                    let (spec, files) = bundle_files(&pkg)?;
                    let repo = format!("bundles/{pkg}:v1.0.0");
                    let image = registry::push_bundle_image(&reg, &repo, &files, &pkg, &["stable"])
                        .await?
                        .reference;
                    let rendered = render(&files, &pkg, &format!("ns-{pkg}"))?;
                    anyhow::Ok((pkg, spec, image, rendered))
                }
            })
            .buffer_unordered(8)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
    let mut small: Vec<Vec<u8>> = vec![Vec::new(); SMALL_CATALOGS];
    for (i, (_, spec, image, _)) in pushed.iter().enumerate() {
        small[i % SMALL_CATALOGS].extend(catalog_entry(spec, image));
    }
    let mut catalog_refs = Vec::new();
    for (i, fbc) in small.into_iter().enumerate() {
        let image = registry::push_catalog_image(
            &reg,
            &format!("catalogs/small{i}:v1"),
            &BTreeMap::from([("all/catalog.json".to_string(), fbc)]),
        )
        .await?;
        catalog_refs.push((format!("small{i}"), image.reference, 0));
    }
    let bench = bench_dir();
    let mut csvmeta: Option<Vec<u8>> = None;
    for (name, file) in [
        ("large-csvmeta", "cop-rendered-csvmeta-linear.jsonl.zst"),
        ("large-bundleobject", "large-bundleobject-v4.16.jsonl.zst"),
    ] {
        let path = bench.join(file);
        if !path.exists() {
            println!("{} not found: catalog {name} left out", path.display());
            continue;
        }
        let content = zstd::stream::decode_all(std::fs::File::open(&path)?)?;
        println!("{name}: {:.1} MB of FBC", content.len() as f64 / 1e6);
        let files = BTreeMap::from([("all/catalog.json".to_string(), content)]);
        let image =
            registry::push_catalog_image(&reg, &format!("catalogs/{name}:v1"), &files).await?;
        catalog_refs.push((name.to_string(), image.reference, -100));
        if name == "large-csvmeta" {
            csvmeta = files.into_values().next();
        }
    }
    println!(
        "pushed {count} bundles and {} catalog images in {:.1?}",
        catalog_refs.len(),
        t.elapsed()
    );

    // The controller.
    let (health, catalogs, metrics) = (free_port()?, free_port()?, free_port()?);
    let cache = tmp.path().join("cache");
    let log_path = std::env::temp_dir().join("bench_scale-controller.log");
    println!("controller log: {}", log_path.display());
    let log = std::fs::File::create(&log_path)?;
    let mut controller = tokio::process::Command::new(&olmv1_bin)
        .args([
            "controller".to_string(),
            "--leader-elect".to_string(),
            "--skip-rollout-wait".to_string(),
            "--log-format=json".to_string(),
            format!("--kubeconfig={}", controller_kubeconfig.display()),
            format!("--health-probe-bind-address=127.0.0.1:{health}"),
            format!("--catalog-server-bind-address=127.0.0.1:{catalogs}"),
            format!("--external-address=127.0.0.1:{catalogs}"),
            format!("--metrics-bind-address=127.0.0.1:{metrics}"),
            "--metrics-secure=false".to_string(),
            format!("--cache-dir={}", cache.display()),
            format!("--insecure-registry={}", reg.host()),
        ])
        .args(
            std::env::var("BENCH_CONTROLLER_ARGS")
                .map(|a| a.split_whitespace().map(String::from).collect::<Vec<_>>())
                .unwrap_or_default(),
        )
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()?;
    let pid = controller
        .id()
        .ok_or_else(|| anyhow::anyhow!("controller exited at once"))?;
    // RSS sampled every 100 ms (KiB), the maximum since the last reset.
    let max_rss = Arc::new(AtomicU64::new(0));
    {
        let max_rss = max_rss.clone();
        tokio::spawn(async move {
            loop {
                let kib = (proc_mib(pid, "VmRSS:") * 1024.0) as u64;
                max_rss.fetch_max(kib, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle_rss = proc_mib(pid, "VmRSS:");
    println!("controller (pid {pid}) started: RSS {idle_rss:.1} MiB");

    // Ten catalogs.
    let catalogs_api: Api<ClusterCatalog> = Api::all(admin.clone());
    let t = Instant::now();
    for (name, reference, priority) in &catalog_refs {
        let catalog: ClusterCatalog = serde_json::from_value(json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog", "metadata": {"name": name},
            "spec": {"priority": priority, "source": {"type": "Image", "image": {"ref": reference}}},
        }))?;
        catalogs_api
            .create(&PostParams::default(), &catalog)
            .await?;
    }
    loop {
        let serving = catalogs_api
            .list(&Default::default())
            .await?
            .items
            .iter()
            .filter(|c| {
                c.status.as_ref().is_some_and(|s| {
                    conditions::find(&s.conditions, "Serving").is_some_and(|c| c.status == "True")
                })
            })
            .count();
        if serving == catalog_refs.len() {
            break;
        }
        anyhow::ensure!(
            t.elapsed() < Duration::from_secs(600),
            "only {serving} catalogs serving after 600 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ingest_peak = max_rss.load(Ordering::Relaxed) as f64 / 1024.0;
    tokio::time::sleep(Duration::from_secs(5)).await;
    println!(
        "{} catalogs serving after {:.1?}: controller RSS peak during the ingest {ingest_peak:.1} MiB (+{:.1} MiB over the idle start), now {:.1} MiB",
        catalog_refs.len(),
        t.elapsed(),
        ingest_peak - idle_rss,
        proc_mib(pid, "VmRSS:")
    );

    // Namespaces and installer RBAC (not timed in the install figure).
    let t = Instant::now();
    let prepared: Vec<anyhow::Result<()>> = futures::stream::iter(pushed.iter())
        .map(|(pkg, _, _, rendered)| {
            let admin = admin.clone();
            async move { prepare_extension(&admin, pkg, rendered).await }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for r in prepared {
        r?;
    }
    println!(
        "{count} namespaces with installer ServiceAccount + RBAC created in {:.1?}",
        t.elapsed()
    );

    // The burst.
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    max_rss.store(0, Ordering::Relaxed);
    let cpu_before = cpu_seconds(apiserver);
    let controller_cpu_before = cpu_seconds(pid);
    let start = Instant::now();
    let created: Vec<anyhow::Result<()>> = futures::stream::iter(packages.iter())
        .map(|pkg| {
            let api = api.clone();
            async move {
                let ext: ClusterExtension = serde_json::from_value(json!({
                    "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
                    "metadata": {"name": pkg},
                    "spec": {"namespace": format!("ns-{pkg}"), "serviceAccount": {"name": format!("{pkg}-installer")},
                             "source": {"sourceType": "Catalog", "catalog": {"packageName": pkg}}},
                }))?;
                api.create(&PostParams::default(), &ext).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    for r in created {
        r?;
    }
    println!(
        "{count} ClusterExtensions created in {:.1?}",
        start.elapsed()
    );
    let mut last_report = Instant::now();
    loop {
        let done = count_true(&api, "Installed").await?;
        if done >= count {
            break;
        }
        if last_report.elapsed() > Duration::from_secs(15) {
            println!("  {done} Installed after {:.0?}", start.elapsed());
            last_report = Instant::now();
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(900),
            "only {done} installed after 900 s"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let all_installed = start.elapsed();
    let burst_peak = max_rss.load(Ordering::Relaxed) as f64 / 1024.0;
    println!(
        "all {count} Installed after {:.1} s (load average {})",
        all_installed.as_secs_f64(),
        load_average()
    );
    println!(
        "kube-apiserver CPU during the burst: {:.1} s; the controller's: {:.1} s",
        cpu_seconds(apiserver) - cpu_before,
        cpu_seconds(pid) - controller_cpu_before
    );
    println!("controller RSS peak during the burst (sampled): {burst_peak:.1} MiB");

    // Settle: two quiet 5 s windows in a row (at most 3 min).
    let settle = Instant::now();
    let mut quiet = 0;
    let mut last = api_requests(metrics).await?;
    while quiet < 2 && settle.elapsed() < Duration::from_secs(180) {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let now = api_requests(metrics).await?;
        quiet = if now - last <= 2.0 { quiet + 1 } else { 0 };
        last = now;
    }
    println!("settled {:.1?} after the last install", settle.elapsed());
    let before = api_requests(metrics).await?;
    let t = Instant::now();
    tokio::time::sleep(Duration::from_secs(idle_seconds)).await;
    let after = api_requests(metrics).await?;
    println!(
        "idle for {:.0?}: {:.0} API requests = {:.3} req/s (the controller's own count, olmv1_kube_api_requests_total)",
        t.elapsed(),
        after - before,
        (after - before) / t.elapsed().as_secs_f64()
    );
    println!(
        "controller RSS settled with {count} extensions and {} catalogs: {:.1} MiB (anonymous {:.1} MiB, file-backed {:.1} MiB); peak {:.1} MiB (VmHWM)",
        catalog_refs.len(),
        proc_mib(pid, "VmRSS:"),
        proc_mib(pid, "RssAnon:"),
        proc_mib(pid, "RssFile:"),
        proc_mib(pid, "VmHWM:")
    );

    // A new version of the 59 MB catalog: ingested while 1,000 extensions are installed,
    // all of which re-resolve (a catalog change re-reconciles every extension). The peak
    // is VmHWM after resetting it (/proc/<pid>/clear_refs), above the settled RSS.
    if let Some(mut content) = csvmeta {
        content.extend_from_slice(
            b"{\"schema\":\"olm.package\",\"name\":\"bench-scale-extra\",\"defaultChannel\":\"stable\"}\n",
        );
        let image = registry::push_catalog_image(
            &reg,
            "catalogs/large-csvmeta:v2",
            &BTreeMap::from([("all/catalog.json".to_string(), content)]),
        )
        .await?;
        let before_requests = api_requests(metrics).await?;
        let settled = proc_mib(pid, "VmRSS:");
        let reset = std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok();
        let t = Instant::now();
        catalogs_api
            .patch(
                "large-csvmeta",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(
                    json!({"spec": {"source": {"image": {"ref": image.reference}}}}),
                ),
            )
            .await?;
        loop {
            let c = catalogs_api.get("large-csvmeta").await?;
            let done = c.status.as_ref().is_some_and(|s| {
                s.resolved_source
                    .as_ref()
                    .is_some_and(|r| r.image.ref_ == image.reference)
                    && conditions::find(&s.conditions, "Serving")
                        .is_some_and(|c| c.status == "True")
            });
            if done {
                break;
            }
            anyhow::ensure!(
                t.elapsed() < Duration::from_secs(300),
                "new catalog version not served"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let served = t.elapsed();
        // The re-resolutions: until the API traffic settles again.
        let mut quiet = 0;
        let mut last = api_requests(metrics).await?;
        while quiet < 2 && t.elapsed() < Duration::from_secs(300) {
            tokio::time::sleep(Duration::from_secs(5)).await;
            let now = api_requests(metrics).await?;
            quiet = if now - last <= 2.0 { quiet + 1 } else { 0 };
            last = now;
        }
        let peak = proc_mib(pid, "VmHWM:");
        println!(
            "re-ingest of the 59 MB catalog with {count} extensions re-resolving: served after {:.1?}, settled after {:.1?} ({:.0} API requests); RSS peak {peak:.1} MiB = +{:.1} MiB over the settled {settled:.1} MiB{}",
            served,
            t.elapsed(),
            last - before_requests,
            peak - settled,
            if reset {
                ""
            } else {
                " [VmHWM not reset: includes earlier peaks]"
            }
        );
    }
    println!("load average at the end: {}", load_average());
    controller.start_kill()?;
    drop(cp);
    Ok(())
}

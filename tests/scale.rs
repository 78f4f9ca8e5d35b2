//! Worker limit and cache GC on the real control plane: the controller (in this
//! process, as its own ServiceAccount) runs with `--max-concurrent-reconciles=2` and
//! `--cache-gc-interval=2s`.
//! - a burst of ClusterExtensions never has more than 2 reconciles in flight (the
//!   gauges sampled all along, and the peak the controller recorded), and all install;
//! - old digests and catalog directories dropped into the cache go, while the installed
//!   extension's bundle image, the catalog's image and stored content stay, and the
//!   extension keeps working (drift is corrected after several GC runs).

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;
use support::bundles::{self, BundleSpec};
use support::extensions::{create_catalog, extension, grant_installer, wait_installed};

const LIMIT: usize = 2;

/// The controller of this test binary, and its plain-HTTP metrics URL.
fn controller() -> (&'static support::RunningController, String) {
    static METRICS: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    let port = *METRICS.get_or_init(|| {
        olmv1::testenv::control_plane::free_port().unwrap_or_else(|e| panic!("{e}"))
    });
    let running = support::controller_with(|args| {
        args.workers.max_concurrent_reconciles = LIMIT;
        args.workers.cache_gc_interval = Duration::from_secs(2);
        args.metrics_bind_address = format!("127.0.0.1:{port}");
        args.metrics_serving.metrics_secure = false;
    });
    (running, format!("http://127.0.0.1:{port}/metrics"))
}

/// The value of the sample `name{controller="clusterextension"}` (or unlabelled `name`).
async fn metric(url: &str, name: &str) -> Option<f64> {
    let body = reqwest::get(url).await.ok()?.text().await.ok()?;
    body.lines()
        .find(|l| {
            l.starts_with(&format!("{name}{{controller=\"clusterextension\"}} "))
                || l.starts_with(&format!("{name} "))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Publishes one catalog holding one single-bundle package per name.
async fn publish_packages(catalog: &str, packages: &[String]) -> (String, Vec<BundleSpec>) {
    let mut files = BTreeMap::new();
    let mut specs = Vec::new();
    for package in packages {
        let spec = BundleSpec::new(package, "1.0.0");
        let image = bundles::push_bundle(&spec).await;
        files.insert(
            format!("{package}/catalog.json"),
            bundles::catalog_fbc(package, &[(spec.clone(), image)]),
        );
        specs.push(spec);
    }
    let repo_tag = format!("catalogs/{catalog}:latest");
    olmv1::testenv::registry::push_catalog_image(support::registry(), &repo_tag, &files)
        .await
        .expect("push catalog");
    (format!("{}/{repo_tag}", support::registry().host()), specs)
}

#[tokio::test]
async fn a_burst_stays_within_the_worker_limit() {
    let (_, metrics) = controller();
    let admin = support::cluster().admin().await;
    let packages: Vec<String> = (0..8)
        .map(|i| support::unique(&format!("burst{i}")))
        .collect();
    let catalog = support::unique("burst");
    let (image, specs) = publish_packages(&catalog, &packages).await;
    create_catalog(&catalog, &image).await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let mut names = Vec::new();
    for (package, spec) in packages.iter().zip(&specs) {
        let ns = support::namespace(&admin, "burst").await;
        grant_installer(&ns, package, &[bundles::render(spec, &ns)]).await;
        names.push((package.clone(), ns));
    }
    // Sample the in-flight gauge while the burst runs.
    let sampler = {
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut most = 0.0f64;
            let mut samples = 0;
            loop {
                if let Some(v) = metric(&metrics, "olmv1_active_workers").await {
                    most = most.max(v);
                    samples += 1;
                }
                if samples > 0 && most > LIMIT as f64 {
                    return (most, samples);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                if samples > 100_000 {
                    return (most, samples);
                }
            }
        })
    };
    let creates = names.iter().map(|(package, ns)| {
        let api = api.clone();
        async move {
            api.create(
                &PostParams::default(),
                &extension(package, ns, package, json!({})),
            )
            .await
            .expect("create");
        }
    });
    futures::future::join_all(creates).await;
    for (package, _) in &names {
        wait_installed(&api, package, "1.0.0").await;
    }
    sampler.abort();
    let sampled = sampler.await;
    if let Ok((most, samples)) = sampled {
        panic!("{most} reconciles in flight (limit {LIMIT}) after {samples} samples");
    }
    let peak = metric(&metrics, "olmv1_active_workers_peak")
        .await
        .expect("peak gauge");
    assert_eq!(
        peak, LIMIT as f64,
        "the burst must reach the limit and never pass it"
    );
    assert_eq!(
        metric(&metrics, "olmv1_max_concurrent_reconciles").await,
        Some(LIMIT as f64)
    );
}

#[tokio::test]
async fn cache_gc_removes_unreferenced_entries_and_keeps_what_is_in_use() {
    let (running, metrics) = controller();
    let admin = support::cluster().admin().await;
    let package = support::unique("gcpkg");
    let catalog = support::unique("gccat");
    let (image, specs) = publish_packages(&catalog, std::slice::from_ref(&package)).await;
    create_catalog(&catalog, &image).await;
    let ns = support::namespace(&admin, "gc").await;
    grant_installer(&ns, &package, &[bundles::render(&specs[0], &ns)]).await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(
        &PostParams::default(),
        &extension(&package, &ns, &package, json!({})),
    )
    .await
    .expect("create");
    let installed = wait_installed(&api, &package, "1.0.0").await;

    // What is in use: the bundle image of the installed revision, the catalog's image
    // and its stored content.
    let images = running.cache_dir.join("images/images");
    let catalogs = running.cache_dir.join("catalogs");
    let message = support::extensions::condition(&installed, "Installed")
        .expect("Installed")
        .message;
    let bundle_digest = message
        .split("@sha256:")
        .nth(1)
        .map(|rest| format!("sha256-{}", &rest[..64]))
        .expect("digest in the Installed message");
    let catalog_obj = Api::<ClusterCatalog>::all(admin.clone())
        .get(&catalog)
        .await
        .expect("catalog");
    let catalog_ref = catalog_obj
        .status
        .and_then(|s| s.resolved_source)
        .expect("resolved source")
        .image
        .ref_;
    let catalog_digest = catalog_ref
        .rsplit_once('@')
        .map(|(_, d)| d.replace(':', "-"))
        .expect("pinned");
    let in_use = [images.join(&bundle_digest), images.join(&catalog_digest)];
    for dir in &in_use {
        let present: Vec<_> = std::fs::read_dir(&images)
            .map(|r| r.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(
            dir.is_dir(),
            "{} missing before the GC (bundle {bundle_digest}, catalog {catalog_digest}; present: {present:?})",
            dir.display()
        );
    }

    // Old, unreferenced entries.
    let mut old = Vec::new();
    for i in 0..3 {
        let hex = format!("{:064x}", rand::random::<u64>() as u128 * 1000 + i);
        let dir = images.join(format!("sha256-{hex}"));
        std::fs::create_dir_all(dir.join("whole/content/manifests")).expect("mkdir");
        std::fs::write(dir.join("whole/content/manifests/csv.yaml"), "old").expect("write");
        std::fs::write(dir.join("whole/meta.json"), "{}").expect("write");
        old.push(dir);
    }
    let ghost = support::unique("ghost");
    let version_dir = catalogs.join(format!(".{ghost}_1"));
    std::fs::create_dir_all(&version_dir).expect("mkdir");
    std::fs::write(version_dir.join("catalog.jsonl"), "{}\n").expect("write");
    std::os::unix::fs::symlink(format!(".{ghost}_1"), catalogs.join(&ghost)).expect("link");
    old.push(version_dir);
    old.push(catalogs.join(&ghost));

    support::eventually(60, "old cache entries removed", || async {
        old.iter()
            .all(|p| std::fs::symlink_metadata(p).is_err())
            .then_some(())
    })
    .await;
    let removed = metric(&metrics, "olmv1_cache_gc_removed_total")
        .await
        .unwrap_or(0.0);
    assert!(removed >= 4.0, "removed {removed}");
    for dir in &in_use {
        assert!(dir.is_dir(), "{} removed though in use", dir.display());
    }
    assert!(
        olmv1::fbc::store::current_dir(&catalogs, &catalog).is_some(),
        "stored catalog removed"
    );
    let served = reqwest::get(format!(
        "{}/catalogs/{catalog}/api/v1/all",
        running.catalog_server
    ))
    .await
    .expect("GET all");
    assert_eq!(served.status(), 200);

    // The extension keeps working: drift is corrected from the kept bundle image.
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let list = deployments.list(&Default::default()).await.expect("list");
    let deployment = list.items[0].metadata.name.clone().expect("name");
    let uid = list.items[0].metadata.uid.clone();
    deployments
        .delete(&deployment, &DeleteParams::default())
        .await
        .expect("delete");
    support::eventually(60, "deployment restored", || async {
        let d = deployments.get_opt(&deployment).await.ok()??;
        (d.metadata.uid != uid).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    for dir in &in_use {
        assert!(dir.is_dir(), "{} removed though in use", dir.display());
    }
}

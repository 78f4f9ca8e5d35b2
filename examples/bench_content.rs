//! Catalog content client benchmark: ingest a large rendered catalog into the catalog
//! store, serve it with this project's catalog server on loopback, fetch every package
//! through the content client (`metas?package=`) into its cache, and report the cache
//! size (estimated bytes of the compact projection, and the growth of the process RSS
//! while filling it from cold — an upper bound, since the server runs in the same
//! process and its index and gzip cache grow during the same pass) and the latency of resolution with the cache warm — cache lookup
//! plus `resolve`, for a fresh install and for an upgrade from the package's oldest
//! bundle — as p50/p99/max over every package (several rounds).
//!
//! `cargo run --release --example bench_content [-- <file.jsonl.zst>]`
//! Targets (docs/design/benchmarks.md): cache ≤ 32 MiB, p99 ≤ 1 ms.

mod common;

use common::{oldest_installed, pct, status_kib};
use olmv1::api::ClusterCatalog;
use olmv1::content::{ContentClient, ContentConfig};
use olmv1::resolve::{Availability, CatalogInput, ResolveRequest, resolve};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;

fn mib(b: f64) -> f64 {
    b / (1024.0 * 1024.0)
}

fn report(label: &str, mut d: Vec<Duration>) {
    d.sort();
    println!(
        "  {label:<34} n={:<5} p50 {:>8.1?}  p99 {:>8.1?}  max {:>8.1?}",
        d.len(),
        pct(&d, 0.5),
        pct(&d, 0.99),
        d.last().copied().unwrap_or_default()
    );
}

fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let file = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let base = std::env::var_os("OLMV1_SHARED_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/work/shared"));
            base.join("bench/cop-rendered-csvmeta-linear.jsonl.zst")
        });
    let work = tempfile::tempdir()?;
    let root = work.path().join("catalogs");
    let src = work.path().join("src");
    std::fs::create_dir_all(&src)?;
    {
        let mut input = std::fs::File::open(&file)?;
        let mut out = std::io::BufWriter::new(std::fs::File::create(src.join("catalog.json"))?);
        std::io::copy(&mut zstd::stream::read::Decoder::new(&mut input)?, &mut out)?;
    }
    let t = Instant::now();
    // Lenient: the rendered catalog has real duplicate bundle names.
    let options = olmv1::fbc::StoreOptions {
        strict: false,
        ..Default::default()
    };
    let stored = olmv1::fbc::store_with_options(&root, "bench", &src, &options)?;
    std::fs::remove_dir_all(&src)?;
    let packages: Vec<String> = olmv1::fbc::store::read_index(&stored.dir)?
        .by_package
        .into_keys()
        .collect();
    println!(
        "{}: stored {:.1} MB, {} blobs, {} packages, {} bundles in {:.2?}",
        file.display(),
        stored.size as f64 / 1e6,
        stored.blobs,
        packages.len(),
        stored.summary.bundles,
        t.elapsed()
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let router = olmv1::server::catalog::router(&root);
        tokio::spawn(olmv1::server::catalog::serve(
            listener,
            router,
            std::future::pending(),
        ));
        let catalog: ClusterCatalog = serde_json::from_value(json!({
            "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
            "metadata": {"name": "bench"},
            "spec": {"source": {"type": "Image", "image": {"ref": "example.com/bench:latest"}}},
            "status": {
                "conditions": [{"type": "Serving", "status": "True", "reason": "Available",
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "resolvedSource": {"type": "Image", "image": {"ref": "example.com/bench@sha256:0"}},
                "urls": {"base": format!("http://{addr}/catalogs/bench")},
            }
        }))?;
        let client = ContentClient::new(ContentConfig::default())?;

        // Fill the cache: every package once over HTTP.
        let rss0 = status_kib("VmRSS:");
        let t = Instant::now();
        let mut fetch_times = Vec::with_capacity(packages.len());
        for p in &packages {
            let t = Instant::now();
            client.package(&catalog, p).await?;
            fetch_times.push(t.elapsed());
        }
        let fill = t.elapsed();
        let rss1 = status_kib("VmRSS:");
        let (count, bytes) = client.cache_size();
        let stats = client.stats();
        println!(
            "fetched {count} packages in {fill:.2?} ({} HTTP requests)",
            stats.requests
        );
        report("fetch one package (metas, cold)", fetch_times);
        println!(
            "cache: compact projection ~{:.2} MiB estimated; process RSS grew {:.1} MiB while filling it from cold, server included (target <= 32 MiB)",
            mib(bytes as f64),
            mib((rss1.saturating_sub(rss0) * 1024) as f64)
        );

        // Resolve every package with the cache warm.
        let labels = BTreeMap::new();
        let mut fresh = Vec::new();
        let mut upgrade = Vec::new();
        let mut resolve_only = Vec::new();
        let mut failures = 0usize;
        for _ in 0..ROUNDS {
            for p in &packages {
                let mut request = ResolveRequest {
                    package: p.clone(),
                    ..Default::default()
                };
                let t = Instant::now();
                let content = client.package(&catalog, p).await?;
                let input = [CatalogInput {
                    name: "bench",
                    priority: 0,
                    availability: Availability::Available,
                    labels: &labels,
                    content: Ok(&content),
                }];
                let t2 = Instant::now();
                let r = resolve(&request, &input);
                resolve_only.push(t2.elapsed());
                fresh.push(t.elapsed());
                failures += usize::from(r.is_err());
                if let Some(installed) = oldest_installed(&content) {
                    request.installed = Some(installed);
                    let t = Instant::now();
                    let content = client.package(&catalog, p).await?;
                    let input = [CatalogInput {
                        name: "bench",
                        priority: 0,
                        availability: Availability::Available,
                        labels: &labels,
                        content: Ok(&content),
                    }];
                    let t2 = Instant::now();
                    let r = resolve(&request, &input);
                    resolve_only.push(t2.elapsed());
                    upgrade.push(t.elapsed());
                    failures += usize::from(r.is_err());
                }
            }
        }
        let stats2 = client.stats();
        println!(
            "resolution with the cache warm ({ROUNDS} rounds; {} extra HTTP requests; {} resolutions ended in an error, e.g. declared dependencies):",
            stats2.requests - stats.requests,
            failures / ROUNDS
        );
        report("fresh install (lookup + resolve)", fresh.clone());
        report("upgrade from oldest (lookup + resolve)", upgrade.clone());
        let mut all = fresh;
        all.extend(upgrade);
        report("all (lookup + resolve)", all);
        report("resolve only", resolve_only);
        anyhow::Ok(())
    })
}

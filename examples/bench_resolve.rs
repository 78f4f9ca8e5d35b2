//! Resolution benchmark over a large rendered catalog (one FBC blob per JSON line,
//! zstd-compressed): groups blobs by package into `PackageContent`, then resolves every
//! package twice — fresh install, and upgrade from its oldest bundle — with the content
//! already in memory, and prints per-resolution p50/p99/max and the approximate size of
//! the cached content (full typed model and a resolution-only projection).
//!
//! `cargo run --release --example bench_resolve [-- <file.jsonl.zst>]`

mod common;

use common::{oldest_installed, pct};
use olmv1::fbc::model::{Bundle, PackageContent, Property};
use olmv1::resolve::{Availability, CatalogInput, ResolveRequest, resolve};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::time::{Duration, Instant};

/// Estimated bytes of `c` as the content cache holds it (the library's own estimate).
fn content_size(c: &PackageContent) -> usize {
    olmv1::content::compact::estimated_size(c)
}

/// What resolution actually reads: bundle name, image, the `olm.package` property and
/// property types (for the dependency check); channels and deprecations unchanged.
fn slim(c: &PackageContent) -> PackageContent {
    PackageContent {
        package: c.package.as_ref().map(|p| olmv1::fbc::model::Package {
            icon: None,
            description: None,
            properties: vec![],
            ..p.clone()
        }),
        channels: c.channels.clone(),
        bundles: c
            .bundles
            .iter()
            .map(|b| Bundle {
                properties: b
                    .properties
                    .iter()
                    .map(|p| Property {
                        type_: p.type_.clone(),
                        value: if p.type_ == "olm.package" {
                            p.value.clone()
                        } else {
                            Value::Null
                        },
                    })
                    .collect(),
                related_images: vec![],
                ..b.clone()
            })
            .collect(),
        deprecations: c.deprecations.clone(),
    }
}

fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<usize>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/work/shared/bench/cop-rendered-csvmeta-linear.jsonl.zst".to_string());
    let rss0 = rss_bytes();
    let t = Instant::now();
    let reader = std::io::BufReader::new(zstd::Decoder::new(std::fs::File::open(&path)?)?);
    let mut packages: BTreeMap<String, PackageContent> = BTreeMap::new();
    let mut blobs = 0usize;
    let mut null_images = 0usize;
    for line in reader.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let mut blob: Value = serde_json::from_str(&line)?;
        // Go's encoding/json reads `"image": null` (seen in relatedImages) as ""; the
        // typed model rejects it, so normalise here.
        if let Some(Value::Array(related)) = blob.get_mut("relatedImages") {
            for r in related {
                if let Some(img) = r.get_mut("image")
                    && img.is_null()
                {
                    *img = Value::String(String::new());
                    null_images += 1;
                }
            }
        }
        let key = if blob.get("schema").and_then(Value::as_str) == Some("olm.package") {
            "name"
        } else {
            "package"
        };
        let Some(pkg) = blob.get(key).and_then(Value::as_str) else {
            continue;
        };
        packages
            .entry(pkg.to_string())
            .or_default()
            .push_blob(&blob)?;
        blobs += 1;
    }
    let load = t.elapsed();
    let rss1 = rss_bytes();
    let bundles: usize = packages.values().map(|c| c.bundles.len()).sum();
    let full: usize = packages.values().map(content_size).sum();
    let slim_packages: BTreeMap<&String, PackageContent> =
        packages.iter().map(|(k, v)| (k, slim(v))).collect();
    let slim_size: usize = slim_packages.values().map(content_size).sum();
    println!(
        "{path}: {} packages, {bundles} bundles, {blobs} blobs ({null_images} with image: null), loaded in {load:.2?}",
        packages.len()
    );
    println!(
        "cached content, full typed model: ~{:.1} MiB estimated (RSS grew {:.1} MiB while loading)",
        mib(full),
        mib(rss1.saturating_sub(rss0))
    );
    println!(
        "cached content, resolution-only projection: ~{:.1} MiB estimated",
        mib(slim_size)
    );

    let labels = BTreeMap::new();
    let run = |name: &str, contents: &mut dyn Iterator<Item = (&String, &PackageContent)>| {
        let mut fresh = Vec::new();
        let mut upgrade = Vec::new();
        let mut failures = 0usize;
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        let mut note = |r: &Result<_, olmv1::resolve::ResolveError>| {
            if let Err(e) = r {
                let e = e.to_string();
                let kind = if e.contains("dependency declared") {
                    "bundle declares a dependency (rejected)".to_string()
                } else {
                    e.split(" for package")
                        .next()
                        .unwrap_or_default()
                        .to_string()
                };
                *kinds.entry(kind).or_default() += 1;
            }
        };
        for (pkg, content) in contents {
            let cats = [CatalogInput {
                name: "bench",
                priority: 0,
                availability: Availability::Available,
                labels: &labels,
                content: Ok(content),
            }];
            let mut request = ResolveRequest {
                package: pkg.clone(),
                ..Default::default()
            };
            let t = Instant::now();
            let r = resolve(&request, &cats);
            fresh.push(t.elapsed());
            failures += usize::from(r.is_err());
            note(&r);
            if let Some(installed) = oldest_installed(content) {
                request.installed = Some(installed);
                let t = Instant::now();
                let r = resolve(&request, &cats);
                upgrade.push(t.elapsed());
                failures += usize::from(r.is_err());
                note(&r);
            }
        }
        let mut all: Vec<Duration> = fresh.iter().chain(&upgrade).copied().collect();
        all.sort();
        fresh.sort();
        upgrade.sort();
        println!(
            "[{name}] {} resolutions ({} fresh, {} upgrade, {failures} failed): total {:.2?}",
            all.len(),
            fresh.len(),
            upgrade.len(),
            all.iter().sum::<Duration>()
        );
        for (kind, n) in &kinds {
            println!("[{name}]   failed: {n} x {kind}");
        }
        for (what, d) in [("all", &all), ("fresh", &fresh), ("upgrade", &upgrade)] {
            println!(
                "[{name}]   {what:<8} p50 {:>9.1?}  p99 {:>9.1?}  max {:>9.1?}",
                pct(d, 0.50),
                pct(d, 0.99),
                d.last().copied().unwrap_or_default()
            );
        }
    };
    run("full model", &mut packages.iter());
    run(
        "projection",
        &mut slim_packages.iter().map(|(k, v)| (*k, v)),
    );
    Ok(())
}

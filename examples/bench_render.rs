//! Benchmark: load + validate + render `sn-operator/0.19.7` from its unpacked directory
//! many times; prints p50/max wall time and peak RSS (VmHWM) above the baseline.
//!
//! The baseline is taken after a warm-up over the small test bundles of
//! `src/bundle/testdata/bundles`, so that the code pages of the binary touched by
//! loading, validating and rendering (file-backed, ~5 MB, independent of the bundle)
//! are not counted as memory used for the bundle. The anonymous (heap) part is printed
//! on its own (RssAnon after rendering, when everything is alive).
//!
//! It runs as the product runs: the olmv1 binary's allocator (jemalloc, configured in
//! `.cargo/config.toml`) and `LoadOptions::default()`, whose parsing threads follow the
//! manifests' size (two on a 2-CPU machine for this bundle).
//!
//! `cargo run --release --example bench_render [bundle-dir] [iterations]`
//! (`BENCH_THREADS=n` sets the parsing threads, 1 = one thread, the lowest peak memory;
//! `BENCH_VERBOSE=1` prints per-iteration load time and RSS).

use olmv1::bundle::{CertProvider, LoadOptions, RenderOptions, load_dir, render_owned};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The olmv1 binary's allocator (src/main.rs), so that the figures are the product's.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn status_kib(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

fn dir_size(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    for sub in ["manifests", "metadata"] {
        if let Ok(rd) = std::fs::read_dir(dir.join(sub)) {
            for e in rd.flatten() {
                total += e.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    total
}

/// Loads and renders every small test bundle (in each install mode) to page in the code.
fn warm_up() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/bundle/testdata/bundles");
    let Ok(entries) = std::fs::read_dir(&root) else {
        return;
    };
    let configs = [
        None,
        Some(serde_json::json!({"watchNamespace": "operators"})),
        Some(serde_json::json!({"watchNamespace": "watched"})),
    ];
    for dir in entries.flatten().map(|e| e.path()) {
        for config in &configs {
            if let Ok(bundle) = load_dir(&dir, &LoadOptions::default()) {
                let _ = render_owned(
                    bundle,
                    "operators",
                    config.as_ref(),
                    &RenderOptions::default(),
                );
            }
        }
    }
}

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let dir = args.next().map(PathBuf::from).unwrap_or_else(|| {
        olmv1::testenv::shared_dir("fixtures/bundles/sn-operator/0.19.7")
            .unwrap_or_else(|| PathBuf::from("/work/shared/fixtures/bundles/sn-operator/0.19.7"))
    });
    let iterations: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(50);
    let size = dir_size(&dir);
    let cold_baseline = status_kib("VmRSS:").unwrap_or(0);
    let cold_anon = status_kib("RssAnon:").unwrap_or(0);
    warm_up();
    let baseline = status_kib("VmRSS:").unwrap_or(0);
    let baseline_anon = status_kib("RssAnon:").unwrap_or(0);
    let mut peak_anon = baseline_anon;
    let load_options = LoadOptions {
        parallelism: std::env::var("BENCH_THREADS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(LoadOptions::default().parallelism),
        ..LoadOptions::default()
    };
    let options = RenderOptions {
        cert_provider: CertProvider::CertManager,
        ..Default::default()
    };
    let mut times: Vec<Duration> = Vec::with_capacity(iterations);
    let mut objects_count = 0;
    for _ in 0..iterations {
        let start = Instant::now();
        let bundle = match load_dir(&dir, &load_options) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("load failed: {e}");
                return std::process::ExitCode::FAILURE;
            }
        };
        let t_load = start.elapsed();
        if std::env::var_os("BENCH_VERBOSE").is_some() {
            eprintln!(
                "load {:.1} ms, VmHWM {:?} KiB, VmRSS {:?} KiB",
                t_load.as_secs_f64() * 1e3,
                status_kib("VmHWM:"),
                status_kib("VmRSS:")
            );
        }
        let objects = match render_owned(bundle, "operators", None, &options) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("render failed: {e}");
                return std::process::ExitCode::FAILURE;
            }
        };
        // the objects are handed to the applier: dropping them is not part of rendering
        times.push(start.elapsed());
        peak_anon = peak_anon.max(status_kib("RssAnon:").unwrap_or(0));
        objects_count = objects.len();
        drop(objects);
    }
    times.sort();
    let p50 = times[times.len() / 2];
    let max = times[times.len() - 1];
    let peak = status_kib("VmHWM:").unwrap_or(0);
    let above = peak.saturating_sub(baseline);
    let above_anon = peak_anon.saturating_sub(baseline_anon);
    let above_cold = peak.saturating_sub(cold_baseline);
    println!(
        "bundle: {} ({:.1} MB on disk), {objects_count} objects",
        dir.display(),
        size as f64 / 1e6
    );
    println!("iterations: {iterations}");
    println!(
        "load+validate+render: p50 {:.1} ms, max {:.1} ms (target <= 100 ms)",
        p50.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
    println!(
        "peak RSS (VmHWM) {:.1} MB, baseline {:.1} MB, above baseline {:.1} MB = {:.2}x bundle size (target <= 3x)",
        peak as f64 / 1024.0,
        baseline as f64 / 1024.0,
        above as f64 / 1024.0,
        (above * 1024) as f64 / size.max(1) as f64
    );
    println!(
        "  heap (RssAnon after render) above the warm baseline {:.1} MB = {:.2}x, above the cold start {:.1} MB = {:.2}x; \
         VmHWM above the cold start (code pages counted) {:.1} MB = {:.2}x",
        above_anon as f64 / 1024.0,
        (above_anon * 1024) as f64 / size.max(1) as f64,
        peak_anon.saturating_sub(cold_anon) as f64 / 1024.0,
        (peak_anon.saturating_sub(cold_anon) * 1024) as f64 / size.max(1) as f64,
        above_cold as f64 / 1024.0,
        (above_cold * 1024) as f64 / size.max(1) as f64
    );
    std::process::ExitCode::SUCCESS
}

//! Catalog ingest and serving benchmark over the large catalogs in `shared/bench`.
//!
//! For each catalog: decompress it into a temporary catalog directory (timed separately),
//! ingest it (parse + validate + index + store) and report the time and the peak RSS
//! above the idle size (VmHWM after resetting it through /proc/self/clear_refs), then
//! serve it and measure `metas?package=<p>` latency and throughput with a loopback client.
//!
//! `cargo run --release --example bench_catalog [-- <file.jsonl.zst>...]`

mod common;

use common::status_kib;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const CATALOGS: [&str; 2] = [
    "cop-rendered-csvmeta-linear.jsonl.zst",
    "large-bundleobject-v4.16.jsonl.zst",
];
const CONCURRENCY: [usize; 2] = [4, 16];
const LOAD_SECONDS: u64 = 3;

fn reset_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn main() -> anyhow::Result<()> {
    let args: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    let files: Vec<PathBuf> = if args.is_empty() {
        let base = std::env::var_os("OLMV1_SHARED_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"));
        let base = if base.join("bench").exists() {
            base
        } else {
            PathBuf::from("/work/shared")
        };
        CATALOGS
            .iter()
            .map(|c| base.join("bench").join(c))
            .collect()
    } else {
        args
    };
    let work = tempfile::tempdir()?;
    let root = work.path().join("catalogs");
    let mut served = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let name = format!("bench-{i}");
        let src = work.path().join(format!("src-{i}"));
        std::fs::create_dir_all(&src)?;
        let t = Instant::now();
        let mut input = std::fs::File::open(file)?;
        let mut out = std::io::BufWriter::new(std::fs::File::create(src.join("catalog.json"))?);
        let bytes = std::io::copy(&mut zstd::stream::read::Decoder::new(&mut input)?, &mut out)?;
        drop(out);
        let decompress = t.elapsed();

        let hwm_ok = reset_hwm();
        let idle = status_kib("VmRSS:");
        let t = Instant::now();
        // Lenient: the rendered catalog has real duplicate bundle names (reported below).
        let options = olmv1::fbc::StoreOptions {
            strict: false,
            ..Default::default()
        };
        let stored = olmv1::fbc::store_with_options(&root, &name, &src, &options)?;
        let ingest = t.elapsed();
        let peak = status_kib("VmHWM:");
        println!("== {}", file.display());
        println!(
            "  decompress: {:.3} s ({:.1} MB)   ingest: {:.3} s ({:.0} MB/s)",
            decompress.as_secs_f64(),
            bytes as f64 / 1e6,
            ingest.as_secs_f64(),
            bytes as f64 / 1e6 / ingest.as_secs_f64()
        );
        println!(
            "  blobs {}  packages {}  channels {}  bundles {}  stored {:.1} MB",
            stored.blobs,
            stored.summary.packages,
            stored.summary.channels,
            stored.summary.bundles,
            stored.size as f64 / 1e6
        );
        println!(
            "  peak RSS during ingest: {:.1} MiB above idle ({:.1} MiB idle){}",
            peak.saturating_sub(idle) as f64 / 1024.0,
            idle as f64 / 1024.0,
            if hwm_ok {
                ""
            } else {
                " [VmHWM could not be reset: figure includes earlier peaks]"
            }
        );
        if !stored.warnings.is_empty() {
            println!(
                "  catalog breaks invariants (stored as catalogd does): {}",
                stored.warnings.join("; ")
            );
        }
        std::fs::remove_dir_all(&src)?;
        let index = olmv1::fbc::store::read_index(&stored.dir)?;
        // A package of median response size, and the largest one.
        let mut sizes: Vec<(u64, String)> = index
            .by_package
            .iter()
            .map(|(p, s)| (s.iter().map(|x| x[1]).sum(), p.clone()))
            .collect();
        sizes.sort();
        let median = sizes[sizes.len() / 2].clone();
        served.push((name, median));
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(olmv1::server::catalog::serve(
            listener,
            olmv1::server::catalog::router(root.clone()),
            async move {
                let _ = stopped.await;
            },
        ));
        for (name, (size, package)) in served {
            for (gzip, conc) in [false, true].into_iter().flat_map(|g| CONCURRENCY.map(|c| (g, c))) {
                let url = format!("{base}/catalogs/{name}/api/v1/metas?package={package}");
                let (lat, n, secs) = load(&url, gzip, conc).await?;
                println!(
                    "== {name} metas?package={package} ({:.1} KB, {})",
                    size as f64 / 1e3,
                    if gzip { "gzip, client does not decompress" } else { "identity" }
                );
                println!(
                    "  {n} requests in {secs:.2} s = {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms (concurrency {conc}, 2 runtime threads, client in-process)",
                    n as f64 / secs,
                    lat[lat.len() / 2].as_secs_f64() * 1e3,
                    lat[lat.len() * 99 / 100].as_secs_f64() * 1e3
                );
            }
        }
        let _ = stop.send(());
        server.await??;
        anyhow::Ok(())
    })?;
    Ok(())
}

async fn load(
    url: &str,
    gzip: bool,
    concurrency: usize,
) -> anyhow::Result<(Vec<Duration>, usize, f64)> {
    // The client asks for gzip but does not decompress: the figures are the server's
    // (a real client decompresses on its own CPU, not on the server's two cores).
    let mut headers = reqwest::header::HeaderMap::new();
    if gzip {
        headers.insert(
            reqwest::header::ACCEPT_ENCODING,
            reqwest::header::HeaderValue::from_static("gzip"),
        );
    }
    let client = reqwest::Client::builder()
        .no_gzip()
        .default_headers(headers)
        .build()?;
    // Warm-up (loads the index).
    let r = client.get(url).send().await?;
    let encoded = r.headers().get(reqwest::header::CONTENT_ENCODING).is_some();
    anyhow::ensure!(
        encoded == gzip,
        "gzip requested: {gzip}, got Content-Encoding: {encoded}"
    );
    r.bytes().await?;
    let start = Instant::now();
    let deadline = start + Duration::from_secs(LOAD_SECONDS);
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let client = client.clone();
        let url = url.to_string();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                let r = client.get(&url).send().await?;
                anyhow::ensure!(r.status() == 200, "status {}", r.status());
                r.bytes().await?;
                lat.push(t.elapsed());
            }
            anyhow::Ok(lat)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    let secs = start.elapsed().as_secs_f64();
    all.sort();
    let n = all.len();
    Ok((all, n, secs))
}

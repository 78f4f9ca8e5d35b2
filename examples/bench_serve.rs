//! Catalog serving benchmark: the catalogd-compatible HTTP API under a keep-alive client,
//! plain HTTP and TLS, identity and gzip.
//!
//! Each catalog (default: the two large catalogs in `shared/bench`) is decompressed and
//! stored as the catalog controller stores it; the server runs on its own 2-thread
//! runtime (HTTP and HTTPS listeners, a throw-away CA from the test environment), the
//! client on another thread, over loopback. For every catalog it measures `GET /all`
//! (the whole catalog) and `GET metas?package=<p>` for the package of median response
//! size, sequentially on one keep-alive HTTP/1.1 connection (after warm-up requests),
//! and prints p50/p99, throughput and `cpu/req`, the process's CPU time (server and
//! client together, user + system) per measured request, a figure that other load on
//! the machine disturbs less than the latencies. The client is reqwest (hyper, rustls
//! with its default order of cipher suites) for every row: it reads each body chunk by
//! chunk as hyper hands them over and only counts the bytes (as a client that parses
//! while it reads; nothing is collected). gzip rows send `Accept-Encoding: gzip` and do
//! not decompress (a real client decompresses on its own CPU). Lines starting with
//! `BENCH` are the figures `hack/bench.sh` collects.
//!
//! `cargo run --release --example bench_serve [-- [--all N] [--metas N] <file.jsonl.zst>...]`
//! Targets (docs/design/benchmarks.md): the 59 MB catalog's `/all` over TLS p50 ≤ 40 ms; a ~56 KB
//! `metas` answer p99 ≤ 2 ms.
//!
//! TLS figures depend on the CPU and on how the AES-GCM code was built. The server's
//! TLS 1.3 AES-GCM records are ring's (`src/server/gcm/`: VAES with AVX2 or AVX-512),
//! the client's aws-lc's (VAES only with AVX-512; `.cargo/config.toml` sets
//! `AWS_LC_SYS_SMALL=0`, or the release profile's `opt-level = "s"` builds aws-lc
//! without it).

mod common;

use common::pct;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const CATALOGS: [&str; 2] = [
    "cop-rendered-csvmeta-linear.jsonl.zst",
    "large-bundleobject-v4.16.jsonl.zst",
];

struct Args {
    all: usize,
    metas: usize,
    files: Vec<PathBuf>,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        all: 15,
        metas: 400,
        files: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--all" => a.all = it.next().unwrap_or_default().parse()?,
            "--metas" => a.metas = it.next().unwrap_or_default().parse()?,
            _ => a.files.push(PathBuf::from(arg)),
        }
    }
    if a.files.is_empty() {
        let base = std::env::var_os("OLMV1_SHARED_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"));
        let base = if base.join("bench").exists() {
            base
        } else {
            PathBuf::from("/work/shared")
        };
        a.files = CATALOGS
            .iter()
            .map(|c| base.join("bench").join(c))
            .collect();
    }
    Ok(a)
}

/// Stores `file` (zstd-compressed FBC) as catalog `name`; returns the stored size and
/// the package of median `metas?package=` size with that size.
fn store(root: &Path, work: &Path, name: &str, file: &Path) -> anyhow::Result<(u64, String, u64)> {
    let src = work.join(format!("src-{name}"));
    std::fs::create_dir_all(&src)?;
    let mut input = std::fs::File::open(file)?;
    let mut out = std::io::BufWriter::new(std::fs::File::create(src.join("catalog.json"))?);
    std::io::copy(&mut zstd::stream::read::Decoder::new(&mut input)?, &mut out)?;
    drop(out);
    let t = Instant::now();
    let options = olmv1::fbc::StoreOptions {
        strict: false,
        ..Default::default()
    };
    let stored = olmv1::fbc::store_with_options(root, name, &src, &options)?;
    let stored_in = t.elapsed();
    std::fs::remove_dir_all(&src)?;
    // The extras the catalog controller writes once the catalog is Serving (the gzip
    // copy `/all` answers `Accept-Encoding: gzip` from): the rows measure a catalog
    // as it is served from then on.
    let t = Instant::now();
    let gzip = olmv1::fbc::precompress::write_gzip_copy(&stored.dir, &|| false)?;
    println!(
        "stored {} as {name}: {:.1} MB in {stored_in:.2?}; its gzip copy ({:.1} MB) in {:.2?}",
        file.display(),
        stored.size as f64 / 1e6,
        gzip.unwrap_or(0) as f64 / 1e6,
        t.elapsed()
    );
    let index = olmv1::fbc::store::read_index(&stored.dir)?;
    let mut sizes: Vec<(u64, String)> = index
        .by_package
        .iter()
        .filter(|(p, _)| !p.is_empty())
        .map(|(p, s)| (s.iter().map(|x| x[1]).sum(), p.clone()))
        .collect();
    sizes.sort();
    let (size, package) = sizes
        .get(sizes.len() / 2)
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("{name}: no packages"))?;
    Ok((stored.size, package, size))
}

/// Serves `root` on two loopback listeners (plain, TLS) from a 2-thread runtime on its
/// own OS thread; returns both base URLs and the stopper.
fn start_server(
    root: PathBuf,
    pki: &olmv1::testenv::pki::Pki,
) -> anyhow::Result<(String, String, tokio::sync::oneshot::Sender<()>)> {
    let tls = olmv1::server::tls::server_config(&pki.serving_cert, &pki.serving_key)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => return eprintln!("server runtime: {e}"),
        };
        rt.block_on(async move {
            let (Ok(plain), Ok(secure)) = (
                tokio::net::TcpListener::bind("127.0.0.1:0").await,
                tokio::net::TcpListener::bind("127.0.0.1:0").await,
            ) else {
                return eprintln!("binding loopback listeners failed");
            };
            let addrs = (plain.local_addr(), secure.local_addr());
            let _ = ready_tx.send(addrs);
            let router = olmv1::server::catalog::router(root);
            let (tx1, rx1) = tokio::sync::oneshot::channel::<()>();
            let a = tokio::spawn(olmv1::server::catalog::serve(
                plain,
                router.clone(),
                async move {
                    let _ = rx1.await;
                },
            ));
            let b = tokio::spawn(olmv1::server::catalog::serve_tls(
                secure,
                tls,
                router,
                async move {
                    let _ = stopped.await;
                },
            ));
            let _ = b.await;
            let _ = tx1.send(());
            let _ = a.await;
        });
    });
    let (plain, secure) = ready_rx.recv()?;
    Ok((
        format!("http://{}", plain?),
        format!("https://localhost:{}", secure?.port()),
        stop,
    ))
}

fn client(ca: &Path, gzip: bool) -> anyhow::Result<reqwest::Client> {
    let mut headers = reqwest::header::HeaderMap::new();
    if gzip {
        headers.insert(
            reqwest::header::ACCEPT_ENCODING,
            reqwest::header::HeaderValue::from_static("gzip"),
        );
    }
    let ca = reqwest::Certificate::from_pem(&std::fs::read(ca)?)?;
    Ok(reqwest::Client::builder()
        .no_gzip()
        .http1_only()
        .tls_certs_only([ca])
        .default_headers(headers)
        .pool_max_idle_per_host(1)
        .build()?)
}

/// CPU time (user + system) this process has used so far: server and client together,
/// a figure that depends less on other load on the machine than the latencies do.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and
    // 13th of them, in clock ticks (100 per second on Linux).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let ticks: u64 = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

/// `n` sequential GETs after 2 warm-ups: sorted latencies (to the last body byte), the
/// body size and the process CPU time per measured request.
async fn measure(
    c: &reqwest::Client,
    url: &str,
    n: usize,
) -> anyhow::Result<(Vec<Duration>, u64, Duration)> {
    let mut lat = Vec::with_capacity(n);
    let mut size = 0;
    let mut cpu = Duration::ZERO;
    for i in 0..n + 2 {
        if i == 2 {
            cpu = cpu_time();
        }
        let t = Instant::now();
        let mut r = c.get(url).send().await?;
        anyhow::ensure!(r.status() == 200, "{url}: status {}", r.status());
        size = 0;
        while let Some(chunk) = r.chunk().await? {
            size += chunk.len() as u64;
        }
        if i >= 2 {
            lat.push(t.elapsed());
        }
    }
    lat.sort();
    let cpu = cpu_time().saturating_sub(cpu) / u32::try_from(n.max(1)).unwrap_or(u32::MAX);
    Ok((lat, size, cpu))
}

fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let a = args()?;
    let work = tempfile::tempdir()?;
    let root = work.path().join("catalogs");
    let mut catalogs = Vec::new();
    for (i, file) in a.files.iter().enumerate() {
        let name = format!("bench-{i}");
        let (size, package, metas_size) = store(&root, work.path(), &name, file)?;
        catalogs.push((name, size, package, metas_size));
    }
    let pki = olmv1::testenv::pki::generate(&work.path().join("pki"))?;
    let (plain, secure, stop) = start_server(root, &pki)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    println!(
        "{:<8} {:<28} {:<5} {:<8} {:>10} {:>5} {:>9} {:>9} {:>9} {:>9}",
        "catalog", "request", "tls", "encoding", "body", "n", "p50", "p99", "MB/s", "cpu/req"
    );
    let mut figures = Vec::new();
    rt.block_on(async {
        for (name, size, package, metas_size) in &catalogs {
            let mb = *size as f64 / 1e6;
            for (path, n, key) in [
                ("api/v1/all".to_string(), a.all, format!("all{:.0}MB", mb)),
                (
                    format!("api/v1/metas?package={package}"),
                    a.metas,
                    format!("metas{:.0}KB", *metas_size as f64 / 1e3),
                ),
            ] {
                for (base, tls) in [(&plain, false), (&secure, true)] {
                    for gzip in [false, true] {
                        let c = client(&pki.ca_cert, gzip)?;
                        let url = format!("{base}/catalogs/{name}/{path}");
                        let (lat, body, cpu) = measure(&c, &url, n).await?;
                        let (p50, p99) = (pct(&lat, 0.5), pct(&lat, 0.99));
                        let short: String = path.chars().take(28).collect();
                        println!(
                            "{name:<8} {short:<28} {:<5} {:<8} {:>10} {n:>5} {:>9.2?} {:>9.2?} {:>9.0} {:>9.2?}",
                            if tls { "tls" } else { "plain" },
                            if gzip { "gzip" } else { "identity" },
                            body,
                            p50,
                            p99,
                            body as f64 / 1e6 / p50.as_secs_f64().max(1e-9),
                            cpu
                        );
                        let id = format!(
                            "serve.{name}.{key}.{}.{}",
                            if tls { "tls" } else { "plain" },
                            if gzip { "gzip" } else { "identity" }
                        );
                        figures.push(format!("BENCH {id}.p50_ms {:.3}", p50.as_secs_f64() * 1e3));
                        figures.push(format!("BENCH {id}.p99_ms {:.3}", p99.as_secs_f64() * 1e3));
                    }
                }
            }
        }
        anyhow::Ok(())
    })?;
    let _ = stop.send(());
    for f in figures {
        println!("{f}");
    }
    Ok(())
}

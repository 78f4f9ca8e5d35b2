//! Tests of pulling and unpacking that need Rust alone: pure helpers, and pulls
//! from stand-ins written in Rust on loopback (a registry that answers HTTP 500,
//! hand-written hostile registries). The pulls from a real `docker-registry` process
//! are in [`with_registry`] (`with_registry_tests.rs`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::*;
use crate::testenv::registry::{LayerCompression, build_tar, compress_layer};
use sha2::Digest as _;

fn crypto() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

fn files(entries: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    entries
        .iter()
        .map(|(p, d)| (p.to_string(), d.as_bytes().to_vec()))
        .collect()
}

fn catalog_labels() -> BTreeMap<String, String> {
    BTreeMap::from([(CATALOG_CONFIGS_LABEL.to_string(), "/configs".to_string())])
}

/// A fresh work area: `<tmp>/cache` is the cache; nothing else may appear in `<tmp>`.
struct Area {
    root: tempfile::TempDir,
}

impl Area {
    fn new() -> Self {
        Area {
            root: tempfile::tempdir().unwrap(),
        }
    }
    fn cache(&self) -> std::path::PathBuf {
        self.root.path().join("cache")
    }
    /// After a failed pull: nothing cached, no work dirs left, nothing beside the cache.
    fn assert_clean(&self) {
        let names: Vec<_> = std::fs::read_dir(self.root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            vec!["cache".to_string()],
            "something was written beside the cache dir"
        );
        let n = std::fs::read_dir(self.cache().join("images"))
            .unwrap()
            .count();
        assert_eq!(n, 0, "cache/images is not empty after a failed pull");
        assert_eq!(
            self.work_left(),
            Vec::<String>::new(),
            "work left in cache/tmp"
        );
    }
    /// What the work areas under `tmp/` hold besides their lock files.
    fn work_left(&self) -> Vec<String> {
        let mut left = Vec::new();
        for area in std::fs::read_dir(self.cache().join("tmp")).unwrap() {
            let area = area.unwrap().path();
            for e in std::fs::read_dir(&area).unwrap() {
                let name = e.unwrap().file_name().to_string_lossy().into_owned();
                if name != ".owner" {
                    left.push(format!("{}/{name}", area.display()));
                }
            }
        }
        left
    }
}

// ---------- pure helpers ----------

#[test]
fn extract_dir_from_labels() {
    let l = |v: &str| BTreeMap::from([(CATALOG_CONFIGS_LABEL.to_string(), v.to_string())]);
    assert_eq!(
        extract_dir("i", &Extract::CatalogConfigs, &l("/configs")).unwrap(),
        vec!["configs"]
    );
    assert_eq!(
        extract_dir("i", &Extract::CatalogConfigs, &l("configs/x/")).unwrap(),
        vec!["configs", "x"]
    );
    assert!(
        extract_dir("i", &Extract::CatalogConfigs, &l("/configs/.."))
            .unwrap()
            .is_empty()
    );
    let e = extract_dir("i", &Extract::CatalogConfigs, &l("../etc")).unwrap_err();
    assert!(matches!(e, ImageError::LabelOutsideImage { .. }), "{e}");
    let e = extract_dir("img:1", &Extract::CatalogConfigs, &BTreeMap::new()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "image img:1: catalog image is missing the required label \"operators.operatorframework.io.index.configs.v1\""
    );
    assert!(!e.is_retryable());
    assert!(
        extract_dir("i", &Extract::Whole, &BTreeMap::new())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn platform_selection_prefers_running_arch_then_amd64() {
    let entry = |d: &str, os: &str, arch: &str| -> oci_client::manifest::ImageIndexEntry {
        serde_json::from_value(serde_json::json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": d, "size": 1,
            "platform": {"os": os, "architecture": arch}
        }))
        .unwrap()
    };
    let entries = vec![
        entry("w", "windows", "amd64"),
        entry("s", "linux", "s390x"),
        entry("a", "linux", "amd64"),
    ];
    assert_eq!(select_platform(&entries).as_deref(), Some("a"));
    assert_eq!(select_platform(&entries[..2]), None);
}

#[test]
fn digests_are_validated_before_use_as_file_names() {
    assert!(validate_digest("i", &format!("sha256:{}", "a".repeat(64))).is_ok());
    assert!(validate_digest("i", "sha256:../../etc").is_err());
    assert!(validate_digest("i", &format!("sha512:{}", "a".repeat(128))).is_err());
}

// ---------- a real registry: with_registry_tests.rs ----------

#[path = "with_registry_tests.rs"]
mod with_registry;

/// A registry stand-in that answers every request with HTTP 500 and counts them.
async fn always_500() -> (String, std::sync::Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let count = std::sync::Arc::new(AtomicU64::new(0));
    let c = count.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let c = c.clone();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = vec![0u8; 8192];
                let mut req = Vec::new();
                loop {
                    let Ok(n) = sock.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    req.extend_from_slice(&buf[..n]);
                    while let Some(end) = req.windows(4).position(|w| w == b"\r\n\r\n") {
                        req.drain(..end + 4);
                        c.fetch_add(1, Ordering::SeqCst);
                        let body = "internal error";
                        let resp = format!(
                            "HTTP/1.1 500 Internal Server Error\r\ncontent-length: {}\r\ncontent-type: text/plain\r\n\r\n{body}",
                            body.len()
                        );
                        if sock.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (host, count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_error_is_retried_then_retryable() {
    crypto();
    let (host, count) = always_500().await;
    let area = Area::new();
    let mut cfg = PullerConfig::new(area.cache());
    cfg.insecure_registries = vec![host.clone()];
    cfg.retry = RetryPolicy {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(40),
    };
    let p = ImagePuller::new(cfg).unwrap();
    let reference = format!("{host}/five/hundred:v1");
    let e = p
        .pull(&reference, &Extract::Whole, &DockerConfig::default())
        .await
        .unwrap_err();
    assert!(
        matches!(e, ImageError::Unavailable { attempts: 3, .. }),
        "{e:?}"
    );
    assert!(e.is_retryable());
    assert!(
        e.to_string().contains("HTTP 500") && e.to_string().contains(&reference),
        "{e}"
    );
    assert_eq!(p.stats().manifest_requests, 3);
    assert!(count.load(Ordering::SeqCst) >= 3);
    area.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_reference_is_terminal() {
    let area = Area::new();
    let p = ImagePuller::new(PullerConfig::new(area.cache())).unwrap();
    let e = p
        .pull("UPPER/Case::bad", &Extract::Whole, &DockerConfig::default())
        .await
        .unwrap_err();
    assert!(matches!(e, ImageError::InvalidReference { .. }), "{e:?}");
    assert!(!e.is_retryable());
}

// ---------- hostile registries: a hand-written HTTP server on loopback ----------

/// How the hand-written registry answers a `GET` of one path.
#[derive(Clone)]
enum Answer {
    /// 200 with these bytes.
    Body(std::sync::Arc<Vec<u8>>),
    /// `status` (`200 OK`, …) with `prefix` then spaces up to `len` bytes, written as
    /// it goes (never held in memory); with a Content-Length, or chunked without one.
    Padded {
        status: &'static str,
        prefix: std::sync::Arc<Vec<u8>>,
        len: u64,
        content_length: bool,
    },
    /// 200 with a Content-Length of `len`, then one byte every `every`.
    Drip { len: u64, every: Duration },
}

/// A registry stand-in on loopback: `/v2/` says no authentication is needed, the
/// paths of `answers` are served as told, others get a 404. Returns its `host:port`
/// and the count of body bytes it wrote.
async fn hostile_registry(
    answers: std::collections::HashMap<String, Answer>,
) -> (String, std::sync::Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let sent = std::sync::Arc::new(AtomicU64::new(0));
    let answers = std::sync::Arc::new(answers);
    let counter = sent.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(serve_one(sock, answers.clone(), counter.clone()));
        }
    });
    (host, sent)
}

/// Answers one request on `sock`, then closes it.
async fn serve_one(
    mut sock: tokio::net::TcpStream,
    answers: std::sync::Arc<std::collections::HashMap<String, Answer>>,
    sent: std::sync::Arc<AtomicU64>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut req = Vec::new();
    let mut buf = [0u8; 4096];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        match sock.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&req).into_owned();
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let header = |status: &str, len: Option<u64>| {
        let length = len.map_or("transfer-encoding: chunked\r\n".to_string(), |n| {
            format!("content-length: {n}\r\n")
        });
        format!(
            "HTTP/1.1 {status}\r\n{length}content-type: application/vnd.oci.image.manifest.v1+json\r\nconnection: close\r\n\r\n"
        )
    };
    let answer = if path == "/v2/" {
        Answer::Body(std::sync::Arc::new(b"{}".to_vec()))
    } else if let Some(a) = answers.get(path) {
        a.clone()
    } else {
        let body = r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}"#;
        let resp = format!(
            "HTTP/1.1 404 Not Found\r\ncontent-length: {}\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = sock.write_all(resp.as_bytes()).await;
        return;
    };
    let head_only = method == "HEAD";
    let count = |n: usize| {
        sent.fetch_add(n as u64, Ordering::Relaxed);
    };
    match answer {
        Answer::Body(body) => {
            let _ = sock
                .write_all(header("200 OK", Some(body.len() as u64)).as_bytes())
                .await;
            if !head_only && sock.write_all(&body).await.is_ok() {
                count(body.len());
            }
        }
        Answer::Padded {
            status,
            prefix,
            len,
            content_length,
        } => {
            let _ = sock
                .write_all(header(status, content_length.then_some(len)).as_bytes())
                .await;
            if head_only {
                return;
            }
            let spaces = vec![b' '; 64 << 10];
            let mut left = len;
            let mut first = true;
            while left > 0 {
                let part: &[u8] = if first { &prefix } else { &spaces };
                first = false;
                let part = &part[..part.len().min(left as usize)];
                let ok = if content_length {
                    sock.write_all(part).await.is_ok()
                } else {
                    let framed =
                        [format!("{:x}\r\n", part.len()).as_bytes(), part, b"\r\n"].concat();
                    sock.write_all(&framed).await.is_ok()
                };
                if !ok {
                    return;
                }
                count(part.len());
                left -= part.len() as u64;
            }
            if !content_length {
                let _ = sock.write_all(b"0\r\n\r\n").await;
            }
        }
        Answer::Drip { len, every } => {
            let _ = sock.write_all(header("200 OK", Some(len)).as_bytes()).await;
            for _ in 0..len {
                tokio::time::sleep(every).await;
                if head_only || sock.write_all(b" ").await.is_err() {
                    return;
                }
                count(1);
            }
        }
    }
}

/// A catalog image served by [`hostile_registry`] under `repo`: the paths of its
/// config and layer, and its manifest (to pad or drip).
struct ServedImage {
    answers: std::collections::HashMap<String, Answer>,
    manifest: Vec<u8>,
    layer_digest: String,
}

fn served_catalog(repo: &str) -> ServedImage {
    let sha = |data: &[u8]| {
        format!(
            "sha256:{}",
            data_encoding::HEXLOWER.encode(&sha2::Sha256::digest(data))
        )
    };
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Labels": catalog_labels()},
        "rootfs": {"type": "layers", "diff_ids": []},
    }))
    .unwrap();
    let tar = build_tar(&files(&[("configs/p/c.json", "{}")]), &[]).unwrap();
    let (layer, media_type) = compress_layer(&tar, LayerCompression::Gzip).unwrap();
    let (config_digest, layer_digest) = (sha(&config), sha(&layer));
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": media_type, "digest": layer_digest, "size": layer.len()}],
    }))
    .unwrap();
    let blob = |d: &str| format!("/v2/{repo}/blobs/{d}");
    let answers = std::collections::HashMap::from([
        (
            blob(&config_digest),
            Answer::Body(std::sync::Arc::new(config)),
        ),
        (
            blob(&layer_digest),
            Answer::Body(std::sync::Arc::new(layer)),
        ),
    ]);
    ServedImage {
        answers,
        manifest,
        layer_digest,
    }
}

/// sha256 of `prefix` padded with spaces to `len` bytes, without building it.
fn padded_digest(prefix: &[u8], len: u64) -> String {
    let mut h = sha2::Sha256::new();
    h.update(prefix);
    let spaces = vec![b' '; 64 << 10];
    let mut left = len - prefix.len() as u64;
    while left > 0 {
        let n = left.min(spaces.len() as u64) as usize;
        h.update(&spaces[..n]);
        left -= n as u64;
    }
    format!("sha256:{}", data_encoding::HEXLOWER.encode(&h.finalize()))
}

/// A puller for the plain-HTTP `host`, few and quick retries.
fn hostile_puller(
    area: &Area,
    host: &str,
    configure: impl FnOnce(&mut PullerConfig),
) -> ImagePuller {
    let mut cfg = PullerConfig::new(area.cache());
    cfg.insecure_registries = vec![host.to_string()];
    cfg.retry = RetryPolicy {
        max_attempts: 2,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(20),
    };
    configure(&mut cfg);
    ImagePuller::new(cfg).unwrap()
}

/// Pulls `reference`, failing the test if the pull still runs after `within`.
async fn pull_within(
    p: &ImagePuller,
    reference: &str,
    within: Duration,
) -> Result<PulledImage, ImageError> {
    tokio::time::timeout(
        within,
        p.pull(
            reference,
            &Extract::CatalogConfigs,
            &DockerConfig::default(),
        ),
    )
    .await
    .unwrap_or_else(|_| panic!("pulling {reference} still runs after {within:?}"))
}

/// A 64 MiB manifest (valid JSON padded with spaces, its digest right) was read whole
/// into memory and the pull went on. It is refused: by its Content-Length before the
/// body is read, or without one once more than the limit arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_huge_manifest_is_refused_early() {
    crypto();
    const LEN: u64 = 64 << 20;
    for content_length in [true, false] {
        let repo = "huge/manifest";
        let mut img = served_catalog(repo);
        let digest = padded_digest(&img.manifest, LEN);
        img.answers.insert(
            format!("/v2/{repo}/manifests/{digest}"),
            Answer::Padded {
                status: "200 OK",
                prefix: std::sync::Arc::new(img.manifest.clone()),
                len: LEN,
                content_length,
            },
        );
        let (host, sent) = hostile_registry(img.answers).await;
        let area = Area::new();
        let p = hostile_puller(&area, &host, |_| {});
        let reference = format!("{host}/{repo}@{digest}");
        let e = pull_within(&p, &reference, Duration::from_secs(60))
            .await
            .map(|i| i.reference)
            .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("manifest {reference} larger than 4194304 bytes")),
            "{msg}"
        );
        assert!(!e.is_retryable(), "{e:?}");
        assert_eq!(p.stats().manifest_requests, 1, "not retried: {msg}");
        // The client stopped reading (the rest is what socket buffers took).
        let sent = sent.load(Ordering::Relaxed);
        assert!(sent < 24 << 20, "the registry wrote {sent} bytes");
        area.assert_clean();
    }
}

/// A registry that sends one byte every 200 ms never trips the 60 s read timeout and
/// held a pull (and the worker running it) forever. The request deadline cuts a
/// dripping manifest or layer; the pull deadline cuts the whole pull. Both are
/// retryable and name the image, what was being fetched and the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_drip_registry_hits_the_deadlines() {
    crypto();
    let drip = Answer::Drip {
        len: 100_000,
        every: Duration::from_millis(200),
    };
    let repo = "slow/drip";
    // The manifest drips.
    let img = served_catalog(repo);
    let digest = format!(
        "sha256:{}",
        data_encoding::HEXLOWER.encode(&sha2::Sha256::digest(&img.manifest))
    );
    let mut answers = img.answers.clone();
    answers.insert(format!("/v2/{repo}/manifests/{digest}"), drip.clone());
    let (host, _) = hostile_registry(answers).await;
    let reference = format!("{host}/{repo}@{digest}");
    let area = Area::new();
    let p = hostile_puller(&area, &host, |c| {
        c.request_timeout = Duration::from_secs(1);
        c.pull_timeout = Duration::from_secs(30);
    });
    let start = Instant::now();
    let e = pull_within(&p, &reference, Duration::from_secs(30))
        .await
        .map(|i| i.reference)
        .unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    assert!(e.is_retryable(), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "image {reference}: fetching manifest {reference} took longer than the registry request deadline of 1s: the registry is stalled or too slow; the pull is retried later (--registry-request-timeout sets the deadline)"
        )
    );
    area.assert_clean();

    // The pull deadline, shorter than the request's.
    let area = Area::new();
    let p = hostile_puller(&area, &host, |c| {
        c.request_timeout = Duration::from_secs(30);
        c.pull_timeout = Duration::from_secs(1);
    });
    let e = pull_within(&p, &reference, Duration::from_secs(30))
        .await
        .map(|i| i.reference)
        .unwrap_err();
    assert!(e.is_retryable(), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("took longer than the pull deadline of 1s") && msg.contains("--pull-timeout"),
        "{msg}"
    );
    area.assert_clean();

    // The manifest arrives, the layer drips.
    let mut answers = img.answers.clone();
    answers.insert(
        format!("/v2/{repo}/manifests/{digest}"),
        Answer::Body(std::sync::Arc::new(img.manifest.clone())),
    );
    answers.insert(format!("/v2/{repo}/blobs/{}", img.layer_digest), drip);
    let (host, _) = hostile_registry(answers).await;
    let reference = format!("{host}/{repo}@{digest}");
    let area = Area::new();
    let p = hostile_puller(&area, &host, |c| {
        c.request_timeout = Duration::from_secs(1);
    });
    let e = pull_within(&p, &reference, Duration::from_secs(30))
        .await
        .map(|i| i.reference)
        .unwrap_err();
    assert!(e.is_retryable(), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("fetching layer {} took longer", img.layer_digest)),
        "{msg}"
    );
    area.assert_clean();
}

/// A layer descriptor's `urls` are not requested: the registry 404s the blob and the
/// pull fails as not found, without the controller fetching the URL the manifest named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_layer_urls_are_not_requested() {
    crypto();
    let (elsewhere, asked) = hostile_registry(std::collections::HashMap::from([(
        "/foreign".to_string(),
        Answer::Body(std::sync::Arc::new(b"not a layer".to_vec())),
    )]))
    .await;
    let repo = "foreign/urls";
    let mut img = served_catalog(repo);
    img.answers
        .remove(&format!("/v2/{repo}/blobs/{}", img.layer_digest));
    let mut manifest: serde_json::Value = serde_json::from_slice(&img.manifest).unwrap();
    manifest["layers"][0]["urls"] = serde_json::json!([format!("http://{elsewhere}/foreign")]);
    let body = serde_json::to_vec(&manifest).unwrap();
    let digest = format!(
        "sha256:{}",
        data_encoding::HEXLOWER.encode(&sha2::Sha256::digest(&body))
    );
    img.answers.insert(
        format!("/v2/{repo}/manifests/{digest}"),
        Answer::Body(std::sync::Arc::new(body)),
    );
    let (host, _) = hostile_registry(img.answers).await;
    let area = Area::new();
    let p = hostile_puller(&area, &host, |_| {});
    let e = pull_within(
        &p,
        &format!("{host}/{repo}@{digest}"),
        Duration::from_secs(60),
    )
    .await
    .map(|i| i.reference)
    .unwrap_err();
    assert!(matches!(e, ImageError::NotFound { .. }), "{e:?}");
    assert_eq!(
        asked.load(Ordering::Relaxed),
        0,
        "the foreign URL was requested"
    );
    area.assert_clean();
}

/// A blob request answered by HTTP 500 with a 64 MiB body: oci-client read error
/// bodies whole; at most 64 KiB of one is read now, and the error stays the
/// registry's (retryable).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_huge_error_body_is_not_read() {
    crypto();
    let repo = "huge/error";
    let mut img = served_catalog(repo);
    let digest = format!(
        "sha256:{}",
        data_encoding::HEXLOWER.encode(&sha2::Sha256::digest(&img.manifest))
    );
    img.answers.insert(
        format!("/v2/{repo}/manifests/{digest}"),
        Answer::Body(std::sync::Arc::new(img.manifest.clone())),
    );
    img.answers.insert(
        format!("/v2/{repo}/blobs/{}", img.layer_digest),
        Answer::Padded {
            status: "500 Internal Server Error",
            prefix: std::sync::Arc::new(b"oops".to_vec()),
            len: 64 << 20,
            content_length: true,
        },
    );
    let (host, sent) = hostile_registry(img.answers).await;
    let area = Area::new();
    let p = hostile_puller(&area, &host, |_| {});
    let e = pull_within(
        &p,
        &format!("{host}/{repo}@{digest}"),
        Duration::from_secs(60),
    )
    .await
    .map(|i| i.reference)
    .unwrap_err();
    assert!(
        matches!(e, ImageError::Unavailable { attempts: 2, .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("HTTP 500"), "{e}");
    let sent = sent.load(Ordering::Relaxed);
    assert!(sent < 40 << 20, "the registry wrote {sent} bytes");
    area.assert_clean();
}

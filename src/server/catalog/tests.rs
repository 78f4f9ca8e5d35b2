//! Real HTTP tests: a server on 127.0.0.1:0 and a reqwest client.

use super::*;
use crate::fbc::{Limits, store, store_with_limits};
use reqwest::header as h;
use std::io::Read;

const CAT: &str = "{\"schema\":\"olm.package\",\"name\":\"p\",\"defaultChannel\":\"s\"}\n{\"schema\":\"olm.channel\",\"name\":\"s\",\"package\":\"p\",\"entries\":[{\"name\":\"p.v1\"},{\"name\":\"p.v2\",\"replaces\":\"p.v1\"}]}\n{\"schema\":\"olm.bundle\",\"name\":\"p.v1\",\"package\":\"p\",\"properties\":[{\"type\":\"olm.package\",\"value\":{\"packageName\":\"p\",\"version\":\"1.0.0\"}}]}\n{\"schema\":\"olm.bundle\",\"name\":\"p.v2\",\"package\":\"p\",\"properties\":[{\"type\":\"olm.package\",\"value\":{\"packageName\":\"p\",\"version\":\"2.0.0\"}}]}\n{\"schema\":\"olm.package\",\"name\":\"q\",\"defaultChannel\":\"s\"}\n{\"schema\":\"olm.channel\",\"name\":\"s\",\"package\":\"q\",\"entries\":[{\"name\":\"q.v1\"}]}\n{\"schema\":\"olm.bundle\",\"name\":\"q.v1\",\"package\":\"q\",\"properties\":[{\"type\":\"olm.package\",\"value\":{\"packageName\":\"q\",\"version\":\"1.0.0\"}}]}\n{\"schema\":\"my.unknown\",\"package\":\"q\",\"name\":\"x\",\"data\":[1,2]}\n";

struct Server {
    base: String,
    root: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start() -> Self {
        let root = tempfile::tempdir().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(serve(listener, router(root.path()), async move {
            let _ = rx.await;
        }));
        Server {
            base,
            root,
            stop: Some(tx),
            handle,
        }
    }

    fn store_text(&self, name: &str, text: &str) -> crate::fbc::StoredCatalog {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("catalog.json"), text).unwrap();
        let stored = store(self.root.path(), name, src.path()).unwrap();
        // What the controller writes after the catalog is Serving.
        crate::fbc::precompress::write_gzip_copy(&stored.dir, &|| false).unwrap();
        stored
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn shutdown(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.handle.await.unwrap().unwrap();
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_gzip().build().unwrap()
}

fn lines(body: &str) -> Vec<serde_json::Value> {
    body.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn all_and_head_and_errors() {
    let s = Server::start().await;
    s.store_text("cat", CAT);
    let c = client();
    let r = c
        .get(s.url("/catalogs/cat/api/v1/all"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()[h::CONTENT_TYPE], "application/jsonl");
    assert!(r.headers().contains_key(h::LAST_MODIFIED));
    assert!(r.headers()[h::ETAG].to_str().unwrap().starts_with('"'));
    assert_eq!(r.text().await.unwrap(), CAT);

    let r = c
        .head(s.url("/catalogs/cat/api/v1/all"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()[h::CONTENT_LENGTH],
        CAT.len().to_string().as_str()
    );
    assert_eq!(r.bytes().await.unwrap().len(), 0);

    for (path, status) in [
        ("/catalogs/nope/api/v1/all", 404),
        ("/catalogs/nope/api/v1/metas", 404),
        ("/catalogs/Bad_Name/api/v1/all", 400),
        ("/catalogs/cat/api/v1/metas?schema=olm.package&foo=1", 400),
        ("/catalogs/cat/api/v1/other", 404),
        ("/", 404),
    ] {
        let r = c.get(s.url(path)).send().await.unwrap();
        assert_eq!(r.status(), status, "{path}");
    }
    let r = c
        .get(s.url("/catalogs/Bad_Name/api/v1/all"))
        .send()
        .await
        .unwrap();
    assert!(r.text().await.unwrap().contains("RFC 1123 subdomain"));
    for m in [
        reqwest::Method::POST,
        reqwest::Method::PUT,
        reqwest::Method::DELETE,
    ] {
        let r = c
            .request(m.clone(), s.url("/catalogs/cat/api/v1/all"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 405, "{m}");
        let r = c
            .request(m.clone(), s.url("/catalogs/cat/api/v1/metas"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 405, "{m}");
    }
    s.shutdown().await;
}

#[tokio::test]
async fn metas_filters() {
    let s = Server::start().await;
    s.store_text("cat", CAT);
    let c = client();
    let get = |q: &str| {
        let url = s.url(&format!("/catalogs/cat/api/v1/metas{q}"));
        let c = c.clone();
        async move {
            let r = c.get(url).send().await.unwrap();
            assert_eq!(r.status(), 200);
            assert_eq!(r.headers()[h::CONTENT_TYPE], "application/jsonl");
            r.text().await.unwrap()
        }
    };
    assert_eq!(get("").await, CAT);
    let b = lines(&get("?schema=olm.bundle").await);
    assert_eq!(
        b.iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["p.v1", "p.v2", "q.v1"]
    );
    // catalogd's index by each blob's `package` field: the olm.package blob (whose
    // package is in `name`) is not part of it; file order.
    let p = get("?package=p").await;
    assert_eq!(
        p,
        CAT.lines()
            .skip(1)
            .take(3)
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
    let pkg = lines(&get("?schema=olm.package&name=p").await);
    assert_eq!(pkg.len(), 1);
    assert_eq!(pkg[0]["defaultChannel"], "s");
    assert_eq!(get("?schema=olm.package&package=p").await, "");
    let pb = lines(&get("?schema=olm.bundle&package=p&name=p.v2").await);
    assert_eq!(pb.len(), 1);
    assert_eq!(pb[0]["name"], "p.v2");
    let ch = lines(&get("?schema=olm.channel&name=s").await);
    assert_eq!(ch.len(), 2);
    let q = lines(&get("?package=q&schema=").await);
    assert_eq!(
        q.iter()
            .map(|v| v["schema"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["olm.channel", "olm.bundle", "my.unknown"]
    );
    assert_eq!(
        lines(&get("?schema=my.unknown").await)[0]["data"],
        serde_json::json!([1, 2])
    );
    assert_eq!(get("?package=ghost").await, "");
    assert_eq!(get("?schema=olm.bundle&package=q&name=p.v1").await, "");
    let r = c
        .head(s.url("/catalogs/cat/api/v1/metas?package=p"))
        .send()
        .await
        .unwrap();
    let len: usize = r.headers()[h::CONTENT_LENGTH]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(len, get("?package=p").await.len());
    s.shutdown().await;
}

#[tokio::test]
async fn conditional_requests() {
    let s = Server::start().await;
    s.store_text("cat", CAT);
    let c = client();
    for path in [
        "/catalogs/cat/api/v1/all",
        "/catalogs/cat/api/v1/metas?package=p",
    ] {
        let r = c.get(s.url(path)).send().await.unwrap();
        let etag = r.headers()[h::ETAG].clone();
        let lm = r.headers()[h::LAST_MODIFIED].clone();
        let r = c
            .get(s.url(path))
            .header(h::IF_NONE_MATCH, etag.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 304, "{path}");
        assert_eq!(r.headers()[h::ETAG], etag);
        assert_eq!(r.bytes().await.unwrap().len(), 0);
        let r = c
            .get(s.url(path))
            .header(
                h::IF_NONE_MATCH,
                "\"other\", W/".to_string() + etag.to_str().unwrap(),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 304, "weak comparison for If-None-Match");
        let r = c
            .get(s.url(path))
            .header(h::IF_MODIFIED_SINCE, lm.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 304, "{path}");
        let r = c
            .get(s.url(path))
            .header(h::IF_MODIFIED_SINCE, "Mon, 01 Jan 2001 00:00:00 GMT")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        // If-None-Match wins over If-Modified-Since.
        let r = c
            .get(s.url(path))
            .header(h::IF_NONE_MATCH, "\"other\"")
            .header(h::IF_MODIFIED_SINCE, lm.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let r = c
            .get(s.url(path))
            .header(h::IF_MATCH, "\"other\"")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 412, "{path}");
        let r = c
            .get(s.url(path))
            .header(h::IF_MATCH, etag.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let r = c
            .get(s.url(path))
            .header(h::IF_UNMODIFIED_SINCE, "Mon, 01 Jan 2001 00:00:00 GMT")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 412, "{path}");
        let r = c
            .get(s.url(path))
            .header(h::IF_UNMODIFIED_SINCE, lm)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    s.shutdown().await;
}

#[tokio::test]
async fn range_requests_on_all() {
    let s = Server::start().await;
    s.store_text("cat", CAT);
    let c = client();
    let url = s.url("/catalogs/cat/api/v1/all");
    let r = c
        .get(&url)
        .header(h::RANGE, "bytes=0-9")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 206);
    assert_eq!(
        r.headers()[h::CONTENT_RANGE],
        format!("bytes 0-9/{}", CAT.len()).as_str()
    );
    assert_eq!(r.text().await.unwrap(), &CAT[..10]);
    let r = c
        .get(&url)
        .header(h::RANGE, "bytes=-5")
        .send()
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), &CAT[CAT.len() - 5..]);
    let r = c
        .get(&url)
        .header(h::RANGE, format!("bytes={}-", CAT.len() + 10))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 416);
    assert_eq!(
        r.headers()[h::CONTENT_RANGE],
        format!("bytes */{}", CAT.len()).as_str()
    );
    let r = c
        .get(&url)
        .header(h::RANGE, "bytes=0-9")
        .header(h::IF_RANGE, "\"stale\"")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "If-Range mismatch serves everything");
    s.shutdown().await;
}

#[tokio::test]
async fn gzip_above_threshold_only() {
    let s = Server::start().await;
    let full = format!(
        "{CAT}{{\"schema\":\"pad\",\"v\":\"{}\"}}\n",
        "abc".repeat(500)
    );
    s.store_text("cat", &full);
    let c = client();
    let r = c
        .get(s.url("/catalogs/cat/api/v1/all"))
        .header(h::ACCEPT_ENCODING, "gzip")
        .send()
        .await
        .unwrap();
    assert!(full.len() as u64 > GZIP_MIN_SIZE);
    assert_eq!(r.headers()[h::CONTENT_ENCODING], "gzip");
    let bytes = r.bytes().await.unwrap();
    assert!(bytes.len() < full.len());
    let mut text = String::new();
    flate2::read::GzDecoder::new(&bytes[..])
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, full);
    // metas: compressed once, then served from the cache; identical bodies.
    for _ in 0..2 {
        let r = c
            .get(s.url("/catalogs/cat/api/v1/metas"))
            .header(h::ACCEPT_ENCODING, "br, gzip;q=0.5")
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()[h::CONTENT_ENCODING], "gzip");
        assert!(r.headers().contains_key(h::ETAG));
        let bytes = r.bytes().await.unwrap();
        let mut text = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, full);
    }
    let r = c
        .get(s.url("/catalogs/cat/api/v1/metas"))
        .header(h::ACCEPT_ENCODING, "gzip;q=0")
        .send()
        .await
        .unwrap();
    assert!(
        !r.headers().contains_key(h::CONTENT_ENCODING),
        "q=0 refuses gzip"
    );
    let r = c
        .get(s.url("/catalogs/cat/api/v1/metas?name=q.v1"))
        .header(h::ACCEPT_ENCODING, "gzip")
        .send()
        .await
        .unwrap();
    assert!(
        !r.headers().contains_key(h::CONTENT_ENCODING),
        "small bodies are not compressed"
    );
    let r = c
        .get(s.url("/catalogs/cat/api/v1/all"))
        .send()
        .await
        .unwrap();
    assert!(
        !r.headers().contains_key(h::CONTENT_ENCODING),
        "no Accept-Encoding, no gzip"
    );
    s.shutdown().await;
}

/// `all` with gzip comes from the copy written at ingest: a Content-Length, the same
/// validators, conditional requests, HEAD; ranges are served from the plain file.
#[tokio::test]
async fn all_gzip_is_precompressed_with_length_and_validators() {
    let s = Server::start().await;
    let full = format!(
        "{CAT}{{\"schema\":\"pad\",\"v\":\"{}\"}}\n",
        "xyz".repeat(800)
    );
    let stored = s.store_text("cat", &full);
    assert!(stored.dir.join(CATALOG_GZIP_FILE).exists());
    let c = client();
    let url = s.url("/catalogs/cat/api/v1/all");
    let r = c
        .get(&url)
        .header(h::ACCEPT_ENCODING, "gzip, deflate")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()[h::CONTENT_ENCODING], "gzip");
    assert_eq!(r.headers()[h::VARY], "accept-encoding");
    assert_eq!(r.headers().get_all(h::VARY).iter().count(), 1);
    let length: usize = r.headers()[h::CONTENT_LENGTH]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let (etag, modified) = (
        r.headers()[h::ETAG].clone(),
        r.headers()[h::LAST_MODIFIED].clone(),
    );
    let bytes = r.bytes().await.unwrap();
    assert_eq!(bytes.len(), length);
    let mut text = String::new();
    flate2::read::GzDecoder::new(&bytes[..])
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, full);
    let r = c
        .head(&url)
        .header(h::ACCEPT_ENCODING, "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()[h::CONTENT_ENCODING], "gzip");
    assert_eq!(r.headers()[h::CONTENT_LENGTH], length.to_string().as_str());
    for (k, v) in [(h::IF_NONE_MATCH, etag), (h::IF_MODIFIED_SINCE, modified)] {
        let r = c
            .get(&url)
            .header(h::ACCEPT_ENCODING, "gzip")
            .header(k, v)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 304);
    }
    let r = c
        .get(&url)
        .header(h::ACCEPT_ENCODING, "gzip")
        .header(h::RANGE, "bytes=0-9")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 206);
    assert!(!r.headers().contains_key(h::CONTENT_ENCODING));
    assert_eq!(r.text().await.unwrap(), full[..10]);
    s.shutdown().await;
}

#[tokio::test]
async fn replacement_is_served_and_failed_ingest_keeps_old_content() {
    let s = Server::start().await;
    let first = s.store_text("cat", CAT);
    let c = client();
    let url = s.url("/catalogs/cat/api/v1/all");
    let r = c.get(&url).send().await.unwrap();
    let etag1 = r.headers()[h::ETAG].clone();
    assert_eq!(r.text().await.unwrap(), CAT);
    // A broken new version: duplicate package.
    let src = tempfile::tempdir().unwrap();
    std::fs::write(
        src.path().join("a.json"),
        format!("{CAT}{}", CAT.lines().next().unwrap()),
    )
    .unwrap();
    let strict = crate::fbc::StoreOptions {
        strict: true,
        ..Default::default()
    };
    let err = crate::fbc::store_with_options(s.root.path(), "cat", src.path(), &strict)
        .unwrap_err()
        .to_string();
    assert!(err.contains("duplicate package \"p\""), "{err}");
    // Too large for the limit.
    let err = store_with_limits(
        s.root.path(),
        "cat",
        src.path(),
        &Limits {
            max_total_bytes: 100,
            ..Limits::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("max_total_bytes"), "{err}");
    let r = c.get(&url).send().await.unwrap();
    assert_eq!(r.headers()[h::ETAG], etag1);
    assert_eq!(r.text().await.unwrap(), CAT);
    assert!(first.dir.exists());
    // A good new version replaces it.
    let smaller: String = CAT.lines().take(4).map(|l| format!("{l}\n")).collect();
    s.store_text("cat", &smaller);
    let r = c.get(&url).send().await.unwrap();
    assert_ne!(r.headers()[h::ETAG], etag1);
    assert_eq!(r.text().await.unwrap(), smaller);
    assert_eq!(
        c.get(s.url("/catalogs/cat/api/v1/metas?package=q"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        ""
    );
    crate::fbc::delete(s.root.path(), "cat").unwrap();
    assert_eq!(c.get(&url).send().await.unwrap().status(), 404);
    s.shutdown().await;
}

#[tokio::test]
async fn large_bodies_stream() {
    let s = Server::start().await;
    let mut text = String::from(
        "{\"schema\":\"olm.package\",\"name\":\"p\",\"defaultChannel\":\"s\"}\n{\"schema\":\"olm.channel\",\"name\":\"s\",\"package\":\"p\",\"entries\":[{\"name\":\"p.v1\"}]}\n",
    );
    let big = "x".repeat(300_000);
    text.push_str(&format!("{{\"schema\":\"olm.bundle\",\"name\":\"p.v1\",\"package\":\"p\",\"properties\":[{{\"type\":\"olm.package\",\"value\":{{\"packageName\":\"p\",\"version\":\"1.0.0\"}}}},{{\"type\":\"big\",\"value\":\"{big}\"}}]}}\n"));
    for i in 0..3 {
        text.push_str(&format!(
            "{{\"schema\":\"blob\",\"package\":\"p\",\"name\":\"{i}\",\"v\":\"{big}\"}}\n"
        ));
    }
    s.store_text("big", &text);
    let c = client();
    let body = c
        .get(s.url("/catalogs/big/api/v1/metas?package=p"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // Everything but the olm.package blob (not indexed under its package).
    assert_eq!(body, text.split_inclusive('\n').skip(1).collect::<String>());
    let body = c
        .get(s.url("/catalogs/big/api/v1/metas?schema=blob"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(lines(&body).len(), 3);
    s.shutdown().await;
}

/// The real catalogs in shared/fixtures (olm.bundle.object and olm.csv.metadata styles).
#[tokio::test]
async fn real_fixture_catalogs_load_validate_and_serve() {
    let Some(catalogs) = crate::testenv::shared_dir("fixtures/catalogs") else {
        return;
    };
    let s = Server::start().await;
    let c = client();
    for (name, dir) in [("v4-16", "v4.16"), ("v4-20", "v4.20")] {
        let stored = store(s.root.path(), name, &catalogs.join(dir)).unwrap();
        assert!(stored.summary.bundles >= 4, "{stored:?}");
        let all = c
            .get(s.url(&format!("/catalogs/{name}/api/v1/all")))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(all.lines().count() as u64, stored.blobs);
        let bundles = lines(
            &c.get(s.url(&format!(
                "/catalogs/{name}/api/v1/metas?schema=olm.bundle&package=ecr-secret-operator"
            )))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        );
        assert_eq!(bundles.len(), 4);
        let style = if dir == "v4.16" {
            "olm.bundle.object"
        } else {
            "olm.csv.metadata"
        };
        for b in &bundles {
            assert_eq!(b["package"], "ecr-secret-operator");
            let types: Vec<_> = b["properties"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["type"].as_str().unwrap())
                .collect();
            assert!(types.contains(&style), "{types:?}");
        }
        let pkg = lines(
            &c.get(s.url(&format!(
                "/catalogs/{name}/api/v1/metas?schema=olm.package&name=ecr-secret-operator"
            )))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        );
        assert_eq!(pkg.len(), 1);
        assert_eq!(pkg[0]["defaultChannel"], "alpha");
    }
    s.shutdown().await;
}

/// TLS with a certificate made by the `openssl` command (skipped when it is missing).
#[tokio::test]
async fn serves_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-addext",
            "basicConstraints=critical,CA:FALSE",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output();
    if !made.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!("skipping: openssl not available to make a test certificate: {made:?}");
        return;
    }
    let config = crate::server::tls::server_config(&cert, &key).unwrap();
    let root = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("c.json"), CAT).unwrap();
    store(root.path(), "cat", src.path()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve_tls(
        listener,
        config,
        router(root.path()),
        async move {
            let _ = rx.await;
        },
    ));
    let ca = reqwest::Certificate::from_pem(&std::fs::read(&cert).unwrap()).unwrap();
    let c = reqwest::Client::builder()
        .tls_certs_only([ca])
        .build()
        .unwrap();
    let r = c
        .get(format!(
            "https://localhost:{}/catalogs/cat/api/v1/metas?package=q",
            addr.port()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(lines(&r.text().await.unwrap()).len(), 3);
    // A plain-HTTP client gets no answer from the TLS port.
    assert!(
        client()
            .get(format!("http://{addr}/catalogs/cat/api/v1/all"))
            .send()
            .await
            .is_err()
    );
    // Errors in the files are named.
    let err = crate::server::tls::server_config(&key, &key)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("tls.key") && err.contains("certificate"),
        "{err}"
    );
    let _ = tx.send(());
    server.await.unwrap().unwrap();
}

/// Readers see the old or the new content, never a mix or an error, while versions swap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swaps_are_atomic_for_readers() {
    let s = Server::start().await;
    s.store_text("cat", CAT);
    let second: String = CAT.lines().skip(4).map(|l| format!("{l}\n")).collect();
    let root = s.root.path().to_path_buf();
    let (a, b) = (CAT.to_string(), second.clone());
    let writer = tokio::task::spawn_blocking(move || {
        for i in 0..40 {
            let src = tempfile::tempdir().unwrap();
            std::fs::write(src.path().join("c.json"), if i % 2 == 0 { &b } else { &a }).unwrap();
            store(&root, "cat", src.path()).unwrap();
        }
    });
    let c = client();
    let mut seen = std::collections::HashSet::new();
    while !writer.is_finished() {
        let r = c
            .get(s.url("/catalogs/cat/api/v1/all"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let body = r.text().await.unwrap();
        assert!(body == CAT || body == second, "mixed content: {body}");
        seen.insert(body);
    }
    writer.await.unwrap();
    assert!(!seen.is_empty());
    s.shutdown().await;
}

/// The gzip and identity representations of `all` and `metas` carry distinct ETags
/// (`"<v>"`, `"<v>-gzip"`) with `Vary: Accept-Encoding`; If-None-Match answers 304 only
/// for the representation the request would get — `all` with the stored gzip copy,
/// `metas` with on-the-fly compression.
#[tokio::test]
async fn gzip_and_identity_have_distinct_etags() {
    let s = Server::start().await;
    let full = format!(
        "{CAT}{{\"schema\":\"pad\",\"package\":\"p\",\"v\":\"{}\"}}\n",
        "etag".repeat(900)
    );
    s.store_text("cat", &full);
    let stored = s.store_text("otf", &full);
    std::fs::remove_file(stored.dir.join(CATALOG_GZIP_FILE)).unwrap();
    let c = client();
    for path in [
        "/catalogs/cat/api/v1/all",
        "/catalogs/cat/api/v1/metas?package=p",
        "/catalogs/otf/api/v1/metas",
    ] {
        let get = |gzip: bool, inm: Option<HeaderValue>| {
            let mut r = c.get(s.url(path));
            if gzip {
                r = r.header(h::ACCEPT_ENCODING, "gzip");
            }
            if let Some(v) = inm {
                r = r.header(h::IF_NONE_MATCH, v);
            }
            r.send()
        };
        let plain = get(false, None).await.unwrap();
        assert_eq!(plain.status(), 200, "{path}");
        assert!(!plain.headers().contains_key(h::CONTENT_ENCODING), "{path}");
        let zipped = get(true, None).await.unwrap();
        assert_eq!(zipped.headers()[h::CONTENT_ENCODING], "gzip", "{path}");
        for r in [&plain, &zipped] {
            assert_eq!(r.headers()[h::VARY], "accept-encoding", "{path}");
        }
        let (etag, etag_gz) = (
            plain.headers()[h::ETAG].clone(),
            zipped.headers()[h::ETAG].clone(),
        );
        assert_ne!(etag, etag_gz, "{path}: one ETag for two representations");
        assert_eq!(
            etag_gz.to_str().unwrap(),
            format!("{}-gzip\"", etag.to_str().unwrap().trim_end_matches('"')),
            "{path}"
        );
        // Each validator matches its own representation only.
        let r = get(false, Some(etag.clone())).await.unwrap();
        assert_eq!(r.status(), 304, "{path} identity");
        assert_eq!(r.headers()[h::ETAG], etag, "{path}");
        let r = get(true, Some(etag_gz.clone())).await.unwrap();
        assert_eq!(r.status(), 304, "{path} gzip");
        assert_eq!(r.headers()[h::ETAG], etag_gz, "{path}");
        let r = get(true, Some(etag.clone())).await.unwrap();
        assert_eq!(r.status(), 200, "{path}: identity ETag, gzip request");
        assert_eq!(r.headers()[h::CONTENT_ENCODING], "gzip", "{path}");
        let r = get(false, Some(etag_gz.clone())).await.unwrap();
        assert_eq!(r.status(), 200, "{path}: gzip ETag, identity request");
        // A client holding both sends both.
        let both = HeaderValue::from_str(&format!(
            "{}, {}",
            etag.to_str().unwrap(),
            etag_gz.to_str().unwrap()
        ))
        .unwrap();
        assert_eq!(get(true, Some(both.clone())).await.unwrap().status(), 304);
        assert_eq!(get(false, Some(both)).await.unwrap().status(), 304);
    }
    s.shutdown().await;
}

/// Serving first, extras after (docs/concepts/catalogs.md §9.2): until the gzip copy of
/// `all` is written, `all` answers uncompressed even to clients that accept gzip (no
/// compressing the whole catalog on the fly); once it exists, the next request gets it.
#[tokio::test]
async fn all_is_uncompressed_until_its_gzip_copy_exists() {
    let s = Server::start().await;
    let full = format!(
        "{CAT}{{\"schema\":\"pad\",\"v\":\"{}\"}}\n",
        "later".repeat(800)
    );
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("catalog.json"), &full).unwrap();
    let stored = store(s.root.path(), "cat", src.path()).unwrap();
    assert!(
        !stored.dir.join(CATALOG_GZIP_FILE).exists(),
        "not written by the store"
    );
    let c = client();
    let url = s.url("/catalogs/cat/api/v1/all");
    let get = || c.get(&url).header(h::ACCEPT_ENCODING, "gzip").send();
    let r = get().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(!r.headers().contains_key(h::CONTENT_ENCODING), "identity");
    assert_eq!(
        r.headers()[h::CONTENT_LENGTH],
        full.len().to_string().as_str()
    );
    assert_eq!(r.text().await.unwrap(), full);
    crate::fbc::precompress::write_gzip_copy(&stored.dir, &|| false).unwrap();
    let r = get().await.unwrap();
    assert_eq!(
        r.headers()[h::CONTENT_ENCODING],
        "gzip",
        "the copy, once written"
    );
    let bytes = r.bytes().await.unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(&bytes[..])
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, full);
    s.shutdown().await;
}

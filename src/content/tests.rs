//! The content client over real HTTP: this project's catalog server
//! ([`crate::server::catalog::router`]) on 127.0.0.1:0, and tiny axum routers for the
//! `/all` fallback and error statuses.

use super::*;
use crate::server::catalog::{router, serve};
use axum::Router;
use axum::routing::get;
use serde_json::json;
use std::sync::atomic::AtomicUsize;

fn catalog_text(versions: &[&str], deprecate: Option<&str>) -> String {
    let mut blobs = vec![
        json!({"schema": "olm.package", "name": "foo", "defaultChannel": "stable",
               "icon": {"base64data": "QUJD", "mediatype": "image/png"}}),
    ];
    let entries: Vec<_> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut e = json!({"name": format!("foo.v{v}")});
            if i > 0 {
                e["replaces"] = json!(format!("foo.v{}", versions[i - 1]));
            }
            e
        })
        .collect();
    blobs.push(
        json!({"schema": "olm.channel", "name": "stable", "package": "foo", "entries": entries}),
    );
    for v in versions {
        blobs.push(json!({"schema": "olm.bundle", "name": format!("foo.v{v}"), "package": "foo",
            "image": format!("reg/foo:v{v}"),
            "relatedImages": [{"name": "x", "image": null}],
            "properties": [{"type": "olm.package", "value": {"packageName": "foo", "version": v}},
                           {"type": "olm.csv.metadata", "value": {"description": "x".repeat(2000)}}]}));
    }
    if let Some(b) = deprecate {
        blobs.push(
            json!({"schema": "olm.deprecations", "package": "foo", "entries": [
            {"reference": {"schema": "olm.bundle", "name": b}, "message": "do not use"}]}),
        );
    }
    blobs.push(json!({"schema": "olm.package", "name": "bar", "defaultChannel": "alpha"}));
    blobs.push(
        json!({"schema": "olm.channel", "name": "alpha", "package": "bar",
        "entries": [{"name": "bar.v1"}]}),
    );
    blobs.push(json!({"schema": "olm.bundle", "name": "bar.v1", "package": "bar", "image": "i",
        "properties": [{"type": "olm.package", "value": {"packageName": "bar", "version": "1.0.0"}}]}));
    blobs.iter().map(|b| format!("{b}\n")).collect()
}

struct Server {
    base: String,
    root: tempfile::TempDir,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Server {
    async fn start() -> Server {
        let root = tempfile::tempdir().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(serve(listener, router(root.path()), async move {
            let _ = rx.await;
        }));
        Server {
            base,
            root,
            _stop: tx,
        }
    }

    fn store(&self, name: &str, text: &str) {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("catalog.json"), text).unwrap();
        crate::fbc::store(self.root.path(), name, src.path()).unwrap();
    }
}

fn cluster_catalog(name: &str, base: &str, resolved: &str, serving: bool) -> ClusterCatalog {
    serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": name},
        "spec": {"source": {"type": "Image", "image": {"ref": "reg/cat:latest"}}},
        "status": {
            "conditions": [{"type": "Serving", "status": if serving { "True" } else { "False" },
                "reason": if serving { "Available" } else { "Unavailable" }, "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}],
            "resolvedSource": {"type": "Image", "image": {"ref": resolved}},
            "urls": {"base": base},
        }
    }))
    .unwrap()
}

fn client() -> ContentClient {
    ContentClient::new(ContentConfig::default()).unwrap()
}

#[test]
fn endpoint_needs_serving_and_a_url() {
    let c = cluster_catalog("cat", "http://h/catalogs/cat/", "reg/cat@sha256:1", true);
    assert_eq!(
        endpoint(&c).unwrap(),
        Endpoint {
            catalog: "cat".into(),
            base_url: "http://h/catalogs/cat".into(),
            resolved_ref: "reg/cat@sha256:1".into(),
        }
    );
    let off = cluster_catalog("cat", "http://h/catalogs/cat", "r", false);
    assert_eq!(
        endpoint(&off).unwrap_err().to_string(),
        r#"catalog "cat" is not being served"#
    );
    let mut no_status = c.clone();
    no_status.status = None;
    assert_eq!(
        endpoint(&no_status).unwrap_err().to_string(),
        r#"catalog "cat" is not being served"#
    );
    let mut no_url = c;
    no_url.status.as_mut().unwrap().urls = None;
    assert!(matches!(
        endpoint(&no_url),
        Err(ContentError::NoBaseUrl { .. })
    ));
}

#[tokio::test]
async fn reads_a_package_through_metas_and_caches_per_digest() {
    let s = Server::start().await;
    s.store(
        "cat",
        &catalog_text(&["1.0.0", "1.1.0"], Some("foo.v1.0.0")),
    );
    let base = format!("{}/catalogs/cat", s.base);
    let c = client();
    let cat = cluster_catalog("cat", &base, "reg/cat@sha256:aaa", true);

    let foo = c.package(&cat, "foo").await.unwrap();
    let pkg = foo.package.as_ref().unwrap();
    assert_eq!(pkg.default_channel, "stable");
    assert!(pkg.icon.is_none(), "icon is not cached");
    assert_eq!(foo.channels.len(), 1);
    assert_eq!(foo.bundles.len(), 2);
    assert_eq!(foo.bundles[1].image, "reg/foo:v1.1.0");
    assert!(foo.bundles.iter().all(|b| b.related_images.is_empty()));
    assert_eq!(foo.bundles[0].properties[1].value, serde_json::Value::Null);
    assert_eq!(foo.deprecations[0].entries[0].reference.name, "foo.v1.0.0");
    assert!(foo.bundles.iter().all(|b| b.package == "foo"));
    let st = c.stats();
    // metas?package=foo, then metas?schema=olm.package&name=foo: the package blob is
    // not in catalogd's index by package.
    assert_eq!((st.requests, st.metas_requests, st.all_requests), (2, 2, 0));

    // cached: no further request
    let again = c.package(&cat, "foo").await.unwrap();
    assert!(Arc::ptr_eq(&foo, &again));
    assert_eq!(c.stats().requests, 2);
    assert_eq!(c.stats().cache_hits, 1);

    // an absent package is cached as empty
    let none = c.package(&cat, "nope").await.unwrap();
    assert!(none.is_empty());
    let _ = c.package(&cat, "nope").await.unwrap();
    assert_eq!(c.stats().requests, 3);
    let (count, bytes) = c.cache_size();
    assert_eq!(count, 2);
    assert!(bytes > 0 && bytes < 8_000, "{bytes}");

    // new content under a new digest: the catalog's cache is dropped
    s.store("cat", &catalog_text(&["1.0.0", "1.1.0", "1.2.0"], None));
    let same_digest = c.package(&cat, "foo").await.unwrap();
    assert_eq!(same_digest.bundles.len(), 2, "same digest, still cached");
    let moved = cluster_catalog("cat", &base, "reg/cat@sha256:bbb", true);
    let fresh = c.package(&moved, "foo").await.unwrap();
    assert_eq!(fresh.bundles.len(), 3);
    assert!(fresh.deprecations.is_empty());
    let st = c.stats();
    assert_eq!((st.requests, st.invalidations), (5, 1));
    assert_eq!(c.cache_size().0, 1);

    // not serving: refused even though cached
    let off = cluster_catalog("cat", &base, "reg/cat@sha256:bbb", false);
    assert_eq!(
        c.package(&off, "foo").await.unwrap_err().to_string(),
        r#"catalog "cat" is not being served"#
    );
    assert_eq!(c.stats().requests, 5);

    c.forget("cat");
    assert_eq!(c.cache_size().0, 0);
}

#[tokio::test]
async fn resolution_over_served_content_matches_the_files() {
    let s = Server::start().await;
    let text = catalog_text(&["1.0.0", "1.1.0", "2.0.0"], Some("foo.v2.0.0"));
    s.store("cat", &text);
    let c = client();
    let cat = cluster_catalog(
        "cat",
        &format!("{}/catalogs/cat", s.base),
        "r@sha256:1",
        true,
    );
    let served = c.package(&cat, "foo").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    // `"image": null` in relatedImages reads as "" in both models
    std::fs::write(dir.path().join("c.json"), &text).unwrap();
    let file = crate::fbc::load_package(dir.path(), "foo").unwrap();
    let labels = Default::default();
    let input = |content| {
        [crate::resolve::CatalogInput {
            name: "cat",
            priority: 0,
            availability: crate::api::AvailabilityMode::Available,
            labels: &labels,
            content: Ok(content),
        }]
    };
    let req = crate::resolve::ResolveRequest {
        package: "foo".into(),
        ..Default::default()
    };
    let a = crate::resolve::resolve(&req, &input(&served)).unwrap();
    let b = crate::resolve::resolve(&req, &input(&file)).unwrap();
    assert_eq!(a.bundle, b.bundle);
    // 2.0.0 is deprecated: the non-deprecated 1.1.0 wins
    assert_eq!(a.bundle.name, "foo.v1.1.0");
    assert_eq!(a.deprecation, b.deprecation);
}

/// A catalogd without `metas`: only `/all` exists.
#[tokio::test]
async fn falls_back_to_all_when_metas_is_missing() {
    let text = catalog_text(&["1.0.0"], None);
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let app = Router::new().route(
        "/catalogs/old/api/v1/all",
        get(move || {
            h.fetch_add(1, Ordering::SeqCst);
            let text = text.clone();
            async move { ([("content-type", "application/jsonl")], text) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let c = client();
    let cat = cluster_catalog(
        "old",
        &format!("http://{addr}/catalogs/old"),
        "r@sha256:1",
        true,
    );
    let foo = c.package(&cat, "foo").await.unwrap();
    assert_eq!(foo.bundles.len(), 1);
    assert_eq!(foo.package.as_ref().unwrap().name, "foo");
    let bar = c.package(&cat, "bar").await.unwrap();
    assert_eq!(bar.bundles[0].name, "bar.v1");
    assert_eq!(bar.channels[0].name, "alpha");
    let st = c.stats();
    // metas tried once; the server is then known to lack it
    assert_eq!((st.metas_requests, st.all_requests), (1, 2));
    assert_eq!(hits.load(Ordering::SeqCst), 2);

    let mut out = Vec::new();
    let n = c
        .download(&endpoint(&cat).unwrap(), Some("bar"), &mut out)
        .await
        .unwrap();
    assert_eq!(n, 3);
    assert!(String::from_utf8(out).unwrap().contains("\"bar.v1\""));
}

#[tokio::test]
async fn download_writes_raw_blobs() {
    let s = Server::start().await;
    let text = catalog_text(&["1.0.0"], None);
    s.store("cat", &text);
    let c = client();
    let cat = cluster_catalog("cat", &format!("{}/catalogs/cat", s.base), "r", true);
    let ep = endpoint(&cat).unwrap();
    let mut all = Vec::new();
    assert_eq!(c.download(&ep, None, &mut all).await.unwrap(), 6);
    let all = String::from_utf8(all).unwrap();
    assert!(all.contains("base64data"), "raw blobs keep the icon");
    let mut foo = Vec::new();
    assert_eq!(c.download(&ep, Some("foo"), &mut foo).await.unwrap(), 3);
}

#[tokio::test]
async fn errors_name_the_catalog_and_url() {
    let app = Router::new()
        .route(
            "/catalogs/broken/api/v1/metas",
            get(|| async { (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "boom") }),
        )
        .route(
            "/catalogs/bad/api/v1/metas",
            get(|| async {
                "{\"schema\":\"olm.bundle\",\"name\":\"a\",\"package\":\"foo\"}\n{oops\n"
            }),
        )
        .route(
            "/catalogs/huge/api/v1/metas",
            get(|| async { "x".repeat(10_000) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let c = ContentClient::new(ContentConfig {
        max_body_bytes: 4096,
        max_line_bytes: 1024,
        ..Default::default()
    })
    .unwrap();
    let cat = |n: &str| cluster_catalog(n, &format!("http://{addr}/catalogs/{n}"), "r", true);

    let e = c
        .package(&cat("broken"), "foo")
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            r#"catalog "broken": GET http://{addr}/catalogs/broken/api/v1/metas?package=foo: unexpected status 500: boom"#
        )
    );
    let e = c.package(&cat("bad"), "foo").await.unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            r#"catalog "bad": GET http://{addr}/catalogs/bad/api/v1/metas?package=foo: line 2: "#
        )),
        "{e}"
    );
    let e = c
        .package(&cat("huge"), "foo")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("larger than"), "{e}");
    // failures are not cached: the next call asks again
    let before = c.stats().requests;
    let _ = c.package(&cat("broken"), "foo").await;
    assert_eq!(c.stats().requests, before + 1);

    // nothing listening
    let dead = cluster_catalog("dead", "http://127.0.0.1:1/catalogs/dead", "r", true);
    let e = c.package(&dead, "foo").await.unwrap_err().to_string();
    assert!(
        e.starts_with(
            r#"catalog "dead": GET http://127.0.0.1:1/catalogs/dead/api/v1/metas?package=foo: "#
        ),
        "{e}"
    );
    let weird = cluster_catalog("w", "ftp://h/x", "r", true);
    assert!(matches!(
        c.package(&weird, "foo").await,
        Err(ContentError::BadUrl { .. })
    ));
}

#[tokio::test]
async fn gzip_bodies_are_accepted() {
    // A package big enough for the server to compress (> 1400 bytes).
    let s = Server::start().await;
    let versions: Vec<String> = (0..40).map(|i| format!("1.{i}.0")).collect();
    let refs: Vec<&str> = versions.iter().map(String::as_str).collect();
    s.store("cat", &catalog_text(&refs, None));
    // check the server does compress for a gzip client
    let r = reqwest::Client::builder()
        .no_gzip()
        .build()
        .unwrap()
        .get(format!("{}/catalogs/cat/api/v1/metas?package=foo", s.base))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-encoding"], "gzip");
    let c = client();
    let cat = cluster_catalog("cat", &format!("{}/catalogs/cat", s.base), "r", true);
    assert_eq!(c.package(&cat, "foo").await.unwrap().bundles.len(), 40);
}

#[tokio::test]
async fn concurrent_reads_share_one_fetch() {
    let s = Server::start().await;
    s.store("cat", &catalog_text(&["1.0.0"], None));
    let c = Arc::new(client());
    let cat = cluster_catalog("cat", &format!("{}/catalogs/cat", s.base), "r", true);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (c, cat) = (c.clone(), cat.clone());
            tokio::spawn(async move { c.package(&cat, "foo").await.map(|p| p.bundles.len()) })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), 1);
    }
    assert_eq!(c.stats().requests, 2);
    assert_eq!(c.stats().fetches, 1);
}

#[tokio::test]
async fn catalog_contents_reads_only_selected_available_catalogs() {
    let s = Server::start().await;
    s.store("one", &catalog_text(&["1.0.0", "1.1.0"], None));
    s.store("two", &catalog_text(&["2.0.0"], None));
    let c = client();
    let mut one = cluster_catalog("one", &format!("{}/catalogs/one", s.base), "r1", true);
    one.metadata.labels = Some([("tier".to_string(), "gold".to_string())].into());
    one.spec.priority = 5;
    let two = cluster_catalog("two", &format!("{}/catalogs/two", s.base), "r2", true);
    let mut off = cluster_catalog("off", &format!("{}/catalogs/off", s.base), "r3", false);
    off.spec.availability_mode = crate::api::AvailabilityMode::Unavailable;
    let dark = cluster_catalog("dark", &format!("{}/catalogs/dark", s.base), "r4", false);
    let all = [one.clone(), two.clone(), off.clone()];

    let contents = c.catalog_contents(&all, "foo", None).await;
    assert_eq!(c.stats().requests, 4, "the Unavailable catalog is not read");
    assert_eq!(contents[0].priority, 5);
    let inputs: Vec<_> = contents.iter().map(CatalogContent::input).collect();
    let req = crate::resolve::ResolveRequest {
        package: "foo".into(),
        ..Default::default()
    };
    let r = crate::resolve::resolve(&req, &inputs).unwrap();
    assert_eq!(
        (r.bundle.name.as_str(), r.bundle.catalog.as_str()),
        ("foo.v1.1.0", "one")
    );

    let selector = serde_json::from_value(json!({"matchLabels": {"tier": "gold"}})).unwrap();
    let contents = c.catalog_contents(&all, "foo", Some(&selector)).await;
    assert!(
        contents[1].content.as_ref().unwrap().is_empty(),
        "not selected, not read"
    );

    // Available but not serving: resolution fails naming the catalog.
    let contents = c.catalog_contents(&[two, dark], "foo", None).await;
    let inputs: Vec<_> = contents.iter().map(CatalogContent::input).collect();
    let e = crate::resolve::resolve(&req, &inputs)
        .unwrap_err()
        .to_string();
    assert!(e.contains(r#"catalog "dark" is not being served"#), "{e}");
}

/// The catalog server on HTTPS with a certificate of a test CA: unknown to the system
/// roots (a clear certificate error), trusted through a `--catalogd-cas-dir` directory.
#[tokio::test]
async fn https_catalog_server_trusted_through_cas_dir() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let pki_dir = tempfile::tempdir().unwrap();
    let pki = crate::testenv::pki::generate(pki_dir.path()).unwrap();
    let root = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    std::fs::write(
        src.path().join("catalog.json"),
        catalog_text(&["1.0.0"], None),
    )
    .unwrap();
    crate::fbc::store(root.path(), "tls", src.path()).unwrap();
    let tls = crate::server::tls::server_config(&pki.serving_cert, &pki.serving_key).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("https://{}/catalogs/tls", listener.local_addr().unwrap());
    tokio::spawn(crate::server::catalog::serve_tls(
        listener,
        tls,
        router(root.path()),
        std::future::pending(),
    ));
    let cat = cluster_catalog("tls", &base, "r", true);

    let e = client().package(&cat, "foo").await.unwrap_err().to_string();
    assert!(e.contains("UnknownIssuer"), "{e}");
    assert!(
        e.contains("not signed by a trusted CA: give its CA with --catalogd-cas-dir"),
        "{e}"
    );

    // A mounted Secret: ca.crt, tls.crt, tls.key, and Kubernetes' `..data` directory.
    let cas = tempfile::tempdir().unwrap();
    std::fs::copy(&pki.ca_cert, cas.path().join("ca.crt")).unwrap();
    std::fs::copy(&pki.serving_key, cas.path().join("tls.key")).unwrap();
    std::fs::create_dir(cas.path().join("..data")).unwrap();
    let trusting =
        ContentClient::new(ContentConfig::default().with_cas_dir(cas.path()).unwrap()).unwrap();
    let content = trusting.package(&cat, "foo").await.unwrap();
    assert_eq!(content.bundles.len(), 1);

    // The watched directory changed: the same client trusts the CA from then on.
    let watched = client();
    assert!(watched.package(&cat, "foo").await.is_err());
    let pem = read_cas_dir(cas.path()).unwrap();
    watched.set_ca_bundle(Some(&pem)).unwrap();
    assert_eq!(watched.package(&cat, "foo").await.unwrap().bundles.len(), 1);
    // A bundle that does not parse changes nothing.
    assert!(
        watched
            .set_ca_bundle(Some(
                b"-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n"
            ))
            .is_err()
    );
    assert_eq!(watched.package(&cat, "foo").await.unwrap().bundles.len(), 1);
}

#[test]
fn cas_dir_errors_name_the_directory() {
    let empty = tempfile::tempdir().unwrap();
    std::fs::write(
        empty.path().join("tls.key"),
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let e = read_cas_dir(empty.path()).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "catalog CA directory {}: no certificates found",
            empty.path().display()
        )
    );
    let e = read_cas_dir(std::path::Path::new("/nonexistent-cas"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("catalog CA directory /nonexistent-cas: cannot read the directory"),
        "{e}"
    );
}

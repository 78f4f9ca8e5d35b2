//! Resolution against ClusterCatalogs served by this project, end to end: a real
//! kube-apiserver and registry, the controller serving catalog content, the content
//! client reading it over HTTP (`status.urls.base`), and `olmv1 resolve --catalog`
//! with a ClusterCatalog name and an image reference.

use crate::support;

use kube::api::{Api, Patch, PatchParams, PostParams};
use olmv1::api::{ClusterCatalog, conditions};
use olmv1::content::{ContentClient, ContentConfig};
use olmv1::resolve::deprecation::{CatalogData, ConditionStatus, deprecation_conditions};
use olmv1::resolve::{Availability, CatalogInput, InstalledBundle, ResolveRequest, resolve};
use olmv1::testenv::registry;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// One package `foo` with a linear `stable` channel (and a `fast` channel holding the
/// newest bundle), plus optional deprecation entries.
fn fbc(versions: &[&str], deprecations: &[Value]) -> Vec<u8> {
    let mut docs = vec![
        json!({"schema": "olm.package", "name": "foo", "defaultChannel": "stable",
        "icon": {"base64data": "QUJD", "mediatype": "image/png"}, "description": "the foo operator"}),
    ];
    let entries: Vec<Value> = versions
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
    let newest = versions.last().copied().unwrap_or_default();
    docs.push(
        json!({"schema": "olm.channel", "name": "stable", "package": "foo", "entries": entries}),
    );
    docs.push(
        json!({"schema": "olm.channel", "name": "fast", "package": "foo",
        "entries": [{"name": format!("foo.v{newest}")}]}),
    );
    for v in versions {
        docs.push(json!({
            "schema": "olm.bundle", "name": format!("foo.v{v}"), "package": "foo",
            "image": format!("example.com/bundles/foo:v{v}"),
            "properties": [
                {"type": "olm.package", "value": {"packageName": "foo", "version": v}},
                {"type": "olm.csv.metadata", "value": {"description": "x".repeat(500)}}
            ]
        }));
    }
    if !deprecations.is_empty() {
        docs.push(json!({"schema": "olm.deprecations", "package": "foo", "entries": deprecations}));
    }
    docs.iter()
        .map(|d| format!("{d}\n"))
        .collect::<String>()
        .into_bytes()
}

async fn push(repo_tag: &str, catalog: Vec<u8>) -> registry::PushedImage {
    let files = BTreeMap::from([("foo/catalog.json".to_string(), catalog)]);
    registry::push_catalog_image(support::registry(), repo_tag, &files)
        .await
        .expect("push catalog image")
}

fn cluster_catalog(name: &str, image_ref: &str, priority: i32) -> ClusterCatalog {
    serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": name},
        "spec": {"priority": priority, "source": {"type": "Image", "image": {"ref": image_ref}}},
    }))
    .expect("catalog")
}

async fn api() -> Api<ClusterCatalog> {
    support::controller();
    Api::all(support::cluster().admin().await)
}

async fn wait_serving(api: &Api<ClusterCatalog>, name: &str, resolved: &str) -> ClusterCatalog {
    support::eventually(60, &format!("{name} serving {resolved}"), || async {
        let c = api.get(name).await.ok()?;
        let status = c.status.as_ref()?;
        let serving = conditions::find(&status.conditions, "Serving")?;
        let got = &status.resolved_source.as_ref()?.image.ref_;
        (serving.status == "True" && got == resolved).then_some(c)
    })
    .await
}

/// Creates a ClusterCatalog from a freshly pushed image and waits until it serves it.
async fn served(prefix: &str, catalog: Vec<u8>) -> (String, ClusterCatalog, String) {
    let api = api().await;
    let host = support::registry().host().to_string();
    let name = support::unique(prefix);
    let image = format!("{host}/catalogs/{name}:v1");
    // A blob of an unknown schema (kept and served) makes every catalog image unique.
    // With identical content, two repositories share one digest, and the image cache
    // then reports the first repository in status.resolvedSource (src/image bug,
    // reported to the lead).
    let mut catalog = catalog;
    catalog.extend(format!("{}\n", json!({"schema": "olmv1.test", "name": name})).bytes());
    let pushed = push(&format!("catalogs/{name}:v1"), catalog).await;
    api.create(&PostParams::default(), &cluster_catalog(&name, &image, 0))
        .await
        .expect("create ClusterCatalog");
    let c = wait_serving(&api, &name, &pushed.reference).await;
    (name, c, image)
}

fn request(channels: &[&str], installed: Option<(&str, &str)>) -> ResolveRequest {
    ResolveRequest {
        package: "foo".into(),
        channels: channels.iter().map(|c| c.to_string()).collect(),
        installed: installed.map(|(name, version)| InstalledBundle {
            name: name.into(),
            version: version.into(),
            release: None,
        }),
        ..Default::default()
    }
}

fn resolve_one(
    catalog: &ClusterCatalog,
    content: &olmv1::fbc::model::PackageContent,
    req: &ResolveRequest,
) -> Result<olmv1::resolve::Resolution, olmv1::resolve::ResolveError> {
    let labels = catalog.metadata.labels.clone().unwrap_or_default();
    let input = [CatalogInput {
        name: catalog.metadata.name.as_deref().unwrap_or_default(),
        priority: catalog.spec.priority,
        availability: Availability::Available,
        labels: &labels,
        content: Ok(content),
    }];
    resolve(req, &input)
}

#[tokio::test]
async fn resolves_through_the_content_client_and_caches_per_digest() {
    let (name, catalog, _) = served("res", fbc(&["1.0.0", "1.1.0", "1.2.0"], &[])).await;
    let client = ContentClient::new(ContentConfig::default()).expect("client");
    let base = &catalog.status.as_ref().unwrap().urls.as_ref().unwrap().base;
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");

    let content = client.package(&catalog, "foo").await.expect("package");
    assert_eq!(content.bundles.len(), 3);
    assert!(
        content.package.as_ref().unwrap().icon.is_none(),
        "compact projection"
    );
    let r = resolve_one(&catalog, &content, &request(&[], None)).expect("resolve");
    assert_eq!(r.bundle.name, "foo.v1.2.0");
    assert_eq!(r.bundle.image, "example.com/bundles/foo:v1.2.0");
    assert_eq!(r.bundle.catalog, name);
    let r = resolve_one(
        &catalog,
        &content,
        &request(&["stable"], Some(("foo.v1.0.0", "1.0.0"))),
    )
    .expect("upgrade");
    assert_eq!(r.bundle.name, "foo.v1.1.0", "only the direct successor");
    let stats = client.stats();
    // metas?package=, then the olm.package blob by name (not in catalogd's package index).
    assert_eq!((stats.requests, stats.metas_requests), (2, 2));

    // Same digest: the cache answers, no HTTP.
    let again = client.package(&catalog, "foo").await.expect("package");
    assert!(std::sync::Arc::ptr_eq(&content, &again));
    assert_eq!(client.stats().requests, 2);
    assert_eq!(client.stats().cache_hits, 1);

    // A new image: the catalog's resolved ref changes and the cache is invalidated.
    let api = api().await;
    let host = support::registry().host().to_string();
    let pushed = push(
        &format!("catalogs/{name}:v2"),
        fbc(&["1.0.0", "1.1.0", "1.2.0", "2.0.0"], &[]),
    )
    .await;
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"spec": {"source": {"image": {"ref": format!("{host}/catalogs/{name}:v2")}}}}),
        ),
    )
    .await
    .expect("patch");
    let moved = wait_serving(&api, &name, &pushed.reference).await;
    let fresh = client.package(&moved, "foo").await.expect("package");
    assert_eq!(fresh.bundles.len(), 4);
    let stats = client.stats();
    assert_eq!((stats.requests, stats.invalidations), (4, 1));
    let r = resolve_one(&moved, &fresh, &request(&[], None)).expect("resolve");
    assert_eq!(r.bundle.name, "foo.v2.0.0");
}

#[tokio::test]
async fn deprecations_in_the_served_catalog_reach_the_conditions() {
    let deprecations = [
        json!({"reference": {"schema": "olm.package"}, "message": "foo is end of life"}),
        json!({"reference": {"schema": "olm.channel", "name": "stable"}, "message": "use fast"}),
        json!({"reference": {"schema": "olm.bundle", "name": "foo.v1.2.0"}, "message": "1.2.0 is broken"}),
    ];
    let (_, catalog, _) = served("dep", fbc(&["1.0.0", "1.1.0", "1.2.0"], &deprecations)).await;
    let client = ContentClient::new(ContentConfig::default()).expect("client");
    let content = client.package(&catalog, "foo").await.expect("package");

    // The deprecated bundle loses to the newest non-deprecated one.
    let r = resolve_one(&catalog, &content, &request(&["stable"], None)).expect("resolve");
    assert_eq!(r.bundle.name, "foo.v1.1.0");
    assert!(!r.bundle.deprecated);
    let conds = deprecation_conditions(
        CatalogData::Available(r.deprecation.as_ref()),
        &["stable".to_string()],
        Some("foo.v1.2.0"),
    );
    let by_type: BTreeMap<&str, _> = conds.iter().map(|c| (c.type_, c)).collect();
    for t in [
        "Deprecated",
        "PackageDeprecated",
        "ChannelDeprecated",
        "BundleDeprecated",
    ] {
        assert_eq!(by_type[t].status, ConditionStatus::True, "{t}: {conds:?}");
    }
    assert_eq!(by_type["PackageDeprecated"].message, "foo is end of life");
    assert_eq!(by_type["ChannelDeprecated"].message, "use fast");
    assert_eq!(by_type["BundleDeprecated"].message, "1.2.0 is broken");
    assert!(
        by_type["Deprecated"].message.contains("foo is end of life")
            && by_type["Deprecated"].message.contains("1.2.0 is broken"),
        "{:?}",
        by_type["Deprecated"]
    );

    // Only the deprecated bundle is left in `fast`: it is still chosen, and flagged.
    let r = resolve_one(&catalog, &content, &request(&["fast"], None)).expect("resolve");
    assert_eq!(r.bundle.name, "foo.v1.2.0");
    assert!(r.bundle.deprecated);
    let conds = deprecation_conditions(
        CatalogData::Available(r.deprecation.as_ref()),
        &["fast".to_string()],
        Some("foo.v1.1.0"),
    );
    let by_type: BTreeMap<&str, _> = conds.iter().map(|c| (c.type_, c)).collect();
    assert_eq!(by_type["ChannelDeprecated"].status, ConditionStatus::False);
    assert_eq!(by_type["BundleDeprecated"].status, ConditionStatus::False);
    assert_eq!(by_type["PackageDeprecated"].status, ConditionStatus::True);
}

#[tokio::test]
async fn a_catalog_that_is_not_serving_is_refused() {
    let api = api().await;
    let host = support::registry().host().to_string();
    let name = support::unique("off");
    push(&format!("catalogs/{name}:v1"), fbc(&["1.0.0"], &[])).await;
    let mut c = cluster_catalog(&name, &format!("{host}/catalogs/{name}:v1"), 0);
    c.spec.availability_mode = olmv1::api::AvailabilityMode::Unavailable;
    api.create(&PostParams::default(), &c)
        .await
        .expect("create");
    let c = support::eventually(60, "Serving=False", || async {
        let c = api.get(&name).await.ok()?;
        let serving = conditions::find(&c.status.as_ref()?.conditions, "Serving")?.clone();
        (serving.status == "False").then_some(c)
    })
    .await;
    let client = ContentClient::new(ContentConfig::default()).expect("client");
    let err = client.package(&c, "foo").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("catalog \"{name}\" is not being served")
    );
    assert_eq!(client.stats().requests, 0);

    let out = olmv1_cli(&["resolve", "--catalog", &name, "--package", "foo"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("catalog \"{name}\" is not being served")),
        "{stderr}"
    );
}

fn olmv1_cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_olmv1"))
        .args(args)
        .env("KUBECONFIG", &support::cluster().admin_kubeconfig)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run olmv1")
}

#[tokio::test]
async fn the_resolve_command_reads_cluster_catalogs_and_images() {
    let (name, _, image) = served("cli", fbc(&["1.0.0", "1.1.0"], &[])).await;

    let out = olmv1_cli(&["resolve", "--catalog", &name, "--package", "foo"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("bundle:  foo.v1.1.0"), "{stdout}");
    assert!(
        stdout.contains("image:   example.com/bundles/foo:v1.1.0"),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("catalog: {name}")), "{stdout}");

    let out = olmv1_cli(&[
        "resolve",
        "--catalog",
        &name,
        "--package",
        "foo",
        "--installed",
        "foo.v1.0.0",
        "--explain",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("foo.v1.1.0") && stdout.contains("chosen"),
        "{stdout}"
    );

    // The image itself, pulled into a private cache (plain HTTP for the test registry).
    let cache = tempfile::tempdir().expect("tempdir");
    let host = support::registry().host().to_string();
    let out = olmv1_cli(&[
        "resolve",
        "--catalog",
        &image,
        "--insecure-registry",
        &host,
        "--image-cache-dir",
        cache.path().to_str().unwrap(),
        "--package",
        "foo",
        "--version",
        "<1.1",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("bundle:  foo.v1.0.0"), "{stdout}");
    assert!(stdout.contains(&format!("catalog: {image}")), "{stdout}");

    // A name that is neither a file, an image nor a ClusterCatalog.
    let out = olmv1_cli(&[
        "resolve",
        "--catalog",
        "no-such-catalog",
        "--package",
        "foo",
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ClusterCatalog \"no-such-catalog\" not found"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_catalog_command_reads_cluster_catalogs_and_images() {
    let (name, _, image) = served("query", fbc(&["1.0.0", "1.1.0"], &[])).await;
    let json_of = |out: std::process::Output| -> Value {
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("JSON output")
    };

    let bundles = json_of(olmv1_cli(&[
        "catalog",
        "bundles",
        "--catalog",
        &name,
        "--package",
        "foo",
        "-o",
        "json",
    ]));
    let names: Vec<&str> = bundles
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|b| b["name"].as_str())
        .collect();
    assert_eq!(names, ["foo.v1.0.0", "foo.v1.1.0"]);
    assert_eq!(bundles[1]["image"], "example.com/bundles/foo:v1.1.0");

    // Whole catalog (no --package): `/api/v1/all`.
    let packages = json_of(olmv1_cli(&[
        "catalog",
        "packages",
        "--catalog",
        &name,
        "-o",
        "json",
    ]));
    assert_eq!(packages[0]["name"], "foo");
    assert_eq!(packages[0]["latestVersion"], "1.1.0");

    // Raw blobs are served unchanged (the icon the resolver's cache drops is there).
    let out = olmv1_cli(&[
        "catalog",
        "show",
        "--catalog",
        &name,
        "--package",
        "foo",
        "--schema",
        "olm.package",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("QUJD") && stdout.contains("the foo operator"),
        "{stdout}"
    );

    // The catalog image itself.
    let cache = tempfile::tempdir().expect("tempdir");
    let host = support::registry().host().to_string();
    let channels = json_of(olmv1_cli(&[
        "catalog",
        "channels",
        "--catalog",
        &image,
        "--insecure-registry",
        &host,
        "--image-cache-dir",
        cache.path().to_str().unwrap(),
        "-o",
        "json",
    ]));
    let mut heads: Vec<(&str, &str)> = channels
        .as_array()
        .expect("array")
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["head"].as_str().unwrap()))
        .collect();
    heads.sort();
    assert_eq!(heads, [("fast", "foo.v1.1.0"), ("stable", "foo.v1.1.0")]);

    // Not serving: the same message as for resolution.
    let api = api().await;
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"availabilityMode": "Unavailable"}})),
    )
    .await
    .expect("patch");
    support::eventually(30, "Serving=False", || async {
        let c = api.get(&name).await.ok()?;
        let s = conditions::find(&c.status.as_ref()?.conditions, "Serving")?.clone();
        (s.status == "False").then_some(())
    })
    .await;
    let out = olmv1_cli(&["catalog", "packages", "--catalog", &name]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("catalog \"{name}\" is not being served")),
        "{stderr}"
    );
}

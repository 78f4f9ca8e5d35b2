//! The ClusterCatalog reconciler and the catalog server, end to end: a real
//! kube-apiserver, a real `docker-registry`, and the controller running as its own
//! non-admin ServiceAccount.

use crate::support;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use olmv1::api::{ClusterCatalog, conditions};
use olmv1::testenv::registry::{self, ImageSpec};
use serde_json::{Value, json};
use std::collections::BTreeMap;

fn fbc(package: &str, versions: &[&str], registry_host: &str) -> Vec<u8> {
    let mut docs =
        vec![json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"})];
    let entries: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut e = json!({"name": format!("{package}.v{v}")});
            if i > 0 {
                e["replaces"] = json!(format!("{package}.v{}", versions[i - 1]));
            }
            e
        })
        .collect();
    docs.push(
        json!({"schema": "olm.channel", "name": "stable", "package": package, "entries": entries}),
    );
    for v in versions {
        docs.push(json!({
            "schema": "olm.bundle", "name": format!("{package}.v{v}"), "package": package,
            "image": format!("{registry_host}/bundles/{package}:v{v}"),
            "properties": [{"type": "olm.package", "value": {"packageName": package, "version": v}}]
        }));
    }
    docs.iter()
        .map(|d| format!("{d}\n"))
        .collect::<String>()
        .into_bytes()
}

async fn push_catalog(repo_tag: &str, files: &[(&str, Vec<u8>)]) -> registry::PushedImage {
    let files: BTreeMap<String, Vec<u8>> = files
        .iter()
        .map(|(p, d)| (p.to_string(), d.clone()))
        .collect();
    registry::push_catalog_image(support::registry(), repo_tag, &files)
        .await
        .expect("push catalog image")
}

fn catalog(name: &str, image_ref: &str, poll: Option<i32>) -> ClusterCatalog {
    let mut image = json!({"ref": image_ref});
    if let Some(p) = poll {
        image["pollIntervalMinutes"] = json!(p);
    }
    serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": name},
        "spec": {"source": {"type": "Image", "image": image}},
    }))
    .expect("catalog")
}

async fn api() -> Api<ClusterCatalog> {
    support::controller();
    Api::all(support::cluster().admin().await)
}

fn condition(c: &ClusterCatalog, type_: &str) -> Option<Condition> {
    c.status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, type_).cloned())
}

async fn wait_serving(api: &Api<ClusterCatalog>, name: &str, resolved: &str) -> ClusterCatalog {
    support::eventually(60, &format!("{name} serving {resolved}"), || async {
        let c = api.get(name).await.ok()?;
        let serving = condition(&c, "Serving")?;
        let got = c
            .status
            .as_ref()?
            .resolved_source
            .as_ref()?
            .image
            .ref_
            .clone();
        (serving.status == "True" && got == resolved).then_some(c)
    })
    .await
}

async fn get_body(url: &str) -> (u16, String) {
    let r = reqwest::get(url).await.expect("GET");
    let status = r.status().as_u16();
    (status, r.text().await.unwrap_or_default())
}

#[tokio::test]
async fn catalog_becomes_serving_with_the_image_content() {
    let api = api().await;
    let host = support::registry().host().to_string();
    let name = support::unique("serving");
    let pushed = push_catalog(
        &format!("catalogs/{name}:v1"),
        &[("foo/catalog.json", fbc("foo", &["1.0.0", "1.1.0"], &host))],
    )
    .await;
    api.create(
        &PostParams::default(),
        &catalog(&name, &format!("{host}/catalogs/{name}:v1"), None),
    )
    .await
    .expect("create");
    let c = wait_serving(&api, &name, &pushed.reference).await;

    assert_eq!(
        c.labels().get("olm.operatorframework.io/metadata.name"),
        Some(&name)
    );
    assert!(
        c.finalizers()
            .iter()
            .any(|f| f == "olm.operatorframework.io/delete-server-cache")
    );
    let status = c.status.clone().expect("status");
    let serving = condition(&c, "Serving").expect("serving");
    assert_eq!(
        (serving.reason.as_str(), serving.message.as_str()),
        ("Available", "Serving desired content from resolved source")
    );
    let progressing = condition(&c, "Progressing").expect("progressing");
    assert_eq!(
        (
            progressing.status.as_str(),
            progressing.reason.as_str(),
            progressing.message.as_str()
        ),
        (
            "True",
            "Succeeded",
            "Successfully unpacked and stored content from resolved source"
        )
    );
    assert_eq!(progressing.observed_generation, c.metadata.generation);
    assert!(status.last_unpacked.is_some());
    let base = status.urls.expect("urls").base;
    assert_eq!(
        base,
        format!("{}/catalogs/{name}", support::controller().catalog_server)
    );

    let (code, all) = get_body(&format!("{base}/api/v1/all")).await;
    assert_eq!(code, 200);
    let blobs: Vec<Value> = all
        .lines()
        .map(|l| serde_json::from_str(l).expect("jsonl"))
        .collect();
    assert_eq!(blobs.len(), 4, "{all}");
    assert_eq!(blobs[0]["schema"], "olm.package");
    let (code, bundles) = get_body(&format!(
        "{base}/api/v1/metas?schema=olm.bundle&package=foo"
    ))
    .await;
    assert_eq!(code, 200);
    assert_eq!(bundles.lines().count(), 2);
    assert!(bundles.contains("foo.v1.1.0"));
    // Serving first, extras after (docs/concepts/catalogs.md §9.2): the gzip copy of
    // `all` is written by a background task once the content is served.
    let stored = support::controller().cache_dir.join("catalogs").join(&name);
    support::eventually(30, "the gzip copy of all", || async {
        stored
            .join(olmv1::fbc::store::CATALOG_GZIP_FILE)
            .exists()
            .then_some(())
    })
    .await;
}

use kube::ResourceExt;

#[tokio::test]
async fn a_new_image_on_the_same_tag_is_picked_up_by_polling() {
    let api = api().await;
    let host = support::registry().host().to_string();
    let name = support::unique("poll");
    let tag = format!("catalogs/{name}:latest");
    let first = push_catalog(&tag, &[("foo/catalog.json", fbc("foo", &["1.0.0"], &host))]).await;
    api.create(
        &PostParams::default(),
        &catalog(&name, &format!("{host}/{tag}"), Some(1)),
    )
    .await
    .expect("create");
    let c = wait_serving(&api, &name, &first.reference).await;
    let base = c.status.and_then(|s| s.urls).expect("urls").base;

    let second = push_catalog(
        &tag,
        &[("foo/catalog.json", fbc("foo", &["1.0.0", "2.0.0"], &host))],
    )
    .await;
    assert_ne!(first.digest, second.digest);
    wait_serving(&api, &name, &second.reference).await;
    let (_, all) = get_body(&format!("{base}/api/v1/all")).await;
    assert!(
        all.contains("foo.v2.0.0"),
        "new content must be served: {all}"
    );
}

#[tokio::test]
async fn availability_mode_unavailable_stops_serving_and_deletion_cleans_up() {
    let api = api().await;
    let host = support::registry().host().to_string();
    let name = support::unique("avail");
    let pushed = push_catalog(
        &format!("catalogs/{name}:v1"),
        &[("bar/catalog.json", fbc("bar", &["0.1.0"], &host))],
    )
    .await;
    api.create(
        &PostParams::default(),
        &catalog(&name, &pushed.reference, None),
    )
    .await
    .expect("create");
    let c = wait_serving(&api, &name, &pushed.reference).await;
    let base = c.status.and_then(|s| s.urls).expect("urls").base;
    assert_eq!(get_body(&format!("{base}/api/v1/all")).await.0, 200);

    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"availabilityMode": "Unavailable"}})),
    )
    .await
    .expect("patch");
    let c = support::eventually(30, "Serving=False UserSpecifiedUnavailable", || async {
        let c = api.get(&name).await.ok()?;
        (condition(&c, "Serving")?.reason == "UserSpecifiedUnavailable").then_some(c)
    })
    .await;
    let status = c.status.clone().expect("status");
    assert!(
        status.resolved_source.is_none() && status.urls.is_none() && status.last_unpacked.is_none()
    );
    assert_eq!(
        condition(&c, "Serving").expect("serving").message,
        "Catalog availability mode is set to Unavailable"
    );
    assert_eq!(get_body(&format!("{base}/api/v1/all")).await.0, 404);
    assert!(
        !c.finalizers()
            .iter()
            .any(|f| f.contains("delete-server-cache"))
    );

    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"availabilityMode": "Available"}})),
    )
    .await
    .expect("patch");
    wait_serving(&api, &name, &pushed.reference).await;
    assert_eq!(get_body(&format!("{base}/api/v1/all")).await.0, 200);

    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    support::eventually(30, "catalog deleted", || async {
        api.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
    assert_eq!(get_body(&format!("{base}/api/v1/all")).await.0, 404);
    let stored = support::controller().cache_dir.join("catalogs").join(&name);
    assert!(
        !stored.exists(),
        "stored content must be removed: {}",
        stored.display()
    );
}

/// Serves `good`, then switches the spec to `bad`: the failure shows up in
/// Progressing while the previous content stays served.
async fn bad_image_keeps_previous_content(bad: &str, expected: &str) {
    let api = api().await;
    let host = support::registry().host().to_string();
    let name = support::unique("bad");
    let good = push_catalog(
        &format!("catalogs/{name}:good"),
        &[("ok/catalog.json", fbc("ok", &["1.0.0"], &host))],
    )
    .await;
    api.create(
        &PostParams::default(),
        &catalog(&name, &good.reference, None),
    )
    .await
    .expect("create");
    let c = wait_serving(&api, &name, &good.reference).await;
    let base = c.status.and_then(|s| s.urls).expect("urls").base;

    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"source": {"image": {"ref": bad}}}})),
    )
    .await
    .expect("patch");
    let c = support::eventually(
        60,
        &format!("Progressing to report {expected:?}"),
        || async {
            let c = api.get(&name).await.ok()?;
            condition(&c, "Progressing")?
                .message
                .contains(expected)
                .then_some(c)
        },
    )
    .await;
    let serving = condition(&c, "Serving").expect("serving");
    assert_eq!(
        serving.status, "True",
        "previous content keeps being served"
    );
    assert_eq!(
        c.status
            .and_then(|s| s.resolved_source)
            .expect("resolved")
            .image
            .ref_,
        good.reference
    );
    let (code, all) = get_body(&format!("{base}/api/v1/all")).await;
    assert_eq!(code, 200);
    assert!(all.contains("ok.v1.0.0"));
}

#[tokio::test]
async fn image_without_the_configs_label_is_reported() {
    let host = support::registry().host().to_string();
    let repo = format!("catalogs/{}:nolabel", support::unique("nolabel"));
    let spec = ImageSpec {
        files: BTreeMap::from([(
            "configs/x/catalog.json".to_string(),
            fbc("x", &["1.0.0"], &host),
        )]),
        ..Default::default()
    };
    let pushed = registry::push_image(support::registry(), &repo, &spec)
        .await
        .expect("push");
    bad_image_keeps_previous_content(
        &pushed.reference,
        "missing the required label \"operators.operatorframework.io.index.configs.v1\"",
    )
    .await;
}

/// A catalog breaking FBC invariants is stored and served as catalogd does (the
/// `Progressing` message stays upstream's), and one Warning Event on it lists each
/// problem with file and line (`expected`: substrings of its note).
async fn served_with_warnings(name: &str, file: &str, content: &[u8], expected: &[&str]) {
    let api = api().await;
    let name = support::unique(name);
    let pushed = push_catalog(&format!("catalogs/{name}:v1"), &[(file, content.to_vec())]).await;
    api.create(
        &PostParams::default(),
        &catalog(&name, &pushed.reference, None),
    )
    .await
    .expect("create");
    let c = wait_serving(&api, &name, &pushed.reference).await;
    let progressing = condition(&c, "Progressing").expect("progressing");
    assert_eq!(
        progressing.message,
        "Successfully unpacked and stored content from resolved source"
    );
    let base = c.status.and_then(|s| s.urls).expect("urls").base;
    let (code, all) = get_body(&format!("{base}/api/v1/all")).await;
    assert_eq!(code, 200);
    assert_eq!(
        all.lines().count(),
        content
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count()
    );
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::all(support::cluster().admin().await);
    let note = support::eventually(60, "InvalidCatalogContent event", || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find_map(|e| {
            let regarding = e.regarding.as_ref()?;
            (regarding.name.as_deref() == Some(name.as_str())
                && regarding.kind.as_deref() == Some("ClusterCatalog")
                && e.reason.as_deref() == Some("InvalidCatalogContent")
                && e.type_.as_deref() == Some("Warning"))
            .then(|| e.note.clone().unwrap_or_default())
        })
    })
    .await;
    for want in expected {
        assert!(note.contains(want), "{want:?} not in {note:?}");
    }
}

#[tokio::test]
async fn invalid_catalog_content_is_reported() {
    let host = support::registry().host().to_string();
    let mut dup = fbc("dup", &["1.0.0"], &host);
    dup.extend_from_slice(
        b"{\"schema\":\"olm.package\",\"name\":\"dup\",\"defaultChannel\":\"stable\"}\n",
    );
    let line = dup.iter().filter(|b| **b == b'\n').count();
    served_with_warnings(
        "dup",
        "dup/catalog.json",
        &dup,
        &[&format!(
            "dup/catalog.json:{line}: duplicate package \"dup\""
        )],
    )
    .await;
}

#[tokio::test]
async fn unknown_image_is_reported() {
    let host = support::registry().host().to_string();
    bad_image_keeps_previous_content(
        &format!("{host}/catalogs/does-not-exist:v1"),
        "source catalog content",
    )
    .await;
}

#[tokio::test]
async fn real_catalogs_load_and_serve() {
    let Some(dir) = olmv1::testenv::shared_dir("fixtures/catalogs") else {
        return;
    };
    let api = api().await;
    for (version, package) in [
        ("v4.16", "ecr-secret-operator"),
        ("v4.20", "ecr-secret-operator"),
        ("v4.20", "kubevirt-wol"),
    ] {
        let content =
            std::fs::read(dir.join(version).join(package).join("catalog.yaml")).expect("fixture");
        let name = support::unique("real");
        let pushed = push_catalog(
            &format!("catalogs/{name}:v1"),
            &[(&format!("{package}/catalog.yaml"), content)],
        )
        .await;
        api.create(
            &PostParams::default(),
            &catalog(&name, &pushed.reference, None),
        )
        .await
        .expect("create");
        let c = wait_serving(&api, &name, &pushed.reference).await;
        let base = c.status.and_then(|s| s.urls).expect("urls").base;
        let (code, body) = get_body(&format!("{base}/api/v1/metas?schema=olm.package")).await;
        assert_eq!(code, 200);
        assert!(body.contains(package), "{version}/{package}: {body}");
        let (code, bundles) = get_body(&format!(
            "{base}/api/v1/metas?schema=olm.bundle&package={package}"
        ))
        .await;
        assert_eq!(code, 200);
        assert!(bundles.lines().count() >= 1, "{version}/{package}");
    }
}

// ------------------------------------------------------------------ hostile input
// Each ends in a clear Progressing message while the previous content stays served.
// (Nothing-outside-the-cache and memory bounds are asserted by the unit tests of
// src/image at the pull level; here the reconciler's reporting is checked.)

use olmv1::testenv::registry::TarEntry;

fn configs_label() -> BTreeMap<String, String> {
    BTreeMap::from([(
        "operators.operatorframework.io.index.configs.v1".to_string(),
        "/configs".to_string(),
    )])
}

async fn push_entries(
    name: &str,
    files: &[(&str, &[u8])],
    entries: Vec<TarEntry>,
    labels: BTreeMap<String, String>,
) -> String {
    let spec = ImageSpec {
        files: files
            .iter()
            .map(|(p, d)| (p.to_string(), d.to_vec()))
            .collect(),
        entries,
        labels,
        ..Default::default()
    };
    let repo = format!("hostile/{}:v1", support::unique(name));
    registry::push_image(support::registry(), &repo, &spec)
        .await
        .expect("push")
        .reference
}

async fn push_gzip_layer(name: &str, layer: Vec<u8>) -> String {
    let repo = format!("hostile/{}:v1", support::unique(name));
    registry::push_layers(
        support::registry(),
        &repo,
        vec![(layer, "application/vnd.oci.image.layer.v1.tar+gzip".into())],
        &configs_label(),
    )
    .await
    .expect("push")
    .reference
}

const OK_FILE: &[u8] = br#"{"schema":"olm.package","name":"x","defaultChannel":"stable"}"#;

#[tokio::test]
async fn hostile_label_pointing_outside_the_image() {
    let labels = BTreeMap::from([(
        "operators.operatorframework.io.index.configs.v1".to_string(),
        "../../etc".to_string(),
    )]);
    let r = push_entries(
        "labelout",
        &[("configs/x/catalog.json", OK_FILE)],
        vec![],
        labels,
    )
    .await;
    bad_image_keeps_previous_content(&r, "source catalog content").await;
}

#[tokio::test]
async fn hostile_dotdot_entry() {
    let r = push_entries(
        "dotdot",
        &[],
        vec![TarEntry::File {
            path: "configs/../../escape".into(),
            data: b"x".to_vec(),
        }],
        configs_label(),
    )
    .await;
    bad_image_keeps_previous_content(&r, "source catalog content").await;
}

#[tokio::test]
async fn hostile_absolute_path_entry() {
    let r = push_entries(
        "abs",
        &[],
        vec![TarEntry::File {
            path: "/etc/olmv1-escape".into(),
            data: b"x".to_vec(),
        }],
        configs_label(),
    )
    .await;
    bad_image_keeps_previous_content(&r, "source catalog content").await;
}

#[tokio::test]
async fn hostile_symlink_out() {
    let r = push_entries(
        "symlink",
        &[("configs/x/catalog.json", OK_FILE)],
        vec![TarEntry::Symlink {
            path: "configs/link".into(),
            target: "../../../../etc/passwd".into(),
        }],
        configs_label(),
    )
    .await;
    bad_image_keeps_previous_content(&r, "source catalog content").await;
}

#[tokio::test]
async fn hostile_hardlink_out() {
    let r = push_entries(
        "hardlink",
        &[("configs/x/catalog.json", OK_FILE)],
        vec![TarEntry::HardLink {
            path: "configs/h".into(),
            target: "/etc/passwd".into(),
        }],
        configs_label(),
    )
    .await;
    bad_image_keeps_previous_content(&r, "source catalog content").await;
}

#[tokio::test]
async fn hostile_device_file() {
    let r = push_entries(
        "device",
        &[("configs/x/catalog.json", OK_FILE)],
        vec![TarEntry::CharDevice {
            path: "configs/null".into(),
        }],
        configs_label(),
    )
    .await;
    bad_image_keeps_previous_content(&r, "source catalog content").await;
}

fn gz_member(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).expect("gzip");
    e.finish().expect("gzip")
}

#[tokio::test]
async fn hostile_decompression_bomb() {
    // 2.4 GiB of zeros from a few MB of concatenated gzip members.
    let zeros = gz_member(&vec![0u8; 4 << 20]);
    let mut layer = Vec::new();
    for i in 0..6 {
        let mut h = tar::Header::new_gnu();
        h.set_path(format!("configs/bomb{i}")).expect("path");
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(400 << 20);
        h.set_mode(0o644);
        h.set_cksum();
        layer.extend(gz_member(h.as_bytes()));
        for _ in 0..100 {
            layer.extend_from_slice(&zeros);
        }
    }
    layer.extend(gz_member(&[0u8; 1024]));
    assert!(layer.len() < 8 << 20);
    let r = push_gzip_layer("bomb", layer).await;
    bad_image_keeps_previous_content(&r, "exceeds the limit").await;
}

#[tokio::test]
async fn hostile_million_tiny_files() {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(0);
    h.set_mode(0o644);
    for i in 0..1_000_000u32 {
        h.set_path(format!("configs/f/{i}")).expect("path");
        h.set_cksum();
        b.append(&h, std::io::empty()).expect("append");
    }
    let layer = b.into_inner().expect("tar").finish().expect("gzip");
    let r = push_gzip_layer("million", layer).await;
    bad_image_keeps_previous_content(&r, "number of tar entries exceeds the limit").await;
}

async fn bad_catalog(name: &str, file: &str, content: &[u8], expected: &str) {
    let pushed = push_catalog(
        &format!("catalogs/{}:v1", support::unique(name)),
        &[(file, content.to_vec())],
    )
    .await;
    bad_image_keeps_previous_content(&pushed.reference, expected).await;
}

#[tokio::test]
async fn invalid_json_names_file_and_line() {
    let content = b"{\"schema\":\"olm.package\",\"name\":\"j\",\"defaultChannel\":\"stable\"}\n{\"schema\": \"olm.channel\",\n  \"name\": oops}\n";
    bad_catalog("badjson", "j/catalog.json", content, "j/catalog.json").await;
}

#[tokio::test]
async fn invalid_yaml_names_file_and_line() {
    let content = b"schema: olm.package\nname: y\ndefaultChannel: stable\n---\nschema: olm.channel\n  name: [unclosed\n";
    bad_catalog("badyaml", "y/catalog.yaml", content, "y/catalog.yaml").await;
}

#[tokio::test]
async fn channel_naming_a_missing_bundle() {
    let host = support::registry().host().to_string();
    let mut content = fbc("m", &["1.0.0"], &host);
    content.extend_from_slice(
        br#"{"schema":"olm.channel","name":"fast","package":"m","entries":[{"name":"m.v9.9.9"}]}"#,
    );
    let line = content.iter().filter(|b| **b == b'\n').count() + 1;
    served_with_warnings(
        "missingbundle",
        "m/catalog.json",
        &content,
        &[&format!("m/catalog.json:{line}: "), "m.v9.9.9"],
    )
    .await;
}

#[tokio::test]
async fn missing_default_channel() {
    let content = br#"{"schema":"olm.package","name":"d","defaultChannel":"nope"}
{"schema":"olm.channel","name":"stable","package":"d","entries":[{"name":"d.v1.0.0"}]}
{"schema":"olm.bundle","name":"d.v1.0.0","package":"d","image":"example.com/d:v1","properties":[{"type":"olm.package","value":{"packageName":"d","version":"1.0.0"}}]}
"#;
    served_with_warnings(
        "nodefault",
        "d/catalog.json",
        content,
        &["d/catalog.json:1: ", "nope"],
    )
    .await;
}

#[tokio::test]
async fn catalog_larger_than_the_limit() {
    let big = format!(
        "{{\"schema\":\"olm.package\",\"name\":\"big\",\"defaultChannel\":\"stable\",\"description\":\"{}\"}}\n",
        "x".repeat(support::MAX_CATALOG_BYTES as usize + 1024)
    );
    bad_catalog("big", "big/catalog.json", big.as_bytes(), "limit").await;
}

#[tokio::test]
async fn registry_returning_500_is_retried_and_reported() {
    let host = support::failing_registry();
    bad_image_keeps_previous_content(&format!("{host}/catalog:v1"), "500").await;
}

#[tokio::test]
async fn registry_blob_with_the_wrong_digest_is_reported() {
    let host = support::registry().host().to_string();
    let pushed = push_catalog(
        &format!("catalogs/{}:v1", support::unique("corrupt")),
        &[("c/catalog.json", fbc("c", &["1.0.0"], &host))],
    )
    .await;
    let blob = support::registry().blob_data_path(&pushed.layer_digests[0]);
    std::fs::write(&blob, b"not the layer that was pushed").expect("corrupt the blob");
    bad_image_keeps_previous_content(&pushed.reference, "digest mismatch").await;
}

#[tokio::test]
async fn pull_secret_of_the_controller_account_unlocks_an_authenticated_registry() {
    use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
    let api = api().await;
    let auth = support::auth_registry();
    let name = support::unique("auth");
    let mut files = BTreeMap::new();
    files.insert(
        "a/catalog.json".to_string(),
        fbc("a", &["1.0.0"], auth.host()),
    );
    let pushed = registry::push_catalog_image(auth, &format!("catalogs/{name}:v1"), &files)
        .await
        .expect("push");

    // Without credentials: a clear 401 message.
    api.create(
        &PostParams::default(),
        &catalog(&name, &pushed.reference, None),
    )
    .await
    .expect("create");
    let c = support::eventually(60, "401 reported", || async {
        let c = api.get(&name).await.ok()?;
        condition(&c, "Progressing")?
            .message
            .contains("401")
            .then_some(c)
    })
    .await;
    let message = condition(&c, "Progressing").expect("progressing").message;
    assert!(message.contains("pull secret"), "{message}");

    // A dockerconfigjson Secret referenced by the controller's ServiceAccount fixes it.
    let admin = support::cluster().admin().await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "olmv1-system");
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "test-registry-auth"},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64_encode(&auth.dockerconfigjson())},
    }))
    .expect("secret");
    let _ = secrets.create(&PostParams::default(), &secret).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin, "olmv1-system");
    accounts
        .patch(
            "olmv1-controller",
            &PatchParams::default(),
            &Patch::Merge(json!({"imagePullSecrets": [{"name": "test-registry-auth"}]})),
        )
        .await
        .expect("patch service account");
    wait_serving(&api, &name, &pushed.reference).await;
}

fn base64_encode(data: &[u8]) -> String {
    data_encoding::BASE64.encode(data)
}

/// Keys as Go's encoding/json reads them (catalogd's acceptance): `"Schema"`/`"Name"`
/// match case-insensitively and a key written twice keeps its last value. The catalog is
/// served (blobs normalized to the declcfg spelling, indexed as catalogd indexes them)
/// and each such blob is named in the InvalidCatalogContent warning.
#[tokio::test]
async fn keys_are_read_as_catalogd_reads_them() {
    let content = br#"{"Schema":"olm.package","Name":"g","DefaultChannel":"stable"}
{"schema":"olm.channel","name":"stable","package":"g","entries":[{"name":"g.v1.0.0"}]}
{"schema":"olm.bundle","name":"g.v0","name":"g.v1.0.0","package":"g","image":"example.com/g:v1","properties":[{"Type":"olm.package","Value":{"packageName":"g","version":"1.0.0"}}]}
"#;
    let name = support::unique("gokeys");
    served_with_warnings(
        &name,
        "g/catalog.json",
        content,
        &[
            "g/catalog.json:1: olm.package blob \"g\": keys matched case-insensitively",
            "Schema→schema",
            "g/catalog.json:3: olm.bundle blob \"g.v1.0.0\"",
            "a key written twice",
        ],
    )
    .await;
    let api = api().await;
    let list = api.list(&Default::default()).await.expect("list");
    let c = list
        .items
        .into_iter()
        .find(|c| {
            c.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(&format!("{name}-")))
        })
        .expect("catalog");
    let base = c.status.and_then(|s| s.urls).expect("urls").base;
    let (code, body) = get_body(&format!("{base}/api/v1/metas?schema=olm.package&name=g")).await;
    assert_eq!(code, 200);
    assert_eq!(
        body.trim_end(),
        r#"{"schema":"olm.package","name":"g","defaultChannel":"stable"}"#
    );
    let (code, body) = get_body(&format!("{base}/api/v1/metas?schema=olm.bundle&package=g")).await;
    assert_eq!(code, 200);
    assert_eq!(
        body.trim_end(),
        r#"{"schema":"olm.bundle","name":"g.v1.0.0","package":"g","image":"example.com/g:v1","properties":[{"type":"olm.package","value":{"packageName":"g","version":"1.0.0"}}]}"#
    );
}

/// Two keys folding to the same name: catalogd refuses the blob, and so does olmv1.
#[tokio::test]
async fn keys_folding_to_one_name_are_refused() {
    let content = br#"{"schema":"olm.package","Schema":"olm.package","name":"h"}
"#;
    bad_catalog(
        "gofold",
        "h/catalog.json",
        content,
        "duplicate keys for key \"schema\": [Schema schema]",
    )
    .await;
}

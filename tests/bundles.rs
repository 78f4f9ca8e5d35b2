//! registry+v1 bundles against real servers: every rendered object of the shared
//! fixture bundles is accepted by a real kube-apiserver in a server-side dry-run (in each
//! install mode the bundle supports), `olmv1 render <image>` pulls from a real registry
//! and prints what rendering the directory prints, and bad bundle images (wrong media
//! type, catalog image, sub-directories, no CSV, hostile tar entries) fail with a clear
//! error that names the image without writing outside the cache directory.

use crate::support;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::discovery::Scope;
use olmv1::bundle::{
    BundleImageError, CertProvider, LoadError, LoadOptions, RenderOptions, load_dir, load_image,
    render,
};
use olmv1::image::{DockerConfig, ImageError, ImagePuller, PullerConfig};
use olmv1::testenv::registry::{self, ImageSpec, TarEntry};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn testdata_bundle(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/bundle/testdata/bundles")
        .join(name)
}

fn str_at<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or_default()
}

// ------------------------------------------------------------------ API server helpers

/// Kinds resolved through discovery; `None` = not served.
type KindCache = HashMap<(String, String), Option<(ApiResource, bool)>>;

async fn resolve(
    client: &kube::Client,
    cache: &mut KindCache,
    obj: &Value,
) -> Option<(ApiResource, bool)> {
    let api_version = str_at(obj, "/apiVersion");
    let kind = str_at(obj, "/kind");
    let key = (api_version.to_string(), kind.to_string());
    if let Some(hit) = cache.get(&key) {
        return hit.clone();
    }
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let found = match kube::discovery::pinned_kind(client, &gvk).await {
        Ok((ar, caps)) => Some((ar, caps.scope == Scope::Namespaced)),
        Err(_) => None,
    };
    cache.insert(key, found.clone());
    found
}

fn api_for(
    client: &kube::Client,
    ar: &ApiResource,
    namespaced: bool,
    obj: &Value,
) -> Api<DynamicObject> {
    if namespaced {
        Api::namespaced_with(client.clone(), str_at(obj, "/metadata/namespace"), ar)
    } else {
        Api::all_with(client.clone(), ar)
    }
}

fn crd_api(client: &kube::Client) -> Api<CustomResourceDefinition> {
    Api::all(client.clone())
}

fn established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

/// Creates (server-side apply, for real) the CRDs and waits until all are Established.
async fn apply_crds(client: &kube::Client, crds: &[&Value]) -> Result<(), String> {
    let api = crd_api(client);
    let pp = PatchParams::apply("olmv1").force();
    for crd in crds {
        let name = str_at(crd, "/metadata/name");
        api.patch(name, &pp, &Patch::Apply(crd))
            .await
            .map_err(|e| format!("CustomResourceDefinition {name}: {e}"))?;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for crd in crds {
        let name = str_at(crd, "/metadata/name");
        loop {
            if let Ok(c) = api.get(name).await
                && established(&c)
            {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "CustomResourceDefinition {name}: not Established after 60s"
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Deletes the CRDs and waits until they are gone.
async fn delete_crds(client: &kube::Client, names: &[String]) {
    let api = crd_api(client);
    for n in names {
        let _ = api.delete(n, &DeleteParams::default()).await;
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    for n in names {
        while api.get_opt(n).await.ok().flatten().is_some() {
            assert!(Instant::now() < deadline, "CRD {n} not deleted after 180s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn install_cert_manager_crds(client: &kube::Client) {
    let text = include_str!("data/cert-manager-crds.yaml");
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).expect("cert-manager CRD YAML");
    let refs: Vec<&Value> = docs.iter().collect();
    apply_crds(client, &refs).await.expect("cert-manager CRDs");
}

/// `ecr-secret-operator` ships the CR `Secret ecr-secret` (ecr.mobb.redhat.com/v1alpha1)
/// with `spec.aws_iam_secret`, which its own CRD schema does not declare, and without the
/// required `spec.region`: no API server accepts it, so no installer can install it.
fn is_ecr_secret_defect(id: &str, obj: &Value, e: &kube::Error) -> bool {
    id.starts_with("ecr-secret-operator/")
        && str_at(obj, "/apiVersion") == "ecr.mobb.redhat.com/v1alpha1"
        && str_at(obj, "/kind") == "Secret"
        && str_at(obj, "/metadata/name") == "ecr-secret"
        && e.to_string()
            .contains(".spec.aws_iam_secret: field not declared in schema")
}

fn supported_modes(csv: &Value) -> BTreeSet<String> {
    csv.pointer("/spec/installModes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| m.get("supported").and_then(Value::as_bool) == Some(true))
        .filter_map(|m| m.get("type").and_then(Value::as_str).map(str::to_string))
        .collect()
}

// ------------------------------------------------------------------ a. dry-run conformance

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_fixture_objects_pass_server_side_dry_run() {
    let Some(root) = olmv1::testenv::shared_dir("fixtures/bundles") else {
        return;
    };
    let started = Instant::now();
    let client = support::cluster().admin().await;
    install_cert_manager_crds(&client).await;

    let mut dirs = Vec::new();
    for pkg in std::fs::read_dir(&root).expect("fixtures") {
        let pkg = pkg.expect("entry").path();
        if pkg.is_dir() {
            for v in std::fs::read_dir(&pkg).expect("package dir") {
                dirs.push(v.expect("entry").path());
            }
        }
    }
    dirs.sort();
    assert!(
        dirs.len() >= 20,
        "expected the shared bundles, found {}",
        dirs.len()
    );

    let options = RenderOptions {
        cert_provider: CertProvider::CertManager,
        ..Default::default()
    };
    let mut failures: Vec<String> = Vec::new();
    let mut skipped: BTreeSet<String> = BTreeSet::new();
    let mut accepted = 0usize;
    let mut renders = 0usize;
    let mut not_rendering = Vec::new();
    let mut webhook_configs = 0usize;
    let mut known_defects: Vec<String> = Vec::new();
    let mut recreated: Vec<String> = Vec::new();
    let mut total_objects = 0usize;
    let mut skipped_objects = 0usize;
    for dir in &dirs {
        let id = dir.strip_prefix(&root).unwrap_or(dir).display().to_string();
        let bundle = load_dir(dir, &LoadOptions::default()).unwrap_or_else(|e| panic!("{id}: {e}"));
        let modes = supported_modes(&bundle.csv);
        let mut cache = KindCache::new();
        for mode in ["AllNamespaces", "OwnNamespace", "SingleNamespace"] {
            if !modes.contains(mode) {
                continue;
            }
            let install = support::namespace(&client, "inst").await;
            let config = match mode {
                "AllNamespaces" => None,
                "OwnNamespace" => Some(json!({"watchNamespace": install})),
                _ => Some(json!({"watchNamespace": support::namespace(&client, "watched").await})),
            };
            let objects = match render(&bundle, &install, config.as_ref(), &options) {
                Ok(o) => o,
                Err(e) => {
                    // The documented rejections (checked in detail by the unit conformance test).
                    assert!(
                        id == "dbaas-operator/0.5.0" || id == "cockroachdb/2.1.1",
                        "{id} ({mode}) did not render: {e}"
                    );
                    not_rendering.push(format!("{id} ({mode})"));
                    continue;
                }
            };
            renders += 1;
            total_objects += objects.len();
            let crds: Vec<&Value> = objects
                .iter()
                .filter(|o| str_at(o, "/kind") == "CustomResourceDefinition")
                .collect();
            if let Err(first) = apply_crds(&client, &crds).await {
                // The CRDs of an earlier version of the package may not be updatable in
                // place (e.g. a dropped stored version): start from scratch once.
                let names: Vec<String> = crds
                    .iter()
                    .map(|c| str_at(c, "/metadata/name").to_string())
                    .collect();
                delete_crds(&client, &names).await;
                if let Err(e) = apply_crds(&client, &crds).await {
                    failures.push(format!("{id} ({mode}): {e} (before deleting: {first})"));
                    continue;
                }
                recreated.push(format!("{id} ({mode}): {first}"));
            }
            accepted += crds.len();
            for obj in objects
                .iter()
                .filter(|o| str_at(o, "/kind") != "CustomResourceDefinition")
            {
                let kind = str_at(obj, "/kind");
                let name = str_at(obj, "/metadata/name");
                let Some((ar, namespaced)) = resolve(&client, &mut cache, obj).await else {
                    skipped_objects += 1;
                    skipped.insert(format!(
                        "{} {kind} (kind not served)",
                        str_at(obj, "/apiVersion")
                    ));
                    continue;
                };
                if kind.ends_with("WebhookConfiguration") {
                    assert!(!namespaced);
                    assert_eq!(
                        str_at(obj, "/metadata/namespace"),
                        install,
                        "{id}: {kind} {name}"
                    );
                    webhook_configs += 1;
                }
                let api = api_for(&client, &ar, namespaced, obj);
                let pp = PatchParams::apply("olmv1").dry_run().force();
                match api.patch(name, &pp, &Patch::Apply(obj)).await {
                    Ok(_) => accepted += 1,
                    Err(e) if is_ecr_secret_defect(&id, obj, &e) => {
                        // Bundle defect, not a rendering one: the CR sets a field its own
                        // CRD schema does not declare (server-side apply: HTTP 500 "field
                        // not declared in schema") and lacks the required spec.region (a
                        // plain create, which would prune the unknown field: HTTP 422).
                        let dynamic: DynamicObject =
                            serde_json::from_value(obj.clone()).expect("dynamic object");
                        let pp = PostParams {
                            dry_run: true,
                            ..Default::default()
                        };
                        match api.create(&pp, &dynamic).await {
                            Err(e) if e.to_string().contains("spec.region: Required value") => {
                                known_defects.push(format!("{id} ({mode}) {kind} {name}"))
                            }
                            other => failures.push(format!(
                                "{id} ({mode}): {kind} {name}: create dry-run: {other:?}"
                            )),
                        }
                    }
                    Err(e) => failures.push(format!(
                        "{id} ({mode}): {kind} {}/{name}: {e}",
                        str_at(obj, "/metadata/namespace")
                    )),
                }
            }
        }
    }
    eprintln!(
        "dry-run conformance: {renders} renders, {accepted} objects accepted, {} webhook configurations, \
         not rendering (documented): {not_rendering:?}, skipped: {skipped:?}, \
         refused for a bundle defect (invalid CR): {known_defects:?}, \
         CRDs recreated: {recreated:?}, {:.1}s",
        webhook_configs,
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "rejected by the API server:\n{}",
        failures.join("\n")
    );
    assert!(renders >= 30, "only {renders} renders");
    // ecr-secret-operator 0.3.2 … 0.6.0, three install modes each
    assert_eq!(known_defects.len(), 18, "{known_defects:?}");
    assert_eq!(not_rendering.len(), 4, "{not_rendering:?}");
    assert!(
        webhook_configs >= 11,
        "only {webhook_configs} webhook configurations dry-run"
    );
    // every rendered object was either accepted or is accounted for
    assert_eq!(
        accepted + known_defects.len() + skipped_objects,
        total_objects
    );
    assert!(accepted >= 400, "only {accepted} objects accepted");
}

// ------------------------------------------------------------------ image helpers

/// `manifests/…` and `metadata/…` files of a bundle directory.
fn bundle_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for sub in ["manifests", "metadata"] {
        for e in std::fs::read_dir(dir.join(sub)).expect("bundle dir") {
            let e = e.expect("entry");
            let name = e.file_name().to_string_lossy().into_owned();
            files.insert(
                format!("{sub}/{name}"),
                std::fs::read(e.path()).expect("read"),
            );
        }
    }
    files
}

fn bundle_spec(files: BTreeMap<String, Vec<u8>>, entries: Vec<TarEntry>) -> ImageSpec {
    ImageSpec {
        files,
        entries,
        labels: registry::bundle_labels("widget-operator", &["stable"]),
        ..Default::default()
    }
}

struct Pulled {
    result: Result<(olmv1::bundle::Bundle, olmv1::image::PulledImage), BundleImageError>,
    reference: String,
    root: tempfile::TempDir,
}

/// Pushes `spec` and loads it with [`load_image`], caching under `<root>/cache`.
async fn push_and_load(repo: &str, spec: &ImageSpec) -> Pulled {
    let reg = support::registry();
    let pushed = registry::push_image(reg, &format!("bad/{repo}:v1"), spec)
        .await
        .expect("push");
    let root = tempfile::tempdir().expect("tempdir");
    let mut config = PullerConfig::new(root.path().join("cache"));
    config.insecure_registries = vec![reg.host().to_string()];
    config.retry.max_attempts = 1;
    let puller = ImagePuller::new(config).expect("puller");
    let reference = format!("{}/bad/{repo}:v1", reg.host());
    let result = load_image(
        &puller,
        &reference,
        &DockerConfig::default(),
        &LoadOptions::default(),
    )
    .await;
    let _ = pushed;
    Pulled {
        result,
        reference,
        root,
    }
}

impl Pulled {
    fn error(&self) -> &BundleImageError {
        match &self.result {
            Ok(_) => panic!("{} loaded, expected an error", self.reference),
            Err(e) => e,
        }
    }

    /// Only `cache/` exists in the root, and no finished unpack is left in the cache.
    fn assert_nothing_outside_cache(&self) {
        let top: Vec<String> = std::fs::read_dir(self.root.path())
            .expect("root")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(top, vec!["cache".to_string()], "{}", self.reference);
    }
}

// ------------------------------------------------------------------ b. render from an image

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_command_pulls_the_image_and_prints_the_directory_render() {
    let dir = testdata_bundle("all-namespaces");
    let reg = support::registry();
    let pushed = registry::push_bundle_image(
        reg,
        "bundles/widget-operator:v1.0.0",
        &bundle_files(&dir),
        "widget-operator",
        &["stable"],
    )
    .await
    .expect("push bundle");
    let cache = tempfile::tempdir().expect("tempdir");
    let bin = env!("CARGO_BIN_EXE_olmv1");
    let render = |source: &str| {
        std::process::Command::new(bin)
            .args(["render", source, "--namespace", "widget-system"])
            .args(["--insecure-registry", reg.host()])
            .arg("--cache-dir")
            .arg(cache.path())
            .output()
            .expect("run olmv1")
    };
    let from_dir = render(&dir.display().to_string());
    assert!(
        from_dir.status.success(),
        "{}",
        String::from_utf8_lossy(&from_dir.stderr)
    );
    let tag = format!("{}/bundles/widget-operator:v1.0.0", reg.host());
    for source in [tag.as_str(), pushed.reference.as_str(), tag.as_str()] {
        let from_image = render(source);
        assert!(
            from_image.status.success(),
            "{source}: {}",
            String::from_utf8_lossy(&from_image.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&from_image.stdout),
            String::from_utf8_lossy(&from_dir.stdout),
            "{source}"
        );
    }
    assert!(String::from_utf8_lossy(&from_dir.stdout).contains("kind: Deployment"));
    // the image was unpacked once, into the cache directory
    let images: Vec<_> = std::fs::read_dir(cache.path().join("images"))
        .expect("cache/images")
        .collect();
    assert_eq!(images.len(), 1);

    // an image that is not there: exit code 1 and the image named
    let missing = format!("{}/bundles/absent:v9", reg.host());
    let out = render(&missing);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&missing), "{err}");
}

// ------------------------------------------------------------------ c. bad bundle images

fn good_files() -> BTreeMap<String, Vec<u8>> {
    bundle_files(&testdata_bundle("all-namespaces"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_image_other_media_type() {
    let mut spec = bundle_spec(good_files(), vec![]);
    spec.labels
        .insert(olmv1::bundle::MEDIATYPE_LABEL.into(), "helm".into());
    let p = push_and_load("helm", &spec).await;
    let e = p.error();
    assert!(matches!(e, BundleImageError::NotRegistryV1 { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "image {}: not a registry+v1 bundle image: label \"operators.operatorframework.io.bundle.mediatype.v1\" is \"helm\", expected \"registry+v1\"",
            p.reference
        )
    );
    assert!(!e.is_retryable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_image_catalog_image() {
    let reg = support::registry();
    let files = BTreeMap::from([(
        "p/catalog.json".to_string(),
        br#"{"schema":"olm.package","name":"p"}"#.to_vec(),
    )]);
    registry::push_catalog_image(reg, "bad/catalog:v1", &files)
        .await
        .expect("push catalog");
    let root = tempfile::tempdir().expect("tempdir");
    let mut config = PullerConfig::new(root.path().join("cache"));
    config.insecure_registries = vec![reg.host().to_string()];
    let puller = ImagePuller::new(config).expect("puller");
    let reference = format!("{}/bad/catalog:v1", reg.host());
    let e = load_image(
        &puller,
        &reference,
        &DockerConfig::default(),
        &LoadOptions::default(),
    )
    .await
    .expect_err("a catalog image is not a bundle");
    assert!(matches!(e, BundleImageError::NotRegistryV1 { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!(
            "image {reference}: not a registry+v1 bundle image: it is a catalog image"
        )),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_image_unlabelled_without_bundle_metadata() {
    // No labels and no metadata/annotations.yaml: judged by the content.
    let mut files = good_files();
    files.retain(|k, _| !k.starts_with("metadata/"));
    let spec = ImageSpec {
        files,
        ..Default::default()
    };
    let p = push_and_load("unlabelled", &spec).await;
    let e = p.error();
    assert!(matches!(e, BundleImageError::NotRegistryV1 { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "image {}: not a registry+v1 bundle image: metadata/annotations.yaml not found",
            p.reference
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_image_manifests_subdirectory() {
    let mut files = good_files();
    files.insert(
        "manifests/extra/cm.yaml".into(),
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n".to_vec(),
    );
    let p = push_and_load("subdir", &bundle_spec(files, vec![])).await;
    let e = p.error();
    assert!(
        matches!(
            e,
            BundleImageError::Load {
                source: LoadError::ManifestsSubdirectory(_),
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "bundle image {}: subdirectories are not allowed within the \"manifests\" directory of the bundle image filesystem: found \"manifests/extra\"",
            p.reference
        )
    );
    p.assert_nothing_outside_cache();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_image_no_csv() {
    let mut files = good_files();
    let before = files.len();
    files.retain(|_, data| !String::from_utf8_lossy(data).contains("kind: ClusterServiceVersion"));
    assert_eq!(files.len(), before - 1, "the test bundle has one CSV file");
    let p = push_and_load("nocsv", &bundle_spec(files, vec![])).await;
    let e = p.error();
    assert!(
        matches!(
            e,
            BundleImageError::Load {
                source: LoadError::NoCsv,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        format!(
            "bundle image {}: no ClusterServiceVersion found in \"manifests\"",
            p.reference
        )
    );
}

/// A unique path under /tmp that a hostile entry tries to reach.
fn escape_target(what: &str) -> PathBuf {
    PathBuf::from(format!(
        "/tmp/{}",
        support::unique(&format!("olmv1-esc-{what}"))
    ))
}

fn assert_unsafe_entry(p: &Pulled, needle: &str) {
    let e = p.error();
    assert!(
        matches!(e, BundleImageError::Pull(ImageError::UnsafeEntry { .. })),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains(&p.reference),
        "the error names the image: {msg}"
    );
    assert!(msg.contains(needle), "{msg}");
    assert!(!e.is_retryable());
    p.assert_nothing_outside_cache();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_image_dotdot_entry() {
    let target = escape_target("dotdot");
    let rel = format!(
        "manifests/{}{}",
        "../".repeat(12),
        target.display().to_string().trim_start_matches('/')
    );
    let p = push_and_load(
        "dotdot",
        &bundle_spec(
            good_files(),
            vec![TarEntry::File {
                path: rel,
                data: b"x".to_vec(),
            }],
        ),
    )
    .await;
    assert_unsafe_entry(&p, "\"..\"");
    assert!(!target.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_image_absolute_path_entry() {
    let target = escape_target("abs");
    let p = push_and_load(
        "absolute",
        &bundle_spec(
            good_files(),
            vec![TarEntry::File {
                path: target.display().to_string(),
                data: b"x".to_vec(),
            }],
        ),
    )
    .await;
    assert_unsafe_entry(&p, "absolute path");
    assert!(!target.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_image_symlink_out() {
    // The directory exists, so a write through the link would land there.
    let target = escape_target("symlink");
    std::fs::create_dir_all(&target).expect("target dir");
    let link = format!(
        "{}{}",
        "../".repeat(12),
        target.display().to_string().trim_start_matches('/')
    );
    let p = push_and_load(
        "symlink",
        &bundle_spec(
            good_files(),
            vec![
                TarEntry::Symlink {
                    path: "manifests/evil".into(),
                    target: link,
                },
                TarEntry::File {
                    path: "manifests/evil/x.yaml".into(),
                    data: b"x".to_vec(),
                },
            ],
        ),
    )
    .await;
    assert_unsafe_entry(&p, "leaves the image");
    let written: Vec<_> = std::fs::read_dir(&target).expect("target").collect();
    let _ = std::fs::remove_dir_all(&target);
    assert!(
        written.is_empty(),
        "written through the symlink: {written:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_image_hardlink_out() {
    // A file outside; a hard link to it followed by a write to the link must not change it.
    let target = escape_target("hardlink");
    std::fs::write(&target, b"original").expect("target file");
    let p = push_and_load(
        "hardlink",
        &bundle_spec(
            good_files(),
            vec![
                TarEntry::HardLink {
                    path: "manifests/h.yaml".into(),
                    target: target.display().to_string(),
                },
                TarEntry::File {
                    path: "manifests/h.yaml".into(),
                    data: b"overwritten".to_vec(),
                },
            ],
        ),
    )
    .await;
    assert_unsafe_entry(&p, "hard link target");
    let content = std::fs::read(&target).expect("target file");
    let _ = std::fs::remove_file(&target);
    assert_eq!(content, b"original");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_image_device_file() {
    let p = push_and_load(
        "device",
        &bundle_spec(
            good_files(),
            vec![TarEntry::CharDevice {
                path: "manifests/null.yaml".into(),
            }],
        ),
    )
    .await;
    assert_unsafe_entry(&p, "device files are not allowed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn good_image_loads_like_the_directory() {
    let dir = testdata_bundle("all-namespaces");
    let p = push_and_load("good", &bundle_spec(good_files(), vec![])).await;
    let (bundle, pulled) = p.result.as_ref().expect("loads");
    let from_dir = load_dir(&dir, &LoadOptions::default()).expect("directory");
    assert_eq!(bundle, &from_dir);
    assert!(
        pulled.reference.contains("@sha256:"),
        "{}",
        pulled.reference
    );
    assert_eq!(
        pulled
            .labels
            .get(olmv1::bundle::MEDIATYPE_LABEL)
            .map(String::as_str),
        Some("registry+v1")
    );
    assert!(pulled.dir.starts_with(p.root.path().join("cache")));
    p.assert_nothing_outside_cache();
}

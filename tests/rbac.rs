//! `olmv1 rbac` on bundle images and on `package@version` from catalogs, against a
//! real registry (no API server): the RBAC for a pushed bundle image equals the RBAC
//! for the bundle directory it was built from; `package@version --catalog <catalog
//! image>` finds the bundle's image and pulls it; `--diff <version>` through the
//! catalog prints only the rules the upgrade adds; the errors name the problem.

use crate::support;

use clap::Parser;
use olmv1::cli::rbac::{RbacArgs, execute};
use olmv1::testenv::demo::{self, BundleSpec};
use olmv1::testenv::registry;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

/// `olmv1 rbac`'s arguments, parsed as the binary parses them.
#[derive(Parser)]
#[command(name = "rbac")]
struct Cli {
    #[command(flatten)]
    args: RbacArgs,
}

/// Runs `olmv1 rbac <args>` (with the registry flags and private caches) in this
/// process: the binary's argument parsing and [`execute`], which is what `olmv1 rbac`
/// prints (exit 0) or reports (exit 2). In-process rather than `CARGO_BIN_EXE_olmv1`,
/// whose path other builds sharing the target directory may overwrite meanwhile.
fn rbac(cache: &Path, args: &[&str]) -> Result<String, String> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let mut argv: Vec<String> = vec!["rbac".into()];
    argv.extend(args.iter().map(|a| a.to_string()));
    argv.extend(["--namespace", "inst", "--extension", "ext"].map(String::from));
    argv.extend([
        "--insecure-registry".into(),
        support::registry().host().into(),
    ]);
    argv.extend([
        "--cache-dir".into(),
        cache.join("bundles").display().to_string(),
    ]);
    argv.extend([
        "--image-cache-dir".into(),
        cache.join("catalogs").display().to_string(),
    ]);
    let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    // `execute` blocks on a runtime of its own: not on a test runtime thread
    std::thread::spawn(move || execute(&cli.args))
        .join()
        .expect("rbac thread")
}

fn ok(run: Result<String, String>) -> String {
    run.unwrap_or_else(|e| panic!("olmv1 rbac failed: {e}"))
}

fn failed(run: Result<String, String>) -> String {
    match run {
        Ok(out) => panic!("olmv1 rbac succeeded: {out}"),
        Err(e) => e,
    }
}

/// The `rules` of a `--diff` output.
fn rules_of(diff: &str) -> Vec<Value> {
    let doc: Value = serde_saphyr::from_str(diff).expect("diff YAML");
    doc["rules"].as_array().cloned().expect("rules")
}

/// The rules of the ClusterRole of a full output.
fn cluster_role_rules(yaml: &str) -> Vec<Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("RBAC YAML");
    docs.iter()
        .find(|d| d["kind"] == "ClusterRole")
        .and_then(|d| d["rules"].as_array().cloned())
        .expect("a ClusterRole with rules")
}

struct Published {
    /// Bundle directories by version.
    dirs: BTreeMap<String, tempfile::TempDir>,
    /// Digest-pinned bundle references by version.
    images: BTreeMap<String, String>,
    /// The catalog image (tag reference).
    catalog: String,
}

/// Bundles 1.0.0 and 1.1.0 (which adds a ConfigMap) of `package` pushed to the test
/// registry, written as directories, and a catalog image listing both. Each test has
/// its own package (tests run in parallel; no two push the same repository).
async fn publish(package: &str) -> Published {
    let reg = support::registry();
    let v1 = BundleSpec::new(package, "1.0.0");
    let mut v2 = BundleSpec::new(package, "1.1.0");
    v2.replaces = Some(v1.bundle_name());
    v2.extra_configmap = true;
    let (mut dirs, mut images, mut entries) = (BTreeMap::new(), BTreeMap::new(), Vec::new());
    for spec in [v1, v2] {
        let dir = tempfile::tempdir().expect("tempdir");
        demo::write_bundle_dir(&spec, dir.path()).expect("bundle dir");
        let image = demo::push_bundle(reg, &spec).await.expect("push bundle");
        dirs.insert(spec.version.clone(), dir);
        images.insert(spec.version.clone(), image.clone());
        entries.push((spec, image));
    }
    let files = BTreeMap::from([(
        format!("{package}/catalog.json"),
        demo::catalog_fbc(package, &entries),
    )]);
    let repo_tag = format!("catalogs/{package}:v1");
    registry::push_catalog_image(reg, &repo_tag, &files)
        .await
        .expect("push catalog");
    Published {
        dirs,
        images,
        catalog: format!("{}/{repo_tag}", reg.host()),
    }
}

fn dir(p: &Published, version: &str) -> String {
    p.dirs[version].path().display().to_string()
}

#[tokio::test]
async fn images_and_catalog_versions_give_the_rbac_of_the_bundle_directory() {
    const PACKAGE: &str = "rbac-images";
    let p = publish(PACKAGE).await;
    let cache = tempfile::tempdir().expect("cache");
    let c = cache.path();
    let host = support::registry().host();

    let from_dir = ok(rbac(c, &[&dir(&p, "1.1.0")]));
    assert!(from_dir.contains("kind: ClusterRole"), "{from_dir}");
    assert!(from_dir.contains(&format!("{PACKAGE}-extra")), "{from_dir}");
    // by digest and by tag
    assert_eq!(ok(rbac(c, &[&p.images["1.1.0"]])), from_dir);
    let tag = format!("{host}/bundles/{PACKAGE}:v1.1.0");
    assert_eq!(ok(rbac(c, &[&tag])), from_dir);
    // package@version in a catalog image; the package alone = the newest
    let at = format!("{PACKAGE}@1.1.0");
    assert_eq!(ok(rbac(c, &[&at, "--catalog", &p.catalog])), from_dir);
    assert_eq!(ok(rbac(c, &[PACKAGE, "--catalog", &p.catalog])), from_dir);
    let old = ok(rbac(
        c,
        &[&format!("{PACKAGE}@v1.0.0"), "--catalog", &p.catalog],
    ));
    assert_eq!(old, ok(rbac(c, &[&dir(&p, "1.0.0")])));
    assert_ne!(old, from_dir);
}

#[tokio::test]
async fn diff_through_the_catalog_prints_only_the_added_rules() {
    const PACKAGE: &str = "rbac-diff";
    let p = publish(PACKAGE).await;
    let cache = tempfile::tempdir().expect("cache");
    let c = cache.path();

    let at = format!("{PACKAGE}@1.1.0");
    let diff = ok(rbac(c, &[&at, "--catalog", &p.catalog, "--diff", "1.0.0"]));
    let rules = rules_of(&diff);
    // the new ConfigMap: create, and the named verbs for it
    let extra = json!({"apiGroups": [""], "resources": ["configmaps"],
        "verbs": ["update", "patch", "delete"], "resourceNames": [format!("{PACKAGE}-extra")]});
    assert!(rules.contains(&extra), "{diff}");
    // only added rules: none that the installed version's ClusterRole already grants
    let installed = ok(rbac(
        c,
        &[&format!("{PACKAGE}@1.0.0"), "--catalog", &p.catalog],
    ));
    let old_rules = cluster_role_rules(&installed);
    assert!(rules.len() < cluster_role_rules(&ok(rbac(c, &[&at, "--catalog", &p.catalog]))).len());
    for rule in &rules {
        assert!(
            !old_rules.contains(rule),
            "{rule} was granted before:\n{diff}"
        );
    }
    assert!(!diff.contains("clusterextensions/finalizers"), "{diff}");
    // the same as between the directories, and as between the images
    assert_eq!(
        ok(rbac(c, &[&dir(&p, "1.1.0"), "--diff", &dir(&p, "1.0.0")])),
        diff
    );
    assert_eq!(
        ok(rbac(c, &[&p.images["1.1.0"], "--diff", &p.images["1.0.0"]])),
        diff
    );
    // the same version: nothing to add; a downgrade adds no ConfigMap permissions
    assert_eq!(
        ok(rbac(c, &[&at, "--catalog", &p.catalog, "--diff", &at])),
        "# the upgrade needs no additional permissions\n"
    );
    let down = ok(rbac(
        c,
        &[
            &format!("{PACKAGE}@1.0.0"),
            "--catalog",
            &p.catalog,
            "--diff",
            "1.1.0",
        ],
    ));
    assert!(!down.contains("configmaps"), "{down}");
}

#[tokio::test]
async fn errors_name_the_problem() {
    const PACKAGE: &str = "rbac-errors";
    let p = publish(PACKAGE).await;
    let cache = tempfile::tempdir().expect("cache");
    let c = cache.path();
    let host = support::registry().host();

    let err = failed(rbac(
        c,
        &[&format!("{PACKAGE}@9.9.9"), "--catalog", &p.catalog],
    ));
    assert!(
        err.contains(&format!(
            "package \"{PACKAGE}\" in catalog {} has no version 9.9.9; available: 1.1.0, 1.0.0",
            p.catalog
        )),
        "{err}"
    );
    let err = failed(rbac(c, &["nope@1.0.0", "--catalog", &p.catalog]));
    assert!(
        err.contains(&format!("package \"nope\" is not in catalog {}", p.catalog)),
        "{err}"
    );
    let missing = format!("{host}/bundles/missing:v1");
    let err = failed(rbac(c, &[&missing]));
    assert!(err.contains(&missing), "{err}");
    let err = failed(rbac(c, &[&dir(&p, "1.0.0"), "--catalog", &p.catalog]));
    assert!(err.contains("--catalog was given, but"), "{err}");
    let err = failed(rbac(c, &[&format!("{PACKAGE}@1.0.0")]));
    assert!(err.contains("give the catalog with --catalog"), "{err}");
    // a catalog image is not a bundle image
    let err = failed(rbac(c, &[&p.catalog]));
    assert!(err.contains("not a registry+v1 bundle image"), "{err}");
}

/// The real `ecr-secret-operator` catalog with its image references pointed at the
/// test registry: `olmv1 rbac ecr-secret-operator@0.5.0 --catalog <dir> --diff 0.3.2`
/// equals the diff between the bundle directories.
#[tokio::test]
async fn real_catalog_upgrade_diff() {
    let (Some(catalogs), Some(bundles)) = (
        olmv1::testenv::shared_dir("fixtures/catalogs"),
        olmv1::testenv::shared_dir("fixtures/bundles"),
    ) else {
        return;
    };
    let package = "ecr-secret-operator";
    let text = std::fs::read_to_string(catalogs.join("v4.20").join(package).join("catalog.yaml"))
        .expect("catalog");
    let mut blobs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("catalog YAML");
    let reg = support::registry();
    for blob in &mut blobs {
        if blob["schema"] != "olm.bundle" {
            continue;
        }
        let name = blob["name"].as_str().expect("bundle name").to_string();
        let version = name.rsplit_once(".v").expect("name.vX").1.to_string();
        let root = bundles.join(package).join(&version);
        let mut files = BTreeMap::new();
        for sub in ["manifests", "metadata"] {
            for entry in std::fs::read_dir(root.join(sub)).expect("bundle dir") {
                let path = entry.expect("entry").path();
                let file = path
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned();
                files.insert(format!("{sub}/{file}"), std::fs::read(&path).expect("read"));
            }
        }
        let pushed = registry::push_bundle_image(
            reg,
            &format!("real/{package}:v{version}"),
            &files,
            package,
            &["alpha"],
        )
        .await
        .expect("push bundle");
        blob["image"] = json!(pushed.reference);
    }
    let cat = tempfile::tempdir().expect("catalog dir");
    let jsonl: String = blobs.iter().map(|b| format!("{b}\n")).collect();
    std::fs::write(cat.path().join("catalog.json"), jsonl).expect("write catalog");
    let cat = cat.path().display().to_string();
    let cache = tempfile::tempdir().expect("cache");
    let c = cache.path();

    let at = format!("{package}@0.5.0");
    let diff = ok(rbac(c, &[&at, "--catalog", &cat, "--diff", "0.3.2"]));
    let dir = |v: &str| bundles.join(package).join(v).display().to_string();
    assert_eq!(ok(rbac(c, &[&dir("0.5.0"), "--diff", &dir("0.3.2")])), diff);
    assert!(!rules_of(&diff).is_empty(), "{diff}");
    assert_eq!(
        ok(rbac(c, &[&at, "--catalog", &cat])),
        ok(rbac(c, &[&dir("0.5.0")]))
    );
}

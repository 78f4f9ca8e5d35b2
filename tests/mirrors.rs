//! Registry mirrors and the catalog client's CA through the controller
//! (docs/reference/api-and-status.md §3 pull step, docs/concepts/catalogs.md A6 trust): the
//! controller runs with `--registries-conf` and a catalog server on HTTPS whose CA it
//! trusts only through `--catalogd-cas-dir`. Catalog and bundle images name a registry
//! host that does not resolve; registries.conf sends every pull to a second real
//! `docker-registry` (the mirror, reached over plain HTTP because registries.conf says
//! so). A registry that registries.conf blocks gives terminal `Blocked` conditions
//! naming the registry and the file. The `olmv1` CLI pulls through the same file.

use crate::support;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension, conditions};
use olmv1::testenv::registry::TestRegistry;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;
use support::bundles::{self, BundleSpec};
use support::extensions::{create_catalog, extension, grant_installer, wait_installed};

/// Never resolves: only the mirror can serve it.
const ORIGIN: &str = "origin.olmv1-mirror-test.invalid";
/// Blocked in registries.conf (and never resolves either).
const BLOCKED: &str = "blocked.olmv1-mirror-test.invalid";

/// The mirror: a second real registry, reached only through registries.conf.
fn mirror() -> &'static TestRegistry {
    static R: OnceLock<TestRegistry> = OnceLock::new();
    R.get_or_init(|| TestRegistry::start().unwrap_or_else(|e| panic!("mirror registry: {e:#}")))
}

struct Setup {
    registries_conf: PathBuf,
    _dir: tempfile::TempDir,
}

/// registries.conf, the catalog server's TLS key pair and the CA directory, written
/// once; the controller of this test binary starts with them.
fn setup() -> &'static Setup {
    static S: OnceLock<Setup> = OnceLock::new();
    S.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tmp");
        let registries_conf = dir.path().join("registries.conf");
        let conf = format!(
            r#"unqualified-search-registries = ["docker.io"]

[[registry]]
prefix = "{ORIGIN}"
location = "{ORIGIN}"
[[registry.mirror]]
location = "{}"
insecure = true

[[registry]]
location = "{BLOCKED}"
blocked = true
"#,
            mirror().host()
        );
        std::fs::write(&registries_conf, conf).expect("write registries.conf");
        let pki = olmv1::testenv::pki::generate(&dir.path().join("pki")).expect("pki");
        let cas = dir.path().join("cas");
        std::fs::create_dir(&cas).expect("cas dir");
        std::fs::copy(&pki.ca_cert, cas.join("ca.crt")).expect("ca");
        let conf_path = registries_conf.clone();
        support::controller_with(move |a| {
            a.registries_conf = Some(conf_path);
            a.catalog_server_tls_cert = Some(pki.serving_cert.clone());
            a.catalog_server_tls_key = Some(pki.serving_key.clone());
            a.catalogd_cas_dir = Some(cas);
        });
        Setup {
            registries_conf,
            _dir: dir,
        }
    })
}

/// `<mirror host>/…` as the origin registry names it.
fn at(host: &str, mirror_ref: &str) -> String {
    let rest = mirror_ref
        .strip_prefix(mirror().host())
        .unwrap_or_else(|| panic!("{mirror_ref} is not on the mirror"));
    format!("{host}{rest}")
}

/// Pushes the bundles and a catalog to the mirror; the catalog's `image:` fields and
/// the returned catalog reference name `host` instead.
async fn publish_via(host: &str, name: &str, package: &str, specs: &[BundleSpec]) -> String {
    let mut entries = Vec::new();
    for spec in specs {
        let pushed = olmv1::testenv::demo::push_bundle(mirror(), spec)
            .await
            .unwrap_or_else(|e| panic!("{e:#}"));
        entries.push((spec.clone(), at(host, &pushed)));
    }
    let files = BTreeMap::from([(
        format!("{package}/catalog.json"),
        bundles::catalog_fbc(package, &entries),
    )]);
    let repo_tag = format!("catalogs/{name}:latest");
    olmv1::testenv::registry::push_catalog_image(mirror(), &repo_tag, &files)
        .await
        .expect("push catalog");
    format!("{host}/{repo_tag}")
}

fn condition<'a>(conds: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions::find(conds, type_)
}

#[tokio::test]
async fn extension_installs_through_a_mirror_over_an_https_catalog_server() {
    setup();
    let admin = support::cluster().admin().await;
    let package = support::unique("mirrored");
    let ns = support::namespace(&admin, "mirror").await;
    let name = support::unique("ext");
    let spec = BundleSpec::new(&package, "1.0.0");
    grant_installer(&ns, &name, &[bundles::render(&spec, &ns)]).await;
    let catalog_name = support::unique("cat");
    let image = publish_via(ORIGIN, &catalog_name, &package, &[spec]).await;
    create_catalog(&catalog_name, &image).await;

    // The catalog image came through the mirror; its status names the origin.
    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());
    let served = support::eventually(90, "catalog served", || async {
        let c = catalogs.get(&catalog_name).await.ok()?;
        let s = c.status.clone()?;
        (condition(&s.conditions, "Serving")?.status == "True").then_some(s)
    })
    .await;
    let resolved = served
        .resolved_source
        .map(|r| r.image.ref_)
        .unwrap_or_default();
    assert!(
        resolved.starts_with(&format!("{ORIGIN}/catalogs/{catalog_name}@sha256:")),
        "{resolved}"
    );
    let base = served.urls.map(|u| u.base).unwrap_or_default();
    assert!(base.starts_with("https://"), "{base}");

    // Resolution over HTTPS (CA from --catalogd-cas-dir), the bundle from the mirror.
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let ext = extension(
        &name,
        &ns,
        &package,
        serde_json::json!({"selector": {"matchLabels": {
            "olm.operatorframework.io/metadata.name": catalog_name}}}),
    );
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create");
    wait_installed(&api, &name, "1.0.0").await;
    // Installed: the mirror served the bundle, as its origin never resolves.
}

#[tokio::test]
async fn blocked_registry_is_reported_as_blocked_for_bundles_and_catalogs() {
    let conf = setup().registries_conf.display().to_string();
    let admin = support::cluster().admin().await;

    // A catalog whose image is on the blocked registry.
    let blocked_catalog = support::unique("blocked-cat");
    create_catalog(&blocked_catalog, &format!("{BLOCKED}/catalogs/x:latest")).await;
    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());
    let progressing = support::eventually(60, "blocked catalog reported", || async {
        let c = catalogs.get(&blocked_catalog).await.ok()?;
        let p = condition(&c.status?.conditions, "Progressing")?.clone();
        (p.reason == "Blocked").then_some(p)
    })
    .await;
    assert_eq!(progressing.status, "False");
    assert!(
        progressing
            .message
            .contains(&format!("registry \"{BLOCKED}\" is blocked in {conf}")),
        "{}",
        progressing.message
    );

    // A served catalog (via the mirror) whose bundle is on the blocked registry.
    let package = support::unique("blockedpkg");
    let ns = support::namespace(&admin, "blocked").await;
    let name = support::unique("ext");
    let spec = BundleSpec::new(&package, "1.0.0");
    grant_installer(&ns, &name, &[bundles::render(&spec, &ns)]).await;
    let catalog_name = support::unique("cat");
    // The catalog comes through the mirror; the bundle names the blocked registry.
    let mut entries = Vec::new();
    let pushed = olmv1::testenv::demo::push_bundle(mirror(), &spec)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    entries.push((spec.clone(), at(BLOCKED, &pushed)));
    let files = BTreeMap::from([(
        format!("{package}/catalog.json"),
        bundles::catalog_fbc(&package, &entries),
    )]);
    let repo_tag = format!("catalogs/{catalog_name}:latest");
    olmv1::testenv::registry::push_catalog_image(mirror(), &repo_tag, &files)
        .await
        .expect("push catalog");
    create_catalog(&catalog_name, &format!("{ORIGIN}/{repo_tag}")).await;

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let ext = extension(
        &name,
        &ns,
        &package,
        serde_json::json!({"selector": {"matchLabels": {
            "olm.operatorframework.io/metadata.name": catalog_name}}}),
    );
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create");
    let e = support::eventually(120, "extension blocked", || async {
        let e = api.get(&name).await.ok()?;
        let p = support::extensions::condition(&e, "Progressing")?;
        (p.reason == "Blocked").then_some(p)
    })
    .await;
    assert_eq!(e.status, "False");
    assert!(
        e.message
            .contains(&format!("registry \"{BLOCKED}\" is blocked in {conf}")),
        "{}",
        e.message
    );
}

/// `olmv1 catalog packages --catalog <origin image> --registries-conf …`: the CLI pulls
/// the catalog image through the mirror as the controller does.
#[tokio::test]
async fn cli_pulls_catalog_image_through_the_mirror() {
    let conf = setup().registries_conf.clone();
    let package = support::unique("clipkg");
    let image = publish_via(
        ORIGIN,
        &support::unique("clicat"),
        &package,
        &[BundleSpec::new(&package, "1.2.3")],
    )
    .await;
    let cache = tempfile::tempdir().expect("tmp");
    let run = |conf: Option<&std::path::Path>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_olmv1"));
        cmd.args([
            "catalog",
            "packages",
            "--catalog",
            &image,
            "--image-cache-dir",
        ])
        .arg(cache.path());
        if let Some(c) = conf {
            cmd.arg("--registries-conf").arg(c);
        }
        cmd.output().expect("olmv1")
    };
    let out = run(Some(&conf));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&package) && stdout.contains("1.2.3"),
        "{stdout}"
    );

    // The blocked registry: a clear error and a non-zero exit.
    let blocked = std::process::Command::new(env!("CARGO_BIN_EXE_olmv1"))
        .args(["catalog", "validate", &format!("{BLOCKED}/catalogs/x:v1")])
        .arg("--registries-conf")
        .arg(&conf)
        .arg("--image-cache-dir")
        .arg(cache.path())
        .output()
        .expect("olmv1");
    let stderr = String::from_utf8_lossy(&blocked.stderr);
    assert!(!blocked.status.success());
    assert!(
        stderr.contains(&format!(
            "registry \"{BLOCKED}\" is blocked in {}",
            conf.display()
        )),
        "{stderr}"
    );

    // A registries.conf that does not parse: the file and the problem.
    let bad = cache.path().join("bad.conf");
    std::fs::write(&bad, "[[registry]]\nlocation = \"https://quay.io\"\n").expect("write");
    let out = run(Some(&bad));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("registries configuration {}", bad.display()))
            && stderr.contains("URI schemes are not supported"),
        "{stderr}"
    );
}

/// A registries.conf that does not parse stops `olmv1 controller` at start, before it
/// connects anywhere, naming the file and the problem.
#[test]
fn controller_refuses_to_start_with_a_broken_registries_conf() {
    let dir = tempfile::tempdir().expect("tmp");
    let bad = dir.path().join("registries.conf");
    std::fs::write(
        &bad,
        "[[registry]]\nlocation = \"quay.io\"\n[[registry.mirror]]\nlocation = \"m.local\"\npull-from-mirror = \"sometimes\"\n",
    )
    .expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_olmv1"))
        .args(["controller", "--kubeconfig", "/nonexistent/kubeconfig"])
        .arg("--registries-conf")
        .arg(&bad)
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .output()
        .expect("olmv1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!(
            "error: registries configuration {}: [[registry]] #1: unsupported pull-from-mirror value \"sometimes\"",
            bad.display()
        )),
        "{stderr}"
    );
    assert!(
        !stderr.contains("kubeconfig"),
        "checked before connecting: {stderr}"
    );
}

/// `config/`: the shipped (empty) registries.conf parses, and the Deployment mounts the
/// optional ConfigMap where its `--registries-conf` flag points.
#[test]
fn shipped_registries_conf_parses_and_is_mounted_where_the_flag_points() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let text =
        std::fs::read_to_string(root.join("manager/registries-conf.yaml")).expect("configmap");
    let cm: serde_json::Value = serde_saphyr::from_str(&text).expect("yaml");
    assert_eq!(cm["metadata"]["name"], "registries-conf");
    let conf = cm["data"]["registries.conf"].as_str().expect("data");
    olmv1::image::registries::RegistriesConf::parse("configmap", conf).expect("parses");

    let text = std::fs::read_to_string(root.join("manager/deployment.yaml")).expect("deployment");
    let d: serde_json::Value = serde_saphyr::from_str(&text).expect("yaml");
    let pod = &d["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        args.contains(&"--registries-conf=/etc/containers/registries.conf"),
        "{args:?}"
    );
    let mounted = container["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .any(|m| m["name"] == "registries-conf" && m["mountPath"] == "/etc/containers");
    assert!(mounted);
    let volume = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == "registries-conf")
        .expect("volume");
    assert_eq!(volume["configMap"]["name"], "registries-conf");
    assert_eq!(volume["configMap"]["optional"], true);
    let kustomization =
        std::fs::read_to_string(root.join("kustomization.yaml")).expect("kustomization");
    assert!(kustomization.contains("- manager/registries-conf.yaml"));
}

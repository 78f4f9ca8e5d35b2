//! A hostile catalog entry end to end (docs/reference/api-and-status.md A8): a catalog serves a bundle whose CSV is
//! a YAML alias bomb to extension A, and a second catalog is itself an alias bomb, while
//! extension B installs and has its drift corrected as usual. The controller runs as its
//! own process (`olmv1 controller`, the crate's binary), so an out-of-memory kill or a
//! crash would show as the process exiting; its peak RSS is read from `/proc` at the end.
//!
//! Only the spawned controller reconciles in this test binary (the in-process one of
//! `support::controller()` is never started here).

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DeleteParams, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension, conditions};
use olmv1::testenv::yaml_bombs::Bomb;
use serde_json::json;
use std::collections::BTreeMap;
use support::bundles::{self, BundleSpec};
use support::extensions::{
    condition, create_catalog, extension, grant_installer, publish, wait_installed,
    wait_progressing_message,
};
use support::process::ControllerProcess;

/// The controller Deployment's memory limit in `config/`.
const MEMORY_LIMIT_KIB: u64 = 256 * 1024;

/// The controller is still the same process, and never came near its memory limit.
fn assert_alive_and_small(ctl: &mut ControllerProcess, pid: u32) {
    assert!(
        ctl.try_wait().is_none(),
        "controller exited: {}",
        ctl.log_text()
    );
    let peak = support::process::status_kib(pid, "VmHWM:").expect("VmHWM");
    eprintln!("controller peak RSS: {peak} KiB");
    assert!(
        peak < MEMORY_LIMIT_KIB / 2,
        "controller peak RSS {peak} KiB (limit {MEMORY_LIMIT_KIB} KiB)"
    );
}

/// Pushes a bundle image whose only manifest is a CSV holding `bomb`; returns its
/// digest-pinned reference.
async fn push_bomb_bundle(package: &str, bomb: Bomb) -> String {
    let files = BTreeMap::from([(
        "manifests/csv.yaml".to_string(),
        bomb.csv(&format!("{package}.v1.0.0")).into_bytes(),
    )]);
    olmv1::testenv::registry::push_bundle_image(
        support::registry(),
        &format!("bundles/{package}:v1.0.0"),
        &files,
        package,
        &["stable"],
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"))
    .reference
}

/// Pushes a catalog image of `files` (paths under the catalog root) and creates the
/// ClusterCatalog `name` for it.
async fn create_catalog_of(name: &str, files: &BTreeMap<String, Vec<u8>>) {
    let repo_tag = format!("catalogs/{name}:latest");
    olmv1::testenv::registry::push_catalog_image(support::registry(), &repo_tag, files)
        .await
        .unwrap_or_else(|e| panic!("pushing catalog {name}: {e:#}"));
    create_catalog(name, &format!("{}/{repo_tag}", support::registry().host())).await;
}

/// A catalog selector for one catalog: a catalog that is not served (the bomb catalog)
/// makes resolution over all catalogs fail, as upstream.
/// One test at a time: each starts a controller of its own with its own limits, and two
/// controllers would both reconcile every extension, each writing its own status (the
/// budget test's slow extension then never showed its `--install-timeout` message).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn only(catalog: &str) -> serde_json::Value {
    json!({"selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": catalog}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alias_bombs_are_reported_and_other_extensions_keep_working() {
    let _serial = SERIAL.lock().await;
    let admin = support::cluster().admin().await;
    let mut ctl = ControllerProcess::start("hostile", &[]);
    ctl.wait_listening(30);
    let pid = ctl.pid().expect("controller pid");
    let api: Api<ClusterExtension> = Api::all(admin.clone());

    // A: a catalog whose only bundle (digest-pinned) is an alias bomb.
    let bad_package = support::unique("bomb");
    let bad_ns = support::namespace(&admin, "bomb").await;
    let bad_name = support::unique("bombext");
    let bad_image = push_bomb_bundle(&bad_package, Bomb::Laughs).await;
    assert!(
        olmv1::bundle::is_digest_reference(&bad_image),
        "{bad_image}"
    );
    let spec = BundleSpec::new(&bad_package, "1.0.0");
    let files = BTreeMap::from([(
        format!("{bad_package}/catalog.json"),
        bundles::catalog_fbc(&bad_package, &[(spec, bad_image.clone())]),
    )]);
    let bad_catalog = support::unique("bombcat");
    create_catalog_of(&bad_catalog, &files).await;
    // The installer account (without any rights) must exist; loading the bundle fails
    // before it would be used.
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), &bad_ns);
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": format!("{bad_name}-installer")}}))
            .expect("account");
    accounts
        .create(&PostParams::default(), &account)
        .await
        .expect("create account");
    api.create(
        &PostParams::default(),
        &extension(&bad_name, &bad_ns, &bad_package, only(&bad_catalog)),
    )
    .await
    .expect("create A");

    // A catalog whose own file is an alias bomb.
    let bomb_catalog = support::unique("bombfbc");
    let bomb_files = BTreeMap::from([(
        "pkg/catalog.yaml".to_string(),
        Bomb::Laughs.catalog_yaml("pkg").into_bytes(),
    )]);
    create_catalog_of(&bomb_catalog, &bomb_files).await;

    // B: an ordinary extension from an ordinary catalog, at the same time.
    let package = support::unique("good");
    let ns = support::namespace(&admin, "good").await;
    let name = support::unique("goodext");
    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.extra_configmap = true;
    grant_installer(&ns, &name, &[bundles::render(&v1, &ns)]).await;
    let catalog_name = support::unique("goodcat");
    let image = publish(&catalog_name, &package, std::slice::from_ref(&v1)).await;
    create_catalog(&catalog_name, &image).await;
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, &package, only(&catalog_name)),
    )
    .await
    .expect("create B");

    // A reports the parser's message, terminally (the image is pinned by digest).
    let last = std::sync::Mutex::new(String::new());
    let a = support::eventually(
        90,
        "A's Progressing to mention the alias expansion",
        || async {
            let e = api.get(&bad_name).await.ok()?;
            let seen = format!("{:?}", e.status.as_ref().map(|s| &s.conditions));
            if let Ok(mut l) = last.lock()
                && *l != seen
            {
                eprintln!("A: {seen}");
                *l = seen;
            }
            condition(&e, "Progressing")?
                .message
                .contains("alias expansion")
                .then_some(e)
        },
    )
    .await;
    let progressing = condition(&a, "Progressing").expect("Progressing");
    assert_eq!(
        (progressing.status.as_str(), progressing.reason.as_str()),
        ("False", "Blocked"),
        "{progressing:?}"
    );
    assert!(
        progressing.message.contains("manifests/csv.yaml")
            && progressing.message.contains(&bad_image),
        "{}",
        progressing.message
    );

    // The bomb catalog is refused with the parser's message and is not served.
    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());
    let c = support::eventually(90, "the bomb catalog to report the alias bomb", || async {
        let c = catalogs.get(&bomb_catalog).await.ok()?;
        let status = c.status.as_ref()?;
        let p = conditions::find(&status.conditions, "Progressing")?;
        p.message.contains("alias expansion").then_some(c)
    })
    .await;
    let serving = c
        .status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, "Serving").cloned());
    assert_ne!(serving.map(|s| s.status), Some("True".to_string()));

    // B installs and its drift is corrected.
    wait_installed(&api, &name, "1.0.0").await;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let before = deployments
        .get(&v1.deployment_name())
        .await
        .expect("deployment");
    deployments
        .delete(&v1.deployment_name(), &DeleteParams::default())
        .await
        .expect("delete deployment");
    support::eventually(60, "the deleted deployment restored", || async {
        let d = deployments.get_opt(&v1.deployment_name()).await.ok()??;
        (d.metadata.uid != before.metadata.uid).then_some(())
    })
    .await;

    assert_alive_and_small(&mut ctl, pid);
    let a = api.get(&bad_name).await.expect("A");
    assert_ne!(
        condition(&a, "Installed").map(|c| c.status),
        Some("True".to_string())
    );

    for n in [&name, &bad_name] {
        api.delete(n, &DeleteParams::default())
            .await
            .expect("delete");
    }
    for c in [&catalog_name, &bad_catalog, &bomb_catalog] {
        let _ = catalogs.delete(c, &DeleteParams::default()).await;
    }
}

/// `host:port` of a "registry" that answers every request with a response head dripped
/// one byte a second, never finished: each read succeeds within any per-read timeout,
/// so only a wall-clock deadline ends a pull from it.
fn drip_registry() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let host = listener.local_addr().expect("addr").to_string();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                if stream.read(&mut buf).is_err() {
                    return;
                }
                let head = b"HTTP/1.1 200 OK\r\nx-drip: ";
                for b in head.iter().chain(std::iter::repeat(&b'a')) {
                    if stream.write_all(&[*b]).is_err() {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_secs(1));
                }
            });
        }
    });
    host
}

/// A CSV whose one cluster permission rule names `n` API groups, `n` resources and `n`
/// verbs: `n`³ single permissions if multiplied out (a million for `n` = 100, from a
/// rule of a few KiB).
fn expanding_rule_csv(name: &str, n: usize) -> String {
    let list = |prefix: &str| {
        (0..n)
            .map(|i| format!("\"{prefix}{i}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: {name}\nspec:\n  displayName: hostile\n  installModes:\n    - type: AllNamespaces\n      supported: true\n  install:\n    strategy: deployment\n    spec:\n      clusterPermissions:\n        - serviceAccountName: hostile\n          rules:\n            - apiGroups: [{}]\n              resources: [{}]\n              verbs: [{}]\n      deployments: []\n",
        list("g"),
        list("r"),
        list("v")
    )
}

/// The resource budget of a reconcile: while a catalog nested a thousand directories
/// deep, a bundle whose registry never finishes answering, and a bundle with a rule
/// that multiplies out to a million permissions are in the cluster, ten ordinary
/// extensions install and then upgrade on time; each hostile input is reported with
/// the limit it hit, and the controller neither exits nor nears its memory limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_inputs_do_not_delay_ten_healthy_extensions() {
    let _serial = SERIAL.lock().await;
    let admin = support::cluster().admin().await;
    let drip = drip_registry();
    let mut ctl = ControllerProcess::start(
        "budget",
        &["--install-timeout", "10s", "--insecure-registry", &drip],
    );
    ctl.wait_listening(30);
    let pid = ctl.pid().expect("controller pid");
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());

    // A catalog nested 1,000 directories deep.
    let deep_catalog = support::unique("deepcat");
    let deep_path = format!("{}catalog.json", "d/".repeat(1000));
    let deep_files = BTreeMap::from([(
        deep_path,
        br#"{"schema":"olm.package","name":"deep"}"#.to_vec(),
    )]);
    create_catalog_of(&deep_catalog, &deep_files).await;

    // One catalog for the hostile bundles: one whose image is on the drip registry, one
    // whose CSV holds the expanding rule.
    let slow_package = support::unique("slow");
    let wide_package = support::unique("wide");
    let slow_image = format!("{drip}/bundles/slow@sha256:{}", "0".repeat(64));
    let wide_files = BTreeMap::from([(
        "manifests/csv.yaml".to_string(),
        expanding_rule_csv(&format!("{wide_package}.v1.0.0"), 100).into_bytes(),
    )]);
    let wide_image = olmv1::testenv::registry::push_bundle_image(
        support::registry(),
        &format!("bundles/{wide_package}:v1.0.0"),
        &wide_files,
        &wide_package,
        &["stable"],
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"))
    .reference;
    let hostile_catalog = support::unique("hostilecat");
    let mut files = BTreeMap::new();
    for (package, image) in [(&slow_package, &slow_image), (&wide_package, &wide_image)] {
        files.insert(
            format!("{package}/catalog.json"),
            bundles::catalog_fbc(
                package,
                &[(BundleSpec::new(package, "1.0.0"), image.clone())],
            ),
        );
    }
    create_catalog_of(&hostile_catalog, &files).await;
    let hostile_ns = support::namespace(&admin, "hostile").await;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), &hostile_ns);
    let mut hostile = Vec::new();
    for package in [&slow_package, &wide_package] {
        let name = format!("{package}-ext");
        let account: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": format!("{name}-installer")}}))
                .expect("account");
        accounts
            .create(&PostParams::default(), &account)
            .await
            .expect("create account");
        api.create(
            &PostParams::default(),
            &extension(&name, &hostile_ns, package, only(&hostile_catalog)),
        )
        .await
        .expect("create hostile extension");
        hostile.push(name);
    }

    // Ten ordinary extensions (each its own package, 1.0.0 and 1.1.0) from one catalog.
    let good_catalog = support::unique("goodcat");
    let ns = support::namespace(&admin, "good").await;
    let mut good = Vec::new();
    let mut files = BTreeMap::new();
    for i in 0..10 {
        let package = support::unique(&format!("good{i}"));
        let name = format!("{package}-ext");
        let mut published = Vec::new();
        let mut rendered = Vec::new();
        for version in ["1.0.0", "1.1.0"] {
            let mut spec = BundleSpec::new(&package, version);
            // The upgrade edge: 1.1.0 replaces 1.0.0.
            spec.replaces = published
                .last()
                .map(|(previous, _): &(BundleSpec, String)| previous.bundle_name());
            let image = bundles::push_bundle(&spec).await;
            rendered.push(bundles::render(&spec, &ns));
            published.push((spec, image));
        }
        grant_installer(&ns, &name, &rendered).await;
        files.insert(
            format!("{package}/catalog.json"),
            bundles::catalog_fbc(&package, &published),
        );
        good.push((name, package));
    }
    create_catalog_of(&good_catalog, &files).await;
    let started = std::time::Instant::now();
    for (name, package) in &good {
        let mut filter = only(&good_catalog);
        filter["version"] = json!("1.0.0");
        api.create(
            &PostParams::default(),
            &extension(name, &ns, package, filter),
        )
        .await
        .expect("create good extension");
    }
    for (name, _) in &good {
        wait_installed(&api, name, "1.0.0").await;
    }
    let installed_after = started.elapsed();
    let started = std::time::Instant::now();
    for (name, _) in &good {
        api.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"spec": {"source": {"catalog": {"version": "1.1.0"}}}}),
            ),
        )
        .await
        .expect("upgrade");
    }
    for (name, _) in &good {
        wait_installed(&api, name, "1.1.0").await;
    }
    let upgraded_after = started.elapsed();
    eprintln!("ten installed in {installed_after:?}, upgraded in {upgraded_after:?}");
    assert!(
        installed_after < std::time::Duration::from_secs(90)
            && upgraded_after < std::time::Duration::from_secs(90),
        "ten installs took {installed_after:?} and their upgrades {upgraded_after:?}"
    );

    // Each hostile input is reported with the limit it hit.
    let c = support::eventually(120, "the deep catalog to report its depth", || async {
        let c = catalogs.get(&deep_catalog).await.ok()?;
        let p = conditions::find(&c.status.as_ref()?.conditions, "Progressing")?.clone();
        p.message.contains("nested deeper than").then_some(p)
    })
    .await;
    eprintln!("deep catalog: {}", c.message);
    let slow = wait_progressing_message(&api, &hostile[0], "--install-timeout").await;
    let p = condition(&slow, "Progressing").expect("Progressing");
    assert_eq!(
        (p.status.as_str(), p.reason.as_str()),
        ("True", "Retrying"),
        "{p:?}"
    );
    assert!(p.message.contains(&slow_image), "{}", p.message);
    let wide = wait_progressing_message(&api, &hostile[1], "rule expands to more than").await;
    let p = condition(&wide, "Progressing").expect("Progressing");
    assert!(
        p.message.len() < 64 << 10,
        "the missing permissions are listed within bounds ({} bytes)",
        p.message.len()
    );
    for name in &hostile {
        let e = api.get(name).await.expect("hostile extension");
        assert_ne!(
            condition(&e, "Installed").map(|c| c.status),
            Some("True".to_string()),
            "{name}"
        );
    }

    assert_alive_and_small(&mut ctl, pid);

    for (name, _) in &good {
        let _ = api.delete(name, &DeleteParams::default()).await;
    }
    for name in &hostile {
        let _ = api.delete(name, &DeleteParams::default()).await;
    }
    for c in [&deep_catalog, &hostile_catalog, &good_catalog] {
        let _ = catalogs.delete(c, &DeleteParams::default()).await;
    }
}

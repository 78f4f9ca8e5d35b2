//! A hostile catalog entry end to end (issue 17): a catalog serves a bundle whose CSV is
//! a YAML alias bomb to extension A, and a second catalog is itself an alias bomb, while
//! extension B installs and has its drift corrected as usual. The controller runs as its
//! own process (`olmv1 controller`, the crate's binary), so an out-of-memory kill or a
//! crash would show as the process exiting; its peak RSS is read from `/proc` at the end.
//!
//! Only the spawned controller reconciles in this test binary (the in-process one of
//! `support::controller()` is never started here).

#[path = "../tests/support/mod.rs"]
mod support;

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
};
use support::process::ControllerProcess;

/// The controller Deployment's memory limit in `config/`.
const MEMORY_LIMIT_KIB: u64 = 256 * 1024;

/// Peak resident set of a running process, from `/proc/<pid>/status` (`VmHWM`, KiB).
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
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

/// A catalog selector for one catalog: a catalog that is not served (the bomb catalog)
/// makes resolution over all catalogs fail, as upstream.
fn only(catalog: &str) -> serde_json::Value {
    json!({"selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": catalog}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alias_bombs_are_reported_and_other_extensions_keep_working() {
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
    let repo_tag = format!("catalogs/{bad_catalog}:latest");
    olmv1::testenv::registry::push_catalog_image(support::registry(), &repo_tag, &files)
        .await
        .expect("push catalog");
    create_catalog(
        &bad_catalog,
        &format!("{}/{repo_tag}", support::registry().host()),
    )
    .await;
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
    let bomb_tag = format!("catalogs/{bomb_catalog}:latest");
    let bomb_files = BTreeMap::from([(
        "pkg/catalog.yaml".to_string(),
        Bomb::Laughs.catalog_yaml("pkg").into_bytes(),
    )]);
    olmv1::testenv::registry::push_catalog_image(support::registry(), &bomb_tag, &bomb_files)
        .await
        .expect("push bomb catalog");
    create_catalog(
        &bomb_catalog,
        &format!("{}/{bomb_tag}", support::registry().host()),
    )
    .await;

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

    // The controller is still the same process, and never came near its memory limit.
    assert!(
        ctl.try_wait().is_none(),
        "controller exited: {}",
        ctl.log_text()
    );
    let peak = peak_rss_kib(pid).expect("VmHWM");
    eprintln!("controller peak RSS: {peak} KiB");
    assert!(
        peak < MEMORY_LIMIT_KIB / 2,
        "controller peak RSS {peak} KiB (limit {MEMORY_LIMIT_KIB} KiB)"
    );
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

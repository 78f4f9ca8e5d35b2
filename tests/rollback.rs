//! Rollback (docs/how-to/upgrade-control.md, "Rollback") against the real control plane,
//! registry and controller: `olmv1 rollback NAME` (the built binary) returns an upgraded
//! extension to 1.0.0 with 1.0.0's objects and keeps it there while 1.1.0 is still in
//! the catalog, until `--clear`; a rollback CRD upgrade safety refuses (1.1.0 added a
//! stored CRD version 1.0.0 lacks) is terminal with its findings; with
//! `upgrade-remediation: Rollback` an upgrade whose apply fails goes back to 1.0.0.

mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use olmv1::api::ClusterExtension;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::bundles::{self, BundleSpec};
use support::extensions::{
    condition, create_catalog, extension, grant_installer, publish, wait_installed,
};

fn olmv1(args: &[&str]) -> (bool, String) {
    let kubeconfig = &support::cluster().admin_kubeconfig;
    let out = Command::new(Path::new(env!("CARGO_BIN_EXE_olmv1")))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("running olmv1");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Waits until condition `type_` of `name` has `reason` and mentions `needle`.
async fn wait_condition(
    api: &Api<ClusterExtension>,
    name: &str,
    type_: &str,
    reason: &str,
    needle: &str,
) -> ClusterExtension {
    let what = format!("{name}: {type_} {reason} mentioning {needle:?}");
    let last = std::sync::Mutex::new(String::new());
    support::eventually(120, &what, || async {
        let e = api.get(name).await.ok()?;
        let c = condition(&e, type_)?;
        let seen = format!("{}/{}: {}", c.status, c.reason, c.message);
        if let Ok(mut last) = last.lock()
            && *last != seen
        {
            eprintln!("{name} {type_}: {seen}");
            *last = seen;
        }
        (c.reason == reason && c.message.contains(needle)).then_some(e)
    })
    .await
}

fn installed_version(e: &ClusterExtension) -> Option<String> {
    Some(e.status.as_ref()?.install.as_ref()?.bundle.version.clone())
}

/// Installs 1.0.0 of `versions` (all published), then waits for the upgrade to the
/// last one (or its failure). Returns (extension name, namespace).
async fn installed_and_upgraded(
    prefix: &str,
    versions: &[BundleSpec],
    annotations: &[(&str, &str)],
) -> (String, String, Api<ClusterExtension>) {
    let admin = support::cluster().admin().await;
    let ns = support::namespace(&admin, prefix).await;
    let name = support::unique(prefix);
    let package = versions[0].package.clone();
    let rendered: Vec<_> = versions.iter().map(|b| bundles::render(b, &ns)).collect();
    grant_installer(&ns, &name, &rendered).await;
    let catalog = support::unique(&format!("{prefix}cat"));
    let image = publish(&catalog, &package, &versions[..1]).await;
    create_catalog(&catalog, &image).await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let mut ext = extension(
        &name,
        &ns,
        &package,
        json!({"upgradeConstraintPolicy": "SelfCertified"}),
    );
    ext.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create");
    wait_installed(&api, &name, "1.0.0").await;
    publish(&catalog, &package, versions).await;
    (name, ns, api)
}

/// A CRD `things.<group>` of `spec`'s package: `versions` (name, storage).
fn things_crd(spec: &BundleSpec, versions: &[(&str, bool)]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|(v, storage)| {
            json!({"name": v, "served": true, "storage": storage,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
        })
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("things.{}", spec.group())},
        "spec": {"group": spec.group(), "scope": "Namespaced",
            "names": {"kind": "Thing", "listKind": "ThingList", "plural": "things", "singular": "thing"},
            "versions": versions}
    })
}

#[tokio::test]
async fn rollback_returns_to_the_recorded_revision_and_stays_there_until_cleared() {
    support::controller();
    let package = support::unique("rb");
    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.extra_configmap = true;
    let v11 = BundleSpec::new(&package, "1.1.0");
    let (name, ns, api) = installed_and_upgraded("rb", &[v1.clone(), v11.clone()], &[]).await;
    wait_installed(&api, &name, "1.1.0").await;
    let configmaps: Api<ConfigMap> = Api::namespaced(support::cluster().admin().await, &ns);
    let extra = format!("{package}-extra");
    support::eventually(60, "1.1.0 pruned 1.0.0's ConfigMap", || async {
        configmaps
            .get_opt(&extra)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;

    // `--to` a version not in the record: refused before anything is written.
    let (ok, out) = olmv1(&["rollback", &name, "--to", "0.9.0"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("version 0.9.0 is not in the revision record"),
        "{out}"
    );

    let (ok, out) = olmv1(&["rollback", &name]);
    assert!(ok, "{out}");
    assert!(out.contains("rolling back from 1.1.0 to 1.0.0"), "{out}");
    let e = wait_installed(&api, &name, "1.0.0").await;
    let annotations = e.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("olm.operatorframework.io/rollback-to")
            .map(String::as_str),
        Some("1.0.0")
    );
    // 1.0.0's objects: its ConfigMap is back, its Deployment runs 1.0.0's image.
    support::eventually(60, "1.0.0's ConfigMap restored", || async {
        configmaps.get_opt(&extra).await.ok()?.map(|_| ())
    })
    .await;
    let deployments: Api<Deployment> = Api::namespaced(support::cluster().admin().await, &ns);
    let d = deployments
        .get(&v1.deployment_name())
        .await
        .expect("deployment");
    let image = d
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.first().and_then(|c| c.image.clone()));
    assert!(
        image.as_deref().is_some_and(|i| i.ends_with(":1.0.0")),
        "{image:?}"
    );
    let e = wait_condition(
        &api,
        &name,
        "Progressing",
        "RolledBack",
        "the upgrade to 1.1.0",
    )
    .await;
    let rolled = condition(&e, "RolledBack").expect("RolledBack");
    assert_eq!(
        (rolled.status.as_str(), rolled.reason.as_str()),
        ("True", "RollbackRequested")
    );
    wait_condition(
        &api,
        &name,
        "UpgradeAvailable",
        "RolledBack",
        "1.1.0 is available",
    )
    .await;
    // 1.1.0 is still in the catalog: the extension stays on 1.0.0.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let e = api.get(&name).await.expect("get");
    assert_eq!(installed_version(&e).as_deref(), Some("1.0.0"));
    let (ok, status) = olmv1(&["status", &name]);
    assert!(ok, "{status}");
    assert!(
        status.contains("RolledBack:  True/RollbackRequested"),
        "{status}"
    );
    assert!(
        status
            .lines()
            .any(|l| l.contains("Normal") && l.contains("RolledBack")),
        "{status}"
    );

    // Cleared: the upgrade to 1.1.0 runs again.
    let (ok, out) = olmv1(&["rollback", &name, "--clear"]);
    assert!(ok, "{out}");
    wait_installed(&api, &name, "1.1.0").await;
    wait_condition(
        &api,
        &name,
        "RolledBack",
        "UpgradesResumed",
        "upgrades resume",
    )
    .await;
}

#[tokio::test]
async fn a_rollback_that_would_drop_a_stored_crd_version_is_refused() {
    support::controller();
    let package = support::unique("rbcrd");
    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.extra_manifests = vec![things_crd(&v1, &[("v1", true)])];
    let mut v11 = BundleSpec::new(&package, "1.1.0");
    v11.extra_manifests = vec![things_crd(&v11, &[("v1", false), ("v2", true)])];
    let (name, _ns, api) = installed_and_upgraded("rbcrd", &[v1, v11], &[]).await;
    wait_installed(&api, &name, "1.1.0").await;

    let (ok, out) = olmv1(&["rollback", &name, "--to", "1.0.0"]);
    assert!(ok, "{out}");
    let e = wait_condition(
        &api,
        &name,
        "Progressing",
        "Blocked",
        "refused by CRD upgrade safety",
    )
    .await;
    let progressing = condition(&e, "Progressing").expect("progressing");
    assert_eq!(progressing.status, "False", "terminal");
    assert!(
        progressing
            .message
            .contains("stored versions removed : [v2]"),
        "{}",
        progressing.message
    );
    let rolled = condition(&e, "RolledBack").expect("RolledBack");
    assert_eq!(
        (rolled.status.as_str(), rolled.reason.as_str()),
        ("False", "RollbackRefused")
    );
    assert_eq!(
        installed_version(&e).as_deref(),
        Some("1.1.0"),
        "nothing went back"
    );
}

#[tokio::test]
async fn remediation_rolls_a_failed_upgrade_back() {
    support::controller();
    let package = support::unique("rbfix");
    let v1 = BundleSpec::new(&package, "1.0.0");
    let mut v11 = BundleSpec::new(&package, "1.1.0");
    // The API server rejects this ConfigMap (an invalid data key): the apply fails
    // after the preflights passed.
    v11.extra_manifests = vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("{package}-broken")}, "data": {"not a valid key!": "x"}})];
    let (name, _ns, api) = installed_and_upgraded(
        "rbfix",
        &[v1, v11],
        &[("olm.operatorframework.io/upgrade-remediation", "Rollback")],
    )
    .await;
    let e = wait_condition(
        &api,
        &name,
        "RolledBack",
        "UpgradeFailed",
        "upgrade to 1.1.0",
    )
    .await;
    let rolled = condition(&e, "RolledBack").expect("RolledBack");
    assert_eq!(rolled.status, "True");
    let e = wait_condition(
        &api,
        &name,
        "Progressing",
        "RolledBack",
        "the upgrade to 1.1.0",
    )
    .await;
    assert_eq!(installed_version(&e).as_deref(), Some("1.0.0"));
    // Not retried while the catalog still resolves 1.1.0.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let e = api.get(&name).await.expect("get");
    assert_eq!(installed_version(&e).as_deref(), Some("1.0.0"));
    let (ok, status) = olmv1(&["status", &name]);
    assert!(ok, "{status}");
    assert!(
        status
            .lines()
            .any(|l| l.contains("Warning") && l.contains("RolledBack")),
        "{status}"
    );
}

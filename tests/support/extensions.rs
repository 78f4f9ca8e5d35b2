//! Helpers shared by the ClusterExtension end-to-end tests: publishing synthetic
//! bundles in a catalog, ClusterCatalogs, generated installer RBAC, ClusterExtension
//! objects and waiting on their conditions.
#![allow(dead_code)]

use super::bundles::{self, BundleSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension, conditions};
use olmv1::preflight::permissions::rbac::{BundledRbac, installer_rbac};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The messages of the Events of `reason` about the object `name` (a ClusterExtension).
pub async fn events(admin: &kube::Client, name: &str, reason: &str) -> Vec<String> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::all(admin.clone());
    let fields = format!("involvedObject.name={name}");
    api.list(&kube::api::ListParams::default().fields(&fields))
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.message)
        .collect()
}

pub fn condition(e: &ClusterExtension, type_: &str) -> Option<Condition> {
    e.status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, type_).cloned())
}

/// Publishes `bundles` in a fresh catalog image (tag `<name>:latest`), returns the tag ref.
pub async fn publish(name: &str, package: &str, bundles: &[BundleSpec]) -> String {
    let mut entries = Vec::new();
    for b in bundles {
        entries.push((b.clone(), bundles::push_bundle(b).await));
    }
    let files = BTreeMap::from([(
        format!("{package}/catalog.json"),
        bundles::catalog_fbc(package, &entries),
    )]);
    let repo_tag = format!("catalogs/{name}:latest");
    olmv1::testenv::registry::push_catalog_image(super::registry(), &repo_tag, &files)
        .await
        .expect("push catalog");
    format!("{}/{repo_tag}", super::registry().host())
}

pub async fn create_catalog(name: &str, image: &str) {
    let api: Api<ClusterCatalog> = Api::all(super::cluster().admin().await);
    let catalog: ClusterCatalog = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": name},
        "spec": {"source": {"type": "Image", "image": {"ref": image, "pollIntervalMinutes": 1}}},
    }))
    .expect("catalog");
    api.create(&PostParams::default(), &catalog)
        .await
        .expect("create catalog");
}

/// Grants `namespace/<ext>-installer` exactly the generated least-privilege RBAC for
/// the union of the given rendered bundles.
pub async fn grant_installer(namespace: &str, ext: &str, rendered: &[Vec<Value>]) {
    let all: Vec<Value> = rendered.iter().flatten().cloned().collect();
    let rbac = installer_rbac(&all, namespace, ext, BundledRbac::Include).expect("rbac");
    let objects: Vec<kube::api::DynamicObject> =
        [rbac.service_account, rbac.cluster_role, rbac.binding]
            .into_iter()
            .map(|v| serde_json::from_value(v).expect("object"))
            .collect();
    let admin = super::cluster().admin().await;
    olmv1::testenv::manifests::apply_objects(&admin, &objects)
        .await
        .expect("apply installer RBAC");
}

pub fn extension(name: &str, namespace: &str, package: &str, catalog: Value) -> ClusterExtension {
    let mut cat = catalog;
    cat["packageName"] = json!(package);
    serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": name},
        "spec": {
            "namespace": namespace,
            "serviceAccount": {"name": format!("{name}-installer")},
            "source": {"sourceType": "Catalog", "catalog": cat},
        },
    }))
    .expect("extension")
}

pub async fn wait_installed(
    api: &Api<ClusterExtension>,
    name: &str,
    version: &str,
) -> ClusterExtension {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let seen = api.get(name).await;
        if let Ok(e) = &seen {
            let installed = condition(e, "Installed").is_some_and(|c| c.status == "True");
            let v = e.status.as_ref().and_then(|s| s.install.as_ref());
            if installed && v.is_some_and(|i| i.bundle.version == version) {
                return e.clone();
            }
        }
        if std::time::Instant::now() > deadline {
            // What the extension said last: why it is not installed.
            let last = match seen {
                Ok(e) => e
                    .status
                    .map(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .map(|c| format!("\n  {} {} {}: {}", c.type_, c.status, c.reason, c.message))
                    .collect::<String>(),
                Err(e) => e.to_string(),
            };
            panic!("timed out after 120s waiting for {name} installed at {version}; last: {last}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

pub async fn wait_progressing_message(
    api: &Api<ClusterExtension>,
    name: &str,
    needle: &str,
) -> ClusterExtension {
    let last = std::sync::Mutex::new(None);
    let found = tokio::time::timeout(std::time::Duration::from_secs(90), async {
        loop {
            if let Ok(e) = api.get(name).await
                && let Some(p) = condition(&e, "Progressing")
            {
                if p.message.contains(needle) {
                    return e;
                }
                if let Ok(mut l) = last.lock() {
                    *l = Some(format!("{} {}: {}", p.status, p.reason, p.message));
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    })
    .await;
    found.unwrap_or_else(|_| {
        let last = last.lock().ok().and_then(|l| l.clone());
        panic!(
            "timed out after 90s waiting for {name} Progressing to mention {needle:?}; last Progressing: {}",
            last.unwrap_or_else(|| "none".into())
        )
    })
}

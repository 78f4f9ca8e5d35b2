//! Drift correction end to end (docs/reference/api-and-status.md A5, §3): watches on the managed kinds — shared
//! ones run as the controller for the kinds config/rbac lets it watch (Deployments, CRDs,
//! ...), the extension's own run as its installer ServiceAccount for the others
//! (ConfigMaps) — restore deleted or edited objects promptly, while fields set by others
//! survive the re-apply, and nothing reconciles at idle.
//!
//! The catalog is created without polling so that no catalog status change re-reconciles
//! the extension: only the drift watches can restore what is deleted here.

use crate::support;

use support::extensions::{grant_installer, publish, wait_installed};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension};
use serde_json::json;
use std::time::{Duration, Instant};
use support::bundles::{self, BundleSpec};

const RESTORE_LIMIT: Duration = Duration::from_secs(10);
const RESTART_ANNOTATION: &str = "kubectl.kubernetes.io/restartedAt";

/// A ClusterCatalog that is not polled.
async fn create_catalog(name: &str, image: &str) {
    let api: Api<ClusterCatalog> = Api::all(support::cluster().admin().await);
    let catalog: ClusterCatalog = serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
        "metadata": {"name": name},
        "spec": {"source": {"type": "Image", "image": {"ref": image}}},
    }))
    .expect("catalog");
    api.create(&PostParams::default(), &catalog)
        .await
        .expect("create catalog");
}

fn extension(name: &str, namespace: &str, package: &str) -> ClusterExtension {
    serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": name},
        "spec": {
            "namespace": namespace,
            "serviceAccount": {"name": format!("{name}-installer")},
            "source": {"sourceType": "Catalog", "catalog": {"packageName": package}},
        },
    }))
    .expect("extension")
}

fn image_of(d: &Deployment) -> Option<String> {
    d.spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .clone()
}

fn template_annotation(d: &Deployment, key: &str) -> Option<String> {
    d.spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(key)
        .cloned()
}

/// Polls (every 100 ms) until `check` holds, returns how long it took; panics after
/// [`RESTORE_LIMIT`].
async fn restored_within<F, Fut>(what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return start.elapsed();
        }
        assert!(
            start.elapsed() <= RESTORE_LIMIT,
            "{what} not restored within {RESTORE_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn drift_is_corrected_promptly_and_foreign_fields_survive() {
    let drift = &support::controller().observers.drift;
    let admin = support::cluster().admin().await;
    let package = support::unique("drift");
    let ns = support::namespace(&admin, "drift").await;
    let name = support::unique("ext");

    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.extra_configmap = true;
    grant_installer(&ns, &name, &[bundles::render(&v1, &ns)]).await;
    let catalog_name = support::unique("cat");
    let image = publish(&catalog_name, &package, std::slice::from_ref(&v1)).await;
    create_catalog(&catalog_name, &image).await;

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(&PostParams::default(), &extension(&name, &ns, &package))
        .await
        .expect("create");
    wait_installed(&api, &name, "1.0.0").await;
    assert!(
        drift.shared_watches() >= 2,
        "shared watches (as the controller) on Deployments and CRDs: {}",
        drift.shared_watches()
    );
    assert!(
        drift.own_watches() >= 1,
        "the extension's own watch (as its installer) on ConfigMaps: {}",
        drift.own_watches()
    );

    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let deployment = v1.deployment_name();
    let original = deployments.get(&deployment).await.expect("deployment");
    let our_image = image_of(&original).expect("image");
    let original_uid = original.uid();

    // Idle first: nothing changes, so nothing triggers (status updates of the
    // Deployment by kube-controller-manager are no drift).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = drift.triggers();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(drift.triggers(), before, "reconcile storm at idle");

    // 0. A catalog change that resolves to the installed bundle again (here: a label)
    // pulls, renders and applies nothing while nothing drifted.
    let skipped = drift.skipped_installs();
    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());
    catalogs
        .patch(
            &catalog_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .expect("label the catalog");
    support::eventually(30, "the re-resolution to skip the install", || async {
        (drift.skipped_installs() > skipped).then_some(())
    })
    .await;
    let after = deployments.get(&deployment).await.expect("deployment");
    assert_eq!(
        after.resource_version(),
        original.resource_version(),
        "nothing was applied"
    );

    // 1. Deleting the managed Deployment restores it.
    deployments
        .delete(&deployment, &DeleteParams::default())
        .await
        .expect("delete deployment");
    let took = restored_within("deleted Deployment", || async {
        deployments
            .get_opt(&deployment)
            .await
            .ok()
            .flatten()
            .is_some_and(|d| d.uid() != original_uid)
    })
    .await;
    eprintln!("deleted Deployment restored in {took:?}");
    assert!(
        drift.triggers() > before,
        "restored through a drift trigger"
    );

    // 2. Editing the container image restores it.
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "manager", "image": "example.com/tampered:6.6.6"}
    ]}}}});
    deployments
        .patch(
            &deployment,
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
        .expect("edit image");
    let took = restored_within("edited image", || async {
        deployments
            .get(&deployment)
            .await
            .ok()
            .and_then(|d| image_of(&d))
            .as_deref()
            == Some(our_image.as_str())
    })
    .await;
    eprintln!("edited image restored in {took:?}");

    // 3. An extra label and a restartedAt annotation (kubectl rollout restart) survive
    // a re-apply, here caused by editing the image in the same patch.
    let restarted = "2026-01-01T00:00:00Z";
    let patch = json!({
        "metadata": {"labels": {"team": "blue"}},
        "spec": {"template": {
            "metadata": {"annotations": {RESTART_ANNOTATION: restarted}},
            "spec": {"containers": [{"name": "manager", "image": "example.com/tampered:7.7.7"}]},
        }},
    });
    deployments
        .patch(
            &deployment,
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
        .expect("edit labels, annotation and image");
    restored_within("image edited together with foreign fields", || async {
        deployments
            .get(&deployment)
            .await
            .ok()
            .and_then(|d| image_of(&d))
            .as_deref()
            == Some(our_image.as_str())
    })
    .await;
    let d = deployments.get(&deployment).await.expect("deployment");
    assert_eq!(
        d.labels().get("team").map(String::as_str),
        Some("blue"),
        "extra label survives"
    );
    assert_eq!(
        template_annotation(&d, RESTART_ANNOTATION).as_deref(),
        Some(restarted),
        "restartedAt survives"
    );
    assert_eq!(
        d.labels()
            .get("olm.operatorframework.io/owner-name")
            .map(String::as_str),
        Some(name.as_str()),
        "ownership labels kept"
    );

    // 4. A namespaced ConfigMap and a cluster-scoped CRD are restored too.
    let cm = format!("{package}-extra");
    let cm_uid = configmaps.get(&cm).await.expect("configmap").uid();
    configmaps
        .delete(&cm, &DeleteParams::default())
        .await
        .expect("delete configmap");
    let took = restored_within("deleted ConfigMap", || async {
        configmaps
            .get_opt(&cm)
            .await
            .ok()
            .flatten()
            .is_some_and(|c| c.uid() != cm_uid)
    })
    .await;
    eprintln!("deleted ConfigMap restored in {took:?}");

    let crd = v1.crd_name();
    let crd_uid = crds.get(&crd).await.expect("crd").uid();
    crds.delete(&crd, &DeleteParams::default())
        .await
        .expect("delete crd");
    let took = restored_within("deleted CRD", || async {
        crds.get_opt(&crd)
            .await
            .ok()
            .flatten()
            .is_some_and(|c| c.uid() != crd_uid)
    })
    .await;
    eprintln!("deleted CRD restored in {took:?}");

    // Settled again: no storm after corrections either.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let settled = drift.triggers();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        drift.triggers(),
        settled,
        "reconcile storm after corrections"
    );

    // Uninstall stops the extension's watches and nothing is restored.
    let followed = drift.followed();
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete extension");
    support::eventually(60, "extension gone", || async {
        api.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(
        drift.followed() < followed,
        "the extension no longer followed after uninstall ({} -> {})",
        followed,
        drift.followed()
    );
    assert!(
        deployments
            .get_opt(&deployment)
            .await
            .expect("get")
            .is_none(),
        "uninstalled Deployment stays deleted"
    );
}

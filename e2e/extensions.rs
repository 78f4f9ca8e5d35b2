//! The ClusterExtension reconciler end to end: real kube-apiserver (RBAC enforced) and
//! kube-controller-manager, real registry, the controller as its own ServiceAccount,
//! bundle content applied as the installer ServiceAccount.

use crate::support;

use support::extensions::{
    condition, create_catalog, extension, grant_installer, publish, wait_installed,
    wait_progressing_message,
};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use olmv1::api::ClusterExtension;
use olmv1::preflight::permissions::rbac::{BundledRbac, installer_rbac};
use serde_json::json;
use support::bundles::{self, BundleSpec};

#[tokio::test]
async fn install_upgrade_with_pruning_and_uninstall() {
    support::controller();
    let admin = support::cluster().admin().await;
    let package = support::unique("pkg");
    let ns = support::namespace(&admin, "inst").await;
    let name = support::unique("ext");

    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.extra_configmap = true;
    let mut v2 = BundleSpec::new(&package, "1.1.0");
    v2.replaces = Some(v1.bundle_name());
    grant_installer(
        &ns,
        &name,
        &[bundles::render(&v1, &ns), bundles::render(&v2, &ns)],
    )
    .await;

    let catalog_name = support::unique("cat");
    let image = publish(&catalog_name, &package, &[v1.clone()]).await;
    create_catalog(&catalog_name, &image).await;

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, &package, json!({})),
    )
    .await
    .expect("create");
    wait_installed(&api, &name, "1.0.0").await;
    // The other tests of this file create catalogs meanwhile: while one is not Serving
    // yet, a reconcile of this extension reports Retrying (`catalog "…" is not being
    // served`, as upstream does), until that catalog serves.
    let e = support::eventually(120, "Progressing=Succeeded", || async {
        let e = api.get(&name).await.ok()?;
        (condition(&e, "Progressing")?.reason == "Succeeded").then_some(e)
    })
    .await;

    // Status as the seed documents it.
    let installed = condition(&e, "Installed").expect("installed");
    assert_eq!(installed.reason, "Succeeded");
    assert!(
        installed.message.starts_with("Installed bundle ")
            && installed.message.ends_with(" successfully"),
        "{}",
        installed.message
    );
    assert!(
        installed.message.contains("@sha256:"),
        "digest-pinned: {}",
        installed.message
    );
    let progressing = condition(&e, "Progressing").expect("progressing");
    assert_eq!(
        (
            progressing.status.as_str(),
            progressing.reason.as_str(),
            progressing.message.as_str()
        ),
        ("True", "Succeeded", "Desired state reached")
    );
    for t in [
        "Deprecated",
        "PackageDeprecated",
        "ChannelDeprecated",
        "BundleDeprecated",
    ] {
        assert_eq!(
            condition(&e, t).map(|c| c.status),
            Some("False".to_string()),
            "{t}"
        );
    }
    let status = e.status.clone().expect("status");
    assert_eq!(
        status.install.expect("install").bundle.name,
        v1.bundle_name()
    );
    assert_eq!(status.observed_generation, e.metadata.generation);
    assert!(
        e.finalizers()
            .iter()
            .any(|f| f == "olm.operatorframework.io/cleanup-unpack-cache")
    );

    // The objects exist, labelled and owned.
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let d = deployments
        .get(&v1.deployment_name())
        .await
        .expect("deployment");
    assert_eq!(
        d.labels().get("olm.operatorframework.io/owner-name"),
        Some(&name)
    );
    assert_eq!(
        d.labels()
            .get("olm.operatorframework.io/owner-kind")
            .map(String::as_str),
        Some("ClusterExtension")
    );
    let owner = d
        .owner_references()
        .first()
        .cloned()
        .expect("owner reference");
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("ClusterExtension", name.as_str(), Some(true))
    );
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    crds.get(&v1.crd_name()).await.expect("CRD installed");
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    configmaps
        .get(&format!("{package}-extra"))
        .await
        .expect("extra ConfigMap of v1");

    // A new catalog image on the same tag: the extension upgrades along `replaces`, and
    // the ConfigMap that v2 dropped is pruned.
    publish(&catalog_name, &package, &[v1.clone(), v2.clone()]).await;
    wait_installed(&api, &name, "1.1.0").await;
    support::eventually(60, "v1's ConfigMap pruned", || async {
        configmaps
            .get_opt(&format!("{package}-extra"))
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let d = deployments
        .get(&v2.deployment_name())
        .await
        .expect("deployment");
    let image = d
        .spec
        .and_then(|s| s.template.spec)
        .map(|s| s.containers[0].image.clone().unwrap_or_default());
    assert_eq!(
        image.as_deref(),
        Some(format!("example.com/{package}:1.1.0").as_str())
    );

    // Uninstall removes everything, CRD included, then the ClusterExtension goes away.
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    support::eventually(120, "extension gone", || async {
        api.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(
        deployments
            .get_opt(&v2.deployment_name())
            .await
            .expect("get")
            .is_none(),
        "deployment removed"
    );
    assert!(
        crds.get_opt(&v1.crd_name()).await.expect("get").is_none(),
        "CRD removed"
    );
}

#[tokio::test]
async fn missing_installer_service_account_is_reported() {
    support::controller();
    let admin = support::cluster().admin().await;
    let ns = support::namespace(&admin, "nosa").await;
    let name = support::unique("nosa");
    let api: Api<ClusterExtension> = Api::all(admin);
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, "whatever", json!({})),
    )
    .await
    .expect("create");
    let e = wait_progressing_message(
        &api,
        &name,
        "operation cannot proceed due to the following validation error(s)",
    )
    .await;
    let progressing = condition(&e, "Progressing").expect("progressing");
    assert_eq!(
        (progressing.status.as_str(), progressing.reason.as_str()),
        ("True", "Retrying")
    );
    assert!(
        progressing.message.contains(&format!(
            "service account \"{name}-installer\" not found in namespace \"{ns}\": unable to authenticate with the Kubernetes cluster."
        )),
        "{}",
        progressing.message
    );
    assert_eq!(
        condition(&e, "Installed").map(|c| c.status),
        Some("Unknown".to_string())
    );
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    support::eventually(60, "extension without an account deleted", || async {
        api.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn permission_preflight_lists_missing_rules_and_retries_when_granted() {
    support::controller();
    let admin = support::cluster().admin().await;
    let package = support::unique("perm");
    let ns = support::namespace(&admin, "perm").await;
    let name = support::unique("perm");
    let v1 = BundleSpec::new(&package, "1.0.0");
    let rendered = bundles::render(&v1, &ns);

    // Everything but `create` on deployments.
    let mut rbac = installer_rbac(&rendered, &ns, &name, BundledRbac::Include).expect("rbac");
    let rules = rbac.cluster_role["rules"].as_array_mut().expect("rules");
    for rule in rules.iter_mut() {
        if rule["resources"] == json!(["deployments"])
            && let Some(verbs) = rule["verbs"].as_array_mut()
        {
            verbs.retain(|v| v != "create");
        }
    }
    let objects: Vec<kube::api::DynamicObject> = [
        rbac.service_account.clone(),
        rbac.cluster_role.clone(),
        rbac.binding.clone(),
    ]
    .into_iter()
    .map(|v| serde_json::from_value(v).expect("object"))
    .collect();
    olmv1::testenv::manifests::apply_objects(&admin, &objects)
        .await
        .expect("apply");

    let catalog_name = support::unique("permcat");
    let image = publish(&catalog_name, &package, std::slice::from_ref(&v1)).await;
    create_catalog(&catalog_name, &image).await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, &package, json!({})),
    )
    .await
    .expect("create");
    let e = wait_progressing_message(&api, &name, "pre-authorization failed").await;
    let message = condition(&e, "Progressing").expect("progressing").message;
    assert!(
        message.contains(&format!("Namespace:\"{ns}\" APIGroups:[apps] Resources:[deployments] ResourceNames:[] Verbs:[create]")),
        "{message}"
    );
    assert!(
        message
            .lines()
            .filter(|l| l.starts_with("  Namespace:"))
            .count()
            == 1,
        "exactly one missing rule: {message}"
    );
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    assert!(
        deployments
            .get_opt(&v1.deployment_name())
            .await
            .expect("get")
            .is_none(),
        "nothing applied"
    );
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    assert!(
        crds.get_opt(&v1.crd_name()).await.expect("get").is_none(),
        "nothing applied"
    );

    // Granting the rule: installed promptly (RBAC changes re-trigger the reconcile).
    grant_installer(&ns, &name, &[rendered]).await;
    let started = std::time::Instant::now();
    wait_installed(&api, &name, "1.0.0").await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
}

#[tokio::test]
async fn non_successor_is_rejected_under_catalog_provided_and_allowed_when_self_certified() {
    support::controller();
    let admin = support::cluster().admin().await;
    let package = support::unique("edge");
    let ns = support::namespace(&admin, "edge").await;
    let name = support::unique("edge");
    let v1 = BundleSpec::new(&package, "1.0.0");
    let v2 = BundleSpec::new(&package, "2.0.0"); // no replaces: not a successor of 1.0.0
    grant_installer(
        &ns,
        &name,
        &[bundles::render(&v1, &ns), bundles::render(&v2, &ns)],
    )
    .await;
    let catalog_name = support::unique("edgecat");
    let image = publish(&catalog_name, &package, &[v1.clone(), v2.clone()]).await;
    create_catalog(&catalog_name, &image).await;

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, &package, json!({"version": "1.0.0"})),
    )
    .await
    .expect("create");
    wait_installed(&api, &name, "1.0.0").await;

    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"source": {"catalog": {"version": "2.0.0"}}}})),
    )
    .await
    .expect("patch");
    let e = wait_progressing_message(
        &api,
        &name,
        "error upgrading from currently installed version",
    )
    .await;
    let message = condition(&e, "Progressing").expect("progressing").message;
    assert_eq!(
        message,
        format!(
            "error upgrading from currently installed version \"1.0.0\": no bundles found for package \"{package}\" matching version \"2.0.0\""
        )
    );
    assert_eq!(
        condition(&e, "Installed").map(|c| c.status),
        Some("True".to_string()),
        "1.0.0 keeps running"
    );

    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"spec": {"source": {"catalog": {"upgradeConstraintPolicy": "SelfCertified"}}}}),
        ),
    )
    .await
    .expect("patch");
    wait_installed(&api, &name, "2.0.0").await;
    // Downgrade too.
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"source": {"catalog": {"version": "1.0.0"}}}})),
    )
    .await
    .expect("patch");
    wait_installed(&api, &name, "1.0.0").await;
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
}

#[tokio::test]
async fn without_service_account_and_default_installer_the_condition_says_what_to_set() {
    support::controller();
    let admin = support::cluster().admin().await;
    let ns = support::namespace(&admin, "nosa").await;
    let name = support::unique("ext");
    let mut ext = extension(&name, &ns, &support::unique("pkg"), json!({}));
    ext.spec.service_account = None;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(&PostParams::default(), &ext)
        .await
        .expect("YAML without serviceAccount is accepted");
    let e = wait_progressing_message(&api, &name, "spec.serviceAccount is not set").await;
    let progressing = condition(&e, "Progressing").expect("Progressing");
    assert_eq!(
        (progressing.status.as_str(), progressing.reason.as_str()),
        ("False", "Blocked")
    );
    assert!(
        progressing
            .message
            .contains("--default-installer-service-account=<namespace>/<name>"),
        "{}",
        progressing.message
    );
    let installed = condition(&e, "Installed").expect("Installed");
    assert_eq!(installed.status, "False");
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    support::eventually(60, "deleted", || async {
        api.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
}

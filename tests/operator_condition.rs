//! The operator's own say over its upgrades (docs/how-to/upgrade-control.md, "The
//! operator's own say") against the real control plane, registry and controller: without
//! the OperatorCondition CRD nothing of it is installed; once OLM v0's CRD (from the
//! cache `hack/build-olm-v0.sh --crds-only` fills) is served, an install creates the
//! OperatorCondition named like the bundle with its Role and RoleBinding and injects
//! `OPERATOR_CONDITION_NAME`; `Upgradeable=False` holds an upgrade with the operator's
//! message in Progressing; `True` lets it through within seconds (the drift watch
//! follows the hold: a status update triggers the reconcile); an OperatorCondition
//! removed while an upgrade is held lifts the hold (the next revision's
//! OperatorCondition is created).

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::api::{DeleteParams, PostParams};
use olmv1::api::ClusterExtension;
use serde_json::{Value, json};
use support::bundles::BundleSpec;
use support::extensions::{condition, create_catalog, extension, grant_installer, publish};
use support::extensions::{wait_installed, wait_progressing_message};

fn conditions_api(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("operators.coreos.com", "v2", "OperatorCondition");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "operatorconditions");
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// Applies OLM v0's OperatorCondition CRD (only that one) and waits until it is served.
async fn install_crd(admin: &kube::Client) {
    let file = support::olm_v0::dir()
        .join("crds")
        .join("0000_50_olm_00-operatorconditions.crd.yaml");
    let yaml = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: run hack/build-olm-v0.sh --crds-only once",
            file.display()
        )
    });
    let objects =
        olmv1::testenv::manifests::parse_objects("operatorconditions", &yaml).expect("parse CRD");
    olmv1::testenv::manifests::apply_objects(admin, &objects)
        .await
        .expect("apply CRD");
    let api = conditions_api(admin, "default");
    support::eventually(60, "OperatorCondition served", || async {
        api.list(&Default::default()).await.ok().map(|_| ())
    })
    .await;
}

fn env_of(d: &Deployment) -> Vec<(String, String)> {
    let spec = d.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    spec.map(|s| s.containers.as_slice())
        .unwrap_or_default()
        .iter()
        .flat_map(|c| c.env.clone().unwrap_or_default())
        .map(|e| (e.name, e.value.unwrap_or_default()))
        .collect()
}

/// Argo CD's health of `e` by contrib/argocd's health.lua, run by gopher-lua as Argo CD
/// does (hack/build-argo-health.sh builds the driver, as tests/argo_health.rs uses it).
fn argo_health(e: &ClusterExtension) -> (String, String) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let built = std::process::Command::new(root.join("hack/build-argo-health.sh"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run hack/build-argo-health.sh");
    assert!(built.status.success(), "hack/build-argo-health.sh failed");
    let driver = String::from_utf8_lossy(&built.stdout).trim().to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("object.json");
    std::fs::write(&file, serde_json::to_vec(e).expect("json")).expect("write object");
    let script = root.join(
        "contrib/argocd/resource_customizations/olm.operatorframework.io/ClusterExtension/health.lua",
    );
    let out = std::process::Command::new(driver)
        .arg("run")
        .arg(&script)
        .arg(&file)
        .output()
        .expect("run argo-health");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("health json");
    let text = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    (text("status"), text("message"))
}

async fn set_upgradeable(admin: &kube::Client, ns: &str, name: &str, status: &str) {
    let patch = json!({"status": {"conditions": [{
        "type": "Upgradeable", "status": status, "reason": "Migrating",
        "message": format!("data migration {status}"),
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    conditions_api(admin, ns)
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch OperatorCondition status");
}

#[tokio::test]
async fn the_operator_condition_holds_an_upgrade_until_the_operator_lifts_it() {
    support::controller();
    let admin = support::cluster().admin().await;
    let package = support::unique("opc");
    let ns = support::namespace(&admin, "opc").await;
    let name = support::unique("opc");
    let specs: Vec<BundleSpec> = ["1.0.0", "1.1.0", "1.2.0", "1.3.0"]
        .iter()
        .map(|v| BundleSpec::new(&package, v))
        .collect();
    let options = olmv1::bundle::RenderOptions {
        operator_condition: true,
        ..Default::default()
    };
    let rendered: Vec<Vec<Value>> = specs
        .iter()
        .map(|b| olmv1::testenv::demo::render_with_options(b, &ns, None, &options).expect("render"))
        .collect();
    grant_installer(&ns, &name, &rendered).await;
    let catalog = support::unique("opccat");
    let image = publish(&catalog, &package, &specs[..1]).await;
    create_catalog(&catalog, &image).await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let ext = extension(
        &name,
        &ns,
        &package,
        json!({"upgradeConstraintPolicy": "SelfCertified"}),
    );
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create");
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let roles: Api<Role> = Api::namespaced(admin.clone(), &ns);
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), &ns);
    let deployment = specs[0].deployment_name();

    // Without the CRD: nothing of it.
    wait_installed(&api, &name, "1.0.0").await;
    let d = deployments.get(&deployment).await.expect("deployment");
    assert!(
        !env_of(&d)
            .iter()
            .any(|(n, _)| n == "OPERATOR_CONDITION_NAME"),
        "{:?}",
        env_of(&d)
    );
    let v1 = specs[0].bundle_name();
    assert!(roles.get_opt(&v1).await.expect("role").is_none());

    // Served: the next install (the upgrade to 1.1.0; 1.0.0 has no OperatorCondition,
    // so nothing holds it) creates the OperatorCondition, its Role and RoleBinding and
    // the env var.
    install_crd(&admin).await;
    // The controller remembers a discovery answer for 10 s.
    tokio::time::sleep(std::time::Duration::from_secs(11)).await;
    publish(&catalog, &package, &specs[..2]).await;
    wait_installed(&api, &name, "1.1.0").await;
    let v11 = specs[1].bundle_name();
    let conditions = conditions_api(&admin, &ns);
    let oc = conditions.get(&v11).await.expect("OperatorCondition");
    assert_eq!(
        oc.data["spec"]["deployments"],
        json!([deployment]),
        "{:?}",
        oc.data
    );
    let d = deployments.get(&deployment).await.expect("deployment");
    assert!(
        env_of(&d).contains(&("OPERATOR_CONDITION_NAME".to_string(), v11.clone())),
        "{:?}",
        env_of(&d)
    );
    let role = roles.get(&v11).await.expect("role");
    let rule = &role.rules.unwrap_or_default()[0];
    assert_eq!(rule.resource_names.as_deref(), Some(&[v11.clone()][..]));
    let binding = bindings.get(&v11).await.expect("role binding");
    assert_eq!(binding.role_ref.name, v11);

    // Upgradeable=False: 1.2.0 waits, with the operator's message.
    set_upgradeable(&admin, &ns, &v11, "False").await;
    publish(&catalog, &package, &specs[..3]).await;
    let e = wait_progressing_message(&api, &name, "data migration False").await;
    let progressing = condition(&e, "Progressing").expect("progressing");
    assert_eq!(progressing.reason, "NotUpgradeable");
    assert_eq!(progressing.status, "True");
    assert!(
        progressing.message.contains("the upgrade to 1.2.0 (")
            && progressing.message.contains("is held by the operator"),
        "{}",
        progressing.message
    );
    let available = condition(&e, "UpgradeAvailable").expect("notice");
    assert_eq!(available.reason, "NotUpgradeable");
    let installed = e.status.as_ref().and_then(|s| s.install.as_ref());
    assert_eq!(installed.map(|i| i.bundle.version.as_str()), Some("1.1.0"));
    assert_eq!(
        argo_health(&e),
        ("Healthy".to_string(), progressing.message.clone()),
        "contrib/argocd's health.lua on the live object"
    );

    // True: the upgrade proceeds at once — the status update changes the hold's verdict,
    // which the drift watch on the OperatorCondition turns into a reconcile (without it,
    // only the 10-minute safety re-check would see it).
    let lifted = std::time::Instant::now();
    set_upgradeable(&admin, &ns, &v11, "True").await;
    let v12 = specs[2].bundle_name();
    support::eventually(
        5,
        "the upgrade to 1.2.0 started (the event path)",
        || async {
            let applied = conditions.get_opt(&v12).await.ok()?.is_some();
            let e = api.get(&name).await.ok()?;
            let reason = condition(&e, "Progressing").map(|c| c.reason);
            (applied || reason.as_deref() != Some("NotUpgradeable")).then_some(())
        },
    )
    .await;
    eprintln!("hold lifted -> upgrade started in {:?}", lifted.elapsed());
    wait_installed(&api, &name, "1.2.0").await;
    support::eventually(60, "the old OperatorCondition pruned", || async {
        conditions.get_opt(&v11).await.ok()?.is_none().then_some(())
    })
    .await;

    // An OperatorCondition removed while an upgrade is held: the hold is lifted and the
    // next revision's OperatorCondition is created.
    set_upgradeable(&admin, &ns, &v12, "False").await;
    publish(&catalog, &package, &specs[..4]).await;
    wait_progressing_message(&api, &name, "the upgrade to 1.3.0").await;
    conditions
        .delete(&v12, &DeleteParams::default())
        .await
        .expect("delete OperatorCondition");
    wait_installed(&api, &name, "1.3.0").await;
    let v13 = specs[3].bundle_name();
    support::eventually(60, "the OperatorCondition of 1.3.0", || async {
        conditions.get_opt(&v13).await.ok()?.map(|_| ())
    })
    .await;
    let e = api.get(&name).await.expect("get");
    let progressing = condition(&e, "Progressing").expect("progressing");
    assert_eq!(progressing.reason, "Succeeded", "{}", progressing.message);
}

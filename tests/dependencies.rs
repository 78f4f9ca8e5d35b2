//! Bundle dependencies end to end (docs/concepts/dependencies.md), on the real
//! kube-apiserver with the controller running as its shipped identity: a bundle that
//! requires another package (`olm.package.required`) and that package's CRD
//! (`olm.gvk.required`) is refused with upstream's message plus olmv1's naming of each
//! missing dependency and what satisfies it; `olmv1 resolve --with-dependencies` prints
//! the dependency's ClusterExtension with its namespace and installer RBAC, which
//! applies as is; once the dependency is installed, the dependent installs. With the
//! opt-in `olm.operatorframework.io/install-dependencies: "true"` the controller creates
//! the dependency ClusterExtension itself (labelled as the dependent's), and deleting
//! the dependent leaves it installed and says so in an Event.

use crate::support;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use olmv1::api::ClusterExtension;
use serde_json::{Value, json};
use support::bundles::{self, BundleSpec};
use support::extensions::{
    create_catalog, extension, grant_installer, publish, wait_installed, wait_progressing_message,
};

fn olmv1_cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_olmv1"))
        .args(args)
        .env("KUBECONFIG", &support::cluster().admin_kubeconfig)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run olmv1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_dependencies_are_named_then_installed_from_the_printed_set() {
    let admin = support::cluster().admin().await;
    let base = BundleSpec::new(&support::unique("depbase"), "1.0.0");
    let mut app = BundleSpec::new(&support::unique("depapp"), "1.0.0");
    app.extra_properties = vec![
        json!({"type": "olm.package.required",
            "value": {"packageName": base.package, "versionRange": ">=1.0.0"}}),
        json!({"type": "olm.gvk.required",
            "value": {"group": base.group(), "version": "v1", "kind": "Widget"}}),
    ];
    let base_catalog = support::unique("depbasecat");
    let app_catalog = support::unique("depappcat");
    let image = publish(&base_catalog, &base.package, std::slice::from_ref(&base)).await;
    create_catalog(&base_catalog, &image).await;
    let image = publish(&app_catalog, &app.package, std::slice::from_ref(&app)).await;
    create_catalog(&app_catalog, &image).await;
    support::controller();

    // (a) Nothing installed: upstream's refusal, then what is missing and what satisfies it.
    let ns = support::namespace(&admin, "depapp").await;
    let name = support::unique("depapp");
    grant_installer(&ns, &name, &[bundles::render(&app, &ns)]).await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    api.create(
        &PostParams::default(),
        &extension(&name, &ns, &app.package, json!({})),
    )
    .await
    .expect("create dependent");
    let bundle = format!("{}.v1.0.0", app.package);
    let upstream = format!(
        "validating bundle \"{bundle}\": bundle \"{bundle}\" has a dependency declared via property \"olm.package.required\" which is currently not supported"
    );
    let e = wait_progressing_message(&api, &name, &upstream).await;
    let message = support::extensions::condition(&e, "Progressing")
        .expect("Progressing")
        .message;
    assert!(message.starts_with(&upstream), "{message}");
    for needle in [
        format!(
            "Missing dependencies: package \"{}\" in range \">=1.0.0\" (satisfied by package \"{}\" version \">=1.0.0\" from catalog \"{base_catalog}\" channel \"stable\"",
            base.package, base.package
        ),
        format!(
            "GVK {}/v1 Widget (satisfied by package \"{}\"",
            base.group(),
            base.package
        ),
    ] {
        assert!(message.contains(&needle), "{needle}\nnot in\n{message}");
    }

    // (c) The printed set applies as is and names the dependency's package.
    let dep_ns = support::unique("depns");
    let cache = tempfile::tempdir().expect("tempdir");
    let host = support::registry().host().to_string();
    let out = olmv1_cli(&[
        "resolve",
        "--catalog",
        &app_catalog,
        "--catalog",
        &base_catalog,
        "--package",
        &app.package,
        "--with-dependencies",
        "--dependency-namespace",
        &dep_ns,
        "--insecure-registry",
        &host,
        "--bundle-cache-dir",
        cache.path().to_str().expect("utf-8"),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<Value> =
        olmv1::yaml::from_multiple(&stdout, serde_saphyr::Options::default()).expect("YAML");
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ClusterExtension",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding"
        ],
        "{stdout}"
    );
    let ce = &docs[1];
    assert_eq!(ce["metadata"]["name"], json!(base.package));
    assert_eq!(ce["spec"]["namespace"], json!(dep_ns));
    assert_eq!(
        ce["spec"]["source"]["catalog"]["packageName"],
        json!(base.package)
    );
    assert_eq!(
        ce["spec"]["source"]["catalog"]["channels"],
        json!(["stable"])
    );
    assert_eq!(
        ce["spec"]["source"]["catalog"]["selector"]["matchLabels"]["olm.operatorframework.io/metadata.name"],
        json!(base_catalog)
    );
    assert_eq!(
        ce["metadata"]["labels"]["olm.operatorframework.io/dependency-of"],
        json!(bundle)
    );
    let objects: Vec<DynamicObject> = docs
        .into_iter()
        .map(|d| serde_json::from_value(d).expect("object"))
        .collect();
    olmv1::testenv::manifests::apply_objects(&admin, &objects)
        .await
        .expect("apply the printed set");

    // (b) The dependency installs from what was printed; then the dependent does.
    wait_installed(&api, &base.package, "1.0.0").await;
    let e = wait_installed(&api, &name, "1.0.0").await;
    let progressing = support::extensions::condition(&e, "Progressing").expect("Progressing");
    assert_eq!(progressing.reason, "Succeeded", "{}", progressing.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_opt_in_creates_dependencies_and_deleting_the_dependent_leaves_them() {
    let admin = support::cluster().admin().await;
    let base = BundleSpec::new(&support::unique("optbase"), "1.0.0");
    let mut app = BundleSpec::new(&support::unique("optapp"), "1.0.0");
    app.extra_properties = vec![
        json!({"type": "olm.constraint", "value": {"all": {"constraints": [
        {"package": {"packageName": base.package, "versionRange": ">=1.0.0"}}]}}}),
    ];
    let base_catalog = support::unique("optbasecat");
    let app_catalog = support::unique("optappcat");
    let image = publish(&base_catalog, &base.package, std::slice::from_ref(&base)).await;
    create_catalog(&base_catalog, &image).await;
    let image = publish(&app_catalog, &app.package, std::slice::from_ref(&app)).await;
    create_catalog(&app_catalog, &image).await;
    support::controller();

    let ns = support::namespace(&admin, "optapp").await;
    let name = support::unique("optapp");
    // One installer account for both: the dependency is created with the dependent's.
    grant_installer(&ns, &name, &[bundles::render(&app, &ns)]).await;
    // The dependency's own least-privilege RBAC (scoped to its name), bound to the
    // dependent's account.
    let rbac = olmv1::preflight::permissions::rbac::installer_rbac(
        &bundles::render(&base, &ns),
        &ns,
        &base.package,
        olmv1::preflight::permissions::rbac::BundledRbac::Include,
    )
    .expect("rbac");
    let mut binding = rbac.binding;
    binding["subjects"][0]["name"] = json!(format!("{name}-installer"));
    let objects: Vec<DynamicObject> = [rbac.cluster_role, binding]
        .into_iter()
        .map(|v| serde_json::from_value(v).expect("object"))
        .collect();
    olmv1::testenv::manifests::apply_objects(&admin, &objects)
        .await
        .expect("grant the dependency's RBAC");
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let mut ext = extension(&name, &ns, &app.package, json!({}));
    ext.metadata.annotations = Some(
        [(
            "olm.operatorframework.io/install-dependencies".to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create dependent");

    let dep = wait_installed(&api, &base.package, "1.0.0").await;
    assert_eq!(
        dep.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("olm.operatorframework.io/dependency-of")),
        Some(&name)
    );
    assert_eq!(dep.spec.namespace, ns);
    wait_installed(&api, &name, "1.0.0").await;

    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete dependent");
    let events: Api<Event> = Api::all(admin.clone());
    let message = support::eventually(90, "DependenciesLeft Event", || async {
        let list = events
            .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
            .await
            .ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("DependenciesLeft"))
            .and_then(|e| e.message)
    })
    .await;
    assert!(message.contains(&base.package), "{message}");
    support::eventually(90, "dependent gone", || async {
        api.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
    let still = api.get(&base.package).await.expect("dependency stays");
    assert!(still.metadata.deletion_timestamp.is_none());
}

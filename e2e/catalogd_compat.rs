//! Catalogs catalogd would serve although they break FBC invariants (docs/concepts/catalogs.md
//! §9.1 "What is accepted"): a package without `defaultChannel` whose channel also
//! names a missing bundle is stored and served (`Serving` True), one
//! `InvalidCatalogContent` Warning Event on the ClusterCatalog names both problems with
//! file and line, and a ClusterExtension that names a channel resolves and installs
//! from it.

use crate::support;

use kube::api::{Api, PostParams};
use olmv1::api::{ClusterCatalog, ClusterExtension, conditions};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use support::bundles::{self, BundleSpec};
use support::extensions::{create_catalog, extension, grant_installer, wait_installed};

#[tokio::test]
async fn invariant_violations_are_served_reported_and_installable() {
    support::controller();
    let admin = support::cluster().admin().await;
    let package = support::unique("nodef");
    let ns = support::namespace(&admin, "nodef").await;
    let name = support::unique("ext");
    let v1 = BundleSpec::new(&package, "1.0.0");
    grant_installer(&ns, &name, &[bundles::render(&v1, &ns)]).await;
    let image = bundles::push_bundle(&v1).await;
    let fbc = bundles::catalog_fbc(&package, &[(v1.clone(), image)]);
    let text = String::from_utf8(fbc).expect("utf-8");
    let mut docs: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    // Line 1: the package, without defaultChannel; line 2: its channel, also naming a
    // bundle that does not exist.
    assert_eq!(docs[0]["schema"], "olm.package");
    docs[0]
        .as_object_mut()
        .expect("object")
        .remove("defaultChannel");
    assert_eq!(docs[1]["schema"], "olm.channel");
    let missing = format!("{package}.v9.9.9");
    docs[1]["entries"]
        .as_array_mut()
        .expect("entries")
        .push(json!({"name": missing, "replaces": v1.bundle_name()}));
    let content: String = docs.iter().map(|d| format!("{d}\n")).collect();
    let file = format!("{package}/catalog.json");
    let catalog = support::unique("cat");
    let repo_tag = format!("catalogs/{catalog}:latest");
    olmv1::testenv::registry::push_catalog_image(
        support::registry(),
        &repo_tag,
        &BTreeMap::from([(file.clone(), content.into_bytes())]),
    )
    .await
    .expect("push catalog");
    create_catalog(
        &catalog,
        &format!("{}/{repo_tag}", support::registry().host()),
    )
    .await;

    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());
    support::eventually(90, &format!("{catalog} serving"), || async {
        let c = catalogs.get(&catalog).await.ok()?;
        let s = c.status.as_ref()?;
        let serving = conditions::find(&s.conditions, "Serving")?;
        let progressing = conditions::find(&s.conditions, "Progressing")?;
        (serving.status == "True"
            && serving.reason == "Available"
            && progressing.message
                == "Successfully unpacked and stored content from resolved source")
            .then_some(())
    })
    .await;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(admin.clone());
    let note = support::eventually(60, "InvalidCatalogContent event", || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items.into_iter().find_map(|e| {
            let regarding = e.regarding.as_ref()?;
            (regarding.name.as_deref() == Some(catalog.as_str())
                && e.reason.as_deref() == Some("InvalidCatalogContent")
                && e.type_.as_deref() == Some("Warning"))
            .then(|| e.note.clone().unwrap_or_default())
        })
    })
    .await;
    assert!(
        note.contains(&format!(
            "{file}:1: package {package:?} has no defaultChannel"
        )),
        "{note}"
    );
    assert!(note.contains(&format!("{file}:2")), "{note}");
    assert!(note.contains(&missing), "{note}");

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let ext = extension(
        &name,
        &ns,
        &package,
        json!({"channels": ["stable"], "selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": catalog}}}),
    );
    api.create(&PostParams::default(), &ext)
        .await
        .expect("create extension");
    wait_installed(&api, &name, "1.0.0").await;
}

//! More ClusterExtension scenarios end to end (docs/reference/api-and-status.md §2.1, §3, A3–A8):
//! version/channel selection, CRD upgrade safety, drift, collisions between two
//! extensions, uninstall options, a deleted catalog, Own/SingleNamespace config,
//! unsupported bundles, progressDeadlineMinutes and real bundles from the fixtures.
//! Real kube-apiserver (RBAC enforced) and kube-controller-manager, real registry, the
//! controller as its own ServiceAccount, bundle content applied as the installer.

use crate::support;

use support::extensions::{condition, create_catalog, extension, wait_progressing_message};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use olmv1::api::{ClusterCatalog, ClusterExtension};
use olmv1::preflight::permissions::rbac::{BundledRbac, installer_rbac};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use support::bundles::{self, BundleSpec};

const OWNER_NAME: &str = "olm.operatorframework.io/owner-name";

fn installed_version(e: &ClusterExtension) -> Option<String> {
    Some(e.status.as_ref()?.install.as_ref()?.bundle.version.clone())
}

/// Pushes every bundle, returns them with their digest-pinned references.
async fn push_all(bundles: &[BundleSpec]) -> Vec<(BundleSpec, String)> {
    let mut out = Vec::new();
    for b in bundles {
        out.push((b.clone(), bundles::push_bundle(b).await));
    }
    out
}

/// Pushes a catalog image with `files` (under `configs/`) as `catalogs/<name>:latest`.
async fn push_catalog(name: &str, files: BTreeMap<String, Vec<u8>>) -> String {
    let repo_tag = format!("catalogs/{name}:latest");
    olmv1::testenv::registry::push_catalog_image(support::registry(), &repo_tag, &files)
        .await
        .expect("push catalog");
    format!("{}/{repo_tag}", support::registry().host())
}

/// Publishes `bundles` in the `stable` channel of a fresh catalog image.
async fn publish(name: &str, package: &str, bundles: &[BundleSpec]) -> String {
    let entries = push_all(bundles).await;
    let files = BTreeMap::from([(
        format!("{package}/catalog.json"),
        bundles::catalog_fbc(package, &entries),
    )]);
    push_catalog(name, files).await
}

/// Grants `namespace/<ext>-installer` the generated least-privilege RBAC for the union
/// of the given rendered bundles.
async fn grant_installer(namespace: &str, ext: &str, rendered: &[Vec<Value>]) {
    let all: Vec<Value> = rendered.iter().flatten().cloned().collect();
    let rbac = installer_rbac(&all, namespace, ext, BundledRbac::Include).expect("rbac");
    apply_admin(&[rbac.service_account, rbac.cluster_role, rbac.binding]).await;
}

async fn apply_admin(objects: &[Value]) {
    let objects: Vec<DynamicObject> = objects
        .iter()
        .map(|v| serde_json::from_value(v.clone()).expect("object"))
        .collect();
    let admin = support::cluster().admin().await;
    // Discovery can fail for a moment while another test's CRD group goes away.
    let mut last = None;
    for _ in 0..20 {
        match olmv1::testenv::manifests::apply_objects(&admin, &objects).await {
            Ok(_) => return,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("apply as admin: {last:?}");
}

/// Only the installer ServiceAccount, without any permission.
async fn create_bare_installer(client: &Client, namespace: &str, ext: &str) {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": format!("{ext}-installer")}}))
            .expect("sa");
    api.create(&PostParams::default(), &sa)
        .await
        .expect("create installer account");
}

async fn create(api: &Api<ClusterExtension>, ext: &ClusterExtension) {
    api.create(&PostParams::default(), ext)
        .await
        .expect("create extension");
}

async fn merge_patch(api: &Api<ClusterExtension>, name: &str, patch: Value) {
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patch extension");
}

async fn wait_installed(
    api: &Api<ClusterExtension>,
    name: &str,
    version: &str,
) -> ClusterExtension {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let e = api.get(name).await.ok();
        if let Some(e) = &e
            && let (Some(installed), Some(progressing)) =
                (condition(e, "Installed"), condition(e, "Progressing"))
            && installed.status == "True"
            && progressing.reason == "Succeeded"
            && e.status.as_ref().and_then(|s| s.observed_generation) == e.metadata.generation
            && installed_version(e).as_deref() == Some(version)
        {
            return e.clone();
        }
        if Instant::now() > deadline {
            let status = e.and_then(|e| e.status);
            panic!("timed out after 120s waiting for {name} installed at {version}: {status:#?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn delete_and_wait(api: &Api<ClusterExtension>, name: &str) {
    api.delete(name, &DeleteParams::default())
        .await
        .expect("delete");
    support::eventually(120, &format!("{name} gone"), || async {
        api.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
}

fn pod_annotation(d: &Deployment, key: &str) -> Option<String> {
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

fn container_image(d: &Deployment) -> Option<String> {
    d.spec.as_ref()?.template.spec.as_ref()?.containers[0]
        .image
        .clone()
}

fn widgets(client: &Client, spec: &BundleSpec, namespace: &str) -> Api<DynamicObject> {
    widgets_like(client, &spec.group(), "v1", "Widget", "widgets", namespace)
}

fn widgets_like(
    client: &Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespace: &str,
) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// Events (events.k8s.io/v1) about ClusterExtension `name` with `reason`.
async fn events_about(client: &Client, name: &str, reason: &str) -> Vec<Event> {
    let api: Api<Event> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some("ClusterExtension") && r.name.as_deref() == Some(name)
                })
        })
        .collect()
}

/// A channel entry: the bundle and the bundle it replaces.
type ChannelEntry<'a> = (&'a BundleSpec, Option<&'a BundleSpec>);

/// FBC with explicit channels: `(channel, [(bundle, replaces)])`.
fn fbc(
    package: &str,
    default_channel: &str,
    channels: &[(&str, Vec<ChannelEntry<'_>>)],
    bundles: &[(BundleSpec, String)],
) -> Vec<u8> {
    let mut docs =
        vec![json!({"schema": "olm.package", "name": package, "defaultChannel": default_channel})];
    for (channel, entries) in channels {
        let entries: Vec<Value> = entries
            .iter()
            .map(|(b, replaces)| match replaces {
                Some(r) => json!({"name": b.bundle_name(), "replaces": r.bundle_name()}),
                None => json!({"name": b.bundle_name()}),
            })
            .collect();
        docs.push(json!({"schema": "olm.channel", "name": channel, "package": package, "entries": entries}));
    }
    for (b, image) in bundles {
        docs.push(json!({
            "schema": "olm.bundle", "name": b.bundle_name(), "package": package, "image": image,
            "properties": [
                {"type": "olm.package", "value": {"packageName": package, "version": b.version}},
                {"type": "olm.gvk", "value": {"group": b.group(), "kind": "Widget", "version": "v1"}}
            ]
        }));
    }
    docs.iter()
        .map(|d| format!("{d}\n"))
        .collect::<String>()
        .into_bytes()
}

/// A package with one installed extension; returns (admin, api, ns, name, v1).
struct Installed {
    admin: Client,
    api: Api<ClusterExtension>,
    ns: String,
    name: String,
    catalog: String,
    v1: BundleSpec,
}

/// Publishes `v1` (plus `more`, same catalog), grants the installer for all of them,
/// creates the extension pinned to nothing and waits until `v1` is installed.
async fn install_v1(prefix: &str, more: &[BundleSpec], catalog_filter: Value) -> Installed {
    support::controller();
    let admin = support::cluster().admin().await;
    let package = support::unique(prefix);
    let ns = support::namespace(&admin, prefix).await;
    let name = support::unique(prefix);
    let v1 = BundleSpec::new(&package, "1.0.0");
    let mut all = vec![v1.clone()];
    all.extend(more.iter().cloned().map(|mut b| {
        b.package = package.clone();
        b
    }));
    let rendered: Vec<Vec<Value>> = all.iter().map(|b| bundles::render(b, &ns)).collect();
    grant_installer(&ns, &name, &rendered).await;
    let catalog = support::unique(&format!("{prefix}cat"));
    let image = publish(&catalog, &package, &all).await;
    create_catalog(&catalog, &image).await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    create(&api, &extension(&name, &ns, &package, catalog_filter)).await;
    wait_installed(&api, &name, "1.0.0").await;
    Installed {
        admin,
        api,
        ns,
        name,
        catalog,
        v1,
    }
}

// 1. Version and channel selection.
#[tokio::test]
async fn selects_default_channel_pinned_version_range_and_channel_plus_range() {
    support::controller();
    let admin = support::cluster().admin().await;
    let package = support::unique("sel");
    let ns = support::namespace(&admin, "sel").await;
    let name = support::unique("sel");
    let v100 = BundleSpec::new(&package, "1.0.0");
    let v110 = BundleSpec::new(&package, "1.1.0");
    let v120 = BundleSpec::new(&package, "1.2.0");
    let v200 = BundleSpec::new(&package, "2.0.0");
    let all = [v100.clone(), v110.clone(), v120.clone(), v200.clone()];
    let rendered: Vec<Vec<Value>> = all.iter().map(|b| bundles::render(b, &ns)).collect();
    grant_installer(&ns, &name, &rendered).await;
    let pushed = push_all(&all).await;
    // stable (default): 1.0.0 → 1.1.0; fast: 1.0.0 → 1.1.0 → 1.2.0 → 2.0.0.
    let doc = fbc(
        &package,
        "stable",
        &[
            ("stable", vec![(&v100, None), (&v110, Some(&v100))]),
            (
                "fast",
                vec![
                    (&v100, None),
                    (&v110, Some(&v100)),
                    (&v120, Some(&v110)),
                    (&v200, Some(&v120)),
                ],
            ),
        ],
        &pushed,
    );
    let catalog = support::unique("selcat");
    let image = push_catalog(
        &catalog,
        BTreeMap::from([(format!("{package}/catalog.json"), doc)]),
    )
    .await;
    create_catalog(&catalog, &image).await;

    let api: Api<ClusterExtension> = Api::all(admin.clone());
    // SelfCertified so that every selection below is reachable from the previous one.
    create(
        &api,
        &extension(
            &name,
            &ns,
            &package,
            json!({"upgradeConstraintPolicy": "SelfCertified"}),
        ),
    )
    .await;
    // No channels: the latest of all channels (docs/concepts/resolution.md §4.2: "No channel filter ⇒ any
    // channel's entries are valid"; the package's defaultChannel plays no part).
    let e = wait_installed(&api, &name, "2.0.0").await;
    assert_eq!(
        e.status.and_then(|s| s.install).map(|i| i.bundle.name),
        Some(v200.bundle_name())
    );

    // A pinned version.
    merge_patch(
        &api,
        &name,
        json!({"spec": {"source": {"catalog": {"version": "1.0.0"}}}}),
    )
    .await;
    wait_installed(&api, &name, "1.0.0").await;

    // A range over all channels: the highest below 2.0.0.
    merge_patch(
        &api,
        &name,
        json!({"spec": {"source": {"catalog": {"version": ">=1.0.0, <2.0.0"}}}}),
    )
    .await;
    wait_installed(&api, &name, "1.2.0").await;

    // Channel + range: restricted to `stable`.
    merge_patch(
        &api,
        &name,
        json!({"spec": {"source": {"catalog": {"channels": ["stable"]}}}}),
    )
    .await;
    wait_installed(&api, &name, "1.1.0").await;

    // The default channel named explicitly, without a range: its head.
    merge_patch(
        &api,
        &name,
        json!({"spec": {"source": {"catalog": {"version": null}}}}),
    )
    .await;
    wait_installed(&api, &name, "1.1.0").await;
    // `fast` without a range: its head.
    merge_patch(
        &api,
        &name,
        json!({"spec": {"source": {"catalog": {"channels": ["fast"]}}}}),
    )
    .await;
    wait_installed(&api, &name, "2.0.0").await;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let d = deployments
        .get(&v200.deployment_name())
        .await
        .expect("deployment");
    assert_eq!(
        container_image(&d).as_deref(),
        Some(format!("example.com/{package}:2.0.0").as_str())
    );
    delete_and_wait(&api, &name).await;
}

// 2. CRD upgrade safety.
#[tokio::test]
async fn unsafe_crd_change_blocks_the_upgrade_until_enforcement_is_none() {
    support::controller();
    let admin = support::cluster().admin().await;
    let package = support::unique("crd");
    // v2's CRD drops `spec.color`, which v1's had.
    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.crd_spec_properties = json!({"size": {"type": "integer"}, "color": {"type": "string"}});
    let mut v2 = BundleSpec::new(&package, "1.1.0");
    v2.replaces = Some(v1.bundle_name());
    let ns = support::namespace(&admin, "crd").await;
    let name = support::unique("crd");
    grant_installer(
        &ns,
        &name,
        &[bundles::render(&v1, &ns), bundles::render(&v2, &ns)],
    )
    .await;
    let catalog = support::unique("crdcat");
    let image = publish(&catalog, &package, &[v1.clone(), v2.clone()]).await;
    create_catalog(&catalog, &image).await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    create(
        &api,
        &extension(&name, &ns, &package, json!({"version": "1.0.0"})),
    )
    .await;
    wait_installed(&api, &name, "1.0.0").await;

    merge_patch(
        &api,
        &name,
        json!({"spec": {"source": {"catalog": {"version": "1.1.0"}}}}),
    )
    .await;
    let e = wait_progressing_message(&api, &name, "validating upgrade for CRD").await;
    let progressing = condition(&e, "Progressing").expect("progressing");
    assert_eq!(progressing.status, "True");
    assert_eq!(progressing.reason, "Retrying");
    assert!(
        progressing.message.contains(&format!(
            "validating upgrade for CRD \"{}\": existingFieldRemoval: removed field : v1.^.spec.color",
            v1.crd_name()
        )),
        "{}",
        progressing.message
    );
    assert_eq!(installed_version(&e).as_deref(), Some("1.0.0"));
    assert_eq!(
        condition(&e, "Installed").map(|c| c.status).as_deref(),
        Some("True")
    );
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let d = deployments
        .get(&v1.deployment_name())
        .await
        .expect("v1's deployment still there");
    assert_eq!(
        container_image(&d).as_deref(),
        Some(format!("example.com/{package}:1.0.0").as_str())
    );
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let crd = crds.get(&v1.crd_name()).await.expect("crd");
    let props = serde_json::to_value(&crd.spec.versions[0].schema).expect("schema");
    assert!(
        props["openAPIV3Schema"]["properties"]["spec"]["properties"]["color"].is_object(),
        "the CRD was not changed: {props}"
    );

    merge_patch(
        &api,
        &name,
        json!({"spec": {"install": {"preflight": {"crdUpgradeSafety": {"enforcement": "None"}}}}}),
    )
    .await;
    wait_installed(&api, &name, "1.1.0").await;
    let crd = crds.get(&v1.crd_name()).await.expect("crd");
    let props = serde_json::to_value(&crd.spec.versions[0].schema).expect("schema");
    assert!(
        props["openAPIV3Schema"]["properties"]["spec"]["properties"]["color"].is_null(),
        "v2's CRD applied: {props}"
    );
    let events = support::eventually(30, "a CRDUpgradeSafety warning Event", || async {
        let events = events_about(&admin, &name, "CRDUpgradeSafety").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    let note = events[0].note.clone().unwrap_or_default();
    assert!(note.contains("removed field"), "{note}");
    delete_and_wait(&api, &name).await;
}

// 3a. Drift correction from watch events (docs/concepts/rendering.md A5).
#[tokio::test]
async fn deleted_managed_deployment_is_restored_without_a_trigger() {
    let s = install_v1("drift", &[], json!({})).await;
    // Let the reconciles that the install itself queued (status writes, RBAC events) run
    // out, so that only a drift trigger could restore the Deployment.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = Instant::now();
    let deployments: Api<Deployment> = Api::namespaced(s.admin.clone(), &s.ns);
    deployments
        .delete(&s.v1.deployment_name(), &DeleteParams::default())
        .await
        .expect("delete deployment");
    support::eventually(30, "the deployment restored", || async {
        deployments
            .get_opt(&s.v1.deployment_name())
            .await
            .ok()?
            .map(|_| ())
    })
    .await;
    eprintln!("restored after {:?}", started.elapsed());
}

// 3b. A re-apply restores what the bundle owns and keeps what others set.
#[tokio::test]
async fn reapply_restores_bundle_fields_and_keeps_fields_set_by_others() {
    let s = install_v1("reapply", &[], json!({})).await;
    let deployments: Api<Deployment> = Api::namespaced(s.admin.clone(), &s.ns);
    let dname = s.v1.deployment_name();
    let want_image = format!("example.com/{}:1.0.0", s.v1.package);
    let touch = |n: u32| {
        let api = s.api.clone();
        let name = s.name.clone();
        async move {
            merge_patch(
                &api,
                &name,
                json!({"metadata": {"annotations": {"test.example.com/touch": n.to_string()}}}),
            )
            .await
        }
    };

    // Edits as `kubectl` would make them: a foreign label, a rollout restart, and a
    // change to a field the bundle owns.
    let restarted = "2026-01-01T00:00:00Z";
    deployments
        .patch(
            &dname,
            &PatchParams {
                field_manager: Some("kubectl-edit".into()),
                ..Default::default()
            },
            &Patch::Strategic(json!({
                "metadata": {"labels": {"team.example.com/owner": "ops"}},
                "spec": {"template": {
                    "metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": restarted}},
                    "spec": {"containers": [{"name": "manager", "image": "example.com/hacked:1"}]}
                }}
            })),
        )
        .await
        .expect("edit deployment");

    // A re-apply, triggered by touching the extension: the image is restored, the
    // fields that others own are left alone.
    let started = Instant::now();
    let mut n = 0;
    let d = support::eventually(60, "the bundle's image restored", || {
        n += 1;
        let touch = touch(n);
        let deployments = deployments.clone();
        let dname = dname.clone();
        let want_image = want_image.clone();
        async move {
            touch.await;
            tokio::time::sleep(Duration::from_millis(900)).await;
            let d = deployments.get(&dname).await.ok()?;
            (container_image(&d).as_deref() == Some(want_image.as_str())).then_some(d)
        }
    })
    .await;
    eprintln!("re-apply restored the image after {:?}", started.elapsed());
    assert_eq!(
        d.labels().get("team.example.com/owner").map(String::as_str),
        Some("ops"),
        "a label set by someone else survives the re-apply"
    );
    assert_eq!(
        pod_annotation(&d, "kubectl.kubernetes.io/restartedAt").as_deref(),
        Some(restarted),
        "a rollout restart survives the re-apply"
    );
    assert_eq!(d.labels().get(OWNER_NAME), Some(&s.name));

    // A deleted Deployment is recreated by the next reconcile.
    deployments
        .delete(&dname, &DeleteParams::default())
        .await
        .expect("delete deployment");
    let mut n = 100;
    support::eventually(60, "the deleted deployment recreated", || {
        n += 1;
        let touch = touch(n);
        let deployments = deployments.clone();
        let dname = dname.clone();
        async move {
            touch.await;
            tokio::time::sleep(Duration::from_millis(900)).await;
            deployments.get_opt(&dname).await.ok()?.map(|_| ())
        }
    })
    .await;
    let e = wait_installed(&s.api, &s.name, "1.0.0").await;
    assert_eq!(
        condition(&e, "Progressing").map(|c| c.message).as_deref(),
        Some("Desired state reached")
    );
    support::eventually(30, "a DriftCorrected Event", || async {
        let events = events_about(&s.admin, &s.name, "DriftCorrected").await;
        (!events.is_empty()).then_some(())
    })
    .await;
    delete_and_wait(&s.api, &s.name).await;
}

// 4. Two extensions for the same package in the same namespace.
#[tokio::test]
async fn second_extension_for_the_same_package_reports_the_collision() {
    let s = install_v1("twin", &[], json!({})).await;
    let second = support::unique("twin2");
    grant_installer(&s.ns, &second, &[bundles::render(&s.v1, &s.ns)]).await;
    create(&s.api, &extension(&second, &s.ns, &s.v1.package, json!({}))).await;
    let e = wait_progressing_message(&s.api, &second, "refusing to take over").await;
    let message = condition(&e, "Progressing").expect("progressing").message;
    assert!(
        message.contains(&format!("(owned by ClusterExtension {:?})", s.name)),
        "{message}"
    );
    assert!(message.contains(&s.v1.deployment_name()), "{message}");
    assert!(message.contains(&s.v1.crd_name()), "{message}");
    assert_ne!(
        condition(&e, "Installed").map(|c| c.status).as_deref(),
        Some("True")
    );

    // The first one is undisturbed.
    let first = wait_installed(&s.api, &s.name, "1.0.0").await;
    assert_eq!(
        condition(&first, "Progressing")
            .map(|c| c.reason)
            .as_deref(),
        Some("Succeeded")
    );
    let deployments: Api<Deployment> = Api::namespaced(s.admin.clone(), &s.ns);
    let d = deployments
        .get(&s.v1.deployment_name())
        .await
        .expect("deployment");
    assert_eq!(d.labels().get(OWNER_NAME), Some(&s.name));
    assert!(
        d.owner_references().iter().all(|o| o.name == s.name),
        "{:?}",
        d.owner_references()
    );

    // Deleting the second does not touch the first's objects.
    delete_and_wait(&s.api, &second).await;
    deployments
        .get(&s.v1.deployment_name())
        .await
        .expect("deployment kept");
    delete_and_wait(&s.api, &s.name).await;
}

// 5a. Uninstall keeping the CRDs.
#[tokio::test]
async fn uninstall_with_keep_crds_keeps_the_crd_and_custom_resources() {
    let s = install_v1("keep", &[], json!({})).await;
    let widgets = widgets(&s.admin, &s.v1, &s.ns);
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{}/v1", s.v1.group()), "kind": "Widget",
        "metadata": {"name": "w1"}, "spec": {"size": 3}
    }))
    .expect("widget");
    widgets
        .create(&PostParams::default(), &widget)
        .await
        .expect("create widget");
    s.api
        .patch(
            &s.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "olm.operatorframework.io/keep-crds-on-uninstall": "true"
            }}})),
        )
        .await
        .expect("annotate");
    delete_and_wait(&s.api, &s.name).await;
    let deployments: Api<Deployment> = Api::namespaced(s.admin.clone(), &s.ns);
    assert!(
        deployments
            .get_opt(&s.v1.deployment_name())
            .await
            .expect("get")
            .is_none(),
        "the deployment is removed"
    );
    // Give garbage collection time to act on anything still owned by the extension.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let crds: Api<CustomResourceDefinition> = Api::all(s.admin.clone());
    let crd = crds.get(&s.v1.crd_name()).await.expect("CRD kept");
    assert!(
        crd.owner_references()
            .iter()
            .all(|o| o.kind != "ClusterExtension"),
        "kept CRD no longer owned: {:?}",
        crd.owner_references()
    );
    let w = widgets.get("w1").await.expect("custom resource kept");
    assert_eq!(w.data["spec"]["size"], json!(3));
    // Clean up the kept CRD so that other runs start fresh.
    let _ = crds
        .delete(&s.v1.crd_name(), &DeleteParams::default())
        .await;
}

// 5b. A deleted installer account does not block deletion.
#[tokio::test]
async fn deleted_installer_account_falls_back_to_garbage_collection() {
    let s = install_v1("gc", &[], json!({})).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(s.admin.clone(), &s.ns);
    accounts
        .delete(&format!("{}-installer", s.name), &DeleteParams::default())
        .await
        .expect("delete installer account");
    delete_and_wait(&s.api, &s.name).await;
    let deployments: Api<Deployment> = Api::namespaced(s.admin.clone(), &s.ns);
    let crds: Api<CustomResourceDefinition> = Api::all(s.admin.clone());
    support::eventually(
        90,
        "garbage collection of the extension's objects",
        || async {
            let d = deployments.get_opt(&s.v1.deployment_name()).await.ok()?;
            let c = crds.get_opt(&s.v1.crd_name()).await.ok()?;
            (d.is_none() && c.is_none()).then_some(())
        },
    )
    .await;
    assert!(
        !events_about(&s.admin, &s.name, "InstallerAccountMissing")
            .await
            .is_empty(),
        "an Event says the installer account is missing"
    );
}

// 6. The catalog is deleted.
#[tokio::test]
async fn deleted_catalog_keeps_the_installed_extension_running() {
    let s = install_v1("nocat", &[], json!({})).await;
    let catalogs: Api<ClusterCatalog> = Api::all(s.admin.clone());
    catalogs
        .delete(&s.catalog, &DeleteParams::default())
        .await
        .expect("delete catalog");
    support::eventually(60, "catalog gone", || async {
        catalogs
            .get_opt(&s.catalog)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    // Trigger a reconcile and let it finish.
    merge_patch(
        &s.api,
        &s.name,
        json!({"metadata": {"annotations": {"test.example.com/touch": "1"}}}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let e = s.api.get(&s.name).await.expect("get");
    let installed = condition(&e, "Installed").expect("installed");
    assert_eq!(installed.status, "True");
    assert_eq!(installed_version(&e).as_deref(), Some("1.0.0"));
    let progressing = condition(&e, "Progressing").expect("progressing");
    eprintln!("Progressing after catalog deletion: {progressing:?}");
    assert_eq!(
        (progressing.status.as_str(), progressing.reason.as_str()),
        ("True", "Succeeded")
    );
    assert_eq!(
        progressing.message,
        format!(
            "Desired state reached; no ClusterCatalog provides package {:?} any more: maintaining the installed bundle {:?} (version 1.0.0)",
            s.v1.package,
            s.v1.bundle_name()
        ),
        "Progressing says why"
    );
    let deployments: Api<Deployment> = Api::namespaced(s.admin.clone(), &s.ns);
    deployments
        .get(&s.v1.deployment_name())
        .await
        .expect("deployment still there");
    // Drift is still corrected from the record (the workload is maintained).
    deployments
        .delete(&s.v1.deployment_name(), &DeleteParams::default())
        .await
        .expect("delete deployment");
    let mut n = 1;
    support::eventually(60, "the deployment restored without a catalog", || {
        n += 1;
        let api = s.api.clone();
        let name = s.name.clone();
        let deployments = deployments.clone();
        let dname = s.v1.deployment_name();
        async move {
            merge_patch(
                &api,
                &name,
                json!({"metadata": {"annotations": {"test.example.com/touch": n.to_string()}}}),
            )
            .await;
            tokio::time::sleep(Duration::from_millis(900)).await;
            deployments.get_opt(&dname).await.ok()?.map(|_| ())
        }
    })
    .await;
    delete_and_wait(&s.api, &s.name).await;
}

// 7. Own/SingleNamespace through spec.config.inline.watchNamespace.
#[tokio::test]
async fn watch_namespace_config_selects_single_and_own_namespace() {
    support::controller();
    let admin = support::cluster().admin().await;
    let package = support::unique("wns");
    let ns = support::namespace(&admin, "wns").await;
    let target = support::namespace(&admin, "wnstarget").await;
    let name = support::unique("wns");
    let v1 = BundleSpec::new(&package, "1.0.0");
    let single = json!({"watchNamespace": target});
    let own = json!({"watchNamespace": ns});
    grant_installer(
        &ns,
        &name,
        &[
            bundles::render_with_config(&v1, &ns, Some(&single)),
            bundles::render_with_config(&v1, &ns, Some(&own)),
        ],
    )
    .await;
    let catalog = support::unique("wnscat");
    let image = publish(&catalog, &package, std::slice::from_ref(&v1)).await;
    create_catalog(&catalog, &image).await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let mut ext = extension(&name, &ns, &package, json!({}));
    ext.spec.config = Some(
        serde_json::from_value(json!({"configType": "Inline", "inline": single})).expect("config"),
    );
    create(&api, &ext).await;
    wait_installed(&api, &name, "1.0.0").await;

    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let d = deployments
        .get(&v1.deployment_name())
        .await
        .expect("deployment");
    assert_eq!(
        pod_annotation(&d, "olm.targetNamespaces").as_deref(),
        Some(target.as_str())
    );
    assert_eq!(
        pod_annotation(&d, "olm.operatorNamespace").as_deref(),
        Some(ns.as_str())
    );
    let owned = |client: Client, namespace: String| {
        let name = name.clone();
        async move {
            let lp = ListParams::default().labels(&format!("{OWNER_NAME}={name}"));
            let roles = Api::<Role>::namespaced(client.clone(), &namespace)
                .list(&lp)
                .await
                .expect("roles")
                .items;
            let bindings = Api::<RoleBinding>::namespaced(client, &namespace)
                .list(&lp)
                .await
                .expect("rolebindings")
                .items;
            (roles, bindings)
        }
    };
    let (roles, bindings) = owned(admin.clone(), target.clone()).await;
    assert_eq!(
        (roles.len(), bindings.len()),
        (1, 1),
        "Role+RoleBinding in the target namespace"
    );
    let rules = roles[0].rules.clone().unwrap_or_default();
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["configmaps".to_string()][..])
    );
    let subject = &bindings[0].subjects.as_ref().expect("subjects")[0];
    assert_eq!(
        (subject.name.as_str(), subject.namespace.as_deref()),
        (format!("{package}-sa").as_str(), Some(ns.as_str()))
    );
    let (roles, _) = owned(admin.clone(), ns.clone()).await;
    assert!(
        roles.is_empty(),
        "no Role in the install namespace: {roles:?}"
    );

    // OwnNamespace: the Roles move to the install namespace; the old ones are pruned.
    merge_patch(
        &api,
        &name,
        json!({"spec": {"config": {"inline": {"watchNamespace": ns}}}}),
    )
    .await;
    support::eventually(60, "olm.targetNamespaces = install namespace", || async {
        let d = deployments.get(&v1.deployment_name()).await.ok()?;
        (pod_annotation(&d, "olm.targetNamespaces").as_deref() == Some(ns.as_str())).then_some(())
    })
    .await;
    wait_installed(&api, &name, "1.0.0").await;
    let (roles, bindings) = owned(admin.clone(), ns.clone()).await;
    assert_eq!((roles.len(), bindings.len()), (1, 1));
    support::eventually(30, "the target namespace's Role pruned", || {
        let admin = admin.clone();
        let target = target.clone();
        async move {
            let (roles, bindings) = owned(admin, target).await;
            (roles.is_empty() && bindings.is_empty()).then_some(())
        }
    })
    .await;
    delete_and_wait(&api, &name).await;

    // An invalid watchNamespace: terminal InvalidConfiguration, nothing applied.
    let bad = support::unique("wnsbad");
    create_bare_installer(&admin, &ns, &bad).await;
    let mut ext = extension(&bad, &ns, &package, json!({}));
    ext.spec.config = Some(
        serde_json::from_value(
            json!({"configType": "Inline", "inline": {"watchNamespace": "Not_A_Namespace"}}),
        )
        .expect("config"),
    );
    create(&api, &ext).await;
    let e = wait_progressing_message(&api, &bad, "invalid ClusterExtension configuration").await;
    let progressing = condition(&e, "Progressing").expect("progressing");
    assert_eq!(
        (progressing.status.as_str(), progressing.reason.as_str()),
        ("False", "InvalidConfiguration")
    );
    assert!(
        progressing.message.starts_with(
            "invalid ClusterExtension configuration: invalid configuration: field \"watchNamespace\" must match pattern \""
        ),
        "{}",
        progressing.message
    );
    assert!(
        deployments
            .get_opt(&v1.deployment_name())
            .await
            .expect("get")
            .is_none(),
        "nothing applied"
    );
    delete_and_wait(&api, &bad).await;
}

// 8. Unsupported bundles.
#[tokio::test]
async fn dependency_in_catalog_is_reported_and_nothing_is_applied() {
    support::controller();
    let admin = support::cluster().admin().await;
    let package = support::unique("dep");
    let ns = support::namespace(&admin, "dep").await;
    let name = support::unique("dep");
    let mut v1 = BundleSpec::new(&package, "1.0.0");
    v1.extra_properties = vec![json!({
        "type": "olm.package.required",
        "value": {"packageName": "etcd", "versionRange": ">=0.9.0"}
    })];
    grant_installer(&ns, &name, &[bundles::render(&v1, &ns)]).await;
    let catalog = support::unique("depcat");
    let image = publish(&catalog, &package, std::slice::from_ref(&v1)).await;
    create_catalog(&catalog, &image).await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    create(&api, &extension(&name, &ns, &package, json!({}))).await;
    let e = wait_progressing_message(&api, &name, "which is currently not supported").await;
    let progressing = condition(&e, "Progressing").expect("progressing");
    assert!(
        progressing.message.contains(&format!(
            "bundle \"{}\" has a dependency declared via property \"olm.package.required\" which is currently not supported",
            v1.bundle_name()
        )),
        "{}",
        progressing.message
    );
    assert_ne!(
        condition(&e, "Installed").map(|c| c.status).as_deref(),
        Some("True")
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
    delete_and_wait(&api, &name).await;
}

// 9. progressDeadlineMinutes.
#[tokio::test]
async fn progress_deadline_exceeded_when_the_install_never_succeeds() {
    support::controller();
    let admin = support::cluster().admin().await;
    let package = support::unique("pdl");
    let ns = support::namespace(&admin, "pdl").await;
    let name = support::unique("pdl");
    let v1 = BundleSpec::new(&package, "1.0.0");
    create_bare_installer(&admin, &ns, &name).await; // no permissions at all
    let catalog = support::unique("pdlcat");
    let image = publish(&catalog, &package, std::slice::from_ref(&v1)).await;
    create_catalog(&catalog, &image).await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    // Only this test's catalog: a catalog another test has just created (not Serving
    // yet) would otherwise make resolution fail and change the "Last status".
    let selector =
        json!({"selector": {"matchLabels": {"olm.operatorframework.io/metadata.name": catalog}}});
    let mut ext = extension(&name, &ns, &package, selector);
    ext.spec.progress_deadline_minutes = Some(10);
    let started = Instant::now();
    create(&api, &ext).await;
    wait_progressing_message(&api, &name, "pre-authorization failed").await;
    let e = support::eventually(40, "ProgressDeadlineExceeded", || async {
        let e = api.get(&name).await.ok()?;
        (condition(&e, "Progressing")?.reason == "ProgressDeadlineExceeded").then_some(e)
    })
    .await;
    let elapsed = started.elapsed();
    eprintln!("ProgressDeadlineExceeded after {elapsed:?}");
    assert!(
        elapsed >= Duration::from_secs(10),
        "not before the deadline: {elapsed:?}"
    );
    assert!(
        elapsed <= Duration::from_secs(14),
        "promptly after the deadline: {elapsed:?}"
    );
    let progressing = condition(&e, "Progressing").expect("progressing");
    assert_eq!(progressing.status, "False");
    assert!(
        progressing
            .message
            .starts_with("Revision has not rolled out for 10 minute(s). Last status: "),
        "{}",
        progressing.message
    );
    assert!(
        progressing.message.contains("pre-authorization failed"),
        "{}",
        progressing.message
    );
    delete_and_wait(&api, &name).await;
}

fn dir_files(root: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .expect("relative")
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(&path).expect("read file"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// The bundle manifest of ecr-secret-operator whose custom resource violates its own CRD
/// (`spec.region` is required, and it sets the undeclared `spec.aws_iam_secret`).
const ECR_INVALID_CR: &str = "manifests/ecr-secret_ecr.mobb.redhat.com_v1alpha1_secret.yaml";
const ECR: &str = "ecr-secret-operator";

/// Pushes the fixture bundles 0.4.0 and 0.4.1 of ecr-secret-operator (without
/// [`ECR_INVALID_CR`] if `drop_invalid_cr`) and a catalog built from the v4.20 fixture
/// catalog with their image references rewritten; returns the catalog image and the
/// bundles rendered for `ns` (for the installer RBAC).
async fn publish_ecr(
    bundles_dir: &std::path::Path,
    catalogs_dir: &std::path::Path,
    ns: &str,
    catalog: &str,
    drop_invalid_cr: bool,
) -> (String, Vec<Vec<Value>>) {
    let mut catalog_yaml =
        std::fs::read_to_string(catalogs_dir.join("v4.20/ecr-secret-operator/catalog.yaml"))
            .expect("catalog.yaml");
    let mut rendered = Vec::new();
    for version in ["0.4.0", "0.4.1"] {
        let dir = bundles_dir.join(ECR).join(version);
        let mut files = dir_files(&dir);
        assert!(files.contains_key(ECR_INVALID_CR), "fixture changed?");
        if drop_invalid_cr {
            files.remove(ECR_INVALID_CR);
        }
        let pushed = olmv1::testenv::registry::push_bundle_image(
            support::registry(),
            &format!("bundles/{catalog}:v{version}"),
            &files,
            ECR,
            &["alpha"],
        )
        .await
        .expect("push bundle");
        let bundle = olmv1::bundle::load_dir(&dir, &Default::default()).expect("load");
        rendered
            .push(olmv1::bundle::render(&bundle, ns, None, &Default::default()).expect("render"));
        // Rewrite the catalog's image reference of this bundle.
        let bundle_name = format!("{ECR}.v{version}");
        let docs: Vec<&str> = catalog_yaml.split("\n---").collect();
        let doc = docs
            .iter()
            .find(|d| {
                d.contains(&format!("\nname: {bundle_name}\n")) && d.contains("schema: olm.bundle")
            })
            .expect("bundle in catalog");
        let old_image = doc
            .lines()
            .find_map(|l| l.strip_prefix("image: "))
            .expect("image line")
            .to_string();
        catalog_yaml = catalog_yaml.replace(&old_image, &pushed.reference);
    }
    let image = push_catalog(
        catalog,
        BTreeMap::from([(format!("{ECR}/catalog.yaml"), catalog_yaml.into_bytes())]),
    )
    .await;
    (image, rendered)
}

// 10. Real bundles from the fixtures.
#[tokio::test]
async fn real_ecr_secret_operator_bundles_through_a_catalog() {
    let (Some(bundles_dir), Some(catalogs_dir)) = (
        olmv1::testenv::shared_dir("fixtures/bundles"),
        olmv1::testenv::shared_dir("fixtures/catalogs"),
    ) else {
        eprintln!("skipped: no shared fixtures");
        return;
    };
    support::controller();
    let admin = support::cluster().admin().await;
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let catalogs: Api<ClusterCatalog> = Api::all(admin.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let crd_name = "secrets.ecr.mobb.redhat.com";

    // As published, every version ships a custom resource `ecr-secret` that its own CRD
    // rejects (`spec.region: Required value`): the install stops there with that error
    // (its undeclared `spec.aws_iam_secret` is pruned as the API server would on create,
    // so it is not what fails).
    let ns = support::namespace(&admin, "ecrasis").await;
    let name = support::unique("ecrasis");
    let catalog = support::unique("ecrasis");
    let (image, rendered) = publish_ecr(&bundles_dir, &catalogs_dir, &ns, &catalog, false).await;
    grant_installer(&ns, &name, &rendered).await;
    create_catalog(&catalog, &image).await;
    create(
        &api,
        &extension(&name, &ns, ECR, json!({"version": "0.4.0"})),
    )
    .await;
    let e = wait_progressing_message(&api, &name, "spec.region: Required value").await;
    let message = condition(&e, "Progressing").expect("progressing").message;
    assert!(
        message.starts_with(&format!(
            "error for resolved bundle \"{ECR}.v0.4.0\" with version \"0.4.0\": applying Secret/{ns}/ecr-secret: "
        )),
        "{message}"
    );
    assert!(
        !message.contains("field not declared in schema"),
        "{message}"
    );
    assert_ne!(
        condition(&e, "Installed").map(|c| c.status).as_deref(),
        Some("True")
    );
    // Deleting it leaves nothing behind (what the failed attempt applied is recorded).
    delete_and_wait(&api, &name).await;
    support::eventually(60, "the failed attempt's CRD removed", || async {
        crds.get_opt(crd_name).await.ok()?.is_none().then_some(())
    })
    .await;
    catalogs
        .delete(&catalog, &DeleteParams::default())
        .await
        .expect("delete catalog");
    support::eventually(60, "catalog gone", || async {
        catalogs
            .get_opt(&catalog)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;

    // Without that one manifest, the real bundles install through the real catalog and
    // upgrade along its `alpha` channel (0.4.1 replaces 0.4.0).
    let ns = support::namespace(&admin, "ecr").await;
    let name = support::unique("ecr");
    let catalog = support::unique("ecrfixed");
    let (image, rendered) = publish_ecr(&bundles_dir, &catalogs_dir, &ns, &catalog, true).await;
    grant_installer(&ns, &name, &rendered).await;
    create_catalog(&catalog, &image).await;
    create(
        &api,
        &extension(
            &name,
            &ns,
            ECR,
            json!({"version": "0.4.0", "channels": ["alpha"]}),
        ),
    )
    .await;
    let e = wait_installed(&api, &name, "0.4.0").await;
    assert_eq!(
        e.status.and_then(|s| s.install).map(|i| i.bundle.name),
        Some(format!("{ECR}.v0.4.0"))
    );
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), &ns);
    let d = deployments
        .get("ecr-secret-operator-controller-manager")
        .await
        .expect("deployment");
    assert_eq!(d.labels().get(OWNER_NAME), Some(&name));
    crds.get(crd_name).await.expect("CRD");
    let sample = widgets_like(
        &admin,
        "ecr.mobb.redhat.com",
        "v1alpha1",
        "Secret",
        "secrets",
        &ns,
    );
    let sample = sample
        .get("ecr-secret-sample")
        .await
        .expect("the bundle's valid sample custom resource");
    assert_eq!(sample.data["spec"]["region"], json!("us-east-2"));

    // Along the channel: the range admits 0.4.0 and 0.4.1, and 0.4.1 replaces 0.4.0.
    merge_patch(
        &api,
        &name,
        json!({"spec": {"source": {"catalog": {"version": ">=0.4.0, <0.5.0"}}}}),
    )
    .await;
    let e = wait_installed(&api, &name, "0.4.1").await;
    assert_eq!(
        e.status.and_then(|s| s.install).map(|i| i.bundle.name),
        Some(format!("{ECR}.v0.4.1"))
    );
    let d = deployments
        .get("ecr-secret-operator-controller-manager")
        .await
        .expect("deployment");
    let images: Vec<String> = d
        .spec
        .and_then(|s| s.template.spec)
        .map(|s| s.containers.into_iter().filter_map(|c| c.image).collect())
        .unwrap_or_default();
    assert!(
        images.iter().any(|i| i.contains("0.4.1")),
        "0.4.1's images: {images:?}"
    );
    delete_and_wait(&api, &name).await;
    assert!(
        crds.get_opt(crd_name).await.expect("get").is_none(),
        "uninstalled"
    );
}

//! Switching in place from upstream OLM v1 (docs/how-to/switch-from-upstream.md):
//! installations laid down exactly as upstream's Helm applier leaves them — the objects
//! (owner labels, Helm's annotations and label, the ownerReference to the
//! ClusterExtension), the release in operator-controller's storage (helm-operator-plugins
//! v0.8.0 chunked Secrets: an index Secret owned by the ClusterExtension plus chunk
//! Secrets, here several) in `olmv1-system`, and the ClusterExtension with the status
//! upstream writes — and only then olmv1 started. The matching installation is adopted
//! (Installed=True, every UID unchanged, the revision record written, the index Secret
//! marked, the chunks untouched, an `Adopted` Event); the ones
//! that differ (an object the release has and olmv1 does not render, another version)
//! are reported and left untouched.

use crate::support;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use olmv1::api::{ClusterExtension, InstallerSource};
use olmv1::apply::ObjectRef;
use olmv1::apply::record::record_name;
use olmv1::migrate::upstream_helm;
use serde_json::{Value, json};
use support::bundles::{self, BundleSpec};
use support::extensions::{
    condition, create_catalog, extension, grant_installer, publish, wait_installed,
    wait_progressing_message,
};

const SYSTEM_NAMESPACE: &str = "olmv1-system";

/// One upstream installation as laid down.
struct Upstream {
    name: String,
    namespace: String,
    /// (object, uid, resourceVersion) of every object laid down.
    objects: Vec<(ObjectRef, String, String)>,
    /// The index Secret of the release.
    secret: String,
    /// (name, resourceVersion) of the release's other chunk Secrets.
    chunks: Vec<(String, String)>,
}

fn api_for(client: &kube::Client, r: &ObjectRef) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(&r.group, &r.version, &r.kind);
    let plural = match r.kind.as_str() {
        "ServiceAccount" => "serviceaccounts".to_string(),
        k => format!("{}s", k.to_ascii_lowercase()),
    };
    let resource = ApiResource::from_gvk_with_plural(&gvk, &plural);
    if r.namespace.is_empty() {
        Api::all_with(client.clone(), &resource)
    } else {
        Api::namespaced_with(client.clone(), &r.namespace, &resource)
    }
}

/// Creates the ClusterExtension, `objects` as upstream's Helm applier leaves them, its
/// release (bundle `spec`) in operator-controller's chunked storage and upstream's status.
async fn lay_down(
    admin: &kube::Client,
    name: &str,
    ns: &str,
    spec: &BundleSpec,
    objects: &[Value],
    image: &str,
) -> Upstream {
    let api: Api<ClusterExtension> = Api::all(admin.clone());
    let mut ext = extension(name, ns, &spec.package, json!({}));
    ext.metadata.finalizers = Some(vec![
        "olm.operatorframework.io/cleanup-unpack-cache".into(),
        "olm.operatorframework.io/cleanup-contentmanager-cache".into(),
    ]);
    let ext = api
        .create(&PostParams::default(), &ext)
        .await
        .expect("create extension");
    let uid = ext.uid().expect("uid");

    let mut laid = Vec::new();
    let mut manifest = String::new();
    // CRDs first (the rest may use them), as Helm orders its install.
    let mut ordered: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .collect();
    ordered.extend(
        objects
            .iter()
            .filter(|o| o["kind"] != "CustomResourceDefinition"),
    );
    for (i, o) in ordered.into_iter().enumerate() {
        let mut o = o.clone();
        let meta = o["metadata"].as_object_mut().expect("metadata");
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        labels["olm.operatorframework.io/owner-kind"] = json!("ClusterExtension");
        labels["olm.operatorframework.io/owner-name"] = json!(name);
        labels["app.kubernetes.io/managed-by"] = json!("Helm");
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        annotations["meta.helm.sh/release-name"] = json!(name);
        annotations["meta.helm.sh/release-namespace"] = json!(ns);
        meta.insert(
            "ownerReferences".into(),
            json!([{"apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
                    "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true}]),
        );
        manifest.push_str(&format!(
            "---\n# Source: {}/templates/object-{i}.yaml\n{}\n",
            spec.package,
            serde_json::to_string_pretty(&o).expect("json")
        ));
        let r = ObjectRef::from_object(&o).expect("object ref");
        let dynamic: DynamicObject = serde_json::from_value(o).expect("object");
        let created = api_for(admin, &r)
            .create(&PostParams::default(), &dynamic)
            .await
            .unwrap_or_else(|e| panic!("creating {r}: {e}"));
        if r.kind == "CustomResourceDefinition" {
            // Established before anything may use it.
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        laid.push((
            r,
            created.uid().expect("uid"),
            created.resource_version().expect("rv"),
        ));
    }
    // What upstream's Helm release records (Helm 3 release.Release).
    let release = json!({
        "name": name,
        "namespace": ns,
        "version": 1,
        "info": {"first_deployed": "2026-11-01T10:00:00Z", "last_deployed": "2026-11-01T10:00:00Z",
                 "deleted": "", "description": "Install complete", "status": "deployed"},
        "chart": {"metadata": {"name": spec.package, "version": spec.version, "apiVersion": "v2"},
                  "templates": [], "values": {}},
        "config": {},
        "manifest": manifest,
        // The release labels operator-controller sets (storeLbls); its chunked storage
        // keeps them in the release JSON only (the index Secret has system labels).
        "labels": {
            upstream_helm::LABEL_PACKAGE: spec.package,
            upstream_helm::LABEL_BUNDLE_NAME: spec.bundle_name(),
            upstream_helm::LABEL_BUNDLE_VERSION: spec.version,
            upstream_helm::LABEL_BUNDLE_REFERENCE: image,
        },
    });
    // operator-controller's storage: helm-operator-plugins' chunked Secrets, the index
    // owned by the ClusterExtension, each chunk owned by the index. Upstream's chunks are
    // 1 MiB; small ones here so that the release spans several.
    let secret_name = format!("sh.helm.release.v1.{name}.v1");
    let chunked =
        upstream_helm::encode_chunked(&secret_name, SYSTEM_NAMESPACE, &release, 512, 1_761_991_200);
    let secrets = Api::<Secret>::namespaced(admin.clone(), SYSTEM_NAMESPACE);
    let mut index = chunked.index.clone();
    index["metadata"]["ownerReferences"] = json!([{"apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterExtension", "name": name, "uid": uid,
        "controller": true, "blockOwnerDeletion": true}]);
    let index: Secret = serde_json::from_value(index).expect("index secret");
    let index = secrets
        .create(&PostParams::default(), &index)
        .await
        .expect("create index secret");
    let index_uid = index.uid().expect("index uid");
    let mut chunks = Vec::new();
    for c in &chunked.chunks {
        let mut c = c.clone();
        c["metadata"]["ownerReferences"] = json!([upstream_helm::chunk_owner_reference(
            &secret_name,
            &index_uid
        )]);
        let c: Secret = serde_json::from_value(c).expect("chunk secret");
        let c = secrets
            .create(&PostParams::default(), &c)
            .await
            .expect("create chunk secret");
        chunks.push((c.name_any(), c.resource_version().expect("rv")));
    }
    // The status upstream writes.
    let now = "2026-11-01T10:00:00Z";
    let status = json!({"status": {
        "conditions": [
            {"type": "Installed", "status": "True", "reason": "Succeeded", "observedGeneration": 1,
             "lastTransitionTime": now, "message": format!("Installed bundle {image} successfully")},
            {"type": "Progressing", "status": "True", "reason": "Succeeded", "observedGeneration": 1,
             "lastTransitionTime": now, "message": "Desired state reached"},
        ],
        "install": {"bundle": {"name": spec.bundle_name(), "version": spec.version}},
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("upstream status");
    Upstream {
        name: name.to_string(),
        namespace: ns.to_string(),
        objects: laid,
        secret: secret_name,
        chunks,
    }
}

/// The bundle image the catalog names for `spec` (what upstream's bundle-reference holds).
async fn bundle_image(spec: &BundleSpec) -> String {
    bundles::push_bundle(spec).await
}

/// Every laid-down object still exists with the same UID (and, when `untouched`, the
/// same resourceVersion and upstream's metadata).
async fn assert_objects(admin: &kube::Client, up: &Upstream, untouched: bool) {
    for (r, uid, rv) in &up.objects {
        let live = api_for(admin, r)
            .get(&r.name)
            .await
            .unwrap_or_else(|e| panic!("{r}: {e}"));
        assert_eq!(
            live.uid().as_deref(),
            Some(uid.as_str()),
            "{r} was recreated"
        );
        if untouched {
            // Other controllers write status (a CRD's Established, a Deployment's
            // rollout); a ConfigMap has no one else writing it.
            if r.kind == "ConfigMap" {
                assert_eq!(
                    live.resource_version().as_deref(),
                    Some(rv.as_str()),
                    "{r} was written"
                );
            }
            let managers: Vec<String> = live
                .metadata
                .managed_fields
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|m| m.manager)
                .collect();
            assert!(
                !managers.iter().any(|m| m == olmv1::apply::FIELD_MANAGER),
                "{r} was written by olmv1: {managers:?}"
            );
        }
        assert_eq!(
            live.labels()
                .get("olm.operatorframework.io/owner-name")
                .map(String::as_str),
            Some(up.name.as_str())
        );
    }
}

#[tokio::test]
async fn upstream_installations_are_adopted_in_place_or_reported_untouched() {
    let admin = support::cluster().admin().await;
    let exts: Api<ClusterExtension> = Api::all(admin.clone());
    let records: Api<ConfigMap> = Api::namespaced(admin.clone(), SYSTEM_NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), SYSTEM_NAMESPACE);

    // 1. Matching: the release holds exactly what olmv1 renders for the resolved bundle.
    let package = support::unique("sw");
    let ns = support::namespace(&admin, "sw").await;
    let name = support::unique("adopt");
    let v1 = BundleSpec::new(&package, "1.0.0");
    let rendered = bundles::render(&v1, &ns);
    grant_installer(&ns, &name, std::slice::from_ref(&rendered)).await;
    let catalog = support::unique("swcat");
    let image = publish(&catalog, &package, std::slice::from_ref(&v1)).await;
    let bundle_ref = bundle_image(&v1).await;
    let adopt = lay_down(&admin, &name, &ns, &v1, &rendered, &bundle_ref).await;

    // 2. An object the release has that olmv1 does not render.
    let package2 = support::unique("swx");
    let ns2 = support::namespace(&admin, "swx").await;
    let name2 = support::unique("extra");
    let w1 = BundleSpec::new(&package2, "1.0.0");
    let rendered2 = bundles::render(&w1, &ns2);
    grant_installer(&ns2, &name2, std::slice::from_ref(&rendered2)).await;
    let catalog2 = support::unique("swxcat");
    let image2 = publish(&catalog2, &package2, std::slice::from_ref(&w1)).await;
    let mut with_extra = rendered2.clone();
    with_extra.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "left-by-upstream", "namespace": ns2}, "data": {"a": "b"}}));
    let extra = lay_down(
        &admin,
        &name2,
        &ns2,
        &w1,
        &with_extra,
        &bundle_image(&w1).await,
    )
    .await;

    // 3. A release of another version than olmv1 resolves to (an upgrade is available).
    let package3 = support::unique("swv");
    let ns3 = support::namespace(&admin, "swv").await;
    let name3 = support::unique("other");
    let old = BundleSpec::new(&package3, "0.9.0");
    let mut new = BundleSpec::new(&package3, "1.0.0");
    new.replaces = Some(old.bundle_name());
    let rendered3 = bundles::render(&old, &ns3);
    grant_installer(
        &ns3,
        &name3,
        &[rendered3.clone(), bundles::render(&new, &ns3)],
    )
    .await;
    let catalog3 = support::unique("swvcat");
    // The catalog has the installed 0.9.0 and its upgrade 1.0.0: olmv1 resolves 1.0.0.
    let image3 = publish(&catalog3, &package3, &[old.clone(), new.clone()]).await;
    let other = lay_down(
        &admin,
        &name3,
        &ns3,
        &old,
        &rendered3,
        &bundle_image(&old).await,
    )
    .await;

    // 4. A release whose second chunk Secret is gone (the index still names it).
    let package4 = support::unique("swc");
    let ns4 = support::namespace(&admin, "swc").await;
    let name4 = support::unique("chunk");
    let c1 = BundleSpec::new(&package4, "1.0.0");
    let rendered4 = bundles::render(&c1, &ns4);
    grant_installer(&ns4, &name4, std::slice::from_ref(&rendered4)).await;
    let catalog4 = support::unique("swccat");
    let image4 = publish(&catalog4, &package4, std::slice::from_ref(&c1)).await;
    let broken = lay_down(
        &admin,
        &name4,
        &ns4,
        &c1,
        &rendered4,
        &bundle_image(&c1).await,
    )
    .await;
    let lost = broken.chunks.first().expect("a second chunk").0.clone();
    secrets
        .delete(&lost, &Default::default())
        .await
        .expect("delete chunk");

    // Only now olmv1 starts (as the controller identity from config/).
    create_catalog(&catalog4, &image4).await;
    create_catalog(&catalog, &image).await;
    create_catalog(&catalog2, &image2).await;
    create_catalog(&catalog3, &image3).await;
    support::controller();

    // Adopted.
    let e = support::eventually(120, "adoption", || async {
        let e = exts.get(&name).await.ok()?;
        let installer = e.status.as_ref()?.install.as_ref()?.installer.clone()?;
        Some((e, installer))
    })
    .await;
    let (e, installer) = e;
    let e = wait_installed(&exts, &e.name_any(), "1.0.0").await;
    assert_eq!(
        condition(&e, "Installed").expect("Installed").reason,
        "Succeeded"
    );
    assert_eq!(installer.source, InstallerSource::ServiceAccount);
    assert_eq!(
        installer.username,
        format!("system:serviceaccount:{ns}:{name}-installer")
    );
    assert_objects(&admin, &adopt, false).await;
    let record = records
        .get(&record_name(&name))
        .await
        .expect("revision record written");
    assert_eq!(
        record
            .labels()
            .get("olm.operatorframework.io/owner-name")
            .map(String::as_str),
        Some(name.as_str())
    );
    let adopted = support::extensions::events(&admin, &name, "Adopted").await;
    assert!(
        adopted
            .iter()
            .any(|m| m.contains(&adopt.secret) && m.contains("nothing deleted or recreated")),
        "{adopted:?}"
    );
    assert!(
        support::extensions::events(&admin, &name, "Installed")
            .await
            .is_empty(),
        "adoption is not a fresh install"
    );
    let secret = support::eventually(30, "release marked", || async {
        let s = secrets.get(&adopt.secret).await.ok()?;
        upstream_helm::is_adopted(&s).then_some(s)
    })
    .await;
    assert_eq!(
        secret
            .annotations()
            .get(upstream_helm::ADOPTED_RECORD_ANNOTATION),
        Some(&record_name(&name))
    );
    // The release spans several chunk Secrets, read and left as they were.
    assert!(adopt.chunks.len() >= 2, "{} chunks", adopt.chunks.len());
    for (chunk, rv) in &adopt.chunks {
        let live = secrets.get(chunk).await.expect("chunk kept");
        assert_eq!(
            live.resource_version().as_ref(),
            Some(rv),
            "{chunk} written"
        );
    }
    // Each adopted object now carries olmv1's ownership and is in the record.
    for (r, _, _) in &adopt.objects {
        let live = api_for(&admin, r).get(&r.name).await.expect("live");
        let managers: Vec<String> = live
            .metadata
            .managed_fields
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| m.manager)
            .collect();
        assert!(
            managers.iter().any(|m| m == olmv1::apply::FIELD_MANAGER),
            "{r}: {managers:?}"
        );
    }
    let _ = adopt.namespace;

    // An extra object in the release: reported, nothing touched.
    let e = wait_progressing_message(&exts, &name2, "not adopting upstream OLM v1's installation")
        .await;
    let message = condition(&e, "Progressing").expect("Progressing").message;
    assert!(
        message.contains(&format!(
            "object(s) in the release that olmv1 does not render: ConfigMap/{ns2}/left-by-upstream"
        )),
        "{message}"
    );
    assert!(
        !support::extensions::events(&admin, &name2, "AdoptionRefused")
            .await
            .is_empty()
    );
    // Upstream's installation is still reported as installed.
    assert_eq!(
        condition(&e, "Installed").expect("Installed").status,
        "True"
    );
    assert_objects(&admin, &extra, true).await;
    assert!(
        records
            .get_opt(&record_name(&name2))
            .await
            .expect("get")
            .is_none()
    );
    assert!(!upstream_helm::is_adopted(
        &secrets.get(&extra.secret).await.expect("secret")
    ));

    // Another version: reported, nothing touched.
    let e = wait_progressing_message(&exts, &name3, "not adopting upstream OLM v1's installation")
        .await;
    let message = condition(&e, "Progressing").expect("Progressing").message;
    assert!(
        message.contains(&format!(
            "bundle {} version 0.9.0 in the release, {} version 1.0.0 resolved",
            old.bundle_name(),
            new.bundle_name()
        )),
        "{message}"
    );
    assert_objects(&admin, &other, true).await;
    assert!(
        records
            .get_opt(&record_name(&name3))
            .await
            .expect("get")
            .is_none()
    );
    assert!(!upstream_helm::is_adopted(
        &secrets.get(&other.secret).await.expect("secret")
    ));

    // A missing chunk: the controller says which, and touches nothing.
    let e = wait_progressing_message(&exts, &name4, &format!("Secret {lost:?}, is missing")).await;
    let message = condition(&e, "Progressing").expect("Progressing").message;
    assert!(
        message.contains(&format!("release Secret {}", broken.secret)),
        "{message}"
    );
    assert_objects(&admin, &broken, true).await;
    assert!(
        records
            .get_opt(&record_name(&name4))
            .await
            .expect("get")
            .is_none()
    );
    assert!(!upstream_helm::is_adopted(
        &secrets.get(&broken.secret).await.expect("secret")
    ));
}

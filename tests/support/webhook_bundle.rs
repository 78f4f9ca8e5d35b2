//! The webhook test bundle (e2e/webhooks.rs, e2e/migrate_v0.rs): a CSV whose one
//! Deployment runs `hack/testimage webhook` and declares a validating, a mutating and a
//! conversion webhook on the `widgets` CRD (v1 `spec.size` stored, v2 `spec.replicas`),
//! and what proves the API server really calls them.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use olmv1::testenv::demo::BundleSpec;
use olmv1::testenv::registry::bundle_labels;
use serde_json::{Value, json};
use std::collections::BTreeMap;

use super::eventually;

/// What `hack/testimage webhook` answers for an object labelled `deny=true`
/// (`DenyMessage` in hack/testimage/webhook.go).
pub const DENY_MESSAGE: &str =
    "denied by the testimage webhook: the object has the label deny=true";

pub fn group(package: &str) -> String {
    format!("{package}.example.com")
}

/// The bundle's files: a CSV (AllNamespaces only, as conversion webhooks require) whose
/// one Deployment runs the node's test program in webhook mode, three webhook
/// definitions, and the `widgets` CRD with versions v1 (`spec.size`, stored) and v2
/// (`spec.replicas`).
pub fn webhook_bundle(spec: &BundleSpec, image: &str) -> BTreeMap<String, Vec<u8>> {
    let group = group(&spec.package);
    let crd_name = spec.crd_name();
    let deployment = spec.deployment_name();
    let sa = format!("{}-sa", spec.package);
    let hook = |type_: &str, prefix: &str, path: &str| {
        json!({
            "type": type_, "generateName": format!("{prefix}.{group}"),
            "deploymentName": deployment, "containerPort": 443, "targetPort": 9443,
            "webhookPath": path, "sideEffects": "None", "failurePolicy": "Fail",
            "admissionReviewVersions": ["v1"],
        })
    };
    let rules = json!([{"apiGroups": [group], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}]);
    let mut validating = hook("ValidatingAdmissionWebhook", "vwidget", "/validate");
    validating["rules"] = rules.clone();
    let mut mutating = hook("MutatingAdmissionWebhook", "mwidget", "/mutate");
    mutating["rules"] = rules;
    let mut conversion = hook("ConversionWebhook", "cwidget", "/convert");
    conversion["conversionCRDs"] = json!([crd_name]);
    let csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": spec.bundle_name()},
        "spec": {
            "displayName": spec.package,
            "version": spec.version,
            "installModes": [
                {"type": "OwnNamespace", "supported": false},
                {"type": "SingleNamespace", "supported": false},
                {"type": "MultiNamespace", "supported": false},
                {"type": "AllNamespaces", "supported": true}
            ],
            "customresourcedefinitions": {"owned": [
                {"name": crd_name, "version": "v1", "kind": "Widget", "displayName": "Widget"},
            ]},
            "install": {"strategy": "deployment", "spec": {
                "clusterPermissions": [{"serviceAccountName": sa, "rules": [
                    {"apiGroups": [group], "resources": ["widgets"], "verbs": ["get", "list", "watch"]}
                ]}],
                "deployments": [{"name": deployment, "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": deployment}},
                    "template": {
                        "metadata": {"labels": {"app": deployment}},
                        "spec": {"serviceAccountName": sa, "containers": [{
                            "name": "manager", "image": image, "args": ["webhook"],
                            "ports": [{"name": "http", "containerPort": 8080}, {"name": "webhooks", "containerPort": 9443}],
                            "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080}, "periodSeconds": 2},
                            "securityContext": {"runAsNonRoot": true, "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
                        }]}
                    }
                }}]
            }},
            "webhookdefinitions": [validating, mutating, conversion],
        }
    });
    let schema = |field: &str| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {field: {"type": "integer"}}}
        }}})
    };
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name},
        "spec": {
            "group": group,
            "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
            "scope": "Namespaced",
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema("size")},
                {"name": "v2", "served": true, "storage": false, "schema": schema("replicas")},
            ]
        }
    });
    let json = |v: &Value| serde_json::to_vec_pretty(v).expect("json");
    BTreeMap::from([
        (
            format!("manifests/{}.clusterserviceversion.json", spec.package),
            json(&csv),
        ),
        ("manifests/widgets.crd.json".to_string(), json(&crd)),
    ])
}

/// Renders the bundle locally as the controller will (cert-manager provider), for the
/// installer's RBAC.
pub fn render(files: &BTreeMap<String, Vec<u8>>, package: &str, ns: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, data) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, data).expect("write");
    }
    let mut annotations = String::from("annotations:\n");
    for (k, v) in bundle_labels(package, &["stable"]) {
        annotations.push_str(&format!("  {k}: {}\n", Value::String(v)));
    }
    std::fs::create_dir_all(dir.path().join("metadata")).expect("mkdir");
    std::fs::write(dir.path().join("metadata/annotations.yaml"), annotations).expect("write");
    let bundle = olmv1::bundle::load_dir(dir.path(), &Default::default()).expect("load bundle");
    olmv1::bundle::render(&bundle, ns, None, &Default::default()).expect("render bundle")
}

pub fn cert_manager_api(client: &kube::Client, ns: &str, kind: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("cert-manager.io", "v1", kind));
    Api::namespaced_with(client.clone(), ns, &ar)
}

pub fn widgets(
    client: &kube::Client,
    ns: &str,
    package: &str,
    version: &str,
) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group(package), version, "Widget"),
        "widgets",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

pub fn widget(package: &str, name: &str, labels: Value, size: i64) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("{}/v1", group(package)), "kind": "Widget",
        "metadata": {"name": name, "labels": labels},
        "spec": {"size": size},
    }))
    .expect("widget")
}

/// The node's test program must have the webhook mode (hack/build-node.sh rebuilds it
/// from hack/testimage; an older build answers `usage: …` and the pod crash-loops).
pub fn assert_testimage_serves_webhooks() {
    let bin = olmv1::testenv::node::NodeBinaries::locate()
        .expect("node binaries")
        .testimage;
    let out = std::process::Command::new(&bin)
        .arg("webhook")
        .env("CERT_DIR", "/nonexistent")
        .output()
        .expect("run testimage");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("loading the serving certificate"),
        "{} has no webhook mode (run hack/build-node.sh, which rebuilds it from hack/testimage): {stderr}",
        bin.display()
    );
}

/// The API server calls the three webhooks the operator serves: a Widget is admitted
/// and mutated, one labelled `deny=true` is refused with the webhook's message (naming
/// the configuration), and conversion works both ways between v1 and v2. Returns the
/// validating configuration's name. `tag` ends the names of the Widgets it creates.
pub async fn exercise(admin: &kube::Client, ns: &str, package: &str, tag: &str) -> String {
    let (plain, from_v2) = (format!("plain{tag}"), format!("from-v2{tag}"));
    let group = group(package);
    let vname = format!("vwidget.{group}");
    // The API server calls the webhooks. kube-proxy may follow the Service's endpoints
    // a moment after the pod is Ready: retry the first call until it reaches the pod.
    let v1 = widgets(admin, ns, package, "v1");
    let created = eventually(60, "a Widget admitted through the webhooks", || async {
        match v1
            .create(
                &PostParams::default(),
                &widget(package, &plain, json!({}), 3),
            )
            .await
        {
            Ok(w) => Some(w),
            Err(kube::Error::Api(e)) if e.code == 409 => v1.get(&plain).await.ok(),
            Err(e) => {
                let e = e.to_string();
                eprintln!("creating Widget plain: {}", &e[..e.len().min(240)]);
                None
            }
        }
    })
    .await;
    // Mutating: the label was added on the way in.
    assert_eq!(
        created
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("mutated-by"))
            .map(String::as_str),
        Some("testimage"),
        "{:?}",
        created.metadata
    );
    // Validating: an object labelled deny=true is refused with the webhook's message.
    let denied = v1
        .create(
            &PostParams::default(),
            &widget(package, "denied", json!({"deny": "true"}), 1),
        )
        .await
        .expect_err("the validating webhook denies deny=true");
    let message = denied.to_string();
    assert!(
        message.contains(DENY_MESSAGE) && message.contains(&vname),
        "{message}"
    );
    assert!(v1.get_opt("denied").await.expect("get").is_none());
    // Conversion: stored at v1 with spec.size, read at v2 as spec.replicas.
    let v2 = widgets(admin, ns, package, "v2");
    let read = v2.get(&plain).await.expect("Widget plain at v2");
    assert_eq!(
        read.types.as_ref().map(|t| t.api_version.clone()),
        Some(format!("{group}/v2"))
    );
    assert_eq!(read.data["spec"], json!({"replicas": 3}), "{:?}", read.data);
    // …and a v2 object written as replicas reads back at v1 as size.
    let at_v2: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v2"), "kind": "Widget",
        "metadata": {"name": from_v2}, "spec": {"replicas": 7},
    }))
    .expect("widget v2");
    v2.create(&PostParams::default(), &at_v2)
        .await
        .expect("create Widget at v2");
    let back = v1.get(&from_v2).await.expect("Widget from-v2 at v1");
    assert_eq!(back.data["spec"], json!({"size": 7}), "{:?}", back.data);
    vname
}

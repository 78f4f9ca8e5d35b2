//! Synthetic registry+v1 bundles and catalogs for end-to-end tests: a package with a
//! CRD, a Deployment, RBAC and (optionally) an extra ConfigMap, built from code and
//! pushed to the test registry.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::collections::BTreeMap;

/// One version of a synthetic package.
#[derive(Clone, Debug)]
pub struct BundleSpec {
    pub package: String,
    pub version: String,
    /// `replaces` of its channel entry.
    pub replaces: Option<String>,
    /// Adds a ConfigMap `<package>-extra` (to test pruning when a later version drops it).
    pub extra_configmap: bool,
    /// Extra CRD properties (to test CRD upgrade safety): `spec.properties`.
    pub crd_spec_properties: Value,
    /// Extra catalog properties of the bundle's `olm.bundle` entry (e.g. a dependency).
    pub extra_properties: Vec<Value>,
}

impl BundleSpec {
    pub fn new(package: &str, version: &str) -> Self {
        BundleSpec {
            package: package.into(),
            version: version.into(),
            replaces: None,
            extra_configmap: false,
            crd_spec_properties: json!({"size": {"type": "integer"}}),
            extra_properties: Vec::new(),
        }
    }
    pub fn bundle_name(&self) -> String {
        format!("{}.v{}", self.package, self.version)
    }
    pub fn group(&self) -> String {
        format!("{}.example.com", self.package)
    }
    pub fn crd_name(&self) -> String {
        format!("widgets.{}", self.group())
    }
    pub fn deployment_name(&self) -> String {
        format!("{}-controller", self.package)
    }
}

fn crd(spec: &BundleSpec) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": spec.crd_name()},
        "spec": {
            "group": spec.group(),
            "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": spec.crd_spec_properties.clone()}
                }}}
            }]
        }
    })
}

fn csv(spec: &BundleSpec) -> Value {
    let sa = format!("{}-sa", spec.package);
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": spec.bundle_name(), "annotations": {"capabilities": "Basic Install"}},
        "spec": {
            "displayName": spec.package,
            "version": spec.version,
            "installModes": [
                {"type": "OwnNamespace", "supported": true},
                {"type": "SingleNamespace", "supported": true},
                {"type": "MultiNamespace", "supported": false},
                {"type": "AllNamespaces", "supported": true}
            ],
            "customresourcedefinitions": {"owned": [
                {"name": spec.crd_name(), "version": "v1", "kind": "Widget", "displayName": "Widget"}
            ]},
            "install": {"strategy": "deployment", "spec": {
                "clusterPermissions": [{"serviceAccountName": sa, "rules": [
                    {"apiGroups": [spec.group()], "resources": ["widgets", "widgets/status"], "verbs": ["get", "list", "watch", "update"]}
                ]}],
                "permissions": [{"serviceAccountName": sa, "rules": [
                    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}
                ]}],
                "deployments": [{"name": spec.deployment_name(), "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": spec.deployment_name()}},
                    "template": {
                        "metadata": {"labels": {"app": spec.deployment_name()}},
                        "spec": {"serviceAccountName": sa, "containers": [
                            {"name": "manager", "image": format!("example.com/{}:{}", spec.package, spec.version)}
                        ]}
                    }
                }}]
            }}
        }
    })
}

/// The bundle's files (`manifests/…`); `metadata/annotations.yaml` is generated on push.
pub fn bundle_files(spec: &BundleSpec) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let json = |v: Value| serde_json::to_vec_pretty(&v).unwrap_or_default();
    files.insert(
        format!("manifests/{}.clusterserviceversion.json", spec.package),
        json(csv(spec)),
    );
    files.insert("manifests/widgets.crd.json".to_string(), json(crd(spec)));
    if spec.extra_configmap {
        files.insert(
            "manifests/extra.configmap.json".to_string(),
            json(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("{}-extra", spec.package)}, "data": {"k": "v"}})),
        );
    }
    files
}

/// Pushes the bundle image; returns its digest-pinned reference.
pub async fn push_bundle(spec: &BundleSpec) -> String {
    let registry = super::registry();
    let repo = format!("bundles/{}:v{}", spec.package, spec.version);
    olmv1::testenv::registry::push_bundle_image(
        registry,
        &repo,
        &bundle_files(spec),
        &spec.package,
        &["stable"],
    )
    .await
    .unwrap_or_else(|e| panic!("pushing bundle {repo}: {e:#}"))
    .reference
}

/// FBC (JSON lines) for a package whose `stable` channel holds `bundles` (with images).
pub fn catalog_fbc(package: &str, bundles: &[(BundleSpec, String)]) -> Vec<u8> {
    let mut docs =
        vec![json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"})];
    let entries: Vec<Value> = bundles
        .iter()
        .map(|(b, _)| {
            let mut e = json!({"name": b.bundle_name()});
            if let Some(r) = &b.replaces {
                e["replaces"] = json!(r);
            }
            e
        })
        .collect();
    docs.push(
        json!({"schema": "olm.channel", "name": "stable", "package": package, "entries": entries}),
    );
    for (b, image) in bundles {
        let mut properties = vec![
            json!({"type": "olm.package", "value": {"packageName": package, "version": b.version}}),
            json!({"type": "olm.gvk", "value": {"group": b.group(), "kind": "Widget", "version": "v1"}}),
        ];
        properties.extend(b.extra_properties.iter().cloned());
        docs.push(json!({
            "schema": "olm.bundle", "name": b.bundle_name(), "package": package, "image": image,
            "properties": properties,
        }));
    }
    docs.iter()
        .map(|d| format!("{d}\n"))
        .collect::<String>()
        .into_bytes()
}

/// Renders a bundle locally (as the controller will) for computing installer RBAC.
pub fn render(spec: &BundleSpec, namespace: &str) -> Vec<Value> {
    render_with_config(spec, namespace, None)
}

/// [`render`] with a `spec.config.inline` object (e.g. `{"watchNamespace": ...}`).
pub fn render_with_config(
    spec: &BundleSpec,
    namespace: &str,
    config: Option<&Value>,
) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for (path, data) in bundle_files(spec) {
        let p = dir.path().join(&path);
        std::fs::create_dir_all(p.parent().unwrap_or(dir.path())).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&p, data).unwrap_or_else(|e| panic!("{e}"));
    }
    let meta = dir.path().join("metadata");
    std::fs::create_dir_all(&meta).unwrap_or_else(|e| panic!("{e}"));
    let labels = olmv1::testenv::registry::bundle_labels(&spec.package, &["stable"]);
    let mut annotations = String::from("annotations:\n");
    for (k, v) in labels {
        annotations.push_str(&format!("  {k}: {}\n", Value::String(v)));
    }
    std::fs::write(meta.join("annotations.yaml"), annotations).unwrap_or_else(|e| panic!("{e}"));
    let bundle = olmv1::bundle::load_dir(dir.path(), &Default::default())
        .unwrap_or_else(|e| panic!("load: {e}"));
    olmv1::bundle::render(&bundle, namespace, config, &Default::default())
        .unwrap_or_else(|e| panic!("render: {e}"))
}

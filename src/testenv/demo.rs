//! Synthetic registry+v1 bundles and File-Based Catalogs generated from code: a package
//! with a CRD, a Deployment, RBAC and (optionally) an extra ConfigMap, further manifests
//! and a validating webhook. The end-to-end
//! tests (`tests/support/bundles.rs`) and the local demo (`hack/demo.sh` through
//! `olmv1 testenv demo-catalog`) both publish these to a [`super::registry`] registry.

use anyhow::Context;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

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
    /// CRDs besides `widgets`: `gadget<i>s.<group>` (kind `Gadget<i>`), owned by the CSV.
    pub extra_crds: usize,
    /// Further manifests of the bundle (ConfigMaps, CRDs, …), one file each.
    pub extra_manifests: Vec<Value>,
    /// Declares a validating admission webhook served by the Deployment (such bundles
    /// need a certificate provider).
    pub webhook: bool,
    /// The operator's image. `None`: `example.com/<package>:<version>`, which no node
    /// can pull (fine on a control plane without nodes). On a real node: the node's
    /// workload image, probed on `/healthz` and `/readyz` (port 8080).
    pub operator_image: Option<String>,
    /// Environment of the operator's container (with `operator_image`; the workload
    /// image reads `READY=false` and `READY_AFTER=<seconds>`).
    pub operator_env: Vec<(String, String)>,
    /// Further annotations of the CSV (e.g. `operatorframework.io/suggested-namespace`).
    pub csv_annotations: Vec<(String, String)>,
    /// The Deployment's `progressDeadlineSeconds` (`None`: Kubernetes' default, 600).
    pub progress_deadline_seconds: Option<u32>,
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
            extra_crds: 0,
            extra_manifests: Vec::new(),
            webhook: false,
            operator_image: None,
            operator_env: Vec::new(),
            csv_annotations: Vec::new(),
            progress_deadline_seconds: None,
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

/// (kind, plural) of every CRD of the bundle: `Widget` first, then the extra ones.
fn crd_kinds(spec: &BundleSpec) -> Vec<(String, String)> {
    std::iter::once(("Widget".to_string(), "widgets".to_string()))
        .chain((1..=spec.extra_crds).map(|i| (format!("Gadget{i}"), format!("gadget{i}s"))))
        .collect()
}

fn crd(spec: &BundleSpec, kind: &str, plural: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{}", spec.group())},
        "spec": {
            "group": spec.group(),
            "names": {"kind": kind, "listKind": format!("{kind}List"), "plural": plural, "singular": kind.to_lowercase()},
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

/// The `webhookdefinitions` of the CSV: one validating webhook on the Widgets.
fn webhook_definitions(spec: &BundleSpec) -> Value {
    json!([{
        "type": "ValidatingAdmissionWebhook",
        "generateName": format!("vwidget.{}", spec.group()),
        "deploymentName": spec.deployment_name(),
        "containerPort": 443,
        "targetPort": 9443,
        "webhookPath": "/validate-widget",
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "admissionReviewVersions": ["v1"],
        "rules": [{
            "apiGroups": [spec.group()], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]
        }]
    }])
}

/// The operator's container.
fn manager(spec: &BundleSpec) -> Value {
    match &spec.operator_image {
        None => {
            json!({"name": "manager", "image": format!("example.com/{}:{}", spec.package, spec.version)})
        }
        Some(image) => json!({
            "name": "manager", "image": image, "args": ["serve"],
            "env": spec.operator_env.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
            "ports": [{"name": "http", "containerPort": 8080}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
            "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080}, "periodSeconds": 2},
            "securityContext": {"runAsNonRoot": true, "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}},
        }),
    }
}

fn csv(spec: &BundleSpec) -> Value {
    let sa = format!("{}-sa", spec.package);
    let mut csv = json!({
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
            "customresourcedefinitions": {"owned": crd_kinds(spec).iter().map(|(kind, plural)| json!(
                {"name": format!("{plural}.{}", spec.group()), "version": "v1", "kind": kind, "displayName": kind}
            )).collect::<Vec<_>>()},
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
                        "spec": {"serviceAccountName": sa, "containers": [manager(spec)]}
                    }
                }}]
            }}
        }
    });
    if spec.webhook {
        csv["spec"]["webhookdefinitions"] = webhook_definitions(spec);
    }
    for (key, value) in &spec.csv_annotations {
        csv["metadata"]["annotations"][key] = json!(value);
    }
    if let Some(seconds) = spec.progress_deadline_seconds {
        csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["progressDeadlineSeconds"] =
            json!(seconds);
    }
    csv
}

/// The bundle's files (`manifests/…`); `metadata/annotations.yaml` is generated on push.
pub fn bundle_files(spec: &BundleSpec) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let json = |v: Value| serde_json::to_vec_pretty(&v).unwrap_or_default();
    files.insert(
        format!("manifests/{}.clusterserviceversion.json", spec.package),
        json(csv(spec)),
    );
    for (kind, plural) in crd_kinds(spec) {
        files.insert(
            format!("manifests/{plural}.crd.json"),
            json(crd(spec, &kind, &plural)),
        );
    }
    if spec.extra_configmap {
        files.insert(
            "manifests/extra.configmap.json".to_string(),
            json(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("{}-extra", spec.package)}, "data": {"k": "v"}})),
        );
    }
    for (i, m) in spec.extra_manifests.iter().enumerate() {
        let kind = m["kind"].as_str().unwrap_or("object").to_ascii_lowercase();
        files.insert(
            format!("manifests/extra-{i:03}.{kind}.json"),
            json(m.clone()),
        );
    }
    files
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

/// Writes the bundle's files and its `metadata/annotations.yaml` (as
/// [`super::registry::push_bundle_image`] labels them) into `dir`.
pub fn write_bundle_dir(spec: &BundleSpec, dir: &Path) -> anyhow::Result<()> {
    for (path, data) in bundle_files(spec) {
        let p = dir.join(&path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&p, data).with_context(|| format!("writing {}", p.display()))?;
    }
    let meta = dir.join("metadata");
    std::fs::create_dir_all(&meta).with_context(|| format!("creating {}", meta.display()))?;
    let labels = super::registry::bundle_labels(&spec.package, &["stable"]);
    let mut annotations = String::from("annotations:\n");
    for (k, v) in labels {
        annotations.push_str(&format!("  {k}: {}\n", Value::String(v)));
    }
    let path = meta.join("annotations.yaml");
    std::fs::write(&path, annotations).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Renders a bundle locally for `namespace` (as the controller will), e.g. to compute
/// the installer RBAC.
pub fn render(spec: &BundleSpec, namespace: &str) -> anyhow::Result<Vec<Value>> {
    render_with_config(spec, namespace, None)
}

/// [`render`] with a `spec.config.inline` object (e.g. `{"watchNamespace": …}`).
pub fn render_with_config(
    spec: &BundleSpec,
    namespace: &str,
    config: Option<&Value>,
) -> anyhow::Result<Vec<Value>> {
    render_with_options(spec, namespace, config, &Default::default())
}

/// [`render_with_config`] with render options (e.g. on a cluster serving
/// OperatorCondition).
pub fn render_with_options(
    spec: &BundleSpec,
    namespace: &str,
    config: Option<&Value>,
    options: &crate::bundle::RenderOptions,
) -> anyhow::Result<Vec<Value>> {
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    write_bundle_dir(spec, dir.path())?;
    let bundle = crate::bundle::load_dir(dir.path(), &Default::default())
        .with_context(|| format!("loading bundle {}", spec.bundle_name()))?;
    crate::bundle::render(&bundle, namespace, config, options)
        .with_context(|| format!("rendering bundle {}", spec.bundle_name()))
}

/// Pushes the bundle image `bundles/<package>:v<version>`; returns its digest-pinned
/// reference.
pub async fn push_bundle(
    registry: &super::registry::TestRegistry,
    spec: &BundleSpec,
) -> anyhow::Result<String> {
    let repo = format!("bundles/{}:v{}", spec.package, spec.version);
    let pushed = super::registry::push_bundle_image(
        registry,
        &repo,
        &bundle_files(spec),
        &spec.package,
        &["stable"],
    )
    .await
    .with_context(|| format!("pushing bundle {repo}"))?;
    Ok(pushed.reference)
}

/// Pushes the bundles and a catalog image `<repo_tag>` whose `stable` channel holds them
/// (each version replacing the one before); returns the catalog's tag reference.
pub async fn publish_catalog(
    registry: &super::registry::TestRegistry,
    repo_tag: &str,
    package: &str,
    versions: &[String],
    operator_image: Option<&str>,
) -> anyhow::Result<String> {
    let mut entries = Vec::new();
    let mut previous: Option<String> = None;
    for v in versions {
        let mut spec = BundleSpec::new(package, v);
        spec.operator_image = operator_image.map(str::to_string);
        spec.replaces = previous.take();
        previous = Some(spec.bundle_name());
        let image = push_bundle(registry, &spec).await?;
        entries.push((spec, image));
    }
    let files = BTreeMap::from([(
        format!("{package}/catalog.json"),
        catalog_fbc(package, &entries),
    )]);
    super::registry::push_catalog_image(registry, repo_tag, &files)
        .await
        .with_context(|| format!("pushing catalog {repo_tag}"))?;
    Ok(format!("{}/{repo_tag}", registry.host()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_chains_versions_and_renders() {
        let v1 = BundleSpec::new("demo", "1.0.0");
        let mut v2 = BundleSpec::new("demo", "1.1.0");
        v2.replaces = Some(v1.bundle_name());
        let fbc = catalog_fbc("demo", &[(v1, "r/a".into()), (v2.clone(), "r/b".into())]);
        let docs: Vec<Value> = String::from_utf8(fbc)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(docs.len(), 4);
        assert_eq!(docs[1]["entries"][1]["replaces"], "demo.v1.0.0");
        let rendered = render(&v2, "ns").unwrap();
        let kinds: Vec<&str> = rendered.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert!(kinds.contains(&"Deployment"), "{kinds:?}");
        assert!(kinds.contains(&"CustomResourceDefinition"), "{kinds:?}");
    }

    #[test]
    fn extra_manifests_and_webhook() {
        let mut spec = BundleSpec::new("hooked", "1.0.0");
        spec.extra_manifests = vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one"}, "data": {"a": "b"}}),
        ];
        spec.webhook = true;
        let rendered = render(&spec, "ns").unwrap();
        let has = |kind: &str, name: &str| {
            rendered
                .iter()
                .any(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        };
        assert!(has("ConfigMap", "one"), "{rendered:#?}");
        assert!(
            has(
                "ValidatingWebhookConfiguration",
                "vwidget.hooked.example.com"
            ),
            "{rendered:#?}"
        );
        assert!(
            has("Certificate", "hooked-controller-service-cert"),
            "{rendered:#?}"
        );

        // Without a certificate provider the bundle is unsupported.
        let dir = tempfile::tempdir().unwrap();
        write_bundle_dir(&spec, dir.path()).unwrap();
        let bundle = crate::bundle::load_dir(dir.path(), &Default::default()).unwrap();
        let options = crate::bundle::RenderOptions {
            cert_provider: crate::bundle::CertProvider::None,
            ..Default::default()
        };
        let err = crate::bundle::render(&bundle, "ns", None, &options).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unsupported bundle: webhookDefinitions are not supported"
        );
    }
}

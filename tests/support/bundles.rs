//! Synthetic registry+v1 bundles and catalogs for end-to-end tests: the generator lives
//! in `olmv1::testenv::demo` (shared with the demo); this adds pushing to the test
//! binary's registry and panicking wrappers.
#![allow(dead_code)]

#[allow(unused_imports)]
pub use olmv1::testenv::demo::{BundleSpec, bundle_files, catalog_fbc};
use serde_json::Value;

/// Pushes the bundle image; returns its digest-pinned reference.
pub async fn push_bundle(spec: &BundleSpec) -> String {
    olmv1::testenv::demo::push_bundle(super::registry(), spec)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// Renders a bundle locally (as the controller will) for computing installer RBAC.
pub fn render(spec: &BundleSpec, namespace: &str) -> Vec<Value> {
    olmv1::testenv::demo::render(spec, namespace).unwrap_or_else(|e| panic!("{e:#}"))
}

/// [`render`] with a `spec.config.inline` object.
pub fn render_with_config(
    spec: &BundleSpec,
    namespace: &str,
    config: Option<&Value>,
) -> Vec<Value> {
    olmv1::testenv::demo::render_with_config(spec, namespace, config)
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// The node cluster's registry (the test called `support::node_cluster…` first).
fn node_registry() -> (String, olmv1::testenv::registry::TestRegistry) {
    let node = super::cluster()
        .node
        .as_ref()
        .expect("a node cluster (call support::node_cluster first)");
    let registry = olmv1::testenv::registry::TestRegistry::existing(&node.registry)
        .expect("the node registry");
    (node.registry.clone(), registry)
}

/// Publishes `bundles` to the node registry in a catalog image `catalogs/<name>:latest`;
/// returns its reference.
pub async fn publish_on_node(name: &str, package: &str, bundles: &[BundleSpec]) -> String {
    let (address, registry) = node_registry();
    let mut entries = Vec::new();
    for b in bundles {
        let image = olmv1::testenv::demo::push_bundle(&registry, b)
            .await
            .expect("push bundle");
        entries.push((b.clone(), image));
    }
    push_catalog(&address, &registry, name, package, &entries).await
}

/// Publishes a bundle of `files` (as `spec`) and a catalog naming it to the node
/// registry; returns the catalog image.
pub async fn publish_files_on_node(
    name: &str,
    spec: &BundleSpec,
    files: &std::collections::BTreeMap<String, Vec<u8>>,
) -> String {
    let (address, registry) = node_registry();
    let bundle = olmv1::testenv::registry::push_bundle_image(
        &registry,
        &format!("bundles/{}:v{}", spec.package, spec.version),
        files,
        &spec.package,
        &["stable"],
    )
    .await
    .expect("push bundle")
    .reference;
    let entries = [(spec.clone(), bundle)];
    push_catalog(&address, &registry, name, &spec.package, &entries).await
}

async fn push_catalog(
    address: &str,
    registry: &olmv1::testenv::registry::TestRegistry,
    name: &str,
    package: &str,
    entries: &[(BundleSpec, String)],
) -> String {
    let files = std::collections::BTreeMap::from([(
        format!("{package}/catalog.json"),
        catalog_fbc(package, entries),
    )]);
    let repo_tag = format!("catalogs/{name}:latest");
    olmv1::testenv::registry::push_catalog_image(registry, &repo_tag, &files)
        .await
        .expect("push catalog");
    format!("{address}/{repo_tag}")
}

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

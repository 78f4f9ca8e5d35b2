//! registry+v1 bundles: loading from a directory or an unpacked image, validation,
//! and rendering into the Kubernetes objects to apply (docs/concepts/rendering.md §5).
//!
//! Flow: [`load_dir`] (bounded I/O) → [`validate`] (pure, every problem at once) →
//! [`render`] (pure, deterministic: same input, byte-identical output). Ownership labels
//! and ownerReferences (docs/concepts/rendering.md §5.6) are added later by the applier, not here.

pub mod certs;
mod config;
mod csv;
mod deployment_config;
mod fast_yaml;
mod image;
mod load;
mod metadata;
pub mod names;
mod render;
mod validate;

#[cfg(test)]
mod go_reading_tests;
#[cfg(test)]
mod tests;

pub use config::{BundleConfig, ConfigError, DeploymentConfig, InstallMode, InstallModeSet};
pub use csv::{Csv, CsvError, WebhookDescription, WebhookType};
pub use image::{BundleImageError, MEDIATYPE_LABEL, check_labels, is_digest_reference, load_image};
pub use load::{LoadError, LoadOptions, load_dir};
pub use render::{
    RenderError, RenderOptions, operator_condition, render, render_owned, to_yaml_documents,
};
pub use validate::{CertProvider, ValidationErrors, validate};

use serde_json::Value;

/// The two halves of the bundle loader's YAML reading, for the differential fuzz target
/// `fuzz/fuzz_targets/bundle_yaml.rs` (the fast path must return what the full,
/// bounded deserializer returns whenever it returns anything). Not an API; only with the
/// `fuzzing` feature.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzz_api {
    use super::LoadOptions;
    use serde_json::Value;

    /// The event-level fast path; `None` when the input needs the full deserializer.
    pub fn fast_documents(text: &str, opts: &LoadOptions) -> Option<Vec<Value>> {
        super::fast_yaml::parse_documents(text, opts.max_yaml_depth, opts.max_yaml_nodes)
    }

    /// The full deserializer with the loader's budgets and bounded alias expansion.
    pub fn full_documents(text: &str, opts: &LoadOptions) -> Result<Vec<Value>, String> {
        crate::yaml::from_multiple::<Value>(text, super::load::yaml_options(opts))
            .map_err(|e| e.to_string())
    }
}

/// Kind of the ClusterServiceVersion manifest.
pub const CSV_KIND: &str = "ClusterServiceVersion";

/// A loaded (not yet validated) registry+v1 bundle.
#[derive(Debug, Clone, PartialEq)]
pub struct Bundle {
    /// `operators.operatorframework.io.bundle.package.v1` from `metadata/annotations.yaml`.
    pub package_name: String,
    /// The ClusterServiceVersion, with `metadata/properties.yaml` appended to its
    /// `olm.properties` annotation.
    pub csv: Value,
    /// `apiextensions.k8s.io/v1` CustomResourceDefinitions, in file order.
    pub crds: Vec<Value>,
    /// Every other manifest (including CRDs of other API versions, which validation rejects).
    pub others: Vec<Value>,
    /// `properties` of the first `metadata/` file declaring any (usually
    /// `metadata/properties.yaml`).
    pub properties: Vec<Value>,
    /// `dependencies` of the first `metadata/` file declaring any (usually
    /// `metadata/dependencies.yaml`).
    pub dependencies: Vec<Value>,
    /// `metadata/` files skipped because they could not be decoded (opm skips them too).
    pub warnings: Vec<String>,
}

impl Bundle {
    /// `metadata.name` of the CSV (the bundle name).
    pub fn name(&self) -> &str {
        self.csv
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

//! The `olm.operatorframework.io/v1` API: [`ClusterExtension`] and [`ClusterCatalog`]
//! types, wire-compatible with upstream OLM v1 (docs/reference/api-and-status.md §1), the well-known keys and
//! condition vocabulary (docs/reference/api-and-status.md §1.4, §2), and generation of the CRD YAML committed in `crds/`.
//!
//! Validation the API server can do lives here as CEL rules and OpenAPI constraints on
//! the types; everything else is checked by the reconcilers. [`selector`] evaluates
//! `spec.source.catalog.selector` (apimachinery's label selector semantics) for the
//! catalog content reader and the resolver.

mod bundle_identity;
mod cluster_catalog;
mod cluster_extension;
pub mod conditions;
pub mod crd;
pub mod selector;
mod validation;

pub use bundle_identity::BundleIdentity;
pub use cluster_catalog::*;
pub use cluster_extension::*;

/// API group of both kinds.
pub const GROUP: &str = "olm.operatorframework.io";
/// The one served and stored version.
pub const VERSION: &str = "v1";

/// Finalizer on ClusterExtensions.
pub const FINALIZER_EXTENSION: &str = "olm.operatorframework.io/cleanup-unpack-cache";
/// Second ClusterExtension finalizer upstream sets (kept for compatibility when seen).
pub const FINALIZER_EXTENSION_CONTENT: &str =
    "olm.operatorframework.io/cleanup-contentmanager-cache";
/// Finalizer on ClusterCatalogs.
pub const FINALIZER_CATALOG: &str = "olm.operatorframework.io/delete-server-cache";

/// Label always set on ClusterCatalogs to their own name (selectable by users).
pub const LABEL_METADATA_NAME: &str = "olm.operatorframework.io/metadata.name";
pub const LABEL_OWNER_KIND: &str = "olm.operatorframework.io/owner-kind";
pub const LABEL_OWNER_NAME: &str = "olm.operatorframework.io/owner-name";
pub const LABEL_PACKAGE_NAME: &str = "olm.operatorframework.io/package-name";
pub const LABEL_BUNDLE_NAME: &str = "olm.operatorframework.io/bundle-name";
pub const LABEL_BUNDLE_VERSION: &str = "olm.operatorframework.io/bundle-version";
pub const LABEL_BUNDLE_RELEASE: &str = "olm.operatorframework.io/bundle-release";
pub const LABEL_BUNDLE_REFERENCE: &str = "olm.operatorframework.io/bundle-reference";

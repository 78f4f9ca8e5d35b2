//! Resolution: (catalogs' content for one package, the ClusterExtension's catalog
//! filter, the installed bundle) → the bundle to install, or the exact upstream error
//! message (docs/concepts/resolution.md §4.1–4.5). Pure: catalog content is passed in, already fetched.
//!
//! Per catalog: selector and availability, then the channel, version-range and
//! upgrade-edge predicates; survivors sorted non-deprecated first, then by
//! version+release descending; the first is the catalog's candidate. Across catalogs:
//! deprecation outranks priority, then priority, then exactly one must remain.
//! [`explain`] runs the same walk and says for every bundle why it was or was not
//! chosen. [`deprecation::deprecation_conditions`] computes the condition family.

pub mod dependencies;
pub mod deprecation;
mod identity;
mod walk;

#[cfg(test)]
mod tests;

use crate::fbc::model::{Deprecation, PackageContent};
use crate::version::{BundleVersion, ConstraintError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use walk::walk;

/// `spec.source.catalog.upgradeConstraintPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
pub enum UpgradePolicy {
    #[default]
    #[value(name = "CatalogProvided")]
    CatalogProvided,
    #[value(name = "SelfCertified")]
    SelfCertified,
}

/// `ClusterCatalog.spec.availabilityMode`: an `Unavailable` catalog is skipped.
pub use crate::api::AvailabilityMode as Availability;

/// The installed bundle as recorded (`status.install.bundle`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct InstalledBundle {
    pub name: String,
    /// As shown in status; legacy bundles carry the release as build metadata.
    pub version: String,
    /// Explicit release, if the record has one (empty = none).
    pub release: Option<String>,
}

/// What the ClusterExtension asks for (`spec.source.catalog` + installed state).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResolveRequest {
    pub package: String,
    pub channels: Vec<String>,
    /// `spec.source.catalog.version`; `None` or empty = no range.
    pub version_range: Option<String>,
    /// `spec.source.catalog.selector`; `None` = all catalogs.
    pub selector: Option<LabelSelector>,
    pub policy: UpgradePolicy,
    pub installed: Option<InstalledBundle>,
}

/// One ClusterCatalog with the package's content (or the error fetching it).
#[derive(Clone, Debug)]
pub struct CatalogInput<'a> {
    pub name: &'a str,
    pub priority: i32,
    pub availability: Availability,
    pub labels: &'a BTreeMap<String, String>,
    /// The package's FBC in this catalog; an empty `PackageContent` if the catalog
    /// does not have the package; `Err` if it could not be read.
    pub content: Result<&'a PackageContent, String>,
}

/// The catalog content reader's result ([`crate::content`], below resolution) as the
/// resolver's input: the impl lives here so that `content` does not import `resolve`.
impl crate::content::CatalogContent {
    pub fn input(&self) -> CatalogInput<'_> {
        CatalogInput {
            name: &self.name,
            priority: self.priority,
            availability: self.availability,
            labels: &self.labels,
            content: self.content.as_deref().map_err(Clone::clone),
        }
    }
}

/// The chosen bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResolvedBundle {
    pub name: String,
    pub package: String,
    #[serde(serialize_with = "ser_display")]
    pub version: BundleVersion,
    pub image: String,
    pub catalog: String,
    pub priority: i32,
    pub deprecated: bool,
}

fn ser_display<S: serde::Serializer, T: fmt::Display>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Per-catalog numbers for the `resolution failed` log line.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CatalogStats {
    pub catalog_name: String,
    pub package_found: bool,
    pub total_bundles: usize,
    pub matched_bundles: usize,
}

/// A successful resolution.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolution {
    pub bundle: ResolvedBundle,
    /// The winning catalog's deprecation object for the package (its first
    /// `olm.deprecations` blob), for [`deprecation::deprecation_conditions`].
    pub deprecation: Option<Deprecation>,
    pub stats: Vec<CatalogStats>,
}

/// No unique bundle: the upstream `resolutionError`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoUniqueBundle {
    pub package: String,
    pub version_range: Option<String>,
    pub channels: Vec<String>,
    /// The installed version as recorded, when upgrading.
    pub installed_version: Option<String>,
    /// Catalogs of the remaining (tied) candidates, sorted; empty if none.
    pub catalogs: Vec<String>,
    pub stats: Vec<CatalogStats>,
}

impl fmt::Display for NoUniqueBundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        if let Some(v) = &self.installed_version {
            s.push_str(&format!(
                "error upgrading from currently installed version {v:?}: "
            ));
        }
        if self.catalogs.len() > 1 {
            s.push_str(&format!("found bundles for package {:?} ", self.package));
        } else {
            s.push_str(&format!("no bundles found for package {:?} ", self.package));
        }
        if let Some(r) = self.version_range.as_deref().filter(|r| !r.is_empty()) {
            s.push_str(&format!("matching version {r:?} "));
        }
        if !self.channels.is_empty() {
            s.push_str(&format!("in channels [{}] ", self.channels.join(" ")));
        }
        if self.catalogs.len() > 1 {
            s.push_str(&format!(
                "in multiple catalogs with the same priority [{}] ",
                self.catalogs.join(" ")
            ));
        }
        f.write_str(s.trim())
    }
}

/// Resolution errors, displayed exactly as upstream reports them (docs/concepts/resolution.md §4.1–4.5).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("desired catalog selector is invalid: {0}")]
    InvalidSelector(String),
    #[error("desired version range {range:?} is invalid: {source}")]
    InvalidVersionRange {
        range: String,
        source: ConstraintError,
    },
    #[error(
        "error walking catalogs: error getting package {package:?} from catalog {catalog:?}: {message}"
    )]
    CatalogContent {
        package: String,
        catalog: String,
        message: String,
    },
    #[error(
        "error walking catalogs: error finding upgrade edges: error parsing installed bundle version: {0}"
    )]
    InstalledVersion(String),
    #[error("{0}")]
    NoUniqueBundle(Box<NoUniqueBundle>),
    /// Upstream's refusal; `detail` is what olmv1 adds after it (empty: upstream's
    /// message exactly), e.g. the missing dependencies and what would satisfy them
    /// ([`dependencies::Check::detail`]).
    #[error(
        "validating bundle {bundle:?}: bundle {bundle:?} has a dependency declared via property {property:?} which is currently not supported{detail}"
    )]
    UnsupportedDependency {
        bundle: String,
        property: String,
        detail: String,
    },
}

impl ResolveError {
    /// Whether a matching catalog no longer exists at all (the controller keeps the
    /// installed bundle as target in that case, docs/reference/api-and-status.md §3 step 4).
    pub fn no_catalog_had_package(&self) -> bool {
        matches!(self, ResolveError::NoUniqueBundle(e) if e.stats.iter().all(|s| !s.package_found))
    }
}

/// Why one bundle was or was not chosen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum Reason {
    CatalogNotSelected,
    CatalogUnavailable,
    InvalidVersion {
        error: String,
    },
    NotInChannels {
        channels: Vec<String>,
    },
    OutsideRange {
        range: String,
    },
    NotSuccessor {
        installed: String,
    },
    /// Another bundle of the same catalog is preferred.
    Outranked {
        by: String,
        deprecated: bool,
    },
    /// This catalog's candidate is deprecated and another catalog has a
    /// non-deprecated one.
    DeprecatedCandidate {
        preferred_catalog: String,
    },
    LowerPriority {
        priority: i32,
        winner_catalog: String,
        winner_priority: i32,
    },
    Ambiguous {
        catalogs: Vec<String>,
    },
    Chosen,
    Rejected {
        error: String,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::CatalogNotSelected => write!(f, "catalog not selected by the selector"),
            Reason::CatalogUnavailable => write!(f, "catalog availabilityMode is Unavailable"),
            Reason::InvalidVersion { error } => write!(f, "invalid version: {error}"),
            Reason::NotInChannels { channels } => {
                write!(f, "not in channels [{}]", channels.join(" "))
            }
            Reason::OutsideRange { range } => write!(f, "outside version range {range:?}"),
            Reason::NotSuccessor { installed } => write!(f, "not a successor of {installed}"),
            Reason::Outranked {
                by,
                deprecated: true,
            } => write!(f, "deprecated; {by} is not"),
            Reason::Outranked {
                by,
                deprecated: false,
            } => write!(f, "eligible, but {by} is higher"),
            Reason::DeprecatedCandidate { preferred_catalog } => {
                write!(
                    f,
                    "deprecated; catalog {preferred_catalog} has a non-deprecated candidate"
                )
            }
            Reason::LowerPriority {
                priority,
                winner_catalog,
                winner_priority,
            } => write!(
                f,
                "lower priority: catalog priority {priority} < {winner_priority} of catalog {winner_catalog}"
            ),
            Reason::Ambiguous { catalogs } => {
                write!(
                    f,
                    "eligible, but tied with catalogs of the same priority [{}]",
                    catalogs.join(" ")
                )
            }
            Reason::Chosen => write!(f, "chosen"),
            Reason::Rejected { error } => write!(f, "chosen, then rejected: {error}"),
        }
    }
}

/// The verdict for one bundle of one catalog.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BundleExplanation {
    pub catalog: String,
    pub bundle: String,
    /// The version as shown in status, `None` if it does not parse.
    pub version: Option<String>,
    pub deprecated: bool,
    pub reasons: Vec<Reason>,
}

/// [`explain`]'s result: the resolution outcome plus one entry per bundle.
#[derive(Clone, Debug)]
pub struct Explanation {
    pub result: Result<Resolution, ResolveError>,
    pub bundles: Vec<BundleExplanation>,
}

/// Resolves the bundle to install.
pub fn resolve(
    request: &ResolveRequest,
    catalogs: &[CatalogInput<'_>],
) -> Result<Resolution, ResolveError> {
    walk(request, catalogs, None, None)
}

/// [`resolve`] without refusing a winner that declares dependencies: the resolution and
/// the winner's dependency properties (empty when it has none), for
/// [`dependencies`] to check against the cluster.
pub fn resolve_with_dependencies(
    request: &ResolveRequest,
    catalogs: &[CatalogInput<'_>],
) -> Result<(Resolution, Vec<crate::fbc::model::Property>), ResolveError> {
    let mut deps = Vec::new();
    walk(request, catalogs, None, Some(&mut deps)).map(|r| (r, deps))
}

/// [`explain`] without refusing a winner that declares dependencies; its dependency
/// properties are returned beside the explanation.
pub fn explain_with_dependencies(
    request: &ResolveRequest,
    catalogs: &[CatalogInput<'_>],
) -> (Explanation, Vec<crate::fbc::model::Property>) {
    let (mut bundles, mut deps) = (Vec::new(), Vec::new());
    let result = walk(request, catalogs, Some(&mut bundles), Some(&mut deps));
    (Explanation { result, bundles }, deps)
}

/// Resolves like [`resolve`] and explains the verdict for every bundle of the package
/// in every catalog (in catalog order, then bundle order).
pub fn explain(request: &ResolveRequest, catalogs: &[CatalogInput<'_>]) -> Explanation {
    let mut bundles = Vec::new();
    let result = walk(request, catalogs, Some(&mut bundles), None);
    Explanation { result, bundles }
}

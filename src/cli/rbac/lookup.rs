//! The catalog lookup of `olmv1 rbac --catalog`: the bundle (and so the image) of
//! `package@version`, or of `package` alone the bundle resolution would choose.

use crate::fbc::model::PackageContent;
use crate::resolve::{Availability, CatalogInput, ResolveRequest, UpgradePolicy};
use crate::version::BundleVersion;
use std::collections::BTreeMap;

/// Most versions listed when the requested version is not in the package.
pub(super) const MAX_LISTED_VERSIONS: usize = 20;

/// A bundle found in a catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogBundle {
    pub name: String,
    pub version: String,
    pub image: String,
}

/// Why a catalog lookup found no bundle image.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error("package {package:?} is not in catalog {catalog}")]
    PackageNotFound { package: String, catalog: String },
    #[error("invalid version {version:?}: {reason}")]
    InvalidVersion { version: String, reason: String },
    #[error(
        "package {package:?} in catalog {catalog} has no version {version}; available: {available}"
    )]
    VersionNotFound {
        package: String,
        catalog: String,
        version: String,
        available: String,
    },
    #[error("bundle {bundle} of package {package:?} in catalog {catalog} has no image")]
    NoImage {
        package: String,
        catalog: String,
        bundle: String,
    },
    #[error("package {package:?} in catalog {catalog}: {message}")]
    Resolve {
        package: String,
        catalog: String,
        message: String,
    },
}

/// The versions of a package's bundles, highest first, at most [`MAX_LISTED_VERSIONS`]
/// (then "and N more").
fn listed_versions(content: &PackageContent) -> String {
    let mut versions: Vec<BundleVersion> = content
        .bundles
        .iter()
        .filter_map(|b| BundleVersion::of_bundle(b).ok())
        .collect();
    versions.sort_by(|a, b| b.cmp(a));
    versions.dedup();
    if versions.is_empty() {
        return "none".to_string();
    }
    let shown: Vec<String> = versions
        .iter()
        .take(MAX_LISTED_VERSIONS)
        .map(ToString::to_string)
        .collect();
    let mut text = shown.join(", ");
    if versions.len() > MAX_LISTED_VERSIONS {
        text.push_str(&format!(
            " and {} more",
            versions.len() - MAX_LISTED_VERSIONS
        ));
    }
    text
}

/// Finds the bundle of `package` (the content read from `catalog`, named in errors)
/// with `version`, or with `None` the bundle `olmv1 resolve --package` (a
/// ClusterExtension naming only the package, nothing installed) would choose.
pub fn find_bundle(
    content: &PackageContent,
    catalog: &str,
    package: &str,
    version: Option<&str>,
) -> Result<CatalogBundle, LookupError> {
    if content.package.is_none() && content.bundles.is_empty() {
        return Err(LookupError::PackageNotFound {
            package: package.to_string(),
            catalog: catalog.to_string(),
        });
    }
    let found = match version {
        Some(v) => {
            let wanted =
                BundleVersion::new_lenient(v, None).map_err(|e| LookupError::InvalidVersion {
                    version: v.to_string(),
                    reason: e.to_string(),
                })?;
            let bundle = content
                .bundles
                .iter()
                .find(|b| BundleVersion::of_bundle(b).is_ok_and(|bv| bv.same_as(&wanted)))
                .ok_or_else(|| LookupError::VersionNotFound {
                    package: package.to_string(),
                    catalog: catalog.to_string(),
                    version: wanted.to_string(),
                    available: listed_versions(content),
                })?;
            CatalogBundle {
                name: bundle.name.clone(),
                version: wanted.to_string(),
                image: bundle.image.clone(),
            }
        }
        None => {
            let request = ResolveRequest {
                package: package.to_string(),
                channels: Vec::new(),
                version_range: None,
                selector: None,
                policy: UpgradePolicy::CatalogProvided,
                installed: None,
            };
            let labels = BTreeMap::new();
            let input = CatalogInput {
                name: catalog,
                priority: 0,
                availability: Availability::Available,
                labels: &labels,
                content: Ok(content),
            };
            let chosen = crate::resolve::resolve(&request, &[input])
                .map_err(|e| LookupError::Resolve {
                    package: package.to_string(),
                    catalog: catalog.to_string(),
                    message: e.to_string(),
                })?
                .bundle;
            CatalogBundle {
                name: chosen.name,
                version: chosen.version.to_string(),
                image: chosen.image,
            }
        }
    };
    if found.image.is_empty() {
        return Err(LookupError::NoImage {
            package: package.to_string(),
            catalog: catalog.to_string(),
            bundle: found.name,
        });
    }
    Ok(found)
}

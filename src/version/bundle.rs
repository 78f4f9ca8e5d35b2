//! Bundle versions: the `olm.package` property's `version` (strict semver) plus the
//! bundle's release, and their ordering (docs/concepts/resolution.md §4.3.2).
//!
//! * Explicit `release` key in the property (newer catalogs): release = that value,
//!   build metadata stays part of the version.
//! * No `release` key (legacy registry+v1): if the build metadata is a valid release
//!   (dot-separated identifiers, numeric ones without leading zeros, at most 20
//!   characters), it becomes the release and is removed from the version.
//!
//! Order: semver precedence (build ignored), then release, where any release is
//! greater than none and two releases compare like pre-release identifiers.

use semver::{BuildMetadata, Prerelease, Version};
use std::cmp::Ordering;
use std::fmt;

/// Maximum length of a release (the CRD's `status.install.bundle.release` maxLength).
pub const MAX_RELEASE_LEN: usize = 20;

/// A bundle release: dot-separated identifiers ordered like semver pre-release ones.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Release(Prerelease);

impl Release {
    pub fn parse(s: &str) -> Result<Release, VersionError> {
        let bad = |why: &str| VersionError::Release {
            release: s.to_string(),
            reason: why.to_string(),
        };
        if s.is_empty() {
            return Err(bad("empty"));
        }
        if s.len() > MAX_RELEASE_LEN {
            return Err(bad(&format!("longer than {MAX_RELEASE_LEN} characters")));
        }
        Prerelease::new(s)
            .map(Release)
            .map_err(|e| bad(&e.to_string()))
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

impl PartialOrd for Release {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Release {
    fn cmp(&self, other: &Self) -> Ordering {
        // Both non-empty: semver's pre-release identifier order.
        self.0.cmp(&other.0)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("bundle has no olm.package property")]
    MissingProperty,
    #[error("olm.package property has no string \"version\"")]
    MissingVersion,
    #[error("invalid version {version:?}: {reason}")]
    Version { version: String, reason: String },
    #[error("invalid release {release:?}: {reason}")]
    Release { release: String, reason: String },
}

/// A bundle's version and release.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BundleVersion {
    /// The semver version; for legacy bundles the release has been removed from
    /// the build metadata.
    pub version: Version,
    pub release: Option<Release>,
    /// The release came from build metadata (legacy bundle).
    pub legacy_release: bool,
}

impl BundleVersion {
    /// From the `version` and optional `release` values of an `olm.package` property.
    /// `release: Some("")` counts as no release.
    pub fn new(version: &str, release: Option<&str>) -> Result<BundleVersion, VersionError> {
        let mut v = Version::parse(version).map_err(|e| VersionError::Version {
            version: version.to_string(),
            reason: e.to_string(),
        })?;
        match release {
            Some(r) if !r.is_empty() => Ok(BundleVersion {
                version: v,
                release: Some(Release::parse(r)?),
                legacy_release: false,
            }),
            Some(_) => Ok(BundleVersion {
                version: v,
                release: None,
                legacy_release: false,
            }),
            None => {
                let release = if v.build.is_empty() {
                    None
                } else {
                    Release::parse(v.build.as_str()).ok()
                };
                let legacy_release = release.is_some();
                if legacy_release {
                    v.build = BuildMetadata::EMPTY;
                }
                Ok(BundleVersion {
                    version: v,
                    release,
                    legacy_release,
                })
            }
        }
    }

    /// Like [`BundleVersion::new`], but tolerates a leading `v` (installed-bundle
    /// records written by other tools).
    pub fn new_lenient(
        version: &str,
        release: Option<&str>,
    ) -> Result<BundleVersion, VersionError> {
        BundleVersion::new(version, release).or_else(|e| match version.strip_prefix('v') {
            Some(rest) => BundleVersion::new(rest, release),
            None => Err(e),
        })
    }

    /// The version as `status.install.bundle.version` shows it: legacy bundles
    /// re-embed the release as build metadata (`1.0.0+2`).
    pub fn status_version(&self) -> String {
        match (&self.release, self.legacy_release) {
            (Some(r), true) => format!("{}+{}", self.version, r),
            _ => self.version.to_string(),
        }
    }

    /// `status.install.bundle.release`: the release, empty if none.
    pub fn status_release(&self) -> String {
        self.release
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default()
    }

    /// The same version and release (build metadata ignored).
    pub fn same_as(&self, other: &BundleVersion) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl fmt::Display for BundleVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.status_version())
    }
}

impl PartialOrd for BundleVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Precedence order; note that two versions differing only in build metadata are
/// equal under this order while `==` (derived) tells them apart.
impl Ord for BundleVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.version.cmp_precedence(&other.version).then_with(|| {
            match (&self.release, &other.release) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Less,
                (Some(_), None) => Ordering::Greater,
                (Some(a), Some(b)) => a.cmp(b),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bv(v: &str, r: Option<&str>) -> BundleVersion {
        BundleVersion::new(v, r).unwrap()
    }

    #[test]
    fn legacy_build_metadata_becomes_release() {
        let b = bv("1.0.0+2", None);
        assert_eq!(b.version, Version::new(1, 0, 0));
        assert_eq!(b.release.as_ref().map(Release::as_str), Some("2"));
        assert_eq!(b.status_version(), "1.0.0+2");
        assert_eq!(b.status_release(), "2");
        // leading zero: not a release, stays build metadata
        let b = bv("1.0.0+02", None);
        assert!(b.release.is_none());
        assert_eq!(b.version.build.as_str(), "02");
        assert_eq!(b.status_version(), "1.0.0+02");
        // too long for a release
        let b = bv("1.0.0+abcdefghijklmnopqrstu", None);
        assert!(b.release.is_none());
    }

    #[test]
    fn explicit_release_keeps_build_metadata() {
        let b = bv("1.0.0+git.abc", Some("3"));
        assert_eq!(b.version.build.as_str(), "git.abc");
        assert_eq!(b.release.as_ref().map(Release::as_str), Some("3"));
        assert_eq!(b.status_version(), "1.0.0+git.abc");
        assert!(bv("1.0.0", Some("")).release.is_none());
        assert!(BundleVersion::new("1.0.0", Some("01")).is_err());
    }

    #[test]
    fn ordering() {
        let ordered = [
            bv("0.9.0", None),
            bv("1.0.0-rc.1", None),
            bv("1.0.0", None),
            bv("1.0.0", Some("1")),
            bv("1.0.0", Some("2")),
            bv("1.0.0", Some("10")),
            bv("1.0.0", Some("10.1")),
            bv("1.0.0", Some("alpha")),
            bv("1.0.1", None),
        ];
        for w in ordered.windows(2) {
            assert!(w[0] < w[1], "{:?} < {:?}", w[0], w[1]);
        }
        assert!(bv("1.0.0+2", None).same_as(&bv("1.0.0", Some("2"))));
        assert_eq!(
            bv("1.0.0+a.b", Some("1")).cmp(&bv("1.0.0+c", Some("1"))),
            Ordering::Equal
        );
    }

    #[test]
    fn invalid_versions() {
        for v in ["", "1.0", "v1.0.0", "01.0.0", "1.0.0-01", "latest"] {
            assert!(BundleVersion::new(v, None).is_err(), "{v}");
        }
        assert!(BundleVersion::new_lenient("v1.0.0", None).is_ok());
    }
}

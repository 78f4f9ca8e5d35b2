//! [`BundleIdentity`]: the one description of "which bundle" that travels from
//! resolution (the resolved catalog entry) through pull, render and apply (the revision
//! record) to the status (`status.install.bundle`) and Events. Conversions from the
//! resolver's and to the status's shapes live here and nowhere else.

use super::BundleMetadata;
use serde::{Deserialize, Serialize};

/// Which bundle: package, bundle name, version as the status shows it, release, image.
///
/// Serialized as the revision record stores it (`bundle_name`, kept so that records
/// written by earlier releases still read).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleIdentity {
    pub package: String,
    #[serde(rename = "bundle_name")]
    pub name: String,
    /// As shown in status: legacy registry+v1 releases are re-embedded as build metadata
    /// (`1.0.0+2`).
    pub version: String,
    /// The explicit release, when the catalog gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    /// The bundle image: the catalog's reference until pulled, then digest-pinned.
    pub image: String,
}

impl BundleIdentity {
    /// `status.install.bundle`.
    pub fn metadata(&self) -> BundleMetadata {
        BundleMetadata {
            name: self.name.clone(),
            version: self.version.clone(),
            release: self.release.clone().filter(|r| !r.is_empty()),
        }
    }

    /// The same bundle, pulled: `image` is the digest-pinned reference.
    pub fn pulled(&self, image: &str) -> BundleIdentity {
        BundleIdentity {
            image: image.to_string(),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_and_writes_the_revision_record_format() {
        let record = json!({"package": "p", "bundle_name": "p.v1.0.0", "version": "1.0.0+2",
                            "image": "r/p@sha256:00"});
        let id: BundleIdentity = serde_json::from_value(record.clone()).unwrap();
        assert_eq!(id.name, "p.v1.0.0");
        assert_eq!(id.release, None);
        assert_eq!(serde_json::to_value(&id).unwrap(), record);
    }

    #[test]
    fn status_metadata_drops_an_empty_release() {
        let id = BundleIdentity {
            name: "p.v1".into(),
            version: "1.0.0".into(),
            release: Some(String::new()),
            ..Default::default()
        };
        assert_eq!(id.metadata().release, None);
        assert_eq!(id.pulled("r@sha256:1").image, "r@sha256:1");
    }
}

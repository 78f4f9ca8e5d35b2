//! Between resolution and the rest of the flow: the resolved bundle as a
//! [`BundleIdentity`] (what is pulled, applied, recorded and reported), and the
//! installed bundle's identity as the resolver's starting point.

use super::{InstalledBundle, ResolvedBundle};
use crate::api::BundleIdentity;

impl ResolvedBundle {
    /// The bundle to install: its version as the status shows it (legacy releases as
    /// build metadata), its release when it has one, the catalog's image reference.
    pub fn identity(&self) -> BundleIdentity {
        BundleIdentity {
            package: self.package.clone(),
            name: self.name.clone(),
            version: self.version.status_version(),
            release: Some(self.version.status_release()).filter(|r| !r.is_empty()),
            image: self.image.clone(),
        }
    }
}

impl From<&BundleIdentity> for InstalledBundle {
    fn from(id: &BundleIdentity) -> Self {
        InstalledBundle {
            name: id.name.clone(),
            version: id.version.clone(),
            release: id.release.clone(),
        }
    }
}

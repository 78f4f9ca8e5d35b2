//! The cache of clean installs ([`CleanInstalls`]): per extension, the last install
//! while none of its objects drifted since. The watch tasks forget an extension when
//! they see drift; [`super::DriftWatches::unchanged`] reads it to skip an install that
//! would be made again.

use crate::controller::extension::plan::Installed;
use crate::controller::extension::rollout::Readiness;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The last install of an extension, kept while nothing drifted.
#[derive(Debug, Clone)]
pub struct Clean {
    /// What the install was made of ([`super::super::plan::fingerprint`]).
    pub fingerprint: String,
    /// Its result, as a reconcile that skips the install reports it.
    pub installed: Installed,
}

/// Extension → its clean last install; clones share the cache.
#[derive(Debug, Clone, Default)]
pub(super) struct CleanInstalls(Arc<Mutex<HashMap<String, Clean>>>);

impl CleanInstalls {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Clean>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers `clean` as `extension`'s last install (`None`: forgets it).
    pub fn set(&self, extension: &str, clean: Option<Clean>) {
        let mut cleans = self.lock();
        match clean {
            Some(clean) => cleans.insert(extension.to_owned(), clean),
            None => cleans.remove(extension),
        };
    }

    /// `extension`'s clean install, when it was made of `fingerprint`.
    pub fn matching(&self, extension: &str, fingerprint: &str) -> Option<Installed> {
        let cleans = self.lock();
        let clean = cleans.get(extension)?;
        (clean.fingerprint == fingerprint).then(|| clean.installed.clone())
    }

    /// Records the readiness read again for `extension`'s clean install.
    pub fn note_readiness(&self, extension: &str, readiness: Readiness) {
        if let Some(clean) = self.lock().get_mut(extension) {
            clean.installed.readiness = readiness;
        }
    }

    /// Whether `extension` has a clean install whose rollout was not finished when last
    /// read: a readiness change of its objects then only asks for a read of readiness.
    pub fn rolling_out(&self, extension: &str) -> bool {
        self.lock()
            .get(extension)
            .is_some_and(|c| c.installed.readiness != Readiness::Ready)
    }

    /// Forgets `extension`'s clean install.
    pub fn forget(&self, extension: &str) {
        self.lock().remove(extension);
    }
}

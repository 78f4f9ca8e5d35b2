//! The cache of clean installs ([`CleanInstalls`]): per extension, the last install
//! while none of its objects drifted since. The watch tasks forget an extension when
//! they see drift; [`super::DriftWatches::unchanged`] reads it to skip an install that
//! would be made again.
//!
//! An install runs between [`CleanInstalls::begin`] and [`CleanInstalls::finish`]. The
//! drift the watches see in between is kept ([`Witnessed`]): the install's own writes
//! show up as drift too (a changed generation), but a user deleting or editing an object
//! while the install runs must not be hidden by the install marking itself clean after
//! that event (the reconcile the event triggered would then skip the install, and the
//! object would stay deleted). So `finish` keeps the install clean only when every
//! drift seen meanwhile is [`covered`] by the install itself (`tests/drift.rs`).

use crate::apply::ObjectRef;
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

/// Drift a watch saw while an install of its extension ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Witnessed {
    pub group: String,
    pub kind: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
    /// The generation the event showed; `None`: deleted (or gone from a re-list).
    pub generation: Option<i64>,
}

impl Witnessed {
    fn is(&self, r: &ObjectRef) -> bool {
        (&r.group, &r.kind, &r.namespace, &r.name)
            == (&self.group, &self.kind, &self.namespace, &self.name)
    }
}

/// At most this many drift events are kept per install; beyond, the install is not
/// clean (its next reconcile installs again).
const MAX_WITNESSED: usize = 256;

/// Whether the install that applied `installed` (with the generations its apply
/// returned, `generations`) accounts for `w`: an object it no longer installs (pruned:
/// its deletion is the install's own), or one it applied whose event shows a generation
/// no newer than the one its apply returned. A deletion of an installed object, or an
/// edit after the apply, is not.
pub fn covered(w: &Witnessed, installed: &[ObjectRef], generations: &[(ObjectRef, i64)]) -> bool {
    if !installed.iter().any(|r| w.is(r)) {
        return true;
    }
    let applied = generations.iter().find(|(r, _)| w.is(r)).map(|(_, g)| *g);
    matches!((w.generation, applied), (Some(seen), Some(ours)) if seen <= ours)
}

#[derive(Debug, Default)]
struct State {
    clean: HashMap<String, Clean>,
    /// Extensions with an install in progress, and the drift seen since it began.
    installing: HashMap<String, Vec<Witnessed>>,
}

/// Extension → its clean last install; clones share the cache.
#[derive(Debug, Clone, Default)]
pub(super) struct CleanInstalls(Arc<Mutex<State>>);

impl CleanInstalls {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An install of `extension` begins: it is not clean, and drift is kept until
    /// [`CleanInstalls::finish`].
    pub fn begin(&self, extension: &str) {
        let mut state = self.lock();
        state.clean.remove(extension);
        state.installing.insert(extension.to_owned(), Vec::new());
    }

    /// A watch saw `drift` of `extension`'s objects: it is not clean (and an install in
    /// progress keeps what was seen).
    pub fn drifted(&self, extension: &str, drift: impl IntoIterator<Item = Witnessed>) {
        let mut state = self.lock();
        state.clean.remove(extension);
        if let Some(seen) = state.installing.get_mut(extension) {
            for w in drift {
                if seen.len() > MAX_WITNESSED {
                    break;
                }
                seen.push(w);
            }
        }
    }

    /// The install of `extension` ended with `clean`: remembered as its last clean
    /// install unless drift seen since [`CleanInstalls::begin`] is not `covered` by it.
    pub fn finish(
        &self,
        extension: &str,
        clean: Option<Clean>,
        covered: impl Fn(&Witnessed) -> bool,
    ) {
        let mut state = self.lock();
        let seen = state.installing.remove(extension).unwrap_or_default();
        let clean = clean.filter(|_| seen.len() <= MAX_WITNESSED && seen.iter().all(&covered));
        match clean {
            Some(clean) => state.clean.insert(extension.to_owned(), clean),
            None => state.clean.remove(extension),
        };
    }

    /// `extension`'s clean install, when it was made of `fingerprint`.
    pub fn matching(&self, extension: &str, fingerprint: &str) -> Option<Installed> {
        let state = self.lock();
        let clean = state.clean.get(extension)?;
        (clean.fingerprint == fingerprint).then(|| clean.installed.clone())
    }

    /// Records the readiness read again for `extension`'s clean install.
    pub fn note_readiness(&self, extension: &str, readiness: Readiness) {
        if let Some(clean) = self.lock().clean.get_mut(extension) {
            clean.installed.readiness = readiness;
        }
    }

    /// Whether `extension` has a clean install whose rollout was not finished when last
    /// read: a readiness change of its objects then only asks for a read of readiness.
    pub fn rolling_out(&self, extension: &str) -> bool {
        self.lock()
            .clean
            .get(extension)
            .is_some_and(|c| c.installed.readiness != Readiness::Ready)
    }

    /// Forgets `extension`'s clean install, and any install of it in progress.
    pub fn forget(&self, extension: &str) {
        let mut state = self.lock();
        state.clean.remove(extension);
        state.installing.remove(extension);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(kind: &str, name: &str) -> ObjectRef {
        ObjectRef {
            group: "apps".into(),
            version: "v1".into(),
            kind: kind.into(),
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    fn seen(kind: &str, name: &str, generation: Option<i64>) -> Witnessed {
        Witnessed {
            group: "apps".into(),
            kind: kind.into(),
            namespace: "ns".into(),
            name: name.into(),
            generation,
        }
    }

    fn clean() -> Clean {
        Clean {
            fingerprint: "f".into(),
            installed: Installed::default(),
        }
    }

    #[test]
    fn an_install_covers_its_own_writes_and_what_it_pruned_only() {
        let installed = [r("Deployment", "d"), r("ConfigMap", "c")];
        let generations = [(r("Deployment", "d"), 3)];
        let covered = |w: Witnessed| covered(&w, &installed, &generations);
        assert!(covered(seen("Deployment", "d", Some(3))), "its own apply");
        assert!(covered(seen("Deployment", "d", Some(2))), "an older update");
        assert!(
            !covered(seen("Deployment", "d", Some(4))),
            "edited after it"
        );
        assert!(!covered(seen("Deployment", "d", None)), "deleted");
        assert!(
            !covered(seen("ConfigMap", "c", None)),
            "deleted, no generation"
        );
        assert!(covered(seen("Deployment", "old", None)), "pruned");
        assert!(
            covered(seen("Deployment", "old", Some(9))),
            "no longer installed"
        );
        let elsewhere = Witnessed {
            namespace: "other".into(),
            ..seen("Deployment", "d", Some(3))
        };
        assert!(
            covered(elsewhere),
            "same name in another namespace: not installed"
        );
    }

    #[test]
    fn drift_during_an_install_that_it_does_not_cover_keeps_it_unclean() {
        let cleans = CleanInstalls::default();
        let installed = [r("Deployment", "d"), r("ConfigMap", "c")];
        let generations = [(r("Deployment", "d"), 3)];
        let finish = |cleans: &CleanInstalls| {
            cleans.finish("e", Some(clean()), |w| covered(w, &installed, &generations));
            cleans.matching("e", "f").is_some()
        };
        // Its own write seen while it ran: clean.
        cleans.begin("e");
        cleans.drifted("e", [seen("Deployment", "d", Some(3))]);
        assert!(finish(&cleans));
        // A user deleted the ConfigMap while it ran (after its apply): not clean, so
        // the reconcile that deletion triggered installs again.
        cleans.begin("e");
        assert!(
            cleans.matching("e", "f").is_none(),
            "not clean while installing"
        );
        cleans.drifted("e", [seen("ConfigMap", "c", None)]);
        assert!(!finish(&cleans));
        // Drift after the install ended forgets it, as before.
        cleans.begin("e");
        assert!(finish(&cleans));
        cleans.drifted("e", [seen("Deployment", "d", Some(3))]);
        assert!(cleans.matching("e", "f").is_none());
        // Past the limit of kept drift: not clean.
        cleans.begin("e");
        let many = (0..=MAX_WITNESSED + 1).map(|_| seen("Deployment", "d", Some(3)));
        cleans.drifted("e", many);
        assert!(!finish(&cleans));
        // Stopping forgets an install in progress too.
        cleans.begin("e");
        cleans.drifted("e", [seen("ConfigMap", "c", None)]);
        cleans.forget("e");
        assert!(finish(&cleans), "nothing kept from before");
    }
}

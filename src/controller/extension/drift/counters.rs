//! What the drift watches of one [`super::DriftWatches`] did and hold, as counters
//! ([`Counters`]): the reconciles drift triggered, the installs skipped as unchanged,
//! and the watches running now. One set per `DriftWatches` (the process embedding the
//! controller — `tests/drift.rs` — hands it in), no process-wide state.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The counters of one [`super::DriftWatches`]; clones share the values.
#[derive(Debug, Clone, Default)]
pub struct Counters(Arc<Values>);

#[derive(Debug, Default)]
struct Values {
    /// Reconciles triggered by drift.
    triggers: AtomicU64,
    /// Installs skipped as unchanged ([`super::DriftWatches::unchanged`]).
    skipped: AtomicU64,
    /// Extensions' own watch tasks running.
    own: AtomicUsize,
    /// Shared watch tasks running.
    shared: AtomicUsize,
    /// (extension, kind, namespace) followed, by either kind of watch.
    followed: AtomicUsize,
}

/// The watches running, as [`Counters::set_watches`] takes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Running {
    pub own: usize,
    pub shared: usize,
    pub followed: usize,
}

impl Counters {
    /// Reconciles triggered by drift.
    pub fn triggers(&self) -> u64 {
        self.0.triggers.load(Ordering::Relaxed)
    }

    /// Installs skipped as unchanged.
    pub fn skipped_installs(&self) -> u64 {
        self.0.skipped.load(Ordering::Relaxed)
    }

    /// Drift watches running (shared and extensions' own).
    pub fn watches(&self) -> usize {
        self.own_watches() + self.shared_watches()
    }

    /// Shared drift watches (one per kind, as the controller) running.
    pub fn shared_watches(&self) -> usize {
        self.0.shared.load(Ordering::Relaxed)
    }

    /// Extensions' own drift watches (as their installer accounts) running.
    pub fn own_watches(&self) -> usize {
        self.0.own.load(Ordering::Relaxed)
    }

    /// (extension, kind, namespace) followed by a drift watch of either kind.
    pub fn followed(&self) -> usize {
        self.0.followed.load(Ordering::Relaxed)
    }

    pub(super) fn count_trigger(&self) {
        self.0.triggers.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn count_skipped(&self) {
        self.0.skipped.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn set_watches(&self, running: Running) {
        self.0.own.store(running.own, Ordering::Relaxed);
        self.0.shared.store(running.shared, Ordering::Relaxed);
        self.0.followed.store(running.followed, Ordering::Relaxed);
    }
}

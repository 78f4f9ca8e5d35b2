//! Applying rendered objects as the installer ServiceAccount (docs/installer-permissions.md A3, docs/rendering.md A5, docs/api-and-status.md A7, docs/rendering.md §5.6):
//! impersonating clients ([`client`]), the dependency order ([`order`]), ownership labels,
//! ownerReferences and the takeover refusal ([`ownership`]), the durable revision record
//! ([`record`]), upstream OLM v1's Helm releases read for an in-place switch
//! ([`helm_release`]), and the I/O of server-side apply, pruning and uninstall ([`applier`]).
//!
//! Typical reconcile: the preflights (`preflight::run`) → [`apply`] → record the revision with
//! [`RevisionHistory::begin`] before and [`RevisionHistory::complete`] after → [`prune`]
//! the [`RevisionHistory::prune_candidates`] → [`RevisionStore::save`].

pub mod applier;
pub mod client;
pub mod helm_release;
pub mod install;
pub mod order;
pub mod ownership;
pub mod record;
mod removal;

pub use applier::{
    ApplyError, ApplyOptions, ApplyReport, FIELD_MANAGER, Resolver, UninstallOptions,
    UninstallReport, apply, garbage_collection_fallback, prune, resource_map, uninstall,
};
pub use client::{InstallerClients, WatchSlot, installer_client, installer_config};
pub use install::{InstallError, InstallOutcome, install_revision};
pub use order::{Phase, PhaseKind, apply_order};
pub use ownership::{Owner, with_ownership};
pub use record::{ObjectRef, RecordError, Revision, RevisionHistory, RevisionState, RevisionStore};

//! Applying rendered objects as the installer ServiceAccount (docs/concepts/installer-permissions.md A3, docs/concepts/rendering.md A5, docs/reference/api-and-status.md A7, docs/concepts/rendering.md §5.6):
//! impersonating clients ([`client`]), the dependency order ([`order`]), ownership labels,
//! ownerReferences and the takeover refusal ([`ownership`]), the durable revision record
//! ([`record`]), the I/O of server-side apply ([`applier`]; the wait for CRDs to be
//! Established, `establish`) and of pruning and uninstall (`removal`), and the one
//! install step, record → apply → prune → record
//! ([`install_revision`](mod@install_revision)). What these files share is in [`types`],
//! the bounded gunzip of stored records in [`gzip`]. Reading what another manager
//! installed, to take it over, is not here but in `crate::migrate`.
//!
//! Typical reconcile: the preflights (`preflight::run`) → [`apply`] → record the revision with
//! [`RevisionHistory::begin`] before and [`RevisionHistory::complete`] after → [`prune`]
//! the [`RevisionHistory::prune_candidates`] → [`RevisionStore::save`] (all of it:
//! [`install_revision()`]).

pub mod applier;
pub mod client;
mod establish;
pub mod gzip;
pub mod install_revision;
pub mod order;
pub mod ownership;
pub mod record;
mod removal;
pub mod types;

pub use applier::{ApplyError, ApplyOptions, ApplyReport, Resolver, apply, resource_map};
pub use client::{InstallerClients, WatchSlot, installer_client, installer_config};
pub use install_revision::{InstallError, InstallOutcome, install_revision};
pub use order::{Phase, PhaseKind, apply_order, apply_stages};
pub use ownership::{Owner, with_ownership};
pub use record::{RecordError, Revision, RevisionHistory, RevisionState, RevisionStore};
pub use removal::{
    UninstallOptions, UninstallReport, garbage_collection_fallback, prune, uninstall,
};
pub use types::{FIELD_MANAGER, ObjectRef};

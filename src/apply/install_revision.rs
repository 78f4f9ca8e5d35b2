//! Installing one revision, the install or upgrade step the reconciler calls once the
//! preflights passed (`preflight::run`): record (pending, while the takeover check
//! reads) → apply → prune → record (installed).
//! Every write of bundle content goes through the installer client.

use super::applier::{ApplyError, ApplyOptions, ApplyReport, apply_checked, check_ownership};
use super::ownership::Owner;
use super::record::{RecordError, RevisionHistory, RevisionStore};
use super::removal::prune;
use super::types::ObjectRef;
use serde_json::Value;

/// Errors of [`install_revision`].
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error(transparent)]
    Record(#[from] RecordError),
}

/// What [`install_revision`] did.
#[derive(Debug, Clone)]
pub struct InstallOutcome {
    pub revision: u64,
    pub report: ApplyReport,
    pub pruned: Vec<ObjectRef>,
    pub history: RevisionHistory,
    /// Whether the revision record was written (it is not when nothing changed).
    pub record_written: bool,
}

/// Installs `objects` of `bundle` for `owner`: records the revision as pending, applies it
/// ([`apply`]), prunes what earlier revisions had and this one does not ([`prune`]) and
/// records it as installed. The record is only written when it changes, so a re-apply of
/// the installed revision (drift correction) costs no record write. `installed_by` is
/// recorded on the revision (`status.install.installer`).
pub async fn install_revision(
    installer: &kube::Client,
    store: &RevisionStore,
    owner: &Owner,
    bundle: crate::api::BundleIdentity,
    objects: &[Value],
    installed_by: Option<crate::api::InstallerStatus>,
    opts: &ApplyOptions,
) -> Result<InstallOutcome, InstallError> {
    // The record is read and written as pending while the takeover check reads (neither
    // needs the other); a refused takeover leaves only the pending record written, as
    // when they ran one after the other.
    let pending_record = async {
        let mut history = store
            .load(owner)
            .await?
            .unwrap_or_else(|| RevisionHistory::new(owner));
        let original = history.clone();
        let revision = history.begin(bundle, objects);
        history.set_installer(revision, installed_by);
        let written = history != original;
        if written {
            store.save(&history).await?;
        }
        Ok::<_, InstallError>((history, original, revision, written))
    };
    let started = std::time::Instant::now();
    let (recorded, checked) = futures::future::join(
        pending_record,
        check_ownership(installer, owner, objects, opts),
    )
    .await;
    let (mut history, original, revision, mut record_written) = recorded?;
    let mut timer = PartTimer(started);
    timer.done("takeover check and pending record");
    let report = apply_checked(owner, objects, checked?, opts).await?;
    timer.done("apply");
    let candidates = history.prune_candidates(revision);
    let pruned = prune(installer, owner, &candidates, opts).await?;
    timer.done("prune");
    let pending = history.clone();
    history.complete(revision);
    if history != pending || (history != original && !record_written) {
        store.save(&history).await?;
        record_written = true;
    }
    timer.done("installed record");
    Ok(InstallOutcome {
        revision,
        report,
        pruned,
        history,
        record_written,
    })
}

/// Logs, at debug level, how long each part of an install took since the part before
/// (docs/design/benchmarks.md reads them to see where an install's time goes).
struct PartTimer(std::time::Instant);

impl PartTimer {
    fn done(&mut self, part: &'static str) {
        let now = std::time::Instant::now();
        let elapsed_ms = (now - self.0).as_secs_f64() * 1000.0;
        tracing::debug!(part, elapsed_ms, "install part");
        self.0 = now;
    }
}

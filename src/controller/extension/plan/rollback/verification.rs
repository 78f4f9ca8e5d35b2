//! The verification of a rollback (docs/how-to/upgrade-control.md, "Rollback"): the
//! revision gone back to is what it names — its seal checked before its image is
//! pulled ([`sealed`]), what the pulled image holds before anything is applied
//! ([`verify`]) — and the terminal refusal reported when a rollback cannot be made
//! (Progressing `Blocked`, RolledBack `False`/`RollbackRefused`, the installed bundle
//! still reported).

use super::{
    ANNOTATION_ROLLBACK_TO, ANNOTATION_UPGRADE_REMEDIATION, REASON_ROLLBACK_REFUSED, RolledBack,
};
use crate::api::conditions::REASON_BLOCKED;
use crate::apply::Revision;
use crate::apply::record::RevisionMismatch;
use crate::controller::extension::plan::{
    Facts, Install, Next, Rendered, Report, observe, warning,
};
use crate::controller::extension::status::Outcome;

/// Before its image is pulled: `revision` (of `to`, asked by `rollback-to`) still carries
/// the seal it was recorded with, or the refusal.
pub(super) fn sealed(
    facts: &Facts,
    history: &crate::apply::RevisionHistory,
    revision: &Revision,
    to: &str,
) -> Result<(), Box<Report>> {
    history
        .check_integrity(revision.number)
        .map_err(|mismatch| Box::new(refusal(facts, requested_refused(to, &mismatch))))
}

/// The refusal of `rollback-to: <to>` to a revision that is not what it names.
pub(super) fn requested_refused(to: &str, mismatch: &RevisionMismatch) -> String {
    format!("rollback to {to} refused: {mismatch}")
}

/// The refusal of a remediation's rollback to `to`, a revision that is not what it names.
pub(super) fn remediation_refused(to: &str, mismatch: &RevisionMismatch) -> String {
    format!("rollback to {to} ({ANNOTATION_UPGRADE_REMEDIATION}: Rollback) refused: {mismatch}")
}

/// Before a rollback's rendered bundle is applied: the image pulled for the revision it
/// returns to holds the bundle the revision names (package, bundle name and version from
/// the image's own metadata, the recorded digest); the terminal refusal when it does not.
/// `None` for any other install, or when they agree.
pub(in crate::controller::extension::plan) fn verify(
    facts: &Facts,
    install: &Install,
    rendered: &Rendered,
) -> Option<Box<Report>> {
    let number = install.rollback.as_ref()?.revision?;
    let history = facts.history()?;
    let checked = history
        .check_integrity(number)
        .and_then(|()| history.check_pulled(number, rendered.pulled.as_ref(), &rendered.image));
    let mismatch = checked.err()?;
    let to = &install.target.version;
    let message = if facts.controls.rollback_to.is_some() {
        requested_refused(to, &mismatch)
    } else {
        remediation_refused(to, &mismatch)
    };
    Some(Box::new(refusal(facts, message)))
}

/// A rollback that cannot be made: terminal until the annotation, the record or the
/// live CRDs change; the installed bundle stays reported.
pub(super) fn refused(facts: &Facts, to: &str, why: &str) -> Report {
    let message = format!(
        "rollback to {to} refused: {why}; remove annotation {ANNOTATION_ROLLBACK_TO} or name a recorded version"
    );
    refusal(facts, message)
}

pub(super) fn refusal(facts: &Facts, message: String) -> Report {
    let installed = facts.installed();
    let outcome = Outcome::Blocked {
        reason: REASON_BLOCKED,
        message: message.clone(),
    };
    let mut observation = observe(facts, installed.cloned(), outcome, None);
    let before = facts.controls.rolled_back_before.as_ref();
    let mut events = Vec::new();
    if before.is_none_or(|b| b.message != message) {
        events.push(warning("RollbackRefused", "Rollback", message.clone()));
    }
    observation.control.rolled_back = Some(RolledBack {
        status: false,
        reason: REASON_ROLLBACK_REFUSED,
        message,
    });
    Report {
        observation,
        events,
        error: Some("RollbackRefused"),
        next: Next::Failed,
    }
}

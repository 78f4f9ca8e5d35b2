//! Rollback (docs/how-to/upgrade-control.md, "Rollback"): returning an extension to an
//! earlier revision of its revision record, asked for by the annotation
//! `olm.operatorframework.io/rollback-to: <version>` ([`target`]) or, with
//! `olm.operatorframework.io/upgrade-remediation: Rollback`, after an upgrade whose apply
//! failed ([`remediate`]) or whose rollout outlasted `progressDeadlineMinutes`
//! ([`after_deadline`]). The bundle comes from the record — the digest-pinned image
//! that was installed — not from a catalog, which may no longer carry it. Going back
//! runs the preflights like an upgrade: CRD upgrade safety between the live CRDs and
//! the ones going back; a rollback it refuses is terminal. While rolled back, the
//! upgrade waits: with the annotation until it is removed; after a remediation until
//! resolution picks another bundle than the failed one or the spec changes (the failed
//! bundle and the generation are kept in the `RolledBack` condition, read back by
//! [`failed`]). [`attach`] ends the condition once nothing holds any more.
//!
//! The revision gone back to must be what it names: its seal is checked before its
//! image is pulled, and what the pulled image holds (its CSV's name and version, its
//! package, its digest) before anything is applied ([`verify`];
//! `crate::apply::record::RevisionHistory::check_pulled`). A revision that fails either
//! was edited after it was recorded: the rollback is refused, terminal like the other
//! refusals (Progressing `Blocked`, RolledBack `False`/`RollbackRefused`), and the
//! installed bundle stays reported.

use super::control::Before;
use super::{Facts, Install, InstallFailure, Next, Report, classify, observe, warning};
use crate::api::BundleIdentity;
use crate::controller::extension::status::Outcome;
use std::time::Duration;

mod remediation;
mod verification;

pub(super) use remediation::remediate;
pub(super) use verification::verify;
use verification::{refusal, refused, remediation_refused, sealed};

pub const ANNOTATION_ROLLBACK_TO: &str = "olm.operatorframework.io/rollback-to";
pub const ANNOTATION_UPGRADE_REMEDIATION: &str = "olm.operatorframework.io/upgrade-remediation";
pub const TYPE_ROLLED_BACK: &str = "RolledBack";
/// Progressing=True and UpgradeAvailable=True: a rollback holds the upgrade.
pub use super::notice::REASON_ROLLED_BACK;
/// RolledBack=True: the extension runs the version `rollback-to` names.
pub const REASON_ROLLBACK_REQUESTED: &str = "RollbackRequested";
/// RolledBack=True: an upgrade failed and was rolled back (`upgrade-remediation`).
pub const REASON_UPGRADE_FAILED: &str = "UpgradeFailed";
/// RolledBack=False: a rollback was refused (not in the record, CRD upgrade safety).
pub const REASON_ROLLBACK_REFUSED: &str = "RollbackRefused";
/// RolledBack=False: nothing holds upgrades any more.
pub const REASON_UPGRADES_RESUMED: &str = "UpgradesResumed";

/// The RolledBack condition to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RolledBack {
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

/// An install that returns to, or stays on, an earlier revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rollback {
    /// The version it leaves, when this install replaces another revision.
    pub from: Option<String>,
    /// The Progressing message once it is in place, when an upgrade waits (else
    /// `Succeeded`).
    pub holds: Option<String>,
    /// The RolledBack condition once it is in place.
    pub condition: RolledBack,
    /// Why (the Event when it is applied).
    pub why: String,
    /// The number of the recorded revision it installs (checked by [`verify`]).
    pub revision: Option<u64>,
}

/// An upgrade the remediation rolled back from, as the RolledBack condition keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    pub version: String,
    pub name: String,
    pub image: String,
}

/// The RolledBack=True/UpgradeFailed message: starts with the failed bundle
/// ([`failed`] reads it back), ends with the failure (cut first when long).
fn failed_message(failed: &BundleIdentity, to: &str, rolled: bool, failure: &str) -> String {
    let done = if rolled {
        "rolled back"
    } else {
        "rolling back"
    };
    format!(
        "upgrade to {} ({}, {}) failed; {done} to {to} ({ANNOTATION_UPGRADE_REMEDIATION}: Rollback): {} is not installed again until the catalog or the spec changes. The failure: {failure}",
        failed.version, failed.name, failed.image, failed.version
    )
}

/// The failed upgrade a RolledBack=True/UpgradeFailed condition of `generation` keeps;
/// `None` for any other condition (or another generation: the spec changed since).
pub fn failed(before: Option<&Before>, generation: Option<i64>) -> Option<Failed> {
    let b = before?;
    if !b.status || b.reason != REASON_UPGRADE_FAILED || b.generation != generation {
        return None;
    }
    let rest = b.message.strip_prefix("upgrade to ")?;
    let (version, rest) = rest.split_once(" (")?;
    let (name, rest) = rest.split_once(", ")?;
    let (image, _) = rest.split_once(") failed")?;
    Some(Failed {
        version: version.to_string(),
        name: name.to_string(),
        image: image.to_string(),
    })
}

/// The install a rollback asks for, when one does: `Ok` the install (the earlier
/// revision, or the installed one while the upgrade waits), `Err` a refusal to report.
/// `resolved`: the bundle resolution picked, if it succeeded.
pub(super) fn target(
    facts: &Facts,
    resolved: Option<&BundleIdentity>,
) -> Option<Result<Install, Box<Report>>> {
    if let Some(to) = &facts.controls.rollback_to {
        return Some(requested(facts, to, resolved));
    }
    // After a remediation: the failed bundle waits while resolution still picks it.
    let failed = failed(facts.controls.rolled_back_before.as_ref(), facts.generation)?;
    let resolved = resolved?;
    let history = facts.history()?;
    let mut revision = history.installed()?;
    if (&resolved.name, &resolved.version, &resolved.image)
        != (&failed.name, &failed.version, &failed.image)
    {
        return None;
    }
    // An unfinished attempt after the installed revision: going back is applied now.
    let mut unfinished = history
        .revisions
        .last()
        .is_some_and(|r| r.state != crate::apply::record::RevisionState::Installed);
    // The failed upgrade is installed (its rollout outlasted the deadline): back to the
    // revision before it.
    if revision.bundle.version == failed.version {
        let mut earlier = history.revisions.iter().rev();
        revision = earlier.find(|r| r.bundle.version != failed.version)?;
        unfinished = true;
    }
    let installed = &revision.bundle;
    if let Err(mismatch) = history.check_integrity(revision.number) {
        return Some(Err(Box::new(refusal(
            facts,
            remediation_refused(&installed.version, &mismatch),
        ))));
    }
    let before = facts.controls.rolled_back_before.as_ref()?;
    let rollback = Rollback {
        from: unfinished.then(|| failed.version.clone()),
        holds: Some(failed_holds(&installed.version, resolved)),
        condition: RolledBack {
            status: true,
            reason: REASON_UPGRADE_FAILED,
            message: before.message.clone(),
        },
        why: format!("the upgrade to {} failed", failed.version),
        revision: Some(revision.number),
    };
    Some(Ok(install(installed.clone(), rollback)))
}

/// `rollback-to: <to>`: the newest recorded revision of `to` (the installed one when it
/// is of `to`), or the refusal when the record has none.
fn requested(
    facts: &Facts,
    to: &str,
    resolved: Option<&BundleIdentity>,
) -> Result<Install, Box<Report>> {
    let history = facts.history();
    let Some((history, current)) = history.and_then(|h| h.installed().map(|r| (h, r))) else {
        return Err(Box::new(refused(
            facts,
            to,
            "nothing olmv1 installed is recorded",
        )));
    };
    let holds = resolved.filter(|r| r.version != to).map(|w| {
        format!(
            "Desired state reached for installed version {to}, rolled back by annotation {ANNOTATION_ROLLBACK_TO}: the upgrade to {} ({}) waits until the annotation is removed",
            w.version, w.name
        )
    });
    let condition = RolledBack {
        status: true,
        reason: REASON_ROLLBACK_REQUESTED,
        message: format!(
            "running {to} as annotation {ANNOTATION_ROLLBACK_TO} asks (the revision from the revision record); upgrades wait until the annotation is removed"
        ),
    };
    let why = format!("annotation {ANNOTATION_ROLLBACK_TO}: {to}");
    let installed = &current.bundle;
    if installed.version == to {
        sealed(facts, history, current, to)?;
        let rollback = Rollback {
            from: None,
            holds,
            condition,
            why,
            revision: Some(current.number),
        };
        return Ok(install(installed.clone(), rollback));
    }
    let Some(revision) = history
        .revisions
        .iter()
        .rev()
        .find(|r| r.bundle.version == to)
    else {
        let recorded: Vec<&str> = history
            .revisions
            .iter()
            .map(|r| r.bundle.version.as_str())
            .collect();
        let why = format!(
            "the revision record has no revision of version {to} (recorded: {})",
            recorded.join(", ")
        );
        return Err(Box::new(refused(facts, to, &why)));
    };
    sealed(facts, history, revision, to)?;
    let rollback = Rollback {
        from: Some(installed.version.clone()),
        holds,
        condition,
        why,
        revision: Some(revision.number),
    };
    Ok(install(revision.bundle.clone(), rollback))
}

fn install(target: BundleIdentity, rollback: Rollback) -> Install {
    Install {
        target,
        maintained: None,
        adopt: None,
        adopt_v0: None,
        held: None,
        rollback: Some(rollback),
    }
}

/// The Progressing message while a failed upgrade waits.
fn failed_holds(installed: &str, failed: &BundleIdentity) -> String {
    format!(
        "Desired state reached for installed version {installed}; the upgrade to {} ({}) failed and was rolled back ({ANNOTATION_UPGRADE_REMEDIATION}: Rollback): it is not installed again until the catalog or the spec changes",
        failed.version, failed.name
    )
}

/// A rollback's apply failed: CRD upgrade safety refuses it (terminal), anything else
/// is retried with the rollback still asked for.
pub(super) fn rollback_failed(
    facts: &Facts,
    install: &Install,
    rollback: &Rollback,
    failure: InstallFailure,
) -> Report {
    let to = &install.target.version;
    if let InstallFailure::UnsafeCrds(findings) = failure {
        let from = rollback.from.as_deref().unwrap_or("the installed version");
        return refusal(
            facts,
            format!("rollback from {from} to {to} refused by CRD upgrade safety: {findings}"),
        );
    }
    let (outcome, error) = classify(failure, &install.target);
    let message = match &outcome {
        Outcome::Retrying(m) | Outcome::Blocked { message: m, .. } => m.clone(),
        _ => String::new(),
    };
    let mut observation = observe(facts, facts.installed().cloned(), outcome, None);
    observation.control.rolled_back = Some(rollback.condition.clone());
    Report {
        observation,
        events: vec![warning(
            "RollbackFailed",
            "Rollback",
            format!("rolling back to {to}: {message}"),
        )],
        error: Some(error),
        next: Next::Failed,
    }
}

/// With `upgrade-remediation: Rollback`, at the end of a reconcile whose upgrade rollout
/// (`rolling`: the report before the deadline was `RollingOut`) has just outlasted
/// `progressDeadlineMinutes`: the upgrade counts as failed (RolledBack=True/UpgradeFailed,
/// a Warning Event `RollingBack`) and the next reconcile, soon, goes back to the
/// revision before it ([`target`]).
pub(super) fn after_deadline(facts: &Facts, rolling: bool, ending: &mut super::Ending) {
    if !rolling || !facts.controls.remediation || facts.controls.rollback_to.is_some() {
        return;
    }
    let Some(observation) = ending.observation.as_mut() else {
        return;
    };
    let Outcome::DeadlineExceeded { last, .. } = &observation.outcome else {
        return;
    };
    let resolved = match &facts.resolution {
        Some(Ok(r)) => r.bundle.identity(),
        _ => return,
    };
    let Some(history) = facts.history() else {
        return;
    };
    let Some(installed) = history.installed() else {
        return;
    };
    let same = |b: &BundleIdentity| (&b.name, &b.version) == (&resolved.name, &resolved.version);
    let previous = history.revisions.iter().rev().find(|r| !same(&r.bundle));
    let (true, Some(previous)) = (same(&installed.bundle), previous) else {
        return;
    };
    let why = format!("its rollout was not ready within progressDeadlineMinutes: {last}");
    let message = failed_message(&resolved, &previous.bundle.version, false, &why);
    ending.events.push(warning(
        "RollingBack",
        "Rollback",
        format!(
            "the upgrade to {} failed ({why}); rolling back to {} ({ANNOTATION_UPGRADE_REMEDIATION}: Rollback)",
            resolved.version, previous.bundle.version
        ),
    ));
    observation.control.rolled_back = Some(RolledBack {
        status: true,
        reason: REASON_UPGRADE_FAILED,
        message,
    });
    ending.requeue = Some(Duration::from_secs(1));
}

/// Whether `report` rolled the extension back in this reconcile (its `RolledBack` Event:
/// a revision from the record was applied, by annotation or by remediation), and the
/// time pending (`pending_for`) the deadline then judges: a rollback starts the clock of
/// `progressDeadlineMinutes` over, so the version gone back to is not judged by the
/// failed upgrade's time.
pub(super) fn clock(report: &Report, pending_for: Duration) -> (bool, Duration) {
    let back = report.events.iter().any(|n| n.reason == "RolledBack");
    (back, if back { Duration::ZERO } else { pending_for })
}

/// On every ending that reached the install target: a RolledBack condition that no
/// rollback keeps any more turns False (`UpgradesResumed`).
pub(super) fn attach(facts: &Facts, report: &mut Report) {
    let control = &mut report.observation.control;
    if control.rolled_back.is_some() || facts.resolution.is_none() || facts.controls.paused {
        return;
    }
    let Some(before) = &facts.controls.rolled_back_before else {
        return;
    };
    if before.reason == REASON_UPGRADES_RESUMED || facts.controls.rollback_to.is_some() {
        return;
    }
    control.rolled_back = Some(RolledBack {
        status: false,
        reason: REASON_UPGRADES_RESUMED,
        message: format!(
            "upgrades resume: annotation {ANNOTATION_ROLLBACK_TO} is absent and no failed upgrade is held (the catalog or the spec changed since)"
        ),
    });
}

#[cfg(test)]
mod tests;

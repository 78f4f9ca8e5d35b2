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
use super::{
    Apply, Facts, Install, InstallFailure, Next, Plan, Rendered, Report, classify, deprecation,
    end, enforcement, fingerprint, observe, warning,
};
use crate::api::conditions::REASON_BLOCKED;
use crate::api::{BundleIdentity, ClusterExtensionSpec};
use crate::apply::Revision;
use crate::apply::record::RevisionMismatch;
use crate::controller::extension::rollout::Readiness;
use crate::controller::extension::status::Outcome;
use std::time::Duration;

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

/// Before its image is pulled: `revision` (of `to`, asked by `rollback-to`) still carries
/// the seal it was recorded with, or the refusal.
fn sealed(
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
fn requested_refused(to: &str, mismatch: &RevisionMismatch) -> String {
    format!("rollback to {to} refused: {mismatch}")
}

/// The refusal of a remediation's rollback to `to`, a revision that is not what it names.
fn remediation_refused(to: &str, mismatch: &RevisionMismatch) -> String {
    format!("rollback to {to} ({ANNOTATION_UPGRADE_REMEDIATION}: Rollback) refused: {mismatch}")
}

/// Before a rollback's rendered bundle is applied: the image pulled for the revision it
/// returns to holds the bundle the revision names (package, bundle name and version from
/// the image's own metadata, the recorded digest); the terminal refusal when it does not.
/// `None` for any other install, or when they agree.
pub(super) fn verify(facts: &Facts, install: &Install, rendered: &Rendered) -> Option<Box<Report>> {
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

/// A rollback that cannot be made: terminal until the annotation, the record or the
/// live CRDs change; the installed bundle stays reported.
fn refused(facts: &Facts, to: &str, why: &str) -> Report {
    let message = format!(
        "rollback to {to} refused: {why}; remove annotation {ANNOTATION_ROLLBACK_TO} or name a recorded version"
    );
    refusal(facts, message)
}

fn refusal(facts: &Facts, message: String) -> Report {
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

/// With `upgrade-remediation: Rollback`, after the apply of an upgrade failed: the
/// next step of going back to the installed revision, or the ending once it is known;
/// `None` when the failure is not one to remediate.
pub(super) fn remediate(
    spec: &ClusterExtensionSpec,
    facts: &Facts,
    install: &Install,
    failure: &InstallFailure,
) -> Option<Plan> {
    let upgrade = install.rollback.is_none() && install.adopt.is_none() && install.held.is_none();
    if !facts.controls.remediation || !upgrade || !matches!(failure, InstallFailure::Apply(_)) {
        return None;
    }
    let history = facts.history()?;
    let installed = history.installed()?;
    let back = &installed.bundle;
    if (&back.name, &back.version) == (&install.target.name, &install.target.version) {
        return None;
    }
    let account = facts.installer.as_ref().ok()?;
    // The revision gone back to is what it names: sealed before its image is pulled,
    // holding its bundle before it is applied.
    let checked = match &facts.remedy {
        Some(Ok(rendered)) => history.check_integrity(installed.number).and_then(|()| {
            history.check_pulled(installed.number, rendered.pulled.as_ref(), &rendered.image)
        }),
        _ => history.check_integrity(installed.number),
    };
    if let Err(mismatch) = checked {
        let report = remediation_mismatch(facts, install, failure, back, &mismatch);
        return Some(end(spec, facts, report));
    }
    let result = match &facts.remedy {
        None => return Some(Plan::RenderRollback(back.clone())),
        Some(Err(e)) => Err(e.clone()),
        Some(Ok(rendered)) => match &facts.remedied {
            Some(result) => result.clone(),
            None => {
                return Some(Plan::ApplyRollback(Box::new(Apply {
                    target: back.clone(),
                    bundle: back.pulled(&rendered.image),
                    account: account.clone(),
                    preflight: true,
                    enforcement: enforcement(spec),
                    refuse_helm_managed: false,
                    adopt: None,
                    adopt_v0: None,
                    fingerprint: fingerprint(facts, account, back, Some(back)),
                })));
            }
        },
    };
    let report = remediated(spec, facts, install, failure, back, result);
    Some(end(spec, facts, report))
}

/// What the upgrade's failure says (its first Event, the start of the refusal).
fn upgrade_failure(failure: &InstallFailure, failed: &BundleIdentity) -> String {
    let (outcome, _) = classify(failure.clone(), failed);
    match &outcome {
        Outcome::Retrying(m) | Outcome::Blocked { message: m, .. } => m.clone(),
        _ => failure.message().to_string(),
    }
}

/// The report of a remediation whose revision to go back to is not what it names: the
/// upgrade's failure, then the refusal (terminal; nothing was applied).
fn remediation_mismatch(
    facts: &Facts,
    install: &Install,
    failure: &InstallFailure,
    back: &BundleIdentity,
    mismatch: &RevisionMismatch,
) -> Report {
    let failed = &install.target;
    let first = upgrade_failure(failure, failed);
    let mut events = vec![warning("InstallFailed", "Install", first.clone())];
    let message = format!(
        "upgrade to {} failed: {first}; the rollback to {} ({ANNOTATION_UPGRADE_REMEDIATION}: Rollback) was refused: {mismatch}",
        failed.version, back.version
    );
    let mut report = refusal(facts, message);
    events.append(&mut report.events);
    report.events = events;
    report
}

/// The report of a remediation: the upgrade's failure, then what going back did.
fn remediated(
    spec: &ClusterExtensionSpec,
    facts: &Facts,
    install: &Install,
    failure: &InstallFailure,
    back: &BundleIdentity,
    result: Result<super::Installed, InstallFailure>,
) -> Report {
    let failed = &install.target;
    let first = upgrade_failure(failure, failed);
    let mut events = vec![warning("InstallFailed", "Install", first.clone())];
    let to = &back.version;
    let done = match result {
        Ok(done) => done,
        Err(InstallFailure::UnsafeCrds(findings)) => {
            let message = format!(
                "upgrade to {} failed: {first}; the rollback to {to} ({ANNOTATION_UPGRADE_REMEDIATION}: Rollback) was refused by CRD upgrade safety: {findings}",
                failed.version
            );
            let mut report = refusal(facts, message);
            events.append(&mut report.events);
            report.events = events;
            return report;
        }
        Err(e) => {
            let message = format!(
                "upgrade to {} failed: {first}; rolling back to {to} failed: {}",
                failed.version,
                e.message()
            );
            events.push(warning("RollbackFailed", "Rollback", message.clone()));
            let mut observation = observe(
                facts,
                facts.installed().cloned(),
                Outcome::Retrying(message),
                None,
            );
            observation.control.rolled_back = Some(RolledBack {
                status: true,
                reason: REASON_UPGRADE_FAILED,
                message: failed_message(failed, to, false, &first),
            });
            return Report {
                observation,
                events,
                error: Some("InstallFailed"),
                next: Next::Failed,
            };
        }
    };
    let bundle = back.pulled(&done.image);
    events.push(warning(
        "RolledBack",
        "Rollback",
        format!(
            "rolled back from {} to {to} ({}) after the upgrade failed ({ANNOTATION_UPGRADE_REMEDIATION}: Rollback): {} is not installed again until the catalog or the spec changes",
            failed.version, bundle.name, failed.version
        ),
    ));
    let (outcome, next) = match done.readiness {
        Readiness::NotReady(waiting) => (
            Outcome::RollingOut {
                version: to.clone(),
                waiting: waiting.join("; "),
            },
            Next::RollingOut,
        ),
        Readiness::Ready => (
            Outcome::Held {
                reason: REASON_ROLLED_BACK,
                message: failed_holds(to, failed),
            },
            Next::Done,
        ),
    };
    let conditions = Some(deprecation(spec, facts, Some(&bundle)));
    let mut observation = observe(facts, Some(bundle), outcome, conditions);
    observation.installer = facts.installer.as_ref().ok().map(|a| a.status());
    observation.control.rolled_back = Some(RolledBack {
        status: true,
        reason: REASON_UPGRADE_FAILED,
        message: failed_message(failed, to, true, &first),
    });
    Report {
        observation,
        events,
        error: Some("InstallFailed"),
        next,
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
mod tests {
    use super::*;
    use crate::apply::record::{PulledBundle, RevisionHistory};
    use crate::apply::{Owner, RevisionState};
    use crate::controller::extension::status::Outcome;

    fn digest(c: char) -> String {
        format!("registry/p@sha256:{}", c.to_string().repeat(64))
    }

    /// The record of extension `e`: 1.0.0 (digest `a`), then 1.1.0 (digest `b`) installed.
    fn recorded() -> RevisionHistory {
        let mut h = RevisionHistory::new(&Owner::new("e".to_string(), "u1".to_string()));
        for (v, d) in [("1.0.0", 'a'), ("1.1.0", 'b')] {
            let b = BundleIdentity {
                package: "p".into(),
                name: format!("p.v{v}"),
                version: v.into(),
                release: None,
                image: digest(d),
            };
            let n = h.begin(b, &[serde_json::json!({"kind": "ConfigMap", "v": v})]);
            h.complete(n);
        }
        h
    }

    /// `h` edited by an administrator: 1.1.0's digest under 1.0.0.
    fn edited(mut h: RevisionHistory) -> RevisionHistory {
        h.revisions[0].bundle.image = digest('b');
        h
    }

    fn asking(h: RevisionHistory, to: &str) -> Facts {
        let mut facts = Facts::new(Some(3), false, true, Err("unused".into()));
        facts.validation = Some(Vec::new());
        facts.record = Some(Ok(Some(h)));
        facts.controls.rollback_to = Some(to.to_string());
        facts
    }

    fn rendered(d: char, v: &str) -> Rendered {
        Rendered {
            image: digest(d),
            pulled: Some(PulledBundle {
                package: "p".into(),
                name: format!("p.v{v}"),
                version: v.into(),
            }),
            ..Rendered::default()
        }
    }

    fn blocked(report: &Report) -> String {
        match &report.observation.outcome {
            Outcome::Blocked { reason, message } => {
                assert_eq!(*reason, REASON_BLOCKED);
                message.clone()
            }
            other => panic!("not blocked: {other:?}"),
        }
    }

    /// A refusal: terminal, the installed bundle still reported, RolledBack
    /// False/RollbackRefused and its Warning Event.
    fn assert_refused(report: &Report) {
        assert_eq!(
            (report.error, report.next),
            (Some("RollbackRefused"), Next::Failed)
        );
        let installed = report
            .observation
            .installed
            .as_ref()
            .map(|b| b.version.as_str());
        assert_eq!(installed, Some("1.1.0"), "nothing went back");
        let rolled = report.observation.control.rolled_back.as_ref();
        assert_eq!(
            rolled.map(|r| (r.status, r.reason)),
            Some((false, REASON_ROLLBACK_REFUSED))
        );
        let events: Vec<_> = report
            .events
            .iter()
            .map(|n| (n.warning, n.reason))
            .collect();
        assert_eq!(events, [(true, "RollbackRefused")]);
    }

    #[test]
    fn a_rollback_applies_only_the_bundle_its_revision_names() {
        // Consistent: the revision's image holds its bundle.
        let facts = asking(recorded(), "1.0.0");
        let Some(Ok(install)) = target(&facts, None) else {
            panic!("no rollback");
        };
        assert_eq!(install.rollback.as_ref().and_then(|r| r.revision), Some(1));
        assert_eq!(install.target.image, digest('a'));
        assert!(verify(&facts, &install, &rendered('a', "1.0.0")).is_none());
        let upgrade = Install {
            rollback: None,
            ..install.clone()
        };
        assert!(
            verify(&facts, &upgrade, &rendered('b', "1.1.0")).is_none(),
            "not a rollback"
        );

        // Edited under its seal: refused before its image is pulled.
        let facts = asking(edited(recorded()), "1.0.0");
        let Some(Err(refused)) = target(&facts, None) else {
            panic!("not refused");
        };
        let message = blocked(&refused);
        assert!(
            message.starts_with(
                "rollback to 1.0.0 refused: revision 1 of record olmv1-revision-e names bundle p.v1.0.0 version 1.0.0 but fails its integrity check: "
            ) && message.ends_with(": the record was edited; roll back to another revision or re-install"),
            "{message}"
        );
        assert_refused(&refused);

        // A record written before revisions were sealed: the pulled image's own metadata
        // refuses it before anything is applied.
        let mut legacy = edited(recorded());
        for r in &mut legacy.revisions {
            r.integrity = None;
        }
        let facts = asking(legacy, "1.0.0");
        let Some(Ok(install)) = target(&facts, None) else {
            panic!("no rollback");
        };
        let refused = verify(&facts, &install, &rendered('b', "1.1.0")).expect("refused");
        assert_eq!(
            blocked(&refused),
            format!(
                "rollback to 1.0.0 refused: revision 1 of record olmv1-revision-e names bundle p.v1.0.0 version 1.0.0 but its image sha256:{} holds p.v1.1.0 version 1.1.0 (the bundle name and version disagree): the record was edited; roll back to another revision or re-install",
                "b".repeat(64)
            )
        );
        assert_refused(&refused);
    }

    #[test]
    fn the_installed_revision_asked_for_again_is_checked_too() {
        let mut h = recorded();
        h.revisions[1].bundle.version = "1.2.0".into();
        h.revisions[1].state = RevisionState::Installed;
        let facts = asking(h, "1.2.0");
        let Some(Err(refused)) = target(&facts, None) else {
            panic!("not refused");
        };
        assert!(
            blocked(&refused).contains("revision 2 of record olmv1-revision-e names bundle p.v1.1.0 version 1.2.0 but fails its integrity check"),
            "{}",
            blocked(&refused)
        );
    }

    #[test]
    fn the_failed_bundle_is_read_back_from_its_condition_of_the_same_generation() {
        let f = BundleIdentity {
            package: "p".into(),
            name: "p.v1.1.0".into(),
            version: "1.1.0".into(),
            release: None,
            image: "registry/p:1.1.0".into(),
        };
        let before = Before {
            status: true,
            reason: REASON_UPGRADE_FAILED.into(),
            message: failed_message(&f, "1.0.0", true, "boom (x, y) failed"),
            generation: Some(3),
        };
        let read = failed(Some(&before), Some(3)).expect("failed");
        assert_eq!(
            (
                read.version.as_str(),
                read.name.as_str(),
                read.image.as_str()
            ),
            ("1.1.0", "p.v1.1.0", "registry/p:1.1.0")
        );
        assert_eq!(failed(Some(&before), Some(4)), None, "the spec changed");
        let resumed = Before {
            status: false,
            ..before.clone()
        };
        assert_eq!(failed(Some(&resumed), Some(3)), None);
        assert_eq!(failed(None, Some(3)), None);
    }
}

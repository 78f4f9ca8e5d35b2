//! Upgrade remediation by rollback (docs/how-to/upgrade-control.md, "Rollback"): with
//! `olm.operatorframework.io/upgrade-remediation: Rollback`, after the apply of an
//! upgrade failed, going back to the installed revision — rendered and applied like an
//! upgrade, its seal and pulled bundle checked first — and the report of the failure
//! and of what going back did.

use super::verification::refusal;
use super::{
    ANNOTATION_UPGRADE_REMEDIATION, REASON_ROLLED_BACK, REASON_UPGRADE_FAILED, RolledBack,
    failed_holds, failed_message,
};
use crate::api::{BundleIdentity, ClusterExtensionSpec};
use crate::apply::record::RevisionMismatch;
use crate::controller::extension::plan::{
    Apply, Facts, Install, InstallFailure, Installed, Next, Plan, Report, classify, deprecation,
    end, enforcement, fingerprint, observe, warning,
};
use crate::controller::extension::rollout::Readiness;
use crate::controller::extension::status::Outcome;

/// With `upgrade-remediation: Rollback`, after the apply of an upgrade failed: the
/// next step of going back to the installed revision, or the ending once it is known;
/// `None` when the failure is not one to remediate.
pub(in crate::controller::extension::plan) fn remediate(
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
    result: Result<Installed, InstallFailure>,
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

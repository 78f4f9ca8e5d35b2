//! An install's result as the reconcile reports it: [`after_install`] turns what the
//! install steps did into the status and Events (`RollingOut` while what it installed is
//! not ready, [`crate::controller::extension::rollout`], with Events on rollout
//! transitions); [`classify`] maps an install failure to its condition.

use super::notice::{REASON_APPROVAL_REQUIRED, REASON_ROLLED_BACK};
use super::rollback::{Rollback, rollback_failed};
use super::{
    Facts, Install, InstallFailure, Installed, Next, Note, Report, deprecation, failed_report,
    normal, observe, warning,
};
use crate::api::conditions::{
    REASON_BLOCKED, REASON_INVALID_CONFIGURATION, REASON_PROGRESS_DEADLINE_EXCEEDED,
    REASON_ROLLING_OUT, REASON_SUCCEEDED,
};
use crate::api::{BundleIdentity, ClusterExtensionSpec};
use crate::controller::extension::rollout::Readiness;
use crate::controller::extension::status::{Outcome, for_resolved_bundle};
use crate::migrate::upstream_helm::UpstreamRelease;

/// Why upstream OLM v1's installation is not adopted (condition and Event message).
pub fn adoption_refused(release: &UpstreamRelease, why: &str) -> String {
    format!(
        "not adopting upstream OLM v1's installation (Helm release Secret {}, bundle {} version {}): {why}; nothing was changed",
        release.secret, release.bundle.name, release.bundle.version
    )
}

/// The report after the install steps of `install` ran.
pub fn after_install(
    spec: &ClusterExtensionSpec,
    facts: &Facts,
    install: Install,
    result: Result<Installed, InstallFailure>,
) -> Report {
    let done = match result {
        Ok(done) => done,
        Err(failure) => match &install.rollback {
            Some(rollback) => return rollback_failed(facts, &install, rollback, failure),
            None => return install_failed(spec, facts, &install, failure),
        },
    };
    let previous = facts.installed();
    let bundle = install.target.pulled(&done.image);
    let mut events = install_events(facts, &install, &bundle, &done);
    for message in done.warnings {
        events.push(warning("CRDUpgradeSafety", "Preflight", message));
    }
    // The deprecation conditions now describe the newly installed bundle.
    let conditions = deprecation(spec, facts, Some(&bundle));
    let same = previous == Some(&bundle);
    let (outcome, next) = match done.readiness {
        Readiness::NotReady(waiting) => {
            let waiting = waiting.join("; ");
            events.extend(rollout_event(facts, same, &bundle.version, Some(&waiting)));
            let version = bundle.version.clone();
            (Outcome::RollingOut { version, waiting }, Next::RollingOut)
        }
        Readiness::Ready => {
            events.extend(rollout_event(facts, same, &bundle.version, None));
            let holds = install.rollback.as_ref().and_then(|r| r.holds.clone());
            let outcome = match (&install.held, install.maintained) {
                _ if holds.is_some() => Outcome::Held {
                    reason: REASON_ROLLED_BACK,
                    message: holds.unwrap_or_default(),
                },
                (Some(held), _) => Outcome::Held {
                    reason: match held.operator {
                        Some(_) => super::operator::REASON_NOT_UPGRADEABLE,
                        None => REASON_APPROVAL_REQUIRED,
                    },
                    message: held.message(&facts.name, Some(&bundle.version)),
                },
                (None, Some(why)) => Outcome::Maintained(why),
                (None, None) => Outcome::Succeeded,
            };
            // A takeover resolved OLM v0's installed CSV only: resolve as the spec says
            // next (super::migration::resolve).
            let taken_over = previous.is_none() && install.adopt_v0.is_some();
            (outcome, if taken_over { Next::Again } else { Next::Done })
        }
    };
    let mut observation = observe(facts, Some(bundle), outcome, Some(conditions));
    observation.installer = facts.installer.as_ref().ok().map(|a| a.status());
    observation.control.rolled_back = install.rollback.map(|r| r.condition);
    Report {
        observation,
        events,
        error: None,
        next,
    }
}

/// A failed install: the installed bundle stays reported, with a Warning Event.
fn install_failed(
    spec: &ClusterExtensionSpec,
    facts: &Facts,
    install: &Install,
    failure: InstallFailure,
) -> Report {
    let previous = facts.installed();
    let (outcome, error) = classify(failure, &install.target);
    let message = match &outcome {
        Outcome::Retrying(m) | Outcome::Blocked { message: m, .. } => m.clone(),
        _ => String::new(),
    };
    let conditions = deprecation(spec, facts, previous);
    let mut report = failed_report(facts, previous.cloned(), outcome, Some(conditions), error);
    let (reason, action) = if error == "AdoptionRefused" {
        ("AdoptionRefused", "Adopt")
    } else {
        ("InstallFailed", "Install")
    };
    report.events.push(warning(reason, action, message));
    report.next = Next::Failed;
    report
}

/// The Event of what an install did: adopted upstream's or OLM v0's installation,
/// restored drift, upgraded or installed.
fn install_events(
    facts: &Facts,
    install: &Install,
    bundle: &BundleIdentity,
    done: &Installed,
) -> Vec<Note> {
    let by = facts
        .installer
        .as_ref()
        .map(|a| format!(" as {a}"))
        .unwrap_or_default();
    let mut events = Vec::new();
    let back = install
        .rollback
        .as_ref()
        .filter(|_| facts.applied.is_some());
    match facts.installed() {
        _ if back.is_some_and(|r| r.from.is_some()) => {
            if let Some(Rollback {
                from: Some(from),
                why,
                ..
            }) = back
            {
                events.push(normal(
                    "RolledBack",
                    "Rollback",
                    format!(
                        "rolled back from {from} to {} ({}){by}: {why}; the CRDs passed the upgrade-safety check",
                        bundle.version, bundle.name
                    ),
                ));
            }
        }
        _ if install.adopt.is_some() => {
            if let Some(release) = &install.adopt {
                events.push(normal(
                    "Adopted",
                    "Adopt",
                    format!(
                        "adopted upstream OLM v1's installation of bundle {} version {} (Helm release Secret {}, {} objects) in place: nothing deleted or recreated; applied{by}",
                        bundle.name,
                        bundle.version,
                        release.secret,
                        release.objects.len()
                    ),
                ));
            }
        }
        None if install.adopt_v0.is_some() => {
            if let Some(v0) = &install.adopt_v0 {
                events.push(normal(
                    "Adopted",
                    "Adopt",
                    format!(
                        "took over OLM v0's installation of bundle {} version {} (Subscription {}, backup ConfigMap {}) in place: nothing deleted or recreated; applied{by}",
                        bundle.name, bundle.version, v0.subscription, v0.backup
                    ),
                ));
            }
        }
        // The record tells of this install, the status never did: the process that made
        // it stopped before writing the status (e2e/faults.rs kills it so).
        Some(old) if old == bundle && unreported(facts, bundle).is_some() => {
            let was = unreported(facts, bundle).flatten();
            events.push(installed_or_upgraded(
                was.map(|m| m.version.as_str()),
                bundle,
                &by,
            ));
        }
        Some(old) if old == bundle => {
            if done.applied_changes > 0 {
                events.push(normal(
                    "DriftCorrected",
                    "Apply",
                    format!(
                        "restored {} object(s) that differed from the installed revision",
                        done.applied_changes
                    ),
                ));
            }
        }
        Some(old) => events.push(installed_or_upgraded(Some(&old.version), bundle, &by)),
        None => events.push(installed_or_upgraded(None, bundle, &by)),
    }
    events
}

/// The Event of `bundle` installed (`from`: upgraded from that version) as `by` says.
fn installed_or_upgraded(from: Option<&str>, bundle: &BundleIdentity, by: &str) -> Note {
    match from {
        Some(from) => normal(
            "Upgraded",
            "Install",
            format!(
                "upgraded from {from} to {} ({}){by}",
                bundle.version, bundle.name
            ),
        ),
        None => normal(
            "Installed",
            "Install",
            format!(
                "installed bundle {} version {}{by}",
                bundle.name, bundle.version
            ),
        ),
    }
}

/// When the status before this reconcile did not report `bundle` installed: what it
/// reported instead (`Some(None)`: nothing). `None` when it did, or was not looked at.
fn unreported<'a>(
    facts: &'a Facts,
    bundle: &BundleIdentity,
) -> Option<Option<&'a crate::api::BundleMetadata>> {
    let reported = facts.reported.as_ref()?.as_ref();
    let same = reported.is_some_and(|r| r.name == bundle.name && r.version == bundle.version);
    (!same).then_some(reported)
}

/// The Event of a rollout transition: a revision that was ready and is not any more
/// (`waiting`: what is not ready), or a rollout that completed.
fn rollout_event(
    facts: &Facts,
    same_revision: bool,
    version: &str,
    waiting: Option<&str>,
) -> Option<Note> {
    let before = facts.progressing.as_deref();
    match waiting {
        Some(waiting) if same_revision && before == Some(REASON_SUCCEEDED) => Some(warning(
            "NotReady",
            "Rollout",
            format!("revision {version} is no longer ready: {waiting}"),
        )),
        None if matches!(
            before,
            Some(REASON_ROLLING_OUT | REASON_PROGRESS_DEADLINE_EXCEEDED)
        ) =>
        {
            Some(normal(
                "RolledOut",
                "Rollout",
                format!("revision {version} has rolled out"),
            ))
        }
        _ => None,
    }
}

/// An install failure as the condition reports it, and the reason counted in metrics.
/// Errors after resolution name the resolved bundle (`error for resolved bundle …`).
pub fn classify(failure: InstallFailure, target: &BundleIdentity) -> (Outcome, &'static str) {
    let prefixed = |m| for_resolved_bundle(&target.name, &target.version, m);
    match failure {
        InstallFailure::Retry(m) | InstallFailure::UnsafeCrds(m) | InstallFailure::Apply(m) => {
            (Outcome::Retrying(prefixed(m)), "InstallFailed")
        }
        InstallFailure::InvalidConfiguration(message) => (
            Outcome::Blocked {
                reason: REASON_INVALID_CONFIGURATION,
                message,
            },
            REASON_INVALID_CONFIGURATION,
        ),
        InstallFailure::Blocked(m) => (
            Outcome::Blocked {
                reason: REASON_BLOCKED,
                message: prefixed(m),
            },
            REASON_BLOCKED,
        ),
        InstallFailure::AdoptionRefused(m) => (Outcome::Retrying(m), "AdoptionRefused"),
    }
}

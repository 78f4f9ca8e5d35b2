//! A paused extension (`olm.operatorframework.io/paused: "true"`,
//! docs/how-to/upgrade-control.md): nothing is applied, upgraded or deleted. Resolution
//! still runs (the upgrade notice says what waits); drift is checked without writing —
//! the last install's result while nothing changed since, else the installed bundle is
//! rendered again and compared with the live objects ([`super::Plan::CheckDrift`]) — and
//! reported (the Paused condition, a Warning Event when it changes), not corrected.
//! Deleting a paused extension waits until it is unpaused ([`deletion`]). [`attach`]
//! keeps the Paused condition and its Events right on every ending.

use super::control::{ANNOTATION_PAUSED, REASON_PAUSED};
use super::{Facts, Next, Plan, Report, deprecation, end, fingerprint, normal, observe, warning};
use crate::api::ClusterExtensionSpec;
use crate::controller::extension::status::Outcome;

/// The Paused message without a drift check.
pub fn paused_message(drift: &str) -> String {
    format!(
        "paused by annotation {ANNOTATION_PAUSED}: \"true\": nothing is applied, upgraded or deleted until it is removed; {drift}"
    )
}

/// The next step of a paused reconcile once resolution ran.
pub(super) fn decide(spec: &ClusterExtensionSpec, facts: &Facts) -> Plan {
    let Some(installed) = facts.installed() else {
        let report = held(spec, facts, paused_message("nothing is installed"));
        return end(spec, facts, report);
    };
    // Nothing changed since the last install (kept while the drift watches saw nothing):
    // no drift, nothing to render.
    let account = facts.installer.as_ref().ok();
    let print = account.and_then(|a| fingerprint(facts, a, installed, Some(installed)));
    if let Some(print) = print {
        match &facts.unchanged {
            None => return Plan::LookUpUnchanged(print),
            Some(Some(_)) => {
                let report = held(spec, facts, paused_message("no drift"));
                return end(spec, facts, report);
            }
            Some(None) => {}
        }
    }
    let drift = match (&facts.rendered, &facts.drifted) {
        (None, _) => return Plan::Render(installed.clone()),
        (Some(Err(e)), _) => Err(format!("rendering the installed bundle: {}", e.message())),
        (Some(Ok(_)), None) => return Plan::CheckDrift,
        (Some(Ok(_)), Some(d)) => d.clone(),
    };
    let what = match &drift {
        Ok(objects) if objects.is_empty() => "no drift".to_string(),
        Ok(objects) => format!(
            "drift not corrected: {} object(s) differ from the installed revision: {}",
            objects.len(),
            objects.join(", ")
        ),
        Err(e) => format!("drift could not be checked: {e}"),
    };
    let message = paused_message(&what);
    let mut report = held(spec, facts, message.clone());
    let before = facts.controls.paused_before.as_deref();
    if matches!(&drift, Ok(o) if !o.is_empty()) && before != Some(message.as_str()) {
        report
            .events
            .push(warning("DriftDetected", "Pause", what.clone()));
    }
    end(spec, facts, report)
}

/// Paused: the installed bundle stays reported, Progressing says paused.
fn held(spec: &ClusterExtensionSpec, facts: &Facts, message: String) -> Report {
    let installed = facts.installed();
    let outcome = Outcome::Held {
        reason: REASON_PAUSED,
        message: message.clone(),
    };
    let conditions = Some(deprecation(spec, facts, installed));
    let mut observation = observe(facts, installed.cloned(), outcome, conditions);
    observation.control.paused = Some(message);
    Report {
        observation,
        events: Vec::new(),
        error: None,
        next: Next::AwaitChange,
    }
}

/// A paused extension being deleted: nothing is uninstalled until it is unpaused (the
/// finalizer stays; removing the annotation lets the uninstall proceed).
pub(super) fn deletion(spec: &ClusterExtensionSpec, facts: &Facts) -> Plan {
    if facts.record.is_none() {
        return Plan::LoadRecord;
    }
    let message = paused_message(
        "the deletion waits: nothing is uninstalled until the annotation is removed",
    );
    let mut report = held(spec, facts, message.clone());
    report.observation.deprecation = None;
    if facts.controls.paused_before.as_deref() != Some(message.as_str()) {
        report.events.push(warning(
            "DeletionPaused",
            "Uninstall",
            format!(
                "the extension is paused: remove annotation {ANNOTATION_PAUSED} to uninstall it"
            ),
        ));
    }
    end(spec, facts, report)
}

/// On every ending: a paused reconcile keeps the Paused condition (a report that did
/// not set it, e.g. a validation failure, keeps the last message), with an Event when
/// the pause begins or ends.
pub(super) fn attach(facts: &Facts, report: &mut Report) {
    let before = facts.controls.paused_before.as_ref();
    let control = &mut report.observation.control;
    if facts.controls.paused {
        if control.paused.is_none() {
            let last = before.cloned();
            control.paused = Some(last.unwrap_or_else(|| paused_message("drift not checked")));
        }
        if before.is_none() {
            report.events.push(normal(
                "Paused",
                "Pause",
                format!("paused by annotation {ANNOTATION_PAUSED}: nothing is applied, upgraded or deleted"),
            ));
        }
    } else if before.is_some() {
        report.events.push(normal(
            "Resumed",
            "Pause",
            format!(
                "annotation {ANNOTATION_PAUSED} removed: the controller applies and upgrades again"
            ),
        ));
    }
}

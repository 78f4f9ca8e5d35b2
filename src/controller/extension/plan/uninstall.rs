//! Uninstall (docs/reference/api-and-status.md A7) as decisions: the drift watches stop first;
//! without the finalizer there is nothing to do; otherwise everything the revision record
//! names is deleted through the installer account (in reverse dependency order, by
//! [`crate::apply::uninstall`]), then the revision record and the finalizer go. CRDs stay
//! when the extension carries [`ANNOTATION_KEEP_CRDS`]`: "true"`. A missing installer
//! account does not block deletion: the ownerReferences let garbage collection remove
//! the objects, and an Event says so. A failure is counted, reported as a Warning Event
//! and retried with backoff.

use super::{Count, Ending, Facts, Note, Plan, Tally};
use crate::api::ClusterExtension;
use crate::apply::{self, ObjectRef, UninstallReport};
use crate::controller::extension::installer::InstallerAccount;
use kube::ResourceExt;

/// Annotation that keeps CRDs (and so the users' custom resources) on uninstall.
pub const ANNOTATION_KEEP_CRDS: &str = "olm.operatorframework.io/keep-crds-on-uninstall";

/// What an uninstall deletes, as whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deletion {
    pub account: InstallerAccount,
    /// Every object of every revision not superseded.
    pub objects: Vec<ObjectRef>,
    /// Leave CustomResourceDefinitions (and so the users' custom resources) in place.
    pub keep_crds: bool,
}

/// Why the installed objects were not deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeleteFailure {
    /// The installer ServiceAccount does not exist (any more).
    AccountMissing,
    /// Anything else: retried.
    Failed(String),
}

/// Whether `ext` asks to keep its CRDs on uninstall.
pub fn keeps_crds(ext: &ClusterExtension) -> bool {
    ext.annotations()
        .get(ANNOTATION_KEEP_CRDS)
        .is_some_and(|v| v == "true")
}

/// The Event of a finished uninstall.
pub fn uninstalled_note(report: &UninstallReport) -> String {
    let kept = if report.kept.is_empty() {
        String::new()
    } else {
        format!(", {} CRD(s) kept", report.kept.len())
    };
    format!(
        "uninstalled: {} object(s) deleted{kept}",
        report.deleted.len()
    )
}

/// The next step of the uninstall of the extension `facts` describes.
pub(super) fn decide(facts: &Facts) -> Plan {
    if !facts.watches_stopped {
        return Plan::StopWatches;
    }
    if !facts.has_finalizer {
        return Plan::End(Box::default());
    }
    let history = match &facts.record {
        None => return Plan::LoadRecord,
        Some(Err(e)) => return failed(facts, format!("reading the revision record: {e}")),
        Some(Ok(history)) => history,
    };
    let objects = history
        .as_ref()
        .map(|h| h.all_objects())
        .unwrap_or_default();
    let name = &facts.name;
    let Ok(account) = &facts.installer else {
        // Nobody may act for the extension: its objects go with it (ownerReferences).
        let message = format!(
            "no installer ServiceAccount is set: {} object(s) are left to garbage collection through their ownerReferences to ClusterExtension {name:?}",
            objects.len()
        );
        return finished(note(true, "InstallerAccountMissing", message));
    };
    match &facts.deleted {
        None => Plan::Delete(Deletion {
            account: account.clone(),
            objects,
            keep_crds: facts.keep_crds,
        }),
        Some(Ok(report)) => finished(note(false, "Uninstalled", uninstalled_note(report))),
        Some(Err(DeleteFailure::AccountMissing)) => {
            let (namespace, account) = (&account.namespace, &account.name);
            let message = apply::garbage_collection_fallback(namespace, account, name, &objects);
            finished(note(true, "InstallerAccountMissing", message))
        }
        Some(Err(DeleteFailure::Failed(message))) => failed(facts, message.clone()),
    }
}

/// The end of an uninstall: its Event, then the revision record and the finalizers go,
/// and earlier failures are forgotten.
fn finished(note: Note) -> Plan {
    Plan::End(Box::new(Ending {
        events: vec![note],
        remove: true,
        tally: Tally {
            count: Count::Succeeded,
            ..Tally::default()
        },
        ..Ending::default()
    }))
}

/// An uninstall that could not finish: counted, reported as a Warning Event, retried
/// with backoff.
fn failed(facts: &Facts, message: String) -> Plan {
    let Some(standing) = &facts.standing else {
        return Plan::LookUpStanding;
    };
    Plan::End(Box::new(Ending {
        events: vec![note(true, "UninstallFailed", message)],
        tally: Tally {
            error: Some("UninstallFailed"),
            pending: false,
            count: Count::Failed,
            restart: false,
        },
        requeue: Some(standing.backoff),
        ..Ending::default()
    }))
}

fn note(warning: bool, reason: &'static str, message: String) -> Note {
    Note {
        warning,
        reason,
        action: "Uninstall",
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keep_crds_only_when_annotated_true() {
        let ext = |annotations: serde_json::Value| -> ClusterExtension {
            serde_json::from_value(json!({
                "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
                "metadata": {"name": "e", "annotations": annotations},
                "spec": {"namespace": "ns", "serviceAccount": {"name": "sa"},
                         "source": {"sourceType": "Catalog", "catalog": {"packageName": "p"}}},
            }))
            .unwrap()
        };
        assert!(keeps_crds(&ext(json!({ANNOTATION_KEEP_CRDS: "true"}))));
        assert!(!keeps_crds(&ext(json!({ANNOTATION_KEEP_CRDS: "yes"}))));
        assert!(!keeps_crds(&ext(json!({}))));
    }

    #[test]
    fn uninstalled_note_counts_deleted_and_kept() {
        let r = |kind: &str| ObjectRef {
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
            namespace: String::new(),
            name: "x".into(),
        };
        let mut report = UninstallReport {
            deleted: vec![r("Deployment"), r("ServiceAccount")],
            kept: Vec::new(),
        };
        assert_eq!(
            uninstalled_note(&report),
            "uninstalled: 2 object(s) deleted"
        );
        report.kept = vec![r("CustomResourceDefinition")];
        assert_eq!(
            uninstalled_note(&report),
            "uninstalled: 2 object(s) deleted, 1 CRD(s) kept"
        );
    }
}

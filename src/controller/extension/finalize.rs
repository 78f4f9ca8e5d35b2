//! Uninstall (docs/api-and-status.md A7): everything the extension installed is deleted
//! through its installer account, in reverse dependency order, then the revision record
//! and the finalizer go. CRDs stay when the extension carries
//! [`ANNOTATION_KEEP_CRDS`]`: "true"`. A missing installer account does not block
//! deletion: the ownerReferences let garbage collection remove the objects, and an Event
//! says so.

use super::ExtensionError;
use super::executor::{KubeExecutor, emit};
use super::plan::Note;
use crate::api::{self, ClusterExtension};
use crate::apply::{self, ApplyError, UninstallOptions, UninstallReport};
use crate::controller::common;
use crate::metrics::Controller as MetricsController;
use kube::ResourceExt;
use kube::runtime::controller::Action;

/// Annotation that keeps CRDs (and so the users' custom resources) on uninstall.
pub const ANNOTATION_KEEP_CRDS: &str = "olm.operatorframework.io/keep-crds-on-uninstall";

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

/// Uninstalls and removes the finalizer (nothing to do without it).
pub(crate) async fn finalize(exec: &KubeExecutor<'_>) -> Result<Action, ExtensionError> {
    let (ctx, ext) = (exec.ctx, exec.ext);
    let name = ext.name_any();
    ctx.drift.stop(&name);
    if !ext
        .finalizers()
        .iter()
        .any(|f| f == api::FINALIZER_EXTENSION)
    {
        return Ok(Action::await_change());
    }
    let history = match ctx.store.load(&exec.owner).await {
        Ok(h) => h,
        Err(e) => {
            let message = format!("reading the revision record: {e}");
            return Ok(uninstall_failed(exec, message).await);
        }
    };
    let objects = history
        .as_ref()
        .map(|h| h.all_objects())
        .unwrap_or_default();
    let Ok(account) = &exec.installer else {
        // Nobody may act for the extension: its objects go with it (ownerReferences).
        let message = format!(
            "no installer ServiceAccount is set: {} object(s) are left to garbage collection through their ownerReferences to ClusterExtension {name:?}",
            objects.len()
        );
        return remove(exec, &note(true, "InstallerAccountMissing", message)).await;
    };
    let (namespace, account) = (&account.namespace, &account.name);
    let installer = match ctx.installers.get(namespace, account) {
        Ok(c) => c,
        Err(e) => return Ok(uninstall_failed(exec, e.to_string()).await),
    };
    let options = UninstallOptions {
        keep_crds: keeps_crds(ext),
        apply: Default::default(),
    };
    let uninstalled = apply::uninstall(
        &ctx.client,
        &installer,
        namespace,
        account,
        &exec.owner,
        &objects,
        &options,
    )
    .await;
    let note = match uninstalled {
        Ok(report) => note(false, "Uninstalled", uninstalled_note(&report)),
        Err(ApplyError::InstallerAccountMissing { .. }) => {
            let message = apply::garbage_collection_fallback(namespace, account, &name, &objects);
            note(true, "InstallerAccountMissing", message)
        }
        Err(e) => return Ok(uninstall_failed(exec, e.to_string()).await),
    };
    ctx.installers.forget(namespace, account);
    remove(exec, &note).await
}

/// The end of an uninstall: its Event, then the revision record and the finalizer go.
async fn remove(exec: &KubeExecutor<'_>, note: &Note) -> Result<Action, ExtensionError> {
    let (ctx, ext) = (exec.ctx, exec.ext);
    let name = ext.name_any();
    emit(ctx, ext, note).await;
    if let Err(e) = ctx.store.delete(&name).await {
        tracing::warn!(extension = %name, error = %e, "deleting the revision record");
    }
    // Upstream's second finalizer, left on extensions taken over from upstream OLM v1
    // (README "Switching from upstream OLM v1"): nothing else would remove it.
    common::remove_finalizers(
        &exec.api,
        ext,
        &[api::FINALIZER_EXTENSION, api::FINALIZER_EXTENSION_CONTENT],
    )
    .await?;
    ctx.failures.succeeded(&name);
    ctx.metrics.forget_extension(&name);
    Ok(Action::await_change())
}

/// An uninstall that could not finish: counted, reported as a Warning Event, retried
/// with backoff.
async fn uninstall_failed(exec: &KubeExecutor<'_>, message: String) -> Action {
    let ctx = exec.ctx;
    ctx.metrics
        .error(MetricsController::clusterextension, "UninstallFailed");
    emit(ctx, exec.ext, &note(true, "UninstallFailed", message)).await;
    Action::requeue(ctx.failures.next_backoff(&exec.ext.name_any()))
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
    use crate::apply::ObjectRef;
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

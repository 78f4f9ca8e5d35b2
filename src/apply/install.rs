//! One install or upgrade step as the reconciler calls it: the permission preflight for the
//! new objects and the deletions of the upgrade, then record (pending) → apply → prune →
//! record (installed). Every write of bundle content goes through the installer client.

use super::applier::{ApplyError, ApplyOptions, ApplyReport, Resolver, apply, prune, resource_map};
use super::ownership::Owner;
use super::record::{BundleInfo, ObjectRef, RecordError, RevisionHistory, RevisionStore};
use crate::preflight::permissions::{
    self, EvaluateError, PermissionError, add_deletions, describe, requirements,
};
use serde_json::{Value, json};

/// Errors of [`check_permissions`] and [`install_revision`].
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("rendered objects: {0}")]
    Objects(#[from] PermissionError),
    /// Missing permissions (reference §7 message) or a failed SubjectAccessReview.
    #[error(transparent)]
    Preflight(#[from] EvaluateError),
}

/// The permission preflight (reference §7) for installing `objects` as the ServiceAccount
/// `account_namespace/account_name`, including `get`/`delete` on what the upgrade prunes
/// (from `history`). `controller` sends the SubjectAccessReviews; `installer` is used for
/// discovery only.
pub async fn check_permissions(
    controller: &kube::Client,
    installer: &kube::Client,
    account_namespace: &str,
    account_name: &str,
    owner: &Owner,
    objects: &[Value],
    history: Option<&RevisionHistory>,
) -> Result<(), InstallError> {
    let resolver = Resolver::new(installer.clone());
    let dropped: Vec<Value> = history
        .map(|h| h.dropped_by(objects))
        .unwrap_or_default()
        .iter()
        .map(ref_object)
        .collect();
    let mut all = objects.to_vec();
    all.extend(dropped.iter().cloned());
    let map = resource_map(&resolver, &all).await?;
    let infos = describe(objects, &map)?;
    let mut req = requirements(objects, &infos, &owner.name);
    add_deletions(&mut req, &describe(&dropped, &map)?);
    permissions::preflight(controller, account_namespace, account_name, &req).await?;
    Ok(())
}

fn ref_object(r: &ObjectRef) -> Value {
    let mut meta = json!({"name": r.name});
    if !r.namespace.is_empty() {
        meta["namespace"] = json!(r.namespace);
    }
    json!({"apiVersion": r.api_version(), "kind": r.kind, "metadata": meta})
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
/// the installed revision (drift correction) costs no record write.
pub async fn install_revision(
    installer: &kube::Client,
    store: &RevisionStore,
    owner: &Owner,
    bundle: BundleInfo,
    objects: &[Value],
    opts: &ApplyOptions,
) -> Result<InstallOutcome, InstallError> {
    let mut history = store
        .load(owner)
        .await?
        .unwrap_or_else(|| RevisionHistory::new(owner));
    let original = history.clone();
    let revision = history.begin(bundle, objects);
    let mut record_written = false;
    if history != original {
        store.save(&history).await?;
        record_written = true;
    }
    let report = apply(installer, owner, objects, opts).await?;
    let candidates = history.prune_candidates(revision);
    let pruned = prune(installer, owner, &candidates, opts).await?;
    let pending = history.clone();
    history.complete(revision);
    if history != pending || (history != original && !record_written) {
        store.save(&history).await?;
        record_written = true;
    }
    Ok(InstallOutcome {
        revision,
        report,
        pruned,
        history,
        record_written,
    })
}

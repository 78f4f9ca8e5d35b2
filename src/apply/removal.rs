//! Removing what an extension installed, as the installer account: pruning objects of
//! earlier revisions, and the uninstall (reverse apply order, CRDs last, optionally kept
//! and released), each phase waited for before the next. Objects taken over by someone
//! else since are left alone.

use super::applier::{ApplyError, ApplyOptions, Resolver, get_absent_ok, is_not_found, kube_err};
use super::order::{PhaseKind, phase_of, uninstall_order};
use super::ownership::{Owner, Ownership, classify};
use super::types::ObjectRef;
use futures::FutureExt;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::json;
use std::collections::HashMap;
use std::time::Instant;

/// Deletes `objects` (from earlier revisions) that are still owned by `owner`, in
/// uninstall order; absent objects and kinds no longer served are skipped. Returns what was
/// deleted. Does not wait for the objects to disappear.
pub async fn prune(
    installer: &kube::Client,
    owner: &Owner,
    objects: &[ObjectRef],
    opts: &ApplyOptions,
) -> Result<Vec<ObjectRef>, ApplyError> {
    let resolver = Resolver::new(installer.clone());
    let mut deleted = Vec::new();
    for phase in phases_for_delete(objects) {
        let mut out = delete_phase(&resolver, owner, &phase, opts).await?;
        deleted.append(&mut out);
    }
    deleted.sort();
    Ok(deleted)
}

/// The objects grouped by apply phase, in uninstall order.
pub(super) fn phases_for_delete(objects: &[ObjectRef]) -> Vec<Vec<ObjectRef>> {
    let mut by: HashMap<PhaseKind, Vec<ObjectRef>> = HashMap::new();
    for o in objects {
        by.entry(phase_of(&o.group, &o.kind))
            .or_default()
            .push(o.clone());
    }
    let kinds: Vec<PhaseKind> = by.keys().copied().collect();
    uninstall_order(&kinds)
        .into_iter()
        .filter_map(|k| by.remove(&k))
        .collect()
}

/// Deletes the objects of one phase that are still ours, concurrently; what was deleted.
async fn delete_phase(
    resolver: &Resolver,
    owner: &Owner,
    objects: &[ObjectRef],
    opts: &ApplyOptions,
) -> Result<Vec<ObjectRef>, ApplyError> {
    let out: Vec<Option<ObjectRef>> = futures::stream::iter(objects.iter().cloned())
        .map(|r| {
            async move {
                let r = &r;
                let Some((ar, namespaced)) = resolver.resolve(r).await? else {
                    return Ok(None);
                };
                let api = resolver.api(&ar, namespaced, &r.namespace);
                let Some(existing) = get_absent_ok(&api, &r.name)
                    .await
                    .map_err(kube_err("reading", r))?
                else {
                    return Ok(None);
                };
                if classify(existing.metadata.labels.as_ref(), &owner.name) != Ownership::Ours {
                    return Ok(None); // taken over by someone else since: leave it
                }
                let params = DeleteParams {
                    preconditions: existing.metadata.uid.clone().map(|uid| {
                        kube::api::Preconditions {
                            uid: Some(uid),
                            resource_version: None,
                        }
                    }),
                    ..DeleteParams::background()
                };
                match api.delete(&r.name, &params).await {
                    Ok(_) => Ok(Some(r.clone())),
                    Err(e)
                        if is_not_found(&e)
                            || matches!(&e, kube::Error::Api(s) if s.code == 409) =>
                    {
                        Ok(None)
                    }
                    Err(e) => Err(kube_err("deleting", r)(e)),
                }
            }
            .boxed()
        })
        .buffer_unordered(opts.concurrency.max(1))
        .try_collect()
        .await?;
    Ok(out.into_iter().flatten().collect())
}

/// Options of an uninstall.
#[derive(Debug, Clone, Default)]
pub struct UninstallOptions {
    /// Leave CustomResourceDefinitions (and so the users' custom resources) in place; their
    /// ownerReference to the ClusterExtension is removed so garbage collection keeps them.
    pub keep_crds: bool,
    pub apply: ApplyOptions,
}

/// What an uninstall did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UninstallReport {
    pub deleted: Vec<ObjectRef>,
    pub kept: Vec<ObjectRef>,
}

/// Removes `objects` (the record's objects) as the installer account, in reverse apply
/// order with CRDs last, waiting (bounded) for each phase to disappear before the next.
/// `controller` (the controller's own client) checks first that the installer account
/// `account_namespace/account_name` still exists: if not, returns
/// [`ApplyError::InstallerAccountMissing`] at once.
pub async fn uninstall(
    controller: &kube::Client,
    installer: &kube::Client,
    account_namespace: &str,
    account_name: &str,
    owner: &Owner,
    objects: &[ObjectRef],
    opts: &UninstallOptions,
) -> Result<UninstallReport, ApplyError> {
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(controller.clone(), account_namespace);
    let account = sas.get_opt(account_name).await.map_err(kube_err(
        "reading",
        format!("ServiceAccount/{account_namespace}/{account_name}"),
    ))?;
    if account.is_none() {
        return Err(ApplyError::InstallerAccountMissing {
            namespace: account_namespace.to_owned(),
            name: account_name.to_owned(),
        });
    }
    let resolver = Resolver::new(installer.clone());
    let mut report = UninstallReport::default();
    for phase in phases_for_delete(objects) {
        let is_crds = phase
            .first()
            .is_some_and(|o| phase_of(&o.group, &o.kind) == PhaseKind::Crds);
        if is_crds && opts.keep_crds {
            for r in &phase {
                release_crd(&resolver, owner, r).await?;
                report.kept.push(r.clone());
            }
            continue;
        }
        let mut deleted = delete_phase(&resolver, owner, &phase, &opts.apply).await?;
        wait_gone(&resolver, &deleted, &opts.apply).await?;
        report.deleted.append(&mut deleted);
    }
    report.deleted.sort();
    report.kept.sort();
    Ok(report)
}

/// Removes this extension's ownerReference from a kept CRD (labels stay, so a later
/// install of the same extension can manage it again).
async fn release_crd(resolver: &Resolver, owner: &Owner, r: &ObjectRef) -> Result<(), ApplyError> {
    let Some((ar, _)) = resolver.resolve(r).await? else {
        return Ok(());
    };
    let api: Api<DynamicObject> = Api::all_with(resolver.client.clone(), &ar);
    let Some(existing) = get_absent_ok(&api, &r.name)
        .await
        .map_err(kube_err("reading", r))?
    else {
        return Ok(());
    };
    let refs = existing.metadata.owner_references.unwrap_or_default();
    if !refs.iter().any(|o| o.uid == owner.uid) {
        return Ok(());
    }
    let kept: Vec<_> = refs.into_iter().filter(|o| o.uid != owner.uid).collect();
    let patch = json!({"metadata": {"ownerReferences": kept, "resourceVersion": existing.metadata.resource_version}});
    api.patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(kube_err("releasing", r))?;
    Ok(())
}

/// Waits until `objects` are gone, at most `opts.delete_timeout`.
async fn wait_gone(
    resolver: &Resolver,
    objects: &[ObjectRef],
    opts: &ApplyOptions,
) -> Result<(), ApplyError> {
    let deadline = Instant::now() + opts.delete_timeout;
    let mut pending: Vec<ObjectRef> = objects.to_vec();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for r in pending {
            let Some((ar, namespaced)) = resolver.resolve(&r).await? else {
                continue;
            };
            let api = resolver.api(&ar, namespaced, &r.namespace);
            if get_absent_ok(&api, &r.name)
                .await
                .map_err(kube_err("reading", &r))?
                .is_some()
            {
                still.push(r);
            }
        }
        pending = still;
        if pending.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            return Err(ApplyError::DeleteTimeout {
                objects: pending,
                timeout: opts.delete_timeout,
            });
        }
        tokio::time::sleep(opts.poll).await;
    }
    Ok(())
}

/// What the caller reports when the installer account is gone (docs/reference/api-and-status.md A7): the
/// objects that garbage collection removes once the ClusterExtension is deleted.
pub fn garbage_collection_fallback(
    namespace: &str,
    name: &str,
    extension: &str,
    objects: &[ObjectRef],
) -> String {
    format!(
        "service account {name:?} not found in namespace {namespace:?}: {} object(s) are left to garbage collection through their ownerReferences to ClusterExtension {extension:?}",
        objects.len()
    )
}

#[cfg(test)]
#[path = "removal_tests.rs"]
mod tests;

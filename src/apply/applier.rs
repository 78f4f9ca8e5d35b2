//! Talking to the API server as the installer account: resolving kinds through
//! discovery, the takeover check, ordered server-side apply with the wait for CRDs to be
//! Established, pruning and uninstall.

use super::order::{PhaseKind, apply_order, phase_of, uninstall_order};
use super::ownership::{Conflict, Owner, Ownership, classify, conflict_message, with_ownership};
use super::record::ObjectRef;
use futures::FutureExt;
use futures::{StreamExt, TryStreamExt};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
};
use kube::discovery::Scope;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The field manager of every server-side apply.
pub const FIELD_MANAGER: &str = "olmv1";

/// Errors of applying, pruning and uninstalling.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("object #{index} cannot be applied: {reason}")]
    InvalidObject { index: usize, reason: String },
    /// Existing objects not owned by this extension (message lists every one).
    #[error("{message}")]
    Conflict {
        conflicts: Vec<Conflict>,
        message: String,
    },
    #[error("{object}: the API server does not serve kind {} in {}", object.kind, object.api_version())]
    UnknownKind { object: Box<ObjectRef> },
    #[error("{action} {object}: {source}")]
    Kube {
        action: &'static str,
        object: String,
        #[source]
        source: kube::Error,
    },
    #[error("CustomResourceDefinition {name} did not become Established within {timeout:?}{}", last.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    CrdNotEstablished {
        name: String,
        timeout: Duration,
        last: Option<String>,
    },
    #[error("objects still present {timeout:?} after deleting them: {}", objects.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    DeleteTimeout {
        objects: Vec<ObjectRef>,
        timeout: Duration,
    },
    /// The installer ServiceAccount is gone: nothing can be deleted as it. The caller
    /// reports it and falls back to garbage collection through the ownerReferences.
    #[error(
        "service account {name:?} not found in namespace {namespace:?}: cannot uninstall as the installer account; objects are left to garbage collection through their ownerReferences"
    )]
    InstallerAccountMissing { namespace: String, name: String },
}

fn kube_err(action: &'static str, object: impl ToString) -> impl FnOnce(kube::Error) -> ApplyError {
    let object = object.to_string();
    move |source| ApplyError::Kube {
        action,
        object,
        source,
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// `get_opt` that also treats a bare 404 (the kind stopped being served, e.g. its CRD was
/// just deleted) as absent.
async fn get_absent_ok(
    api: &Api<DynamicObject>,
    name: &str,
) -> Result<Option<DynamicObject>, kube::Error> {
    match api.get_opt(name).await {
        Err(e) if is_not_found(&e) => Ok(None),
        other => other,
    }
}

/// Timeouts and concurrency.
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// How long to wait for an applied CRD to be Established (and its kind served).
    pub crd_timeout: Duration,
    /// How long to wait for one uninstall phase to disappear.
    pub delete_timeout: Duration,
    /// Requests in flight at once within a phase.
    pub concurrency: usize,
    /// Poll interval while waiting.
    pub poll: Duration,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            crd_timeout: Duration::from_secs(60),
            delete_timeout: Duration::from_secs(120),
            concurrency: 16,
            poll: Duration::from_millis(100),
        }
    }
}

/// (group, version, kind).
type GvkKey = (String, String, String);

/// Resolves kinds to resources through discovery, caching what it found. Kinds that are
/// not served are not cached (they may appear once a CRD is Established).
pub struct Resolver {
    client: kube::Client,
    cache: Mutex<HashMap<GvkKey, (ApiResource, bool)>>,
}

impl Resolver {
    pub fn new(client: kube::Client) -> Self {
        Resolver {
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// (resource, namespaced), `None` when the kind is not served.
    pub async fn resolve(&self, r: &ObjectRef) -> Result<Option<(ApiResource, bool)>, ApplyError> {
        let key = (r.group.clone(), r.version.clone(), r.kind.clone());
        if let Some(hit) = self
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(Some(hit.clone()));
        }
        let gvk = GroupVersionKind::gvk(&r.group, &r.version, &r.kind);
        match kube::discovery::pinned_kind(&self.client, &gvk).await {
            Ok((ar, caps)) => {
                let v = (ar, caps.scope == Scope::Namespaced);
                self.cache
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, v.clone());
                Ok(Some(v))
            }
            Err(kube::Error::Discovery(_)) => Ok(None),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(kube_err("discovering the kind of", r)(e)),
        }
    }

    /// [`Self::resolve`], retrying until `timeout` for kinds not served yet.
    pub async fn resolve_waiting(
        &self,
        r: &ObjectRef,
        timeout: Duration,
        poll: Duration,
    ) -> Result<(ApiResource, bool), ApplyError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = self.resolve(r).await? {
                return Ok(v);
            }
            if Instant::now() >= deadline {
                return Err(ApplyError::UnknownKind {
                    object: Box::new(r.clone()),
                });
            }
            tokio::time::sleep(poll).await;
        }
    }

    fn api(&self, ar: &ApiResource, namespaced: bool, namespace: &str) -> Api<DynamicObject> {
        if namespaced {
            Api::namespaced_with(self.client.clone(), namespace, ar)
        } else {
            Api::all_with(self.client.clone(), ar)
        }
    }
}

/// The permission model's [`ResourceMap`] for `objects`: built-in kinds and bundled CRDs,
/// completed from discovery for other kinds the API server serves (kinds it does not
/// serve keep the plural guessed from the kind).
pub async fn resource_map(
    resolver: &Resolver,
    objects: &[Value],
) -> Result<crate::preflight::permissions::ResourceMap, ApplyError> {
    let mut map = crate::preflight::permissions::ResourceMap::offline(objects);
    for (group, version, kind) in map.unknown_kinds(objects) {
        let r = ObjectRef {
            group: group.clone(),
            version,
            kind: kind.clone(),
            namespace: String::new(),
            name: String::new(),
        };
        if let Some((ar, namespaced)) = resolver.resolve(&r).await? {
            map.insert(&group, &kind, &ar.plural, namespaced);
        }
    }
    Ok(map)
}

/// What an apply did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyReport {
    /// Objects applied.
    pub applied: usize,
    /// Objects created or whose resourceVersion changed.
    pub changed: Vec<ObjectRef>,
}

fn refs_of(objects: &[Value]) -> Result<Vec<ObjectRef>, ApplyError> {
    objects
        .iter()
        .enumerate()
        .map(|(index, o)| {
            ObjectRef::from_object(o).ok_or_else(|| ApplyError::InvalidObject {
                index,
                reason: "apiVersion, kind and metadata.name are required".into(),
            })
        })
        .collect()
}

/// Applies `objects` (rendered; ownership metadata is added here) as the installer account
/// behind `installer`, owned by `owner`: first checks that no existing object belongs to
/// someone else (nothing is written if one does), then server-side applies phase by phase
/// ([`apply_order`]), waiting after the CRD phase until every CRD is Established.
pub async fn apply(
    installer: &kube::Client,
    owner: &Owner,
    objects: &[Value],
    opts: &ApplyOptions,
) -> Result<ApplyReport, ApplyError> {
    let refs = refs_of(objects)?;
    let resolver = Resolver::new(installer.clone());
    let versions = check_takeover(&resolver, owner, &refs, opts.concurrency).await?;
    let mut report = ApplyReport::default();
    for phase in apply_order(objects) {
        let results: Vec<(ObjectRef, bool)> = futures::stream::iter(phase.objects.iter().copied())
            .map(|i| {
                let resolver = &resolver;
                let r = &refs[i];
                let before = versions.get(&i).cloned();
                async move {
                    let (ar, namespaced) = resolver
                        .resolve_waiting(r, opts.crd_timeout, opts.poll)
                        .await?;
                    if namespaced && r.namespace.is_empty() {
                        return Err(ApplyError::InvalidObject {
                            index: i,
                            reason: format!(
                                "{r}: {} is namespaced but the object has no metadata.namespace",
                                r.kind
                            ),
                        });
                    }
                    let body = with_ownership(&objects[i], owner);
                    let api = resolver.api(&ar, namespaced, &r.namespace);
                    let out = api
                        .patch(
                            &r.name,
                            &PatchParams::apply(FIELD_MANAGER).force(),
                            &Patch::Apply(&body),
                        )
                        .await
                        .map_err(kube_err("applying", r))?;
                    let changed = match before {
                        None => true,
                        Some(rv) => out.metadata.resource_version != rv,
                    };
                    Ok::<_, ApplyError>((r.clone(), changed))
                }
                .boxed()
            })
            .buffer_unordered(opts.concurrency.max(1))
            .try_collect()
            .await?;
        report.applied += results.len();
        report
            .changed
            .extend(results.into_iter().filter(|(_, c)| *c).map(|(r, _)| r));
        if phase.kind == PhaseKind::Crds {
            for i in &phase.objects {
                wait_established(&resolver, &refs[*i], opts).await?;
            }
        }
    }
    report.changed.sort();
    Ok(report)
}

/// Existing objects' resourceVersions (by input index); `Err(Conflict)` listing every
/// existing object that is not labelled as owned by `owner`.
async fn check_takeover(
    resolver: &Resolver,
    owner: &Owner,
    refs: &[ObjectRef],
    concurrency: usize,
) -> Result<HashMap<usize, Option<String>>, ApplyError> {
    let found: Vec<Option<(usize, Option<String>, Ownership)>> =
        futures::stream::iter(refs.iter().cloned().enumerate())
            .map(|(i, r)| {
                async move {
                    let r = &r;
                    // A kind that is not served yet (CRD of this bundle) has no objects.
                    let Some((ar, namespaced)) = resolver.resolve(r).await? else {
                        return Ok(None);
                    };
                    let api = resolver.api(&ar, namespaced, &r.namespace);
                    let existing = get_absent_ok(&api, &r.name)
                        .await
                        .map_err(kube_err("reading", r))?;
                    Ok::<_, ApplyError>(existing.map(|o| {
                        (
                            i,
                            o.metadata.resource_version.clone(),
                            classify(o.metadata.labels.as_ref(), &owner.name),
                        )
                    }))
                }
                .boxed()
            })
            .buffer_unordered(concurrency.max(1))
            .try_collect()
            .await?;
    let mut versions = HashMap::new();
    let mut conflicts = Vec::new();
    for (i, rv, ownership) in found.into_iter().flatten() {
        if ownership == Ownership::Ours {
            versions.insert(i, rv);
        } else {
            conflicts.push(Conflict {
                object: refs[i].clone(),
                ownership,
            });
        }
    }
    if conflicts.is_empty() {
        Ok(versions)
    } else {
        conflicts.sort_by(|a, b| a.object.cmp(&b.object));
        Err(ApplyError::Conflict {
            message: conflict_message(&conflicts),
            conflicts,
        })
    }
}

/// The `Established` condition of a CRD: (status, message).
pub fn established(crd: &Value) -> (bool, Option<String>) {
    let conds = crd["status"]["conditions"].as_array();
    let c = conds.and_then(|cs| cs.iter().find(|c| c["type"] == "Established"));
    match c {
        Some(c) => (
            c["status"] == "True",
            c["message"].as_str().map(str::to_owned),
        ),
        None => (false, None),
    }
}

async fn wait_established(
    resolver: &Resolver,
    r: &ObjectRef,
    opts: &ApplyOptions,
) -> Result<(), ApplyError> {
    let (ar, _) = resolver
        .resolve_waiting(r, opts.crd_timeout, opts.poll)
        .await?;
    let api: Api<DynamicObject> = Api::all_with(resolver.client.clone(), &ar);
    let deadline = Instant::now() + opts.crd_timeout;
    let mut last = None;
    loop {
        if let Some(o) = get_absent_ok(&api, &r.name)
            .await
            .map_err(kube_err("reading", r))?
        {
            let v = serde_json::to_value(&o).unwrap_or(Value::Null);
            let (ok, msg) = established(&v);
            if ok {
                return Ok(());
            }
            last = msg;
        }
        if Instant::now() >= deadline {
            return Err(ApplyError::CrdNotEstablished {
                name: r.name.clone(),
                timeout: opts.crd_timeout,
                last,
            });
        }
        tokio::time::sleep(opts.poll).await;
    }
}

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

fn phases_for_delete(objects: &[ObjectRef]) -> Vec<Vec<ObjectRef>> {
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

/// What the caller reports when the installer account is gone (reference A7): the
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
mod tests {
    use super::*;

    #[test]
    fn established_condition() {
        let crd = json!({"status": {"conditions": [
            {"type": "NamesAccepted", "status": "True"},
            {"type": "Established", "status": "False", "message": "not yet"}]}});
        assert_eq!(established(&crd), (false, Some("not yet".into())));
        let crd = json!({"status": {"conditions": [{"type": "Established", "status": "True"}]}});
        assert!(established(&crd).0);
        assert_eq!(established(&json!({})), (false, None));
    }

    #[test]
    fn delete_phases_put_crds_last() {
        let r = |g: &str, k: &str, n: &str| ObjectRef {
            group: g.into(),
            version: "v1".into(),
            kind: k.into(),
            namespace: String::new(),
            name: n.into(),
        };
        let phases = phases_for_delete(&[
            r("apiextensions.k8s.io", "CustomResourceDefinition", "crd"),
            r("", "ConfigMap", "cm"),
            r("apps", "Deployment", "d"),
            r("example.com", "Widget", "w"),
            r("", "Namespace", "ns"),
        ]);
        let names: Vec<Vec<&str>> = phases
            .iter()
            .map(|p| p.iter().map(|o| o.name.as_str()).collect())
            .collect();
        assert_eq!(
            names,
            vec![vec!["w"], vec!["d"], vec!["cm"], vec!["ns"], vec!["crd"]]
        );
    }

    #[test]
    fn invalid_objects_are_rejected_before_any_request() {
        let err = refs_of(&[json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})])
            .unwrap_err();
        assert!(matches!(err, ApplyError::InvalidObject { index: 0, .. }));
    }

    #[test]
    fn fallback_message_names_the_account() {
        let msg = garbage_collection_fallback("ns", "sa", "ext", &[]);
        assert!(
            msg.contains("\"sa\" not found in namespace \"ns\""),
            "{msg}"
        );
    }
}

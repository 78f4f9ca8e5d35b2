//! Talking to the API server as the installer account: resolving kinds through
//! discovery ([`Resolver`]), the takeover check, and ordered server-side apply with the
//! wait for CRDs to be Established ([`apply`]). Pruning and uninstall, which use the same
//! resolver and errors, are in `removal`.

pub use super::establish::established;
use super::establish::{Establishing, overlaps_establishment};
use super::order::{PhaseKind, apply_stages, phase_of};
use super::ownership::{
    Conflict, Owner, Ownership, conflict_message, existing_ownership, with_ownership,
};
use super::types::{FIELD_MANAGER, ObjectRef};
use futures::FutureExt;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::Scope;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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

pub(super) fn kube_err(
    action: &'static str,
    object: impl ToString,
) -> impl FnOnce(kube::Error) -> ApplyError {
    let object = object.to_string();
    move |source| ApplyError::Kube {
        action,
        object,
        source,
    }
}

pub(super) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// `get_opt` that also treats a bare 404 (the kind stopped being served, e.g. its CRD was
/// just deleted) as absent.
pub(super) async fn get_absent_ok(
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
    /// Refuse existing objects that upstream OLM v1's Helm applier installed
    /// ([`super::ownership::helm_managed`]): set for a first install that adopts no
    /// release; unset once olmv1's record exists or while adopting.
    pub refuse_helm_managed: bool,
    /// Take over existing objects no ClusterExtension owns
    /// ([`Ownership::Unmanaged`], without Helm's release annotation) that carry this
    /// mark ([`super::ownership::adoption_mark`]): set only while taking over an OLM v0
    /// installation (docs/how-to/switch-from-olm-v0.md, "The takeover").
    pub adopt_unmanaged: Option<String>,
    /// The (group, kind)s whose objects [`ApplyReport::observed`] returns as the API
    /// server answered the apply (a CRD: as read once Established), so that a verdict
    /// right after the apply (readiness) needs no second read. `None`: none kept.
    pub observe: Option<fn(&str, &str) -> bool>,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            crd_timeout: Duration::from_secs(60),
            delete_timeout: Duration::from_secs(120),
            concurrency: 16,
            poll: Duration::from_millis(100),
            refuse_helm_managed: false,
            adopt_unmanaged: None,
            observe: None,
        }
    }
}

/// (group, version, kind).
type GvkKey = (String, String, String);

/// Resolves kinds to resources through discovery, caching what it found. Kinds that are
/// not served are not cached (they may appear once a CRD is Established).
pub struct Resolver {
    pub(super) client: kube::Client,
    cache: Mutex<HashMap<GvkKey, (ApiResource, bool)>>,
}

impl Resolver {
    pub fn new(client: kube::Client) -> Self {
        Resolver {
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// (resource, namespaced), `None` when the kind is not served. Kinds every API
    /// server serves ([`crate::kinds::served_everywhere`]) are known without discovery.
    pub async fn resolve(&self, r: &ObjectRef) -> Result<Option<(ApiResource, bool)>, ApplyError> {
        if let Some((plural, namespaced)) =
            crate::kinds::served_everywhere(&r.group, &r.version, &r.kind)
        {
            let gvk = GroupVersionKind::gvk(&r.group, &r.version, &r.kind);
            return Ok(Some((
                ApiResource::from_gvk_with_plural(&gvk, plural),
                namespaced,
            )));
        }
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
        for attempt in 0.. {
            if let Some(v) = self.resolve(r).await? {
                return Ok(v);
            }
            if Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(poll_delay(attempt, poll)).await;
        }
        Err(ApplyError::UnknownKind {
            object: Box::new(r.clone()),
        })
    }

    pub(super) fn api(
        &self,
        ar: &ApiResource,
        namespaced: bool,
        namespace: &str,
    ) -> Api<DynamicObject> {
        if namespaced {
            Api::namespaced_with(self.client.clone(), namespace, ar)
        } else {
            Api::all_with(self.client.clone(), ar)
        }
    }
}

/// The permission model's [`ResourceMap`](crate::kinds::ResourceMap) for `objects`:
/// built-in kinds and bundled CRDs, completed from discovery for other kinds the API
/// server serves (kinds it does not serve keep the plural guessed from the kind).
pub async fn resource_map(
    resolver: &Resolver,
    objects: &[Value],
) -> Result<crate::kinds::ResourceMap, ApplyError> {
    let mut map = crate::kinds::ResourceMap::offline(objects);
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
    /// The objects of [`ApplyOptions::observe`]'s kinds as the API server last returned
    /// them, in input order.
    pub observed: Vec<Value>,
    /// The `metadata.generation` each applied object had in the API server's answer
    /// (objects of kinds without one left out), sorted.
    pub generations: Vec<(ObjectRef, i64)>,
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
/// someone else (nothing is written if one does), then server-side applies stage by stage
/// ([`apply_stages`]), waiting after the CRDs' stage until every CRD is Established.
pub async fn apply(
    installer: &kube::Client,
    owner: &Owner,
    objects: &[Value],
    opts: &ApplyOptions,
) -> Result<ApplyReport, ApplyError> {
    let checked = check_ownership(installer, owner, objects, opts).await?;
    apply_checked(owner, objects, checked, opts).await
}

/// The takeover check of [`apply`] alone (it only reads): what [`apply_checked`] needs
/// to apply the same `objects`.
pub struct Checked {
    refs: Vec<ObjectRef>,
    /// resourceVersions of the existing objects, by input index.
    versions: HashMap<usize, Option<String>>,
    /// The kinds the check discovered, not discovered again by the apply.
    resolver: Resolver,
}

/// Checks that no existing object of `objects` belongs to someone else (`Err(Conflict)`
/// lists every one that does); reads only, so it may run beside other work of the same
/// install (the pending revision record, [`super::install_revision()`]).
pub async fn check_ownership(
    installer: &kube::Client,
    owner: &Owner,
    objects: &[Value],
    opts: &ApplyOptions,
) -> Result<Checked, ApplyError> {
    let refs = refs_of(objects)?;
    let resolver = Resolver::new(installer.clone());
    let versions = check_takeover(&resolver, owner, &refs, opts).await?;
    Ok(Checked {
        refs,
        versions,
        resolver,
    })
}

/// [`apply`] once [`check_ownership`] passed for the same `objects` (as the same
/// installer: the check carries its client).
pub async fn apply_checked(
    owner: &Owner,
    objects: &[Value],
    checked: Checked,
    opts: &ApplyOptions,
) -> Result<ApplyReport, ApplyError> {
    let Checked {
        refs,
        versions,
        resolver,
    } = checked;
    let mut report = ApplyReport::default();
    // CRDs applied and not yet waited for: their establishment is waited for alongside
    // the phases that do not need them (RBAC, Services, workloads), and before anything
    // else and before the apply returns.
    let mut establishing = Establishing::default();
    let mut observed: BTreeMap<usize, Value> = BTreeMap::new();
    let started = std::time::Instant::now();
    for stage in apply_stages(objects) {
        if stage.iter().any(|p| !overlaps_establishment(p.kind)) {
            observed.extend(establishing.finish().await?);
        }
        let indices: Vec<usize> = stage.iter().flat_map(|p| p.objects.clone()).collect();
        let applies = futures::stream::iter(indices)
            .map(|i| {
                apply_one(
                    &resolver,
                    &refs[i],
                    i,
                    &objects[i],
                    versions.get(&i),
                    owner,
                    opts,
                )
            })
            .buffer_unordered(opts.concurrency.max(1))
            .try_collect::<Vec<Applied>>();
        let (results, waited) = establishing.alongside(applies).await;
        let results = results?;
        observed.extend(waited?);
        report.applied += results.len();
        for applied in results {
            if applied.changed {
                report.changed.push(refs[applied.index].clone());
            }
            if let Some(generation) = applied.generation {
                report
                    .generations
                    .push((refs[applied.index].clone(), generation));
            }
            observed.extend(applied.object.map(|o| (applied.index, o)));
        }
        let crds: Vec<usize> = stage
            .iter()
            .filter(|p| p.kind == PhaseKind::Crds)
            .flat_map(|p| p.objects.clone())
            .collect();
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        let kinds: Vec<PhaseKind> = stage.iter().map(|p| p.kind).collect();
        tracing::debug!(?kinds, elapsed_ms, "apply stage done");
        establishing.start(&resolver, &refs, owner, crds, opts);
    }
    observed.extend(establishing.finish().await?);
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    tracing::debug!(elapsed_ms, "apply done, every CRD established");
    report.changed.sort();
    report.generations.sort();
    report.observed = observed.into_values().collect();
    Ok(report)
}

/// One object applied by [`apply_one`].
struct Applied {
    /// Its index in the input.
    index: usize,
    /// Created, or its resourceVersion moved.
    changed: bool,
    /// Its `metadata.generation` as the API server answered.
    generation: Option<i64>,
    /// As the API server answered, when [`ApplyOptions::observe`] keeps its kind.
    object: Option<Value>,
}

/// Whether `opts` keeps objects of `r`'s kind ([`ApplyOptions::observe`]).
pub(super) fn observes(opts: &ApplyOptions, r: &ObjectRef) -> bool {
    opts.observe.is_some_and(|keep| keep(&r.group, &r.kind))
}

/// Server-side applies object `i` (`r`, rendered as `object`) with `owner`'s ownership
/// metadata; whether it changed (created, or its resourceVersion moved from `before`).
fn apply_one<'a>(
    resolver: &'a Resolver,
    r: &'a ObjectRef,
    i: usize,
    object: &'a Value,
    before: Option<&'a Option<String>>,
    owner: &'a Owner,
    opts: &'a ApplyOptions,
) -> futures::future::BoxFuture<'a, Result<Applied, ApplyError>> {
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
        let body = with_ownership(object, owner);
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
            Some(rv) => out.metadata.resource_version != *rv,
        };
        // A CRD is kept as read once Established (`wait_all_established`), not as applied.
        let established_later = phase_of(&r.group, &r.kind) == PhaseKind::Crds;
        let object = (observes(opts, r) && !established_later)
            .then(|| serde_json::to_value(&out).ok())
            .flatten();
        Ok(Applied {
            index: i,
            changed,
            generation: out.metadata.generation,
            object,
        })
    }
    .boxed()
}

/// Existing objects' resourceVersions (by input index); `Err(Conflict)` listing every
/// existing object that is not labelled as owned by `owner`.
async fn check_takeover(
    resolver: &Resolver,
    owner: &Owner,
    refs: &[ObjectRef],
    opts: &ApplyOptions,
) -> Result<HashMap<usize, Option<String>>, ApplyError> {
    let concurrency = opts.concurrency;
    let refuse_helm = opts.refuse_helm_managed;
    let adopt_unmanaged = opts.adopt_unmanaged.as_deref();
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
                        let ownership = existing_ownership(
                            &o.metadata,
                            r,
                            &owner.name,
                            refuse_helm,
                            adopt_unmanaged,
                        );
                        (i, o.metadata.resource_version.clone(), ownership)
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

/// The wait before check `attempt + 1` of a condition being polled (a CRD Established,
/// its kind served): 10 ms, doubling, at most `max` (`ApplyOptions::poll`). The API
/// server usually establishes a CRD within tens of milliseconds: a first wait of the
/// full 100 ms was most of an install's latency (docs/design/benchmarks.md).
pub(crate) fn poll_delay(attempt: u32, max: Duration) -> Duration {
    Duration::from_millis(10)
        .checked_mul(1u32.checked_shl(attempt).unwrap_or(u32::MAX))
        .map_or(max, |d| d.min(max))
}

#[cfg(test)]
#[path = "applier_tests.rs"]
mod tests;

//! The few Kubernetes calls `migrate convert` and `migrate rollback` make, on objects
//! named by apiVersion, kind, namespace and name (the plans' [`Target`]s), read and
//! written as JSON: get, list (each item with its apiVersion and kind), create (an
//! existing object is done), server-side apply, merge patch with the resourceVersion
//! read (a conflict says to run the command again), strategic merge patch, delete (a missing object is done).

use crate::migrate::olm_v0::convert::Target;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use serde_json::Value;

/// The end of the error of a patch refused because the object changed since it was read.
pub const CHANGED: &str = " changed since it was read: run the command again";

/// The field manager of the objects the commands apply.
pub const FIELD_MANAGER: &str = "olmv1-migrate";

fn api(client: &kube::Client, api_version: &str, kind: &str, ns: &str) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let lower = kind.to_ascii_lowercase();
    // English plurals as Kubernetes forms them: ValidatingAdmissionPolicy → …policies.
    let plural = match lower.strip_suffix('y') {
        Some(stem) if !stem.ends_with(['a', 'e', 'i', 'o', 'u']) => format!("{stem}ies"),
        _ => format!("{lower}s"),
    };
    let r = ApiResource::from_gvk_with_plural(&gvk, &plural);
    if ns.is_empty() {
        Api::all_with(client.clone(), &r)
    } else {
        Api::namespaced_with(client.clone(), ns, &r)
    }
}

fn target_api(client: &kube::Client, t: &Target) -> Api<DynamicObject> {
    api(client, &t.api_version, &t.kind, &t.namespace)
}

fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn to_value(o: DynamicObject, api_version: &str, kind: &str) -> Value {
    let mut v = serde_json::to_value(o).unwrap_or(Value::Null);
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), api_version.into());
        m.insert("kind".into(), kind.into());
    }
    v
}

/// The object `t`, `None` when absent (or its API is not served).
pub async fn get(client: &kube::Client, t: &Target) -> Result<Option<Value>, String> {
    match target_api(client, t).get_opt(&t.name).await {
        Ok(o) => Ok(o.map(|o| to_value(o, &t.api_version, &t.kind))),
        Err(e) if not_found(&e) => Ok(None),
        Err(e) => Err(format!("reading {t}: {e}")),
    }
}

/// The objects of `kind` in `ns` (empty: cluster-scoped or every namespace) matching
/// `labels`; an API the cluster does not serve lists nothing.
pub async fn list(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
    ns: &str,
    labels: Option<&str>,
) -> Result<Vec<Value>, String> {
    let mut params = ListParams::default();
    if let Some(l) = labels {
        params = params.labels(l);
    }
    match api(client, api_version, kind, ns).list(&params).await {
        Ok(l) => Ok(l
            .items
            .into_iter()
            .map(|o| to_value(o, api_version, kind))
            .collect()),
        Err(e) if not_found(&e) => Ok(Vec::new()),
        Err(e) => Err(format!("listing {kind}: {e}")),
    }
}

/// Creates `obj`; one that exists already is left as it is.
pub async fn create(client: &kube::Client, obj: &Value) -> Result<(), String> {
    let t = Target::of(obj);
    let o: DynamicObject = serde_json::from_value(obj.clone()).map_err(|e| format!("{t}: {e}"))?;
    match target_api(client, &t)
        .create(&PostParams::default(), &o)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(format!("creating {t}: {e}")),
    }
}

/// Server-side applies `obj` as [`FIELD_MANAGER`].
pub async fn apply(client: &kube::Client, obj: &Value) -> Result<(), String> {
    let t = Target::of(obj);
    target_api(client, &t)
        .patch(
            &t.name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(obj),
        )
        .await
        .map(|_| ())
        .map_err(|e| format!("applying {t}: {e}"))
}

/// Merge-patches `t` with `patch`; an absent object is done, a changed one (409) is an
/// error asking to run the command again.
pub async fn merge_patch(client: &kube::Client, t: &Target, patch: &Value) -> Result<(), String> {
    match target_api(client, t)
        .patch(&t.name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if not_found(&e) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Err(format!("{t}{CHANGED}")),
        Err(e) => Err(format!("patching {t}: {e}")),
    }
}

/// Deletes `t` (`orphan`: with propagationPolicy Orphan); an absent object is done.
pub async fn delete(client: &kube::Client, t: &Target, orphan: bool) -> Result<(), String> {
    let params = if orphan {
        DeleteParams::orphan()
    } else {
        DeleteParams::background()
    };
    match target_api(client, t).delete(&t.name, &params).await {
        Ok(_) => Ok(()),
        Err(e) if not_found(&e) => Ok(()),
        Err(e) => Err(format!("deleting {t}: {e}")),
    }
}

/// Strategic-merge-patches `t` (a built-in kind) with `patch`; an absent object is done.
pub async fn strategic_patch(
    client: &kube::Client,
    t: &Target,
    patch: &Value,
) -> Result<(), String> {
    match target_api(client, t)
        .patch(&t.name, &PatchParams::default(), &Patch::Strategic(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if not_found(&e) => Ok(()),
        Err(e) => Err(format!("patching {t}: {e}")),
    }
}

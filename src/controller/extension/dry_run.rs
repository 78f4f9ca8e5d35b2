//! Drift of a paused extension (docs/how-to/upgrade-control.md), found without writing:
//! each rendered object (with olmv1's ownership metadata, as the installer applies it) is
//! server-side applied with `dryRun=All` as the installer account, and the result is
//! compared with the live object — ignoring what the API server sets on every write
//! (resourceVersion, managedFields, generation). An object that is missing, or that the
//! apply would change, has drifted. Decides nothing else; the plan reports it
//! ([`super::plan::paused`]).

use crate::apply::{FIELD_MANAGER, ObjectRef, Owner, Resolver, with_ownership};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::Value;

/// The objects of `rendered` whose live state differs from what applying them would
/// make it (`kind namespace/name`), read and dry-run applied through `installer`.
pub(crate) async fn drifted(
    installer: &kube::Client,
    owner: &Owner,
    rendered: &[Value],
) -> Result<Vec<String>, String> {
    let resolver = Resolver::new(installer.clone());
    let mut drifted = Vec::new();
    for object in rendered {
        let Some(r) = ObjectRef::from_object(object) else {
            continue;
        };
        let Some((ar, namespaced)) = resolver.resolve(&r).await.map_err(|e| e.to_string())? else {
            drifted.push(format!("{r} (its kind is not served)"));
            continue;
        };
        let api: Api<DynamicObject> = if namespaced {
            Api::namespaced_with(installer.clone(), &r.namespace, &ar)
        } else {
            Api::all_with(installer.clone(), &ar)
        };
        let live = match api.get_opt(&r.name).await {
            Ok(Some(live)) => live,
            Ok(None) => {
                drifted.push(format!("{r} (deleted)"));
                continue;
            }
            Err(e) => return Err(format!("reading {r}: {e}")),
        };
        let mut params = PatchParams::apply(FIELD_MANAGER).force();
        params.dry_run = true;
        let body = with_ownership(object, owner);
        let applied = api
            .patch(&r.name, &params, &Patch::Apply(&body))
            .await
            .map_err(|e| format!("dry-run applying {r}: {e}"))?;
        if comparable(&live) != comparable(&applied) {
            drifted.push(r.to_string());
        }
    }
    Ok(drifted)
}

/// `object` without what every write changes.
fn comparable(object: &DynamicObject) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or(Value::Null);
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["resourceVersion", "managedFields", "generation"] {
            meta.remove(field);
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_every_write_changes_is_ignored() {
        let object = |rv: &str, data: &str| -> DynamicObject {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "resourceVersion": rv, "generation": 2,
                             "managedFields": [{"manager": rv}]},
                "data": {"k": data},
            }))
            .expect("object")
        };
        assert_eq!(comparable(&object("1", "a")), comparable(&object("2", "a")));
        assert_ne!(comparable(&object("1", "a")), comparable(&object("1", "b")));
    }
}

//! Structural pruning of the custom resources a bundle ships, against the CRDs of the
//! same bundle, before server-side apply.
//!
//! The API server silently drops fields that a CRD's structural schema does not declare
//! when an object is created or updated, but a server-side apply patch that carries such
//! a field fails (`failed to create typed patch object … field not declared in schema`).
//! Upstream installs bundles with create/update, so real bundles whose sample custom
//! resources carry undeclared fields (e.g. `ecr-secret-operator`) install there; pruning
//! the same fields here gives the same result with server-side apply. Pure functions.

use serde_json::{Map, Value};

/// Prunes every custom resource in `objects` whose CRD is also in `objects`; returns the
/// removed fields as `<Kind>/<name>: .path.to.field` (for a log line or an Event).
pub fn prune_custom_resources(objects: &mut [Value]) -> Vec<String> {
    // (group, kind, version) → openAPIV3Schema of the bundle's CRDs.
    let mut schemas: Vec<(String, String, String, Value)> = Vec::new();
    for crd in objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
    {
        let spec = &crd["spec"];
        let (Some(group), Some(kind)) = (spec["group"].as_str(), spec["names"]["kind"].as_str())
        else {
            continue;
        };
        for v in spec["versions"].as_array().into_iter().flatten() {
            let schema = &v["schema"]["openAPIV3Schema"];
            if let Some(name) = v["name"].as_str()
                && schema.is_object()
            {
                schemas.push((group.into(), kind.into(), name.into(), schema.clone()));
            }
        }
    }
    let mut removed = Vec::new();
    if schemas.is_empty() {
        return removed;
    }
    for obj in objects.iter_mut() {
        let (Some(api_version), Some(kind)) = (obj["apiVersion"].as_str(), obj["kind"].as_str())
        else {
            continue;
        };
        let Some((group, version)) = api_version.split_once('/') else {
            continue;
        };
        let Some(schema) = schemas
            .iter()
            .find(|(g, k, v, _)| g == group && k == kind && v == version)
            .map(|(_, _, _, s)| s)
        else {
            continue;
        };
        let label = format!(
            "{kind}/{}",
            obj["metadata"]["name"].as_str().unwrap_or_default()
        );
        let mut paths = Vec::new();
        if let Value::Object(map) = obj {
            prune_object(map, schema, "", true, &mut paths);
        }
        removed.extend(paths.into_iter().map(|p| format!("{label}: {p}")));
    }
    removed
}

/// Prunes `value` against `schema`, collecting the removed paths.
pub fn prune(value: &mut Value, schema: &Value, path: &str, removed: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let embedded = schema["x-kubernetes-embedded-resource"] == Value::Bool(true);
            prune_object(map, schema, path, embedded, removed);
        }
        Value::Array(items) => {
            let item_schema = &schema["items"];
            if item_schema.is_object() {
                for (i, item) in items.iter_mut().enumerate() {
                    prune(item, item_schema, &format!("{path}[{i}]"), removed);
                }
            }
        }
        _ => {}
    }
}

/// `resource`: the object is a Kubernetes object (root or embedded resource), whose
/// `apiVersion`, `kind` and `metadata` are always kept.
fn prune_object(
    map: &mut Map<String, Value>,
    schema: &Value,
    path: &str,
    resource: bool,
    removed: &mut Vec<String>,
) {
    if !schema.is_object() {
        return;
    }
    let preserve = schema["x-kubernetes-preserve-unknown-fields"] == Value::Bool(true);
    let properties = schema["properties"].as_object();
    let additional = &schema["additionalProperties"];
    let mut drop = Vec::new();
    for (key, child) in map.iter_mut() {
        let child_path = format!("{path}.{key}");
        if resource && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(child_schema) = properties.and_then(|p| p.get(key)) {
            prune(child, child_schema, &child_path, removed);
        } else if additional.is_object() {
            prune(child, additional, &child_path, removed);
        } else if preserve || *additional == Value::Bool(true) {
            continue;
        } else {
            drop.push((key.clone(), child_path));
        }
    }
    for (key, child_path) in drop {
        map.remove(&key);
        removed.push(child_path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn crd(schema: Value) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "secrets.ecr.example.com"},
            "spec": {"group": "ecr.example.com", "names": {"kind": "Secret", "plural": "secrets"},
                "scope": "Namespaced",
                "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": schema}}]}
        })
    }

    #[test]
    fn undeclared_fields_of_a_bundled_custom_resource_are_removed() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "ecr_registry": {"type": "string"},
                "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "pod": {"type": "object", "x-kubernetes-embedded-resource": true,
                        "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
            }},
            "status": {"type": "object"}
        }});
        let cr = json!({
            "apiVersion": "ecr.example.com/v1alpha1", "kind": "Secret",
            "metadata": {"name": "ecr-secret", "labels": {"x": "y"}},
            "spec": {
                "ecr_registry": "r", "aws_iam_secret": {"name": "n"},
                "list": [{"a": "1", "b": "2"}],
                "labels": {"k": "v"},
                "free": {"anything": {"goes": 1}},
                "pod": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}, "junk": 1}
            },
            "status": {"phase": "x"},
            "extra": true
        });
        let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}});
        let mut objects = vec![crd(schema), cr, other.clone()];
        let removed = prune_custom_resources(&mut objects);
        let mut sorted = removed.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            vec![
                "Secret/ecr-secret: .extra",
                "Secret/ecr-secret: .spec.aws_iam_secret",
                "Secret/ecr-secret: .spec.list[0].b",
                "Secret/ecr-secret: .spec.pod.junk",
                "Secret/ecr-secret: .status.phase",
            ]
        );
        assert_eq!(
            objects[1],
            json!({
                "apiVersion": "ecr.example.com/v1alpha1", "kind": "Secret",
                "metadata": {"name": "ecr-secret", "labels": {"x": "y"}},
                "spec": {
                    "ecr_registry": "r",
                    "list": [{"a": "1"}],
                    "labels": {"k": "v"},
                    "free": {"anything": {"goes": 1}},
                    "pod": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}}
                },
                "status": {}
            })
        );
        assert_eq!(objects[2], other, "objects of other kinds are untouched");
    }

    #[test]
    fn resources_without_a_bundled_crd_or_of_another_version_are_untouched() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
        let cr_other_version = json!({"apiVersion": "ecr.example.com/v1", "kind": "Secret",
            "metadata": {"name": "a"}, "spec": {"x": 1}});
        let mut objects = vec![crd(schema), cr_other_version.clone()];
        assert!(prune_custom_resources(&mut objects).is_empty());
        assert_eq!(objects[1], cr_other_version);
        let mut alone = vec![cr_other_version.clone()];
        assert!(prune_custom_resources(&mut alone).is_empty());
    }
}

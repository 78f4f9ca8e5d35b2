//! Applying `deploymentConfig` (docs/concepts/rendering.md §5.7) to a rendered Deployment, with the
//! documented merge rules. Pure functions over the Deployment JSON.

use super::config::DeploymentConfig;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

fn to_value<T: Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

fn obj_entry<'a>(parent: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let map = parent.as_object_mut()?;
    let child = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if child.is_null() {
        *child = Value::Object(Map::new());
    }
    child.as_object_mut()
}

fn array_entry<'a>(parent: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Vec<Value>> {
    let child = parent
        .entry(key.to_string())
        .or_insert_with(|| Value::Array(Vec::new()));
    if child.is_null() {
        *child = Value::Array(Vec::new());
    }
    child.as_array_mut()
}

fn name_of(v: &Value) -> Option<&str> {
    v.get("name").and_then(Value::as_str)
}

/// Replace the element with the same `name`, else append.
fn upsert_by_name(list: &mut Vec<Value>, item: Value) {
    let name = name_of(&item).map(str::to_string);
    match list
        .iter_mut()
        .find(|x| name.is_some() && name_of(x) == name.as_deref())
    {
        Some(slot) => *slot = item,
        None => list.push(item),
    }
}

/// Append unless a deep-equal element is present.
fn append_if_absent(list: &mut Vec<Value>, item: Value) {
    if !list.contains(&item) {
        list.push(item);
    }
}

fn for_each_container(
    pod_spec: &mut Map<String, Value>,
    mut f: impl FnMut(&mut Map<String, Value>),
) {
    if let Some(containers) = pod_spec.get_mut("containers").and_then(Value::as_array_mut) {
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            f(c);
        }
    }
}

fn is_empty_object(v: &Value) -> bool {
    v.as_object().is_some_and(Map::is_empty)
}

/// Applies `cfg` to a Deployment object (`apps/v1` JSON).
pub fn apply(deployment: &mut Value, cfg: &DeploymentConfig) {
    if let Some(annotations) = &cfg.annotations
        && let Some(meta) = obj_entry(deployment, "metadata")
    {
        add_annotations(meta, annotations);
    }
    let Some(spec) = obj_entry(deployment, "spec") else {
        return;
    };
    let Some(template) = obj_entry_map(spec, "template") else {
        return;
    };
    if let Some(annotations) = &cfg.annotations
        && let Some(meta) = obj_entry_map(template, "metadata")
    {
        add_annotations(meta, annotations);
    }
    let Some(pod) = obj_entry_map(template, "spec") else {
        return;
    };
    apply_to_containers(pod, cfg);
    apply_to_pod(pod, cfg);
}

/// Adds the annotations `meta` does not have yet.
fn add_annotations(meta: &mut Map<String, Value>, annotations: &BTreeMap<String, String>) {
    if let Some(existing) = obj_entry_map(meta, "annotations") {
        for (k, v) in annotations {
            existing
                .entry(k.clone())
                .or_insert_with(|| Value::String(v.clone()));
        }
    }
}

/// env, envFrom, volumeMounts and resources of every container.
fn apply_to_containers(pod: &mut Map<String, Value>, cfg: &DeploymentConfig) {
    if let Some(env) = &cfg.env {
        let env: Vec<Value> = env.iter().map(to_value).collect();
        for_each_container(pod, |c| {
            if let Some(list) = array_entry(c, "env") {
                for e in &env {
                    upsert_by_name(list, e.clone());
                }
            }
        });
    }
    if let Some(env_from) = &cfg.env_from {
        let env_from: Vec<Value> = env_from.iter().map(to_value).collect();
        for_each_container(pod, |c| {
            if let Some(list) = array_entry(c, "envFrom") {
                for e in &env_from {
                    append_if_absent(list, e.clone());
                }
            }
        });
    }
    if let Some(mounts) = &cfg.volume_mounts {
        let mounts: Vec<Value> = mounts.iter().map(to_value).collect();
        for_each_container(pod, |c| {
            if let Some(list) = array_entry(c, "volumeMounts") {
                for m in &mounts {
                    upsert_by_name(list, m.clone());
                }
            }
        });
    }
    if let Some(resources) = &cfg.resources {
        let resources = to_value(resources);
        for_each_container(pod, |c| {
            c.insert("resources".into(), resources.clone());
        });
    }
}

/// volumes, tolerations, nodeSelector and affinity of the pod.
fn apply_to_pod(pod: &mut Map<String, Value>, cfg: &DeploymentConfig) {
    if let Some(volumes) = &cfg.volumes
        && let Some(list) = array_entry(pod, "volumes")
    {
        for v in volumes {
            upsert_by_name(list, to_value(v));
        }
    }
    if let Some(tolerations) = &cfg.tolerations
        && let Some(list) = array_entry(pod, "tolerations")
    {
        for t in tolerations {
            append_if_absent(list, to_value(t));
        }
    }
    if let Some(node_selector) = &cfg.node_selector {
        pod.insert("nodeSelector".into(), to_value(node_selector));
    }
    if let Some(affinity) = &cfg.affinity {
        let affinity = to_value(affinity);
        if is_empty_object(&affinity) {
            pod.remove("affinity");
        } else if let Some(existing) = obj_entry_map(pod, "affinity") {
            for key in ["nodeAffinity", "podAffinity", "podAntiAffinity"] {
                match affinity.get(key) {
                    None | Some(Value::Null) => {}
                    Some(v) if is_empty_object(v) => {
                        existing.remove(key);
                    }
                    Some(v) => {
                        existing.insert(key.into(), v.clone());
                    }
                }
            }
            if existing.is_empty() {
                pod.remove("affinity");
            }
        }
    }
}

fn obj_entry_map<'a>(
    parent: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    let child = parent
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if child.is_null() {
        *child = Value::Object(Map::new());
    }
    child.as_object_mut()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dep() -> Value {
        json!({"metadata": {"name": "d", "annotations": {"keep": "old"}}, "spec": {"template": {
        "metadata": {"annotations": {"keep": "old"}},
        "spec": {
            "affinity": {"nodeAffinity": {"x": 1}, "podAffinity": {"y": 2}},
            "tolerations": [{"key": "a", "operator": "Exists"}],
            "volumes": [{"name": "v1", "emptyDir": {}}],
            "containers": [
                {"name": "c1", "env": [{"name": "A", "value": "1"}], "envFrom": [{"configMapRef": {"name": "cm"}}], "volumeMounts": [{"name": "v1", "mountPath": "/a"}]},
                {"name": "c2"}
            ]}}}})
    }

    fn cfg(v: Value) -> DeploymentConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn env_overrides_by_name_else_appends() {
        let mut d = dep();
        apply(
            &mut d,
            &cfg(json!({"env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]})),
        );
        assert_eq!(
            d.pointer("/spec/template/spec/containers/0/env"),
            Some(&json!([{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]))
        );
        assert_eq!(
            d.pointer("/spec/template/spec/containers/1/env"),
            Some(&json!([{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]))
        );
    }

    #[test]
    fn env_from_and_tolerations_append_if_absent() {
        let mut d = dep();
        apply(
            &mut d,
            &cfg(
                json!({"envFrom": [{"configMapRef": {"name": "cm"}}, {"secretRef": {"name": "s"}}],
            "tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}),
            ),
        );
        assert_eq!(
            d.pointer("/spec/template/spec/containers/0/envFrom")
                .and_then(Value::as_array)
                .map(Vec::len),
            Some(2)
        );
        assert_eq!(
            d.pointer("/spec/template/spec/containers/1/envFrom")
                .and_then(Value::as_array)
                .map(Vec::len),
            Some(2)
        );
        assert_eq!(
            d.pointer("/spec/template/spec/tolerations")
                .and_then(Value::as_array)
                .map(Vec::len),
            Some(2)
        );
    }

    #[test]
    fn volumes_and_mounts_replace_by_name() {
        let mut d = dep();
        apply(
            &mut d,
            &cfg(
                json!({"volumes": [{"name": "v1", "configMap": {"name": "x"}}, {"name": "v2", "emptyDir": {}}],
            "volumeMounts": [{"name": "v1", "mountPath": "/b"}]}),
            ),
        );
        assert_eq!(
            d.pointer("/spec/template/spec/volumes"),
            Some(
                &json!([{"name": "v1", "configMap": {"name": "x"}}, {"name": "v2", "emptyDir": {}}])
            )
        );
        assert_eq!(
            d.pointer("/spec/template/spec/containers/0/volumeMounts"),
            Some(&json!([{"name": "v1", "mountPath": "/b"}]))
        );
    }

    #[test]
    fn resources_node_selector_replace_and_annotations_do_not_override() {
        let mut d = dep();
        apply(
            &mut d,
            &cfg(
                json!({"resources": {"limits": {"cpu": "1"}}, "nodeSelector": {"a": "b"}, "annotations": {"keep": "new", "add": "x"}}),
            ),
        );
        assert_eq!(
            d.pointer("/spec/template/spec/containers/1/resources"),
            Some(&json!({"limits": {"cpu": "1"}}))
        );
        assert_eq!(
            d.pointer("/spec/template/spec/nodeSelector"),
            Some(&json!({"a": "b"}))
        );
        assert_eq!(
            d.pointer("/metadata/annotations"),
            Some(&json!({"keep": "old", "add": "x"}))
        );
        assert_eq!(
            d.pointer("/spec/template/metadata/annotations"),
            Some(&json!({"keep": "old", "add": "x"}))
        );
    }

    #[test]
    fn affinity_rules() {
        let mut d = dep();
        apply(&mut d, &cfg(json!({"affinity": {}})));
        assert_eq!(d.pointer("/spec/template/spec/affinity"), None);
        let mut d = dep();
        apply(&mut d, &cfg(json!({"affinity": {"nodeAffinity": {}}})));
        assert_eq!(
            d.pointer("/spec/template/spec/affinity"),
            Some(&json!({"podAffinity": {"y": 2}}))
        );
        let mut d = dep();
        let anti =
            json!({"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "k"}]});
        apply(&mut d, &cfg(json!({"affinity": {"podAntiAffinity": anti}})));
        assert_eq!(
            d.pointer("/spec/template/spec/affinity/podAntiAffinity"),
            Some(&anti)
        );
        assert_eq!(
            d.pointer("/spec/template/spec/affinity/nodeAffinity"),
            Some(&json!({"x": 1}))
        );
        let mut d = dep();
        apply(&mut d, &cfg(json!({})));
        assert_eq!(d, dep());
    }
}

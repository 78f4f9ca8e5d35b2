//! Fields upstream's typed decoding drops (docs/concepts/rendering.md §5.1): upstream
//! decodes the CSV (with its `appsv1.DeploymentSpec`s) and the CRDs
//! (`apiextensionsv1.CustomResourceDefinition`) into Go types, so a field unknown to the
//! type disappears from what it applies. The same fields are dropped here, at the levels
//! where real bundles carry them: the CRD `spec` (a v1beta1 `spec.version` or
//! `spec.validation` left in a v1 CRD), the Deployment spec and its pod template (a stray
//! `containers` beside `spec`), and each pod volume (keys of a volume source written one
//! level too high). Deeper levels of the pod spec are passed through as written.

use serde_json::Value;

/// `apiextensions.k8s.io/v1` `CustomResourceDefinitionSpec`.
const CRD_SPEC: &[&str] = &[
    "group",
    "names",
    "scope",
    "versions",
    "conversion",
    "preserveUnknownFields",
];

/// `apps/v1` `DeploymentSpec`.
const DEPLOYMENT_SPEC: &[&str] = &[
    "replicas",
    "selector",
    "template",
    "strategy",
    "minReadySeconds",
    "revisionHistoryLimit",
    "paused",
    "progressDeadlineSeconds",
];

/// `core/v1` `PodTemplateSpec`.
const POD_TEMPLATE: &[&str] = &["metadata", "spec"];

/// `core/v1` `Volume`: its name and every volume source.
const VOLUME: &[&str] = &[
    "name",
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

fn keep_known(v: Option<&mut Value>, known: &[&str]) {
    if let Some(map) = v.and_then(Value::as_object_mut) {
        map.retain(|k, _| known.contains(&k.as_str()));
    }
}

/// Drops the fields of a v1 CRD's `spec` that `CustomResourceDefinitionSpec` lacks.
pub fn prune_crd(crd: &mut Value) {
    keep_known(crd.get_mut("spec"), CRD_SPEC);
}

/// Drops the fields of a CSV deployment spec (and its pod template and volumes) that the
/// Kubernetes types lack.
pub fn prune_deployment_spec(spec: &mut Value) {
    keep_known(Some(spec), DEPLOYMENT_SPEC);
    keep_known(spec.get_mut("template"), POD_TEMPLATE);
    if let Some(volumes) = spec
        .pointer_mut("/template/spec/volumes")
        .and_then(Value::as_array_mut)
    {
        for v in volumes {
            keep_known(Some(v), VOLUME);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_dropped_where_upstream_drops_them() {
        let mut crd = json!({"spec": {"group": "g", "version": "v1", "versions": [], "scope": "Namespaced", "names": {}}});
        prune_crd(&mut crd);
        assert_eq!(
            crd,
            json!({"spec": {"group": "g", "versions": [], "scope": "Namespaced", "names": {}}})
        );

        let mut spec = json!({
            "replicas": 1, "selector": {}, "extra": true,
            "template": {"metadata": {}, "containers": [{"name": "stray"}], "spec": {
                "containers": [{"name": "m", "unknownDeeper": 1}],
                "volumes": [{"name": "v", "secret": {"secretName": "s"}, "defaultMode": 420}],
            }},
        });
        prune_deployment_spec(&mut spec);
        assert_eq!(
            spec,
            json!({
                "replicas": 1, "selector": {},
                "template": {"metadata": {}, "spec": {
                    "containers": [{"name": "m", "unknownDeeper": 1}],
                    "volumes": [{"name": "v", "secret": {"secretName": "s"}}],
                }},
            })
        );
    }
}

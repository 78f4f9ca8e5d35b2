//! Generation of the two CustomResourceDefinitions from the Rust types, and the check
//! that the committed YAML in `crds/` is current (a unit test; CI runs it).

use super::{ClusterCatalog, ClusterExtension};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;

/// File names under `crds/`, in the order [`crds`] returns the definitions.
pub const CRD_FILES: [&str; 2] = [
    "olm.operatorframework.io_clustercatalogs.yaml",
    "olm.operatorframework.io_clusterextensions.yaml",
];

/// Both CRDs, ClusterCatalog first.
pub fn crds() -> [CustomResourceDefinition; 2] {
    [ClusterCatalog::crd(), ClusterExtension::crd()].map(finish)
}

/// Upstream's schemas never mark optional fields `nullable` (an explicit `null` is
/// rejected there); schemars adds it for every `Option`, so it is removed here.
fn finish(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            strip_nullable(schema);
        }
    }
    crd
}

fn strip_nullable(schema: &mut JSONSchemaProps) {
    schema.nullable = None;
    for child in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        strip_nullable(child);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = schema.items.as_mut() {
        strip_nullable(items);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(extra)) = schema.additional_properties.as_mut() {
        strip_nullable(extra);
    }
}

/// One CRD as a YAML document (no leading `---`).
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::ser::Error> {
    serde_saphyr::to_string(crd)
}

/// Both CRDs as one multi-document YAML stream, as `olmv1 crds` prints it.
pub fn all_yaml() -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&to_yaml(&crd)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::path::Path;

    /// `crds/` (and its copies `config/crd/`, which `kubectl apply -k config/` reads, and
    /// `charts/olmv1/crds/`, the Helm chart's) must equal what the types generate. Set `UPDATE_CRDS=1` to rewrite them.
    #[test]
    fn committed_crds_are_current() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut stale = Vec::new();
        for ((file, crd), dir) in CRD_FILES.iter().zip(crds()).flat_map(|pair| {
            [
                (pair.clone(), root.join("crds")),
                (pair.clone(), root.join("config/crd")),
                (pair, root.join("charts/olmv1/crds")),
            ]
        }) {
            let want = to_yaml(&crd).expect("serialize CRD");
            let path = dir.join(file);
            if std::env::var_os("UPDATE_CRDS").is_some() {
                std::fs::create_dir_all(&dir).expect("create crds/");
                std::fs::write(&path, &want).expect("write CRD");
                continue;
            }
            if std::fs::read_to_string(&path).ok().as_deref() != Some(want.as_str()) {
                stale.push(path.display().to_string());
            }
        }
        assert!(
            stale.is_empty(),
            "stale CRD YAML {stale:?}: run `UPDATE_CRDS=1 cargo test --lib api::crd` (or `olmv1 crds`)"
        );
    }

    fn schema_of(crd: &CustomResourceDefinition) -> Value {
        let v = serde_json::to_value(crd).expect("json");
        v["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
    }

    #[test]
    fn cluster_extension_schema_has_upstream_shape() {
        let [_, ext] = crds();
        assert_eq!(ext.spec.scope, "Cluster");
        let s = schema_of(&ext);
        let spec = &s["properties"]["spec"];
        let required: Vec<&str> = spec["required"]
            .as_array()
            .expect("required")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for field in ["namespace", "source"] {
            assert!(
                required.contains(&field),
                "{field} must be required: {required:?}"
            );
        }
        // Optional since upstream 1.11; its name is still validated when set.
        assert!(!required.contains(&"serviceAccount"), "{required:?}");
        assert_eq!(
            spec["properties"]["serviceAccount"]["required"],
            serde_json::json!(["name"])
        );
        let catalog = &spec["properties"]["source"]["properties"]["catalog"];
        assert_eq!(
            catalog["properties"]["upgradeConstraintPolicy"]["default"],
            "CatalogProvided"
        );
        assert_eq!(catalog["properties"]["version"]["maxLength"], 64);
        assert_eq!(
            spec["properties"]["progressDeadlineMinutes"]["minimum"].as_f64(),
            Some(10.0)
        );
        assert_eq!(
            spec["properties"]["progressDeadlineMinutes"]["maximum"].as_f64(),
            Some(720.0)
        );
        assert_eq!(
            spec["properties"]["config"]["properties"]["inline"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
        let columns: Vec<String> = ext.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(
            columns,
            [
                "Installed Bundle",
                "Version",
                "Installed",
                "Progressing",
                "Age"
            ]
        );
        assert!(
            ext.spec.versions[0]
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some()
        );
    }

    #[test]
    fn cluster_catalog_schema_has_upstream_shape() {
        let [cat, _] = crds();
        assert_eq!(cat.spec.scope, "Cluster");
        let s = schema_of(&cat);
        let spec = &s["properties"]["spec"];
        assert_eq!(spec["properties"]["priority"]["default"], 0);
        assert_eq!(
            spec["properties"]["availabilityMode"]["default"],
            "Available"
        );
        let image = &spec["properties"]["source"]["properties"]["image"];
        assert_eq!(image["properties"]["ref"]["maxLength"], 1000);
        assert_eq!(
            image["properties"]["pollIntervalMinutes"]["minimum"].as_f64(),
            Some(1.0)
        );
        let required: Vec<&str> = s["required"]
            .as_array()
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        assert!(
            required.contains(&"spec"),
            "spec must be required: {required:?}"
        );
    }
}

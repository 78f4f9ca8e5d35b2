//! Bundles read as opm reads them (docs/concepts/rendering.md §5.1): YAML that Go's reader
//! accepts (duplicate keys, loosely indented quoted scalars, many aliases of few
//! anchors) and `metadata/` files read by content, undecodable ones skipped. Each case is
//! a minimal reproduction of a real community-operators bundle that was refused.

use super::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

fn copy_all_namespaces() -> tempfile::TempDir {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bundle/testdata/bundles/all-namespaces");
    let dir = tempfile::tempdir().unwrap();
    for sub in ["manifests", "metadata"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        for e in std::fs::read_dir(src.join(sub)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.path().join(sub).join(e.file_name())).unwrap();
        }
    }
    dir
}

fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let path = dir.join(rel);
    std::fs::write(&path, text).unwrap();
    path
}

fn load(dir: &Path) -> Bundle {
    load_dir(dir, &LoadOptions::default()).unwrap()
}

fn named<'a>(b: &'a Bundle, name: &str) -> &'a Value {
    b.others
        .iter()
        .chain(&b.crds)
        .find(|o| o.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
        .unwrap_or_else(|| panic!("{name} not loaded"))
}

#[test]
fn quoted_multiline_scalars_indented_as_go_accepts_them() {
    let dir = copy_all_namespaces();
    // The continuation lines start at or left of the enclosing mapping's column.
    write(
        dir.path(),
        "manifests/quoted.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: quoted\n  annotations:\n    description: \"first\n  second\nthird\"\n    single: 'a\n    b'\ndata:\n  k: \"x\ny\"\n",
    );
    let b = load(dir.path());
    let cm = named(&b, "quoted");
    assert_eq!(
        cm.pointer("/metadata/annotations"),
        Some(&json!({"description": "first second third", "single": "a b"}))
    );
    assert_eq!(cm.pointer("/data/k"), Some(&json!("x y")));
}

#[test]
fn duplicate_mapping_keys_keep_the_last_value() {
    let dir = copy_all_namespaces();
    write(
        dir.path(),
        "manifests/dup.yaml",
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: dup\n  annotations:\n    a: first\n  annotations:\n    b: last\napiVersion: v1\n",
    );
    let b = load(dir.path());
    assert_eq!(
        named(&b, "dup").pointer("/metadata/annotations"),
        Some(&json!({"b": "last"}))
    );
}

#[test]
fn undecodable_metadata_files_are_skipped_with_a_warning() {
    let dir = copy_all_namespaces();
    write(
        dir.path(),
        "metadata/dependencies.yaml",
        "dependencies:\n- type: olm.package\n  value:\n    packageName: x\n    version: a: b\n",
    );
    let b = load(dir.path());
    assert!(b.dependencies.is_empty());
    assert_eq!(b.warnings.len(), 1, "{:?}", b.warnings);
    assert!(
        b.warnings[0].starts_with("skipping metadata/dependencies.yaml: "),
        "{}",
        b.warnings[0]
    );
    // A key holding the wrong shape cannot be decoded either.
    write(
        dir.path(),
        "metadata/dependencies.yaml",
        "dependencies: none\n",
    );
    let b = load(dir.path());
    assert!(b.dependencies.is_empty());
    assert_eq!(
        b.warnings,
        vec!["skipping metadata/dependencies.yaml: \"dependencies\" must be a list"]
    );
}

const GVK_DEP: &str = "- type: olm.gvk\n  value: {group: etcd.database.coreos.com, kind: EtcdCluster, version: v1beta2}\n";

fn dependency_errors(dir: &Path) -> Vec<String> {
    let b = load(dir);
    assert_eq!(b.dependencies.len(), 1, "{:?}", b.dependencies);
    validate(&b, CertProvider::CertManager)
        .err()
        .map(|e| e.0)
        .unwrap_or_default()
}

#[test]
fn dependencies_are_read_from_any_metadata_file() {
    let expected = vec![
        "bundle \"widget-operator.v1.0.0\" has a dependency declared via property \"olm.gvk.required\" which is currently not supported".to_string(),
    ];
    let dir = copy_all_namespaces();
    write(
        dir.path(),
        "metadata/dependency.yaml",
        &format!("dependencies:\n{GVK_DEP}"),
    );
    assert_eq!(dependency_errors(dir.path()), expected);

    let dir = copy_all_namespaces();
    let props = std::fs::read_to_string(dir.path().join("metadata/properties.yaml")).unwrap();
    write(
        dir.path(),
        "metadata/properties.yaml",
        &format!("{props}dependencies:\n{GVK_DEP}"),
    );
    assert_eq!(dependency_errors(dir.path()), expected);
    // The properties of the same file are still read.
    assert_eq!(
        load(dir.path()).properties,
        load_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("src/bundle/testdata/bundles/all-namespaces"),
            &LoadOptions::default()
        )
        .unwrap()
        .properties
    );
}

#[test]
fn annotations_are_found_in_any_metadata_file() {
    let dir = copy_all_namespaces();
    let text = std::fs::read_to_string(dir.path().join("metadata/annotations.yaml")).unwrap();
    std::fs::remove_file(dir.path().join("metadata/annotations.yaml")).unwrap();
    write(dir.path(), "metadata/bundle-annotations.yml", &text);
    assert_eq!(load(dir.path()).package_name, "widget-operator");
}

/// A CRD whose schema anchors 11 small schemas and aliases them 605 times (a real CRD
/// did): cheap to expand, so read; `serde_saphyr`'s ratio check alone refused it.
#[test]
fn a_crd_with_605_aliases_of_11_anchors_loads() {
    let mut props = String::new();
    for a in 0..11 {
        props.push_str(&format!(
            "                  a{a}: &s{a}\n                    type: string\n                    description: field {a}\n"
        ));
    }
    for i in 0..605 {
        props.push_str(&format!("                  f{i}: *s{}\n", i % 11));
    }
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.example.com\nspec:\n  group: example.com\n  names: {{kind: Gadget, listKind: GadgetList, plural: gadgets, singular: gadget}}\n  scope: Namespaced\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n              nested:\n                type: object\n                properties:\n{props}"
    );
    let strict: Result<Value, _> = serde_saphyr::from_str(&crd);
    let msg = strict
        .expect_err("the ratio check alone refuses it")
        .to_string();
    assert!(msg.contains("605") || msg.contains("alias"), "{msg}");
    let dir = copy_all_namespaces();
    write(dir.path(), "manifests/gadgets.yaml", &crd);
    let b = load(dir.path());
    let fields = named(&b, "gadgets.example.com")
        .pointer(
            "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/nested/properties",
        )
        .and_then(Value::as_object)
        .unwrap();
    assert_eq!(fields.len(), 616);
    assert_eq!(
        fields["f12"],
        json!({"type": "string", "description": "field 1"})
    );
}

#[test]
fn the_olm_properties_annotation_is_re_encoded_as_upstream_does() {
    let dir = copy_all_namespaces();
    let csv_path = dir
        .path()
        .join("manifests/widget-operator.clusterserviceversion.yaml");
    let mut csv: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&csv_path).unwrap()).unwrap();
    csv["metadata"]["annotations"]["olm.properties"] = json!(
        "[\n  {\"value\": \"4.14\", \"type\": \"olm.maxOpenShiftVersion\", \"note\": \"x\"}\n]"
    );
    std::fs::write(&csv_path, serde_json::to_string(&csv).unwrap()).unwrap();
    write(dir.path(), "metadata/properties.yaml", "properties: []\n");
    let b = load(dir.path());
    let expected = json!("[{\"type\":\"olm.maxOpenShiftVersion\",\"value\":\"4.14\"}]");
    assert_eq!(
        b.csv.pointer("/metadata/annotations/olm.properties"),
        Some(&expected)
    );
    // The pod template carries the CSV's annotations.
    let objects = render(&b, "widget-system", None, &RenderOptions::default()).unwrap();
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(
        deployment.pointer("/spec/template/metadata/annotations/olm.properties"),
        Some(&expected)
    );
    // Without metadata/properties.yaml the bundle's text is kept, as upstream keeps it.
    std::fs::remove_file(dir.path().join("metadata/properties.yaml")).unwrap();
    let b = load(dir.path());
    assert!(
        b.csv["metadata"]["annotations"]["olm.properties"]
            .as_str()
            .unwrap()
            .starts_with("[\n  {\"value\"")
    );
}

//! Tests of the applier's pure parts.

use super::*;
use serde_json::json;

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
    let err =
        refs_of(&[json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})]).unwrap_err();
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

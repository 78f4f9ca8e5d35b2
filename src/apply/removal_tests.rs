//! Tests of the pure parts of pruning and uninstall.

use super::*;

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
fn fallback_message_names_the_account() {
    let msg = garbage_collection_fallback("ns", "sa", "ext", &[]);
    assert!(
        msg.contains("\"sa\" not found in namespace \"ns\""),
        "{msg}"
    );
}

//! Tests of the bundle image checks.

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn registry_v1_and_unlabelled_images_pass() {
    assert!(check_labels("r/b:1", &labels(&[(MEDIATYPE_LABEL, "registry+v1")])).is_ok());
    assert!(check_labels("r/b:1", &labels(&[])).is_ok());
    // a bundle label wins over a stray configs label
    assert!(
        check_labels(
            "r/b:1",
            &labels(&[
                (MEDIATYPE_LABEL, "registry+v1"),
                (CATALOG_CONFIGS_LABEL, "/configs")
            ])
        )
        .is_ok()
    );
}

#[test]
fn other_media_types_and_catalogs_are_refused() {
    let e = check_labels("r/b:1", &labels(&[(MEDIATYPE_LABEL, "helm")])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "image r/b:1: not a registry+v1 bundle image: label \"operators.operatorframework.io.bundle.mediatype.v1\" is \"helm\", expected \"registry+v1\""
    );
    let e = check_labels("r/c:1", &labels(&[(CATALOG_CONFIGS_LABEL, "/configs")])).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("image r/c:1: not a registry+v1 bundle image: it is a catalog image"),
        "{e}"
    );
    assert!(!e.is_retryable());
}

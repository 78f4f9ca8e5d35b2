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

#[test]
fn content_errors_are_terminal_only_for_digest_pinned_images() {
    let load = |source| BundleImageError::Load {
        image: "r/b@sha256:00".into(),
        source,
    };
    let parse = load(LoadError::Parse {
        path: "manifests/csv.yaml".into(),
        message: "YAML alias expansion too large at line 5".into(),
    });
    assert!(parse.is_terminal(true));
    assert!(!parse.is_terminal(false));
    let not_bundle = BundleImageError::NotRegistryV1 {
        image: "r/b:1".into(),
        reason: "x".into(),
    };
    assert!(not_bundle.is_terminal(true) && !not_bundle.is_terminal(false));
    let io = load(LoadError::Io {
        path: "/cache/x".into(),
        source: std::io::Error::other("disk"),
    });
    assert!(!io.is_terminal(true));
    let interrupted = BundleImageError::Interrupted {
        image: "r/b:1".into(),
        detail: "shutdown".into(),
    };
    assert!(!interrupted.is_terminal(true));
}

#[test]
fn pull_errors_are_terminal_only_for_invalid_references() {
    let invalid = BundleImageError::Pull(ImageError::InvalidReference {
        reference: "UPPER/case".into(),
        reason: "invalid reference format".into(),
    });
    assert!(invalid.is_terminal(false) && invalid.is_terminal(true));
    let oversized = BundleImageError::Pull(ImageError::LimitExceeded {
        image: "r/b@sha256:00".into(),
        layer: "(manifest)".into(),
        what: "number of layers (1000)".into(),
        limit: 128,
    });
    assert!(oversized.is_terminal(true) && !oversized.is_terminal(false));
    assert!(is_digest_reference("r/b@sha256:00"));
    assert!(!is_digest_reference("r/b:1"));
}

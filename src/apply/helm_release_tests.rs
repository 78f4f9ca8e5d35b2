use super::*;
use k8s_openapi::ByteString;

fn labels(ext: &str, version: u64) -> BTreeMap<String, String> {
    [
        ("owner", "helm".to_string()),
        ("name", ext.to_string()),
        ("status", "deployed".to_string()),
        ("version", version.to_string()),
        (LABEL_PACKAGE, "pkg".to_string()),
        (LABEL_BUNDLE_NAME, "pkg.v1.0.0".to_string()),
        (LABEL_BUNDLE_VERSION, "1.0.0".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

const MANIFEST: &str = "---\n# Source: pkg/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: foos.example.com\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: op\n";

fn secret(ext: &str, version: u64, manifest: &str) -> Secret {
    let release = json!({"name": ext, "namespace": "ns", "version": version,
        "info": {"status": "deployed"}, "manifest": manifest,
        "chart": {"metadata": {"name": "pkg", "version": "1.0.0"}},
        // Not a valid label value: kept in the release JSON.
        "labels": {LABEL_BUNDLE_REFERENCE: "reg/pkg:v1"}});
    let v = encode_secret(
        &format!("sh.helm.release.v1.{ext}.v{version}"),
        "olmv1-system",
        &release,
        &labels(ext, version),
    );
    serde_json::from_value(v).unwrap()
}

fn rendered() -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}}),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "foos.example.com"}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op", "namespace": "ns"}}),
    ]
}

fn target(version: &str) -> BundleIdentity {
    BundleIdentity {
        package: "pkg".into(),
        name: format!("pkg.v{version}"),
        version: version.into(),
        release: None,
        image: "reg/pkg:v1".into(),
    }
}

#[test]
fn decodes_helm_secret_storage() {
    let r = decode(&secret("ext", 3, MANIFEST)).unwrap();
    assert_eq!(r.secret, "sh.helm.release.v1.ext.v3");
    assert_eq!(
        (r.name.as_str(), r.version, r.namespace.as_str()),
        ("ext", 3, "ns")
    );
    assert_eq!(r.status, "deployed");
    assert_eq!(r.bundle, target("1.0.0"));
    let names: Vec<String> = r.objects.iter().map(|o| o.to_string()).collect();
    assert_eq!(
        names,
        [
            "ConfigMap/ns/a",
            "CustomResourceDefinition/foos.example.com",
            "Deployment/op"
        ]
    );
}

#[test]
fn plain_json_after_base64_is_read_too() {
    let json = br#"{"name":"e"}"#;
    let stored = data_encoding::BASE64.encode(json);
    assert_eq!(decode_release_bytes(stored.as_bytes()).unwrap(), json);
}

#[test]
fn the_latest_release_of_the_extension_is_chosen() {
    let secrets = vec![
        secret("ext", 2, MANIFEST),
        secret("ext", 10, MANIFEST),
        secret("other", 11, MANIFEST),
        secret("ext", 9, MANIFEST),
    ];
    let s = latest(&secrets, "ext").unwrap();
    assert_eq!(
        s.metadata.name.as_deref(),
        Some("sh.helm.release.v1.ext.v10")
    );
    assert!(latest(&secrets, "none").is_none());
}

#[test]
fn same_objects_match_whatever_their_namespace_defaulting() {
    let r = decode(&secret("ext", 1, MANIFEST)).unwrap();
    assert_eq!(compare_objects(&r, &rendered()), Ok(()));
    assert_eq!(check_bundle(&r, &target("1.0.0")), Ok(()));
}

#[test]
fn differing_objects_are_named() {
    let r = decode(&secret("ext", 1, MANIFEST)).unwrap();
    let mut objects = rendered();
    objects.remove(0);
    objects.push(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"}}));
    let differ = compare_objects(&r, &objects).unwrap_err();
    assert_eq!(differ.only_upstream, ["ConfigMap/ns/a"]);
    assert_eq!(differ.only_olmv1, ["Service/ns/s"]);
    assert_eq!(
        differ.to_string(),
        "1 object(s) in the release that olmv1 does not render: ConfigMap/ns/a; 1 object(s) olmv1 renders that are not in the release: Service/ns/s"
    );
}

#[test]
fn another_version_or_an_unfinished_release_is_refused() {
    let mut r = decode(&secret("ext", 1, MANIFEST)).unwrap();
    let why = check_bundle(&r, &target("1.1.0")).unwrap_err();
    assert!(
        why.contains(
            "bundle pkg.v1.0.0 version 1.0.0 in the release, pkg.v1.1.0 version 1.1.0 resolved"
        ),
        "{why}"
    );
    assert!(
        why.contains("pin spec.source.catalog.version to 1.0.0"),
        "{why}"
    );
    r.status = "failed".into();
    let why = check_bundle(&r, &target("1.0.0")).unwrap_err();
    assert!(why.starts_with("the release is \"failed\""), "{why}");
}

#[test]
fn hostile_or_foreign_secrets_are_refused_with_a_reason() {
    // Missing operator-controller labels.
    let mut s = secret("ext", 1, MANIFEST);
    s.metadata
        .labels
        .as_mut()
        .unwrap()
        .remove(LABEL_BUNDLE_NAME);
    let e = decode(&s).unwrap_err().to_string();
    assert!(
        e.contains("no label olm.operatorframework.io/bundle-name"),
        "{e}"
    );
    // Not base64.
    let mut s = secret("ext", 1, MANIFEST);
    s.data = Some([("release".to_string(), ByteString(b"%%%".to_vec()))].into());
    assert!(decode(&s).unwrap_err().to_string().contains("not base64"));
    // Too large before decoding.
    assert!(decode_release_bytes(&vec![b'A'; MAX_ENCODED_BYTES + 4]).is_err());
    // A gzip bomb stops at the decoded limit.
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..(MAX_DECODED_BYTES >> 20) + 1 {
        gz.write_all(&zeros).unwrap();
    }
    let bomb = data_encoding::BASE64.encode(&gz.finish().unwrap());
    let e = decode_release_bytes(bomb.as_bytes()).unwrap_err();
    assert!(e.contains("larger than"), "{e}");
    // A manifest document without a name.
    let e = decode(&secret("ext", 1, "apiVersion: v1\nkind: ConfigMap\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("manifest document 1"), "{e}");
}

#[test]
fn adoption_marks_are_recognised() {
    let mut s = secret("ext", 1, MANIFEST);
    assert!(!is_adopted(&s));
    let patch = adopted_patch("olmv1-revision-ext");
    for (k, v) in patch["metadata"]["labels"].as_object().unwrap() {
        s.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(k.clone(), v.as_str().unwrap().to_string());
    }
    assert!(is_adopted(&s));
    assert_eq!(
        patch["metadata"]["annotations"][ADOPTED_RECORD_ANNOTATION],
        "olmv1-revision-ext"
    );
}

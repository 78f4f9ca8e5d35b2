use super::*;
use k8s_openapi::ByteString;
use std::collections::BTreeMap;

fn labels(ext: &str, version: u64) -> BTreeMap<String, String> {
    [
        ("owner", "helm".to_string()),
        ("name", ext.to_string()),
        ("status", "deployed".to_string()),
        ("version", version.to_string()),
        (LABEL_PACKAGE, "pkg".to_string()),
        (LABEL_BUNDLE_NAME, "pkg.v1.0.0".to_string()),
        (LABEL_BUNDLE_VERSION, "1.0.0".to_string()),
        // Helm's classic driver keeps the release labels on the Secret (an API server
        // would refuse this value; the unit test has none).
        (LABEL_BUNDLE_REFERENCE, "reg/pkg:v1".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

const MANIFEST: &str = "---\n# Source: pkg/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: foos.example.com\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: op\n";

fn secret(ext: &str, version: u64, manifest: &str) -> Secret {
    let release = json!({"name": ext, "namespace": "ns", "version": version,
        "info": {"status": "deployed"}, "manifest": manifest,
        "chart": {"metadata": {"name": "pkg", "version": "1.0.0"}}});
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

/// The release JSON operator-controller stores in the chunked storage (labels inside).
fn chunked_release(ext: &str, version: u64, status: &str, manifest: &str) -> Value {
    json!({"name": ext, "namespace": "ns", "version": version,
    "info": {"status": status}, "manifest": manifest,
    "chart": {"metadata": {"name": "pkg", "version": "1.0.0"}},
    "labels": {
        LABEL_PACKAGE: "pkg",
        LABEL_BUNDLE_NAME: "pkg.v1.0.0",
        LABEL_BUNDLE_VERSION: "1.0.0",
        LABEL_BUNDLE_REFERENCE: "reg/pkg:v1",
    }})
}

/// The index and chunk Secrets of a chunked release (chunks by name).
fn chunked(
    ext: &str,
    version: u64,
    status: &str,
    chunk_size: usize,
) -> (Secret, BTreeMap<String, Secret>) {
    let key = format!("sh.helm.release.v1.{ext}.v{version}");
    let c = encode_chunked(
        &key,
        "olmv1-system",
        &chunked_release(ext, version, status, MANIFEST),
        chunk_size,
        1_700_000_000,
    );
    let index: Secret = serde_json::from_value(c.index).unwrap();
    let chunks = c
        .chunks
        .into_iter()
        .map(|v| {
            let s: Secret = serde_json::from_value(v).unwrap();
            (s.metadata.name.clone().unwrap(), s)
        })
        .collect();
    (index, chunks)
}

#[test]
fn chunk_names_hash_like_helm_operator_plugins() {
    // FNV-1a 64, base32 a-z1-6 unpadded (values computed independently).
    assert_eq!(chunk_hash(b""), "zpzjzzeeeirsk");
    assert_eq!(chunk_hash(b"a"), "v4r4ytegahwiy");
    assert_eq!(chunk_hash(b"chunk-data"), "uwowqfiao4t61");
}

#[test]
fn decodes_chunked_storage_across_chunks() {
    let (index, chunks) = chunked("ext", 4, "deployed", 64);
    assert!(chunks.len() >= 2, "{} chunks", chunks.len());
    let labels = index.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["owner"], CHUNKED_OWNER);
    assert_eq!(labels["type"], "index");
    assert_eq!(labels["key"], "sh.helm.release.v1.ext.v4");
    assert!(!labels.contains_key(LABEL_BUNDLE_NAME));
    for (name, c) in &chunks {
        assert!(name.starts_with("sh.helm.release.v1.ext.v4-"), "{name}");
        assert_eq!(
            name.rsplit('-').next().unwrap(),
            chunk_hash(&c.data.as_ref().unwrap()["chunk"].0)
        );
    }
    let names = chunk_names(&index).unwrap();
    assert_eq!(names.len(), chunks.len());
    let r = decode_chunked(&index, &chunks).unwrap();
    assert_eq!(r.secret, "sh.helm.release.v1.ext.v4");
    assert_eq!(r.storage, Storage::Chunked);
    assert_eq!(
        (r.name.as_str(), r.version, r.status.as_str()),
        ("ext", 4, "deployed")
    );
    assert_eq!(r.bundle, target("1.0.0"));
    assert_eq!(r.objects.len(), 3);
    assert_eq!(compare_objects(&r, &rendered()), Ok(()));
    // One chunk only (upstream's 1 MiB chunks hold most releases).
    let (index, chunks) = chunked("ext", 4, "deployed", 1 << 20);
    assert!(chunks.is_empty());
    assert_eq!(
        decode_chunked(&index, &chunks).unwrap().bundle,
        target("1.0.0")
    );
}

#[test]
fn a_missing_or_truncated_chunk_is_a_clear_error() {
    let (index, chunks) = chunked("ext", 1, "deployed", 64);
    let names = chunk_names(&index).unwrap();
    let mut missing = chunks.clone();
    missing.remove(&names[1]);
    let e = decode_chunked(&index, &missing).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "chunk 3 of {}, Secret {:?}, is missing",
            names.len() + 1,
            names[1]
        )),
        "{e}"
    );
    assert!(
        e.starts_with("release Secret sh.helm.release.v1.ext.v1: "),
        "{e}"
    );
    let mut truncated = chunks.clone();
    let last = names.last().unwrap();
    let data = &mut truncated.get_mut(last).unwrap().data.as_mut().unwrap();
    let bytes = &mut data.get_mut("chunk").unwrap().0;
    bytes.truncate(bytes.len() / 2);
    let e = decode_chunked(&index, &truncated).unwrap_err().to_string();
    assert!(e.contains("not a whole gzip stream"), "{e}");
    // A Secret of another type under a chunk's name.
    let mut foreign = chunks.clone();
    foreign.get_mut(&names[0]).unwrap().type_ = Some("Opaque".into());
    let e = decode_chunked(&index, &foreign).unwrap_err().to_string();
    assert!(e.contains("is of type \"Opaque\""), "{e}");
}

#[test]
fn oversized_chunked_releases_are_refused() {
    // More chunks than operator-controller itself reads.
    let (mut index, chunks) = chunked("ext", 1, "deployed", 64);
    let many: Vec<String> = (0..MAX_CHUNKS).map(|i| format!("c{i}")).collect();
    index.data.as_mut().unwrap().insert(
        "extraChunks".into(),
        ByteString(serde_json::to_vec(&many).unwrap()),
    );
    let e = decode_chunked(&index, &chunks).unwrap_err().to_string();
    assert!(
        e.contains(&format!("more than the {MAX_CHUNKS} accepted")),
        "{e}"
    );
    // Chunks whose total exceeds the bound: refused before decompression.
    let names: Vec<String> = (0..MAX_CHUNKS - 1).map(|i| format!("c{i}")).collect();
    index.data.as_mut().unwrap().insert(
        "extraChunks".into(),
        ByteString(serde_json::to_vec(&names).unwrap()),
    );
    let big: BTreeMap<String, Secret> = names
        .iter()
        .map(|n| {
            let s: Secret = serde_json::from_value(json!({"metadata": {"name": n},
                "type": CHUNK_SECRET_TYPE,
                "data": {"chunk": data_encoding::BASE64.encode(&vec![0u8; (1 << 20) + (1 << 17)])}}))
            .unwrap();
            (n.clone(), s)
        })
        .collect();
    let e = decode_chunked(&index, &big).unwrap_err().to_string();
    assert!(
        e.contains(&format!("more than the {MAX_CHUNKED_BYTES} bytes accepted")),
        "{e}"
    );
    // extraChunks itself is bounded and must be a list of names.
    index
        .data
        .as_mut()
        .unwrap()
        .insert("extraChunks".into(), ByteString(vec![b' '; 17 << 10]));
    assert!(
        chunk_names(&index)
            .unwrap_err()
            .to_string()
            .contains("bytes, more than")
    );
    index
        .data
        .as_mut()
        .unwrap()
        .insert("extraChunks".into(), ByteString(b"{}".to_vec()));
    assert!(
        chunk_names(&index)
            .unwrap_err()
            .to_string()
            .contains("not a JSON list")
    );
}

#[test]
fn the_latest_deployed_release_is_chosen_across_both_storages() {
    let (old, _) = chunked("ext", 3, "superseded", 1 << 20);
    let (current, _) = chunked("ext", 4, "deployed", 1 << 20);
    let (failed, _) = chunked("ext", 5, "failed", 1 << 20);
    let (other, _) = chunked("other", 9, "deployed", 1 << 20);
    let classic = secret("ext", 2, MANIFEST);
    let secrets = vec![classic.clone(), failed.clone(), current, old, other];
    let s = latest(&secrets, "ext").unwrap();
    assert_eq!(
        s.metadata.name.as_deref(),
        Some("sh.helm.release.v1.ext.v4")
    );
    assert_eq!(storage_of(s), Some(Storage::Chunked));
    // Only a failed chunked release and an older deployed classic one: the classic one.
    let two = [failed.clone(), classic];
    let s = latest(&two, "ext").unwrap();
    assert_eq!(storage_of(s), Some(Storage::Secrets));
    // Nothing deployed: the newest, reported as not adoptable.
    let s = latest(std::slice::from_ref(&failed), "ext").unwrap();
    assert_eq!(s.metadata.labels.as_ref().unwrap()["status"], "failed");
}

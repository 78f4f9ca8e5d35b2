//! Tests of the revision record.

use super::*;

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}})
}

fn bundle(v: &str) -> BundleIdentity {
    BundleIdentity {
        package: "pkg".into(),
        name: format!("pkg.v{v}"),
        version: v.into(),
        release: None,
        image: format!("registry/pkg@sha256:{}", "a".repeat(64)),
    }
}

#[test]
fn history_begin_complete_prune() {
    let owner = Owner::new("ext", "uid");
    let mut h = RevisionHistory::new(&owner);
    let one = h.begin(bundle("1"), &[cm("a"), cm("b")]);
    assert_eq!(one, 1);
    assert!(h.installed().is_none());
    assert!(h.prune_candidates(one).is_empty());
    h.complete(one);
    assert_eq!(h.installed().unwrap().number, 1);
    // same content again: no new revision
    assert_eq!(h.begin(bundle("1"), &[cm("a"), cm("b")]), 1);
    assert_eq!(h.revisions.len(), 1);
    // an attempt that crashed, then another revision
    let two = h.begin(bundle("2"), &[cm("a"), cm("c")]);
    let three = h.begin(bundle("3"), &[cm("a"), cm("d")]);
    assert_eq!((two, three), (2, 3));
    let names: Vec<String> = h
        .prune_candidates(three)
        .iter()
        .map(|o| o.name.clone())
        .collect();
    assert_eq!(names, vec!["b", "c"]);
    h.complete(three);
    assert_eq!(h.installed().unwrap().bundle.version, "3");
    assert!(h.prune_candidates(three).is_empty());
    assert_eq!(h.all_objects().len(), 2);
    for v in 4..12 {
        let n = h.begin(bundle(&v.to_string()), &[cm("a")]);
        h.complete(n);
    }
    assert_eq!(h.revisions.len(), KEEP_REVISIONS);
    assert_eq!(h.installed().unwrap().number, 11);
}

#[test]
fn dropped_by_a_new_rendering() {
    let mut h = RevisionHistory::new(&Owner::new("e", "u"));
    let one = h.begin(bundle("1"), &[cm("a"), cm("b")]);
    h.complete(one);
    h.begin(bundle("2"), &[cm("a"), cm("c")]); // an attempt that did not finish
    let mut a2 = cm("a");
    a2["apiVersion"] = json!("v2");
    let dropped: Vec<String> = h.dropped_by(&[a2]).iter().map(|o| o.name.clone()).collect();
    assert_eq!(dropped, vec!["b", "c"]);
    assert!(
        RevisionHistory::new(&Owner::new("e", "u"))
            .dropped_by(&[cm("a")])
            .is_empty()
    );
}

#[test]
fn a_version_change_of_the_same_object_is_not_pruned() {
    let mut h = RevisionHistory::new(&Owner::new("e", "u"));
    let mut old = cm("a");
    old["apiVersion"] = json!("example.com/v1");
    let mut new = old.clone();
    new["apiVersion"] = json!("example.com/v2");
    let one = h.begin(bundle("1"), &[old]);
    h.complete(one);
    let two = h.begin(bundle("2"), &[new]);
    assert!(h.prune_candidates(two).is_empty());
}

#[test]
fn encoding_round_trips_and_hundreds_of_objects_fit() {
    let mut h = RevisionHistory::new(&Owner::new("ext", "uid"));
    for rev in 0..KEEP_REVISIONS {
        let objects: Vec<Value> = (0..2000)
                .map(|i| {
                    json!({"apiVersion": "example.com/v1beta1", "kind": "SomeLongKindName",
                        "metadata": {"name": format!("object-with-a-long-name-{rev}-{i:05}"), "namespace": "some-namespace"}})
                })
                .collect();
        let n = h.begin(bundle(&rev.to_string()), &objects);
        if rev + 1 < KEEP_REVISIONS {
            h.complete(n);
        }
    }
    let gz = encode(&h).unwrap();
    assert!(gz.len() < MAX_ENCODED_BYTES, "{} bytes", gz.len());
    assert_eq!(decode(&gz).unwrap(), h);
    let cm = record_configmap(&h, "olmv1-system").unwrap();
    assert_eq!(cm["metadata"]["name"], "olmv1-revision-ext");
    assert_eq!(cm["metadata"]["ownerReferences"][0]["uid"], "uid");
    let b64 = cm["binaryData"][DATA_KEY].as_str().unwrap();
    assert_eq!(data_encoding::BASE64.decode(b64.as_bytes()).unwrap(), gz);
}

#[test]
fn garbage_is_rejected() {
    assert!(decode(b"not gzip").is_err());
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(b"{\"x\":1}").unwrap();
    assert!(
        decode(&enc.finish().unwrap())
            .unwrap_err()
            .starts_with("JSON")
    );
}

#[test]
fn record_names_stay_valid() {
    assert_eq!(record_name("argocd"), "olmv1-revision-argocd");
    let long = "a".repeat(300);
    let n = record_name(&long);
    assert_eq!(n.len(), 253);
    assert_ne!(record_name(&"a".repeat(301)), n);
}

#[test]
fn is_current_only_for_the_settled_installed_revision() {
    let owner = Owner::new("e", "u");
    let bundle = |v: &str| BundleIdentity {
        package: "p".into(),
        name: format!("p.v{v}"),
        version: v.into(),
        release: None,
        image: format!("img@sha256:{v}"),
    };
    let mut h = RevisionHistory::new(&owner);
    assert!(!h.is_current(&bundle("1"), &[cm("a")]), "nothing installed");
    let n = h.begin(bundle("1"), &[cm("a")]);
    assert!(!h.is_current(&bundle("1"), &[cm("a")]), "pending");
    h.complete(n);
    assert!(h.is_current(&bundle("1"), &[cm("a")]));
    assert!(!h.is_current(&bundle("1"), &[cm("b")]), "other content");
    assert!(!h.is_current(&bundle("2"), &[cm("a")]), "other bundle");
    h.begin(bundle("2"), &[cm("b")]);
    assert!(
        !h.is_current(&bundle("1"), &[cm("a")]),
        "an interrupted upgrade is still to be cleaned up"
    );
}

#[test]
fn content_hash_depends_on_content_and_order() {
    let a = content_hash(&[cm("a"), cm("b")]);
    assert_eq!(a, content_hash(&[cm("a"), cm("b")]));
    assert_ne!(a, content_hash(&[cm("b"), cm("a")]));
    assert!(a.starts_with("sha256:") && a.len() == 7 + 64);
}

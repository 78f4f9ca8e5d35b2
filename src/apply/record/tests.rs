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

/// A record of 1.0.0 then 1.1.0 (installed), by digest.
fn recorded() -> RevisionHistory {
    let mut h = RevisionHistory::new(&Owner::new("foo", "uid"));
    for (v, d) in [("1.0.0", "a"), ("1.1.0", "b")] {
        let b = BundleIdentity {
            package: "foo".into(),
            name: format!("foo.v{v}"),
            version: v.into(),
            release: None,
            image: format!("registry/foo@sha256:{}", d.repeat(64)),
        };
        let n = h.begin(b, &[cm(&format!("cm-{v}"))]);
        h.complete(n);
    }
    h
}

fn holds(v: &str) -> PulledBundle {
    PulledBundle {
        package: "foo".into(),
        name: format!("foo.v{v}"),
        version: v.into(),
    }
}

#[test]
fn a_consistent_revision_passes_both_checks() {
    let h = recorded();
    let one = h.get(1).expect("revision 1");
    assert!(
        one.integrity
            .as_deref()
            .is_some_and(|i| i.starts_with("sha256:"))
    );
    assert_eq!(h.check_integrity(1), Ok(()));
    let image = one.bundle.image.clone();
    assert_eq!(h.check_pulled(1, Some(&holds("1.0.0")), &image), Ok(()));
    // Pulled through a mirror: another repository, the same digest.
    let mirrored = image.replace("registry/foo", "mirror.example/foo");
    assert_eq!(h.check_pulled(1, Some(&holds("1.0.0")), &mirrored), Ok(()));
    // The CSV's version with a leading `v`, or legacy build metadata as recorded.
    let prefixed = PulledBundle {
        version: "v1.0.0".into(),
        ..holds("1.0.0")
    };
    assert_eq!(h.check_pulled(1, Some(&prefixed), &image), Ok(()));
    assert!(same_version("1.0.0+2", "1.0.0+2"));
    assert!(!same_version("1.0.0+2", "1.0.0+3"));
    // The image's metadata not read (a fake executor): nothing to compare.
    assert_eq!(h.check_pulled(1, None, "registry/foo@sha256:cc"), Ok(()));
    // Survives the round trip through the ConfigMap.
    let read = decode(&encode(&h).expect("encode")).expect("decode");
    assert_eq!(read, h);
    assert_eq!(read.check_integrity(1), Ok(()));
}

#[test]
fn an_edited_digest_is_refused_by_the_seal_and_by_what_the_image_holds() {
    let mut h = recorded();
    let other = h.get(2).expect("revision 2").bundle.image.clone();
    h.revisions[0].bundle.image = other.clone();
    let sealed = h.check_integrity(1).expect_err("edited");
    assert!(matches!(*sealed.disagrees, Disagreement::Integrity { .. }));
    let message = sealed.to_string();
    assert!(
        message.starts_with(
            "revision 1 of record olmv1-revision-foo names bundle foo.v1.0.0 version 1.0.0 but fails its integrity check: its bundle, version, image (registry/foo@sha256:bbbb"
        ),
        "{message}"
    );
    assert!(
        message.ends_with(": the record was edited; roll back to another revision or re-install"),
        "{message}"
    );
    // A record written before revisions were sealed: what the image holds refuses it.
    h.revisions[0].integrity = None;
    assert_eq!(h.check_integrity(1), Ok(()));
    let held = h
        .check_pulled(1, Some(&holds("1.1.0")), &other)
        .expect_err("another bundle");
    assert_eq!(
        held.to_string(),
        format!(
            "revision 1 of record olmv1-revision-foo names bundle foo.v1.0.0 version 1.0.0 but its image sha256:{} holds foo.v1.1.0 version 1.1.0 (the bundle name and version disagree): the record was edited; roll back to another revision or re-install",
            "b".repeat(64)
        )
    );
}

#[test]
fn an_edited_version_or_name_is_refused() {
    let mut h = recorded();
    h.revisions[0].bundle.version = "1.1.0".into();
    let image = h.revisions[0].bundle.image.clone();
    assert!(h.check_integrity(1).is_err(), "the version is sealed");
    h.revisions[0].integrity = None;
    let e = h
        .check_pulled(1, Some(&holds("1.0.0")), &image)
        .expect_err("version");
    assert_eq!(
        *e.disagrees,
        Disagreement::Bundle {
            fields: vec!["version"],
            image: format!("sha256:{}", "a".repeat(64)),
            holds: holds("1.0.0"),
        }
    );
    assert!(
        e.to_string()
            .contains("names bundle foo.v1.0.0 version 1.1.0 but its image sha256:aaaa")
            && e.to_string()
                .contains("holds foo.v1.0.0 version 1.0.0 (the version disagrees)"),
        "{e}"
    );

    let mut h = recorded();
    h.revisions[0].bundle.name = "foo.v1.1.0".into();
    assert!(h.check_integrity(1).is_err(), "the name is sealed");
    h.revisions[0].integrity = None;
    let e = h
        .check_pulled(1, Some(&holds("1.0.0")), &image)
        .expect_err("name");
    assert!(e.to_string().contains("(the bundle name disagrees)"), "{e}");

    let mut h = recorded();
    h.revisions[0].objects.clear();
    assert!(h.check_integrity(1).is_err(), "the objects are sealed");
    let mut h = recorded();
    h.revisions[0].state = RevisionState::Installed;
    h.revisions[0].installer = Some(crate::api::InstallerStatus::default());
    assert_eq!(h.check_integrity(1), Ok(()), "state and installer are not");

    // Another digest than recorded.
    let h = recorded();
    let e = h
        .check_pulled(1, Some(&holds("1.0.0")), "registry/foo@sha256:cc")
        .expect_err("digest");
    assert!(
        e.to_string().contains(
            "but the image pulled for it is registry/foo@sha256:cc (the image digest disagrees)"
        ),
        "{e}"
    );
    // Another package.
    let other = PulledBundle {
        package: "bar".into(),
        ..holds("1.0.0")
    };
    let e = h
        .check_pulled(1, Some(&other), &image)
        .expect_err("package");
    assert!(
        e.to_string()
            .contains("version 1.0.0 of package foo but its image sha256:aaaa"),
        "{e}"
    );
}

#[test]
fn records_written_before_the_seal_and_unknown_fields_survive_a_rewrite() {
    let old = json!({
        "extension": "foo", "uid": "uid", "later": {"x": 1},
        "revisions": [{"number": 1, "state": "Installed", "package": "foo",
            "bundle_name": "foo.v1.0.0", "version": "1.0.0", "image": "r/foo@sha256:aa",
            "content_hash": "sha256:00", "objects": [], "future": "kept"}]
    });
    let h: RevisionHistory = serde_json::from_value(old.clone()).expect("old record");
    assert_eq!(h.revisions[0].integrity, None);
    assert_eq!(h.revisions[0].bundle.name, "foo.v1.0.0");
    assert_eq!(h.check_integrity(1), Ok(()));
    assert_eq!(
        h.revisions[0].extra.get("future"),
        Some(&json!("kept")),
        "{:?}",
        h.revisions[0].extra
    );
    assert!(!h.revisions[0].extra.contains_key("bundle_name"));
    let written = serde_json::to_value(&h).expect("write");
    assert_eq!(written, old, "nothing lost, nothing added");
    let again = decode(&encode(&h).expect("encode")).expect("decode");
    assert_eq!(again, h);
}

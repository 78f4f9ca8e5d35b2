//! Every branch of the uninstall through the plan against the fake executor: the
//! recorded objects deleted as the installer account (CRDs kept when annotated), no
//! finalizer, an unreadable record, no installer, an installer account gone, a failed
//! deletion.

use super::*;
use crate::controller::extension::ANNOTATION_KEEP_CRDS;

/// `ext()` being deleted.
fn deleting(annotations: serde_json::Value) -> ClusterExtension {
    let mut e = ext();
    e.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::now(),
    ));
    e.metadata.annotations = serde_json::from_value(annotations).expect("annotations");
    e
}

/// A record whose installed revision has one ConfigMap and one CRD.
fn record_with_objects() -> Option<Result<Option<RevisionHistory>, String>> {
    let mut history = RevisionHistory::new(&Owner::new("e".to_string(), "u1".to_string()));
    let objects = [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}}),
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "ws.example.com"}}),
    ];
    let revision = history.begin(identity("1.0.0").pulled("registry/p@sha256:1"), &objects);
    history.complete(revision);
    Some(Ok(Some(history)))
}

fn object(kind: &str) -> ObjectRef {
    ObjectRef {
        group: String::new(),
        version: "v1".into(),
        kind: kind.into(),
        namespace: String::new(),
        name: "x".into(),
    }
}

#[test]
fn uninstall_deletes_the_recorded_objects_as_the_installer_then_the_record_and_finalizer() {
    let fake = Fake {
        record: record_with_objects(),
        deleted: Some(Ok(UninstallReport {
            deleted: vec![object("ConfigMap"), object("CustomResourceDefinition")],
            kept: Vec::new(),
        })),
        ..Fake::default()
    };
    assert_eq!(run(&deleting(json!({})), &fake), Action::await_change());
    assert_eq!(
        fake.calls(),
        [
            "stop_watches",
            "load_record",
            "delete 2 object(s) as system:serviceaccount:ns:sa",
            "remove",
            "succeeded"
        ]
    );
    assert_eq!(
        fake.events(),
        [(
            false,
            "Uninstalled",
            "uninstalled: 2 object(s) deleted".to_string()
        )]
    );
    assert!(fake.status.borrow().is_none(), "no status written");
    assert!(fake.errors.borrow().is_empty());
}

#[test]
fn uninstall_keeps_crds_when_annotated() {
    let fake = Fake {
        record: record_with_objects(),
        deleted: Some(Ok(UninstallReport {
            deleted: vec![object("ConfigMap")],
            kept: vec![object("CustomResourceDefinition")],
        })),
        ..Fake::default()
    };
    run(&deleting(json!({ANNOTATION_KEEP_CRDS: "true"})), &fake);
    assert_eq!(
        fake.calls()[2],
        "delete 2 object(s) as system:serviceaccount:ns:sa, keeping CRDs"
    );
    assert_eq!(
        fake.events()[0].2,
        "uninstalled: 1 object(s) deleted, 1 CRD(s) kept"
    );
}

#[test]
fn without_the_finalizer_an_uninstall_only_stops_the_watches() {
    let mut e = deleting(json!({}));
    e.metadata.finalizers = None;
    let fake = Fake::default();
    assert_eq!(run(&e, &fake), Action::await_change());
    assert_eq!(fake.calls(), ["stop_watches"]);
    assert!(fake.events().is_empty());
}

#[test]
fn an_unreadable_record_fails_the_uninstall_with_backoff() {
    let fake = Fake {
        record: Some(Err("connection refused".into())),
        ..Fake::default()
    };
    assert_eq!(
        run(&deleting(json!({})), &fake),
        Action::requeue(Duration::from_secs(4))
    );
    assert_eq!(fake.calls(), ["stop_watches", "load_record"]);
    assert_eq!(
        fake.events(),
        [(
            true,
            "UninstallFailed",
            "reading the revision record: connection refused".to_string()
        )]
    );
    assert_eq!(*fake.errors.borrow(), ["UninstallFailed"]);
    let tally = fake.tally.borrow().expect("tally");
    assert_eq!(tally.count, plan::Count::Failed, "the backoff grows");
}

#[test]
fn without_an_installer_the_objects_are_left_to_garbage_collection() {
    let fake = Fake {
        installer: Some(Err("spec.serviceAccount is not set".into())),
        record: record_with_objects(),
        ..Fake::default()
    };
    assert_eq!(run(&deleting(json!({})), &fake), Action::await_change());
    assert_eq!(
        fake.calls(),
        ["stop_watches", "load_record", "remove", "succeeded"],
        "nothing deleted as nobody"
    );
    assert_eq!(
        fake.events(),
        [(
            true,
            "InstallerAccountMissing",
            "no installer ServiceAccount is set: 2 object(s) are left to garbage collection through their ownerReferences to ClusterExtension \"e\"".to_string()
        )]
    );
}

#[test]
fn a_missing_installer_account_leaves_the_objects_to_garbage_collection() {
    let fake = Fake {
        record: record_with_objects(),
        deleted: Some(Err(DeleteFailure::AccountMissing)),
        ..Fake::default()
    };
    assert_eq!(run(&deleting(json!({})), &fake), Action::await_change());
    assert_eq!(fake.calls()[3..], ["remove", "succeeded"]);
    assert_eq!(
        fake.events(),
        [(
            true,
            "InstallerAccountMissing",
            "service account \"sa\" not found in namespace \"ns\": 2 object(s) are left to garbage collection through their ownerReferences to ClusterExtension \"e\"".to_string()
        )]
    );
}

#[test]
fn a_failed_deletion_is_retried_and_keeps_the_finalizer() {
    let fake = Fake {
        record: record_with_objects(),
        deleted: Some(Err(DeleteFailure::Failed(
            "deleting ConfigMap c: forbidden".into(),
        ))),
        ..Fake::default()
    };
    assert_eq!(
        run(&deleting(json!({})), &fake),
        Action::requeue(Duration::from_secs(4))
    );
    assert!(
        !fake.calls().contains(&"remove".to_string()),
        "{:?}",
        fake.calls()
    );
    assert_eq!(
        fake.events(),
        [(
            true,
            "UninstallFailed",
            "deleting ConfigMap c: forbidden".to_string()
        )]
    );
    assert_eq!(*fake.errors.borrow(), ["UninstallFailed"]);
}

//! The takeover of an OLM v0 installation through the reconcile flow against the fake
//! executor (docs/how-to/switch-from-olm-v0.md, "The takeover"): an extension marked
//! as the migration of a Subscription reads its backup and takes the installation over
//! when the resolved bundle is exactly the backed-up CSV; another bundle or an
//! unreadable backup is reported and nothing is rendered or applied; once a revision is
//! installed the backup is read only while that revision is the backed-up CSV and
//! stays (objects v0 re-creates are adopted); without the annotation nothing changes.

use super::*;
use crate::controller::extension::plan::migration::V0Takeover;

fn migrated() -> ClusterExtension {
    let mut e = ext();
    let map = e.metadata.annotations.get_or_insert_with(Default::default);
    map.insert(
        "olm.operatorframework.io/migrated-from-subscription".into(),
        "ns/sub".into(),
    );
    map.insert(
        "olm.operatorframework.io/migration-backup".into(),
        "ns/olmv1-migration-sub".into(),
    );
    e
}

fn backup(version: &str) -> Option<Result<V0Takeover, String>> {
    Some(Ok(V0Takeover {
        subscription: "ns/sub".into(),
        backup: "ns/olmv1-migration-sub".into(),
        csv: format!("p.v{version}"),
        version: version.into(),
        mark: "e/backup-uid".into(),
    }))
}

#[test]
fn the_installed_csv_resolved_is_taken_over_in_place() {
    let fake = Fake {
        v0_backup: backup("1.0.0"),
        resolution: Some(resolved("1.0.0", None)),
        install: Some(Ok(pulled("1.0.0"))),
        ..Fake::default()
    };
    // Reconciled again at once: from then on the spec's range applies, not the pin.
    assert_eq!(
        run(&migrated(), &fake),
        Action::requeue(crate::controller::extension::plan::ending::AGAIN)
    );
    assert_eq!(
        fake.calls(),
        [
            "validate",
            "load_record",
            "load_upstream",
            "load_v0_backup ns/olmv1-migration-sub",
            "resolve from None",
            "install 1.0.0 taking over ns/sub",
            "write_status",
            "succeeded"
        ]
    );
    let events = fake.events();
    assert_eq!((events[0].0, events[0].1), (false, "Adopted"), "{events:?}");
    assert!(
        events[0].2.starts_with("took over OLM v0's installation of bundle p.v1.0.0 version 1.0.0 (Subscription ns/sub, backup ConfigMap ns/olmv1-migration-sub) in place"),
        "{events:?}"
    );
    assert_eq!(fake.outcome(), Outcome::Succeeded);
    assert_eq!(fake.resolved_range.borrow().as_deref(), Some("=1.0.0"));
}

/// Until the takeover, a catalog that already serves a newer bundle must not resolve
/// past OLM v0's installation (it would be left to nobody): the resolution asks for the
/// backed-up version only, within the extension's range; once installed, the range and
/// upgrade edges of the spec apply.
#[test]
fn a_pending_takeover_resolves_the_installed_csv_version_only() {
    let with_range = |range: &str| {
        let mut e = migrated();
        e.spec
            .source
            .catalog
            .get_or_insert_with(Default::default)
            .version = Some(range.into());
        e
    };
    for (e, record, expected) in [
        (migrated(), None, Some("=1.0.0")),
        (with_range(">=1.0.0 <2.0.0"), None, Some("=1.0.0")),
        // Outside the range: resolved as the spec says, and the takeover refuses.
        (with_range(">=1.1.0"), None, Some(">=1.1.0")),
        // Installed (taken over): the spec's range, upgrades allowed.
        (
            with_range(">=1.0.0 <2.0.0"),
            record("1.0.0"),
            Some(">=1.0.0 <2.0.0"),
        ),
        (migrated(), record("1.0.0"), None),
    ] {
        let fake = Fake {
            record,
            v0_backup: backup("1.0.0"),
            resolution: Some(resolved("1.0.0", None)),
            install: Some(Ok(pulled("1.0.0"))),
            ..Fake::default()
        };
        run(&e, &fake);
        assert_eq!(
            fake.resolved_range.borrow().as_deref(),
            expected,
            "{:?}",
            fake.calls()
        );
    }
    // No migration: no backup read, the spec's range.
    let fake = Fake {
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Ok(pulled("1.1.0"))),
        ..Fake::default()
    };
    run(&ext(), &fake);
    assert_eq!(*fake.resolved_range.borrow(), None);
    assert!(!fake.calls().iter().any(|c| c.starts_with("load_v0_backup")));
}

#[test]
fn another_bundle_or_no_backup_is_reported_and_nothing_is_touched() {
    let no_backup = Some(Err(
        "backup ConfigMap ns/olmv1-migration-sub not found".into()
    ));
    for (answer, why) in [
        (
            backup("0.9.0"),
            "the resolved bundle p.v1.0.0 version 1.0.0 is not the installed CSV p.v0.9.0 version 0.9.0 (backup ConfigMap ns/olmv1-migration-sub)",
        ),
        (
            no_backup,
            "backup ConfigMap ns/olmv1-migration-sub not found",
        ),
    ] {
        let fake = Fake {
            v0_backup: answer,
            resolution: Some(resolved("1.0.0", None)),
            ..Fake::default()
        };
        run(&migrated(), &fake);
        assert!(
            !fake
                .calls()
                .iter()
                .any(|c| c.starts_with("render") || c.starts_with("install")),
            "{:?}",
            fake.calls()
        );
        let expected = format!(
            "not taking over OLM v0's installation (Subscription ns/sub): {why}; nothing was changed"
        );
        assert_eq!(fake.outcome(), Outcome::Retrying(expected.clone()));
        assert_eq!(fake.events(), [(true, "AdoptionRefused", expected)]);
        assert_eq!(*fake.errors.borrow(), ["AdoptionRefused"]);
    }
}

#[test]
fn an_upgrade_from_the_installed_revision_or_no_annotation_reads_no_backup() {
    for (e, record) in [(migrated(), record("1.0.0")), (ext(), None)] {
        let fake = Fake {
            record,
            resolution: Some(resolved("1.1.0", None)),
            install: Some(Ok(pulled("1.1.0"))),
            ..Fake::default()
        };
        run(&e, &fake);
        let calls = fake.calls();
        assert!(
            !calls.iter().any(|c| c.starts_with("load_v0_backup")),
            "{calls:?}"
        );
        assert!(calls.iter().any(|c| c == "install 1.1.0"), "{calls:?}");
    }
}

/// OLM v0's OperatorCondition controller may re-create objects of the CSV after the
/// takeover: while the backed-up CSV stays installed, they are adopted again (without
/// another `Adopted` Event); a backup of another version adopts nothing.
#[test]
fn the_backed_up_csv_kept_installed_still_adopts() {
    for (answer, adopts) in [(backup("1.0.0"), true), (backup("0.9.0"), false)] {
        let fake = Fake {
            record: record("1.0.0"),
            v0_backup: answer,
            resolution: Some(resolved("1.0.0", None)),
            install: Some(Ok(pulled("1.0.0"))),
            ..Fake::default()
        };
        run(&migrated(), &fake);
        let calls = fake.calls();
        assert!(
            calls
                .iter()
                .any(|c| c == "load_v0_backup ns/olmv1-migration-sub"),
            "{calls:?}"
        );
        let install = if adopts {
            "install 1.0.0 taking over ns/sub"
        } else {
            "install 1.0.0"
        };
        assert!(calls.iter().any(|c| c == install), "{calls:?}");
        assert!(
            !fake.events().iter().any(|e| e.1 == "Adopted"),
            "{:?}",
            fake.events()
        );
        assert_eq!(fake.outcome(), Outcome::Succeeded);
    }
}

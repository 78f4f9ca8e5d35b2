//! The opt-in upgrade controls through the reconcile flow against the fake executor
//! (docs/how-to/upgrade-control.md): the UpgradeAvailable notice and its Events,
//! manual approval (held, approved, a stale approval, the first install), pause (drift
//! reported not corrected, no drift, resume, a paused deletion).

use super::*;
use crate::controller::extension::plan::control::{
    ANNOTATION_APPROVED_VERSION, ANNOTATION_PAUSED, ANNOTATION_UPGRADE_APPROVAL,
};
use crate::controller::extension::plan::notice::{
    REASON_APPROVAL_REQUIRED, REASON_EXCLUDED_BY_SPEC, REASON_PAUSED, REASON_UP_TO_DATE,
    TYPE_UPGRADE_AVAILABLE,
};
use crate::resolve::{BundleExplanation, Reason};

fn annotated(mut e: ClusterExtension, annotations: &[(&str, &str)]) -> ClusterExtension {
    let map = e.metadata.annotations.get_or_insert_with(Default::default);
    for (k, v) in annotations {
        map.insert(k.to_string(), v.to_string());
    }
    e
}

fn with_condition(mut e: ClusterExtension, type_: &str, message: &str) -> ClusterExtension {
    let status = e.status.get_or_insert_with(Default::default);
    status.conditions.push(
        serde_json::from_value(json!({"type": type_, "status": "True", "reason": "x",
            "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"}))
        .expect("condition"),
    );
    e
}

fn row(version: &str, reasons: Vec<Reason>) -> BundleExplanation {
    BundleExplanation {
        catalog: "c".into(),
        bundle: format!("p.v{version}"),
        version: Some(version.into()),
        deprecated: false,
        reasons,
    }
}

/// 1.0.0 installed, 1.1.0 its successor (resolved unless pinned), 1.2.0 outside a pin.
fn candidates(pinned: bool) -> Vec<BundleExplanation> {
    let outside = || Reason::OutsideRange {
        range: "1.0.0".into(),
    };
    let mut rows = vec![row("1.0.0", vec![])];
    rows.push(row(
        "1.1.0",
        if pinned {
            vec![outside()]
        } else {
            vec![Reason::Chosen]
        },
    ));
    rows
}

fn upgrade(fake: &Fake) -> (&'static str, String, Vec<String>) {
    let status = fake.status.borrow();
    let n = status
        .as_ref()
        .and_then(|o| o.control.upgrade.clone())
        .expect("notice");
    let versions = n.versions.iter().map(|(v, _)| v.clone()).collect();
    (n.reason, n.message, versions)
}

fn held(fake: &Fake) -> (&'static str, String) {
    match fake.outcome() {
        Outcome::Held { reason, message } => (reason, message),
        other => panic!("not held: {other:?}"),
    }
}

fn reasons(fake: &Fake) -> Vec<&'static str> {
    fake.events().into_iter().map(|(_, r, _)| r).collect()
}

#[test]
fn a_pinned_extension_is_told_of_the_newer_version_once() {
    let pinned = extension(json!({"source": {"sourceType": "Catalog",
        "catalog": {"packageName": "p", "version": "1.0.0"}}}));
    let fake = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved_by_digest("1.0.0")),
        candidates: candidates(true),
        unchanged: Some(pulled("1.0.0")),
        ..Fake::default()
    };
    run(&pinned, &fake);
    assert_eq!(fake.outcome(), Outcome::Succeeded, "Progressing as before");
    let (reason, message, versions) = upgrade(&fake);
    assert_eq!(reason, REASON_EXCLUDED_BY_SPEC);
    assert_eq!(
        message,
        "1.1.0 is available; spec.source.catalog.version pins 1.0.0"
    );
    assert_eq!(versions, ["1.1.0"]);
    assert_eq!(
        fake.events(),
        [(
            false,
            "UpgradeAvailable",
            format!("{message} (installed: 1.0.0, newer: 1.1.0)")
        )]
    );
    // Announced already: no Event again.
    let announced = with_condition(pinned, TYPE_UPGRADE_AVAILABLE, &message);
    let again = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved_by_digest("1.0.0")),
        candidates: candidates(true),
        unchanged: Some(pulled("1.0.0")),
        ..Fake::default()
    };
    run(&announced, &again);
    assert!(again.events().is_empty(), "{:?}", again.events());
}

#[test]
fn up_to_date_says_so_without_an_event() {
    let fake = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved_by_digest("1.0.0")),
        candidates: vec![row("1.0.0", vec![Reason::Chosen])],
        unchanged: Some(pulled("1.0.0")),
        ..Fake::default()
    };
    run(&ext(), &fake);
    assert_eq!(upgrade(&fake).0, REASON_UP_TO_DATE);
    assert!(fake.events().is_empty());
    let status = fake.status.borrow();
    assert_eq!(status.as_ref().and_then(|o| o.control.paused.clone()), None);
}

#[test]
fn manual_approval_holds_the_upgrade_until_exactly_that_version_is_approved() {
    let manual = annotated(ext(), &[(ANNOTATION_UPGRADE_APPROVAL, "Manual")]);
    let fake = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.1.0", None)),
        candidates: candidates(false),
        unchanged: Some(pulled("1.0.0")),
        ..Fake::default()
    };
    run(&manual, &fake);
    assert!(!fake.calls().iter().any(|c| c.starts_with("install")));
    let (reason, message) = held(&fake);
    assert_eq!(reason, REASON_APPROVAL_REQUIRED);
    assert!(
        message.contains("the upgrade to 1.1.0 (p.v1.1.0) waits for approval"),
        "{message}"
    );
    assert!(
        message.contains("kubectl olmv1 approve e 1.1.0"),
        "{message}"
    );
    let status = fake.status.borrow().clone().expect("status");
    assert_eq!(
        status.installed.map(|b| b.version).as_deref(),
        Some("1.0.0")
    );
    assert_eq!(upgrade(&fake).0, REASON_APPROVAL_REQUIRED);

    let approved = annotated(manual.clone(), &[(ANNOTATION_APPROVED_VERSION, "1.1.0")]);
    let upgrading = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.1.0", None)),
        candidates: candidates(false),
        install: Some(Ok(pulled("1.1.0"))),
        ..Fake::default()
    };
    run(&approved, &upgrading);
    assert!(upgrading.calls().contains(&"install 1.1.0".to_string()));
    assert_eq!(upgrading.outcome(), Outcome::Succeeded);

    // 1.2.0 appeared: the approval of 1.1.0 does not let it through.
    let stale = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.2.0", None)),
        unchanged: Some(pulled("1.0.0")),
        ..Fake::default()
    };
    run(&approved, &stale);
    assert!(!stale.calls().iter().any(|c| c.starts_with("install")));
    let (_, message) = held(&stale);
    assert!(
        message.contains("the approved version 1.1.0 is not the one resolved"),
        "{message}"
    );
}

#[test]
fn the_first_install_waits_only_when_asked() {
    let manual = annotated(ext(), &[(ANNOTATION_UPGRADE_APPROVAL, "Manual")]);
    let fake = Fake {
        resolution: Some(resolved("1.0.0", None)),
        install: Some(Ok(pulled("1.0.0"))),
        ..Fake::default()
    };
    run(&manual, &fake);
    assert!(fake.calls().contains(&"install 1.0.0".to_string()));

    let asked = annotated(
        ext(),
        &[(ANNOTATION_UPGRADE_APPROVAL, "ManualIncludingInstall")],
    );
    let waiting = Fake {
        resolution: Some(resolved("1.0.0", None)),
        ..Fake::default()
    };
    run(&asked, &waiting);
    assert!(!waiting.calls().iter().any(|c| c.starts_with("install")));
    let (reason, message) = held(&waiting);
    assert_eq!(reason, REASON_APPROVAL_REQUIRED);
    assert!(message.contains("the install of 1.0.0"), "{message}");
}

#[test]
fn paused_drift_is_reported_not_corrected() {
    let paused = annotated(ext(), &[(ANNOTATION_PAUSED, "true")]);
    let fake = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.1.0", None)),
        candidates: candidates(false),
        rendered: vec![json!({"kind": "ConfigMap"})],
        drift: Some(Ok(vec!["ConfigMap/ns/c".into()])),
        ..Fake::default()
    };
    run(&paused, &fake);
    assert!(!fake.calls().iter().any(|c| c.starts_with("install")));
    assert!(fake.calls().contains(&"check_drift of 1".to_string()));
    let (reason, message) = held(&fake);
    assert_eq!(reason, REASON_PAUSED);
    assert!(
        message.contains(
            "drift not corrected: 1 object(s) differ from the installed revision: ConfigMap/ns/c"
        ),
        "{message}"
    );
    assert_eq!(upgrade(&fake).0, REASON_PAUSED, "1.1.0 waits for the pause");
    assert_eq!(
        reasons(&fake),
        ["DriftDetected", "UpgradeAvailable", "Paused"]
    );
    let status = fake.status.borrow().clone().expect("status");
    assert_eq!(status.control.paused.as_deref(), Some(message.as_str()));

    // The same drift again: no second Warning.
    let reported = with_condition(paused.clone(), "Paused", &message);
    let again = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.0.0", None)),
        rendered: vec![json!({"kind": "ConfigMap"})],
        drift: Some(Ok(vec!["ConfigMap/ns/c".into()])),
        ..Fake::default()
    };
    run(&reported, &again);
    assert!(again.events().is_empty(), "{:?}", again.events());

    // Nothing changed since the last install: no render, no drift.
    let clean = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.0.0", None)),
        unchanged: Some(pulled("1.0.0")),
        ..Fake::default()
    };
    run(&paused, &clean);
    assert!(!clean.calls().iter().any(|c| c.starts_with("check_drift")));
    assert!(held(&clean).1.ends_with("no drift"), "{}", held(&clean).1);
}

#[test]
fn resuming_applies_again_and_says_so() {
    let was_paused = with_condition(ext(), "Paused", "paused ...");
    let fake = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.0.0", None)),
        install: Some(Ok(Installed {
            applied_changes: 1,
            ..pulled("1.0.0")
        })),
        ..Fake::default()
    };
    run(&was_paused, &fake);
    assert!(fake.calls().contains(&"install 1.0.0".to_string()));
    assert_eq!(reasons(&fake), ["DriftCorrected", "Resumed"]);
    assert_eq!(fake.outcome(), Outcome::Succeeded);
}

#[test]
fn a_paused_deletion_waits() {
    let mut paused = annotated(ext(), &[(ANNOTATION_PAUSED, "true")]);
    paused.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::from_second(1).expect("time"),
        ));
    let fake = Fake {
        record: record("1.0.0"),
        ..Fake::default()
    };
    assert_eq!(run(&paused, &fake), Action::await_change());
    assert!(
        !fake
            .calls()
            .iter()
            .any(|c| c.starts_with("delete") || c == "remove" || c == "stop_watches"),
        "{:?}",
        fake.calls()
    );
    let (reason, message) = held(&fake);
    assert_eq!(reason, REASON_PAUSED);
    assert!(message.contains("the deletion waits"), "{message}");
    assert!(reasons(&fake).contains(&"DeletionPaused"));
}

#[test]
fn the_operator_holds_an_upgrade_while_its_operator_condition_says_not_upgradeable() {
    use crate::controller::extension::plan::SAFETY_RECHECK;
    use crate::controller::extension::plan::operator::{
        REASON_NOT_UPGRADEABLE, UNFOLLOWED_RECHECK,
    };
    let says = "Upgradeable=False (reason \"Migrating\", by the operator): data migration running";
    let fake = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.1.0", None)),
        candidates: candidates(false),
        unchanged: Some(pulled("1.0.0")),
        operator_condition: Some(Err(says.into())),
        ..Fake::default()
    };
    let action = run(&ext(), &fake);
    assert!(!fake.calls().iter().any(|c| c.starts_with("install")));
    assert!(
        fake.calls()
            .contains(&"read_operator_condition p.v1.0.0".to_string())
    );
    let (reason, message) = held(&fake);
    assert_eq!(reason, REASON_NOT_UPGRADEABLE);
    assert!(message.contains("the upgrade to 1.1.0 (p.v1.1.0) is held by the operator"));
    assert!(message.contains("data migration running"), "{message}");
    assert_eq!(upgrade(&fake).0, REASON_NOT_UPGRADEABLE);
    assert_eq!(
        reasons(&fake),
        ["UpgradeAvailable", REASON_NOT_UPGRADEABLE],
        "the hold begins"
    );
    assert_eq!(
        action,
        Action::requeue(UNFOLLOWED_RECHECK),
        "no listed watch follows the OperatorCondition yet"
    );
    // Followed by the watches: the hold changing triggers a reconcile; only the safety
    // re-check remains.
    let followed = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.1.0", None)),
        candidates: candidates(false),
        unchanged: Some(pulled("1.0.0")),
        operator_condition: Some(Err(says.into())),
        followed: true,
        ..Fake::default()
    };
    assert_eq!(run(&ext(), &followed), Action::requeue(SAFETY_RECHECK));
    // Held already: no Event again.
    let mut again_ext = ext();
    again_ext.status = Some(
        serde_json::from_value(
            json!({"conditions": [{"type": "Progressing", "status": "True",
            "reason": REASON_NOT_UPGRADEABLE, "message": message,
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
        )
        .expect("status"),
    );
    let again = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.1.0", None)),
        unchanged: Some(pulled("1.0.0")),
        operator_condition: Some(Err(says.into())),
        ..Fake::default()
    };
    run(&again_ext, &again);
    assert!(!reasons(&again).contains(&REASON_NOT_UPGRADEABLE));

    // Upgradeable (or the OperatorCondition gone): the upgrade runs.
    let lifted = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Ok(pulled("1.1.0"))),
        operator_condition: Some(Ok(())),
        ..Fake::default()
    };
    run(&ext(), &lifted);
    assert!(lifted.calls().contains(&"install 1.1.0".to_string()));
    assert_eq!(lifted.outcome(), Outcome::Succeeded);

    // Without the kind served nothing is read and nothing is held.
    let plain = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Ok(pulled("1.1.0"))),
        ..Fake::default()
    };
    run(&ext(), &plain);
    assert!(!plain.calls().iter().any(|c| c.starts_with("read_operator")));
    assert_eq!(plain.outcome(), Outcome::Succeeded);
}

//! Tests of rollback: the revision gone back to is what it names, and the failed
//! upgrade is read back from its condition.

use super::*;
use crate::api::conditions::REASON_BLOCKED;
use crate::apply::record::{PulledBundle, RevisionHistory};
use crate::apply::{Owner, RevisionState};
use crate::controller::extension::plan::Rendered;
use crate::controller::extension::status::Outcome;

fn digest(c: char) -> String {
    format!("registry/p@sha256:{}", c.to_string().repeat(64))
}

/// The record of extension `e`: 1.0.0 (digest `a`), then 1.1.0 (digest `b`) installed.
fn recorded() -> RevisionHistory {
    let mut h = RevisionHistory::new(&Owner::new("e".to_string(), "u1".to_string()));
    for (v, d) in [("1.0.0", 'a'), ("1.1.0", 'b')] {
        let b = BundleIdentity {
            package: "p".into(),
            name: format!("p.v{v}"),
            version: v.into(),
            release: None,
            image: digest(d),
        };
        let n = h.begin(b, &[serde_json::json!({"kind": "ConfigMap", "v": v})]);
        h.complete(n);
    }
    h
}

/// `h` edited by an administrator: 1.1.0's digest under 1.0.0.
fn edited(mut h: RevisionHistory) -> RevisionHistory {
    h.revisions[0].bundle.image = digest('b');
    h
}

fn asking(h: RevisionHistory, to: &str) -> Facts {
    let mut facts = Facts::new(Some(3), false, true, Err("unused".into()));
    facts.validation = Some(Vec::new());
    facts.record = Some(Ok(Some(h)));
    facts.controls.rollback_to = Some(to.to_string());
    facts
}

fn rendered(d: char, v: &str) -> Rendered {
    Rendered {
        image: digest(d),
        pulled: Some(PulledBundle {
            package: "p".into(),
            name: format!("p.v{v}"),
            version: v.into(),
        }),
        ..Rendered::default()
    }
}

fn blocked(report: &Report) -> String {
    match &report.observation.outcome {
        Outcome::Blocked { reason, message } => {
            assert_eq!(*reason, REASON_BLOCKED);
            message.clone()
        }
        other => panic!("not blocked: {other:?}"),
    }
}

/// A refusal: terminal, the installed bundle still reported, RolledBack
/// False/RollbackRefused and its Warning Event.
fn assert_refused(report: &Report) {
    assert_eq!(
        (report.error, report.next),
        (Some("RollbackRefused"), Next::Failed)
    );
    let installed = report
        .observation
        .installed
        .as_ref()
        .map(|b| b.version.as_str());
    assert_eq!(installed, Some("1.1.0"), "nothing went back");
    let rolled = report.observation.control.rolled_back.as_ref();
    assert_eq!(
        rolled.map(|r| (r.status, r.reason)),
        Some((false, REASON_ROLLBACK_REFUSED))
    );
    let events: Vec<_> = report
        .events
        .iter()
        .map(|n| (n.warning, n.reason))
        .collect();
    assert_eq!(events, [(true, "RollbackRefused")]);
}

#[test]
fn a_rollback_applies_only_the_bundle_its_revision_names() {
    // Consistent: the revision's image holds its bundle.
    let facts = asking(recorded(), "1.0.0");
    let Some(Ok(install)) = target(&facts, None) else {
        panic!("no rollback");
    };
    assert_eq!(install.rollback.as_ref().and_then(|r| r.revision), Some(1));
    assert_eq!(install.target.image, digest('a'));
    assert!(verify(&facts, &install, &rendered('a', "1.0.0")).is_none());
    let upgrade = Install {
        rollback: None,
        ..install.clone()
    };
    assert!(
        verify(&facts, &upgrade, &rendered('b', "1.1.0")).is_none(),
        "not a rollback"
    );

    // Edited under its seal: refused before its image is pulled.
    let facts = asking(edited(recorded()), "1.0.0");
    let Some(Err(refused)) = target(&facts, None) else {
        panic!("not refused");
    };
    let message = blocked(&refused);
    assert!(
        message.starts_with(
            "rollback to 1.0.0 refused: revision 1 of record olmv1-revision-e names bundle p.v1.0.0 version 1.0.0 but fails its integrity check: "
        ) && message.ends_with(": the record was edited; roll back to another revision or re-install"),
        "{message}"
    );
    assert_refused(&refused);

    // A record written before revisions were sealed: the pulled image's own metadata
    // refuses it before anything is applied.
    let mut legacy = edited(recorded());
    for r in &mut legacy.revisions {
        r.integrity = None;
    }
    let facts = asking(legacy, "1.0.0");
    let Some(Ok(install)) = target(&facts, None) else {
        panic!("no rollback");
    };
    let refused = verify(&facts, &install, &rendered('b', "1.1.0")).expect("refused");
    assert_eq!(
        blocked(&refused),
        format!(
            "rollback to 1.0.0 refused: revision 1 of record olmv1-revision-e names bundle p.v1.0.0 version 1.0.0 but its image sha256:{} holds p.v1.1.0 version 1.1.0 (the bundle name and version disagree): the record was edited; roll back to another revision or re-install",
            "b".repeat(64)
        )
    );
    assert_refused(&refused);
}

#[test]
fn the_installed_revision_asked_for_again_is_checked_too() {
    let mut h = recorded();
    h.revisions[1].bundle.version = "1.2.0".into();
    h.revisions[1].state = RevisionState::Installed;
    let facts = asking(h, "1.2.0");
    let Some(Err(refused)) = target(&facts, None) else {
        panic!("not refused");
    };
    assert!(
        blocked(&refused).contains("revision 2 of record olmv1-revision-e names bundle p.v1.1.0 version 1.2.0 but fails its integrity check"),
        "{}",
        blocked(&refused)
    );
}

#[test]
fn the_failed_bundle_is_read_back_from_its_condition_of_the_same_generation() {
    let f = BundleIdentity {
        package: "p".into(),
        name: "p.v1.1.0".into(),
        version: "1.1.0".into(),
        release: None,
        image: "registry/p:1.1.0".into(),
    };
    let before = Before {
        status: true,
        reason: REASON_UPGRADE_FAILED.into(),
        message: failed_message(&f, "1.0.0", true, "boom (x, y) failed"),
        generation: Some(3),
    };
    let read = failed(Some(&before), Some(3)).expect("failed");
    assert_eq!(
        (
            read.version.as_str(),
            read.name.as_str(),
            read.image.as_str()
        ),
        ("1.1.0", "p.v1.1.0", "registry/p:1.1.0")
    );
    assert_eq!(failed(Some(&before), Some(4)), None, "the spec changed");
    let resumed = Before {
        status: false,
        ..before.clone()
    };
    assert_eq!(failed(Some(&resumed), Some(3)), None);
    assert_eq!(failed(None, Some(3)), None);
}

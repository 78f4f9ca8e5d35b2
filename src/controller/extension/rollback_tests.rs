//! Rollback through the reconcile flow against the fake executor
//! (docs/how-to/upgrade-control.md, "Rollback"): the `rollback-to` annotation installs
//! the recorded revision and holds the upgrade until it is removed; a version not in
//! the record and a rollback CRD upgrade safety refuses are terminal; with
//! `upgrade-remediation: Rollback` a failed upgrade goes back to the installed revision
//! and is not retried until the catalog or the spec changes. Without the annotations
//! nothing changes (an unsafe CRD or a failed apply is retried as before). A revision
//! edited after it was recorded is not gone back to (its seal fails).

use super::*;
use crate::controller::extension::plan::notice::REASON_ROLLED_BACK;
use crate::controller::extension::plan::rollback::{
    ANNOTATION_ROLLBACK_TO, ANNOTATION_UPGRADE_REMEDIATION, REASON_ROLLBACK_REFUSED,
    REASON_ROLLBACK_REQUESTED, REASON_UPGRADE_FAILED, REASON_UPGRADES_RESUMED, RolledBack,
};
use crate::resolve::{BundleExplanation, Reason};

fn annotated(mut e: ClusterExtension, key: &str, value: &str) -> ClusterExtension {
    let map = e.metadata.annotations.get_or_insert_with(Default::default);
    map.insert(key.to_string(), value.to_string());
    e
}

/// `e` with the RolledBack condition a reconcile at generation 3 wrote.
fn with_rolled_back(mut e: ClusterExtension, r: &RolledBack) -> ClusterExtension {
    let status = e.status.get_or_insert_with(Default::default);
    status.conditions.push(
        serde_json::from_value(json!({"type": "RolledBack",
            "status": if r.status { "True" } else { "False" }, "reason": r.reason,
            "message": r.message, "observedGeneration": 3,
            "lastTransitionTime": "2026-01-01T00:00:00Z"}))
        .expect("condition"),
    );
    e
}

/// A record of `versions` installed in turn (the last one installed); `pending`: an
/// unfinished attempt after it.
fn history(
    versions: &[&str],
    pending: Option<&str>,
) -> Option<Result<Option<RevisionHistory>, String>> {
    let mut h = RevisionHistory::new(&Owner::new("e".to_string(), "u1".to_string()));
    for v in versions {
        let bundle = identity(v).pulled(&format!("registry/p@sha256:{v}"));
        let n = h.begin(bundle, &[json!({"kind": "ConfigMap", "v": v})]);
        h.complete(n);
    }
    if let Some(v) = pending {
        h.begin(identity(v), &[json!({"kind": "ConfigMap", "v": v})]);
    }
    Some(Ok(Some(h)))
}

fn newer(version: &str) -> Vec<BundleExplanation> {
    vec![BundleExplanation {
        catalog: "c".into(),
        bundle: format!("p.v{version}"),
        version: Some(version.into()),
        deprecated: false,
        reasons: vec![Reason::Chosen],
    }]
}

fn rolled_back(fake: &Fake) -> Option<RolledBack> {
    let status = fake.status.borrow();
    status.as_ref().and_then(|o| o.control.rolled_back.clone())
}

fn held(fake: &Fake) -> (&'static str, String) {
    match fake.outcome() {
        Outcome::Held { reason, message } => (reason, message),
        other => panic!("not held: {other:?}"),
    }
}

fn installs(fake: &Fake) -> Vec<String> {
    let calls = fake.calls();
    calls
        .into_iter()
        .filter(|c| c.starts_with("install"))
        .collect()
}

fn reasons(fake: &Fake) -> Vec<&'static str> {
    fake.events().into_iter().map(|(_, r, _)| r).collect()
}

#[test]
fn rollback_to_installs_the_recorded_revision_and_holds_the_upgrade_until_removed() {
    let asked = annotated(ext(), ANNOTATION_ROLLBACK_TO, "1.0.0");
    let fake = Fake {
        record: history(&["1.0.0", "1.1.0"], None),
        resolution: Some(resolved("1.1.0", None)),
        candidates: newer("1.1.0"),
        install: Some(Ok(pulled("1.0.0"))),
        ..Fake::default()
    };
    run(&asked, &fake);
    assert_eq!(installs(&fake), ["install 1.0.0"]);
    let target = fake.installed_target.borrow().clone().expect("rendered");
    assert_eq!(
        target.image, "registry/p@sha256:1.0.0",
        "the recorded image, not the catalog's"
    );
    let step = fake.applied.borrow().clone().expect("applied");
    assert!(step.preflight, "CRD upgrade safety runs before going back");
    let (reason, message) = held(&fake);
    assert_eq!(reason, REASON_ROLLED_BACK);
    assert!(
        message.contains("installed version 1.0.0")
            && message
                .contains("the upgrade to 1.1.0 (p.v1.1.0) waits until the annotation is removed"),
        "{message}"
    );
    let events = fake.events();
    let back = events.iter().find(|e| e.1 == "RolledBack").expect("event");
    assert!(
        back.2
            .starts_with("rolled back from 1.1.0 to 1.0.0 (p.v1.0.0) as"),
        "{}",
        back.2
    );
    assert!(!reasons(&fake).contains(&"Upgraded"));
    let condition = rolled_back(&fake).expect("RolledBack");
    assert_eq!(
        (condition.status, condition.reason),
        (true, REASON_ROLLBACK_REQUESTED)
    );
    let status = fake.status.borrow().clone().expect("status");
    assert_eq!(
        status.installed.map(|b| b.version).as_deref(),
        Some("1.0.0")
    );
    let notice = status.control.upgrade.expect("notice");
    assert_eq!(notice.reason, REASON_ROLLED_BACK);

    // Rolled back: 1.1.0 still resolved, nothing installed, no Event again.
    let after = with_rolled_back(asked.clone(), &condition);
    let staying = Fake {
        record: history(&["1.0.0", "1.1.0", "1.0.0"], None),
        resolution: Some(resolved("1.1.0", None)),
        unchanged: Some(pulled("1.0.0")),
        ..Fake::default()
    };
    run(&after, &staying);
    assert!(installs(&staying).is_empty(), "{:?}", staying.calls());
    assert_eq!(held(&staying).0, REASON_ROLLED_BACK);
    assert!(!reasons(&staying).contains(&"RolledBack"));

    // The annotation removed: the upgrade runs, the condition turns False.
    let removed = with_rolled_back(ext(), &condition);
    let upgrading = Fake {
        record: history(&["1.0.0", "1.1.0", "1.0.0"], None),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Ok(pulled("1.1.0"))),
        ..Fake::default()
    };
    run(&removed, &upgrading);
    assert_eq!(installs(&upgrading), ["install 1.1.0"]);
    assert_eq!(upgrading.outcome(), Outcome::Succeeded);
    let resumed = rolled_back(&upgrading).expect("RolledBack");
    assert_eq!(
        (resumed.status, resumed.reason),
        (false, REASON_UPGRADES_RESUMED)
    );
    assert!(reasons(&upgrading).contains(&"Upgraded"));
}

#[test]
fn rollback_to_a_version_not_in_the_record_is_refused() {
    let asked = annotated(ext(), ANNOTATION_ROLLBACK_TO, "0.9.0");
    let fake = Fake {
        record: history(&["1.0.0", "1.1.0"], None),
        resolution: Some(resolved("1.1.0", None)),
        ..Fake::default()
    };
    assert_eq!(run(&asked, &fake), Action::await_change(), "terminal");
    assert!(installs(&fake).is_empty());
    let Outcome::Blocked { reason, message } = fake.outcome() else {
        panic!("not blocked: {:?}", fake.outcome());
    };
    assert_eq!(reason, REASON_BLOCKED);
    assert!(
        message.starts_with(
            "rollback to 0.9.0 refused: the revision record has no revision of version 0.9.0 (recorded: 1.0.0, 1.1.0)"
        ),
        "{message}"
    );
    assert_eq!(reasons(&fake), ["RollbackRefused"]);
    let condition = rolled_back(&fake).expect("RolledBack");
    assert_eq!(
        (condition.status, condition.reason),
        (false, REASON_ROLLBACK_REFUSED)
    );
    let status = fake.status.borrow().clone().expect("status");
    assert_eq!(
        status.installed.map(|b| b.version).as_deref(),
        Some("1.1.0")
    );
}

#[test]
fn a_rollback_crd_upgrade_safety_refuses_is_terminal_with_its_findings() {
    let findings =
        "validating upgrade for CRD \"widgets.example.com\": stored versions removed : [v2]";
    let asked = annotated(ext(), ANNOTATION_ROLLBACK_TO, "1.0.0");
    let fake = Fake {
        record: history(&["1.0.0", "1.1.0"], None),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Err(InstallFailure::UnsafeCrds(findings.into()))),
        ..Fake::default()
    };
    assert_eq!(run(&asked, &fake), Action::await_change(), "terminal");
    let Outcome::Blocked { reason, message } = fake.outcome() else {
        panic!("not blocked: {:?}", fake.outcome());
    };
    assert_eq!(reason, REASON_BLOCKED);
    assert_eq!(
        message,
        format!("rollback from 1.1.0 to 1.0.0 refused by CRD upgrade safety: {findings}")
    );
    assert_eq!(reasons(&fake), ["RollbackRefused"]);
    assert_eq!(
        rolled_back(&fake).map(|c| c.reason),
        Some(REASON_ROLLBACK_REFUSED)
    );
    let status = fake.status.borrow().clone().expect("status");
    assert_eq!(
        status.installed.map(|b| b.version).as_deref(),
        Some("1.1.0")
    );

    // Without the annotation an unsafe upgrade is retried, as before.
    let upgrade = Fake {
        record: history(&["1.0.0"], None),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Err(InstallFailure::UnsafeCrds(findings.into()))),
        ..Fake::default()
    };
    run(&ext(), &upgrade);
    assert!(matches!(upgrade.outcome(), Outcome::Retrying(m) if m.ends_with(findings)));
    assert_eq!(rolled_back(&upgrade), None);
}

#[test]
fn remediation_rolls_a_failed_upgrade_back_and_holds_it_until_the_catalog_or_spec_changes() {
    let opted = annotated(ext(), ANNOTATION_UPGRADE_REMEDIATION, "Rollback");
    let fake = Fake {
        record: history(&["1.0.0"], None),
        resolution: Some(resolved("1.1.0", None)),
        candidates: newer("1.1.0"),
        install: Some(Err(InstallFailure::Apply(
            "admission webhook denied".into(),
        ))),
        remedy: Some(Ok(pulled("1.0.0"))),
        ..Fake::default()
    };
    run(&opted, &fake);
    assert_eq!(installs(&fake), ["install 1.1.0", "install 1.0.0"]);
    let step = fake.applied.borrow().clone().expect("applied");
    assert!(step.preflight && step.target.image == "registry/p@sha256:1.0.0");
    let (reason, message) = held(&fake);
    assert_eq!(reason, REASON_ROLLED_BACK);
    assert!(
        message.contains("the upgrade to 1.1.0 (p.v1.1.0) failed and was rolled back"),
        "{message}"
    );
    assert_eq!(
        reasons(&fake),
        ["InstallFailed", "RolledBack", "UpgradeAvailable"]
    );
    let condition = rolled_back(&fake).expect("RolledBack");
    assert_eq!(
        (condition.status, condition.reason),
        (true, REASON_UPGRADE_FAILED)
    );
    assert!(
        condition.message.ends_with("admission webhook denied"),
        "{}",
        condition.message
    );
    let status = fake.status.borrow().clone().expect("status");
    assert_eq!(
        status.installed.map(|b| b.version).as_deref(),
        Some("1.0.0")
    );

    // The catalog still resolves 1.1.0: it waits, nothing is applied.
    let after = with_rolled_back(opted.clone(), &condition);
    let waiting = Fake {
        record: history(&["1.0.0", "1.1.0", "1.0.0"], None),
        resolution: Some(resolved("1.1.0", None)),
        unchanged: Some(pulled("1.0.0")),
        ..Fake::default()
    };
    run(&after, &waiting);
    assert!(installs(&waiting).is_empty(), "{:?}", waiting.calls());
    assert_eq!(held(&waiting).0, REASON_ROLLED_BACK);
    assert!(waiting.events().is_empty(), "{:?}", waiting.events());

    // The catalog changed (1.1.1): upgraded, the hold ends.
    let fixed = Fake {
        record: history(&["1.0.0", "1.1.0", "1.0.0"], None),
        resolution: Some(resolved("1.1.1", None)),
        install: Some(Ok(pulled("1.1.1"))),
        ..Fake::default()
    };
    run(&after, &fixed);
    assert_eq!(installs(&fixed), ["install 1.1.1"]);
    assert_eq!(
        rolled_back(&fixed).map(|c| c.reason),
        Some(REASON_UPGRADES_RESUMED)
    );

    // The spec changed (another generation): 1.1.0 is tried again.
    let mut changed = after.clone();
    changed.metadata.generation = Some(4);
    let retried = Fake {
        record: history(&["1.0.0", "1.1.0", "1.0.0"], None),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Ok(pulled("1.1.0"))),
        ..Fake::default()
    };
    run(&changed, &retried);
    assert_eq!(installs(&retried), ["install 1.1.0"]);
}

#[test]
fn a_rollback_left_unfinished_is_applied_again_while_the_failed_upgrade_waits() {
    let condition = RolledBack {
        status: true,
        reason: REASON_UPGRADE_FAILED,
        message: "upgrade to 1.1.0 (p.v1.1.0, registry/p:1.1.0) failed; rolling back to 1.0.0 (...). The failure: x".into(),
    };
    let after = with_rolled_back(
        annotated(ext(), ANNOTATION_UPGRADE_REMEDIATION, "Rollback"),
        &condition,
    );
    let fake = Fake {
        record: history(&["1.0.0"], Some("1.1.0")),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Ok(pulled("1.0.0"))),
        ..Fake::default()
    };
    run(&after, &fake);
    assert_eq!(installs(&fake), ["install 1.0.0"]);
    assert!(fake.applied.borrow().as_ref().is_some_and(|s| s.preflight));
    assert_eq!(held(&fake).0, REASON_ROLLED_BACK);
    assert!(
        reasons(&fake).contains(&"RolledBack"),
        "{:?}",
        fake.events()
    );
}

#[test]
fn a_remediation_crd_upgrade_safety_refuses_is_terminal() {
    let opted = annotated(ext(), ANNOTATION_UPGRADE_REMEDIATION, "Rollback");
    let fake = Fake {
        record: history(&["1.0.0"], None),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Err(InstallFailure::Apply("boom".into()))),
        remedy: Some(Err(InstallFailure::UnsafeCrds(
            "stored versions removed : [v2]".into(),
        ))),
        ..Fake::default()
    };
    assert_eq!(run(&opted, &fake), Action::await_change());
    let Outcome::Blocked { message, .. } = fake.outcome() else {
        panic!("not blocked: {:?}", fake.outcome());
    };
    assert!(
        message.contains("was refused by CRD upgrade safety: stored versions removed : [v2]"),
        "{message}"
    );
    assert_eq!(reasons(&fake), ["InstallFailed", "RollbackRefused"]);
    assert_eq!(
        rolled_back(&fake).map(|c| c.reason),
        Some(REASON_ROLLBACK_REFUSED)
    );
}

#[test]
fn without_remediation_a_failed_upgrade_is_retried_as_before() {
    let fake = Fake {
        record: history(&["1.0.0"], None),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Err(InstallFailure::Apply(
            "admission webhook denied".into(),
        ))),
        remedy: Some(Ok(pulled("1.0.0"))),
        ..Fake::default()
    };
    run(&ext(), &fake);
    assert_eq!(installs(&fake), ["install 1.1.0"]);
    let status = fake.status.borrow().clone().expect("status");
    assert!(matches!(status.outcome, Outcome::Retrying(_)));
    assert_eq!(status.control.rolled_back, None);
    assert_eq!(reasons(&fake), ["InstallFailed"]);
}

#[test]
fn remediation_goes_back_from_an_upgrade_whose_rollout_outlasts_the_deadline() {
    let opted = annotated(
        extension(json!({"progressDeadlineMinutes": 10})),
        ANNOTATION_UPGRADE_REMEDIATION,
        "Rollback",
    );
    let stuck = || Installed {
        readiness: crate::controller::extension::rollout::Readiness::NotReady(vec![
            "deployment/foo 0/1 available: ImagePullBackOff".into(),
        ]),
        ..pulled("1.1.0")
    };
    let fake = Fake {
        record: history(&["1.0.0", "1.1.0"], None),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Ok(stuck())),
        failing_for: Duration::from_secs(600),
        ..Fake::default()
    };
    assert_eq!(run(&opted, &fake), Action::requeue(Duration::from_secs(1)));
    assert!(matches!(fake.outcome(), Outcome::DeadlineExceeded { .. }));
    assert!(
        reasons(&fake).contains(&"RollingBack"),
        "{:?}",
        fake.events()
    );
    let condition = rolled_back(&fake).expect("RolledBack");
    assert_eq!(
        (condition.status, condition.reason),
        (true, REASON_UPGRADE_FAILED)
    );

    // The next reconcile goes back to 1.0.0 from the record.
    let after = with_rolled_back(opted.clone(), &condition);
    let back = Fake {
        record: history(&["1.0.0", "1.1.0"], None),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Ok(pulled("1.0.0"))),
        ..Fake::default()
    };
    run(&after, &back);
    assert_eq!(installs(&back), ["install 1.0.0"]);
    assert!(back.applied.borrow().as_ref().is_some_and(|s| s.preflight));
    assert_eq!(held(&back).0, REASON_ROLLED_BACK);
    assert!(
        reasons(&back).contains(&"RolledBack"),
        "{:?}",
        back.events()
    );

    // Without the annotation, the deadline is only reported, as before.
    let plain = extension(json!({"progressDeadlineMinutes": 10}));
    let reported = Fake {
        record: history(&["1.0.0", "1.1.0"], None),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Ok(stuck())),
        failing_for: Duration::from_secs(600),
        ..Fake::default()
    };
    run(&plain, &reported);
    assert!(!reasons(&reported).contains(&"RollingBack"));
    assert_eq!(rolled_back(&reported), None);
}

/// After a deadline-based rollback the clock of `progressDeadlineMinutes` starts over:
/// the previous version rolling out again is not reported as ProgressDeadlineExceeded
/// with the failed upgrade's time (docs/how-to/upgrade-control.md, "Automatic
/// remediation of a failed upgrade").
#[test]
fn a_rollback_after_the_deadline_starts_the_deadline_clock_over() {
    let opted = annotated(
        extension(json!({"progressDeadlineMinutes": 10})),
        ANNOTATION_UPGRADE_REMEDIATION,
        "Rollback",
    );
    let condition = RolledBack {
        status: true,
        reason: REASON_UPGRADE_FAILED,
        message: "upgrade to 1.1.0 (p.v1.1.0, registry/p:1.1.0) failed; rolling back to 1.0.0 (...). The failure: its rollout was not ready within progressDeadlineMinutes: x".into(),
    };
    let after = with_rolled_back(opted, &condition);
    let back = Fake {
        record: history(&["1.0.0", "1.1.0"], None),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Ok(Installed {
            readiness: crate::controller::extension::rollout::Readiness::NotReady(vec![
                "deployment/foo 0/1 available".into(),
            ]),
            ..pulled("1.0.0")
        })),
        // The failed upgrade's clock: past the deadline.
        failing_for: Duration::from_secs(900),
        ..Fake::default()
    };
    run(&after, &back);
    assert_eq!(installs(&back), ["install 1.0.0"]);
    assert!(
        matches!(back.outcome(), Outcome::RollingOut { ref version, .. } if version == "1.0.0"),
        "{:?}",
        back.outcome()
    );
    assert!(!reasons(&back).contains(&"ProgressDeadlineExceeded"));
    let tally = back.tally.borrow().expect("tally");
    assert!(tally.pending && tally.restart, "{tally:?}");
}

/// `record` edited by an administrator: revision 1 (1.0.0) names 1.1.0's image.
fn with_edited_digest(
    record: Option<Result<Option<RevisionHistory>, String>>,
) -> Option<Result<Option<RevisionHistory>, String>> {
    let mut h = record?.ok()??;
    h.revisions[0].bundle.image = "registry/p@sha256:1.1.0".into();
    Some(Ok(Some(h)))
}

#[test]
fn a_rollback_to_an_edited_revision_is_refused_before_anything_is_pulled() {
    let asked = annotated(ext(), ANNOTATION_ROLLBACK_TO, "1.0.0");
    let fake = Fake {
        record: with_edited_digest(history(&["1.0.0", "1.1.0"], None)),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Ok(pulled("1.0.0"))),
        ..Fake::default()
    };
    assert_eq!(run(&asked, &fake), Action::await_change(), "terminal");
    assert!(installs(&fake).is_empty(), "{:?}", fake.calls());
    assert!(fake.installed_target.borrow().is_none(), "nothing pulled");
    let Outcome::Blocked { reason, message } = fake.outcome() else {
        panic!("not blocked: {:?}", fake.outcome());
    };
    assert_eq!(reason, REASON_BLOCKED);
    assert!(
        message.starts_with(
            "rollback to 1.0.0 refused: revision 1 of record olmv1-revision-e names bundle p.v1.0.0 version 1.0.0 but fails its integrity check: its bundle, version, image (registry/p@sha256:1.1.0) and objects hash to"
        ) && message.ends_with("the record was edited; roll back to another revision or re-install"),
        "{message}"
    );
    assert_eq!(reasons(&fake), ["RollbackRefused"]);
    assert_eq!(
        rolled_back(&fake).map(|c| (c.status, c.reason)),
        Some((false, REASON_ROLLBACK_REFUSED))
    );
    let status = fake.status.borrow().clone().expect("status");
    assert_eq!(
        status.installed.map(|b| b.version).as_deref(),
        Some("1.1.0")
    );
}

#[test]
fn remediation_does_not_go_back_to_an_edited_revision() {
    let opted = annotated(ext(), ANNOTATION_UPGRADE_REMEDIATION, "Rollback");
    let fake = Fake {
        record: with_edited_digest(history(&["1.0.0"], None)),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Err(InstallFailure::Apply("boom".into()))),
        remedy: Some(Ok(pulled("1.0.0"))),
        ..Fake::default()
    };
    assert_eq!(run(&opted, &fake), Action::await_change(), "terminal");
    assert_eq!(installs(&fake), ["install 1.1.0"], "1.0.0 not applied");
    let Outcome::Blocked { message, .. } = fake.outcome() else {
        panic!("not blocked: {:?}", fake.outcome());
    };
    assert!(
        message.starts_with("upgrade to 1.1.0 failed: ")
            && message.contains(
                "; the rollback to 1.0.0 (olm.operatorframework.io/upgrade-remediation: Rollback) was refused: revision 1 of record olmv1-revision-e names bundle p.v1.0.0 version 1.0.0 but fails its integrity check"
            ),
        "{message}"
    );
    assert_eq!(reasons(&fake), ["InstallFailed", "RollbackRefused"]);
    assert_eq!(
        rolled_back(&fake).map(|c| c.reason),
        Some(REASON_ROLLBACK_REFUSED)
    );
    let status = fake.status.borrow().clone().expect("status");
    assert_eq!(
        status.installed.map(|b| b.version).as_deref(),
        Some("1.0.0"),
        "the installed bundle stays reported"
    );
}

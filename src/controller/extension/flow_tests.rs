//! Every branch of the reconcile flow against a fake executor: first install, upgrade,
//! re-apply of the installed revision (with and without drift), blocked upgrade,
//! invalid configuration, unparsable image, uninstall, missing installer account,
//! unreadable record, resolution failure, catalog gone, missing catalog source,
//! `progressDeadlineMinutes`, the takeover of upstream OLM v1's installation, an
//! unchanged install skipped (readiness only read again), preflights skipped for the
//! installed revision; and every branch of the uninstall (`uninstall_tests.rs`); the
//! upgrade controls (`control_tests.rs`), rollback (`rollback_tests.rs`) and the
//! takeover of an OLM v0 installation (`migration_tests.rs`).

use super::super::installer::InstallerAccount;
use super::super::rollout::Readiness;
use super::super::status::Outcome;
use super::*;
use crate::api::conditions::{REASON_BLOCKED, REASON_INVALID_CONFIGURATION};
use crate::apply::{ObjectRef, Owner, RevisionHistory, UninstallReport};
use crate::fbc::model::{Deprecation, DeprecationEntry, PackageScopedReference};
use crate::migrate::upstream_helm::UpstreamRelease;
use crate::resolve::deprecation::ConditionStatus;
use crate::resolve::{CatalogStats, NoUniqueBundle, ResolvedBundle};
use crate::resolve::{Resolution, ResolveError, ResolveRequest};
use crate::version::BundleVersion;
use kube::runtime::controller::Action;
use plan::{
    Apply, DeleteFailure, Deletion, Installed, Rendered, SAFETY_RECHECK, Standing, Tally,
    rollout_recheck,
};
use serde_json::json;
use std::cell::RefCell;
use std::time::Duration;

/// What the fake executor answers, and what it was asked.
#[derive(Default)]
struct Fake {
    /// `None`: the extension's own `spec.serviceAccount` (sa in ns).
    installer: Option<Result<InstallerAccount, String>>,
    validation: Vec<String>,
    record: Option<Result<Option<RevisionHistory>, String>>,
    upstream: Option<Result<Option<UpstreamRelease>, String>>,
    /// What reading the backup of an OLM v0 installation answers.
    v0_backup: Option<Result<plan::migration::V0Takeover, String>>,
    resolution: Option<Result<Resolution, ResolveError>>,
    /// Resolution's verdicts on the package's bundles (the upgrade notice).
    candidates: Vec<crate::resolve::BundleExplanation>,
    /// The installed bundle's OperatorCondition, when the cluster serves the kind.
    operator_condition: Option<Result<(), String>>,
    /// What the paused drift check answers.
    drift: Option<Result<Vec<String>, String>>,
    install: Option<Result<Installed, InstallFailure>>,
    /// What a second apply in the same reconcile (a remediation's rollback) answers.
    remedy: Option<Result<Installed, InstallFailure>>,
    /// What the cache of unchanged installs answers.
    unchanged: Option<Installed>,
    /// What reading readiness again answers.
    readiness: Option<Readiness>,
    /// The rendered objects.
    rendered: Vec<serde_json::Value>,
    deleted: Option<Result<UninstallReport, DeleteFailure>>,
    failing_for: Duration,
    /// Whether watches follow the readiness of what the extension installed.
    watched: bool,
    /// Watches that have listed follow what the extension installed.
    followed: bool,
    calls: RefCell<Vec<String>>,
    /// The version range of the last resolution asked for.
    resolved_range: RefCell<Option<String>>,
    fingerprint: RefCell<Option<String>>,
    applied: RefCell<Option<Apply>>,
    tally: RefCell<Option<Tally>>,
    installed_target: RefCell<Option<BundleIdentity>>,
    status: RefCell<Option<Observation>>,
    events: RefCell<Vec<Note>>,
    errors: RefCell<Vec<String>>,
    /// What the status reported installed before the reconcile, when not the record's
    /// installed bundle (`Some(None)`: nothing; a process stopped before writing it).
    reported: Option<Option<&'static str>>,
}

impl Fake {
    fn call(&self, what: &str) {
        self.calls.borrow_mut().push(what.to_string());
    }

    fn calls(&self) -> Vec<String> {
        self.calls.borrow().clone()
    }

    fn outcome(&self) -> Outcome {
        self.status
            .borrow()
            .as_ref()
            .expect("status")
            .outcome
            .clone()
    }

    fn events(&self) -> Vec<(bool, &'static str, String)> {
        let events = self.events.borrow();
        events
            .iter()
            .map(|n| (n.warning, n.reason, n.message.clone()))
            .collect()
    }
}

impl Executor for Fake {
    fn last_reported(&self) -> Option<crate::api::BundleMetadata> {
        let version = match self.reported {
            Some(reported) => reported?.to_string(),
            None => {
                let record = self.record.as_ref()?.as_ref().ok()?.as_ref()?;
                record.installed()?.bundle.version.clone()
            }
        };
        Some(crate::api::BundleMetadata {
            name: format!("p.v{version}"),
            version,
            release: None,
        })
    }

    fn installer(&self) -> Result<InstallerAccount, String> {
        self.installer.clone().unwrap_or_else(|| {
            Ok(InstallerAccount {
                namespace: "ns".into(),
                name: "sa".into(),
                source: crate::api::InstallerSource::ServiceAccount,
            })
        })
    }
    async fn add_finalizer(&self) -> Result<(), kube::Error> {
        self.call("add_finalizer");
        Ok(())
    }
    async fn validate(&self) -> Vec<String> {
        self.call("validate");
        self.validation.clone()
    }
    async fn load_record(&self) -> Result<Option<RevisionHistory>, String> {
        self.call("load_record");
        self.record.clone().unwrap_or(Ok(None))
    }
    async fn load_upstream(&self) -> Result<Option<UpstreamRelease>, String> {
        self.call("load_upstream");
        self.upstream.clone().unwrap_or(Ok(None))
    }
    async fn load_v0_backup(
        &self,
        migration: &plan::migration::Migration,
    ) -> Result<plan::migration::V0Takeover, String> {
        self.call(&format!("load_v0_backup {}", migration.backup));
        self.v0_backup
            .clone()
            .unwrap_or_else(|| Err("no backup".into()))
    }
    async fn operator_conditions_served(&self) -> bool {
        self.operator_condition.is_some()
    }
    async fn read_operator_condition(&self, name: &str) -> Result<(), String> {
        self.call(&format!("read_operator_condition {name}"));
        self.operator_condition.clone().unwrap_or(Ok(()))
    }
    async fn resolve(
        &self,
        request: &ResolveRequest,
    ) -> Result<crate::resolve::Explanation, kube::Error> {
        self.call(&format!(
            "resolve from {:?}",
            request.installed.as_ref().map(|i| i.version.as_str())
        ));
        *self.resolved_range.borrow_mut() = request.version_range.clone();
        Ok(crate::resolve::Explanation {
            result: self.resolution.clone().expect("resolution"),
            bundles: self.candidates.clone(),
        })
    }
    fn unchanged(&self, fingerprint: &str) -> Option<Installed> {
        self.call("unchanged?");
        *self.fingerprint.borrow_mut() = Some(fingerprint.to_string());
        self.unchanged.clone()
    }
    async fn read_readiness(
        &self,
        _account: &InstallerAccount,
        objects: &[ObjectRef],
    ) -> Option<Readiness> {
        self.call(&format!("read_readiness of {}", objects.len()));
        self.readiness.clone()
    }
    async fn render(&self, target: &BundleIdentity) -> Result<Rendered, InstallFailure> {
        *self.installed_target.borrow_mut() = Some(target.clone());
        let image = match &self.install {
            Some(Ok(installed)) => installed.image.clone(),
            _ => "registry/p@sha256:unused".to_string(),
        };
        Ok(Rendered {
            image,
            objects: self.rendered.clone(),
            ..Rendered::default()
        })
    }
    async fn apply(
        &self,
        step: &Apply,
        _rendered: &Rendered,
        _history: Option<&RevisionHistory>,
    ) -> Result<Installed, InstallFailure> {
        let version = &step.bundle.version;
        match (&step.adopt, &step.adopt_v0) {
            (Some(r), _) => self.call(&format!("install {version} adopting {}", r.secret)),
            (None, Some(v0)) => self.call(&format!(
                "install {version} taking over {}",
                v0.subscription
            )),
            (None, None) => self.call(&format!("install {version}")),
        }
        let again = self.applied.borrow_mut().replace(step.clone()).is_some();
        match &self.remedy {
            Some(remedy) if again => remedy.clone(),
            _ => self.install.clone().expect("install result"),
        }
    }
    async fn check_drift(
        &self,
        _account: &InstallerAccount,
        rendered: &Rendered,
    ) -> Result<Vec<String>, String> {
        self.call(&format!("check_drift of {}", rendered.objects.len()));
        self.drift.clone().expect("drift result")
    }
    fn stop_watches(&self) {
        self.call("stop_watches");
    }
    async fn delete(&self, deletion: &Deletion) -> Result<UninstallReport, DeleteFailure> {
        self.call(&format!(
            "delete {} object(s) as {}{}",
            deletion.objects.len(),
            deletion.account,
            if deletion.keep_crds {
                ", keeping CRDs"
            } else {
                ""
            }
        ));
        self.deleted.clone().expect("delete result")
    }
    async fn remove(&self) -> Result<(), kube::Error> {
        self.call("remove");
        Ok(())
    }
    async fn write_status(&self, observation: &Observation) -> Result<(), kube::Error> {
        self.call("write_status");
        *self.status.borrow_mut() = Some(observation.clone());
        Ok(())
    }
    async fn emit(&self, note: &Note) {
        self.events.borrow_mut().push(note.clone());
    }
}

/// What the failure bookkeeping says of the extension: failing for `fake.failing_for`,
/// a backoff of 4 s, one minute per minute.
fn standing(fake: &Fake) -> Standing {
    Standing {
        pending_for: fake.failing_for,
        backoff: Duration::from_secs(4),
        minute: Duration::from_secs(60),
        young: super::plan::ending::YOUNG_ROLLOUT,
        watched: fake.watched,
        followed: fake.followed,
    }
}

fn extension(spec: serde_json::Value) -> ClusterExtension {
    let mut base = json!({"namespace": "ns", "serviceAccount": {"name": "sa"},
        "source": {"sourceType": "Catalog", "catalog": {"packageName": "p"}}});
    if let (Some(base), Some(extra)) = (base.as_object_mut(), spec.as_object()) {
        base.extend(extra.clone());
    }
    serde_json::from_value(json!({
        "apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterExtension",
        "metadata": {"name": "e", "uid": "u1", "generation": 3,
                     "finalizers": [api::FINALIZER_EXTENSION]},
        "spec": base,
    }))
    .expect("extension")
}

fn ext() -> ClusterExtension {
    extension(json!({}))
}

fn identity(version: &str) -> BundleIdentity {
    BundleIdentity {
        package: "p".into(),
        name: format!("p.v{version}"),
        version: version.into(),
        release: None,
        image: format!("registry/p:{version}"),
    }
}

fn resolved(version: &str, deprecated_bundle: Option<&str>) -> Result<Resolution, ResolveError> {
    let deprecation = deprecated_bundle.map(|name| Deprecation {
        schema: "olm.deprecations".into(),
        package: "p".into(),
        entries: vec![DeprecationEntry {
            reference: PackageScopedReference {
                schema: "olm.bundle".into(),
                name: name.into(),
            },
            message: format!("{name} is deprecated"),
        }],
    });
    Ok(Resolution {
        bundle: ResolvedBundle {
            name: format!("p.v{version}"),
            package: "p".into(),
            version: BundleVersion::new(version, None).expect("version"),
            image: format!("registry/p:{version}"),
            catalog: "c".into(),
            priority: 0,
            deprecated: false,
        },
        deprecation,
        stats: Vec::new(),
    })
}

fn not_found(package_found: bool) -> Result<Resolution, ResolveError> {
    Err(ResolveError::NoUniqueBundle(Box::new(NoUniqueBundle {
        package: "p".into(),
        version_range: None,
        channels: Vec::new(),
        installed_version: None,
        catalogs: Vec::new(),
        stats: vec![CatalogStats {
            catalog_name: "c".into(),
            package_found,
            total_bundles: 0,
            matched_bundles: 0,
        }],
    })))
}

/// A record whose installed revision is `version`.
fn record(version: &str) -> Option<Result<Option<RevisionHistory>, String>> {
    let mut history = RevisionHistory::new(&Owner::new("e".to_string(), "u1".to_string()));
    let installed = identity(version).pulled(&format!("registry/p@sha256:{version}"));
    let revision = history.begin(installed, &[json!({"kind": "ConfigMap"})]);
    history.complete(revision);
    Some(Ok(Some(history)))
}

fn pulled(version: &str) -> Installed {
    Installed {
        image: format!("registry/p@sha256:{version}"),
        applied_changes: 0,
        warnings: Vec::new(),
        readiness: Readiness::Ready,
    }
}

/// Reconciles `ext` through `fake`; what the bookkeeping records lands in the fake (a
/// counted error in `errors`; forgetting the failures as the call `succeeded`, a rollout
/// keeping the clock running as `rolling_out`).
fn run(ext: &ClusterExtension, fake: &Fake) -> Action {
    let reconciled = futures::executor::block_on(reconcile(ext, fake, || standing(fake)));
    let tally = reconciled.tally;
    if let Some(reason) = tally.error {
        fake.errors.borrow_mut().push(reason.to_string());
    }
    match tally.count {
        plan::Count::Succeeded => fake.call("succeeded"),
        plan::Count::RollingOut => fake.call("rolling_out"),
        plan::Count::Failed | plan::Count::Keep => {}
    }
    *fake.tally.borrow_mut() = Some(tally);
    reconciled.result.expect("reconcile")
}

#[test]
fn first_install() {
    let fake = Fake {
        resolution: Some(resolved("1.0.0", None)),
        install: Some(Ok(pulled("1.0.0"))),
        ..Fake::default()
    };
    assert_eq!(run(&ext(), &fake), Action::await_change());
    assert_eq!(
        fake.calls(),
        [
            "validate",
            "load_record",
            "load_upstream",
            "resolve from None",
            "install 1.0.0",
            "write_status",
            "succeeded"
        ]
    );
    assert_eq!(fake.outcome(), Outcome::Succeeded);
    let status = fake.status.borrow().clone().expect("status");
    let installed = status.installed.expect("installed");
    assert_eq!(installed.image, "registry/p@sha256:1.0.0", "digest-pinned");
    assert_eq!(status.generation, Some(3));
    assert_eq!(
        fake.events(),
        [(
            false,
            "Installed",
            "installed bundle p.v1.0.0 version 1.0.0 as system:serviceaccount:ns:sa".to_string()
        )]
    );
    assert!(fake.errors.borrow().is_empty());
}

#[test]
fn upgrade_reports_the_deprecation_of_the_new_bundle() {
    let fake = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.1.0", Some("p.v1.1.0"))),
        install: Some(Ok(pulled("1.1.0"))),
        ..Fake::default()
    };
    run(&ext(), &fake);
    assert_eq!(fake.calls()[2], "resolve from Some(\"1.0.0\")");
    assert_eq!(fake.calls()[3], "install 1.1.0");
    assert_eq!(
        fake.events(),
        [(
            false,
            "Upgraded",
            "upgraded from 1.0.0 to 1.1.0 (p.v1.1.0) as system:serviceaccount:ns:sa".to_string()
        )]
    );
    let status = fake.status.borrow().clone().expect("status");
    let deprecation = status.deprecation.expect("deprecation");
    let bundle = deprecation
        .iter()
        .find(|c| c.type_ == "BundleDeprecated")
        .expect("BundleDeprecated");
    assert_eq!(
        bundle.status,
        ConditionStatus::True,
        "the installed 1.1.0 is deprecated"
    );
}

#[test]
fn reapply_of_the_installed_revision_reports_drift_only_when_something_changed() {
    for (changes, events) in [(0, 0), (2, 1)] {
        let fake = Fake {
            record: record("1.0.0"),
            resolution: Some(resolved("1.0.0", None)),
            install: Some(Ok(Installed {
                applied_changes: changes,
                ..pulled("1.0.0")
            })),
            ..Fake::default()
        };
        assert_eq!(run(&ext(), &fake), Action::await_change());
        assert_eq!(fake.events().len(), events);
        if changes > 0 {
            assert_eq!(
                fake.events()[0],
                (
                    false,
                    "DriftCorrected",
                    "restored 2 object(s) that differed from the installed revision".to_string()
                )
            );
        }
        assert_eq!(fake.outcome(), Outcome::Succeeded);
    }
}

/// The record tells of an install the status never reported (the process that made it
/// stopped before writing the status): the next reconcile's apply tells it, once.
#[test]
fn an_install_the_status_never_reported_gets_its_event_from_the_next_reconcile() {
    for (reported, event) in [
        (
            None,
            Some(("Installed", "installed bundle p.v1.0.0 version 1.0.0")),
        ),
        (
            Some("0.9.0"),
            Some(("Upgraded", "upgraded from 0.9.0 to 1.0.0 (p.v1.0.0)")),
        ),
        (Some("1.0.0"), None),
    ] {
        let fake = Fake {
            record: record("1.0.0"),
            resolution: Some(resolved("1.0.0", None)),
            install: Some(Ok(pulled("1.0.0"))),
            reported: Some(reported),
            ..Fake::default()
        };
        assert_eq!(run(&ext(), &fake), Action::await_change());
        let want: Vec<_> = event
            .map(|(reason, message)| {
                let by = " as system:serviceaccount:ns:sa";
                (false, reason, format!("{message}{by}"))
            })
            .into_iter()
            .collect();
        assert_eq!(fake.events(), want, "status reported {reported:?}");
        assert_eq!(fake.outcome(), Outcome::Succeeded);
    }
}

#[test]
fn crd_safety_warnings_become_warning_events() {
    let fake = Fake {
        resolution: Some(resolved("1.0.0", None)),
        install: Some(Ok(Installed {
            warnings: vec!["validating upgrade for CRD \"w\": …".into()],
            ..pulled("1.0.0")
        })),
        ..Fake::default()
    };
    run(&ext(), &fake);
    assert_eq!(fake.events().len(), 2);
    assert_eq!(fake.events()[1].1, "CRDUpgradeSafety");
    assert!(fake.events()[1].0);
}

#[test]
fn blocked_upgrade_keeps_the_installed_bundle_and_retries() {
    let fake = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Err(InstallFailure::Retry(
            "pre-authorization failed: …".into(),
        ))),
        ..Fake::default()
    };
    assert_eq!(run(&ext(), &fake), Action::requeue(Duration::from_secs(4)));
    let message = "error for resolved bundle \"p.v1.1.0\" with version \"1.1.0\": pre-authorization failed: …";
    assert_eq!(fake.outcome(), Outcome::Retrying(message.into()));
    let status = fake.status.borrow().clone().expect("status");
    assert_eq!(status.installed.expect("still installed").version, "1.0.0");
    assert_eq!(
        fake.events(),
        [(true, "InstallFailed", message.to_string())]
    );
    assert_eq!(*fake.errors.borrow(), ["InstallFailed"]);
    assert!(!fake.calls().contains(&"succeeded".to_string()));
}

#[test]
fn invalid_configuration_and_bad_image_are_terminal() {
    let invalid = Fake {
        resolution: Some(resolved("1.0.0", None)),
        install: Some(Err(InstallFailure::InvalidConfiguration(
            "invalid ClusterExtension configuration: x".into(),
        ))),
        ..Fake::default()
    };
    assert_eq!(run(&ext(), &invalid), Action::await_change());
    assert_eq!(
        invalid.outcome(),
        Outcome::Blocked {
            reason: REASON_INVALID_CONFIGURATION,
            message: "invalid ClusterExtension configuration: x".into()
        }
    );
    let bad_image = Fake {
        resolution: Some(resolved("1.0.0", None)),
        install: Some(Err(InstallFailure::Blocked("invalid reference".into()))),
        ..Fake::default()
    };
    assert_eq!(run(&ext(), &bad_image), Action::await_change());
    assert_eq!(
        bad_image.outcome(),
        Outcome::Blocked {
            reason: REASON_BLOCKED,
            message:
                "error for resolved bundle \"p.v1.0.0\" with version \"1.0.0\": invalid reference"
                    .into()
        }
    );
    assert_eq!(*bad_image.errors.borrow(), [REASON_BLOCKED]);
}

#[test]
fn deleting_uninstalls_and_nothing_else() {
    let mut e = ext();
    e.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::now(),
    ));
    let fake = Fake {
        deleted: Some(Ok(UninstallReport::default())),
        ..Fake::default()
    };
    assert_eq!(run(&e, &fake), Action::await_change());
    assert_eq!(
        fake.calls(),
        [
            "stop_watches",
            "load_record",
            "delete 0 object(s) as system:serviceaccount:ns:sa",
            "remove",
            "succeeded"
        ]
    );
}

#[test]
fn a_new_extension_gets_its_finalizer_first() {
    let mut e = ext();
    e.metadata.finalizers = None;
    let fake = Fake::default();
    // Nothing else, and no requeue: the update's watch event triggers the next reconcile.
    assert_eq!(run(&e, &fake), Action::await_change());
    assert_eq!(fake.calls(), ["add_finalizer"]);
}

#[test]
fn missing_installer_account_stops_before_the_record() {
    let fake = Fake {
        validation: vec!["service account \"sa\" not found in namespace \"ns\": unable to authenticate with the Kubernetes cluster.".into()],
        ..Fake::default()
    };
    assert_eq!(run(&ext(), &fake), Action::requeue(Duration::from_secs(4)));
    assert_eq!(fake.calls(), ["validate", "write_status"]);
    let Outcome::ValidationFailed(message) = fake.outcome() else {
        panic!("{:?}", fake.outcome())
    };
    assert!(message.starts_with(
        "operation cannot proceed due to the following validation error(s): service account \"sa\""
    ));
    assert_eq!(*fake.errors.borrow(), ["ValidationFailed"]);
}

#[test]
fn unreadable_record_retries() {
    let fake = Fake {
        record: Some(Err("connection refused".into())),
        ..Fake::default()
    };
    run(&ext(), &fake);
    assert_eq!(
        fake.outcome(),
        Outcome::Retrying("retrying to get installed bundle: connection refused".into())
    );
    assert_eq!(*fake.errors.borrow(), ["RevisionRecordUnavailable"]);
}

#[test]
fn resolution_failure_retries_with_an_event() {
    let fake = Fake {
        resolution: Some(not_found(true)),
        ..Fake::default()
    };
    assert_eq!(run(&ext(), &fake), Action::requeue(Duration::from_secs(4)));
    assert_eq!(
        fake.outcome(),
        Outcome::Retrying("no bundles found for package \"p\"".into())
    );
    assert_eq!(fake.events()[0].1, "ResolutionFailed");
    assert!(!fake.calls().iter().any(|c| c.starts_with("install")));
    let status = fake.status.borrow().clone().expect("status");
    assert!(
        status.deprecation.is_some(),
        "deprecation conditions, unknown"
    );
}

#[test]
fn catalog_gone_maintains_the_installed_bundle() {
    let fake = Fake {
        record: record("1.0.0"),
        resolution: Some(not_found(false)),
        install: Some(Ok(pulled("1.0.0"))),
        ..Fake::default()
    };
    assert_eq!(run(&ext(), &fake), Action::await_change());
    let target = fake.installed_target.borrow().clone().expect("target");
    assert_eq!(
        target.image, "registry/p@sha256:1.0.0",
        "the recorded image"
    );
    let Outcome::Maintained(why) = fake.outcome() else {
        panic!("{:?}", fake.outcome())
    };
    assert!(why.starts_with("no ClusterCatalog provides package \"p\" any more"));

    // …but not when the spec asks for another version, nor when nothing is installed.
    let pinned = extension(json!({"source": {"sourceType": "Catalog",
        "catalog": {"packageName": "p", "version": "2.0.0"}}}));
    let fake = Fake {
        record: record("1.0.0"),
        resolution: Some(not_found(false)),
        ..Fake::default()
    };
    run(&pinned, &fake);
    assert!(matches!(fake.outcome(), Outcome::Retrying(_)));
    let fake = Fake {
        resolution: Some(not_found(false)),
        ..Fake::default()
    };
    run(&ext(), &fake);
    assert!(matches!(fake.outcome(), Outcome::Retrying(_)));
}

#[test]
fn missing_catalog_source_is_blocked_without_resolving() {
    let mut e = ext();
    e.spec.source.catalog = None;
    let fake = Fake::default();
    assert_eq!(run(&e, &fake), Action::await_change());
    assert!(!fake.calls().iter().any(|c| c.starts_with("resolve")));
    assert!(fake.outcome().is_terminal());
}

#[test]
fn progress_deadline_turns_retrying_into_deadline_exceeded() {
    let e = extension(json!({"progressDeadlineMinutes": 10}));
    let failing = |failing_for: u64| Fake {
        resolution: Some(resolved("1.0.0", None)),
        install: Some(Err(InstallFailure::Retry("pull failed".into()))),
        failing_for: Duration::from_secs(failing_for),
        ..Fake::default()
    };
    // Before the deadline: the retry comes no later than the deadline.
    let early = failing(599);
    assert_eq!(
        run(&e, &early),
        Action::requeue(Duration::from_secs(1) + Duration::from_millis(100))
    );
    assert!(matches!(early.outcome(), Outcome::Retrying(_)));
    let late = failing(600);
    run(&e, &late);
    let Outcome::DeadlineExceeded { minutes, last } = late.outcome() else {
        panic!("{:?}", late.outcome())
    };
    assert_eq!(minutes, 10);
    assert!(last.ends_with("pull failed"));
    // Terminal outcomes are never turned into a deadline.
    assert_eq!(
        plan::deadline(
            Outcome::Blocked {
                reason: REASON_BLOCKED,
                message: "x".into()
            },
            Duration::from_secs(10_000),
            Some(10),
            Duration::from_secs(60)
        ),
        (
            Outcome::Blocked {
                reason: REASON_BLOCKED,
                message: "x".into()
            },
            None
        )
    );
}

#[test]
fn resolution_runs_once_per_reconcile() {
    let fake = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Ok(pulled("1.1.0"))),
        ..Fake::default()
    };
    run(&ext(), &fake);
    let resolves = fake
        .calls()
        .iter()
        .filter(|c| c.starts_with("resolve"))
        .count();
    assert_eq!(resolves, 1);
}

#[test]
fn without_an_installer_nothing_is_resolved_and_the_condition_says_what_to_set() {
    let fake = Fake {
        installer: Some(Err("spec.serviceAccount is not set …".into())),
        record: record("1.0.0"),
        ..Fake::default()
    };
    assert_eq!(run(&ext(), &fake), Action::await_change());
    assert_eq!(fake.calls(), ["load_record", "write_status"]);
    let status = fake.status.borrow().clone().expect("status");
    assert_eq!(
        status
            .installed
            .expect("what is installed stays reported")
            .version,
        "1.0.0"
    );
    assert_eq!(
        fake.outcome(),
        Outcome::Blocked {
            reason: REASON_BLOCKED,
            message: "spec.serviceAccount is not set …".into()
        }
    );
    assert_eq!(*fake.errors.borrow(), ["InstallerUnset"]);
}

#[test]
fn the_default_installer_is_named_in_the_event() {
    let fake = Fake {
        installer: Some(Ok(InstallerAccount {
            namespace: "olmv1-system".into(),
            name: "installer".into(),
            source: crate::api::InstallerSource::DefaultInstallerServiceAccount,
        })),
        resolution: Some(resolved("1.0.0", None)),
        install: Some(Ok(pulled("1.0.0"))),
        ..Fake::default()
    };
    run(&ext(), &fake);
    assert!(
        fake.events()[0]
            .2
            .ends_with(" as system:serviceaccount:olmv1-system:installer"),
        "{:?}",
        fake.events()
    );
}

/// `e` with a Progressing condition of `reason` (the status before the reconcile).
fn with_progressing(mut e: ClusterExtension, reason: &str) -> ClusterExtension {
    e.status = Some(
        serde_json::from_value(json!({"conditions": [{
            "type": "Progressing", "status": "True", "reason": reason, "message": "m",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}))
        .expect("status"),
    );
    e
}

fn not_ready_install(version: &str) -> Installed {
    Installed {
        readiness: Readiness::NotReady(vec![
            "deployment/foo 0/1 available: ImagePullBackOff".into(),
        ]),
        ..pulled(version)
    }
}

#[test]
fn applied_but_not_ready_is_rolling_out_and_checked_again() {
    let fake = Fake {
        resolution: Some(resolved("1.0.0", None)),
        install: Some(Ok(not_ready_install("1.0.0"))),
        ..Fake::default()
    };
    assert_eq!(run(&ext(), &fake), Action::requeue(Duration::from_secs(15)));
    assert_eq!(
        fake.outcome(),
        Outcome::RollingOut {
            version: "1.0.0".into(),
            waiting: "deployment/foo 0/1 available: ImagePullBackOff".into()
        }
    );
    let status = fake.status.borrow().clone().expect("status");
    assert!(
        status.installed.is_some(),
        "Installed keeps meaning applied"
    );
    let calls = fake.calls();
    assert!(calls.contains(&"rolling_out".to_string()), "{calls:?}");
    assert!(
        !calls.contains(&"succeeded".to_string()),
        "the clock keeps running"
    );
    assert_eq!(
        fake.events(),
        [(
            false,
            "Installed",
            "installed bundle p.v1.0.0 version 1.0.0 as system:serviceaccount:ns:sa".to_string()
        )],
        "no NotReady Event for a first rollout"
    );
}

#[test]
fn a_rollout_past_the_deadline_is_deadline_exceeded_with_an_event() {
    let e = extension(json!({"progressDeadlineMinutes": 10}));
    let rolling = |failing_for: u64, e: &ClusterExtension| {
        let fake = Fake {
            record: record("1.0.0"),
            resolution: Some(resolved("1.0.0", None)),
            install: Some(Ok(not_ready_install("1.0.0"))),
            failing_for: Duration::from_secs(failing_for),
            ..Fake::default()
        };
        let action = run(e, &fake);
        (fake, action)
    };
    let (early, action) = rolling(595, &e);
    assert_eq!(
        action,
        Action::requeue(Duration::from_secs(5) + Duration::from_millis(100)),
        "checked again no later than the deadline"
    );
    assert!(matches!(early.outcome(), Outcome::RollingOut { .. }));
    let (late, action) = rolling(600, &e);
    assert_eq!(
        action,
        Action::requeue(Duration::from_secs(120)),
        "a long rollout is checked less often"
    );
    assert_eq!(
        late.outcome(),
        Outcome::DeadlineExceeded {
            minutes: 10,
            last: "Revision 1.0.0 is rolling out: deployment/foo 0/1 available: ImagePullBackOff"
                .into()
        }
    );
    let message = "Revision has not rolled out for 10 minute(s). Last status: Revision 1.0.0 is rolling out: deployment/foo 0/1 available: ImagePullBackOff";
    assert_eq!(
        late.events(),
        [(true, "ProgressDeadlineExceeded", message.to_string())]
    );
    // Reported once: not again while it stays exceeded.
    let (again, _) = rolling(700, &with_progressing(e, "ProgressDeadlineExceeded"));
    assert!(again.events().is_empty(), "{:?}", again.events());
}

#[test]
fn rollout_recheck_backs_off_to_two_minutes() {
    let s = Duration::from_secs;
    assert_eq!(rollout_recheck(s(0)), s(15));
    assert_eq!(rollout_recheck(s(100)), s(25));
    assert_eq!(rollout_recheck(s(3600)), s(120));
}

#[test]
fn a_ready_revision_that_becomes_unavailable_says_so_and_a_completed_rollout_too() {
    let broken = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.0.0", None)),
        install: Some(Ok(not_ready_install("1.0.0"))),
        ..Fake::default()
    };
    run(&with_progressing(ext(), "Succeeded"), &broken);
    assert!(matches!(broken.outcome(), Outcome::RollingOut { .. }));
    assert_eq!(
        broken.events(),
        [(
            true,
            "NotReady",
            "revision 1.0.0 is no longer ready: deployment/foo 0/1 available: ImagePullBackOff"
                .to_string()
        )]
    );
    let healed = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.0.0", None)),
        install: Some(Ok(pulled("1.0.0"))),
        ..Fake::default()
    };
    assert_eq!(
        run(&with_progressing(ext(), "RollingOut"), &healed),
        Action::await_change()
    );
    assert_eq!(healed.outcome(), Outcome::Succeeded);
    assert!(healed.calls().contains(&"succeeded".to_string()));
    assert_eq!(
        healed.events(),
        [(
            false,
            "RolledOut",
            "revision 1.0.0 has rolled out".to_string()
        )]
    );
    // An upgrade rolling out is expected: no NotReady Event.
    let upgrade = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved("1.1.0", None)),
        install: Some(Ok(not_ready_install("1.1.0"))),
        ..Fake::default()
    };
    run(&with_progressing(ext(), "Succeeded"), &upgrade);
    assert_eq!(
        upgrade.events().iter().map(|e| e.1).collect::<Vec<_>>(),
        ["Upgraded"]
    );
}

/// Upstream OLM v1's release of bundle `version` (status deployed).
fn upstream(version: &str) -> Option<Result<Option<UpstreamRelease>, String>> {
    Some(Ok(Some(UpstreamRelease {
        secret: "sh.helm.release.v1.e.v2".into(),
        storage: crate::migrate::upstream_helm::Storage::Chunked,
        name: "e".into(),
        version: 2,
        namespace: "ns".into(),
        status: "deployed".into(),
        bundle: identity(version),
        objects: Vec::new(),
    })))
}

#[test]
fn an_upstream_installation_of_the_resolved_bundle_is_adopted() {
    let fake = Fake {
        upstream: upstream("1.0.0"),
        resolution: Some(resolved("1.0.0", None)),
        install: Some(Ok(pulled("1.0.0"))),
        ..Fake::default()
    };
    assert_eq!(run(&ext(), &fake), Action::await_change());
    assert_eq!(
        fake.calls(),
        [
            "validate",
            "load_record",
            "load_upstream",
            "resolve from Some(\"1.0.0\")",
            "install 1.0.0 adopting sh.helm.release.v1.e.v2",
            "write_status",
            "succeeded"
        ]
    );
    let events = fake.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!((events[0].0, events[0].1), (false, "Adopted"));
    assert!(
        events[0]
            .2
            .contains("Helm release Secret sh.helm.release.v1.e.v2")
    );
    assert!(events[0].2.ends_with("as system:serviceaccount:ns:sa"));
    let status = fake.status.borrow().clone().expect("status");
    let installer = status.installer.expect("installer recorded in status");
    assert_eq!(installer.username, "system:serviceaccount:ns:sa");
    assert_eq!(
        installer.source,
        crate::api::InstallerSource::ServiceAccount
    );
}

#[test]
fn an_upstream_installation_of_another_version_is_reported_and_untouched() {
    let fake = Fake {
        upstream: upstream("1.0.0"),
        resolution: Some(resolved("1.1.0", None)),
        ..Fake::default()
    };
    run(&ext(), &fake);
    assert!(!fake.calls().iter().any(|c| c.starts_with("install")));
    let Outcome::Retrying(message) = fake.outcome() else {
        panic!("{:?}", fake.outcome());
    };
    assert!(message.starts_with("not adopting upstream OLM v1's installation (Helm release Secret sh.helm.release.v1.e.v2, bundle p.v1.0.0 version 1.0.0): "), "{message}");
    assert!(message.ends_with("; nothing was changed"), "{message}");
    assert_eq!(fake.events()[0].1, "AdoptionRefused");
    // Upstream's installation is still what is installed.
    let status = fake.status.borrow().clone().expect("status");
    assert_eq!(
        status.installed.map(|b| b.version),
        Some("1.0.0".to_string())
    );
    assert_eq!(*fake.errors.borrow(), ["AdoptionRefused"]);
}

#[test]
fn an_unreadable_upstream_release_stops_before_resolution() {
    let fake = Fake {
        upstream: Some(Err("release Secret s: no data.release".into())),
        ..Fake::default()
    };
    run(&ext(), &fake);
    assert_eq!(
        fake.calls(),
        ["validate", "load_record", "load_upstream", "write_status"]
    );
    let Outcome::Retrying(message) = fake.outcome() else {
        panic!("{:?}", fake.outcome());
    };
    assert!(
        message.contains("reading upstream OLM v1's installation: release Secret s"),
        "{message}"
    );
}

#[test]
fn the_recorded_installer_stays_in_status() {
    let mut history = match record("1.0.0") {
        Some(Ok(Some(h))) => h,
        _ => unreachable!(),
    };
    let n = history.revisions[0].number;
    history.set_installer(
        n,
        Some(crate::api::InstallerStatus {
            username: "system:serviceaccount:olmv1-system:installer".into(),
            source: crate::api::InstallerSource::DefaultInstallerServiceAccount,
        }),
    );
    let fake = Fake {
        record: Some(Ok(Some(history))),
        resolution: Some(not_found(false)),
        ..Fake::default()
    };
    run(
        &extension(json!({"source": {"sourceType": "Catalog"}})),
        &fake,
    );
    let status = fake.status.borrow().clone().expect("status");
    assert_eq!(
        status.installer.map(|i| i.source),
        Some(crate::api::InstallerSource::DefaultInstallerServiceAccount)
    );
}

#[test]
fn without_an_installer_upstreams_installation_is_still_shown_installed() {
    let fake = Fake {
        installer: Some(Err("spec.serviceAccount is not set".into())),
        upstream: upstream("1.0.0"),
        ..Fake::default()
    };
    run(&ext(), &fake);
    assert_eq!(
        fake.calls(),
        ["load_record", "load_upstream", "write_status"]
    );
    let status = fake.status.borrow().clone().expect("status");
    assert_eq!(
        status.installed.map(|b| b.version),
        Some("1.0.0".to_string())
    );
    assert!(matches!(status.outcome, Outcome::Blocked { .. }));
}

#[path = "uninstall_tests.rs"]
mod uninstall;

/// Resolution to bundle `version`, its image pinned by digest (as the recorded one).
fn resolved_by_digest(version: &str) -> Result<Resolution, ResolveError> {
    let mut resolution = resolved(version, None).expect("resolution");
    resolution.bundle.image = format!("registry/p@sha256:{version}");
    Ok(resolution)
}

#[test]
fn an_unchanged_undrifted_install_is_skipped() {
    let fake = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved_by_digest("1.0.0")),
        unchanged: Some(pulled("1.0.0")),
        ..Fake::default()
    };
    assert_eq!(run(&ext(), &fake), Action::await_change());
    assert_eq!(
        fake.calls(),
        [
            "validate",
            "load_record",
            "resolve from Some(\"1.0.0\")",
            "unchanged?",
            "write_status",
            "succeeded"
        ],
        "nothing pulled, rendered or applied"
    );
    assert_eq!(
        fake.fingerprint.borrow().as_deref(),
        Some("u1|3|ns/sa|p|p.v1.0.0|1.0.0|registry/p@sha256:1.0.0")
    );
    assert_eq!(fake.outcome(), Outcome::Succeeded);
    assert!(fake.events().is_empty(), "{:?}", fake.events());
}

#[test]
fn an_unchanged_install_rolling_out_only_reads_readiness_again() {
    let rolling = |readiness: Option<Readiness>| {
        let fake = Fake {
            record: record("1.0.0"),
            resolution: Some(resolved_by_digest("1.0.0")),
            unchanged: Some(not_ready_install("1.0.0")),
            readiness,
            ..Fake::default()
        };
        run(&with_progressing(ext(), "RollingOut"), &fake);
        fake
    };
    let ready = rolling(Some(Readiness::Ready));
    let calls = ready.calls();
    assert!(
        calls.iter().any(|c| c.starts_with("read_readiness")),
        "{calls:?}"
    );
    assert!(!calls.iter().any(|c| c.starts_with("install")), "{calls:?}");
    assert_eq!(ready.outcome(), Outcome::Succeeded);
    assert_eq!(ready.events()[0].1, "RolledOut");
    // Unreadable: the last readiness stands.
    let unreadable = rolling(None);
    assert!(matches!(unreadable.outcome(), Outcome::RollingOut { .. }));
    assert_eq!(
        unreadable.calls().last().map(String::as_str),
        Some("rolling_out")
    );
}

#[test]
fn a_watched_rollout_waits_for_events_not_polling() {
    let rolling = |spec: serde_json::Value, failing_for: u64, unchanged: bool| {
        let fake = Fake {
            record: record("1.0.0"),
            resolution: Some(resolved_by_digest("1.0.0")),
            unchanged: unchanged.then(|| not_ready_install("1.0.0")),
            install: Some(Ok(not_ready_install("1.0.0"))),
            readiness: Some(not_ready_install("1.0.0").readiness),
            failing_for: Duration::from_secs(failing_for),
            watched: true,
            ..Fake::default()
        };
        let action = run(&with_progressing(extension(spec), "RollingOut"), &fake);
        (fake, action)
    };
    // Readiness read again while watches follow it: only the safety re-check.
    let (fake, action) = rolling(json!({}), 90, true);
    assert_eq!(action, Action::requeue(SAFETY_RECHECK));
    // In its first minute, pod waiting reasons (not watched) are picked up.
    let (_, action) = rolling(json!({}), 30, true);
    assert_eq!(action, Action::requeue(Duration::from_secs(15)));
    assert_eq!(SAFETY_RECHECK, Duration::from_secs(600));
    assert!(matches!(fake.outcome(), Outcome::RollingOut { .. }));
    assert!(fake.calls().contains(&"rolling_out".to_string()));
    // A deadline comes first: checked again when it passes, from the clock alone.
    let (_, action) = rolling(json!({"progressDeadlineMinutes": 10}), 595, true);
    assert_eq!(
        action,
        Action::requeue(Duration::from_secs(5) + Duration::from_millis(100))
    );
    let (late, action) = rolling(json!({"progressDeadlineMinutes": 10}), 600, true);
    assert!(matches!(late.outcome(), Outcome::DeadlineExceeded { .. }));
    assert_eq!(action, Action::requeue(SAFETY_RECHECK));
    // Applied in this reconcile: its watches may not have seen the new objects yet.
    let (applied, action) = rolling(json!({}), 0, false);
    assert!(applied.calls().contains(&"install 1.0.0".to_string()));
    assert_eq!(action, Action::requeue(Duration::from_secs(15)));
}

#[test]
fn a_changed_install_is_rendered_and_applied_with_preflights() {
    let fake = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved_by_digest("1.0.0")),
        install: Some(Ok(pulled("1.0.0"))),
        rendered: vec![json!({"kind": "ConfigMap", "data": {"changed": "yes"}})],
        ..Fake::default()
    };
    run(&ext(), &fake);
    assert!(fake.calls().contains(&"unchanged?".to_string()));
    assert!(fake.calls().contains(&"install 1.0.0".to_string()));
    let step = fake.applied.borrow().clone().expect("applied");
    assert!(step.preflight, "other content than the installed revision");
    assert!(!step.refuse_helm_managed, "not a first install");
    assert_eq!(step.bundle.image, "registry/p@sha256:1.0.0");
    assert_eq!(
        step.fingerprint.as_deref(),
        Some("u1|3|ns/sa|p|p.v1.0.0|1.0.0|registry/p@sha256:1.0.0"),
        "kept with the result while nothing drifts"
    );
}

#[test]
fn the_installed_revision_again_skips_the_preflights() {
    let fake = Fake {
        record: record("1.0.0"),
        resolution: Some(resolved_by_digest("1.0.0")),
        install: Some(Ok(pulled("1.0.0"))),
        rendered: vec![json!({"kind": "ConfigMap"})],
        ..Fake::default()
    };
    run(&ext(), &fake);
    let step = fake.applied.borrow().clone().expect("applied");
    assert!(!step.preflight, "checked when it was installed");
}

#[test]
fn a_first_install_refuses_helm_managed_objects_and_runs_the_preflights() {
    let fake = Fake {
        resolution: Some(resolved("1.0.0", None)),
        install: Some(Ok(pulled("1.0.0"))),
        ..Fake::default()
    };
    run(
        &extension(
            json!({"install": {"preflight": {"crdUpgradeSafety": {"enforcement": "None"}}}}),
        ),
        &fake,
    );
    let step = fake.applied.borrow().clone().expect("applied");
    assert!(step.preflight && step.refuse_helm_managed);
    assert_eq!(
        step.enforcement,
        crate::preflight::crd_safety::Enforcement::None
    );
    assert_eq!(step.fingerprint, None, "nothing installed before, a tag");
}

#[test]
fn upstream_objects_that_differ_from_the_rendered_ones_are_not_adopted() {
    let fake = Fake {
        upstream: upstream("1.0.0"),
        resolution: Some(resolved("1.0.0", None)),
        install: Some(Ok(pulled("1.0.0"))),
        rendered: vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "extra", "namespace": "ns"}})],
        ..Fake::default()
    };
    run(&ext(), &fake);
    assert!(
        !fake.calls().iter().any(|c| c.starts_with("install")),
        "nothing applied"
    );
    let Outcome::Retrying(message) = fake.outcome() else {
        panic!("{:?}", fake.outcome());
    };
    assert!(
        message.starts_with("not adopting upstream OLM v1's installation"),
        "{message}"
    );
    assert_eq!(fake.events()[0].1, "AdoptionRefused");
    assert_eq!(*fake.errors.borrow(), ["AdoptionRefused"]);
}

#[path = "control_tests.rs"]
mod control;

#[path = "rollback_tests.rs"]
mod rollback;

#[path = "migration_tests.rs"]
mod migration;

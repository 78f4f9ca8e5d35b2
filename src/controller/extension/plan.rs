//! The ClusterExtension reconcile as pure decisions (docs/api-and-status.md §3).
//!
//! [`decide`] looks at what one reconcile knows so far ([`Facts`]: the spec, whether the
//! object is being deleted, the validation result, the revision record, the resolution)
//! and names the next step: a fact to look up, the bundle to install, or the status to
//! report. [`after_install`] turns the result of an install into the report
//! (`RollingOut` while what it installed is not ready, [`super::rollout`], with Events on
//! rollout transitions); [`classify`] maps an install failure to its condition;
//! [`deadline`] applies `progressDeadlineMinutes` to failures and rollouts. The I/O for each step is done by the
//! [`super::flow::Executor`]; nothing here waits on anything.

use super::installer::InstallerAccount;
use super::rollout::Readiness;
use super::status::{
    Observation, Outcome, deadline_exceeded, for_resolved_bundle, validation_failed,
};
use crate::api::conditions::{
    REASON_BLOCKED, REASON_INVALID_CONFIGURATION, REASON_PROGRESS_DEADLINE_EXCEEDED,
    REASON_ROLLING_OUT, REASON_SUCCEEDED,
};
use crate::api::{BundleIdentity, ClusterExtensionSpec, InstallerStatus, UpgradeConstraintPolicy};
use crate::apply::RevisionHistory;
use crate::migrate::upstream_helm::{self as helm_release, UpstreamRelease};
use crate::resolve::deprecation::{CatalogData, DeprecationCondition, deprecation_conditions};
use crate::resolve::{Resolution, ResolveError, ResolveRequest, UpgradePolicy};
use std::time::Duration;

/// What one reconcile knows so far; `None`: not looked up yet.
#[derive(Debug)]
pub struct Facts {
    pub generation: Option<i64>,
    pub deleting: bool,
    pub has_finalizer: bool,
    /// Who installs ([`super::installer::choose`]), or why nobody may.
    pub installer: Result<InstallerAccount, String>,
    /// What the API server cannot check (the namespace and installer account exist);
    /// empty when everything is there.
    pub validation: Option<Vec<String>>,
    /// The revision record, or why it could not be read.
    pub record: Option<Result<Option<RevisionHistory>, String>>,
    /// Without a record: upstream OLM v1's installation of the extension (its latest
    /// Helm release), or why it could not be read.
    pub upstream: Option<Result<Option<UpstreamRelease>, String>>,
    pub resolution: Option<Result<Resolution, ResolveError>>,
    /// The reason of the Progressing condition before this reconcile (Events on
    /// rollout transitions).
    pub progressing: Option<String>,
}

impl Facts {
    /// What a reconcile of an object at `generation` knows before any lookup.
    pub fn new(
        generation: Option<i64>,
        deleting: bool,
        has_finalizer: bool,
        installer: Result<InstallerAccount, String>,
    ) -> Facts {
        Facts {
            generation,
            deleting,
            has_finalizer,
            installer,
            validation: None,
            record: None,
            upstream: None,
            resolution: None,
            progressing: None,
        }
    }

    /// The revision record, when it was read.
    pub fn history(&self) -> Option<&RevisionHistory> {
        self.record
            .as_ref()
            .and_then(|r| r.as_ref().ok())
            .and_then(Option::as_ref)
    }

    /// The installed bundle: from the revision record, else from the upstream release
    /// being adopted.
    pub fn installed(&self) -> Option<&BundleIdentity> {
        match self.history() {
            Some(h) => h.installed().map(|r| &r.bundle),
            None => self.adopting().map(|r| &r.bundle),
        }
    }

    /// The upstream OLM v1 release to adopt: only when olmv1 has no record of its own.
    pub fn adopting(&self) -> Option<&UpstreamRelease> {
        if self.history().is_some() {
            return None;
        }
        self.upstream
            .as_ref()
            .and_then(|u| u.as_ref().ok())
            .and_then(Option::as_ref)
    }

    /// Who applied the installed revision, from the record.
    fn recorded_installer(&self, installed: Option<&BundleIdentity>) -> Option<InstallerStatus> {
        let revision = self.history()?.installed()?;
        (Some(&revision.bundle) == installed)
            .then(|| revision.installer.clone())
            .flatten()
    }
}

/// The next step of a reconcile.
#[derive(Debug)]
pub enum Plan {
    /// Add the finalizer and stop (the update triggers the next reconcile).
    AddFinalizer,
    /// The object is being deleted: uninstall.
    Uninstall,
    /// Look up the namespace and installer account.
    Validate,
    /// Read the revision record.
    LoadRecord,
    /// No record: look for upstream OLM v1's installation (its Helm release).
    LoadUpstream,
    /// Resolve the package.
    Resolve(ResolveRequest),
    /// Pull, render, preflight and apply this bundle.
    Install(Install),
    /// Nothing more to do: report.
    Report(Box<Report>),
}

/// The bundle a reconcile installs.
#[derive(Clone, Debug, PartialEq)]
pub struct Install {
    pub target: BundleIdentity,
    /// Set when no catalog provides the package any more and the installed bundle is
    /// maintained; says so.
    pub maintained: Option<String>,
    /// Upstream OLM v1's release whose objects this install adopts (in place) when they
    /// are exactly the objects olmv1 renders.
    pub adopt: Option<UpstreamRelease>,
}

/// How a reconcile ends.
#[derive(Clone, Debug)]
pub struct Report {
    pub observation: Observation,
    /// Events to publish, in order.
    pub events: Vec<Note>,
    /// The error reason counted in the metrics, if the reconcile failed.
    pub error: Option<&'static str>,
    pub next: Next,
}

/// One Event on the ClusterExtension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub warning: bool,
    pub reason: &'static str,
    pub action: &'static str,
    pub message: String,
}

/// What happens after the status is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The desired state is reached: forget earlier failures, wait for a change.
    Done,
    /// Wait for a change (the spec, a catalog, drift).
    AwaitChange,
    /// Retry with backoff.
    Retry,
    /// A failure after progress began: `Retrying` turns into `ProgressDeadlineExceeded`
    /// once it lasted longer than `progressDeadlineMinutes`; retried with backoff
    /// unless terminal (`Blocked`).
    Failed,
    /// Applied, but not ready yet: `RollingOut` turns into `ProgressDeadlineExceeded`
    /// once it lasted longer than `progressDeadlineMinutes`; checked again after a
    /// modest interval (readiness changes of the installed objects also trigger).
    RollingOut,
}

/// How an install failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstallFailure {
    /// Transient (pull, preflight, apply): retried.
    Retry(String),
    /// `spec.config` does not fit the bundle: terminal until the spec changes.
    InvalidConfiguration(String),
    /// Retrying cannot fix it (e.g. an unparsable image reference).
    Blocked(String),
    /// Upstream OLM v1's installation differs from what olmv1 would install; nothing
    /// was touched. Retried (the catalog or the spec may change).
    AdoptionRefused(String),
}

/// What a successful install did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Installed {
    /// The digest-pinned bundle image.
    pub image: String,
    /// Objects whose live state differed and were applied again.
    pub applied_changes: usize,
    /// CRD upgrade-safety findings that did not block (`enforcement: None`).
    pub warnings: Vec<String>,
    /// Whether what the revision installed is ready ([`super::rollout`]).
    pub readiness: Readiness,
}

/// The next step, given what is known.
pub fn decide(spec: &ClusterExtensionSpec, facts: &Facts) -> Plan {
    if facts.deleting {
        return Plan::Uninstall;
    }
    if !facts.has_finalizer {
        return Plan::AddFinalizer;
    }
    if let Err(message) = &facts.installer {
        // Nobody may act for the extension; the status still shows what is installed
        // (by olmv1, or by upstream OLM v1 before the switch).
        if facts.record.is_none() {
            return Plan::LoadRecord;
        }
        if matches!(facts.record, Some(Ok(None))) && facts.upstream.is_none() {
            return Plan::LoadUpstream;
        }
        return Plan::Report(Box::new(Report {
            observation: observe(
                facts,
                facts.installed().cloned(),
                Outcome::Blocked {
                    reason: REASON_BLOCKED,
                    message: message.clone(),
                },
                None,
            ),
            events: Vec::new(),
            error: Some("InstallerUnset"),
            next: Next::AwaitChange,
        }));
    }
    let Some(errors) = &facts.validation else {
        return Plan::Validate;
    };
    if !errors.is_empty() {
        let outcome = Outcome::ValidationFailed(validation_failed(errors));
        return Plan::Report(Box::new(report(
            facts,
            None,
            outcome,
            None,
            "ValidationFailed",
        )));
    }
    let Some(record) = &facts.record else {
        return Plan::LoadRecord;
    };
    if let Err(e) = record {
        let outcome = Outcome::Retrying(format!("retrying to get installed bundle: {e}"));
        let failed = report(facts, None, outcome, None, "RevisionRecordUnavailable");
        return Plan::Report(Box::new(failed));
    }
    if facts.history().is_none() {
        match &facts.upstream {
            None => return Plan::LoadUpstream,
            Some(Err(e)) => {
                let message = format!(
                    "retrying to get installed bundle: reading upstream OLM v1's installation: {e}"
                );
                let mut failed = report(
                    facts,
                    None,
                    Outcome::Retrying(message.clone()),
                    None,
                    "UpstreamReleaseUnreadable",
                );
                failed
                    .events
                    .push(warning("AdoptionRefused", "Adopt", message));
                return Plan::Report(Box::new(failed));
            }
            Some(Ok(_)) => {}
        }
    }
    let installed = facts.installed();
    if spec.source.catalog.is_none() {
        return Plan::Report(Box::new(Report {
            observation: observe(facts, installed.cloned(), blocked_without_catalog(), None),
            events: Vec::new(),
            error: None,
            next: Next::AwaitChange,
        }));
    }
    let Some(resolution) = &facts.resolution else {
        return Plan::Resolve(resolve_request(spec, installed));
    };
    match resolution {
        Ok(resolution) => {
            let target = resolution.bundle.identity();
            if let Some(release) = facts.adopting()
                && let Err(why) = helm_release::check_bundle(release, &target)
            {
                let message = adoption_refused(release, &why);
                let mut refused = report(
                    facts,
                    installed.cloned(),
                    Outcome::Retrying(message.clone()),
                    Some(deprecation(spec, facts, installed)),
                    "AdoptionRefused",
                );
                refused
                    .events
                    .push(warning("AdoptionRefused", "Adopt", message));
                refused.next = Next::Failed;
                return Plan::Report(Box::new(refused));
            }
            Plan::Install(Install {
                target,
                maintained: None,
                adopt: facts.adopting().cloned(),
            })
        }
        Err(e) => match maintained(spec, installed, e) {
            Some(mut install) => {
                install.adopt = facts.adopting().cloned();
                Plan::Install(install)
            }
            None => {
                let message = e.to_string();
                let mut report = report(
                    facts,
                    installed.cloned(),
                    Outcome::Retrying(message.clone()),
                    Some(deprecation(spec, facts, installed)),
                    "ResolutionFailed",
                );
                report
                    .events
                    .push(warning("ResolutionFailed", "Resolve", message));
                report.next = Next::Failed;
                Plan::Report(Box::new(report))
            }
        },
    }
}

/// Why upstream OLM v1's installation is not adopted (condition and Event message).
pub fn adoption_refused(release: &UpstreamRelease, why: &str) -> String {
    format!(
        "not adopting upstream OLM v1's installation (Helm release Secret {}, bundle {} version {}): {why}; nothing was changed",
        release.secret, release.bundle.name, release.bundle.version
    )
}

fn blocked_without_catalog() -> Outcome {
    Outcome::Blocked {
        reason: REASON_BLOCKED,
        message: "catalog is required when sourceType is Catalog".into(),
    }
}

/// What resolution is asked: the spec's package, channels, range and policy, from the
/// installed bundle.
pub fn resolve_request(
    spec: &ClusterExtensionSpec,
    installed: Option<&BundleIdentity>,
) -> ResolveRequest {
    let filter = spec.source.catalog.clone().unwrap_or_default();
    ResolveRequest {
        package: filter.package_name,
        channels: filter.channels.unwrap_or_default(),
        version_range: filter.version.filter(|v| !v.is_empty()),
        selector: filter.selector,
        policy: match filter.upgrade_constraint_policy {
            UpgradeConstraintPolicy::CatalogProvided => UpgradePolicy::CatalogProvided,
            UpgradeConstraintPolicy::SelfCertified => UpgradePolicy::SelfCertified,
        },
        installed: installed.map(Into::into),
    }
}

/// When no catalog provides the package any more (it was deleted), the installed
/// bundle stays the target — unless the spec asks for another version.
fn maintained(
    spec: &ClusterExtensionSpec,
    installed: Option<&BundleIdentity>,
    error: &ResolveError,
) -> Option<Install> {
    let installed = installed?;
    let version = spec
        .source
        .catalog
        .as_ref()
        .and_then(|c| c.version.as_deref());
    let keep = error.no_catalog_had_package()
        && version.is_none_or(|v| v.is_empty() || installed.version == v);
    keep.then(|| Install {
        target: installed.clone(),
        maintained: Some(format!(
            "no ClusterCatalog provides package {:?} any more: maintaining the installed bundle {:?} (version {})",
            installed.package, installed.name, installed.version
        )),
        adopt: None,
    })
}

/// The report after [`Plan::Install`] ran.
pub fn after_install(
    spec: &ClusterExtensionSpec,
    facts: &Facts,
    install: Install,
    result: Result<Installed, InstallFailure>,
) -> Report {
    let previous = facts.installed();
    let done = match result {
        Ok(done) => done,
        Err(failure) => {
            let (outcome, error) = classify(failure, &install.target);
            let message = match &outcome {
                Outcome::Retrying(m) | Outcome::Blocked { message: m, .. } => m.clone(),
                _ => String::new(),
            };
            let conditions = deprecation(spec, facts, previous);
            let mut report = report(facts, previous.cloned(), outcome, Some(conditions), error);
            let (reason, action) = if error == "AdoptionRefused" {
                ("AdoptionRefused", "Adopt")
            } else {
                ("InstallFailed", "Install")
            };
            report.events.push(warning(reason, action, message));
            report.next = Next::Failed;
            return report;
        }
    };
    let bundle = install.target.pulled(&done.image);
    let by = facts
        .installer
        .as_ref()
        .map(|a| format!(" as {a}"))
        .unwrap_or_default();
    let mut events = Vec::new();
    match previous {
        _ if install.adopt.is_some() => {
            if let Some(release) = &install.adopt {
                events.push(normal(
                    "Adopted",
                    "Adopt",
                    format!(
                        "adopted upstream OLM v1's installation of bundle {} version {} (Helm release Secret {}, {} objects) in place: nothing deleted or recreated; applied{by}",
                        bundle.name,
                        bundle.version,
                        release.secret,
                        release.objects.len()
                    ),
                ));
            }
        }
        Some(old) if *old == bundle => {
            if done.applied_changes > 0 {
                events.push(normal(
                    "DriftCorrected",
                    "Apply",
                    format!(
                        "restored {} object(s) that differed from the installed revision",
                        done.applied_changes
                    ),
                ));
            }
        }
        Some(old) => events.push(normal(
            "Upgraded",
            "Install",
            format!(
                "upgraded from {} to {} ({}){by}",
                old.version, bundle.version, bundle.name
            ),
        )),
        None => events.push(normal(
            "Installed",
            "Install",
            format!(
                "installed bundle {} version {}{by}",
                bundle.name, bundle.version
            ),
        )),
    }
    for message in done.warnings {
        events.push(warning("CRDUpgradeSafety", "Preflight", message));
    }
    // The deprecation conditions now describe the newly installed bundle.
    let conditions = deprecation(spec, facts, Some(&bundle));
    let same = previous == Some(&bundle);
    let (outcome, next) = match done.readiness {
        Readiness::NotReady(waiting) => {
            let waiting = waiting.join("; ");
            events.extend(rollout_event(facts, same, &bundle.version, Some(&waiting)));
            let version = bundle.version.clone();
            (Outcome::RollingOut { version, waiting }, Next::RollingOut)
        }
        Readiness::Ready => {
            events.extend(rollout_event(facts, same, &bundle.version, None));
            let outcome = install
                .maintained
                .map_or(Outcome::Succeeded, Outcome::Maintained);
            (outcome, Next::Done)
        }
    };
    let mut observation = observe(facts, Some(bundle), outcome, Some(conditions));
    observation.installer = facts.installer.as_ref().ok().map(|a| a.status());
    Report {
        observation,
        events,
        error: None,
        next,
    }
}

/// The Event of a rollout transition: a revision that was ready and is not any more
/// (`waiting`: what is not ready), or a rollout that completed.
fn rollout_event(
    facts: &Facts,
    same_revision: bool,
    version: &str,
    waiting: Option<&str>,
) -> Option<Note> {
    let before = facts.progressing.as_deref();
    match waiting {
        Some(waiting) if same_revision && before == Some(REASON_SUCCEEDED) => Some(warning(
            "NotReady",
            "Rollout",
            format!("revision {version} is no longer ready: {waiting}"),
        )),
        None if matches!(
            before,
            Some(REASON_ROLLING_OUT | REASON_PROGRESS_DEADLINE_EXCEEDED)
        ) =>
        {
            Some(normal(
                "RolledOut",
                "Rollout",
                format!("revision {version} has rolled out"),
            ))
        }
        _ => None,
    }
}

/// An install failure as the condition reports it, and the reason counted in metrics.
/// Errors after resolution name the resolved bundle (`error for resolved bundle …`).
pub fn classify(failure: InstallFailure, target: &BundleIdentity) -> (Outcome, &'static str) {
    let prefixed = |m| for_resolved_bundle(&target.name, &target.version, m);
    match failure {
        InstallFailure::Retry(m) => (Outcome::Retrying(prefixed(m)), "InstallFailed"),
        InstallFailure::InvalidConfiguration(message) => (
            Outcome::Blocked {
                reason: REASON_INVALID_CONFIGURATION,
                message,
            },
            REASON_INVALID_CONFIGURATION,
        ),
        InstallFailure::Blocked(m) => (
            Outcome::Blocked {
                reason: REASON_BLOCKED,
                message: prefixed(m),
            },
            REASON_BLOCKED,
        ),
        InstallFailure::AdoptionRefused(m) => (Outcome::Retrying(m), "AdoptionRefused"),
    }
}

/// `progressDeadlineMinutes` (one minute lasting `minute`): a `Retrying` or `RollingOut`
/// outcome that has lasted `failing_for` becomes `ProgressDeadlineExceeded` once past the
/// deadline, with its message as the last status;
/// before that, also returns the time left (the next retry comes no later, so the
/// deadline is reported when it passes, not up to a whole backoff later).
pub fn deadline(
    outcome: Outcome,
    failing_for: Duration,
    deadline_minutes: Option<i32>,
    minute: Duration,
) -> (Outcome, Option<Duration>) {
    let (Some(minutes), Some(last)) = (deadline_minutes, outcome.pending()) else {
        return (outcome, None);
    };
    let deadline = minute.saturating_mul(minutes.max(0) as u32);
    if failing_for >= deadline {
        (Outcome::DeadlineExceeded { minutes, last }, None)
    } else {
        (
            outcome,
            Some(deadline - failing_for + Duration::from_millis(100)),
        )
    }
}

/// The Warning Event when `outcome` newly exceeds `progressDeadlineMinutes` (`before`:
/// the Progressing reason before this reconcile).
pub fn deadline_event(before: Option<&str>, outcome: &Outcome) -> Option<Note> {
    let Outcome::DeadlineExceeded { minutes, last } = outcome else {
        return None;
    };
    (before != Some(REASON_PROGRESS_DEADLINE_EXCEEDED)).then(|| {
        warning(
            REASON_PROGRESS_DEADLINE_EXCEEDED,
            "Rollout",
            deadline_exceeded(*minutes, last),
        )
    })
}

/// The deprecation conditions: from the winning catalog's data when resolution
/// succeeded, for `installed`; unknown otherwise.
fn deprecation(
    spec: &ClusterExtensionSpec,
    facts: &Facts,
    installed: Option<&BundleIdentity>,
) -> [DeprecationCondition; 4] {
    let channels = spec
        .source
        .catalog
        .as_ref()
        .and_then(|c| c.channels.clone())
        .unwrap_or_default();
    let data = match &facts.resolution {
        Some(Ok(resolution)) => CatalogData::Available(resolution.deprecation.as_ref()),
        _ => CatalogData::Unavailable,
    };
    deprecation_conditions(data, &channels, installed.map(|b| b.name.as_str()))
}

fn observe(
    facts: &Facts,
    installed: Option<BundleIdentity>,
    outcome: Outcome,
    deprecation: Option<[DeprecationCondition; 4]>,
) -> Observation {
    Observation {
        generation: facts.generation,
        installer: facts.recorded_installer(installed.as_ref()),
        installed,
        outcome,
        deprecation,
    }
}

/// A failed step before anything was installed: retried with backoff.
fn report(
    facts: &Facts,
    installed: Option<BundleIdentity>,
    outcome: Outcome,
    deprecation: Option<[DeprecationCondition; 4]>,
    error: &'static str,
) -> Report {
    Report {
        observation: observe(facts, installed, outcome, deprecation),
        events: Vec::new(),
        error: Some(error),
        next: Next::Retry,
    }
}

fn normal(reason: &'static str, action: &'static str, message: String) -> Note {
    Note {
        warning: false,
        reason,
        action,
        message,
    }
}

fn warning(reason: &'static str, action: &'static str, message: String) -> Note {
    Note {
        warning: true,
        reason,
        action,
        message,
    }
}

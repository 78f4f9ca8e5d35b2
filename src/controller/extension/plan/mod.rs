//! The ClusterExtension reconcile as pure decisions (docs/reference/api-and-status.md §3).
//!
//! [`decide`] looks at what one reconcile knows so far ([`Facts`]: the spec, whether the
//! object is being deleted, the validation result, the revision record, the resolution,
//! what the install steps returned, the failure bookkeeping) and names the next step: a
//! fact to look up, an install or uninstall step to run, or how the reconcile ends
//! ([`Plan::End`]). Every decision of a reconcile is made here:
//! - [`target`]: from the resolution to the install — the target bundle (or the
//!   maintained one), the takeover of upstream OLM v1's installation, skipping an
//!   unchanged and undrifted install, re-reading only readiness, skipping preflights;
//! - [`migration`]: the takeover of an OLM v0 installation `olmv1 migrate convert`
//!   stopped (only the exact bundle it installed);
//! - [`report`]: an install's result as status and Events (`RollingOut` while what it
//!   installed is not ready, [`super::rollout`]); failures → conditions;
//! - [`ending`]: `progressDeadlineMinutes`, the requeue, and what the failure
//!   bookkeeping records ([`Standing`] in, [`Tally`] out);
//! - [`uninstall`]: what an uninstall deletes, whether CRDs stay, what it reports;
//! - [`notice`], [`control`], [`paused`], [`rollback`], [`operator`]: the opt-in upgrade
//!   controls (docs/how-to/upgrade-control.md) — the UpgradeAvailable condition and its
//!   Events, manual approval, pause, rollback and upgrade remediation, and the
//!   operator's own say (its OperatorCondition).
//!
//! The I/O for each step is done by the [`super::flow::Executor`]; nothing here waits on
//! anything.

pub mod control;
pub mod ending;
pub mod migration;
pub mod notice;
pub mod operator;
pub mod paused;
pub mod report;
pub mod rollback;
pub mod target;
pub mod uninstall;

pub use ending::{
    Count, Ending, SAFETY_RECHECK, Standing, Tally, deadline, deadline_event, rollout_recheck,
};
pub use report::{adoption_refused, after_install, classify};
use target::enforcement;
pub use target::{Apply, Rendered, fingerprint};
pub use uninstall::{DeleteFailure, Deletion};

use super::installer::InstallerAccount;
use super::rollout::Readiness;
use super::status::{ControlStatus, Observation, Outcome, validation_failed};
use crate::api::conditions::REASON_BLOCKED;
use crate::api::{BundleIdentity, ClusterExtensionSpec, InstallerStatus, UpgradeConstraintPolicy};
use crate::apply::{ObjectRef, RevisionHistory, UninstallReport};
use crate::migrate::upstream_helm::UpstreamRelease;
use crate::resolve::deprecation::{CatalogData, DeprecationCondition, deprecation_conditions};
use crate::resolve::{BundleExplanation, Resolution, ResolveError, ResolveRequest, UpgradePolicy};
use control::{Controls, Held};

/// What one reconcile knows so far; `None`: not looked up yet.
#[derive(Debug)]
pub struct Facts {
    pub generation: Option<i64>,
    /// The extension's uid (what an install is made of, [`fingerprint`]).
    pub uid: Option<String>,
    pub deleting: bool,
    pub has_finalizer: bool,
    /// Whether the extension asks to keep its CRDs on uninstall ([`uninstall::keeps_crds`]).
    pub keep_crds: bool,
    /// Who installs ([`super::installer::choose`]), or why nobody may.
    pub installer: Result<InstallerAccount, String>,
    /// The extension's name (what an uninstall reports).
    pub name: String,
    /// The failure bookkeeping of the extension, looked up when the ending needs it.
    pub standing: Option<Standing>,
    /// What the API server cannot check (the namespace and installer account exist);
    /// empty when everything is there.
    pub validation: Option<Vec<String>>,
    /// The revision record, or why it could not be read.
    pub record: Option<Result<Option<RevisionHistory>, String>>,
    /// Without a record: upstream OLM v1's installation of the extension (its latest
    /// Helm release), or why it could not be read.
    pub upstream: Option<Result<Option<UpstreamRelease>, String>>,
    pub resolution: Option<Result<Resolution, ResolveError>>,
    /// The OLM v0 Subscription the extension replaces ([`migration::Migration::of`]).
    pub migration: Option<migration::Migration>,
    /// Its backup: the installed CSV being taken over (`Err`: why it cannot be read).
    pub v0_backup: Option<Result<migration::V0Takeover, String>>,
    /// Resolution's verdict on every bundle of the package (the upgrade notice).
    pub candidates: Vec<BundleExplanation>,
    /// The opt-in upgrade controls (annotations) and what the status said of them.
    pub controls: Controls,
    /// Whether the cluster serves `operators.coreos.com/v2` `OperatorCondition` (asked
    /// only when an upgrade is to be decided).
    pub operator_conditions: Option<bool>,
    /// The installed bundle's OperatorCondition: upgradeable (or absent), or what holds
    /// the upgrade ([`operator`]).
    pub operator_condition: Option<Result<(), String>>,
    /// Paused: which installed objects differ from the installed revision (`Err`: why
    /// that could not be checked).
    pub drifted: Option<Result<Vec<String>, String>>,
    /// The reason of the Progressing condition before this reconcile (Events on
    /// rollout transitions).
    pub progressing: Option<String>,
    /// The bundle the status reported installed before this reconcile (`Some(None)`:
    /// none; `None`: not looked at). An install whose record was written by a process
    /// that stopped before its status was gets its Event from the next one.
    pub reported: Option<Option<crate::api::BundleMetadata>>,
    /// Whether the release being adopted is of the target bundle (`Err`: why not).
    pub upstream_bundle: Option<Result<(), String>>,
    /// The last install's result when it was made of the same ([`fingerprint`]) and
    /// nothing drifted since; `Some(None)`: it must run.
    pub unchanged: Option<Option<Installed>>,
    /// The readiness of the unchanged install, read again (`Some(None)`: it could not be
    /// read; the last one stands).
    pub readiness: Option<Option<Readiness>>,
    /// The pulled and rendered bundle.
    pub rendered: Option<Result<Rendered, InstallFailure>>,
    /// Whether the release being adopted has exactly the rendered objects (`Err`: how
    /// they differ).
    pub upstream_objects: Option<Result<(), String>>,
    /// What applying the rendered bundle did.
    pub applied: Option<Result<Installed, InstallFailure>>,
    /// Remediation: the installed revision rendered again after the upgrade failed.
    pub remedy: Option<Result<Rendered, InstallFailure>>,
    /// Remediation: what applying it did.
    pub remedied: Option<Result<Installed, InstallFailure>>,
    /// Uninstall: whether the drift watches of the extension were stopped.
    pub watches_stopped: bool,
    /// Uninstall: what deleting the installed objects did.
    pub deleted: Option<Result<UninstallReport, DeleteFailure>>,
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
            uid: None,
            name: String::new(),
            deleting,
            has_finalizer,
            keep_crds: false,
            installer,
            standing: None,
            validation: None,
            record: None,
            upstream: None,
            resolution: None,
            migration: None,
            v0_backup: None,
            candidates: Vec::new(),
            controls: Controls::default(),
            operator_conditions: None,
            operator_condition: None,
            drifted: None,
            progressing: None,
            reported: None,
            upstream_bundle: None,
            unchanged: None,
            readiness: None,
            rendered: None,
            upstream_objects: None,
            applied: None,
            remedy: None,
            remedied: None,
            watches_stopped: false,
            deleted: None,
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
    /// Uninstall: stop following the extension's objects (drift watches, the cache of
    /// unchanged installs).
    StopWatches,
    /// Uninstall: delete the installed objects as the installer account.
    Delete(Deletion),
    /// Look up the namespace and installer account.
    Validate,
    /// Read the revision record.
    LoadRecord,
    /// No record: look for upstream OLM v1's installation (its Helm release).
    LoadUpstream,
    /// Resolve the package.
    Resolve(ResolveRequest),
    /// Read the backup of the OLM v0 installation being taken over.
    LoadV0Backup(migration::Migration),
    /// Ask (discovery, cached) whether the cluster serves OperatorCondition.
    DiscoverOperatorConditions,
    /// Read the OperatorCondition of this name in the install namespace.
    ReadOperatorCondition(String),
    /// Check that the upstream release being adopted is of this bundle.
    CheckUpstream(BundleIdentity),
    /// Ask whether the last install was made of this fingerprint and nothing drifted
    /// since.
    LookUpUnchanged(String),
    /// Only read again the readiness of these objects (the unchanged install's rollout
    /// is in progress).
    ReadReadiness(Vec<ObjectRef>),
    /// Pull and render this bundle (an install begins: the last unchanged install is
    /// forgotten).
    Render(BundleIdentity),
    /// Paused: find which rendered objects differ from the live ones, writing nothing.
    CheckDrift,
    /// Compare the objects of the upstream release being adopted with the rendered ones.
    CompareUpstream,
    /// Run the preflights (when asked) and apply the rendered bundle.
    Apply(Box<Apply>),
    /// Remediation: pull and render the installed revision again (the upgrade's apply
    /// failed).
    RenderRollback(BundleIdentity),
    /// Remediation: run the preflights and apply it.
    ApplyRollback(Box<Apply>),
    /// Look up the failure bookkeeping ([`Standing`]) the ending depends on.
    LookUpStanding,
    /// The reconcile ends: Events, status, requeue.
    End(Box<Ending>),
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
    /// The OLM v0 installation this install takes over (in place), the target being
    /// exactly its installed CSV.
    pub adopt_v0: Option<migration::V0Takeover>,
    /// The resolved bundle waits for approval; `target` is the installed one.
    pub held: Option<Held>,
    /// A rollback: `target` is an earlier revision from the record (or the installed
    /// one while an upgrade waits).
    pub rollback: Option<rollback::Rollback>,
}

/// How a reconcile ends, before `progressDeadlineMinutes` and the requeue
/// ([`ending::end`]).
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
    /// Reached for now; reconcile again shortly (after a takeover: [`migration::resolve`]).
    Again,
    /// Retry with backoff.
    Retry,
    /// A failure after progress began: `Retrying`, `ProgressDeadlineExceeded` past
    /// `progressDeadlineMinutes`; retried with backoff unless terminal (`Blocked`).
    Failed,
    /// Applied, not ready yet: `RollingOut` (then as `Failed`); checked again after a
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
    /// Applying the revision failed (after the preflights passed): retried like
    /// [`InstallFailure::Retry`]; what `upgrade-remediation: Rollback` rolls back from
    /// ([`rollback`]).
    Apply(String),
    /// CRD upgrade safety blocked the revision (the findings): retried like
    /// [`InstallFailure::Retry`] for an install or upgrade, terminal for a rollback
    /// ([`rollback`]).
    UnsafeCrds(String),
}

impl InstallFailure {
    /// What went wrong.
    pub fn message(&self) -> &str {
        match self {
            InstallFailure::Retry(m)
            | InstallFailure::InvalidConfiguration(m)
            | InstallFailure::Blocked(m)
            | InstallFailure::AdoptionRefused(m)
            | InstallFailure::UnsafeCrds(m)
            | InstallFailure::Apply(m) => m,
        }
    }
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
        if facts.controls.paused && facts.has_finalizer {
            return paused::deletion(spec, facts);
        }
        return uninstall::decide(facts);
    }
    if !facts.has_finalizer {
        return Plan::AddFinalizer;
    }
    if let Err(message) = &facts.installer {
        return without_installer(spec, facts, message);
    }
    if let Some(plan) = installed_state(spec, facts) {
        return plan;
    }
    let installed = facts.installed();
    if spec.source.catalog.is_none() {
        let report = Report {
            observation: observe(facts, installed.cloned(), blocked_without_catalog(), None),
            events: Vec::new(),
            error: None,
            next: Next::AwaitChange,
        };
        return end(spec, facts, report);
    }
    let Some(resolution) = &facts.resolution else {
        return migration::resolve(facts, resolve_request(spec, installed));
    };
    target::decide(spec, facts, resolution)
}

/// Nobody may act for the extension; the status still shows what is installed (by
/// olmv1, or by upstream OLM v1 before the switch).
fn without_installer(spec: &ClusterExtensionSpec, facts: &Facts, message: &str) -> Plan {
    if facts.record.is_none() {
        return Plan::LoadRecord;
    }
    if matches!(facts.record, Some(Ok(None))) && facts.upstream.is_none() {
        return Plan::LoadUpstream;
    }
    let report = Report {
        observation: observe(
            facts,
            facts.installed().cloned(),
            Outcome::Blocked {
                reason: REASON_BLOCKED,
                message: message.to_string(),
            },
            None,
        ),
        events: Vec::new(),
        error: Some("InstallerUnset"),
        next: Next::AwaitChange,
    };
    end(spec, facts, report)
}

/// The validation, the revision record and upstream's installation: the next lookup,
/// or the report when one failed; `None` once all are known.
fn installed_state(spec: &ClusterExtensionSpec, facts: &Facts) -> Option<Plan> {
    let Some(errors) = &facts.validation else {
        return Some(Plan::Validate);
    };
    if !errors.is_empty() {
        let outcome = Outcome::ValidationFailed(validation_failed(errors));
        let failed = failed_report(facts, None, outcome, None, "ValidationFailed");
        return Some(end(spec, facts, failed));
    }
    let Some(record) = &facts.record else {
        return Some(Plan::LoadRecord);
    };
    if let Err(e) = record {
        let outcome = Outcome::Retrying(format!("retrying to get installed bundle: {e}"));
        let failed = failed_report(facts, None, outcome, None, "RevisionRecordUnavailable");
        return Some(end(spec, facts, failed));
    }
    if facts.history().is_some() {
        return None;
    }
    match &facts.upstream {
        None => Some(Plan::LoadUpstream),
        Some(Err(e)) => {
            let message = format!(
                "retrying to get installed bundle: reading upstream OLM v1's installation: {e}"
            );
            let mut failed = failed_report(
                facts,
                None,
                Outcome::Retrying(message.clone()),
                None,
                "UpstreamReleaseUnreadable",
            );
            failed
                .events
                .push(warning("AdoptionRefused", "Adopt", message));
            Some(end(spec, facts, failed))
        }
        Some(Ok(_)) => None,
    }
}

/// How the reconcile ends with `report`, once the failure bookkeeping is known.
fn end(spec: &ClusterExtensionSpec, facts: &Facts, report: Report) -> Plan {
    let Some(standing) = &facts.standing else {
        return Plan::LookUpStanding;
    };
    let mut report = report;
    notice::attach(spec, facts, &mut report);
    paused::attach(facts, &mut report);
    rollback::attach(facts, &mut report);
    let held = operator::attach(facts, &mut report);
    let (restart, pending_for) = rollback::clock(&report, standing.pending_for);
    // Readiness read right after an apply may predate the watches of what it applied:
    // the next check comes soon (docs/concepts/rollout-status.md).
    let standing = Standing {
        watched: standing.watched && facts.rendered.is_none(),
        pending_for,
        ..*standing
    };
    let rolling = matches!(report.observation.outcome, Outcome::RollingOut { .. });
    let mut ending = ending::end(
        report,
        &standing,
        spec.progress_deadline_minutes,
        facts.progressing.as_deref(),
    );
    ending.tally.restart = restart;
    rollback::after_deadline(facts, rolling, &mut ending);
    operator::recheck(held, standing.followed, &mut ending);
    Plan::End(Box::new(ending))
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
        control: ControlStatus::default(),
    }
}

/// A failed step before anything was installed: retried with backoff.
fn failed_report(
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

//! One ClusterExtension reconcile: asks [`plan::decide`] for the next step, has the
//! [`Executor`] do its I/O, and ends with the report's status, Events, metrics and
//! requeue (a rollout in progress is checked again after [`rollout_recheck`]). The
//! executor is a trait so that every branch of the flow runs in unit tests against a fake
//! (below); the real one is [`super::executor::KubeExecutor`].

use super::ExtensionError;
use super::installer::InstallerAccount;
use super::plan::{self, Facts, InstallFailure, Installed, Next, Note, Plan, Report};
use super::status::Observation;
use crate::api::{self, BundleIdentity, ClusterExtension};
use crate::apply::RevisionHistory;
use crate::migrate::upstream_helm::UpstreamRelease;
use crate::resolve::{Resolution, ResolveError, ResolveRequest};
use kube::ResourceExt;
use kube::runtime::controller::Action;
use std::time::Duration;

/// How soon a rollout in progress is checked again when nothing triggered a reconcile
/// (readiness changes of the installed objects trigger one at once; this is the safety
/// net, and what refreshes pod waiting reasons, which do not change the Deployment):
/// every 15 s at first, then a quarter of how long it has been rolling out, at most
/// every 2 minutes (a rollout stuck for days costs little).
pub(crate) fn rollout_recheck(rolling_for: Duration) -> Duration {
    (rolling_for / 4).clamp(Duration::from_secs(15), Duration::from_secs(120))
}

/// The I/O of one reconcile of one ClusterExtension.
pub(crate) trait Executor {
    /// Who installs the extension ([`super::installer::choose`]).
    fn installer(&self) -> Result<InstallerAccount, String>;
    /// Adds the finalizer.
    async fn add_finalizer(&self) -> Result<(), kube::Error>;
    /// What the API server cannot check: the namespace and installer account exist.
    async fn validate(&self) -> Vec<String>;
    /// The revision record (`Err`: why it cannot be read).
    async fn load_record(&self) -> Result<Option<RevisionHistory>, String>;
    /// Upstream OLM v1's installation of the extension (its latest Helm release not yet
    /// adopted), for an extension olmv1 has no record of (`Err`: why it cannot be read).
    async fn load_upstream(&self) -> Result<Option<UpstreamRelease>, String>;
    /// Resolves over the served catalogs (`Err`: the catalogs could not be listed).
    async fn resolve(
        &self,
        request: &ResolveRequest,
    ) -> Result<Result<Resolution, ResolveError>, kube::Error>;
    /// Pull, render, preflights and apply as the installer account (adopting `adopt`'s
    /// objects in place when they are exactly the rendered ones).
    async fn install(
        &self,
        target: &BundleIdentity,
        history: Option<&RevisionHistory>,
        adopt: Option<&UpstreamRelease>,
    ) -> Result<Installed, InstallFailure>;
    /// Uninstall and drop the finalizer.
    async fn uninstall(&self) -> Result<Action, ExtensionError>;
    /// Writes the status computed from `observation` (when it changed).
    async fn write_status(&self, observation: &Observation) -> Result<(), kube::Error>;
    /// Publishes an Event.
    async fn emit(&self, note: &Note);
    /// Counts a failed reconcile under `reason`.
    fn count_error(&self, reason: &str);
    /// How long this extension has been failing at its generation.
    fn failing_for(&self) -> Duration;
    /// Counts a failure; the delay before the retry.
    fn next_backoff(&self) -> Duration;
    /// Forgets earlier failures.
    fn succeeded(&self);
    /// Applied but not ready yet: forgets the backoff, keeps the clock of
    /// `progressDeadlineMinutes` running.
    fn rolling_out(&self);
    /// The length of one minute of `progressDeadlineMinutes`.
    fn minute(&self) -> Duration;
}

/// Reconciles `ext` through `exec`.
pub(crate) async fn reconcile<E: Executor>(
    ext: &ClusterExtension,
    exec: &E,
) -> Result<Action, ExtensionError> {
    let mut facts = Facts::new(
        ext.metadata.generation,
        ext.metadata.deletion_timestamp.is_some(),
        ext.finalizers()
            .iter()
            .any(|f| f == api::FINALIZER_EXTENSION),
        exec.installer(),
    );
    facts.progressing = progressing_reason(ext);
    loop {
        match plan::decide(&ext.spec, &facts) {
            Plan::Uninstall => return exec.uninstall().await,
            Plan::AddFinalizer => {
                exec.add_finalizer().await?;
                return Ok(Action::requeue(Duration::ZERO));
            }
            Plan::Validate => facts.validation = Some(exec.validate().await),
            Plan::LoadRecord => facts.record = Some(exec.load_record().await),
            Plan::LoadUpstream => facts.upstream = Some(exec.load_upstream().await),
            Plan::Resolve(request) => facts.resolution = Some(exec.resolve(&request).await?),
            Plan::Install(install) => {
                let result = exec
                    .install(&install.target, facts.history(), install.adopt.as_ref())
                    .await;
                let report = plan::after_install(&ext.spec, &facts, install, result);
                return finish(ext, exec, report).await;
            }
            Plan::Report(report) => return finish(ext, exec, *report).await,
        }
    }
}

/// The reason of the extension's Progressing condition before this reconcile.
fn progressing_reason(ext: &ClusterExtension) -> Option<String> {
    let status = ext.status.as_ref()?;
    api::conditions::find(&status.conditions, api::conditions::TYPE_PROGRESSING)
        .map(|c| c.reason.clone())
}

/// Metrics, Events, status, then the requeue the report asks for.
async fn finish<E: Executor>(
    ext: &ClusterExtension,
    exec: &E,
    mut report: Report,
) -> Result<Action, ExtensionError> {
    if let Some(reason) = report.error {
        exec.count_error(reason);
    }
    for note in &report.events {
        exec.emit(note).await;
    }
    let mut until_deadline = None;
    let mut pending_for = Duration::ZERO;
    if matches!(report.next, Next::Failed | Next::RollingOut) {
        pending_for = exec.failing_for();
        let (outcome, left) = plan::deadline(
            report.observation.outcome,
            pending_for,
            ext.spec.progress_deadline_minutes,
            exec.minute(),
        );
        report.observation.outcome = outcome;
        until_deadline = left;
        if let Some(note) = plan::deadline_event(
            progressing_reason(ext).as_deref(),
            &report.observation.outcome,
        ) {
            exec.emit(&note).await;
        }
    }
    exec.write_status(&report.observation).await?;
    Ok(match report.next {
        Next::Done => {
            exec.succeeded();
            Action::await_change()
        }
        Next::AwaitChange => Action::await_change(),
        Next::Retry => Action::requeue(exec.next_backoff()),
        Next::RollingOut => {
            exec.rolling_out();
            let recheck = rollout_recheck(pending_for);
            Action::requeue(until_deadline.map_or(recheck, |left| recheck.min(left)))
        }
        Next::Failed if report.observation.outcome.is_terminal() => Action::await_change(),
        Next::Failed => {
            let backoff = exec.next_backoff();
            Action::requeue(until_deadline.map_or(backoff, |left| backoff.min(left)))
        }
    })
}

#[cfg(test)]
#[path = "flow_tests.rs"]
mod tests;

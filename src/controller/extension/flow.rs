//! One ClusterExtension reconcile: asks [`plan::decide`] for the next step, has the
//! [`Executor`] do its I/O (or runs the check of upstream OLM v1's release the step
//! names), and ends as the plan's [`Ending`] says: Events, status, requeue. What the
//! failure bookkeeping records ([`Tally`]) is returned for the caller to keep; what it
//! knows ([`Standing`]) is looked up when the plan asks. The executor is a trait so that
//! every branch of the flow runs in unit tests against a fake (`flow_tests.rs`); the
//! real one is [`super::executor::KubeExecutor`].

use super::ExtensionError;
use super::installer::InstallerAccount;
use super::plan::migration::{Migration, V0Takeover};
use super::plan::{
    self, Apply, DeleteFailure, Deletion, Ending, Facts, InstallFailure, Installed, Note, Plan,
    Rendered, Standing, Tally,
};
use super::rollout::Readiness;
use super::status::Observation;
use crate::api::{self, BundleIdentity, ClusterExtension};
use crate::apply::{ObjectRef, RevisionHistory, UninstallReport};
use crate::migrate::upstream_helm::{self as helm_release, UpstreamRelease};
use crate::resolve::{Explanation, ResolveRequest};
use kube::ResourceExt;
use kube::runtime::controller::Action;

/// The I/O of one reconcile of one ClusterExtension.
pub(crate) trait Executor {
    /// Who installs the extension ([`super::installer::choose`]).
    fn installer(&self) -> Result<InstallerAccount, String>;
    /// The installed bundle this process last wrote into the status, which the watched
    /// object may not show yet (`None`: none since it started).
    fn last_reported(&self) -> Option<crate::api::BundleMetadata> {
        None
    }
    /// Adds the finalizer.
    async fn add_finalizer(&self) -> Result<(), kube::Error>;
    /// What the API server cannot check: the namespace and installer account exist.
    async fn validate(&self) -> Vec<String>;
    /// The revision record (`Err`: why it cannot be read).
    async fn load_record(&self) -> Result<Option<RevisionHistory>, String>;
    /// Upstream OLM v1's installation of the extension (its latest Helm release not yet
    /// adopted), for an extension olmv1 has no record of (`Err`: why it cannot be read).
    async fn load_upstream(&self) -> Result<Option<UpstreamRelease>, String>;
    /// The backup ConfigMap of the OLM v0 installation `migration` takes over, read
    /// (`Err`: why it cannot be).
    async fn load_v0_backup(&self, migration: &Migration) -> Result<V0Takeover, String>;
    /// Whether the cluster serves `operators.coreos.com/v2` `OperatorCondition`
    /// (discovery, cached for a while).
    async fn operator_conditions_served(&self) -> bool;
    /// The OperatorCondition `name` in the install namespace: upgradeable (or absent),
    /// or what holds the upgrade (`Err`, also when it cannot be read).
    async fn read_operator_condition(&self, name: &str) -> Result<(), String>;
    /// Resolves over the served catalogs, with the verdict on every bundle of the
    /// package (`Err`: the catalogs could not be listed).
    async fn resolve(&self, request: &ResolveRequest) -> Result<Explanation, kube::Error>;
    /// The last install's result, when it was made of `fingerprint` and nothing drifted
    /// since (the drift watches keep it).
    fn unchanged(&self, fingerprint: &str) -> Option<Installed>;
    /// Reads the readiness of `objects` as `account` and keeps it with the last install;
    /// `None` when it cannot be read.
    async fn read_readiness(
        &self,
        account: &InstallerAccount,
        objects: &[ObjectRef],
    ) -> Option<Readiness>;
    /// Pulls and renders `target` (forgetting the last unchanged install first).
    async fn render(&self, target: &BundleIdentity) -> Result<Rendered, InstallFailure>;
    /// Runs the preflights when `step` says so, applies `rendered` as the installer
    /// account and reads what it installed for the rollout status; then follows the
    /// installed objects for drift.
    async fn apply(
        &self,
        step: &Apply,
        rendered: &Rendered,
        history: Option<&RevisionHistory>,
    ) -> Result<Installed, InstallFailure>;
    /// Paused: which of the `rendered` objects the live ones differ from (a server-side
    /// dry-run apply as `account`: nothing is written); `Err`: why that is unknown.
    async fn check_drift(
        &self,
        account: &InstallerAccount,
        rendered: &Rendered,
    ) -> Result<Vec<String>, String>;
    /// Stops following the extension's objects (uninstalled or deleted).
    fn stop_watches(&self);
    /// Deletes what `deletion` names as its installer account.
    async fn delete(&self, deletion: &Deletion) -> Result<UninstallReport, DeleteFailure>;
    /// After an uninstall: deletes the revision record and removes the finalizers.
    async fn remove(&self) -> Result<(), kube::Error>;
    /// Writes the status computed from `observation` (when it changed).
    async fn write_status(&self, observation: &Observation) -> Result<(), kube::Error>;
    /// Publishes an Event.
    async fn emit(&self, note: &Note);
}

/// The result of a reconcile, and what the failure bookkeeping records of it.
pub(crate) struct Reconciled {
    pub result: Result<Action, ExtensionError>,
    pub tally: Tally,
}

impl From<ExtensionError> for Reconciled {
    fn from(e: ExtensionError) -> Self {
        Reconciled {
            result: Err(e),
            tally: Tally::default(),
        }
    }
}

/// Reconciles `ext` through `exec`; `standing` reads the failure bookkeeping of `ext`.
pub(crate) async fn reconcile<E: Executor>(
    ext: &ClusterExtension,
    exec: &E,
    standing: impl Fn() -> Standing,
) -> Reconciled {
    let mut facts = known_before(ext, exec.installer());
    if let Some(written) = exec.last_reported() {
        facts.reported = Some(Some(written));
    }
    loop {
        let plan = plan::decide(&ext.spec, &facts);
        let _timed = StepTimer(step_name(&plan), std::time::Instant::now());
        match plan {
            Plan::AddFinalizer => {
                if let Err(e) = exec.add_finalizer().await {
                    return ExtensionError::from(e).into();
                }
                // The update triggers the next reconcile (`extension_trigger` follows
                // finalizers), with the object as the watch reports it: a requeue now
                // could read the cache before the update reached it, patch again with
                // the old resourceVersion and fail with a conflict.
                return Reconciled {
                    result: Ok(Action::await_change()),
                    tally: Tally::default(),
                };
            }
            Plan::StopWatches => {
                exec.stop_watches();
                facts.watches_stopped = true;
            }
            Plan::Delete(deletion) => facts.deleted = Some(exec.delete(&deletion).await),
            Plan::Validate => facts.validation = Some(exec.validate().await),
            Plan::LoadRecord => facts.record = Some(exec.load_record().await),
            Plan::LoadUpstream => facts.upstream = Some(exec.load_upstream().await),
            Plan::LoadV0Backup(migration) => {
                facts.v0_backup = Some(exec.load_v0_backup(&migration).await);
            }
            Plan::Resolve(request) => match exec.resolve(&request).await {
                Ok(explained) => {
                    facts.resolution = Some(explained.result);
                    facts.candidates = explained.bundles;
                }
                Err(e) => return ExtensionError::from(e).into(),
            },
            Plan::DiscoverOperatorConditions => {
                facts.operator_conditions = Some(exec.operator_conditions_served().await);
            }
            Plan::ReadOperatorCondition(name) => {
                facts.operator_condition = Some(exec.read_operator_condition(&name).await);
            }
            Plan::CheckUpstream(target) => {
                let release = facts.adopting().ok_or_else(|| "no release".to_string());
                let checked = release.and_then(|r| helm_release::check_bundle(r, &target));
                facts.upstream_bundle = Some(checked);
            }
            Plan::LookUpUnchanged(fingerprint) => {
                facts.unchanged = Some(exec.unchanged(&fingerprint));
            }
            Plan::ReadReadiness(objects) => {
                let read = match &facts.installer {
                    Ok(account) => exec.read_readiness(account, &objects).await,
                    Err(_) => None,
                };
                facts.readiness = Some(read);
            }
            Plan::Render(target) => facts.rendered = Some(exec.render(&target).await),
            Plan::CheckDrift => {
                let checked = match (&facts.installer, &facts.rendered) {
                    (Ok(account), Some(Ok(rendered))) => exec.check_drift(account, rendered).await,
                    _ => Err("nothing was rendered".to_string()),
                };
                facts.drifted = Some(checked);
            }
            Plan::CompareUpstream => facts.upstream_objects = Some(compare_upstream(&facts)),
            Plan::Apply(step) => {
                let applied = match &facts.rendered {
                    Some(Ok(rendered)) => exec.apply(&step, rendered, facts.history()).await,
                    _ => Err(InstallFailure::Retry("nothing was rendered".into())),
                };
                facts.applied = Some(applied);
            }
            Plan::RenderRollback(target) => facts.remedy = Some(exec.render(&target).await),
            Plan::ApplyRollback(step) => {
                let applied = match &facts.remedy {
                    Some(Ok(rendered)) => exec.apply(&step, rendered, facts.history()).await,
                    _ => Err(InstallFailure::Retry("nothing was rendered".into())),
                };
                facts.remedied = Some(applied);
            }
            Plan::LookUpStanding => facts.standing = Some(standing()),
            Plan::End(ending) => return finish(exec, *ending).await,
        }
    }
}

/// What is known of `ext` before any step.
fn known_before(ext: &ClusterExtension, installer: Result<InstallerAccount, String>) -> Facts {
    let mut facts = Facts::new(
        ext.metadata.generation,
        ext.metadata.deletion_timestamp.is_some(),
        ext.finalizers()
            .iter()
            .any(|f| f == api::FINALIZER_EXTENSION),
        installer,
    );
    facts.uid = ext.metadata.uid.clone();
    facts.name = ext.name_any();
    facts.keep_crds = plan::uninstall::keeps_crds(ext);
    facts.progressing = progressing_reason(ext);
    facts.reported = Some(
        ext.status
            .as_ref()
            .and_then(|s| s.install.as_ref())
            .map(|i| i.bundle.clone()),
    );
    facts.controls = plan::control::Controls::of(ext);
    facts.migration = Migration::of(ext);
    facts
}

/// Logs, at debug level, how long a reconcile step took (when dropped).
struct StepTimer(&'static str, std::time::Instant);

impl Drop for StepTimer {
    fn drop(&mut self) {
        let elapsed_ms = self.1.elapsed().as_secs_f64() * 1000.0;
        tracing::debug!(step = self.0, elapsed_ms, "reconcile step");
    }
}

/// The name of a step, for [`StepTimer`].
fn step_name(plan: &Plan) -> &'static str {
    match plan {
        Plan::AddFinalizer => "AddFinalizer",
        Plan::StopWatches => "StopWatches",
        Plan::Delete(_) => "Delete",
        Plan::Validate => "Validate",
        Plan::LoadRecord => "LoadRecord",
        Plan::LoadUpstream => "LoadUpstream",
        Plan::Resolve(_) => "Resolve",
        Plan::LoadV0Backup(_) => "LoadV0Backup",
        Plan::DiscoverOperatorConditions => "DiscoverOperatorConditions",
        Plan::ReadOperatorCondition(_) => "ReadOperatorCondition",
        Plan::CheckUpstream(_) => "CheckUpstream",
        Plan::LookUpUnchanged(_) => "LookUpUnchanged",
        Plan::ReadReadiness(_) => "ReadReadiness",
        Plan::Render(_) => "Render",
        Plan::CheckDrift => "CheckDrift",
        Plan::CompareUpstream => "CompareUpstream",
        Plan::Apply(_) => "Apply",
        Plan::RenderRollback(_) => "RenderRollback",
        Plan::ApplyRollback(_) => "ApplyRollback",
        Plan::LookUpStanding => "LookUpStanding",
        Plan::End(_) => "End",
    }
}

/// Whether the objects of the upstream release being adopted are exactly the rendered
/// ones (`Err`: how they differ).
fn compare_upstream(facts: &Facts) -> Result<(), String> {
    let release = facts.adopting().ok_or_else(|| "no release".to_string())?;
    let rendered = facts.rendered.as_ref().and_then(|r| r.as_ref().ok());
    let objects = rendered.map(|r| r.objects.as_slice()).unwrap_or_default();
    helm_release::compare_objects(release, objects).map_err(|differ| differ.to_string())
}

/// The reason of the extension's Progressing condition before this reconcile.
fn progressing_reason(ext: &ClusterExtension) -> Option<String> {
    let status = ext.status.as_ref()?;
    api::conditions::find(&status.conditions, api::conditions::TYPE_PROGRESSING)
        .map(|c| c.reason.clone())
}

/// Events, the end of an uninstall, status, then the requeue the ending asks for. The
/// Events go out before the status is written, so that whoever sees the status (a
/// test, a GitOps tool) also finds the Events that tell how it came about
/// (e2e/faults.rs looks for the `Installed` Event once the status says so).
async fn finish<E: Executor>(exec: &E, ending: Ending) -> Reconciled {
    for note in &ending.events {
        exec.emit(note).await;
    }
    let mut written = Ok(());
    if ending.remove {
        written = exec.remove().await;
    }
    if written.is_ok()
        && let Some(observation) = &ending.observation
    {
        written = exec.write_status(observation).await;
    }
    match written {
        Ok(()) => Reconciled {
            result: Ok(ending
                .requeue
                .map_or_else(Action::await_change, Action::requeue)),
            tally: ending.tally,
        },
        // Counted and timed as planned, but not settled: the error policy backs off.
        Err(e) => Reconciled {
            result: Err(e.into()),
            tally: Tally {
                count: plan::Count::Keep,
                ..ending.tally
            },
        },
    }
}

#[cfg(test)]
#[path = "flow_tests.rs"]
mod tests;

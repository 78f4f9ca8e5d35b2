//! The ClusterExtension reconciler (docs/reference/api-and-status.md §3): finalizer, validation,
//! installed state from the revision record, resolution over the served catalogs,
//! bundle pull, render, preflights, apply as the installer ServiceAccount, status and
//! Events; uninstall on deletion.
//!
//! - [`plan`]: the pure decisions — the next step of a reconcile (install or
//!   uninstall), failure → condition, `progressDeadlineMinutes`, the requeue and what the
//!   failure bookkeeping records; [`status`]: the status a reconcile writes.
//! - [`flow`]: one reconcile, driving the plan through an [`flow::Executor`];
//!   [`executor`] is the real one, [`pipeline`] its install steps (pull → render →
//!   preflight → apply → readiness).
//! - [`triggers`]: what causes a reconcile; [`drift`]: watches on the installed objects;
//!   [`certs`] (in `bundle`, shared with `olmv1 migrate check`), [`prune`]: small
//!   decisions of the install steps; [`namespace`]: the opt-in creation (and removal) of the install namespace; [`rollout`]: whether
//!   what was installed is ready (Progressing `RollingOut`).

mod catalogs;
pub use crate::bundle::certs;
mod dependencies;
pub mod drift;
mod dry_run;
mod executor;
mod flow;
pub mod installer;
pub mod namespace;
pub mod operator_conditions;
pub mod outage;
mod pipeline;
pub mod plan;
pub mod prune;
pub mod rollout;
pub mod status;
pub mod triggers;

pub use plan::uninstall::ANNOTATION_KEEP_CRDS;
pub use triggers::{catalog_trigger, extension_trigger};

use crate::api::{ClusterCatalog, ClusterExtension};
use crate::apply::{InstallerClients, RevisionStore};
use crate::bundle::CertProvider;
use crate::content::ContentClient;
use crate::controller::common::{self, Failures};
use crate::controller::workers::{DEFAULT_MAX_CONCURRENT_RECONCILES, Workers};
use crate::image::ImagePuller;
use crate::metrics::{Controller as MetricsController, Metrics};
use futures::StreamExt;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::utils::PredicateConfig;
use kube::runtime::{WatchStreamExt, watcher};
use plan::{Count, Standing, Tally};
use std::sync::Arc;
use std::time::Duration;
use triggers::{changed_only, rbac_events};

/// Settings of the ClusterExtension reconciler.
#[derive(Clone, Debug)]
pub struct ExtensionSettings {
    /// The controller's namespace (revision records live there).
    pub namespace: String,
    pub service_account: Option<String>,
    pub global_pull_secret: Option<String>,
    pub cert_provider: CertProvider,
    /// Length of one minute of `progressDeadlineMinutes` (shorter in tests).
    pub minute: Duration,
    /// How long a rollout in progress is checked every few seconds even while watches
    /// follow it (pod waiting reasons are not watched; `plan::YOUNG_ROLLOUT`, shorter
    /// in tests).
    pub young_rollout: Duration,
    /// The installer of extensions that name no `spec.serviceAccount`; `None`: refuse
    /// them.
    pub default_installer: Option<installer::InstallerAccount>,
    /// What `spec.serviceAccount` means: olmv1's model, or upstream's (ignored) in the
    /// operator-controller role.
    pub service_account_field: installer::ServiceAccountField,
    /// Report `Progressing=True/RollingOut` until what a revision installed is ready
    /// ([`rollout`]); `false`: `Succeeded` as soon as it is applied.
    pub wait_for_rollout: bool,
    /// Longest one install (pull, render, preflights, apply) may take before it is
    /// abandoned and retried (`--install-timeout`; `None`: no deadline). A slow or
    /// hostile registry or bundle then holds a worker for at most this long.
    pub install_timeout: Option<Duration>,
    /// Create a missing `spec.namespace` from the bundle's suggestion for every extension
    /// that does not say `olm.operatorframework.io/create-namespace: "false"`
    /// (`--create-install-namespaces`; [`namespace`]).
    pub create_namespaces: bool,
}

pub struct ExtensionContext {
    pub client: kube::Client,
    pub installers: InstallerClients,
    pub puller: Arc<ImagePuller>,
    pub content: ContentClient,
    pub store: RevisionStore,
    pub recorder: Recorder,
    pub settings: ExtensionSettings,
    /// Watches on the managed kinds that trigger drift correction.
    pub drift: drift::DriftWatches,
    /// Consecutive failures and since when, per extension.
    failures: Failures,
    /// What failed pulls leave for their retries ([`outage`]).
    pub outage: outage::Memos,
    /// The registry credentials of those retries, and when they were read.
    probe_secrets: tokio::sync::Mutex<Option<(std::time::Instant, crate::image::DockerConfig)>>,
    /// Where reconciles report durations, errors and status (metrics hook).
    pub metrics: Arc<Metrics>,
    /// The reconcile worker limit (`--max-concurrent-reconciles`, fair: first come,
    /// first served; see [`crate::controller::workers`]).
    pub workers: Arc<Workers>,
    /// Whether the cluster serves OperatorCondition (discovery, cached).
    pub operator_conditions: operator_conditions::Served,
    /// The ClusterCatalogs resolution reads: those of [`run`]'s catalog watch.
    catalogs: catalogs::CatalogView,
    /// The installed bundle this process last wrote into each extension's status (the
    /// watched object may not show it yet when the next reconcile starts).
    reported: std::sync::Mutex<std::collections::HashMap<String, crate::api::BundleMetadata>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ExtensionError {
    #[error("{0}")]
    Kube(#[from] kube::Error),
}

impl ExtensionContext {
    pub fn new(
        client: kube::Client,
        base_config: kube::Config,
        puller: Arc<ImagePuller>,
        content: ContentClient,
        settings: ExtensionSettings,
    ) -> Self {
        let store = RevisionStore::new(client.clone(), &settings.namespace);
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "olmv1".into(),
                instance: None,
            },
        );
        let drift = drift::DriftWatches::new()
            .with_readiness(settings.wait_for_rollout)
            .with_controller(client.clone());
        ExtensionContext {
            client,
            installers: InstallerClients::new(base_config),
            puller,
            content,
            store,
            recorder,
            settings,
            drift,
            failures: Failures::default(),
            outage: outage::Memos::default(),
            probe_secrets: tokio::sync::Mutex::new(None),
            metrics: Arc::new(Metrics::new()),
            workers: Workers::new(DEFAULT_MAX_CONCURRENT_RECONCILES),
            operator_conditions: operator_conditions::Served::default(),
            catalogs: catalogs::CatalogView::default(),
            reported: Default::default(),
        }
    }

    /// At most `limit` reconciles at once (reported in the worker gauges of `metrics`,
    /// so call [`ExtensionContext::with_metrics`] first).
    pub fn with_max_concurrent_reconciles(mut self, limit: usize) -> Self {
        self.workers = Workers::with_gauges(
            limit,
            self.metrics
                .worker_gauges(MetricsController::clusterextension),
        );
        self
    }

    /// The failure bookkeeping of extension `name` at `generation`, as the plan reads it.
    fn standing(&self, name: &str, generation: Option<i64>) -> Standing {
        let (backoff, pending_for) = self.failures.peek(name, generation);
        Standing {
            pending_for,
            backoff,
            minute: self.settings.minute,
            young: self.settings.young_rollout,
            watched: self.settings.wait_for_rollout && self.drift.follows(name),
            followed: self.drift.listed(name),
        }
    }

    /// Keeps what the failure bookkeeping records of a reconcile of `name` at
    /// `generation`.
    fn settle(&self, name: &str, generation: Option<i64>, tally: &Tally) {
        if let Some(reason) = tally.error {
            self.metrics
                .error(MetricsController::clusterextension, reason);
        }
        if tally.restart {
            self.failures.restart_clock(name);
        }
        if tally.pending {
            self.failures.failing_for(name, generation);
        }
        match tally.count {
            Count::Keep => {}
            Count::Failed => {
                self.failures.next_backoff(name);
            }
            Count::RollingOut => self.failures.reset_backoff(name),
            Count::Succeeded => self.failures.succeeded(name),
        }
    }

    /// The registry credentials for the retries during an outage ([`outage`]): read at
    /// most once per [`outage::SECRETS_MAX_AGE`] for all extensions together.
    async fn probe_secrets(&self) -> crate::image::DockerConfig {
        let mut cached = self.probe_secrets.lock().await;
        if let Some((at, secrets)) = cached.as_ref()
            && at.elapsed() < outage::SECRETS_MAX_AGE
        {
            return secrets.clone();
        }
        let secrets = pipeline::pull_secrets(self).await;
        *cached = Some((std::time::Instant::now(), secrets.clone()));
        secrets
    }

    /// Reports into `metrics` (shared with the rest of the process).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.installers.count_requests(metrics.clone());
        self.metrics = metrics;
        self
    }

    /// Counts what the drift watches do into `counters` ([`drift::Counters`]).
    pub fn with_drift_counters(mut self, counters: drift::Counters) -> Self {
        self.drift = self.drift.with_counters(counters);
        self
    }
}

/// Runs the reconciler until the stream ends.
///
/// What triggers a reconcile, and what does not (so that a controller with hundreds of
/// installed extensions makes no API requests while nothing changes):
/// - a ClusterExtension's spec, finalizers or deletion ([`extension_trigger`]) — not the
///   status the reconciler itself writes;
/// - a ClusterCatalog change that can change resolution ([`catalog_trigger`]: spec,
///   labels, the resolved image, Serving, deletion) re-reconciles every extension — not
///   its `lastUnpacked`/poll bookkeeping;
/// - an RBAC object change re-reconciles only the extensions that are failing (a
///   permission preflight failure is retried at once), never the installed ones;
/// - drift of a managed object ([`drift`]) reconciles its extension.
///
/// The controller itself runs unbounded; each reconcile waits for one of
/// [`ExtensionContext::workers`] (a fair limit, see [`crate::controller::workers`]).
pub async fn run(ctx: Arc<ExtensionContext>) {
    let client = ctx.client.clone();
    let extensions: Api<ClusterExtension> = Api::all(client.clone());
    let (reader, writer) = reflector::store();
    let primary = watcher(extensions, common::watch_config())
        .default_backoff()
        .modify(|e| e.managed_fields_mut().clear())
        .reflect(writer)
        .touched_objects()
        .predicate_filter(extension_trigger, PredicateConfig::default());
    let controller = Controller::for_stream(primary, reader.clone());
    // Every trigger but the extension's own changes moves the epoch ([`outage`]).
    let moved = {
        let ctx = ctx.clone();
        move || ctx.outage.epoch.bump()
    };
    let all = move || {
        reader
            .state()
            .iter()
            .map(|e| ObjectRef::from_obj(e.as_ref()))
            .collect::<Vec<_>>()
    };
    // The catalogs resolution reads ([`catalogs`]): stored before a change triggers.
    let (catalog_reader, catalog_writer) = reflector::store();
    ctx.catalogs.watch_with(catalog_reader);
    let catalogs = changed_only(
        watcher(
            Api::<ClusterCatalog>::all(client.clone()),
            common::watch_config(),
        )
        .default_backoff()
        .modify(|c| c.managed_fields_mut().clear())
        .reflect(catalog_writer),
        catalog_trigger,
    );
    let failing = {
        let (ctx, moved) = (ctx.clone(), moved.clone());
        move || {
            moved();
            ctx.failures
                .failing()
                .into_iter()
                .map(|name| ObjectRef::new(&name))
                .collect::<Vec<_>>()
        }
    };
    let (f1, f2, f3, f4) = (failing.clone(), failing.clone(), failing.clone(), failing);
    controller
        .trigger_backoff(common::TriggerBackoff)
        .watches_stream(catalogs, {
            let moved = moved.clone();
            move |_| {
                moved();
                all()
            }
        })
        .watches_stream(rbac_events::<ClusterRole>(&client), move |_| f1())
        .watches_stream(rbac_events::<ClusterRoleBinding>(&client), move |_| f2())
        .watches_stream(rbac_events::<Role>(&client), move |_| f3())
        .watches_stream(rbac_events::<RoleBinding>(&client), move |_| f4())
        .reconcile_on(ctx.drift.trigger_stream().inspect(move |_| moved()))
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "extension reconcile loop");
            }
        })
        .await;
}

fn error_policy(
    ext: Arc<ClusterExtension>,
    error: &ExtensionError,
    ctx: Arc<ExtensionContext>,
) -> Action {
    let ExtensionError::Kube(e) = error;
    common::log_reconcile_error("ClusterExtension", &ext.name_any(), e);
    ctx.metrics
        .error(MetricsController::clusterextension, "ApiError");
    Action::requeue(ctx.failures.next_backoff(&ext.name_any()))
}

async fn reconcile(
    ext: Arc<ClusterExtension>,
    ctx: Arc<ExtensionContext>,
) -> Result<Action, ExtensionError> {
    let controller = MetricsController::clusterextension;
    // Waits for a worker (FIFO) before anything else: the limit bounds API traffic,
    // pulls and rendered bundles in memory alike.
    let _worker = ctx.workers.start().await;
    let exec = executor::KubeExecutor::new(&ctx, &ext);
    let (name, generation) = (ext.name_any(), ext.metadata.generation);
    let standing = || ctx.standing(&name, generation);
    let reconcile = async {
        if retry_unchanged(&ext, &ctx).await {
            // The same pull failure as last time, nothing else changed: what the full
            // reconcile would write is already written.
            return Ok(Action::requeue(ctx.failures.next_backoff(&name)));
        }
        let reconciled = flow::reconcile(&ext, &exec, standing).await;
        ctx.settle(&name, generation, &reconciled.tally);
        reconciled.result
    };
    // Boxed: the state of a whole reconcile (pull, render, apply) is tens of KiB; a
    // reconcile waiting for a worker — 990 of them when 1,000 extensions re-resolve at
    // once — then holds a pointer, not that state.
    Box::pin(common::instrumented(
        controller,
        &ctx.metrics,
        ext.as_ref(),
        reconcile,
    ))
    .await
}

/// During a registry outage ([`outage`]): whether the retry of `ext` failed on the same
/// pull as the reconcile before it, with nothing else changed. Takes the extension's memo
/// (a full reconcile leaves a new one); keeps it when the retry ends here.
async fn retry_unchanged(ext: &ClusterExtension, ctx: &ExtensionContext) -> bool {
    let name = ext.name_any();
    let Some(memo) = ctx.outage.take(&name) else {
        return false;
    };
    if !outage::probe(&memo, ext, ctx.outage.epoch.now()) {
        return false;
    }
    let secrets = ctx.probe_secrets().await;
    if secrets != memo.secrets {
        return false;
    }
    let pulled = pipeline::pull_with(ctx, &memo.image, &secrets).await;
    let pulled = pulled.map(|_| ()).map_err(|e| match e {
        plan::InstallFailure::Retry(message) => message,
        other => format!("{other:?}"),
    });
    let unchanged = outage::unchanged(&memo, &secrets, &pulled);
    if unchanged {
        ctx.outage.keep(&name, memo);
    }
    unchanged
}

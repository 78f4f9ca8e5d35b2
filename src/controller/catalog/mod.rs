//! The ClusterCatalog reconciler (docs/concepts/catalogs.md §9.1): keeps the
//! `olm.operatorframework.io/metadata.name` label right, holds the
//! `delete-server-cache` finalizer, pulls the catalog image (tag → digest; only the
//! directory named by the configs label), ingests it into the catalog store served by
//! [`crate::server::catalog`], reports status, and polls tags at
//! `pollIntervalMinutes` with jitter, re-ingesting only when the digest changed. On
//! any error the content already being served stays served. On replicas that are not
//! the leader, [`follower`] keeps the same store in sync with what the leader published.
//!
//! Written like the ClusterExtension reconciler: `plan::decide` takes the next step
//! from the `plan::Facts` of the catalog (pure, with the content and failure decisions
//! beside it), and the executor does its I/O; [`status`] says what the status becomes.

mod executor;
pub mod extras;
pub mod follower;
mod plan;
pub mod status;

pub use plan::{poll_delay, poll_minutes};

use crate::api::{self, AvailabilityMode, ClusterCatalog};
use crate::controller::common::{self, Failures};
use crate::fbc;
use crate::image::ImagePuller;
use crate::metrics::{Controller as MetricsController, Metrics};
use executor::CatalogExecutor;
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::{Resource, ResourceExt};
use plan::{Current, Facts, Plan};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Settings of the ClusterCatalog reconciler.
#[derive(Clone, Debug)]
pub struct CatalogSettings {
    /// Where ingested catalogs are stored (what the catalog server serves).
    pub storage_dir: PathBuf,
    /// `<scheme>://<external address>`; `urls.base` is this plus `/catalogs/<name>`.
    pub base_url: String,
    /// Length of one `pollIntervalMinutes` unit (a minute; shorter in tests).
    pub poll_unit: Duration,
    /// Namespace of the controller (global pull secret, its ServiceAccount).
    pub namespace: String,
    /// The controller's ServiceAccount, whose `imagePullSecrets` are used.
    pub service_account: Option<String>,
    /// A `kubernetes.io/dockerconfigjson` Secret in `namespace` used for every pull.
    pub global_pull_secret: Option<String>,
    /// Refuse catalogs that break FBC invariants. Off by default: like catalogd, such
    /// catalogs are stored and served, and the violations are reported in a Warning
    /// Event ([`status::REASON_INVALID_CONTENT`]).
    pub strict: bool,
    pub limits: fbc::parse::Limits,
}

/// What the reconciler remembers of a catalog between reconciles (the follower records
/// what it stored the same way, so that a new leader starts warm).
#[derive(Clone, Debug)]
struct Record {
    /// The generation the stored content was resolved for.
    generation: Option<i64>,
    spec_ref: String,
    /// The digest-pinned reference whose content is stored.
    resolved_ref: String,
    last_unpacked: Time,
    /// The last tag resolution; `None`: poll at the next reconcile.
    last_poll: Option<Instant>,
}

pub struct CatalogContext {
    pub client: kube::Client,
    pub puller: Arc<ImagePuller>,
    pub settings: CatalogSettings,
    records: Mutex<HashMap<String, Record>>,
    failures: Failures,
    /// Where reconciles report durations, errors and status (metrics hook).
    pub metrics: Arc<Metrics>,
    /// Publishes the Warning Events about invariant violations of stored content.
    recorder: Recorder,
    /// Told when the local store has caught up (this replica may then be ready).
    pub readiness: crate::server::health::Readiness,
    /// One ingest (parse, validate, index, store) at a time, first come first served:
    /// the ingest peak does not add up over catalogs. Pulls and tag polls stay
    /// concurrent (a slow registry holds no other catalog back).
    ingests: Arc<tokio::sync::Semaphore>,
    /// What is written after a catalog is Serving ([`extras`]).
    pub extras: extras::Extras,
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("{0}")]
    Kube(#[from] kube::Error),
}

impl CatalogContext {
    pub fn new(client: kube::Client, puller: Arc<ImagePuller>, settings: CatalogSettings) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "olmv1".into(),
                instance: None,
            },
        );
        CatalogContext {
            recorder,
            readiness: Default::default(),
            client,
            puller,
            settings,
            records: Mutex::default(),
            failures: Failures::default(),
            metrics: Arc::new(Metrics::new()),
            ingests: Arc::new(tokio::sync::Semaphore::new(1)),
            extras: extras::Extras::default(),
        }
    }

    /// Tells `readiness` when the local store has caught up.
    pub fn with_readiness(mut self, readiness: crate::server::health::Readiness) -> Self {
        self.readiness = readiness;
        self
    }

    /// Reports into `metrics` (shared with the rest of the process).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    fn record(&self, name: &str) -> Option<Record> {
        self.records.lock().ok().and_then(|r| r.get(name).cloned())
    }

    fn set_record(&self, name: &str, record: Option<Record>) {
        if let Ok(mut records) = self.records.lock() {
            match record {
                Some(r) => records.insert(name.to_string(), r),
                None => records.remove(name),
            };
        }
    }
}

/// Runs the reconciler until the stream ends (it does not on its own).
pub async fn run(ctx: Arc<CatalogContext>) {
    let api: Api<ClusterCatalog> = Api::all(ctx.client.clone());
    Controller::new(api, common::watch_config())
        .trigger_backoff(common::TriggerBackoff)
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "catalog reconcile loop");
            }
        })
        .await;
}

fn error_policy(
    catalog: Arc<ClusterCatalog>,
    error: &CatalogError,
    ctx: Arc<CatalogContext>,
) -> Action {
    ctx.metrics
        .error(MetricsController::clustercatalog, "ApiError");
    let CatalogError::Kube(e) = error;
    common::log_reconcile_error("ClusterCatalog", &catalog.name_any(), e);
    Action::requeue(ctx.failures.next_backoff(&catalog.name_any()))
}

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

async fn reconcile(
    catalog: Arc<ClusterCatalog>,
    ctx: Arc<CatalogContext>,
) -> Result<Action, CatalogError> {
    let metrics = ctx.metrics.clone();
    let controller = MetricsController::clustercatalog;
    // started at once (no worker limit): in the work-queue families as running
    let _running = metrics
        .upstream
        .work_queue(controller.name())
        .enqueue()
        .start();
    let object = catalog.clone();
    common::instrumented(
        controller,
        &metrics,
        object.as_ref(),
        reconcile_catalog(catalog, ctx),
    )
    .await
}

/// What is known of `catalog` at the start of a reconcile.
fn facts<'a>(catalog: &'a ClusterCatalog, ctx: &CatalogContext) -> Facts<'a> {
    let name = catalog.name_any();
    let content = catalog.spec.source.image.as_ref().map(|image| Current {
        generation: catalog.meta().generation,
        spec_ref: &image.ref_,
        content_present: fbc::store::current_dir(&ctx.settings.storage_dir, &name).is_some(),
        status_resolved: catalog
            .status
            .as_ref()
            .and_then(|s| s.resolved_source.as_ref())
            .map(|r| r.image.ref_.as_str()),
        poll: poll_minutes(&image.ref_, image.poll_interval_minutes),
    });
    Facts {
        deleting: catalog.meta().deletion_timestamp.is_some(),
        labelled: catalog.labels().get(api::LABEL_METADATA_NAME) == Some(&name),
        unavailable: catalog.spec.availability_mode == AvailabilityMode::Unavailable,
        finalized: catalog
            .finalizers()
            .iter()
            .any(|f| f == api::FINALIZER_CATALOG),
        content,
        record: ctx.record(&name),
    }
}

/// One reconcile: `plan::decide` says the next step, the [`CatalogExecutor`] does it.
async fn reconcile_catalog(
    catalog: Arc<ClusterCatalog>,
    ctx: Arc<CatalogContext>,
) -> Result<Action, CatalogError> {
    let exec = CatalogExecutor::new(&catalog, &ctx);
    let mut facts = facts(&catalog, &ctx);
    loop {
        let done = match plan::decide(&facts, ctx.settings.poll_unit) {
            Plan::Label => {
                exec.label().await?;
                facts.labelled = true;
                continue;
            }
            Plan::Delete => exec.delete().await,
            Plan::MakeUnavailable => exec.make_unavailable().await,
            Plan::AddFinalizer => exec.add_finalizer().await,
            Plan::NoImage => exec.no_image().await,
            Plan::Content(next, current) => {
                exec.content(next, &current, facts.record.clone()).await
            }
        };
        return done;
    }
}

#[cfg(test)]
mod tests;

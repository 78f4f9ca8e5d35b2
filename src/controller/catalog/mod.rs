//! The ClusterCatalog reconciler (docs/catalogs.md §9.1): keeps the
//! `olm.operatorframework.io/metadata.name` label right, holds the
//! `delete-server-cache` finalizer, pulls the catalog image (tag → digest; only the
//! directory named by the configs label), ingests it into the catalog store served by
//! [`crate::server::catalog`], reports status, and polls tags at
//! `pollIntervalMinutes` with jitter, re-ingesting only when the digest changed. On
//! any error the content already being served stays served. On replicas that are not
//! the leader, [`follower`] keeps the same store in sync with what the leader published.

pub mod follower;
pub mod status;

use crate::api::{self, AvailabilityMode, ClusterCatalog};
use crate::controller::common::{self, Failures};
use crate::fbc::{self, FbcError};
use crate::image::{DockerConfig, Extract, ImageError, ImagePuller, PulledImage};
use crate::metrics::{Controller as MetricsController, Metrics};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Resource, ResourceExt};
use serde_json::json;
use status::Outcome;
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
        }
    }

    /// Reports into `metrics` (shared with the rest of the process).
    pub fn with_readiness(mut self, readiness: crate::server::health::Readiness) -> Self {
        self.readiness = readiness;
        self
    }

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

/// The poll interval that applies: none for digest references (their content cannot
/// change; the CRD also rejects `pollIntervalMinutes` with a digest) and none when unset.
pub fn poll_minutes(spec_ref: &str, poll_interval_minutes: Option<i32>) -> Option<i32> {
    if spec_ref.contains('@') {
        None
    } else {
        poll_interval_minutes
    }
}

/// `pollIntervalMinutes` × unit, stretched by up to 1% so that catalogs do not poll
/// in lock-step.
pub fn poll_delay(minutes: i32, unit: Duration, jitter: f64) -> Duration {
    let base = unit.saturating_mul(minutes.max(1) as u32);
    base.mul_f64(1.0 + jitter.clamp(0.0, 0.01))
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
    let object = catalog.clone();
    common::instrumented(
        controller,
        &metrics,
        object.as_ref(),
        reconcile_catalog(catalog, ctx),
    )
    .await
}

async fn reconcile_catalog(
    catalog: Arc<ClusterCatalog>,
    ctx: Arc<CatalogContext>,
) -> Result<Action, CatalogError> {
    let api: Api<ClusterCatalog> = Api::all(ctx.client.clone());
    if let Some(done) = lifecycle(&api, &catalog, &ctx).await? {
        return Ok(done);
    }
    let Some(image) = catalog.spec.source.image.as_ref() else {
        let outcome = Outcome::Failed {
            message: "image is required when source type is Image".into(),
            terminal: true,
        };
        write_status(&ctx.metrics, &api, &catalog, &outcome).await?;
        return Ok(Action::await_change());
    };
    let name = catalog.name_any();
    let spec_ref = image.ref_.clone();
    let poll = poll_minutes(&spec_ref, image.poll_interval_minutes);
    let record = ctx.record(&name);
    let content_present = fbc::store::current_dir(&ctx.settings.storage_dir, &name).is_some();
    let status_resolved = catalog
        .status
        .as_ref()
        .and_then(|s| s.resolved_source.as_ref())
        .map(|r| r.image.ref_.clone());

    // Decide whether anything must be pulled (docs/catalogs.md §9.1 step 3).
    let current = Current {
        generation: catalog.meta().generation,
        spec_ref: &spec_ref,
        content_present,
        status_resolved: status_resolved.as_deref(),
        poll,
    };
    let next = next_step(record.as_ref(), &current, ctx.settings.poll_unit);
    if next != Next::Pull
        && let Some(status) = &catalog.status
    {
        // The status is current: report it (a new leader has not written it itself).
        ctx.metrics.catalog_status(&name, status);
    }
    if let Next::Wait(wait) = next {
        return Ok(wait
            .map(Action::requeue)
            .unwrap_or_else(Action::await_change));
    }
    if let (Next::Poll, Some(r)) = (&next, &record) {
        // Poll: one manifest request; unchanged digest ⇒ nothing to do.
        let secrets = pull_secrets(&ctx).await;
        match ctx.puller.resolve(&spec_ref, &secrets).await {
            Ok(resolved) if resolved == r.resolved_ref => {
                let polled = Record {
                    last_poll: Some(Instant::now()),
                    ..r.clone()
                };
                ctx.set_record(&name, Some(polled));
                ctx.failures.succeeded(&name);
                return Ok(requeue(&ctx, poll));
            }
            Ok(_) => {
                tracing::info!(catalog = %name, "the image tag moved to a new digest; unpacking it")
            }
            Err(e) => return fail(&api, &catalog, &ctx, &spec_ref, Failure::Image(e)).await,
        }
    }
    let reusable = record.filter(|_| content_present);
    unpack(&api, &catalog, &ctx, &current, reusable).await
}

/// Deletion, the metadata.name label, `availabilityMode: Unavailable` and the
/// finalizer; `Some` when the reconcile ends here.
async fn lifecycle(
    api: &Api<ClusterCatalog>,
    catalog: &ClusterCatalog,
    ctx: &CatalogContext,
) -> Result<Option<Action>, CatalogError> {
    let name = catalog.name_any();
    if catalog.meta().deletion_timestamp.is_some() {
        remove_content(ctx, &name);
        write_status(&ctx.metrics, api, catalog, &Outcome::Deleted).await?;
        common::remove_finalizer(api, catalog, api::FINALIZER_CATALOG).await?;
        return Ok(Some(Action::await_change()));
    }
    // The label users select catalogs by is always present and right.
    if catalog.labels().get(api::LABEL_METADATA_NAME) != Some(&name) {
        let patch = json!({"metadata": {"labels": {api::LABEL_METADATA_NAME: name}}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    if catalog.spec.availability_mode == AvailabilityMode::Unavailable {
        remove_content(ctx, &name);
        // Nothing is left to clean up: the finalizer goes before the status says so.
        common::remove_finalizer(api, catalog, api::FINALIZER_CATALOG).await?;
        write_status(&ctx.metrics, api, catalog, &Outcome::Unavailable).await?;
        return Ok(Some(Action::await_change()));
    }
    if common::add_finalizer(api, catalog, api::FINALIZER_CATALOG).await? {
        return Ok(Some(Action::requeue(Duration::ZERO)));
    }
    Ok(None)
}

/// The next reconcile: at the poll interval (with jitter), or on a change only.
fn requeue(ctx: &CatalogContext, poll: Option<i32>) -> Action {
    match poll {
        Some(minutes) => Action::requeue(poll_delay(
            minutes,
            ctx.settings.poll_unit,
            rand::random::<f64>() * 0.01,
        )),
        None => Action::await_change(),
    }
}

/// Pulls the image and stores its catalog (unless `reusable`, the record of the content
/// still stored, names the same digest), then reports it as served.
async fn unpack(
    api: &Api<ClusterCatalog>,
    catalog: &ClusterCatalog,
    ctx: &CatalogContext,
    current: &Current<'_>,
    reusable: Option<Record>,
) -> Result<Action, CatalogError> {
    let name = catalog.name_any();
    let spec_ref = current.spec_ref;
    let started = Instant::now();
    let pulled = match pull_content(ctx, spec_ref).await {
        Ok(p) => p,
        Err(e) => return fail(api, catalog, ctx, spec_ref, Failure::Image(e)).await,
    };
    let last_unpacked = match reusable.filter(|r| r.resolved_ref == pulled.reference) {
        Some(r) => r.last_unpacked,
        None => match store_content(ctx, &name, &pulled, started).await {
            Ok((last_unpacked, warnings)) => {
                // Once per newly stored content, not on every reconcile.
                if let Some(message) = status::invariant_warnings_message(&warnings) {
                    warn_event(ctx, catalog, message).await;
                }
                last_unpacked
            }
            Err(e) => return fail(api, catalog, ctx, spec_ref, Failure::Store(e)).await,
        },
    };
    let outcome = Outcome::Serving {
        resolved_ref: pulled.reference.clone(),
        base_url: format!(
            "{}/catalogs/{name}",
            ctx.settings.base_url.trim_end_matches('/')
        ),
        last_unpacked: last_unpacked.clone(),
    };
    write_status(&ctx.metrics, api, catalog, &outcome).await?;
    let record = Record {
        generation: current.generation,
        spec_ref: spec_ref.to_string(),
        resolved_ref: pulled.reference.clone(),
        last_unpacked,
        last_poll: Some(Instant::now()),
    };
    ctx.set_record(&name, Some(record));
    ctx.failures.succeeded(&name);
    Ok(requeue(ctx, current.poll))
}

/// What is known of a catalog at a reconcile, for [`next_step`].
#[derive(Clone, Debug)]
struct Current<'a> {
    generation: Option<i64>,
    spec_ref: &'a str,
    content_present: bool,
    /// `status.resolvedSource.image.ref`.
    status_resolved: Option<&'a str>,
    /// The poll interval in effect ([`poll_minutes`]).
    poll: Option<i32>,
}

/// What a reconcile does about content.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Next {
    /// Pull the spec's reference (the stored digest is reused if it did not change).
    Pull,
    /// Resolve the tag; pull only if it moved.
    Poll,
    /// Nothing now; look again after the duration (a poll), or on a change.
    Wait(Option<Duration>),
}

/// Decides from the remembered `record` (the reconciler's, or the follower's on a new
/// leader) whether the stored content is that of the current spec and status — then
/// nothing is pulled, only the tag polled when due (a record without a last poll is
/// due at once) — or the image must be pulled.
fn next_step(record: Option<&Record>, current: &Current<'_>, unit: Duration) -> Next {
    let Some(r) = record else {
        return Next::Pull;
    };
    if r.generation != current.generation
        || r.spec_ref != current.spec_ref
        || !current.content_present
        || current.status_resolved != Some(r.resolved_ref.as_str())
    {
        return Next::Pull;
    }
    let Some(minutes) = current.poll else {
        return Next::Wait(None);
    };
    let interval = poll_delay(minutes, unit, 0.0);
    match r.last_poll.map(|t| t.elapsed()) {
        Some(since) if since < interval => Next::Wait(Some(interval - since)),
        _ => Next::Poll,
    }
}

/// Pulls the catalog content of `reference` (only the configs directory) with the
/// controller's pull secrets.
async fn pull_content(ctx: &CatalogContext, reference: &str) -> Result<PulledImage, ImageError> {
    let secrets = pull_secrets(ctx).await;
    ctx.puller
        .pull(reference, &Extract::CatalogConfigs, &secrets)
        .await
}

/// Publishes a Warning Event on `catalog`; a failure to publish is logged, never fails
/// the reconcile.
async fn warn_event(ctx: &CatalogContext, catalog: &ClusterCatalog, message: String) {
    let event = Event {
        type_: EventType::Warning,
        reason: status::REASON_INVALID_CONTENT.into(),
        note: Some(message),
        action: "Store".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &catalog.object_ref(&())).await {
        tracing::debug!(error = %e, "publishing event");
    }
}

/// Parses, validates and stores pulled catalog content as `name` (the blocking work runs
/// off the runtime and always completes once started), logs and reports it; returns
/// `lastUnpacked` (the stored file's time, in whole seconds) and the FBC invariant
/// violations of the stored content. On error the content served before stays.
async fn store_content(
    ctx: &CatalogContext,
    name: &str,
    pulled: &PulledImage,
    started: Instant,
) -> Result<(Time, Vec<String>), FbcError> {
    let storage = ctx.settings.storage_dir.clone();
    let options = fbc::store::StoreOptions {
        limits: ctx.settings.limits.clone(),
        strict: ctx.settings.strict,
    };
    let (catalog_name, dir) = (name.to_string(), pulled.dir.clone());
    // One ingest at a time (the semaphore is never closed; were it, ingests would run
    // unbounded rather than stop).
    let permit = ctx.ingests.clone().acquire_owned().await.ok();
    // The cache GC leaves the catalog's directories alone while it is stored.
    let lease = ctx
        .puller
        .leases()
        .acquire(crate::image::gc::catalog_key(name));
    let stored = tokio::task::spawn_blocking(move || {
        let stored = fbc::store::store_with_options(&storage, &catalog_name, &dir, &options);
        drop((lease, permit));
        stored
    })
    .await
    .map_err(|e| FbcError::Limit {
        message: format!("ingest task failed: {e}"),
    })??;
    for warning in &stored.warnings {
        tracing::warn!(catalog = %name, warning, "catalog stored with an FBC invariant violation (catalogd does not check them)");
    }
    tracing::info!(
        catalog = %name,
        image = %pulled.reference,
        bytes = stored.size,
        blobs = stored.blobs,
        millis = started.elapsed().as_millis() as u64,
        "catalog content stored"
    );
    ctx.metrics
        .catalog_ingested(name, started.elapsed(), stored.size);
    Ok((
        status::truncate_to_seconds(stored.last_modified),
        stored.warnings,
    ))
}

enum Failure {
    Image(ImageError),
    Store(FbcError),
}

/// Reports a failure in `Progressing` and schedules the retry. Content problems of an
/// image pinned by digest cannot fix themselves: they are terminal (`Blocked`).
async fn fail(
    api: &Api<ClusterCatalog>,
    catalog: &ClusterCatalog,
    ctx: &CatalogContext,
    spec_ref: &str,
    failure: Failure,
) -> Result<Action, CatalogError> {
    let name = catalog.name_any();
    ctx.set_record(&name, None);
    let by_digest = spec_ref.contains('@');
    let (message, terminal) = match &failure {
        Failure::Image(ImageError::InvalidReference { .. } | ImageError::Blocked { .. }) => {
            (failure_message(&failure), true)
        }
        // Content problems of an image pinned by digest never fix themselves; credentials,
        // missing images and registry trouble can.
        Failure::Image(e) => (
            failure_message(&failure),
            by_digest
                && matches!(
                    e,
                    ImageError::MissingLabel { .. }
                        | ImageError::LabelOutsideImage { .. }
                        | ImageError::DirectoryMissing { .. }
                        | ImageError::UnsafeEntry { .. }
                        | ImageError::LimitExceeded { .. }
                        | ImageError::ManifestTooLarge { .. }
                        | ImageError::Unsupported { .. }
                ),
        ),
        Failure::Store(FbcError::Io { .. }) => (failure_message(&failure), false),
        Failure::Store(_) => (failure_message(&failure), by_digest),
    };
    tracing::warn!(catalog = %name, terminal, error = %message, "catalog not updated");
    ctx.metrics.error(
        MetricsController::clustercatalog,
        match &failure {
            Failure::Image(ImageError::InvalidReference { .. }) => "InvalidImageReference",
            Failure::Image(_) => "ImagePullFailed",
            Failure::Store(_) => "StoreFailed",
        },
    );
    write_status(
        &ctx.metrics,
        api,
        catalog,
        &Outcome::Failed { message, terminal },
    )
    .await?;
    if terminal {
        return Ok(Action::await_change());
    }
    Ok(Action::requeue(ctx.failures.next_backoff(&name)))
}

fn failure_message(failure: &Failure) -> String {
    match failure {
        Failure::Image(e) => format!("source catalog content: {e}"),
        Failure::Store(e) => format!("error storing fbc: {e}"),
    }
}

fn remove_content(ctx: &CatalogContext, name: &str) {
    ctx.set_record(name, None);
    if let Err(e) = fbc::store::delete(&ctx.settings.storage_dir, name) {
        tracing::warn!(catalog = %name, error = %e, "removing stored catalog content");
    }
}

async fn write_status(
    metrics: &Metrics,
    api: &Api<ClusterCatalog>,
    catalog: &ClusterCatalog,
    outcome: &Outcome,
) -> Result<(), CatalogError> {
    let current = catalog.status.clone().unwrap_or_default();
    let next = status::next_status(&current, outcome, catalog.meta().generation, &now());
    match outcome {
        Outcome::Deleted => metrics.forget_catalog(&catalog.name_any()),
        _ => metrics.catalog_status(&catalog.name_any(), &next),
    }
    common::write_status(api, catalog, &current, &next).await?;
    Ok(())
}

/// The pull secrets of the catalog controller ([`crate::controller::pull_secrets`]).
pub async fn pull_secrets(ctx: &CatalogContext) -> DockerConfig {
    let settings = &ctx.settings;
    crate::controller::pull_secrets::read(
        &ctx.client,
        &settings.namespace,
        settings.service_account.as_deref(),
        settings.global_pull_secret.as_deref(),
    )
    .await
}

#[cfg(test)]
mod tests;

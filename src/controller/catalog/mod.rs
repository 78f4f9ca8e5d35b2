//! The ClusterCatalog reconciler (reference §9.1): keeps the
//! `olm.operatorframework.io/metadata.name` label right, holds the
//! `delete-server-cache` finalizer, pulls the catalog image (tag → digest; only the
//! directory named by the configs label), ingests it into the catalog store served by
//! [`crate::server::catalog`], reports status, and polls tags at
//! `pollIntervalMinutes` with jitter, re-ingesting only when the digest changed. On
//! any error the content already being served stays served. On replicas that are not
//! the leader, [`follower`] keeps the same store in sync with what the leader published.

pub mod follower;
pub mod status;

use crate::api::{self, AvailabilityMode, ClusterCatalog, ClusterCatalogStatus};
use crate::fbc::{self, FbcError};
use crate::image::{DockerConfig, Extract, ImageError, ImagePuller, PulledImage};
use crate::metrics::{Controller as MetricsController, Metrics};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;
use status::Outcome;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::Instrument;

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
    /// Store catalogs that break FBC invariants (as catalogd does), with a warning.
    pub lenient: bool,
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
    failures: Mutex<HashMap<String, u32>>,
    /// Where reconciles report durations, errors and status (metrics hook).
    pub metrics: Arc<Metrics>,
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("{0}")]
    Kube(#[from] kube::Error),
}

impl CatalogContext {
    pub fn new(client: kube::Client, puller: Arc<ImagePuller>, settings: CatalogSettings) -> Self {
        CatalogContext {
            client,
            puller,
            settings,
            records: Mutex::default(),
            failures: Mutex::default(),
            metrics: Arc::new(Metrics::new()),
        }
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

    fn next_failure(&self, name: &str) -> u32 {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let n = failures.entry(name.to_string()).or_default();
        *n = n.saturating_add(1);
        *n
    }

    fn clear_failures(&self, name: &str) {
        if let Ok(mut failures) = self.failures.lock() {
            failures.remove(name);
        }
    }
}

/// Runs the reconciler until the stream ends (it does not on its own).
pub async fn run(ctx: Arc<CatalogContext>) {
    let api: Api<ClusterCatalog> = Api::all(ctx.client.clone());
    Controller::new(api, watcher::Config::default())
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
    let n = ctx.next_failure(&catalog.name_any());
    ctx.metrics
        .error(MetricsController::clustercatalog, "ApiError");
    tracing::warn!(catalog = %catalog.name_any(), error = %error, "reconcile failed");
    Action::requeue(crate::controller::backoff(n))
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
    let span = tracing::info_span!("reconcile", catalog = %catalog.name_any());
    let (started, metrics) = (Instant::now(), ctx.metrics.clone());
    let result = reconcile_catalog(catalog, ctx).instrument(span).await;
    metrics.reconciled(MetricsController::clustercatalog, started.elapsed());
    result
}

async fn reconcile_catalog(
    catalog: Arc<ClusterCatalog>,
    ctx: Arc<CatalogContext>,
) -> Result<Action, CatalogError> {
    let name = catalog.name_any();
    let api: Api<ClusterCatalog> = Api::all(ctx.client.clone());

    if catalog.meta().deletion_timestamp.is_some() {
        remove_content(&ctx, &name);
        write_status(&ctx.metrics, &api, &catalog, &Outcome::Deleted).await?;
        remove_finalizer(&api, &catalog).await?;
        return Ok(Action::await_change());
    }

    // The label users select catalogs by is always present and right.
    if catalog.labels().get(api::LABEL_METADATA_NAME) != Some(&name) {
        let patch = json!({"metadata": {"labels": {api::LABEL_METADATA_NAME: name}}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }

    if catalog.spec.availability_mode == AvailabilityMode::Unavailable {
        remove_content(&ctx, &name);
        // Nothing is left to clean up: the finalizer goes before the status says so.
        remove_finalizer(&api, &catalog).await?;
        write_status(&ctx.metrics, &api, &catalog, &Outcome::Unavailable).await?;
        return Ok(Action::await_change());
    }

    if !catalog
        .finalizers()
        .iter()
        .any(|f| f == api::FINALIZER_CATALOG)
    {
        let mut finalizers = catalog.finalizers().to_vec();
        finalizers.push(api::FINALIZER_CATALOG.to_string());
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": catalog.resource_version()}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        return Ok(Action::requeue(Duration::ZERO));
    }

    let Some(image) = catalog.spec.source.image.as_ref() else {
        let outcome = Outcome::Failed {
            message: "image is required when source type is Image".into(),
            terminal: true,
        };
        write_status(&ctx.metrics, &api, &catalog, &outcome).await?;
        return Ok(Action::await_change());
    };
    let spec_ref = image.ref_.clone();
    let poll = poll_minutes(&spec_ref, image.poll_interval_minutes);
    let generation = catalog.meta().generation;
    let record = ctx.record(&name);
    let content_present = fbc::store::current_dir(&ctx.settings.storage_dir, &name).is_some();
    let status_resolved = catalog
        .status
        .as_ref()
        .and_then(|s| s.resolved_source.as_ref())
        .map(|r| r.image.ref_.clone());
    let requeue = |ctx: &CatalogContext| match poll {
        Some(minutes) => Action::requeue(poll_delay(
            minutes,
            ctx.settings.poll_unit,
            rand::random::<f64>() * 0.01,
        )),
        None => Action::await_change(),
    };

    // Decide whether anything must be pulled (reference §9.1 step 3).
    let current = Current {
        generation,
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
                ctx.set_record(
                    &name,
                    Some(Record {
                        last_poll: Some(Instant::now()),
                        ..r.clone()
                    }),
                );
                ctx.clear_failures(&name);
                return Ok(requeue(&ctx));
            }
            Ok(_) => {
                tracing::info!(catalog = %name, "the image tag moved to a new digest; unpacking it")
            }
            Err(e) => return fail(&api, &catalog, &ctx, &spec_ref, Failure::Image(e)).await,
        }
    }

    let started = Instant::now();
    let pulled = match pull_content(&ctx, &spec_ref).await {
        Ok(p) => p,
        Err(e) => return fail(&api, &catalog, &ctx, &spec_ref, Failure::Image(e)).await,
    };
    let reused = record
        .as_ref()
        .is_some_and(|r| r.resolved_ref == pulled.reference)
        && content_present;
    let last_unpacked = if reused {
        record
            .as_ref()
            .map(|r| r.last_unpacked.clone())
            .unwrap_or_else(now)
    } else {
        match store_content(&ctx, &name, &pulled, started).await {
            Ok(last_unpacked) => last_unpacked,
            Err(e) => return fail(&api, &catalog, &ctx, &spec_ref, Failure::Store(e)).await,
        }
    };
    let outcome = Outcome::Serving {
        resolved_ref: pulled.reference.clone(),
        base_url: format!(
            "{}/catalogs/{name}",
            ctx.settings.base_url.trim_end_matches('/')
        ),
        last_unpacked: last_unpacked.clone(),
    };
    write_status(&ctx.metrics, &api, &catalog, &outcome).await?;
    ctx.set_record(
        &name,
        Some(Record {
            generation,
            spec_ref: spec_ref.clone(),
            resolved_ref: pulled.reference.clone(),
            last_unpacked,
            last_poll: Some(Instant::now()),
        }),
    );
    ctx.clear_failures(&name);
    Ok(requeue(&ctx))
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

/// Parses, validates and stores pulled catalog content as `name` (the blocking work runs
/// off the runtime and always completes once started), logs and reports it; returns
/// `lastUnpacked` (the stored file's time, in whole seconds). On error the content
/// served before stays.
async fn store_content(
    ctx: &CatalogContext,
    name: &str,
    pulled: &PulledImage,
    started: Instant,
) -> Result<Time, FbcError> {
    let storage = ctx.settings.storage_dir.clone();
    let options = fbc::store::StoreOptions {
        limits: ctx.settings.limits.clone(),
        lenient: ctx.settings.lenient,
    };
    let (catalog_name, dir) = (name.to_string(), pulled.dir.clone());
    let stored = tokio::task::spawn_blocking(move || {
        fbc::store::store_with_options(&storage, &catalog_name, &dir, &options)
    })
    .await
    .map_err(|e| FbcError::Limit {
        message: format!("ingest task failed: {e}"),
    })??;
    for warning in &stored.warnings {
        tracing::warn!(catalog = %name, warning, "catalog stored despite an invariant violation");
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
    Ok(status::truncate_to_seconds(stored.last_modified))
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
        Failure::Image(ImageError::InvalidReference { .. }) => (failure_message(&failure), true),
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
    Ok(Action::requeue(crate::controller::backoff(
        ctx.next_failure(&name),
    )))
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
    if next == current {
        return Ok(());
    }
    put_status(api, catalog, &next).await
}

async fn put_status(
    api: &Api<ClusterCatalog>,
    catalog: &ClusterCatalog,
    status: &ClusterCatalogStatus,
) -> Result<(), CatalogError> {
    let patch = json!({
        "apiVersion": "olm.operatorframework.io/v1",
        "kind": "ClusterCatalog",
        "status": status,
    });
    api.patch_status(
        &catalog.name_any(),
        &PatchParams::apply(crate::apply::FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

async fn remove_finalizer(
    api: &Api<ClusterCatalog>,
    catalog: &ClusterCatalog,
) -> Result<(), CatalogError> {
    if !catalog
        .finalizers()
        .iter()
        .any(|f| f == api::FINALIZER_CATALOG)
    {
        return Ok(());
    }
    let finalizers: Vec<&String> = catalog
        .finalizers()
        .iter()
        .filter(|f| *f != api::FINALIZER_CATALOG)
        .collect();
    let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": catalog.resource_version()}});
    match api
        .patch(
            &catalog.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The pull secrets of the catalog controller (see [`crate::controller::pull_secrets`]).
pub async fn pull_secrets(ctx: &CatalogContext) -> DockerConfig {
    let settings = &ctx.settings;
    crate::controller::pull_secrets(
        &ctx.client,
        &settings.namespace,
        settings.service_account.as_deref(),
        settings.global_pull_secret.as_deref(),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        use crate::controller::backoff;
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(5), Duration::from_secs(16));
        assert_eq!(backoff(50), Duration::from_secs(30));
    }

    #[test]
    fn digest_refs_never_poll() {
        assert_eq!(poll_minutes("quay.io/c@sha256:0123", Some(5)), None);
        assert_eq!(poll_minutes("quay.io/c:latest", Some(5)), Some(5));
        assert_eq!(poll_minutes("quay.io/c:latest", None), None);
    }

    fn record(last_poll: Option<Instant>) -> Record {
        Record {
            generation: Some(2),
            spec_ref: "r.io/c:latest".into(),
            resolved_ref: "r.io/c@sha256:1111".into(),
            last_unpacked: now(),
            last_poll,
        }
    }

    fn current(poll: Option<i32>) -> Current<'static> {
        Current {
            generation: Some(2),
            spec_ref: "r.io/c:latest",
            content_present: true,
            status_resolved: Some("r.io/c@sha256:1111"),
            poll,
        }
    }

    #[test]
    fn stored_content_of_the_current_status_is_not_pulled_again() {
        let unit = Duration::from_secs(60);
        // A record the follower left (no poll yet): nothing to pull; a tag is polled now.
        assert_eq!(
            next_step(Some(&record(None)), &current(None), unit),
            Next::Wait(None)
        );
        assert_eq!(
            next_step(Some(&record(None)), &current(Some(5)), unit),
            Next::Poll
        );
        let polled = record(Some(Instant::now()));
        match next_step(Some(&polled), &current(Some(5)), unit) {
            Next::Wait(Some(d)) => assert!(
                d <= Duration::from_secs(300) && d > Duration::from_secs(290),
                "{d:?}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn anything_out_of_date_is_pulled() {
        let unit = Duration::from_secs(60);
        let r = record(None);
        assert_eq!(next_step(None, &current(None), unit), Next::Pull);
        let changed = [
            Current {
                generation: Some(3),
                ..current(None)
            },
            Current {
                spec_ref: "r.io/c:v2",
                ..current(None)
            },
            Current {
                content_present: false,
                ..current(None)
            },
            Current {
                status_resolved: Some("r.io/c@sha256:2222"),
                ..current(None)
            },
            Current {
                status_resolved: None,
                ..current(None)
            },
        ];
        for c in changed {
            assert_eq!(next_step(Some(&r), &c, unit), Next::Pull, "{c:?}");
        }
    }

    #[test]
    fn poll_jitter_is_at_most_one_percent() {
        let unit = Duration::from_secs(60);
        assert_eq!(poll_delay(10, unit, 0.0), Duration::from_secs(600));
        assert_eq!(poll_delay(10, unit, 0.01), Duration::from_secs(606));
        assert_eq!(poll_delay(10, unit, 0.5), Duration::from_secs(606));
    }
}

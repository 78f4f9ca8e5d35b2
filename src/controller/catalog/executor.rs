//! The I/O of a ClusterCatalog reconcile: each [`super::plan::Plan`] step done against
//! the API server, the registry and the catalog store ([`CatalogExecutor`]), plus the
//! pull and store steps the [`super::follower`] shares. It decides nothing: what to do
//! and what a failure reports come from [`super::plan`].

use super::plan::{self, Current, Failure, Next};
use super::status::{self, Outcome};
use super::{CatalogContext, CatalogError, Record, now};
use crate::api::{self, ClusterCatalog};
use crate::controller::common;
use crate::fbc::{self, FbcError};
use crate::image::{DockerConfig, Extract, ImageError, PulledImage};
use crate::metrics::{Controller as MetricsController, Metrics};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::json;
use std::time::{Duration, Instant};

/// One reconcile's I/O on one catalog.
pub(super) struct CatalogExecutor<'a> {
    pub api: Api<ClusterCatalog>,
    pub catalog: &'a ClusterCatalog,
    pub ctx: &'a CatalogContext,
    pub name: String,
}

impl<'a> CatalogExecutor<'a> {
    pub fn new(catalog: &'a ClusterCatalog, ctx: &'a CatalogContext) -> Self {
        CatalogExecutor {
            api: Api::all(ctx.client.clone()),
            catalog,
            ctx,
            name: catalog.name_any(),
        }
    }

    async fn write_status(&self, outcome: &Outcome) -> Result<(), CatalogError> {
        write_status(&self.ctx.metrics, &self.api, self.catalog, outcome).await
    }

    /// [`plan::Plan::Delete`].
    pub async fn delete(&self) -> Result<Action, CatalogError> {
        remove_content(self.ctx, &self.name);
        self.write_status(&Outcome::Deleted).await?;
        common::remove_finalizer(&self.api, self.catalog, api::FINALIZER_CATALOG).await?;
        Ok(Action::await_change())
    }

    /// [`plan::Plan::Label`].
    pub async fn label(&self) -> Result<(), CatalogError> {
        let patch = json!({"metadata": {"labels": {api::LABEL_METADATA_NAME: self.name}}});
        self.api
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    /// [`plan::Plan::MakeUnavailable`]: nothing is left to clean up, so the finalizer
    /// goes before the status says so.
    pub async fn make_unavailable(&self) -> Result<Action, CatalogError> {
        remove_content(self.ctx, &self.name);
        common::remove_finalizer(&self.api, self.catalog, api::FINALIZER_CATALOG).await?;
        self.write_status(&Outcome::Unavailable).await?;
        Ok(Action::await_change())
    }

    /// [`plan::Plan::AddFinalizer`].
    pub async fn add_finalizer(&self) -> Result<Action, CatalogError> {
        common::add_finalizer(&self.api, self.catalog, api::FINALIZER_CATALOG).await?;
        Ok(Action::requeue(Duration::ZERO))
    }

    /// [`plan::Plan::NoImage`].
    pub async fn no_image(&self) -> Result<Action, CatalogError> {
        let outcome = Outcome::Failed {
            message: "image is required when source type is Image".into(),
            terminal: true,
        };
        self.write_status(&outcome).await?;
        Ok(Action::await_change())
    }

    /// [`plan::Plan::Content`]: waits, polls the tag, or pulls and stores.
    pub async fn content(
        &self,
        next: Next,
        current: &Current<'_>,
        record: Option<Record>,
    ) -> Result<Action, CatalogError> {
        if next != Next::Pull
            && let Some(status) = &self.catalog.status
        {
            // The status is current: report it (a new leader has not written it itself).
            self.ctx.metrics.catalog_status(&self.name, status);
        }
        if let Next::Wait(wait) = next {
            return Ok(wait
                .map(Action::requeue)
                .unwrap_or_else(Action::await_change));
        }
        if let (Next::Poll, Some(r)) = (&next, &record) {
            // Poll: one manifest request; unchanged digest ⇒ nothing to do.
            let secrets = pull_secrets(self.ctx).await;
            match self.ctx.puller.resolve(current.spec_ref, &secrets).await {
                Ok(resolved) if !plan::tag_moved(r, &resolved) => {
                    let polled = Record {
                        last_poll: Some(Instant::now()),
                        ..r.clone()
                    };
                    self.ctx.set_record(&self.name, Some(polled));
                    self.ctx.failures.succeeded(&self.name);
                    return Ok(self.requeue(current.poll));
                }
                Ok(_) => {
                    tracing::info!(catalog = %self.name, "the image tag moved to a new digest; unpacking it")
                }
                Err(e) => return self.fail(current.spec_ref, Failure::Image(e)).await,
            }
        }
        let reusable = record.filter(|_| current.content_present);
        self.unpack(current, reusable).await
    }

    /// The next reconcile: at the poll interval (with jitter), or on a change only.
    fn requeue(&self, poll: Option<i32>) -> Action {
        let jitter = rand::random::<f64>() * 0.01;
        plan::requeue(poll, self.ctx.settings.poll_unit, jitter)
            .map(Action::requeue)
            .unwrap_or_else(Action::await_change)
    }

    /// Pulls the image and stores its catalog (unless `reusable`, the record of the
    /// content still stored, names the same digest), then reports it as served.
    async fn unpack(
        &self,
        current: &Current<'_>,
        reusable: Option<Record>,
    ) -> Result<Action, CatalogError> {
        let (ctx, name) = (self.ctx, &self.name);
        let spec_ref = current.spec_ref;
        let started = Instant::now();
        let pulled = match pull_content(ctx, spec_ref).await {
            Ok(p) => p,
            Err(e) => return self.fail(spec_ref, Failure::Image(e)).await,
        };
        let last_unpacked = match plan::reusable(reusable.as_ref(), &pulled.reference) {
            Some(last_unpacked) => last_unpacked,
            None => match store_content(ctx, name, &pulled, started).await {
                Ok((last_unpacked, warnings)) => {
                    // Once per newly stored content, not on every reconcile.
                    if let Some(message) = status::invariant_warnings_message(&warnings) {
                        warn_event(ctx, self.catalog, message).await;
                    }
                    last_unpacked
                }
                Err(e) => return self.fail(spec_ref, Failure::Store(e)).await,
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
        self.write_status(&outcome).await?;
        let record = Record {
            generation: current.generation,
            spec_ref: spec_ref.to_string(),
            resolved_ref: pulled.reference.clone(),
            last_unpacked,
            last_poll: Some(Instant::now()),
        };
        ctx.set_record(name, Some(record));
        ctx.failures.succeeded(name);
        Ok(self.requeue(current.poll))
    }

    /// Reports a failure in `Progressing` ([`plan::verdict`]) and schedules the retry.
    async fn fail(&self, spec_ref: &str, failure: Failure) -> Result<Action, CatalogError> {
        let (ctx, name) = (self.ctx, &self.name);
        ctx.set_record(name, None);
        let plan::Verdict {
            message,
            terminal,
            reason,
        } = plan::verdict(&failure, spec_ref);
        tracing::warn!(catalog = %name, terminal, error = %message, "catalog not updated");
        ctx.metrics.error(MetricsController::clustercatalog, reason);
        self.write_status(&Outcome::Failed { message, terminal })
            .await?;
        if terminal {
            return Ok(Action::await_change());
        }
        Ok(Action::requeue(ctx.failures.next_backoff(name)))
    }
}

/// Pulls the catalog content of `reference` (only the configs directory) with the
/// controller's pull secrets.
pub(super) async fn pull_content(
    ctx: &CatalogContext,
    reference: &str,
) -> Result<PulledImage, ImageError> {
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
pub(super) async fn store_content(
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
    // Off the path to Serving: what only speeds up answers comes after.
    ctx.extras.start(name, stored.dir.clone());
    Ok((
        status::truncate_to_seconds(stored.last_modified),
        stored.warnings,
    ))
}

pub(super) fn remove_content(ctx: &CatalogContext, name: &str) {
    ctx.set_record(name, None);
    ctx.extras.cancel(name);
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

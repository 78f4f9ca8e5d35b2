//! The cache GC loop (`--cache-gc-interval`, default 12 h as catalogd's `--gc-interval`;
//! 0 turns it off): every interval, the references are read from the API server — each
//! ClusterCatalog's name and resolved image, the bundle image of every installed or
//! pending revision in the revision records — and the unpacked images and stored
//! catalogs nothing references are removed ([`crate::image::gc`] decides; leases and a
//! grace period keep what is in use or was just used). When the references cannot be
//! read completely nothing is removed. Runs on every replica (each has its own cache).

use crate::api::ClusterCatalog;
use crate::apply::record::{RevisionState, decode};
use crate::image::ImagePuller;
use crate::image::gc::References;
use crate::metrics::Metrics;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Default of `--cache-gc-interval` (catalogd's `--gc-interval` default).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(12 * 3600);

/// Label of the revision record ConfigMaps ([`crate::apply::record`]).
const RECORD_SELECTOR: &str = "olm.operatorframework.io/revision-record=true";

/// What the GC needs.
pub struct CacheGc {
    pub client: kube::Client,
    /// The controller's namespace (revision records).
    pub namespace: String,
    pub puller: Arc<ImagePuller>,
    /// The stored catalogs (`<cache-dir>/catalogs`).
    pub catalogs_dir: PathBuf,
    pub interval: Duration,
    pub metrics: Arc<Metrics>,
}

impl CacheGc {
    /// Collects every `interval` until the process ends; never returns when off.
    pub async fn run(self) {
        if self.interval.is_zero() {
            tracing::info!("cache GC off (--cache-gc-interval=0)");
            return std::future::pending().await;
        }
        tracing::info!(interval = ?self.interval, "cache GC");
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await; // the first tick is immediate: start one interval later
        loop {
            ticker.tick().await;
            self.collect_once().await;
        }
    }

    /// One collection; logs what it removed or why it removed nothing.
    pub async fn collect_once(&self) {
        // Entries used within the grace period before the references were read stay.
        let since = SystemTime::now()
            .checked_sub(crate::image::gc::grace(self.interval))
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let references = match references(&self.client, &self.namespace).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "cache GC skipped: cannot read what is referenced");
                return;
            }
        };
        let puller = self.puller.clone();
        let dir = self.catalogs_dir.clone();
        let removed = tokio::task::spawn_blocking(move || {
            puller.collect_garbage(&crate::fbc::store::CatalogsDir(&dir), &references, since)
        })
        .await;
        match removed {
            Ok(Ok(plan)) if plan.is_empty() => tracing::debug!("cache GC: nothing to remove"),
            Ok(Ok(plan)) => {
                self.metrics.cache_gc_removed(plan.len() as u64);
                tracing::info!(images = ?plan.images, catalogs = ?plan.catalogs, "cache GC removed unreferenced entries");
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "cache GC failed"),
            Err(e) => tracing::warn!(error = %e, "cache GC task failed"),
        }
    }
}

/// Catalog names and images, and the images of installed and pending revisions.
pub async fn references(client: &kube::Client, namespace: &str) -> Result<References, kube::Error> {
    let mut refs = References::default();
    let catalogs: Api<ClusterCatalog> = Api::all(client.clone());
    for catalog in list_all(&catalogs, ListParams::default()).await? {
        if let Some(name) = catalog.metadata.name.clone() {
            refs.catalogs.insert(name);
        }
        if let Some(image) = &catalog.spec.source.image {
            refs.add_image(&image.ref_);
        }
        if let Some(source) = catalog
            .status
            .as_ref()
            .and_then(|s| s.resolved_source.as_ref())
        {
            refs.add_image(&source.image.ref_);
        }
    }
    let records: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    for cm in list_all(&records, ListParams::default().labels(RECORD_SELECTOR)).await? {
        let name = cm.metadata.name.clone().unwrap_or_default();
        let Some(data) = cm
            .binary_data
            .as_ref()
            .and_then(|d| d.get(crate::apply::record::DATA_KEY))
        else {
            continue;
        };
        match decode(&data.0) {
            Ok(history) => {
                for revision in &history.revisions {
                    if matches!(
                        revision.state,
                        RevisionState::Installed | RevisionState::Pending
                    ) {
                        refs.add_image(&revision.bundle.image);
                    }
                }
            }
            Err(reason) => {
                tracing::warn!(record = %name, %reason, "cache GC: unreadable revision record")
            }
        }
    }
    Ok(refs)
}

/// Every object of `api` matching `params`, 200 per page.
async fn list_all<K>(api: &Api<K>, params: ListParams) -> Result<Vec<K>, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut params = params.limit(200);
    let mut all = Vec::new();
    loop {
        let page = api.list(&params).await?;
        all.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(all),
        }
    }
}

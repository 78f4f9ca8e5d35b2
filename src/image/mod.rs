//! OCI images: resolving tags to digests, pulling manifests/indexes/configs, streaming
//! each layer blob to disk while verifying its sha256, safe bounded unpacking (see
//! [`unpack`]) and the digest-keyed cache shared by catalogs and bundles. Registry
//! access goes through `oci-client` (one client per credential set, TLS with an
//! optional extra CA bundle, plain HTTP only for registries listed as insecure;
//! manifests through a bounded request of our own, see [`manifest`]) with retries and
//! exponential backoff on 5xx / connection errors, under a wall-clock deadline per
//! request and per pull (see [`fetch`]). Every pull and tag
//! resolution goes through the [`registries`] configuration (registries.conf: mirrors
//! tried in order before the registry itself, blocked registries refused) and the
//! [`signature`] policy (policy.json).
//!
//! Cache layout under `cache_dir`:
//! `images/<alg>-<hex>/<mode>/{content/, meta.json}` (one finished unpack per image
//! digest and extraction mode, moved into place atomically by `rename`) and `tmp/`
//! (one [`workarea`] per process: downloaded blobs and the unpack in progress; a
//! process never clears another live one's). [`gc`] removes
//! entries nothing references any more, never one a lease marks in use.

pub mod auth;
mod cache;
mod config;
pub mod error;
mod fetch;
pub mod gc;
mod manifest;
pub mod progress;
pub mod reference;
pub mod registries;
pub mod signature;
pub mod unpack;
pub mod workarea;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use oci_client::Reference;
use oci_client::manifest::{OciImageManifest, OciManifest};
use serde::{Deserialize, Serialize};

pub use auth::{Credentials, DockerConfig};
pub use config::{
    CATALOG_CONFIGS_LABEL, Extract, MAX_MANIFEST_BYTES, PULL_TIMEOUT, PullerConfig,
    REQUEST_TIMEOUT, RetryPolicy, extract_dir, select_platform,
};
pub use error::{ImageError, TimeoutScope};
pub use unpack::UnpackLimits;

use cache::{Meta, read_cached, store_entry};
use config::MANIFEST_MEDIA_TYPES;
use fetch::{Deadline, Remote};
use manifest::RegistryClient;
use registries::PullSource;

/// A pulled and unpacked image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PulledImage {
    /// Digest-pinned reference `<registry>/<repository>@sha256:…`.
    pub reference: String,
    /// The digest the reference resolved to (of the index, for multi-platform images).
    pub digest: String,
    /// Labels of the image config.
    pub labels: BTreeMap<String, String>,
    /// The unpacked content (the catalog's configs directory, or the whole image).
    pub dir: PathBuf,
    /// True when nothing was downloaded because the digest was already unpacked.
    #[serde(skip)]
    pub from_cache: bool,
    /// Keeps the cache GC away from `dir` while this (or a clone) lives.
    #[serde(skip)]
    pub lease: gc::CacheLease,
}

/// Counters for tests and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub manifest_requests: u64,
    pub blobs_downloaded: u64,
    pub bytes_downloaded: u64,
    pub cache_hits: u64,
}

#[derive(Default)]
struct Counters {
    manifest_requests: AtomicU64,
    blobs_downloaded: AtomicU64,
    bytes_downloaded: AtomicU64,
    cache_hits: AtomicU64,
}

/// One registry client per (credentials, extra plain-HTTP host).
type ClientKey = (Option<Credentials>, Option<String>);

/// Pulls images into the digest-keyed cache. Cheap to share (`Arc`).
pub struct ImagePuller {
    config: PullerConfig,
    /// The trusted CAs now (starts as `config.ca_bundle_pem`; [`ImagePuller::set_ca_bundle_pem`]).
    ca_bundle_pem: std::sync::RwLock<Option<Vec<u8>>>,
    clients: Mutex<HashMap<ClientKey, Arc<RegistryClient>>>,
    counters: Counters,
    leases: Arc<gc::CacheLeases>,
    verified: signature::VerifiedCache,
    work: workarea::WorkArea,
}

impl std::fmt::Debug for ImagePuller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImagePuller")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ImagePuller {
    /// Create the cache directories and this puller's work area (clearing the work
    /// directories of processes that are gone, see [`workarea`]).
    pub fn new(config: PullerConfig) -> Result<Self, ImageError> {
        // oci-client's reqwest needs a process-wide rustls provider; the project uses aws-lc-rs.
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        }
        let images = config.cache_dir.join("images");
        std::fs::create_dir_all(&images).map_err(|e| ImageError::io("-", &images, e))?;
        let tmp = config.cache_dir.join("tmp");
        let work = workarea::WorkArea::open(&tmp).map_err(|e| ImageError::io("-", &tmp, e))?;
        Ok(ImagePuller {
            ca_bundle_pem: std::sync::RwLock::new(config.ca_bundle_pem.clone()),
            config,
            clients: Mutex::new(HashMap::new()),
            counters: Counters::default(),
            leases: Arc::default(),
            verified: signature::VerifiedCache::default(),
            work,
        })
    }

    /// The in-use marks of the cache (pulls hold them on image digests; catalog
    /// ingests on catalog names).
    pub fn leases(&self) -> &Arc<gc::CacheLeases> {
        &self.leases
    }

    /// Removes the unpacked images under `images/` and the stored catalogs of
    /// `catalogs` that `references` does not name, that no lease holds and that
    /// were not used since `since` (see [`gc`]). Returns what was removed.
    pub fn collect_garbage(
        &self,
        catalogs: &dyn gc::CatalogStore,
        references: &gc::References,
        since: std::time::SystemTime,
    ) -> Result<gc::Plan, ImageError> {
        let images = self.config.cache_dir.join("images");
        let inventory = gc::inventory(&images, catalogs)
            .map_err(|e| ImageError::io("-", &self.config.cache_dir, e))?;
        let trash = self.work.path();
        Ok(self
            .leases
            .sweep(&inventory, references, since, |doomed| match doomed {
                gc::Doomed::Image(name) => gc::remove_image(&images, trash, name),
                gc::Doomed::Catalog(name) => catalogs.remove(name),
            }))
    }

    /// Trusts `pem` (besides the system roots) from the next pull on: the watched
    /// `--pull-cas-dir` changed. The registry clients are made again with it.
    pub fn set_ca_bundle_pem(&self, pem: Option<Vec<u8>>) -> Result<(), ImageError> {
        if let Some(pem) = &pem {
            reqwest::Certificate::from_pem_bundle(pem).map_err(|e| ImageError::CaBundle {
                path: "(the watched CA directory)".to_string(),
                detail: e.to_string(),
            })?;
        }
        *self
            .ca_bundle_pem
            .write()
            .unwrap_or_else(|p| p.into_inner()) = pem;
        self.clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        Ok(())
    }

    pub fn config(&self) -> &PullerConfig {
        &self.config
    }

    pub fn stats(&self) -> CacheStats {
        let c = &self.counters;
        CacheStats {
            manifest_requests: c.manifest_requests.load(Ordering::Relaxed),
            blobs_downloaded: c.blobs_downloaded.load(Ordering::Relaxed),
            bytes_downloaded: c.bytes_downloaded.load(Ordering::Relaxed),
            cache_hits: c.cache_hits.load(Ordering::Relaxed),
        }
    }

    /// Resolve `reference` to its digest-pinned form (`<repo>@sha256:…`) with one
    /// manifest HEAD (or GET) request (to the first mirror that answers, see
    /// [`registries`]); digest references are returned as they are.
    pub async fn resolve(
        &self,
        reference: &str,
        secrets: &DockerConfig,
    ) -> Result<String, ImageError> {
        let r = parse_reference(reference)?;
        let sources = self.sources(reference, &r)?;
        let mut attempts = Attempts::new(reference, sources.len());
        let deadline = Deadline::start(&self.config);
        for (i, src) in sources.iter().enumerate() {
            let (client, auth) = self.client_and_auth(src, secrets)?;
            match self
                .top_digest(reference, &src.reference, &client, &auth, &deadline)
                .await
            {
                Ok(digest) => return Ok(pinned(&r, &digest)),
                Err(e) => attempts.failed(i, src, e)?,
            }
        }
        Err(attempts.exhausted())
    }

    /// Pull `reference` (tag or digest) and unpack what `extract` asks for into the
    /// cache. An image whose digest is already unpacked is not downloaded again (a
    /// tag still costs one manifest request). Mirrors of the registries configuration
    /// are tried in order, then the registry itself; the result names `reference`'s
    /// repository whichever served it.
    pub async fn pull(
        &self,
        reference: &str,
        extract: &Extract,
        secrets: &DockerConfig,
    ) -> Result<PulledImage, ImageError> {
        let r = parse_reference(reference)?;
        let sources = self.sources(reference, &r)?;
        let mut attempts = Attempts::new(reference, sources.len());
        let deadline = Deadline::start(&self.config);
        for (i, src) in sources.iter().enumerate() {
            match self
                .pull_from(reference, &r, src, extract, secrets, deadline)
                .await
            {
                Ok(pulled) => return Ok(pulled),
                Err(e) => attempts.failed(i, src, e)?,
            }
        }
        Err(attempts.exhausted())
    }

    /// Where to pull `r` from (mirrors first), or the blocked-registry error.
    fn sources(&self, image: &str, r: &Reference) -> Result<Vec<PullSource>, ImageError> {
        self.config
            .registries
            .pull_sources(r)
            .map_err(|b| ImageError::Blocked {
                image: image.to_string(),
                registry: b.registry,
                config: b.config,
            })
    }

    /// [`ImagePuller::pull`] from one source; `r` is the reference as asked for.
    async fn pull_from(
        &self,
        image: &str,
        r: &Reference,
        src: &PullSource,
        extract: &Extract,
        secrets: &DockerConfig,
        deadline: Deadline,
    ) -> Result<PulledImage, ImageError> {
        let at = &src.reference;
        let registry = at.registry().to_string();
        let (client, auth) = self.client_and_auth(src, secrets)?;
        let top = self
            .top_digest(image, at, &client, &auth, &deadline)
            .await?;
        let pinned_ref = pinned(r, &top);
        let remote = Remote {
            image,
            registry: &registry,
            client: &client,
            auth: &auth,
            deadline,
        };
        // Checked against the reference as written, cached image or not.
        self.check_signature_policy(&remote, r, at, &top).await?;
        // In use from here until the caller drops the result.
        let lease = self
            .leases
            .acquire(gc::image_key(&gc::image_entry_name(&top)));
        let final_dir = self
            .config
            .cache_dir
            .join("images")
            .join(top.replace(':', "-"))
            .join(extract.cache_key());
        if let Some(mut hit) = read_cached(&final_dir) {
            tracing::debug!(image, digest = %top, "image already unpacked, using the cache");
            self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
            // The same content may have been pulled from another repository first:
            // report the reference that was asked for.
            hit.reference = pinned_ref;
            hit.lease = lease;
            return Ok(hit);
        }
        let top_ref =
            Reference::with_digest(registry.clone(), at.repository().to_string(), top.clone());
        let manifest = self.platform_manifest(&remote, at, &top_ref).await?;

        // Config → labels, and the directory to extract.
        let labels = self
            .fetch_config(&remote, &top_ref, &manifest.config)
            .await?;
        let subdir = extract_dir(image, extract, &labels)?;

        let work = tempfile::Builder::new()
            .prefix("pull-")
            .tempdir_in(self.work.path())
            .map_err(|e| ImageError::io(image, self.work.path(), e))?;
        let entry = work.path().join("entry");
        self.check_layers(image, &manifest)?;
        self.download_and_unpack(&remote, &top_ref, &manifest, work.path(), subdir)
            .await?;
        let meta = Meta {
            reference: pinned_ref.clone(),
            digest: top.clone(),
            labels: labels.clone(),
        };
        store_entry(image, &entry, &meta, &final_dir)?;
        drop(work);
        tracing::info!(image, reference = %pinned_ref, from = %at.whole(), "pulled and unpacked image");
        Ok(PulledImage {
            reference: pinned_ref,
            digest: top,
            labels,
            dir: final_dir.join("content"),
            from_cache: false,
            lease,
        })
    }

    /// The image manifest at `top_ref`, or for an index the manifest of this platform.
    async fn platform_manifest(
        &self,
        remote: &Remote<'_>,
        r: &Reference,
        top_ref: &Reference,
    ) -> Result<OciImageManifest, ImageError> {
        let image = remote.image;
        match self.fetch_manifest(remote, top_ref).await? {
            OciManifest::Image(m) => Ok(m),
            OciManifest::ImageIndex(index) => {
                let Some(d) = select_platform(&index.manifests) else {
                    return Err(ImageError::Unsupported {
                        image: image.to_string(),
                        detail: format!(
                            "image index has no linux/{} or linux/amd64 manifest",
                            std::env::consts::ARCH
                        ),
                    });
                };
                validate_digest(image, &d)?;
                let child = Reference::with_digest(
                    remote.registry.to_string(),
                    r.repository().to_string(),
                    d,
                );
                match self.fetch_manifest(remote, &child).await? {
                    OciManifest::Image(m) => Ok(m),
                    OciManifest::ImageIndex(_) => Err(ImageError::Unsupported {
                        image: image.to_string(),
                        detail: "nested image index".to_string(),
                    }),
                }
            }
        }
    }

    /// The manifest's layers against the limits (count, media types, declared size).
    fn check_layers(&self, image: &str, manifest: &OciImageManifest) -> Result<(), ImageError> {
        let mut total_declared: u64 = 0;
        if manifest.layers.len() > self.config.max_layers {
            return Err(ImageError::LimitExceeded {
                image: image.to_string(),
                layer: "(manifest)".to_string(),
                what: format!("number of layers ({})", manifest.layers.len()),
                limit: self.config.max_layers as u64,
            });
        }
        for desc in &manifest.layers {
            validate_digest(image, &desc.digest)?;
            if !unpack::layer_media_type_supported(&desc.media_type) {
                return Err(ImageError::Unsupported {
                    image: image.to_string(),
                    detail: format!(
                        "layer {} has unsupported media type {:?}",
                        desc.digest, desc.media_type
                    ),
                });
            }
            total_declared = total_declared.saturating_add(u64::try_from(desc.size).unwrap_or(0));
        }
        if total_declared > self.config.max_download_bytes {
            return Err(ImageError::LimitExceeded {
                image: image.to_string(),
                layer: "(manifest)".to_string(),
                what: format!("total layer size ({total_declared} bytes)"),
                limit: self.config.max_download_bytes,
            });
        }
        Ok(())
    }

    /// Downloads the layers into `work/blobs` and unpacks `subdir` of them into
    /// `work/entry/content` (on a blocking thread).
    async fn download_and_unpack(
        &self,
        remote: &Remote<'_>,
        top_ref: &Reference,
        manifest: &OciImageManifest,
        work: &Path,
        subdir: Vec<String>,
    ) -> Result<(), ImageError> {
        let image = remote.image;
        let blobs = work.join("blobs");
        let content = work.join("entry").join("content");
        for d in [&blobs, &content] {
            std::fs::create_dir_all(d).map_err(|e| ImageError::io(image, d, e))?;
        }
        let mut layers = Vec::new();
        let mut downloaded: u64 = 0;
        let sink = self.config.progress.as_ref();
        let total_bytes = manifest
            .layers
            .iter()
            .map(|d| u64::try_from(d.size).unwrap_or(0))
            .sum();
        let report = |layer: usize, bytes: u64, finished: bool| {
            if let Some(sink) = sink {
                sink.report(&progress::Progress {
                    image,
                    layer,
                    layers: manifest.layers.len(),
                    bytes,
                    total_bytes,
                    finished,
                });
            }
        };
        for (i, desc) in manifest.layers.iter().enumerate() {
            let path = blobs.join(desc.digest.replace(':', "-"));
            let budget = self.config.max_download_bytes.saturating_sub(downloaded);
            let before = downloaded;
            let on_bytes = |n: u64| report(i + 1, before + n, false);
            downloaded += self
                .download_layer(
                    remote,
                    top_ref,
                    desc,
                    &path,
                    budget,
                    sink.map(|_| &on_bytes as &(dyn Fn(u64) + Sync)),
                )
                .await?;
            layers.push(unpack::LayerFile {
                path,
                digest: desc.digest.clone(),
                media_type: desc.media_type.clone(),
            });
        }
        report(manifest.layers.len(), downloaded, true);
        let (img, limits, dest) = (
            image.to_string(),
            self.config.limits.clone(),
            content.clone(),
        );
        tokio::task::spawn_blocking(move || {
            unpack::unpack_layers(&img, &layers, &dest, &subdir, &limits)
        })
        .await
        .map_err(|e| ImageError::io(image, &content, std::io::Error::other(e.to_string())))?
    }

    /// Remove cached images whose digest is not in `keep` (digests like `sha256:…`).
    pub fn prune_except(&self, keep: &[&str]) -> Result<usize, ImageError> {
        let images = self.config.cache_dir.join("images");
        let keep: Vec<String> = keep.iter().map(|d| d.replace(':', "-")).collect();
        let mut removed = 0;
        let rd = std::fs::read_dir(&images).map_err(|e| ImageError::io("-", &images, e))?;
        for e in rd {
            let e = e.map_err(|e| ImageError::io("-", &images, e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if !keep.contains(&name) {
                std::fs::remove_dir_all(e.path())
                    .map_err(|err| ImageError::io("-", &e.path(), err))?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}

/// The failures of the pull sources tried so far: registry errors of a source move
/// on to the next one, other errors (content, local I/O) and the last source's end it.
struct Attempts<'a> {
    image: &'a str,
    total: usize,
    failed: Vec<String>,
}

impl<'a> Attempts<'a> {
    fn new(image: &'a str, total: usize) -> Self {
        Attempts {
            image,
            total,
            failed: Vec::new(),
        }
    }

    /// `Ok` = try the next source; `Err` = the pull's error.
    fn failed(&mut self, i: usize, src: &PullSource, e: ImageError) -> Result<(), ImageError> {
        let source = src.reference.whole();
        if i + 1 < self.total && e.next_source_may_help() {
            tracing::info!(image = self.image, %source, error = %e,
                "pull source failed, trying the next one");
            self.failed.push(format!("{source}: {e}"));
            return Ok(());
        }
        if self.failed.is_empty() || !e.next_source_may_help() {
            return Err(e);
        }
        Err(ImageError::AllSourcesFailed {
            image: self.image.to_string(),
            last: Box::new(e),
            earlier: std::mem::take(&mut self.failed),
        })
    }

    /// No source at all (cannot happen: the registry itself is always one).
    fn exhausted(self) -> ImageError {
        ImageError::Unsupported {
            image: self.image.to_string(),
            detail: "no pull source".to_string(),
        }
    }
}

fn parse_reference(reference: &str) -> Result<Reference, ImageError> {
    reference::parse(reference).map_err(|e| ImageError::InvalidReference {
        reference: reference.to_string(),
        reason: e.to_string(),
    })
}

fn pinned(r: &Reference, digest: &str) -> String {
    format!("{}/{}@{}", r.registry(), r.repository(), digest)
}

/// Only `sha256:<64 lowercase hex>` digests are accepted (they become file names).
fn validate_digest(image: &str, d: &str) -> Result<(), ImageError> {
    let ok = d.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    });
    if ok {
        Ok(())
    } else {
        Err(ImageError::Unsupported {
            image: image.to_string(),
            detail: format!("unsupported or malformed digest {d:?} (sha256 expected)"),
        })
    }
}

#[cfg(test)]
mod mirror_tests;
#[cfg(test)]
mod tests;

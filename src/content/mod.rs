//! Catalog content client (docs/concepts/catalogs.md A6, docs/concepts/resolution.md §4.1 step 4): reads one package of a
//! ClusterCatalog over the catalogd HTTP API at `status.urls.base` —
//! `GET <base>/api/v1/metas?package=<p>` (JSON Lines), falling back to `GET
//! <base>/api/v1/all` filtered client-side when the server has no `metas` endpoint
//! (404/405) — and caches the package's [`compact`] projection per (catalog name,
//! resolved image reference). A new `status.resolvedSource.image.ref` drops everything
//! cached for that catalog. Catalogs whose `Serving` condition is not True fail with
//! `catalog "<name>" is not being served`, cached or not. HTTP is bounded (connect and
//! request timeouts, a maximum body size, a maximum line length), bodies are streamed
//! line by line (never held whole for `/all`), gzip is accepted, and errors name the
//! catalog and the URL.
//!
//! The command-line tools (`olmv1 resolve --catalog`, `olmv1 catalog --catalog`) read
//! ClusterCatalogs through this client too (`cli/source.rs`).

pub mod compact;
mod http;

#[cfg(test)]
mod tests;

use crate::api::{ClusterCatalog, conditions};
use crate::fbc::model::PackageContent;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::OnceCell;

/// Limits and trust for the HTTP client.
#[derive(Clone, Debug)]
pub struct ContentConfig {
    pub connect_timeout: Duration,
    /// Whole request, body included.
    pub request_timeout: Duration,
    /// Largest (decompressed) `metas` body accepted.
    pub max_body_bytes: u64,
    /// Largest (decompressed) `/all` body read by the fallback (streamed, not held).
    pub max_all_bytes: u64,
    /// Longest single JSON line (one FBC blob).
    pub max_line_bytes: usize,
    /// Extra trusted CA certificates (PEM) for HTTPS catalog servers.
    pub ca_bundle_pem: Option<Vec<u8>>,
}

impl Default for ContentConfig {
    fn default() -> Self {
        ContentConfig {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(120),
            max_body_bytes: 256 << 20,
            max_all_bytes: 4 << 30,
            max_line_bytes: 64 << 20,
            ca_bundle_pem: None,
        }
    }
}

impl ContentConfig {
    /// Trust the CA certificates of every file in `dir` (upstream's
    /// `--catalogd-cas-dir`), besides the system roots: like upstream, directories and
    /// files without a PEM certificate (a mounted `tls.key`) are skipped, and a directory
    /// without any certificate is an error.
    pub fn with_cas_dir(mut self, dir: &std::path::Path) -> Result<Self, ContentError> {
        let pem = read_cas_dir(dir)?;
        let mut bundle = self.ca_bundle_pem.take().unwrap_or_default();
        bundle.extend_from_slice(&pem);
        self.ca_bundle_pem = Some(bundle);
        Ok(self)
    }
}

/// The certificates of every file in `dir`, as one PEM bundle (keys left out).
pub fn read_cas_dir(dir: &std::path::Path) -> Result<Vec<u8>, ContentError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let err = |detail: String| ContentError::CaDir {
        dir: dir.display().to_string(),
        detail,
    };
    let mut names: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| err(format!("cannot read the directory: {e}")))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    names.sort();
    let mut out = Vec::new();
    let mut found = 0;
    for path in names {
        // Kubernetes volume mounts: `..data` and friends, and symbolic links to them.
        if std::fs::metadata(&path).map(|m| m.is_dir()).unwrap_or(true) {
            continue;
        }
        let data =
            std::fs::read(&path).map_err(|e| err(format!("reading {}: {e}", path.display())))?;
        for cert in CertificateDer::pem_slice_iter(&data) {
            let cert = cert.map_err(|e| err(format!("{}: invalid PEM: {e}", path.display())))?;
            out.extend_from_slice(b"-----BEGIN CERTIFICATE-----\n");
            let b64 = data_encoding::BASE64.encode(cert.as_ref());
            for line in b64.as_bytes().chunks(64) {
                out.extend_from_slice(line);
                out.push(b'\n');
            }
            out.extend_from_slice(b"-----END CERTIFICATE-----\n");
            found += 1;
        }
    }
    if found == 0 {
        return Err(err("no certificates found".to_string()));
    }
    Ok(out)
}

/// The HTTP client of `config`'s limits trusting the system roots and `pem`.
fn http_client(
    config: &ContentConfig,
    pem: Option<&[u8]>,
) -> Result<reqwest::Client, ContentError> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(config.connect_timeout)
        .timeout(config.request_timeout)
        .user_agent(concat!("olmv1/", env!("CARGO_PKG_VERSION")));
    if let Some(pem) = pem {
        for cert in reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| ContentError::Client(format!("CA bundle: {e}")))?
        {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder
        .build()
        .map_err(|e| ContentError::Client(e.to_string()))
}

/// Why a package could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ContentError {
    #[error("catalog {catalog:?} is not being served")]
    NotServing { catalog: String },
    #[error("catalog {catalog:?} is being served but has no status.urls.base")]
    NoBaseUrl { catalog: String },
    #[error("catalog {catalog:?}: invalid content URL {url:?}: {detail}")]
    BadUrl {
        catalog: String,
        url: String,
        detail: String,
    },
    #[error("catalog {catalog:?}: GET {url}: {detail}")]
    Request {
        catalog: String,
        url: String,
        detail: String,
    },
    #[error("catalog {catalog:?}: GET {url}: unexpected status {status}: {body}")]
    Status {
        catalog: String,
        url: String,
        status: u16,
        body: String,
    },
    #[error("catalog {catalog:?}: GET {url}: {what} larger than {limit} bytes")]
    TooLarge {
        catalog: String,
        url: String,
        what: &'static str,
        limit: u64,
    },
    #[error("catalog {catalog:?}: GET {url}: {detail}")]
    Parse {
        catalog: String,
        url: String,
        detail: String,
    },
    #[error("catalog content client: {0}")]
    Client(String),
    /// The `--catalogd-cas-dir` directory cannot be used.
    #[error("catalog CA directory {dir}: {detail}")]
    CaDir { dir: String, detail: String },
}

/// Where one ClusterCatalog's content is and which content it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub catalog: String,
    /// `status.urls.base`, without a trailing `/`.
    pub base_url: String,
    /// `status.resolvedSource.image.ref` (the cache key; empty if absent).
    pub resolved_ref: String,
}

/// The content endpoint of a ClusterCatalog, or why it cannot be read: `Serving`
/// must be True and `status.urls.base` set.
pub fn endpoint(catalog: &ClusterCatalog) -> Result<Endpoint, ContentError> {
    let name = catalog.metadata.name.clone().unwrap_or_default();
    let status = catalog.status.as_ref();
    let serving = status
        .and_then(|s| conditions::find(&s.conditions, conditions::TYPE_SERVING))
        .is_some_and(|c| c.status == "True");
    if !serving {
        return Err(ContentError::NotServing { catalog: name });
    }
    let base = status
        .and_then(|s| s.urls.as_ref())
        .map(|u| u.base.trim_end_matches('/').to_string())
        .filter(|b| !b.is_empty())
        .ok_or_else(|| ContentError::NoBaseUrl {
            catalog: name.clone(),
        })?;
    let resolved_ref = status
        .and_then(|s| s.resolved_source.as_ref())
        .map(|r| r.image.ref_.clone())
        .unwrap_or_default();
    Ok(Endpoint {
        catalog: name,
        base_url: base,
        resolved_ref,
    })
}

/// One ClusterCatalog prepared for resolution: what `resolve::CatalogInput` borrows,
/// owned (`CatalogContent::input`, in `resolve`, lends it).
#[derive(Clone, Debug)]
pub struct CatalogContent {
    pub name: String,
    pub priority: i32,
    pub availability: crate::api::AvailabilityMode,
    pub labels: std::collections::BTreeMap<String, String>,
    /// The package's content; empty when the catalog was not read because the
    /// selector excludes it or it is `Unavailable`; `Err` with the message when it
    /// could not be read (resolution then fails with that catalog named).
    pub content: Result<Arc<PackageContent>, String>,
}

/// Counters, for tests and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContentStats {
    /// HTTP requests sent (every kind).
    pub requests: u64,
    pub metas_requests: u64,
    pub all_requests: u64,
    /// Packages answered from the cache.
    pub cache_hits: u64,
    /// Packages fetched over HTTP.
    pub fetches: u64,
    /// Catalog cache entries dropped because the resolved reference changed.
    pub invalidations: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    metas_requests: AtomicU64,
    all_requests: AtomicU64,
    cache_hits: AtomicU64,
    fetches: AtomicU64,
    invalidations: AtomicU64,
}

type Slot = Arc<OnceCell<Arc<PackageContent>>>;

struct CatalogEntry {
    resolved_ref: String,
    base_url: String,
    packages: HashMap<String, Slot>,
}

/// The content client with its cache. Cheap to share (`Arc`); concurrent reads of
/// the same package share one fetch.
pub struct ContentClient {
    /// Replaced when the trusted CAs change ([`ContentClient::set_ca_bundle`]).
    http: std::sync::RwLock<reqwest::Client>,
    config: ContentConfig,
    cache: Mutex<HashMap<String, CatalogEntry>>,
    /// Base URLs known to lack `metas` (404/405): go straight to `/all`.
    no_metas: Mutex<HashSet<String>>,
    counters: Counters,
}

impl std::fmt::Debug for ContentClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContentClient")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ContentClient {
    pub fn new(config: ContentConfig) -> Result<Self, ContentError> {
        let http = std::sync::RwLock::new(http_client(&config, config.ca_bundle_pem.as_deref())?);
        Ok(ContentClient {
            http,
            config,
            cache: Mutex::new(HashMap::new()),
            no_metas: Mutex::new(HashSet::new()),
            counters: Counters::default(),
        })
    }

    /// Trusts `pem` (the system roots plus these CAs) from the next request on: the
    /// watched `--catalogd-cas-dir` changed. A bundle that does not parse changes nothing.
    pub fn set_ca_bundle(&self, pem: Option<&[u8]>) -> Result<(), ContentError> {
        let client = http_client(&self.config, pem)?;
        *self.http.write().unwrap_or_else(|p| p.into_inner()) = client;
        Ok(())
    }

    /// The HTTP client of the current CAs.
    fn http(&self) -> reqwest::Client {
        self.http.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn config(&self) -> &ContentConfig {
        &self.config
    }

    /// The package's (compact) content in `catalog`; an empty [`PackageContent`] when
    /// the catalog does not have the package. Cached per resolved image reference.
    pub async fn package(
        &self,
        catalog: &ClusterCatalog,
        package: &str,
    ) -> Result<Arc<PackageContent>, ContentError> {
        let ep = endpoint(catalog)?;
        self.package_at(&ep, package).await
    }

    /// Every catalog's content for `package`, in list order, ready for
    /// `resolve::resolve` (`inputs: Vec<_> = contents.iter().map(|c| c.input())`).
    /// Catalogs the selector excludes or that are `Unavailable` are not read; the
    /// others are read concurrently (through the cache).
    pub async fn catalog_contents(
        &self,
        catalogs: &[ClusterCatalog],
        package: &str,
        selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    ) -> Vec<CatalogContent> {
        use crate::api::AvailabilityMode as Availability;
        // An invalid selector reads nothing; resolution reports the selector error.
        let selector = crate::api::selector::Selector::parse(selector).ok();
        let reads = catalogs.iter().map(|c| {
            let labels = c.metadata.labels.clone().unwrap_or_default();
            let availability = c.spec.availability_mode;
            let wanted = availability == Availability::Available
                && selector.as_ref().is_some_and(|s| s.matches(&labels));
            async move {
                let content = if wanted {
                    self.package(c, package).await.map_err(|e| e.to_string())
                } else {
                    Ok(Arc::new(PackageContent::default()))
                };
                CatalogContent {
                    name: c.metadata.name.clone().unwrap_or_default(),
                    priority: c.spec.priority,
                    availability,
                    labels,
                    content,
                }
            }
        });
        futures::future::join_all(reads).await
    }

    /// [`ContentClient::package`] for an endpoint already extracted.
    pub async fn package_at(
        &self,
        ep: &Endpoint,
        package: &str,
    ) -> Result<Arc<PackageContent>, ContentError> {
        let slot = self.slot(ep, package);
        if let Some(hit) = slot.get() {
            self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(hit.clone());
        }
        let mut fetched = false;
        let content = slot
            .get_or_try_init(|| async {
                fetched = true;
                self.counters.fetches.fetch_add(1, Ordering::Relaxed);
                self.fetch(ep, package).await.map(Arc::new)
            })
            .await?
            .clone();
        if !fetched {
            self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
        }
        Ok(content)
    }

    fn slot(&self, ep: &Endpoint, package: &str) -> Slot {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let entry = cache
            .entry(ep.catalog.clone())
            .or_insert_with(|| CatalogEntry {
                resolved_ref: ep.resolved_ref.clone(),
                base_url: ep.base_url.clone(),
                packages: HashMap::new(),
            });
        if entry.resolved_ref != ep.resolved_ref || entry.base_url != ep.base_url {
            self.counters.invalidations.fetch_add(1, Ordering::Relaxed);
            *entry = CatalogEntry {
                resolved_ref: ep.resolved_ref.clone(),
                base_url: ep.base_url.clone(),
                packages: HashMap::new(),
            };
        }
        entry
            .packages
            .entry(package.to_string())
            .or_default()
            .clone()
    }

    /// Drops the cache of catalogs not named in `keep` (deleted ClusterCatalogs).
    pub fn retain_catalogs(&self, keep: &[&str]) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.retain(|name, _| keep.contains(&name.as_str()));
    }

    /// Drops everything cached for one catalog.
    pub fn forget(&self, catalog: &str) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.remove(catalog);
    }

    pub fn stats(&self) -> ContentStats {
        let c = &self.counters;
        ContentStats {
            requests: c.requests.load(Ordering::Relaxed),
            metas_requests: c.metas_requests.load(Ordering::Relaxed),
            all_requests: c.all_requests.load(Ordering::Relaxed),
            cache_hits: c.cache_hits.load(Ordering::Relaxed),
            fetches: c.fetches.load(Ordering::Relaxed),
            invalidations: c.invalidations.load(Ordering::Relaxed),
        }
    }

    /// Number of cached packages and their estimated size in bytes
    /// ([`compact::estimated_size`]).
    pub fn cache_size(&self) -> (usize, usize) {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let mut count = 0;
        let mut bytes = 0;
        for entry in cache.values() {
            for slot in entry.packages.values() {
                if let Some(c) = slot.get() {
                    count += 1;
                    bytes += compact::estimated_size(c);
                }
            }
        }
        (count, bytes)
    }
}

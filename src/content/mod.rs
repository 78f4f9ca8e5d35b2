//! Catalog content client (reference A6, §4.1 step 4): reads one package of a
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
//! ClusterCatalogs through this client too (`crate::cli::source`).

pub mod compact;

#[cfg(test)]
mod tests;

use crate::api::{ClusterCatalog, conditions};
use crate::fbc::model::{PackageContent, SCHEMA_PACKAGE};
use futures::StreamExt;
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

/// One ClusterCatalog prepared for resolution: what [`crate::resolve::CatalogInput`]
/// borrows, owned.
#[derive(Clone, Debug)]
pub struct CatalogContent {
    pub name: String,
    pub priority: i32,
    pub availability: crate::resolve::Availability,
    pub labels: std::collections::BTreeMap<String, String>,
    /// The package's content; empty when the catalog was not read because the
    /// selector excludes it or it is `Unavailable`; `Err` with the message when it
    /// could not be read (resolution then fails with that catalog named).
    pub content: Result<Arc<PackageContent>, String>,
}

impl CatalogContent {
    pub fn input(&self) -> crate::resolve::CatalogInput<'_> {
        crate::resolve::CatalogInput {
            name: &self.name,
            priority: self.priority,
            availability: self.availability,
            labels: &self.labels,
            content: self.content.as_deref().map_err(Clone::clone),
        }
    }
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
    http: reqwest::Client,
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
        let mut builder = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .user_agent(concat!("olmv1/", env!("CARGO_PKG_VERSION")));
        if let Some(pem) = &config.ca_bundle_pem {
            for cert in reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| ContentError::Client(format!("CA bundle: {e}")))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder
            .build()
            .map_err(|e| ContentError::Client(e.to_string()))?;
        Ok(ContentClient {
            http,
            config,
            cache: Mutex::new(HashMap::new()),
            no_metas: Mutex::new(HashSet::new()),
            counters: Counters::default(),
        })
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
    /// [`crate::resolve::resolve`] (`inputs: Vec<_> = contents.iter().map(|c| c.input())`).
    /// Catalogs the selector excludes or that are `Unavailable` are not read; the
    /// others are read concurrently (through the cache).
    pub async fn catalog_contents(
        &self,
        catalogs: &[ClusterCatalog],
        package: &str,
        selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    ) -> Vec<CatalogContent> {
        use crate::resolve::Availability;
        // An invalid selector reads nothing; resolution reports the selector error.
        let selector = crate::resolve::selector::Selector::parse(selector).ok();
        let reads = catalogs.iter().map(|c| {
            let labels = c.metadata.labels.clone().unwrap_or_default();
            let availability = match c.spec.availability_mode {
                crate::api::AvailabilityMode::Unavailable => Availability::Unavailable,
                crate::api::AvailabilityMode::Available => Availability::Available,
            };
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

    /// Fetches the package from the server (no cache): `metas?package=`, falling back
    /// to `/all` when `metas` answers 404 or 405.
    pub async fn fetch(
        &self,
        ep: &Endpoint,
        package: &str,
    ) -> Result<PackageContent, ContentError> {
        let known_without_metas = self
            .no_metas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&ep.base_url);
        if !known_without_metas {
            let url = self.url(ep, "metas", &[("package", package)])?;
            self.counters.metas_requests.fetch_add(1, Ordering::Relaxed);
            match self
                .get_lines(ep, &url, self.config.max_body_bytes, package, false)
                .await
            {
                Ok(mut content) => {
                    // catalogd versions that index `olm.package` blobs without a
                    // package field: ask for the package blob by name.
                    if content.package.is_none() && !content.is_empty() {
                        let url = self.url(
                            ep,
                            "metas",
                            &[("schema", SCHEMA_PACKAGE), ("name", package)],
                        )?;
                        self.counters.metas_requests.fetch_add(1, Ordering::Relaxed);
                        let pkg = self
                            .get_lines(ep, &url, self.config.max_body_bytes, package, true)
                            .await
                            .map_err(|e| not_found(ep, &url, e))?;
                        content.package = pkg.package;
                    }
                    return Ok(content);
                }
                Err(FetchError::NoEndpoint) => {
                    tracing::info!(catalog = %ep.catalog, url = %url,
                        "catalog server has no metas endpoint, falling back to /api/v1/all");
                    self.no_metas
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(ep.base_url.clone());
                }
                Err(FetchError::Other(e)) => return Err(e),
            }
        }
        let url = self.url(ep, "all", &[])?;
        self.counters.all_requests.fetch_add(1, Ordering::Relaxed);
        self.get_lines(ep, &url, self.config.max_all_bytes, package, true)
            .await
            .map_err(|e| not_found(ep, &url, e))
    }

    fn url(
        &self,
        ep: &Endpoint,
        endpoint: &str,
        query: &[(&str, &str)],
    ) -> Result<reqwest::Url, ContentError> {
        let text = format!("{}/api/v1/{endpoint}", ep.base_url);
        let mut url = reqwest::Url::parse(&text).map_err(|e| ContentError::BadUrl {
            catalog: ep.catalog.clone(),
            url: text.clone(),
            detail: e.to_string(),
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ContentError::BadUrl {
                catalog: ep.catalog.clone(),
                url: text,
                detail: "scheme must be http or https".to_string(),
            });
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url)
    }

    /// GETs `url` and parses the JSON Lines body into the package's compact content as
    /// it streams in (`filter`: skip lines of other packages).
    async fn get_lines(
        &self,
        ep: &Endpoint,
        url: &reqwest::Url,
        max_body: u64,
        package: &str,
        filter: bool,
    ) -> Result<PackageContent, FetchError> {
        let mut content = PackageContent::default();
        self.stream_lines(ep, url, max_body, &mut |line| {
            compact::push_line(&mut content, line, package, filter)
        })
        .await?;
        compact::finish(&mut content);
        Ok(content)
    }

    /// GETs `url` and calls `on_line` with every line of the body (without the
    /// newline) as it streams in, enforcing the body and line limits. 404/405 are
    /// [`FetchError::NoEndpoint`].
    async fn stream_lines(
        &self,
        ep: &Endpoint,
        url: &reqwest::Url,
        max_body: u64,
        on_line: &mut (dyn FnMut(&[u8]) -> Result<(), String> + Send),
    ) -> Result<(), FetchError> {
        let err_request = |detail: String| ContentError::Request {
            catalog: ep.catalog.clone(),
            url: url.to_string(),
            detail,
        };
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let response = self
            .http
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/jsonl")
            .send()
            .await
            .map_err(|e| err_request(error_chain(&e)))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND
            || status == reqwest::StatusCode::METHOD_NOT_ALLOWED
        {
            return Err(FetchError::NoEndpoint);
        }
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            let body: String = body.trim().chars().take(512).collect();
            return Err(ContentError::Status {
                catalog: ep.catalog.clone(),
                url: url.to_string(),
                status: status.as_u16(),
                body,
            }
            .into());
        }
        if response.content_length().is_some_and(|n| n > max_body) {
            return Err(self.too_large(ep, url, "response body", max_body));
        }
        let mut pending: Vec<u8> = Vec::new();
        let mut total: u64 = 0;
        let mut line_no: usize = 0;
        let mut stream = response.bytes_stream();
        let mut parse = |line: &[u8], line_no: usize| {
            on_line(line).map_err(|detail| {
                FetchError::from(ContentError::Parse {
                    catalog: ep.catalog.clone(),
                    url: url.to_string(),
                    detail: format!("line {line_no}: {detail}"),
                })
            })
        };
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| err_request(error_chain(&e)))?;
            total += chunk.len() as u64;
            if total > max_body {
                return Err(self.too_large(ep, url, "response body", max_body));
            }
            let mut rest: &[u8] = &chunk;
            while let Some(i) = memchr::memchr(b'\n', rest) {
                line_no += 1;
                if pending.is_empty() {
                    parse(&rest[..i], line_no)?;
                } else {
                    pending.extend_from_slice(&rest[..i]);
                    parse(&pending, line_no)?;
                    pending.clear();
                }
                rest = &rest[i + 1..];
            }
            pending.extend_from_slice(rest);
            if pending.len() > self.config.max_line_bytes {
                return Err(self.too_large(
                    ep,
                    url,
                    "a line of the body",
                    self.config.max_line_bytes as u64,
                ));
            }
        }
        if !pending.is_empty() {
            parse(&pending, line_no + 1)?;
        }
        Ok(())
    }

    /// Writes the catalog's raw FBC blobs (JSON Lines, as served) to `out`: the whole
    /// catalog, or one package (`metas?package=`, or `/all` filtered when the server
    /// lacks `metas`). Not cached. Returns the number of blobs written.
    pub async fn download(
        &self,
        ep: &Endpoint,
        package: Option<&str>,
        out: &mut (dyn std::io::Write + Send),
    ) -> Result<u64, ContentError> {
        let mut written: u64 = 0;
        let mut write_line = |line: &[u8], keep: bool| -> Result<(), String> {
            if !keep || line.iter().all(u8::is_ascii_whitespace) {
                return Ok(());
            }
            written += 1;
            out.write_all(line)
                .and_then(|()| out.write_all(b"\n"))
                .map_err(|e| format!("writing the catalog: {e}"))
        };
        if let Some(p) = package {
            let known_without_metas = self
                .no_metas
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&ep.base_url);
            if !known_without_metas {
                let url = self.url(ep, "metas", &[("package", p)])?;
                self.counters.metas_requests.fetch_add(1, Ordering::Relaxed);
                match self
                    .stream_lines(ep, &url, self.config.max_body_bytes, &mut |l| {
                        write_line(l, true)
                    })
                    .await
                {
                    Ok(()) => return Ok(written),
                    Err(FetchError::NoEndpoint) => {
                        self.no_metas
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(ep.base_url.clone());
                    }
                    Err(FetchError::Other(e)) => return Err(e),
                }
            }
        }
        let url = self.url(ep, "all", &[])?;
        self.counters.all_requests.fetch_add(1, Ordering::Relaxed);
        self.stream_lines(ep, &url, self.config.max_all_bytes, &mut |l| {
            let keep = match package {
                None => true,
                Some(p) => {
                    let meta: compact::MetaView =
                        serde_json::from_slice(l).map_err(|e| e.to_string())?;
                    meta.package() == p
                }
            };
            write_line(l, keep)
        })
        .await
        .map_err(|e| not_found(ep, &url, e))?;
        Ok(written)
    }

    fn too_large(
        &self,
        ep: &Endpoint,
        url: &reqwest::Url,
        what: &'static str,
        limit: u64,
    ) -> FetchError {
        ContentError::TooLarge {
            catalog: ep.catalog.clone(),
            url: url.to_string(),
            what,
            limit,
        }
        .into()
    }
}

enum FetchError {
    /// 404 or 405: the endpoint does not exist on this server.
    NoEndpoint,
    Other(ContentError),
}

impl From<ContentError> for FetchError {
    fn from(e: ContentError) -> Self {
        FetchError::Other(e)
    }
}

/// A 404/405 from `/all`: there is nothing to fall back to.
fn not_found(ep: &Endpoint, url: &reqwest::Url, e: FetchError) -> ContentError {
    match e {
        FetchError::NoEndpoint => ContentError::Status {
            catalog: ep.catalog.clone(),
            url: url.to_string(),
            status: 404,
            body: "not found (is the catalog's status.urls.base right?)".to_string(),
        },
        FetchError::Other(e) => e,
    }
}

/// An error with its sources, `a: b: c`.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(inner) = cur {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = inner.source();
    }
    s
}

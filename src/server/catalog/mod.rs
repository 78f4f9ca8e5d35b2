//! The catalogd-compatible catalog content API (docs/concepts/catalogs.md §9.3) over the storage of
//! [`crate::fbc::store`]: `GET|HEAD /catalogs/{name}/api/v1/all` (whole `catalog.jsonl`,
//! with Range and conditional requests as Go's `ServeContent`) and
//! `GET|HEAD /catalogs/{name}/api/v1/metas?schema=&package=&name=` (the index
//! intersection, in file order). Responses are `application/jsonl` with `Last-Modified`
//! (mtime of the stored file), `Vary: Accept-Encoding` and an `ETag` per representation
//! (`"<version>"`, unique per ingest; `"<version>-gzip"` for the gzip-encoded body, so
//! that caches never mix the two and `If-None-Match` works for each); bodies
//! larger than 1400 bytes are gzip-compressed for clients that accept it — `all` from
//! the compressed copy the ingest wrote (`catalog.jsonl.gz`), with its `Content-Length`.
//! Bodies are read from the stored file section by section (small ones at once, large
//! ones streamed by [`stream`] in 256 KiB chunks whose buffers are recycled), so serving
//! memory does not grow with catalog size. Connections are accepted and bounded by [`super::conn`].
//! Each stored version's index is loaded once and cached until the catalog's link
//! points elsewhere. `metas` bodies up to [`GZIP_CACHE_ENTRY`] (plain, or gzip
//! compressed once) are kept per catalog version and query in a bounded cache
//! ([`GZIP_CACHE_BUDGET`] bytes in total), so repeated queries (the resolver's
//! `metas?package=`) cost neither reads nor compression; other bodies are streamed and
//! compressed on the fly by tower-http (also `all` of content stored before
//! the compressed copy existed).

mod conditional;
mod stream;

use super::conn::Limits;
use crate::fbc::store::{
    CATALOG_FILE, CATALOG_GZIP_FILE, Index, Section, current_dir, read_index, validate_catalog_name,
};
use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use conditional::{
    Precondition, RangeSpec, check_preconditions, http_date, if_range_holds, parse_range,
};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;
use tower_http::compression::CompressionLayer;
use tower_http::compression::predicate::{Predicate, SizeAbove};

pub const CONTENT_TYPE_JSONL: &str = "application/jsonl";
/// Bodies up to this size are read at once; larger ones are streamed.
const INLINE_BODY: u64 = 256 << 10;
/// Read size when compressing sections.
const CHUNK: usize = 64 << 10;
/// Responses at least this large are compressed (catalogd's gzip threshold).
pub const GZIP_MIN_SIZE: u64 = 1400;
/// Largest `metas` body (plain or compressed) kept in the body cache.
pub const GZIP_CACHE_ENTRY: u64 = 2 << 20;
/// Total size of the body cache.
pub const GZIP_CACHE_BUDGET: u64 = 32 << 20;

/// One stored catalog version, open for serving.
struct Loaded {
    dir: PathBuf,
    file: Arc<File>,
    size: u64,
    modified: SystemTime,
    last_modified: HeaderValue,
    /// The identity representation's ETag, `"<version>"`.
    etag: HeaderValue,
    /// The gzip representation's ETag, `"<version>-gzip"`.
    etag_gzip: HeaderValue,
    index: Index,
    /// `catalog.jsonl.gz` and its size, when the ingest wrote it.
    gzip: Option<(Arc<File>, u64)>,
}

struct Shared {
    root: PathBuf,
    cache: RwLock<HashMap<String, Arc<Loaded>>>,
    bodies: std::sync::Mutex<BodyCache>,
}

/// (version directory, filter, gzip).
type BodyKey = (PathBuf, [Option<String>; 3], bool);

/// `metas` bodies (plain or gzip) by [`BodyKey`]; evicts oldest first.
#[derive(Default)]
struct BodyCache {
    entries: HashMap<BodyKey, bytes::Bytes>,
    order: std::collections::VecDeque<BodyKey>,
    size: u64,
}

impl BodyCache {
    fn get(&self, key: &BodyKey) -> Option<bytes::Bytes> {
        self.entries.get(key).cloned()
    }

    fn insert(&mut self, key: BodyKey, body: bytes::Bytes) {
        if body.len() as u64 > GZIP_CACHE_ENTRY || self.entries.contains_key(&key) {
            return;
        }
        self.size += body.len() as u64;
        self.order.push_back(key.clone());
        self.entries.insert(key, body);
        while self.size > GZIP_CACHE_BUDGET {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(b) = self.entries.remove(&old) {
                self.size -= b.len() as u64;
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("404 page not found")]
    NotFound,
    #[error("{0}")]
    Internal(String),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if let ApiError::Internal(message) = &self {
            tracing::error!(%message, "catalog server error");
        }
        (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{self}\n"),
        )
            .into_response()
    }
}

/// The catalog API for the catalogs stored under `root` (the `root` given to
/// [`crate::fbc::store`]), with gzip compression and request tracing (access log at
/// `tower_http=debug`).
pub fn router(root: impl Into<PathBuf>) -> Router {
    let shared = Arc::new(Shared {
        root: root.into(),
        cache: RwLock::new(HashMap::new()),
        bodies: std::sync::Mutex::new(BodyCache::default()),
    });
    let compress = SizeAbove::new(GZIP_MIN_SIZE).and(
        |status: StatusCode, _: http::Version, _: &HeaderMap, ext: &http::Extensions| {
            status == StatusCode::OK && ext.get::<Uncompressed>().is_none()
        },
    );
    Router::new()
        .route("/catalogs/{name}/api/v1/all", get(all))
        .route("/catalogs/{name}/api/v1/metas", get(metas))
        .layer(CompressionLayer::new().gzip(true).compress_when(compress))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(shared)
}

/// Serves `router` on `listener` with the default [`Limits`] until `shutdown`
/// completes, then gives open requests [`super::conn::SHUTDOWN_GRACE`] to finish.
pub async fn serve<F>(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: F,
) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    super::conn::serve(listener, None, router, Limits::default(), shutdown).await
}

/// [`serve`] over TLS with the given server configuration (see [`super::tls::server_config`]).
pub async fn serve_tls<F>(
    listener: tokio::net::TcpListener,
    tls: Arc<tokio_rustls::rustls::ServerConfig>,
    router: Router,
    shutdown: F,
) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    super::conn::serve(listener, Some(tls), router, Limits::default(), shutdown).await
}

impl Shared {
    /// The current stored version of `name`, loading its index on first use.
    async fn lookup(self: &Arc<Self>, name: &str) -> Result<Arc<Loaded>, ApiError> {
        validate_catalog_name(name).map_err(ApiError::BadRequest)?;
        // A store may swap the version (and remove the old one) between reading the link
        // and opening the files: look again while the link keeps moving.
        let mut attempts = 0;
        loop {
            let before = current_dir(&self.root, name);
            match self.lookup_once(name).await {
                Err(ApiError::NotFound)
                    if attempts < 10 && current_dir(&self.root, name) != before =>
                {
                    attempts += 1;
                }
                other => return other,
            }
        }
    }

    async fn lookup_once(self: &Arc<Self>, name: &str) -> Result<Arc<Loaded>, ApiError> {
        let dir = current_dir(&self.root, name).ok_or(ApiError::NotFound)?;
        if let Ok(cache) = self.cache.read()
            && let Some(l) = cache.get(name)
            && l.dir == dir
            // The gzip copy is written after the content is served: look for it again.
            && (l.gzip.is_some() || !dir.join(CATALOG_GZIP_FILE).exists())
        {
            return Ok(l.clone());
        }
        let this = self.clone();
        let name = name.to_string();
        tokio::task::spawn_blocking(move || {
            let loaded = Arc::new(load(&dir)?);
            if let Ok(mut cache) = this.cache.write() {
                cache.insert(name, loaded.clone());
            }
            Ok(loaded)
        })
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?
    }
}

fn load(dir: &Path) -> Result<Loaded, ApiError> {
    let path = dir.join(CATALOG_FILE);
    let file = match File::open(&path) {
        Ok(f) => f,
        // Deleted or replaced between the link read and the open.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ApiError::NotFound),
        Err(e) => {
            return Err(ApiError::Internal(format!(
                "opening {}: {e}",
                path.display()
            )));
        }
    };
    let meta = file
        .metadata()
        .map_err(|e| ApiError::Internal(format!("{}: {e}", path.display())))?;
    let index = match read_index(dir) {
        Ok(index) => index,
        Err(crate::fbc::FbcError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Err(ApiError::NotFound);
        }
        Err(e) => return Err(ApiError::Internal(e.to_string())),
    };
    // Written after the content is stored ([`crate::fbc::precompress`]); until it
    // exists, `all` answers uncompressed.
    let gzip = File::open(dir.join(CATALOG_GZIP_FILE))
        .and_then(|f| f.metadata().map(|m| (Arc::new(f), m.len())))
        .ok();
    let modified = meta
        .modified()
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let version = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.rsplit('_').next())
        .unwrap_or("0")
        .to_string();
    Ok(Loaded {
        dir: dir.to_path_buf(),
        file: Arc::new(file),
        size: meta.len(),
        modified,
        last_modified: HeaderValue::from_str(&http_date(modified))
            .map_err(|e| ApiError::Internal(e.to_string()))?,
        etag: HeaderValue::from_str(&format!("\"{version}\""))
            .map_err(|e| ApiError::Internal(e.to_string()))?,
        etag_gzip: HeaderValue::from_str(&format!("\"{version}-gzip\""))
            .map_err(|e| ApiError::Internal(e.to_string()))?,
        index,
        gzip,
    })
}

/// Marks a response the compression layer leaves as it is (`all` before its gzip copy
/// exists).
#[derive(Clone, Copy)]
struct Uncompressed;

/// Which encoding of a body a response carries: its ETag differs per representation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Encoding {
    Identity,
    Gzip,
}

impl Encoding {
    /// Gzip when the client accepts it and the body is large enough to be compressed
    /// (here from a stored or cached copy, or by the compression layer on the fly).
    fn select(headers: &HeaderMap, body_size: u64) -> Encoding {
        if body_size >= GZIP_MIN_SIZE && accepts_gzip(headers) {
            Encoding::Gzip
        } else {
            Encoding::Identity
        }
    }

    fn etag(self, l: &Loaded) -> &HeaderValue {
        match self {
            Encoding::Identity => &l.etag,
            Encoding::Gzip => &l.etag_gzip,
        }
    }
}

fn base_response(status: StatusCode, l: &Loaded, encoding: Encoding) -> http::response::Builder {
    Response::builder()
        .status(status)
        .header(header::LAST_MODIFIED, l.last_modified.clone())
        .header(header::ETAG, encoding.etag(l).clone())
        .header(header::VARY, "accept-encoding")
}

fn precondition_response(p: Precondition, l: &Loaded, encoding: Encoding) -> Option<Response> {
    let status = match p {
        Precondition::Proceed => return None,
        Precondition::NotModified => StatusCode::NOT_MODIFIED,
        Precondition::Failed => StatusCode::PRECONDITION_FAILED,
    };
    Some(build(base_response(status, l, encoding), Body::empty()))
}

fn build(b: http::response::Builder, body: Body) -> Response {
    b.body(body)
        .unwrap_or_else(|e| ApiError::Internal(e.to_string()).into_response())
}

async fn all(
    State(shared): State<Arc<Shared>>,
    UrlPath(name): UrlPath<String>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let l = shared.lookup(&name).await?;
    // Ranges are served from the plain file (identity); otherwise gzip when accepted.
    let range = headers
        .get(header::RANGE)
        .filter(|_| if_range_holds(&headers, &l));
    let encoding = match range {
        Some(_) => Encoding::Identity,
        None if l.gzip.is_some() => Encoding::select(&headers, l.size),
        // No gzip copy yet: uncompressed rather than compressing it all on the fly.
        None => Encoding::Identity,
    };
    let etag = encoding.etag(&l);
    if let Some(r) = precondition_response(check_preconditions(&headers, &l, etag), &l, encoding) {
        return Ok(r);
    }
    if encoding == Encoding::Gzip
        && let Some((gz, gz_size)) = &l.gzip
    {
        // The compressed copy written at ingest.
        let builder = base_response(StatusCode::OK, &l, encoding)
            .header(header::CONTENT_TYPE, CONTENT_TYPE_JSONL)
            .header(header::CONTENT_ENCODING, "gzip")
            .header(header::CONTENT_LENGTH, *gz_size);
        let body = if method == Method::HEAD {
            Body::empty()
        } else {
            sections_body(gz, vec![[0, *gz_size]], *gz_size)?
        };
        return Ok(build(builder, body));
    }
    let mut status = StatusCode::OK;
    let mut section: Section = [0, l.size];
    // Identity (a range, no gzip accepted, or no gzip copy yet).
    let mut builder =
        base_response(StatusCode::OK, &l, encoding).header(header::ACCEPT_RANGES, "bytes");
    if let Some(range) = range {
        match parse_range(range, l.size) {
            RangeSpec::Full => {}
            RangeSpec::Unsatisfiable => {
                let r = base_response(StatusCode::RANGE_NOT_SATISFIABLE, &l, encoding)
                    .header(header::CONTENT_RANGE, format!("bytes */{}", l.size));
                return Ok(build(r, Body::empty()));
            }
            RangeSpec::Part(start, len) => {
                status = StatusCode::PARTIAL_CONTENT;
                section = [start, len];
                builder = builder.header(
                    header::CONTENT_RANGE,
                    format!("bytes {start}-{}/{}", start + len - 1, l.size),
                );
            }
        }
    }
    let builder = builder
        .status(status)
        .header(header::CONTENT_TYPE, CONTENT_TYPE_JSONL)
        .header(header::CONTENT_LENGTH, section[1])
        .extension(Uncompressed);
    let body = if method == Method::HEAD {
        Body::empty()
    } else {
        sections_body(&l.file, vec![section], section[1])?
    };
    Ok(build(builder, body))
}

async fn metas(
    State(shared): State<Arc<Shared>>,
    UrlPath(name): UrlPath<String>,
    Query(params): Query<Vec<(String, String)>>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let mut filter: [Option<String>; 3] = [None, None, None];
    for (k, v) in params {
        let slot = match k.as_str() {
            "schema" => 0,
            "package" => 1,
            "name" => 2,
            other => {
                return Err(ApiError::BadRequest(format!(
                    "invalid query parameter {other:?}: allowed are schema, package and name"
                )));
            }
        };
        filter[slot].get_or_insert(v);
    }
    let l = shared.lookup(&name).await?;
    let sections = select(&l, &filter);
    let total: u64 = sections.iter().map(|s| s[1]).sum();
    let encoding = Encoding::select(&headers, total);
    let etag = encoding.etag(&l);
    if let Some(r) = precondition_response(check_preconditions(&headers, &l, etag), &l, encoding) {
        return Ok(r);
    }
    let gzip = method == Method::GET && encoding == Encoding::Gzip && total <= 4 * GZIP_CACHE_ENTRY;
    if method == Method::GET && (gzip || total <= GZIP_CACHE_ENTRY) {
        let key = (l.dir.clone(), filter, gzip);
        let cached = shared.bodies.lock().ok().and_then(|c| c.get(&key));
        let body = match cached {
            Some(b) => b,
            None => {
                let file = l.file.clone();
                let b = tokio::task::spawn_blocking(move || {
                    if gzip {
                        gzip_sections(&file, &sections, total)
                    } else {
                        read_sections(&file, &sections, total)
                    }
                })
                .await
                .map_err(|e| ApiError::Internal(e.to_string()))??;
                if let Ok(mut c) = shared.bodies.lock() {
                    c.insert(key, b.clone());
                }
                b
            }
        };
        let mut builder = base_response(StatusCode::OK, &l, encoding)
            .header(header::CONTENT_TYPE, CONTENT_TYPE_JSONL);
        if gzip {
            builder = builder.header(header::CONTENT_ENCODING, "gzip");
        }
        let builder = builder.header(header::CONTENT_LENGTH, b_len(&body));
        return Ok(build(builder, Body::from(body)));
    }
    // Identity, or (large bodies, HEAD) gzip compressed on the fly by the layer.
    let builder = base_response(StatusCode::OK, &l, encoding)
        .header(header::CONTENT_TYPE, CONTENT_TYPE_JSONL)
        .header(header::CONTENT_LENGTH, total);
    let body = if method == Method::HEAD {
        Body::empty()
    } else {
        sections_body(&l.file, sections, total)?
    };
    Ok(build(builder, body))
}

fn b_len(b: &bytes::Bytes) -> u64 {
    b.len() as u64
}

/// Whether `Accept-Encoding` allows gzip (present with a non-zero q-value).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',').any(|item| {
                let mut parts = item.split(';').map(str::trim);
                let coding = parts.next().unwrap_or_default();
                let q_zero = parts.any(|p| {
                    p.strip_prefix("q=")
                        .and_then(|q| q.parse::<f32>().ok())
                        .is_some_and(|q| q == 0.0)
                });
                (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !q_zero
            })
        })
}

fn read_sections(file: &File, sections: &[Section], total: u64) -> Result<bytes::Bytes, ApiError> {
    let mut buf = vec![0u8; total as usize];
    let mut at = 0usize;
    for &[off, len] in sections {
        let len = len as usize;
        file.read_exact_at(&mut buf[at..at + len], off)
            .map_err(|e| ApiError::Internal(format!("reading catalog: {e}")))?;
        at += len;
    }
    Ok(bytes::Bytes::from(buf))
}

fn gzip_sections(file: &File, sections: &[Section], total: u64) -> Result<bytes::Bytes, ApiError> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(total as usize / 4),
        flate2::Compression::default(),
    );
    let mut buf = vec![0u8; CHUNK];
    for &[mut off, len] in sections {
        let end = off + len;
        while off < end {
            let n = ((end - off) as usize).min(CHUNK);
            file.read_exact_at(&mut buf[..n], off)
                .map_err(|e| ApiError::Internal(format!("reading catalog: {e}")))?;
            enc.write_all(&buf[..n])
                .map_err(|e| ApiError::Internal(e.to_string()))?;
            off += n as u64;
        }
    }
    enc.finish()
        .map(bytes::Bytes::from)
        .map_err(|e| ApiError::Internal(e.to_string()))
}

/// The sections matching all non-empty filters, in file order.
fn select(l: &Loaded, filter: &[Option<String>; 3]) -> Vec<Section> {
    let maps = [&l.index.by_schema, &l.index.by_package, &l.index.by_name];
    let mut lists = Vec::new();
    for (map, value) in maps.iter().zip(filter) {
        match value.as_deref() {
            None | Some("") => {}
            Some(v) => match map.get(v) {
                Some(list) => lists.push(list.as_slice()),
                None => return Vec::new(),
            },
        }
    }
    if lists.is_empty() {
        return vec![[0, l.size]];
    }
    lists.sort_by_key(|l| l.len());
    let mut result: Vec<Section> = lists[0].to_vec();
    for other in &lists[1..] {
        let mut j = 0;
        result.retain(|s| {
            while j < other.len() && other[j][0] < s[0] {
                j += 1;
            }
            j < other.len() && other[j][0] == s[0]
        });
    }
    result
}

/// A body with the given sections of `file`, read at once when small, else streamed
/// ([`stream::body`]).
fn sections_body(file: &Arc<File>, sections: Vec<Section>, total: u64) -> Result<Body, ApiError> {
    if total > INLINE_BODY {
        return Ok(stream::body(file.clone(), sections));
    }
    let mut buf = vec![0u8; total as usize];
    let mut at = 0usize;
    for [off, len] in sections {
        let len = len as usize;
        file.read_exact_at(&mut buf[at..at + len], off)
            .map_err(|e| ApiError::Internal(format!("reading catalog: {e}")))?;
        at += len;
    }
    Ok(Body::from(buf))
}

#[cfg(test)]
mod tests;

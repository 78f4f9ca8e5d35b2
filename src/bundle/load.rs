//! Loading a registry+v1 bundle from a directory (an unpacked bundle image has the same
//! layout): `metadata/annotations.yaml`, optional `metadata/properties.yaml` and
//! `metadata/dependencies.yaml`, and every YAML/JSON document in `manifests/` (see
//! docs/concepts/rendering.md §5.1). All reading is bounded (file sizes, file count, YAML nesting and node budgets,
//! alias expansion); this module checks structure only, [`super::validate`] checks content.

use super::{Bundle, CSV_KIND};
use serde_json::Value;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Limits applied while loading; defaults suit real bundles (the largest known is ~7 MB).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    /// Largest accepted manifest or metadata file, in bytes (default 64 MiB).
    pub max_file_bytes: u64,
    /// Largest accepted sum of all files, in bytes (default 256 MiB).
    pub max_total_bytes: u64,
    /// Most files accepted in `manifests/` (default 10,000).
    pub max_files: usize,
    /// Deepest YAML nesting accepted (default 128 levels).
    pub max_yaml_depth: usize,
    /// Most YAML nodes accepted in one file (default 4,000,000).
    pub max_yaml_nodes: usize,
    /// Threads parsing manifest files. Default 0: by size, one thread per
    /// [`BYTES_PER_THREAD`] of manifests up to the number of CPUs (at most 4), so a
    /// typical bundle parses on the calling thread and a multi-megabyte one (large
    /// CRDs) in about half the time on two CPUs, for a few percent more peak memory
    /// (`examples/bench_render.rs`). n = exactly n threads (1: lowest peak memory).
    pub parallelism: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            max_file_bytes: 64 * 1024 * 1024,
            max_total_bytes: 256 * 1024 * 1024,
            max_files: 10_000,
            max_yaml_depth: 128,
            max_yaml_nodes: 4_000_000,
            parallelism: 0,
        }
    }
}

/// Manifest bytes that justify one more parsing thread when `parallelism` is 0
/// (below it, a thread's start and its share of the allocator cost more than it saves).
pub const BYTES_PER_THREAD: u64 = 1024 * 1024;

/// The parsing threads for `files` manifest files of `bytes` bytes in all.
pub(super) fn parsing_threads(parallelism: usize, files: usize, bytes: u64) -> usize {
    let threads = match parallelism {
        0 => {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            let by_size = usize::try_from(bytes.div_ceil(BYTES_PER_THREAD)).unwrap_or(usize::MAX);
            cpus.clamp(1, 4).min(by_size)
        }
        n => n,
    };
    threads.min(files).max(1)
}

/// Why a bundle directory could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("not a registry+v1 bundle: {0}")]
    NotRegistryV1(String),
    #[error(
        "subdirectories are not allowed within the \"manifests\" directory of the bundle image filesystem: found \"{0}\""
    )]
    ManifestsSubdirectory(String),
    #[error(
        "\"{path}\" is a symbolic link: a bundle's manifests/ and metadata/ must be directories inside it (links are refused, as for the files in them)"
    )]
    SymlinkedDirectory { path: String },
    #[error("file \"{path}\" is not a regular file")]
    NotRegularFile { path: String },
    #[error("file \"{path}\" is {size} bytes, more than the limit of {limit} bytes")]
    FileTooLarge { path: String, size: u64, limit: u64 },
    #[error("bundle is larger than the limit of {limit} bytes")]
    BundleTooLarge { limit: u64 },
    #[error("\"manifests\" holds more than {limit} files")]
    TooManyFiles { limit: usize },
    #[error("file \"{path}\" is not valid UTF-8")]
    NotUtf8 { path: String },
    #[error("file \"{path}\": invalid YAML/JSON: {message}")]
    Parse { path: String, message: String },
    #[error("file \"{path}\" document {document}: not a Kubernetes object: {reason}")]
    NotKubernetesObject {
        path: String,
        document: usize,
        reason: String,
    },
    #[error("no ClusterServiceVersion found in \"manifests\"")]
    NoCsv,
    #[error(
        "more than one ClusterServiceVersion found in \"manifests\": \"{first}\" and \"{second}\""
    )]
    MultipleCsvs { first: String, second: String },
    #[error("file \"{path}\": {reason}")]
    InvalidMetadata { path: String, reason: String },
}

use super::metadata::ANNOTATIONS_REL;
const PACKAGE_ANNOTATION: &str = "operators.operatorframework.io.bundle.package.v1";
const MEDIATYPE_ANNOTATION: &str = "operators.operatorframework.io.bundle.mediatype.v1";

/// Loads the bundle whose root (holding `manifests/` and `metadata/`) is `root`.
pub fn load_dir(root: &Path, opts: &LoadOptions) -> Result<Bundle, LoadError> {
    refuse_symlinked_dirs(root)?;
    let mut budget = opts.max_total_bytes;
    let metadata = super::metadata::read_metadata(&root.join("metadata"), opts, &mut budget)?;
    let package_name = package_name(&metadata)?;
    let super::metadata::Metadata {
        properties,
        dependencies,
        warnings,
        ..
    } = metadata;
    let manifests_dir = root.join("manifests");
    let (files, bytes) = list_manifests(&manifests_dir, opts)?;
    let threads = parsing_threads(opts.parallelism, files.len(), bytes);
    let parsed = parse_files_parallel(&manifests_dir, &files, threads, opts, budget)?;
    let named = files.iter().map(|n| format!("manifests/{n}")).zip(parsed);
    let (mut csv, crds, others) = sort_documents(named)?;
    // Upstream re-encodes the annotation whenever `metadata/properties.yaml` exists.
    if !properties.is_empty() || root.join("metadata/properties.yaml").is_file() {
        merge_properties_annotation(&mut csv, &properties);
    }
    Ok(Bundle {
        package_name,
        csv,
        crds,
        others,
        properties,
        dependencies,
        warnings,
    })
}

/// `manifests/` and `metadata/` must be real directories of the bundle: a link would be
/// followed out of it (the files in them are checked with `symlink_metadata` too).
fn refuse_symlinked_dirs(root: &Path) -> Result<(), LoadError> {
    for dir in ["manifests", "metadata"] {
        let path = root.join(dir);
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(LoadError::SymlinkedDirectory { path: dir.into() });
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(LoadError::Io { path, source }),
        }
    }
    Ok(())
}

/// The annotations `metadata/` declares: checks the media type, returns the package name.
fn package_name(metadata: &super::metadata::Metadata) -> Result<String, LoadError> {
    let Some(map) = &metadata.annotations else {
        return Err(match &metadata.annotations_problem {
            Some(LoadError::Parse { path, message }) => LoadError::Parse {
                path: path.clone(),
                message: message.clone(),
            },
            Some(LoadError::InvalidMetadata { path, reason }) => LoadError::InvalidMetadata {
                path: path.clone(),
                reason: reason.clone(),
            },
            _ => LoadError::NotRegistryV1(format!("{ANNOTATIONS_REL} not found")),
        });
    };
    if let Some(media) = map.get(MEDIATYPE_ANNOTATION).and_then(Value::as_str)
        && media != "registry+v1"
    {
        return Err(LoadError::NotRegistryV1(format!(
            "media type annotation \"{MEDIATYPE_ANNOTATION}\" is \"{media}\", expected \"registry+v1\""
        )));
    }
    Ok(map
        .get(PACKAGE_ANNOTATION)
        .map(|v| match v {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        })
        .unwrap_or_default())
}

/// The file names in `manifests/`, sorted; directories are rejected before any parsing.
fn list_manifests(
    manifests_dir: &Path,
    opts: &LoadOptions,
) -> Result<(Vec<String>, u64), LoadError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LoadError::Io { path, source }
    };
    let entries = fs::read_dir(manifests_dir).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            LoadError::NotRegistryV1("directory \"manifests\" not found".into())
        } else {
            io(manifests_dir)(e)
        }
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io(manifests_dir))?;
        files.push(entry.file_name().to_string_lossy().into_owned());
        if files.len() > opts.max_files {
            return Err(LoadError::TooManyFiles {
                limit: opts.max_files,
            });
        }
    }
    files.sort();
    let mut bytes = 0u64;
    for name in &files {
        let path = manifests_dir.join(name);
        let meta = fs::symlink_metadata(&path).map_err(io(&path))?;
        if meta.is_dir() {
            return Err(LoadError::ManifestsSubdirectory(format!(
                "manifests/{name}"
            )));
        }
        bytes = bytes.saturating_add(meta.len());
    }
    Ok((files, bytes))
}

/// The manifests' documents split into the one CSV, the CRDs and the other objects.
fn sort_documents(
    files: impl Iterator<Item = (String, Vec<Value>)>,
) -> Result<(Value, Vec<Value>, Vec<Value>), LoadError> {
    let mut csv: Option<(String, Value)> = None;
    let (mut crds, mut others) = (Vec::new(), Vec::new());
    for (rel, docs) in files {
        for (i, doc) in docs.into_iter().enumerate() {
            if doc.is_null() {
                continue;
            }
            check_kubernetes_object(&rel, i + 1, &doc)?;
            let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
            let api_version = doc
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if kind == CSV_KIND {
                let this = object_name(&doc).to_string();
                if let Some((first, _)) = &csv {
                    return Err(LoadError::MultipleCsvs {
                        first: first.clone(),
                        second: this,
                    });
                }
                csv = Some((this, doc));
            } else if kind == "CustomResourceDefinition" && api_version == "apiextensions.k8s.io/v1"
            {
                crds.push(doc);
            } else {
                others.push(doc);
            }
        }
    }
    let (_, csv) = csv.ok_or(LoadError::NoCsv)?;
    Ok((csv, crds, others))
}

/// The parsed documents of one manifest file, or why it could not be read.
type FileResult = Result<Vec<Value>, LoadError>;

/// Reads and parses every manifest file on `threads` threads (the caller's among them);
/// results come back in `files` order, and the first error in that order wins.
fn parse_files_parallel(
    dir: &Path,
    files: &[String],
    threads: usize,
    opts: &LoadOptions,
    budget: u64,
) -> Result<Vec<Vec<Value>>, LoadError> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let remaining = AtomicU64::new(budget);
    let results: Mutex<Vec<Option<FileResult>>> =
        Mutex::new((0..files.len()).map(|_| None).collect());
    let work = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(name) = files.get(i) else { break };
            let rel = format!("manifests/{name}");
            let result = (|| {
                let mut unlimited = u64::MAX;
                let text = read_optional(&dir.join(name), &rel, opts, &mut unlimited)?;
                let Some(text) = text else {
                    return Ok(Vec::new());
                };
                let size = text.len() as u64;
                remaining
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                        left.checked_sub(size)
                    })
                    .map_err(|_| LoadError::BundleTooLarge {
                        limit: opts.max_total_bytes,
                    })?;
                parse_documents(&rel, &text, opts)
            })();
            let failed = result.is_err();
            if let Ok(mut r) = results.lock() {
                r[i] = Some(result);
            }
            if failed {
                // stop handing out further files; earlier ones still finish
                next.store(files.len(), Ordering::Relaxed);
            }
        }
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(work);
        }
        work();
    });
    let results = results.into_inner().unwrap_or_default();
    let mut out = Vec::with_capacity(files.len());
    for r in results {
        match r {
            Some(Ok(docs)) => out.push(docs),
            Some(Err(e)) => return Err(e),
            // Files are claimed in order, so an unparsed file comes after a failed one,
            // whose error was returned above.
            None => out.push(Vec::new()),
        }
    }
    Ok(out)
}

/// Releases spare capacity of every map and list in a parsed document.
fn shrink(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.values_mut().for_each(shrink);
            if m.len() > 1 {
                let mut exact = serde_json::Map::with_capacity(m.len());
                exact.extend(std::mem::take(m));
                *m = exact;
            }
        }
        Value::Array(a) => {
            a.iter_mut().for_each(shrink);
            a.shrink_to_fit();
        }
        _ => {}
    }
}

/// Appends `properties` to the CSV annotation `olm.properties` (existing JSON array first).
fn merge_properties_annotation(csv: &mut Value, properties: &[Value]) {
    let Some(obj) = csv.as_object_mut() else {
        return;
    };
    let metadata = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(annotations) = annotations.as_object_mut() else {
        return;
    };
    let existing = annotations.get("olm.properties").and_then(Value::as_str);
    let mut all: Vec<Value> = match existing.map(serde_json::from_str::<Vec<Value>>) {
        Some(Ok(list)) => list,
        // Text that is not a list of properties is left as the bundle wrote it.
        Some(Err(_)) => return,
        None if properties.is_empty() => return,
        None => Vec::new(),
    };
    all.extend(properties.iter().cloned());
    all.iter_mut().for_each(as_property);
    annotations.insert(
        "olm.properties".into(),
        Value::String(Value::Array(all).to_string()),
    );
}

/// A property as upstream re-encodes it (Go's `property.Property`): `type` then `value`,
/// other fields dropped; anything that is not an object is kept.
fn as_property(p: &mut Value) {
    let Some(obj) = p.as_object_mut() else {
        return;
    };
    let mut out = serde_json::Map::new();
    out.insert(
        "type".into(),
        obj.remove("type").unwrap_or(Value::String(String::new())),
    );
    out.insert("value".into(), obj.remove("value").unwrap_or(Value::Null));
    *p = Value::Object(out);
}

fn object_name(doc: &Value) -> &str {
    doc.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn check_kubernetes_object(path: &str, document: usize, doc: &Value) -> Result<(), LoadError> {
    let err = |reason: &str| LoadError::NotKubernetesObject {
        path: path.to_string(),
        document,
        reason: reason.to_string(),
    };
    let obj = doc
        .as_object()
        .ok_or_else(|| err("the document is not a mapping"))?;
    match obj.get("apiVersion") {
        Some(Value::String(s)) if !s.is_empty() => {}
        _ => return Err(err("missing string field \"apiVersion\"")),
    }
    match obj.get("kind") {
        Some(Value::String(s)) if !s.is_empty() => {}
        _ => return Err(err("missing string field \"kind\"")),
    }
    match obj.get("metadata").and_then(|m| m.get("name")) {
        Some(Value::String(s)) if !s.is_empty() => Ok(()),
        _ => Err(err("missing string field \"metadata.name\"")),
    }
}

/// Reads a file if it exists, checking its size before reading and never reading past the limit.
pub(super) fn read_optional(
    path: &Path,
    rel: &str,
    opts: &LoadOptions,
    budget: &mut u64,
) -> Result<Option<String>, LoadError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(LoadError::Io {
                path: path.to_path_buf(),
                source: e,
            });
        }
    };
    if !meta.is_file() {
        return Err(LoadError::NotRegularFile {
            path: rel.to_string(),
        });
    }
    if meta.len() > opts.max_file_bytes {
        return Err(LoadError::FileTooLarge {
            path: rel.into(),
            size: meta.len(),
            limit: opts.max_file_bytes,
        });
    }
    let file = fs::File::open(path).map_err(|e| LoadError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(opts.max_file_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| LoadError::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
    let size = bytes.len() as u64;
    if size > opts.max_file_bytes {
        return Err(LoadError::FileTooLarge {
            path: rel.into(),
            size,
            limit: opts.max_file_bytes,
        });
    }
    if size > *budget {
        return Err(LoadError::BundleTooLarge {
            limit: opts.max_total_bytes,
        });
    }
    *budget -= size;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| LoadError::NotUtf8 {
            path: rel.to_string(),
        })
}

pub(super) fn yaml_options(opts: &LoadOptions) -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: opts.max_yaml_depth,
            max_nodes: opts.max_yaml_nodes,
            max_events: opts.max_yaml_nodes.saturating_mul(2),
            max_total_scalar_bytes: usize::try_from(opts.max_file_bytes).unwrap_or(usize::MAX),
        },
        emit_comments: false,
        // Go's reader (sigs.k8s.io/yaml over go-yaml v2, as opm reads bundles) keeps the
        // last of duplicate keys.
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::LastWins,
    }
}

/// Parses every YAML (or JSON) document of a file: the event-level fast path for plain
/// Kubernetes YAML, else the full deserializer, budgeted and with alias expansion bounded
/// ([`crate::yaml`]).
pub(super) fn parse_documents(
    rel: &str,
    text: &str,
    opts: &LoadOptions,
) -> Result<Vec<Value>, LoadError> {
    if let Some(docs) =
        super::fast_yaml::parse_documents(text, opts.max_yaml_depth, opts.max_yaml_nodes)
    {
        return Ok(docs);
    }
    let mut docs = crate::yaml::from_multiple::<Value>(text, yaml_options(opts)).map_err(|e| {
        LoadError::Parse {
            path: rel.to_string(),
            message: first_line(&e.to_string()),
        }
    })?;
    docs.iter_mut().for_each(shrink);
    Ok(docs)
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

//! On-disk storage of ingested catalogs (docs/concepts/catalogs.md §9.2). Each catalog lives in
//! `<root>/<name>/` with `catalog.jsonl` (every blob as one compact JSON line, in walk
//! order) and `index.json` (`by_schema`/`by_package`/`by_name` → `[offset, length]`
//! sections, catalogd's layout). `<root>/<name>` is a symbolic link to a version
//! directory `<root>/.<name>_<version>`; an ingest streams into a fresh version
//! directory while parsing and validating, and only when everything succeeded the link
//! is replaced atomically (rename), so readers see the old or the new content, never a
//! mix, and a failed ingest leaves the old content served. Older version directories and
//! orphans of crashed ingests are removed. Stores of one catalog must not run
//! concurrently (the reconciler handles one catalog at a time).

use super::FbcError;
use super::parse::{Limits, WalkStats, display_path, walk_catalog};
use super::validate::{Summary, Validator};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub const CATALOG_FILE: &str = "catalog.jsonl";
pub const INDEX_FILE: &str = "index.json";
/// The gzip copy of [`CATALOG_FILE`], written after the store ([`super::precompress`]).
pub const CATALOG_GZIP_FILE: &str = "catalog.jsonl.gz";

/// `[offset, length]` of one blob line (the length includes the newline).
pub type Section = [u64; 2];

/// The index written beside `catalog.jsonl`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Index {
    pub by_schema: BTreeMap<String, Vec<Section>>,
    pub by_package: BTreeMap<String, Vec<Section>>,
    pub by_name: BTreeMap<String, Vec<Section>>,
}

impl Index {
    fn add(map: &mut BTreeMap<String, Vec<Section>>, key: &str, section: Section) {
        if key.is_empty() {
            return;
        }
        match map.get_mut(key) {
            Some(v) => v.push(section),
            None => {
                map.insert(key.to_string(), vec![section]);
            }
        }
    }
}

/// A stored catalog version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredCatalog {
    pub name: String,
    /// The version directory (what `<root>/<name>` points to).
    pub dir: PathBuf,
    /// Unique per ingest; the HTTP ETag is derived from it.
    pub version: String,
    /// Size of `catalog.jsonl`.
    pub size: u64,
    pub blobs: u64,
    pub summary: Summary,
    pub last_modified: SystemTime,
    /// FBC invariant violations of the stored content (each naming `file:line`); as in
    /// catalogd they do not prevent storing (unless [`StoreOptions::strict`]).
    pub warnings: Vec<String>,
}

/// How [`store_with_options`] ingests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreOptions {
    pub limits: Limits,
    /// Refuse a catalog that breaks FBC invariants ([`FbcError::Invalid`]). Off by
    /// default: like catalogd, which checks only that every document is a JSON object
    /// with string `schema`/`package`/`name`, the catalog is stored and the problems are
    /// returned as [`StoredCatalog::warnings`]. Syntax errors and limits always fail.
    pub strict: bool,
}

impl StoredCatalog {
    pub fn catalog_file(&self) -> PathBuf {
        self.dir.join(CATALOG_FILE)
    }
}

/// Checks a catalog name is a DNS-1123 subdomain (as Kubernetes names are); the error
/// is Kubernetes' message.
pub fn validate_catalog_name(name: &str) -> Result<(), String> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.len() > 253 {
        return Err("must be no more than 253 characters".into());
    }
    if !name.split('.').all(label_ok) {
        return Err(format!(
            "{name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ));
    }
    Ok(())
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FbcError + '_ {
    move |source| FbcError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn new_version() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{nanos:x}{:x}{:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Ingests the catalog at `source_dir` (a directory tree or one file) as `catalog_name`
/// under `root` with default [`Limits`].
pub fn store(
    root: &Path,
    catalog_name: &str,
    source_dir: &Path,
) -> Result<StoredCatalog, FbcError> {
    store_with_limits(root, catalog_name, source_dir, &Limits::default())
}

/// [`store`] with explicit limits. On any error nothing changes for readers.
pub fn store_with_limits(
    root: &Path,
    catalog_name: &str,
    source_dir: &Path,
    limits: &Limits,
) -> Result<StoredCatalog, FbcError> {
    store_with_options(
        root,
        catalog_name,
        source_dir,
        &StoreOptions {
            limits: limits.clone(),
            strict: false,
        },
    )
}

/// [`store`] with explicit options. On any error nothing changes for readers.
pub fn store_with_options(
    root: &Path,
    catalog_name: &str,
    source_dir: &Path,
    options: &StoreOptions,
) -> Result<StoredCatalog, FbcError> {
    validate_catalog_name(catalog_name).map_err(|message| FbcError::InvalidName { message })?;
    std::fs::create_dir_all(root).map_err(io(root))?;
    clean_orphans(root, catalog_name)?;
    let version = new_version();
    let dir_name = format!(".{catalog_name}_{version}");
    let dir = root.join(&dir_name);
    std::fs::create_dir(&dir).map_err(io(&dir))?;
    let result = write_version(&dir, source_dir, options).and_then(|(stats, summary, warnings)| {
        let file = dir.join(CATALOG_FILE);
        let meta = std::fs::metadata(&file).map_err(io(&file))?;
        swap_link(root, catalog_name, &dir_name)?;
        Ok(StoredCatalog {
            name: catalog_name.to_string(),
            dir: dir.clone(),
            version: version.clone(),
            size: meta.len(),
            blobs: stats.blobs,
            summary,
            last_modified: meta.modified().map_err(io(&file))?,
            warnings,
        })
    });
    match result {
        Ok(stored) => {
            // Old versions: readers that opened them keep their open files.
            let _ = clean_orphans(root, catalog_name);
            Ok(stored)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(e)
        }
    }
}

fn write_version(
    dir: &Path,
    source: &Path,
    options: &StoreOptions,
) -> Result<(WalkStats, Summary, Vec<String>), FbcError> {
    let file_path = dir.join(CATALOG_FILE);
    let file = std::fs::File::create(&file_path).map_err(io(&file_path))?;
    let mut out = BufWriter::with_capacity(256 << 10, file);
    let mut index = Index::default();
    let mut validator = Validator::default();
    let mut offset = 0u64;
    let stats = walk_catalog(source, &options.limits, &mut |blob| {
        let shown = display_path(source, blob.path);
        let shown_blob = super::parse::Blob {
            path: &shown,
            ..*blob
        };
        validator.add(&shown_blob);
        out.write_all(blob.json)
            .and_then(|_| out.write_all(b"\n"))
            .map_err(io(&file_path))?;
        let section = [offset, blob.json.len() as u64 + 1];
        offset += section[1];
        Index::add(&mut index.by_schema, blob.view.schema(), section);
        // catalogd indexes the `package` field as written: the `olm.package` blob (its
        // package is its `name`) is not under its package.
        Index::add(
            &mut index.by_package,
            blob.view.package.as_deref().unwrap_or_default(),
            section,
        );
        Index::add(&mut index.by_name, blob.view.name(), section);
        Ok(())
    })
    .map_err(|e| relative_error(source, e))?;
    let (summary, warnings) = classify_violations(validator.finish(), options.strict)?;
    out.into_inner().map_err(|e| FbcError::Io {
        path: file_path.clone(),
        source: e.into_error(),
    })?;
    let index_path = dir.join(INDEX_FILE);
    let index_file = std::fs::File::create(&index_path).map_err(io(&index_path))?;
    let mut w = BufWriter::new(index_file);
    serde_json::to_writer(&mut w, &index)
        .map_err(std::io::Error::from)
        .and_then(|_| w.flush())
        .map_err(io(&index_path))?;
    Ok((stats, summary, warnings))
}

/// The acceptance rule of catalogd that the store and `olmv1 catalog validate` share:
/// FBC invariant violations are warnings, or with `strict` an [`FbcError::Invalid`].
pub fn classify_violations(
    result: Result<Summary, (Summary, Vec<String>)>,
    strict: bool,
) -> Result<(Summary, Vec<String>), FbcError> {
    match result {
        Ok(summary) => Ok((summary, Vec::new())),
        Err((summary, problems)) if !strict => Ok((summary, problems)),
        Err((_, problems)) => Err(FbcError::Invalid { problems }),
    }
}

/// What [`validate_catalog`] found in a catalog that parses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validation {
    pub summary: Summary,
    pub blobs: u64,
    /// Invariant violations (each naming `file:line`); empty in strict mode, where
    /// they are an [`FbcError::Invalid`] instead.
    pub warnings: Vec<String>,
}

/// Parses and validates the catalog at `source` exactly as [`store_with_options`]
/// would ingest it, without writing anything: syntax errors and limits fail,
/// invariant violations are classified by [`classify_violations`].
pub fn validate_catalog(source: &Path, options: &StoreOptions) -> Result<Validation, FbcError> {
    let mut validator = Validator::default();
    let stats = walk_catalog(source, &options.limits, &mut |blob| {
        let shown = display_path(source, blob.path);
        validator.add(&super::parse::Blob {
            path: &shown,
            ..*blob
        });
        Ok(())
    })
    .map_err(|e| relative_error(source, e))?;
    let (summary, warnings) = classify_violations(validator.finish(), options.strict)?;
    Ok(Validation {
        summary,
        blobs: stats.blobs,
        warnings,
    })
}

fn relative_error(source: &Path, e: FbcError) -> FbcError {
    match e {
        FbcError::Parse { path, message } => FbcError::Parse {
            path: display_path(source, &path),
            message,
        },
        other => other,
    }
}

fn swap_link(root: &Path, name: &str, target: &str) -> Result<(), FbcError> {
    let link = root.join(name);
    let tmp = root.join(format!(".{name}_{}.link", new_version()));
    std::os::unix::fs::symlink(target, &tmp).map_err(io(&tmp))?;
    if let Ok(meta) = std::fs::symlink_metadata(&link)
        && meta.is_dir()
    {
        // A plain directory (not written by this module): replace it, not atomically.
        std::fs::remove_dir_all(&link).map_err(io(&link))?;
    }
    std::fs::rename(&tmp, &link).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        FbcError::Io {
            path: link.clone(),
            source: e,
        }
    })
}

/// The version directory `<root>/<name>` currently points to, if any.
pub fn current_dir(root: &Path, name: &str) -> Option<PathBuf> {
    let target = std::fs::read_link(root.join(name)).ok()?;
    Some(root.join(target))
}

/// Names of the catalogs stored under `root` (for garbage collection of catalogs that
/// no longer exist).
pub fn stored_names(root: &Path) -> Result<Vec<String>, FbcError> {
    let mut names = Vec::new();
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(names),
        Err(e) => {
            return Err(FbcError::Io {
                path: root.to_path_buf(),
                source: e,
            });
        }
    };
    for entry in entries {
        let entry = entry.map_err(io(root))?;
        if let Some(name) = entry.file_name().to_str()
            && !name.starts_with('.')
            && validate_catalog_name(name).is_ok()
        {
            names.push(name.to_string());
        }
    }
    names.sort();
    Ok(names)
}

/// The stored catalogs under a root, as the cache GC sees them
/// ([`crate::image::gc::CatalogStore`]): the GC decides, this store lists and deletes.
#[derive(Clone, Copy, Debug)]
pub struct CatalogsDir<'a>(pub &'a Path);

impl crate::image::gc::CatalogStore for CatalogsDir<'_> {
    /// `<name>` (the link) and every `.<name>_<version>`, as `name` with its last
    /// change; entries whose name is not a valid catalog name are not listed. A
    /// missing root lists nothing.
    fn entries(&self) -> std::io::Result<Vec<crate::image::gc::Entry>> {
        let root = self.0;
        let entries = match std::fs::read_dir(root) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry?;
            let Some(file_name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let name = match file_name.strip_prefix('.') {
                Some(rest) => match rest.rsplit_once('_') {
                    Some((name, _)) => name.to_string(),
                    None => continue,
                },
                None => file_name,
            };
            if validate_catalog_name(&name).is_ok() {
                let modified = crate::image::gc::modified(&entry.path());
                out.push(crate::image::gc::Entry { name, modified });
            }
        }
        Ok(out)
    }

    fn remove(&self, name: &str) -> std::io::Result<()> {
        delete(self.0, name)
            .map(|_| ())
            .map_err(std::io::Error::other)
    }
}

/// Removes version directories and link leftovers of `name` that are not current.
fn clean_orphans(root: &Path, name: &str) -> Result<(), FbcError> {
    let current = std::fs::read_link(root.join(name)).ok();
    let prefix = format!(".{name}_");
    for entry in std::fs::read_dir(root).map_err(io(root))? {
        let entry = entry.map_err(io(root))?;
        let file_name = entry.file_name();
        let Some(s) = file_name.to_str() else {
            continue;
        };
        if !s.starts_with(&prefix) || current.as_deref() == Some(Path::new(s)) {
            continue;
        }
        let path = entry.path();
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        let r = if is_dir {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        r.map_err(io(&path))?;
    }
    Ok(())
}

/// Deletes a stored catalog; `Ok(false)` when there was none.
pub fn delete(root: &Path, name: &str) -> Result<bool, FbcError> {
    validate_catalog_name(name).map_err(|message| FbcError::InvalidName { message })?;
    let link = root.join(name);
    let existed = match std::fs::symlink_metadata(&link) {
        Ok(meta) if meta.is_dir() => {
            std::fs::remove_dir_all(&link).map_err(io(&link))?;
            true
        }
        Ok(_) => {
            std::fs::remove_file(&link).map_err(io(&link))?;
            true
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => {
            return Err(FbcError::Io {
                path: link,
                source: e,
            });
        }
    };
    if root.exists() {
        clean_orphans(root, name)?;
    }
    Ok(existed)
}

/// Reads the index of a stored version directory.
pub fn read_index(dir: &Path) -> Result<Index, FbcError> {
    let path = dir.join(INDEX_FILE);
    let bytes = std::fs::read(&path).map_err(io(&path))?;
    serde_json::from_slice(&bytes).map_err(|e| FbcError::Parse {
        path,
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAT: &str = "{\"schema\":\"olm.package\",\"name\":\"p\",\"defaultChannel\":\"s\"}\n{\"schema\":\"olm.channel\",\"name\":\"s\",\"package\":\"p\",\"entries\":[{\"name\":\"p.v1\"}]}\n{\"schema\":\"olm.bundle\",\"name\":\"p.v1\",\"package\":\"p\",\"properties\":[{\"type\":\"olm.package\",\"value\":{\"packageName\":\"p\",\"version\":\"1.0.0\"}}]}\n";

    fn source(text: &str) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("catalog.json"), text).unwrap();
        d
    }

    #[test]
    fn store_writes_jsonl_and_index_and_replaces_atomically() {
        let root = tempfile::tempdir().unwrap();
        let src = source(CAT);
        let s1 = store(root.path(), "cat", src.path()).unwrap();
        assert_eq!(s1.blobs, 3);
        let body = std::fs::read_to_string(root.path().join("cat").join(CATALOG_FILE)).unwrap();
        assert_eq!(body, CAT);
        let index = read_index(&s1.dir).unwrap();
        let [off, len] = index.by_schema["olm.channel"][0];
        assert!(
            body[off as usize..(off + len) as usize].starts_with("{\"schema\":\"olm.channel\"")
        );
        assert_eq!(index.by_package["p"].len(), 2, "not the olm.package blob");
        let s2 = store(root.path(), "cat", src.path()).unwrap();
        assert_ne!(s1.version, s2.version);
        assert!(!s1.dir.exists(), "old version removed");
        assert_eq!(current_dir(root.path(), "cat").unwrap(), s2.dir);
    }

    #[test]
    fn failed_ingest_keeps_previous_content_and_leaves_no_orphans() {
        let root = tempfile::tempdir().unwrap();
        let good = store(root.path(), "cat", source(CAT).path()).unwrap();
        let bad = source(&CAT.replace("\"defaultChannel\":\"s\"", "\"defaultChannel\":\"x\""));
        let strict = StoreOptions {
            strict: true,
            ..StoreOptions::default()
        };
        let err = store_with_options(root.path(), "cat", bad.path(), &strict)
            .unwrap_err()
            .to_string();
        assert!(err.contains("default channel \"x\" not found"), "{err}");
        assert!(err.contains("catalog.json:1"), "{err}");
        assert_eq!(current_dir(root.path(), "cat").unwrap(), good.dir);
        assert_eq!(
            std::fs::read_to_string(root.path().join("cat/catalog.jsonl")).unwrap(),
            CAT
        );
        let entries: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(entries.len(), 2, "{entries:?}");
    }

    #[test]
    fn orphans_of_crashed_ingests_are_cleaned_but_not_other_catalogs() {
        let root = tempfile::tempdir().unwrap();
        store(root.path(), "cat-b", source(CAT).path()).unwrap();
        std::fs::create_dir(root.path().join(".cat_deadbeef")).unwrap();
        std::fs::write(root.path().join(".cat_deadbeef/catalog.jsonl"), "x").unwrap();
        store(root.path(), "cat", source(CAT).path()).unwrap();
        assert_eq!(stored_names(root.path()).unwrap(), ["cat", "cat-b"]);
        assert!(!root.path().join(".cat_deadbeef").exists());
        assert!(current_dir(root.path(), "cat-b").unwrap().exists());
        assert!(delete(root.path(), "cat").unwrap());
        assert!(!delete(root.path(), "cat").unwrap());
        assert!(current_dir(root.path(), "cat").is_none());
        assert!(current_dir(root.path(), "cat-b").unwrap().exists());
        let bad = source(&CAT.replace("\"defaultChannel\":\"s\"", "\"defaultChannel\":\"x\""));
        // By default (as catalogd) the violation is stored and reported, with file:line.
        let stored = store(root.path(), "cat", bad.path()).unwrap();
        assert_eq!(stored.warnings.len(), 1, "{:?}", stored.warnings);
        assert!(
            stored.warnings[0].starts_with("catalog.json:1: "),
            "{:?}",
            stored.warnings
        );
        assert_eq!(stored.summary.bundles, 1);
        delete(root.path(), "cat").unwrap();
        let entries = std::fs::read_dir(root.path()).unwrap().count();
        assert_eq!(entries, 2);
    }

    #[test]
    fn names_must_be_dns_subdomains() {
        assert!(validate_catalog_name("operatorhubio.v1-2").is_ok());
        for bad in [
            "",
            "Upper",
            "-a",
            "a-",
            "a..b",
            "../x",
            "a_b",
            &"a".repeat(254),
        ] {
            assert!(validate_catalog_name(bad).is_err(), "{bad}");
        }
        let root = tempfile::tempdir().unwrap();
        assert!(matches!(
            store(root.path(), "../evil", source(CAT).path()),
            Err(FbcError::InvalidName { .. })
        ));
    }
}

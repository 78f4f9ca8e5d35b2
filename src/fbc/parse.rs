//! Streaming reader of file-based catalogs: walks a file or directory tree in lexical
//! order (as operator-registry's `WalkMetasFS`), honours `.indexignore`, reads every
//! other file as a JSON stream (first non-blank byte `{`, several concatenated objects
//! allowed) or multi-document YAML, and hands each blob to a callback as one compact
//! JSON line together with the few keys that index and validation need. At most one
//! blob (plus one read buffer) is held at a time; hard [`Limits`] bound file count, total
//! bytes and blob size, and YAML alias expansion is bounded ([`crate::yaml`]), so that
//! hostile input fails fast with a clear error. The JSON-stream and YAML readers live in
//! the submodules `json_stream` and `yaml_stream`.

use super::FbcError;
use super::ignore::{INDEX_IGNORE, IgnoreFile, IgnoreStack};
use super::model::{
    PROPERTY_PACKAGE, PackageProperty, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_DEPRECATIONS,
    SCHEMA_PACKAGE,
};
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use json_stream::compact_json;

/// Hard limits for one catalog walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Total bytes read from catalog files.
    pub max_total_bytes: u64,
    /// Directory entries (files and directories, ignored ones included) visited.
    pub max_files: u64,
    /// Size of one blob (one JSON object or one YAML document).
    pub max_blob_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_total_bytes: 1 << 30,
            max_files: 100_000,
            max_blob_bytes: 64 << 20,
        }
    }
}

/// The parts of a blob that indexing and validation read; everything else is skipped
/// while parsing (but the blob is fully checked for JSON syntax).
#[derive(Debug, Default)]
pub struct BlobView {
    pub schema: Option<String>,
    pub package: Option<String>,
    pub name: Option<String>,
    pub default_channel: Option<String>,
    pub entries: Option<Vec<EntryView>>,
    pub properties: Option<Vec<PropertyView>>,
    /// Set when the blob was normalized as Go's `encoding/json` reads it (keys matched
    /// case-insensitively, a key written twice): what was done, reported as a catalog
    /// warning ([`go_keys`]).
    pub normalized: Option<String>,
    /// A view key written twice, or a key that only case-insensitively matches one:
    /// the blob needs [`go_keys::normalize`].
    needs_go_keys: bool,
}

impl<'de> Deserialize<'de> for BlobView {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BlobView;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BlobView, A::Error> {
                let mut v = BlobView::default();
                // Seen view keys (bit per key of go_keys::VIEW_KEYS), for duplicates.
                let mut seen = 0u8;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let bit = match key.as_ref() {
                        "schema" => {
                            v.schema = map.next_value()?;
                            1
                        }
                        "package" => {
                            v.package = map.next_value()?;
                            2
                        }
                        "name" => {
                            v.name = map.next_value()?;
                            4
                        }
                        "defaultChannel" => {
                            v.default_channel = map.next_value()?;
                            8
                        }
                        "entries" => {
                            v.entries = map.next_value()?;
                            16
                        }
                        "properties" => {
                            v.properties = map.next_value()?;
                            32
                        }
                        other => {
                            if go_keys::folds_to_view_key(other) {
                                v.needs_go_keys = true;
                            }
                            map.next_value::<IgnoredAny>()?;
                            0
                        }
                    };
                    if seen & bit != 0 {
                        v.needs_go_keys = true;
                    }
                    seen |= bit;
                }
                Ok(v)
            }
        }
        d.deserialize_map(V)
    }
}

/// An entry of `olm.channel` (`name`) or of `olm.deprecations` (`reference`, `message`).
#[derive(Debug, Default, Deserialize)]
pub struct EntryView {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub reference: Option<ReferenceView>,
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Debug, Default, Deserialize, Clone, PartialEq, Eq, Hash)]
pub struct ReferenceView {
    #[serde(default)]
    pub schema: String,
    #[serde(default)]
    pub name: String,
}

/// A property: its type, and for `olm.package` its parsed value (other values are skipped).
#[derive(Debug, Default)]
pub struct PropertyView {
    pub type_: String,
    pub package: Option<Result<PackageProperty, String>>,
}

#[derive(Deserialize)]
struct MetaOnly {
    #[serde(default)]
    schema: Option<String>,
    #[serde(default)]
    package: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

impl BlobView {
    pub fn schema(&self) -> &str {
        self.schema.as_deref().unwrap_or_default()
    }
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
    /// The package a blob belongs to: `name` for `olm.package`, else `package`.
    pub fn package(&self) -> &str {
        match (self.schema(), self.package.as_deref()) {
            (SCHEMA_PACKAGE, None | Some("")) => self.name(),
            (_, p) => p.unwrap_or_default(),
        }
    }
}

impl<'de> Deserialize<'de> for PropertyView {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PropertyView;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a property object with \"type\" and \"value\"")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PropertyView, A::Error> {
                let mut type_: Option<String> = None;
                let mut package = None;
                let mut deferred: Option<Value> = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "type" => type_ = Some(map.next_value()?),
                        "value" => match type_.as_deref() {
                            Some(PROPERTY_PACKAGE) => {
                                package = Some(parse_package(map.next_value()?))
                            }
                            Some(_) => {
                                map.next_value::<IgnoredAny>()?;
                            }
                            None => deferred = Some(map.next_value()?),
                        },
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                let type_ = type_.ok_or_else(|| serde::de::Error::missing_field("type"))?;
                if type_ == PROPERTY_PACKAGE && package.is_none() {
                    package = Some(match deferred {
                        Some(v) => parse_package(v),
                        None => Err("missing value".to_string()),
                    });
                }
                Ok(PropertyView { type_, package })
            }
        }
        d.deserialize_map(V)
    }
}

fn parse_package(v: Value) -> Result<PackageProperty, String> {
    serde_json::from_value::<PackageProperty>(v).map_err(|e| e.to_string())
}

/// One blob as the walk hands it out.
pub struct Blob<'a> {
    /// The file it came from.
    pub path: &'a Path,
    /// Line (1-based) where the blob starts in that file.
    pub line: u64,
    /// Position of the blob in its file (1-based).
    pub index: u64,
    /// The blob as compact JSON (one line, key order kept).
    pub json: &'a [u8],
    pub view: &'a BlobView,
}

impl Blob<'_> {
    /// `file:line` for messages.
    pub fn location(&self) -> String {
        format!("{}:{}", self.path.display(), self.line)
    }
}

/// What a walk saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalkStats {
    pub files: u64,
    pub bytes: u64,
    pub blobs: u64,
}

type BlobFn<'f> = dyn FnMut(&Blob<'_>) -> Result<(), FbcError> + 'f;

/// Walks a catalog (a file, or a directory tree) and calls `f` for each blob in order.
pub fn walk_catalog(
    source: &Path,
    limits: &Limits,
    f: &mut BlobFn<'_>,
) -> Result<WalkStats, FbcError> {
    let mut walker = Walker {
        limits,
        stats: WalkStats::default(),
        entries: 0,
        buf: Vec::new(),
        compact: Vec::new(),
    };
    let meta = std::fs::metadata(source).map_err(io(source))?;
    if meta.is_dir() {
        let mut ignores = IgnoreStack::default();
        walker.walk_dir(source, "", &mut ignores, f)?;
    } else {
        walker.entries = 1;
        walker.read_file(source, meta.len(), f)?;
    }
    Ok(walker.stats)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FbcError + '_ {
    move |source| FbcError::Io {
        path: path.to_path_buf(),
        source,
    }
}

struct Walker<'l> {
    limits: &'l Limits,
    stats: WalkStats,
    entries: u64,
    /// The blob being read (original bytes).
    buf: Vec<u8>,
    /// Compacted copy of `buf` when it had whitespace outside strings.
    compact: Vec<u8>,
}

impl Walker<'_> {
    fn count_entry(&mut self, dir: &Path) -> Result<(), FbcError> {
        self.entries += 1;
        if self.entries > self.limits.max_files {
            return Err(FbcError::Limit {
                message: format!(
                    "catalog has more than {} files and directories (limit max_files), at {}",
                    self.limits.max_files,
                    dir.display()
                ),
            });
        }
        Ok(())
    }

    fn walk_dir(
        &mut self,
        dir: &Path,
        rel: &str,
        ignores: &mut IgnoreStack,
        f: &mut BlobFn<'_>,
    ) -> Result<(), FbcError> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io(dir))? {
            let entry = entry.map_err(io(dir))?;
            self.count_entry(dir)?;
            let file_type = entry.file_type().map_err(io(&entry.path()))?;
            entries.push((entry.file_name(), file_type));
        }
        entries.sort_by(|a, b| a.0.as_encoded_bytes().cmp(b.0.as_encoded_bytes()));
        let depth = ignores.len();
        if entries
            .iter()
            .any(|(n, t)| n == INDEX_IGNORE && t.is_file())
        {
            let path = dir.join(INDEX_IGNORE);
            let mut text = String::new();
            File::open(&path)
                .and_then(|f| f.take(self.limits.max_blob_bytes).read_to_string(&mut text))
                .map_err(io(&path))?;
            let file = IgnoreFile::parse(&text).map_err(|message| FbcError::Parse {
                path: path.clone(),
                message,
            })?;
            ignores.push(rel, file);
        }
        for (name, file_type) in entries {
            if name == INDEX_IGNORE {
                continue;
            }
            let path = dir.join(&name);
            let name_str = name.to_string_lossy();
            let child_rel = if rel.is_empty() {
                name_str.to_string()
            } else {
                format!("{rel}/{name_str}")
            };
            if file_type.is_dir() {
                if !ignores.is_ignored(&child_rel, true) {
                    self.walk_dir(&path, &child_rel, ignores, f)?;
                }
            } else if file_type.is_file() {
                if !ignores.is_ignored(&child_rel, false) {
                    let len = std::fs::metadata(&path).map_err(io(&path))?.len();
                    self.read_file(&path, len, f)?;
                }
            } else if file_type.is_symlink() {
                if !ignores.is_ignored(&child_rel, false) {
                    return Err(FbcError::Parse {
                        path,
                        message: "symbolic links are not allowed in a catalog".into(),
                    });
                }
            } else if !ignores.is_ignored(&child_rel, false) {
                return Err(FbcError::Parse {
                    path,
                    message: "not a regular file or directory".into(),
                });
            }
        }
        ignores.truncate(depth);
        Ok(())
    }

    fn add_bytes(&mut self, path: &Path, n: u64) -> Result<(), FbcError> {
        self.stats.bytes += n;
        if self.stats.bytes > self.limits.max_total_bytes {
            return Err(FbcError::Limit {
                message: format!(
                    "catalog is larger than {} bytes (limit max_total_bytes), at {}",
                    self.limits.max_total_bytes,
                    path.display()
                ),
            });
        }
        Ok(())
    }

    fn read_file(&mut self, path: &Path, len: u64, f: &mut BlobFn<'_>) -> Result<(), FbcError> {
        if self.stats.bytes.saturating_add(len) > self.limits.max_total_bytes {
            return self.add_bytes(path, len);
        }
        self.stats.files += 1;
        let file = File::open(path).map_err(io(path))?;
        let mut reader = BufReader::with_capacity(256 << 10, file);
        // Sniff: skip a BOM and blank space; `{` means a JSON stream, anything else YAML.
        let mut line = 1u64;
        let mut first = true;
        let is_json = loop {
            let data = reader.fill_buf().map_err(io(path))?;
            if data.is_empty() {
                return Ok(()); // empty or blank file: no blobs
            }
            let mut skip = 0;
            if first && data.starts_with(b"\xEF\xBB\xBF") {
                skip = 3;
            }
            first = false;
            while skip < data.len() && data[skip].is_ascii_whitespace() {
                if data[skip] == b'\n' {
                    line += 1;
                }
                skip += 1;
            }
            if skip < data.len() {
                let json = data[skip] == b'{';
                reader.consume(skip);
                self.add_bytes(path, skip as u64)?;
                break json;
            }
            reader.consume(skip);
            self.add_bytes(path, skip as u64)?;
        };
        if is_json {
            self.read_json(path, reader, line, f)
        } else {
            self.read_yaml(path, reader, line, f)
        }
    }

    fn blob_too_large(&self, path: &Path, line: u64) -> FbcError {
        FbcError::Limit {
            message: format!(
                "{}:{line}: blob is larger than {} bytes (limit max_blob_bytes)",
                path.display(),
                self.limits.max_blob_bytes
            ),
        }
    }

    /// Parses the blob in `self.buf` and hands it out.
    fn emit(
        &mut self,
        path: &Path,
        line: u64,
        index: u64,
        has_space: bool,
        f: &mut BlobFn<'_>,
    ) -> Result<(), FbcError> {
        let parse_err = |e: &serde_json::Error| FbcError::Parse {
            path: path.to_path_buf(),
            message: format!(
                "blob {index} starting at line {line}: line {}, column {}: {}",
                line + e.line() as u64 - 1,
                e.column(),
                strip_serde_position(&e.to_string())
            ),
        };
        if let Err(e) = std::str::from_utf8(&self.buf) {
            return Err(FbcError::Parse {
                path: path.to_path_buf(),
                message: format!("blob {index} starting at line {line}: invalid UTF-8: {e}"),
            });
        }
        let mut view = match parse_view(&self.buf) {
            Ok(view) => view,
            // A nested key spelled as Go matches it (`"Type"` in a property) can fail
            // the typed view: normalized, the blob may read.
            Err(e) => match go_keys::normalize(&self.buf) {
                Ok(Some(_)) => BlobView {
                    needs_go_keys: true,
                    ..BlobView::default()
                },
                _ => return Err(parse_err(&e)),
            },
        };
        if view.needs_go_keys
            // Rare: the blob as Go's encoding/json reads it (catalogd's acceptance).
            && let Some((normalized, what)) =
                go_keys::normalize(&self.buf).map_err(|message| FbcError::Parse {
                    path: path.to_path_buf(),
                    message: format!("blob {index} starting at line {line}: {message}"),
                })?
        {
            view = parse_view(&normalized).map_err(|e| parse_err(&e))?;
            view.normalized = Some(what);
            self.compact = normalized;
            return self.hand_out(path, line, index, true, view, f);
        }
        self.hand_out(path, line, index, has_space, view, f)
    }

    /// Hands the blob out: `compacted` when it is in `self.compact` already, else
    /// compacted from `self.buf` when `has_space`.
    fn hand_out(
        &mut self,
        path: &Path,
        line: u64,
        index: u64,
        has_space: bool,
        view: BlobView,
        f: &mut BlobFn<'_>,
    ) -> Result<(), FbcError> {
        let json: &[u8] = if view.normalized.is_some() {
            &self.compact
        } else if has_space {
            compact_json(&self.buf, &mut self.compact);
            &self.compact
        } else {
            &self.buf
        };
        self.stats.blobs += 1;
        let blob = Blob {
            path,
            line,
            index,
            json,
            view: &view,
        };
        check_schema(&blob)?;
        f(&blob)
    }
}

/// A served blob as operator-controller's Go decoder reads it, for blobs that need Go's
/// key rules (keys spelled `"Schema"`, a key written twice; [`go_keys`]); `None` when the
/// blob reads as it is (the common case: one view parse) or cannot be normalized.
pub fn go_normalized(line: &[u8]) -> Option<Vec<u8>> {
    match serde_json::from_slice::<BlobView>(line) {
        Ok(view) if !view.needs_go_keys => None,
        _ => go_keys::normalize(line)
            .ok()
            .flatten()
            .map(|(json, _)| json),
    }
}

fn parse_view(json: &[u8]) -> Result<BlobView, serde_json::Error> {
    match serde_json::from_slice::<BlobView>(json) {
        Ok(v) => Ok(v),
        Err(e) => {
            // Unknown schemas may use `entries`/`properties` differently: keep only the keys.
            let meta: MetaOnly = serde_json::from_slice(json)?;
            let schema = meta.schema.as_deref().unwrap_or_default();
            if [
                SCHEMA_PACKAGE,
                SCHEMA_CHANNEL,
                SCHEMA_BUNDLE,
                SCHEMA_DEPRECATIONS,
            ]
            .contains(&schema)
            {
                return Err(e);
            }
            Ok(BlobView {
                schema: meta.schema,
                package: meta.package,
                name: meta.name,
                ..BlobView::default()
            })
        }
    }
}

fn check_schema(blob: &Blob<'_>) -> Result<(), FbcError> {
    if blob.view.schema().is_empty() {
        return Err(FbcError::Parse {
            path: blob.path.to_path_buf(),
            message: format!(
                "blob {} starting at line {}: missing or empty \"schema\"",
                blob.index, blob.line
            ),
        });
    }
    Ok(())
}

/// serde_json appends " at line L column C"; the caller reports an absolute position.
fn strip_serde_position(msg: &str) -> &str {
    match msg.rfind(" at line ") {
        Some(i) => &msg[..i],
        None => msg,
    }
}

/// The path of `path` relative to `root` for messages (itself when not below it).
pub fn display_path(root: &Path, path: &Path) -> PathBuf {
    match path.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.to_path_buf(),
        Ok(_) => path
            .file_name()
            .map(PathBuf::from)
            .unwrap_or_else(|| path.to_path_buf()),
        Err(_) => path.to_path_buf(),
    }
}

mod go_keys;
mod json_stream;
mod yaml_stream;

#[cfg(test)]
mod tests;

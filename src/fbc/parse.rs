//! Streaming reader of file-based catalogs: walks a file or directory tree in lexical
//! order (as operator-registry's `WalkMetasFS`), honours `.indexignore`, reads every
//! other file as a JSON stream (first non-blank byte `{`, several concatenated objects
//! allowed) or multi-document YAML, and hands each blob to a callback as one compact
//! JSON line together with the few keys that index and validation need. At most one
//! blob (plus one read buffer) is held at a time; hard [`Limits`] bound file count, total
//! bytes and blob size so that hostile input fails fast with a clear error.

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
#[derive(Debug, Default, Deserialize)]
pub struct BlobView {
    #[serde(default)]
    pub schema: Option<String>,
    #[serde(default)]
    pub package: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default, rename = "defaultChannel")]
    pub default_channel: Option<String>,
    #[serde(default)]
    pub entries: Option<Vec<EntryView>>,
    #[serde(default)]
    pub properties: Option<Vec<PropertyView>>,
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

    fn read_json(
        &mut self,
        path: &Path,
        mut reader: BufReader<File>,
        mut line: u64,
        f: &mut BlobFn<'_>,
    ) -> Result<(), FbcError> {
        let mut sc = Scan::default();
        let mut index = 0u64;
        let max = self.limits.max_blob_bytes as usize;
        loop {
            let data = reader.fill_buf().map_err(io(path))?;
            if data.is_empty() {
                break;
            }
            let n = data.len();
            let mut i = 0;
            while i < n {
                if !sc.in_blob {
                    match data[i] {
                        b'\n' => line += 1,
                        b' ' | b'\t' | b'\r' => {}
                        b'{' => {
                            sc = Scan {
                                in_blob: true,
                                depth: 1,
                                start_line: line,
                                ..Scan::default()
                            };
                            self.buf.clear();
                            self.buf.push(b'{');
                        }
                        other => {
                            return Err(FbcError::Parse {
                                path: path.to_path_buf(),
                                message: format!(
                                    "line {line}: expected a JSON object (\"{{\"), found {:?}",
                                    char::from(other)
                                ),
                            });
                        }
                    }
                    i += 1;
                    continue;
                }
                if sc.escape {
                    sc.escape = false;
                    if data[i] == b'\n' {
                        line += 1;
                    }
                    self.buf.push(data[i]);
                    i += 1;
                    continue;
                }
                if sc.in_str {
                    match memchr::memchr3(b'"', b'\\', b'\n', &data[i..]) {
                        None => {
                            self.buf.extend_from_slice(&data[i..]);
                            i = n;
                        }
                        Some(k) => {
                            self.buf.extend_from_slice(&data[i..=i + k]);
                            match data[i + k] {
                                b'"' => sc.in_str = false,
                                b'\\' => sc.escape = true,
                                _ => line += 1,
                            }
                            i += k + 1;
                        }
                    }
                    if self.buf.len() > max {
                        return Err(self.blob_too_large(path, sc.start_line));
                    }
                    continue;
                }
                let b = data[i];
                i += 1;
                self.buf.push(b);
                match b {
                    b'"' => sc.in_str = true,
                    b'{' | b'[' => sc.depth += 1,
                    b'}' | b']' => {
                        sc.depth -= 1;
                        if sc.depth == 0 {
                            sc.in_blob = false;
                            index += 1;
                            self.emit(path, sc.start_line, index, sc.has_space, f)?;
                        }
                    }
                    b'\n' => {
                        line += 1;
                        sc.has_space = true;
                    }
                    b' ' | b'\t' | b'\r' => sc.has_space = true,
                    _ => {}
                }
                if self.buf.len() > max {
                    return Err(self.blob_too_large(path, sc.start_line));
                }
            }
            reader.consume(n);
            self.add_bytes(path, n as u64)?;
        }
        if sc.in_blob {
            return Err(FbcError::Parse {
                path: path.to_path_buf(),
                message: format!(
                    "blob {} starting at line {}: unexpected end of file (unterminated object)",
                    index + 1,
                    sc.start_line
                ),
            });
        }
        Ok(())
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
        let view = parse_view(&self.buf).map_err(|e| parse_err(&e))?;
        let json: &[u8] = if has_space {
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

    fn read_yaml(
        &mut self,
        path: &Path,
        reader: BufReader<File>,
        first_line: u64,
        f: &mut BlobFn<'_>,
    ) -> Result<(), FbcError> {
        let max = self.limits.max_blob_bytes as usize;
        let mut reader = reader.take(u64::MAX);
        let mut doc = String::new();
        let mut doc_line = first_line;
        let mut line_no = first_line - 1;
        let mut index = 0u64;
        let mut raw = Vec::new();
        loop {
            raw.clear();
            // Bound the line length too: a single giant line must not be buffered whole.
            reader.set_limit(max as u64 + 2);
            let n = reader.read_until(b'\n', &mut raw).map_err(io(path))?;
            self.add_bytes(path, n as u64)?;
            let eof = n == 0;
            if !eof {
                line_no += 1;
                if raw.last() != Some(&b'\n') && n > max {
                    return Err(self.blob_too_large(path, doc_line));
                }
            }
            let text = if eof {
                ""
            } else {
                std::str::from_utf8(&raw).map_err(|e| FbcError::Parse {
                    path: path.to_path_buf(),
                    message: format!("line {line_no}: invalid UTF-8: {e}"),
                })?
            };
            let trimmed = text.trim_end_matches(['\n', '\r']);
            let separator =
                trimmed == "---" || trimmed.starts_with("--- ") || trimmed.starts_with("---\t");
            let end_marker = trimmed == "...";
            if eof || separator || end_marker {
                if !doc.trim().is_empty() {
                    self.emit_yaml(path, &doc, doc_line, &mut index, f)?;
                }
                doc.clear();
                if eof {
                    return Ok(());
                }
                let rest = if separator { trimmed[3..].trim() } else { "" };
                if !rest.is_empty() {
                    // Keep the rest of the separator line (`--- {...}`), on the same line number.
                    doc_line = line_no;
                    doc.push_str(rest);
                    doc.push('\n');
                }
                continue;
            }
            if doc.is_empty() {
                if trimmed.trim().is_empty() {
                    continue;
                }
                doc_line = line_no;
            }
            doc.push_str(text);
            if doc.len() > max {
                return Err(self.blob_too_large(path, doc_line));
            }
        }
    }

    fn emit_yaml(
        &mut self,
        path: &Path,
        doc: &str,
        doc_line: u64,
        index: &mut u64,
        f: &mut BlobFn<'_>,
    ) -> Result<(), FbcError> {
        let values = serde_saphyr::from_multiple::<Value>(doc).map_err(|e| {
            let at = e.location().map(|l| doc_line + l.line().saturating_sub(1));
            FbcError::Parse {
                path: path.to_path_buf(),
                message: match at {
                    Some(at) => format!(
                        "document {} starting at line {doc_line}: line {at}: {e}",
                        *index + 1
                    ),
                    None => format!("document {} starting at line {doc_line}: {e}", *index + 1),
                },
            }
        })?;
        for value in values.into_iter().filter(|v| !v.is_null()) {
            *index += 1;
            if !value.is_object() {
                return Err(FbcError::Parse {
                    path: path.to_path_buf(),
                    message: format!(
                        "document {} starting at line {doc_line}: not a mapping",
                        *index
                    ),
                });
            }
            self.buf.clear();
            serde_json::to_writer(&mut self.buf, &value).map_err(|e| FbcError::Parse {
                path: path.to_path_buf(),
                message: format!("document {} starting at line {doc_line}: {e}", *index),
            })?;
            drop(value);
            self.emit(path, doc_line, *index, false, f)?;
        }
        Ok(())
    }
}

#[derive(Default)]
struct Scan {
    in_blob: bool,
    in_str: bool,
    escape: bool,
    has_space: bool,
    depth: u32,
    start_line: u64,
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

/// Removes whitespace outside strings (input is known-valid JSON).
fn compact_json(input: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(input.len());
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        match b {
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            b'"' => {
                let start = i;
                i += 1;
                loop {
                    match memchr::memchr2(b'"', b'\\', &input[i..]) {
                        Some(k) if input[i + k] == b'\\' => i += k + 2,
                        Some(k) => {
                            i += k + 1;
                            break;
                        }
                        None => {
                            i = input.len();
                            break;
                        }
                    }
                }
                out.extend_from_slice(&input[start..i.min(input.len())]);
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn collect(dir: &Path, limits: &Limits) -> Result<Vec<(String, u64, String)>, FbcError> {
        let mut out = Vec::new();
        walk_catalog(dir, limits, &mut |b| {
            let name = b.path.file_name().unwrap().to_string_lossy().to_string();
            out.push((name, b.line, String::from_utf8(b.json.to_vec()).unwrap()));
            Ok(())
        })?;
        Ok(out)
    }

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::File::create(p)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }

    #[test]
    fn json_stream_concatenated_pretty_and_compact() {
        let d = tempfile::tempdir().unwrap();
        write(
            d.path(),
            "a.json",
            "{\"schema\":\"olm.package\",\"name\":\"p\"}{\"schema\":\"x\"}\n\n{\n  \"schema\": \"olm.channel\",\n  \"name\": \"s p\\\"}\"\n}\n",
        );
        let blobs = collect(d.path(), &Limits::default()).unwrap();
        assert_eq!(blobs.len(), 3);
        assert_eq!(blobs[0].2, r#"{"schema":"olm.package","name":"p"}"#);
        assert_eq!(blobs[1].2, r#"{"schema":"x"}"#);
        assert_eq!(blobs[2].1, 3);
        assert_eq!(blobs[2].2, r#"{"schema":"olm.channel","name":"s p\"}"}"#);
    }

    #[test]
    fn yaml_multi_document_and_any_extension_and_order() {
        let d = tempfile::tempdir().unwrap();
        write(
            d.path(),
            "b/catalog.yaml",
            "---\nschema: olm.package\nname: p\n---\n# only a comment\n---\nschema: olm.bundle\nname: b\npackage: p\n",
        );
        write(d.path(), "a/z.txt", "{\"schema\":\"first\"}");
        let blobs = collect(d.path(), &Limits::default()).unwrap();
        let names: Vec<_> = blobs.iter().map(|b| b.2.as_str()).collect();
        assert_eq!(
            names,
            [
                r#"{"schema":"first"}"#,
                r#"{"schema":"olm.package","name":"p"}"#,
                r#"{"schema":"olm.bundle","name":"b","package":"p"}"#
            ]
        );
        assert_eq!(blobs[2].1, 7);
    }

    #[test]
    fn indexignore_excludes_files_and_directories() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), ".indexignore", "README.md\n/docs/\n");
        write(d.path(), "README.md", "# not fbc\n");
        write(d.path(), "docs/x.json", "not json");
        write(d.path(), "pkg/.indexignore", "*.bak\n");
        write(d.path(), "pkg/c.json.bak", "broken {");
        write(
            d.path(),
            "pkg/c.json",
            "{\"schema\":\"olm.package\",\"name\":\"p\"}",
        );
        let blobs = collect(d.path(), &Limits::default()).unwrap();
        assert_eq!(blobs.len(), 1);
    }

    #[test]
    fn invalid_json_names_file_blob_and_line() {
        let d = tempfile::tempdir().unwrap();
        write(
            d.path(),
            "c.json",
            "{\"schema\":\"a\"}\n{\n \"schema\": \"b\",\n \"name\": \"x\" \"y\"\n}\n",
        );
        let err = collect(d.path(), &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("c.json"), "{err}");
        assert!(err.contains("blob 2 starting at line 2"), "{err}");
        assert!(err.contains("line 4,"), "{err}");
    }

    #[test]
    fn whitespace_between_scalars_is_not_glued() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "c.json", "{\"schema\":\"a\",\"n\": 1 2}");
        assert!(collect(d.path(), &Limits::default()).is_err());
    }

    #[test]
    fn invalid_yaml_names_file_and_absolute_line() {
        let d = tempfile::tempdir().unwrap();
        write(
            d.path(),
            "c.yaml",
            "schema: olm.package\nname: p\n---\nschema: olm.channel\nname: [unclosed\npackage: p\n",
        );
        let err = collect(d.path(), &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("c.yaml"), "{err}");
        assert!(err.contains("document 2 starting at line 4"), "{err}");
        assert!(err.contains("line 5") || err.contains("line 6"), "{err}");
    }

    #[test]
    fn unknown_schema_with_odd_fields_is_kept_but_missing_schema_is_not() {
        let d = tempfile::tempdir().unwrap();
        write(
            d.path(),
            "a.json",
            "{\"schema\":\"my.thing\",\"entries\":\"text\",\"properties\":7}",
        );
        assert_eq!(collect(d.path(), &Limits::default()).unwrap().len(), 1);
        write(d.path(), "b.json", "{\"name\":\"x\"}");
        let err = collect(d.path(), &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("b.json") && err.contains("schema"), "{err}");
    }

    #[test]
    fn limits_are_enforced() {
        let d = tempfile::tempdir().unwrap();
        write(
            d.path(),
            "a.json",
            &format!("{{\"schema\":\"x\",\"v\":\"{}\"}}", "a".repeat(5000)),
        );
        let small = Limits {
            max_blob_bytes: 1000,
            ..Limits::default()
        };
        let err = collect(d.path(), &small).unwrap_err().to_string();
        assert!(
            err.contains("max_blob_bytes") && err.contains("a.json:1"),
            "{err}"
        );
        let total = Limits {
            max_total_bytes: 100,
            ..Limits::default()
        };
        assert!(
            collect(d.path(), &total)
                .unwrap_err()
                .to_string()
                .contains("max_total_bytes")
        );
        for i in 0..5 {
            write(d.path(), &format!("f{i}.json"), "{\"schema\":\"x\"}");
        }
        let files = Limits {
            max_files: 3,
            ..Limits::default()
        };
        assert!(
            collect(d.path(), &files)
                .unwrap_err()
                .to_string()
                .contains("max_files")
        );
    }

    #[test]
    fn compact_keeps_strings() {
        let mut out = Vec::new();
        compact_json(b"{ \"a b\" : [ 1 , \"x\\\" y\" ] }", &mut out);
        assert_eq!(out, br#"{"a b":[1,"x\" y"]}"#);
    }
}

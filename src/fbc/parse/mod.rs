//! Streaming reader of file-based catalogs: walks a file or directory tree in lexical
//! order (as operator-registry's `WalkMetasFS`), honours `.indexignore`, reads every
//! other file as a JSON stream (first non-blank byte `{`, several concatenated objects
//! allowed) or multi-document YAML, and hands each blob to a callback as one compact
//! JSON line together with the few keys that index and validation need. At most one
//! blob (plus one read buffer) is held at a time; hard [`Limits`] bound file count, total
//! bytes, blob size and count, directory depth, JSON nesting and `.indexignore` files,
//! and YAML alias expansion is bounded ([`crate::yaml`]), so that hostile input fails
//! fast with a clear error. Nothing recurses per directory level or per nesting level:
//! the walk keeps its own stack, and the controller runs it on 2 MiB worker stacks. The JSON-stream and YAML readers live in
//! the submodules `json_stream` and `yaml_stream`.

use super::FbcError;
use super::ignore::{INDEX_IGNORE, IgnoreFile, IgnoreStack};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use json_stream::compact_json;
use view::parse_view;
pub use view::{BlobView, EntryView, PropertyView, ReferenceView};

/// Directory levels below the catalog root a walk enters (default of
/// [`Limits::max_dir_depth`]). Real catalogs are one to three levels deep
/// (`<package>/catalog.json`); the walk is iterative, so the bound is about sanity, not
/// the stack (a 2,000-level tree used to overflow it).
pub const MAX_DIR_DEPTH: usize = 64;

/// Deepest JSON nesting of a blob (default of [`Limits::max_json_depth`]): Go's
/// `encoding/json` refuses more (`maxNestingDepth` in its `scanner.go`, error
/// "exceeded max depth"), so catalogd and opm could not read such a catalog.
pub const MAX_JSON_DEPTH: u32 = 10_000;

/// Patterns of `.indexignore` files in effect at once (default of
/// [`Limits::max_ignore_patterns`]); real files hold a handful.
pub const MAX_IGNORE_PATTERNS: usize = 1_000;

/// Blobs in one catalog (default of [`Limits::max_blobs`]). The largest real catalogs
/// hold about ten thousand (the rendered community-operators catalog: 8,005); what is
/// kept per blob while validating, indexing or querying is small but not nothing, so a
/// catalog of a million tiny blobs (195 MB, within the size limit) is refused rather
/// than costing hundreds of megabytes.
pub const MAX_BLOBS: u64 = 250_000;

/// Largest `.indexignore` file in bytes (default of [`Limits::max_ignore_bytes`]).
pub const MAX_IGNORE_BYTES: u64 = 64 << 10;

/// Hard limits for one catalog walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Total bytes read from catalog files.
    pub max_total_bytes: u64,
    /// Directory entries (files and directories, ignored ones included) visited.
    pub max_files: u64,
    /// Size of one blob (one JSON object or one YAML document).
    pub max_blob_bytes: u64,
    /// Directory levels below the root ([`MAX_DIR_DEPTH`]).
    pub max_dir_depth: usize,
    /// JSON nesting of one blob, the blob itself counting as one ([`MAX_JSON_DEPTH`]).
    pub max_json_depth: u32,
    /// `.indexignore` patterns in effect at once, nested files added up
    /// ([`MAX_IGNORE_PATTERNS`]).
    pub max_ignore_patterns: usize,
    /// Size of one `.indexignore` ([`MAX_IGNORE_BYTES`]).
    pub max_ignore_bytes: u64,
    /// Blobs in the whole catalog ([`MAX_BLOBS`]).
    pub max_blobs: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_total_bytes: 1 << 30,
            max_files: 100_000,
            max_blob_bytes: 64 << 20,
            max_dir_depth: MAX_DIR_DEPTH,
            max_json_depth: MAX_JSON_DEPTH,
            max_ignore_patterns: MAX_IGNORE_PATTERNS,
            max_ignore_bytes: MAX_IGNORE_BYTES,
            max_blobs: MAX_BLOBS,
        }
    }
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
        walker.walk_tree(source, f)?;
    } else if meta.is_file() {
        walker.entries = 1;
        walker.read_file(source, meta.len(), f)?;
    } else {
        return Err(FbcError::Parse {
            path: source.to_path_buf(),
            message: "not a regular file or directory (a catalog is a file or a directory tree)"
                .into(),
        });
    }
    Ok(walker.stats)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FbcError + '_ {
    move |source| FbcError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One directory level of the walk: its remaining entries, in order.
struct Frame {
    dir: PathBuf,
    /// Path relative to the catalog root, `/`-separated (`""` for the root).
    rel: String,
    entries: std::vec::IntoIter<(std::ffi::OsString, std::fs::FileType)>,
    /// How many `.indexignore` files were in effect above this directory.
    ignores_len: usize,
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

    /// Walks the tree under `root` depth-first in lexical order, without recursion: one
    /// [`Frame`] per directory level, at most [`Limits::max_dir_depth`] of them.
    fn walk_tree(&mut self, root: &Path, f: &mut BlobFn<'_>) -> Result<(), FbcError> {
        let mut ignores = IgnoreStack::default();
        let mut stack = vec![self.open_dir(root.to_path_buf(), String::new(), &mut ignores)?];
        while let Some(frame) = stack.last_mut() {
            let Some((name, file_type)) = frame.entries.next() else {
                let len = frame.ignores_len;
                stack.pop();
                ignores.truncate(len);
                continue;
            };
            if name == INDEX_IGNORE {
                continue;
            }
            let path = frame.dir.join(&name);
            let rel = if frame.rel.is_empty() {
                name.to_string_lossy().into_owned()
            } else {
                format!("{}/{}", frame.rel, name.to_string_lossy())
            };
            if !file_type.is_dir() {
                self.visit_file(path, &rel, file_type, &ignores, f)?;
            } else if !ignores.is_ignored(&rel, true) {
                if stack.len() > self.limits.max_dir_depth {
                    return Err(self.dir_too_deep(&rel));
                }
                let child = self.open_dir(path, rel, &mut ignores)?;
                stack.push(child);
            }
        }
        Ok(())
    }

    fn dir_too_deep(&self, rel: &str) -> FbcError {
        FbcError::Limit {
            message: format!(
                "catalog directory {rel} is nested deeper than {} directories (limit max_dir_depth): keep the catalog's files within a few levels of its root",
                self.limits.max_dir_depth
            ),
        }
    }

    /// Lists a directory (sorted, counted against [`Limits::max_files`]) and pushes its
    /// `.indexignore`, if any, onto `ignores`.
    fn open_dir(
        &mut self,
        dir: PathBuf,
        rel: String,
        ignores: &mut IgnoreStack,
    ) -> Result<Frame, FbcError> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
            let entry = entry.map_err(io(&dir))?;
            self.count_entry(&dir)?;
            let file_type = entry.file_type().map_err(io(&entry.path()))?;
            entries.push((entry.file_name(), file_type));
        }
        entries.sort_by(|a, b| a.0.as_encoded_bytes().cmp(b.0.as_encoded_bytes()));
        let ignores_len = ignores.len();
        if entries
            .iter()
            .any(|(n, t)| n == INDEX_IGNORE && t.is_file())
        {
            let file = self.read_ignore_file(&dir.join(INDEX_IGNORE), ignores.patterns())?;
            ignores.push(&rel, file);
        }
        Ok(Frame {
            dir,
            rel,
            entries: entries.into_iter(),
            ignores_len,
        })
    }

    /// Reads and parses one `.indexignore`, bounded by [`Limits::max_ignore_bytes`] and,
    /// with the `in_effect` patterns of the files above it, [`Limits::max_ignore_patterns`].
    fn read_ignore_file(&self, path: &Path, in_effect: usize) -> Result<IgnoreFile, FbcError> {
        let max = self.limits.max_ignore_bytes;
        let mut bytes = Vec::new();
        File::open(path)
            .and_then(|f| f.take(max + 1).read_to_end(&mut bytes))
            .map_err(io(path))?;
        if bytes.len() as u64 > max {
            return Err(FbcError::Limit {
                message: format!(
                    "{}: .indexignore is larger than {max} bytes (limit max_ignore_bytes): list fewer patterns, using wildcards",
                    path.display()
                ),
            });
        }
        let text = String::from_utf8(bytes).map_err(|e| FbcError::Parse {
            path: path.to_path_buf(),
            message: format!("invalid UTF-8: {e}"),
        })?;
        let file = IgnoreFile::parse(&text).map_err(|message| FbcError::Parse {
            path: path.to_path_buf(),
            message,
        })?;
        let max = self.limits.max_ignore_patterns;
        if in_effect + file.len() > max {
            return Err(FbcError::Limit {
                message: format!(
                    "{}: more than {max} patterns of .indexignore files would apply here ({} in this file, {in_effect} from .indexignore files above it; limit max_ignore_patterns): list fewer patterns, using wildcards",
                    path.display(),
                    file.len()
                ),
            });
        }
        Ok(file)
    }

    /// A directory entry that is not a directory: read if it is a regular file that is
    /// not ignored; a link or a special file that is not ignored is an error.
    fn visit_file(
        &mut self,
        path: PathBuf,
        rel: &str,
        file_type: std::fs::FileType,
        ignores: &IgnoreStack,
        f: &mut BlobFn<'_>,
    ) -> Result<(), FbcError> {
        if ignores.is_ignored(rel, false) {
            return Ok(());
        }
        if file_type.is_file() {
            let len = std::fs::metadata(&path).map_err(io(&path))?.len();
            return self.read_file(&path, len, f);
        }
        let message = if file_type.is_symlink() {
            "symbolic links are not allowed in a catalog"
        } else {
            "not a regular file or directory"
        };
        Err(FbcError::Parse {
            path,
            message: message.into(),
        })
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
            Err(e) if view::is_limit(&e) => return Err(parse_err(&e)),
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
        if self.stats.blobs > self.limits.max_blobs {
            return Err(FbcError::Limit {
                message: format!(
                    "{}:{line}: catalog has more than {} blobs (limit max_blobs): real catalogs hold tens of thousands at most; split it into several catalogs",
                    path.display(),
                    self.limits.max_blobs
                ),
            });
        }
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
mod view;
mod yaml_stream;

#[cfg(test)]
mod tests;

//! Safe, bounded unpacking of image layers (tar, tar+gzip, tar+zstd) into a fresh
//! directory: OCI whiteouts across layers, optional extraction of one sub-directory,
//! and refusal of anything that could write or point outside the destination
//! (`..`, absolute paths, links leaving the tree, paths through symlinks, device
//! files, fifos, whiteouts of `.`/`..`). Limits on expanded bytes, entry count,
//! single-file size and directory depth stop decompression bombs early.
//!
//! Cost: each entry costs a bounded number of file-system calls, whatever the depth
//! of its path or the number of entries before it. The directories already created or
//! checked in this unpack are remembered in a [`PathTree`] (one step per path
//! component), so a parent is checked once, not once per entry below it; removals and
//! replacements forget what they removed. Before that, every entry re-checked every
//! parent by its full path: a 50 KB layer of 2,000 files 1,900 directories deep took
//! minutes (`unpack::tests::deep_trees_within_the_limit_unpack_in_linear_time`).
//! Synchronous: run it on a blocking thread.

use std::cell::Cell;
use std::fs;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

mod path_tree;
mod write;

use super::error::ImageError;
use path_tree::PathTree;
use write::{
    prepare_parents, remove_lower, verify_links, write_dir, write_file, write_hard_link,
    write_symlink,
};

/// Default of [`UnpackLimits::max_expanded_bytes`]: 1 GiB.
pub const MAX_EXPANDED_BYTES: u64 = 1 << 30;
/// Default of [`UnpackLimits::max_entries`]: 100,000.
pub const MAX_ENTRIES: u64 = 100_000;
/// Default of [`UnpackLimits::max_file_bytes`]: 512 MiB.
pub const MAX_FILE_BYTES: u64 = 512 << 20;
/// Default of [`UnpackLimits::max_depth`]: 256 directories. Real images nest far
/// less: bundles 1 (`manifests/`, `metadata/`), catalogs 2
/// (`configs/<package>/catalog.yaml`), base-image file systems about ten
/// (`usr/share/zoneinfo/America/Argentina/…`); 256 one-letter components still fit
/// well within `PATH_MAX` (4096 bytes).
pub const MAX_DIRECTORY_DEPTH: usize = 256;

/// Bounds applied while unpacking (over all layers of one image together).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnpackLimits {
    /// Total decompressed tar bytes read over all layers ([`MAX_EXPANDED_BYTES`]).
    pub max_expanded_bytes: u64,
    /// Total tar entries over all layers, extracted or not ([`MAX_ENTRIES`]).
    pub max_entries: u64,
    /// Size of one regular file ([`MAX_FILE_BYTES`]).
    pub max_file_bytes: u64,
    /// Most directories one entry may be nested in, extracted or not: `a/b/c` is in 2
    /// ([`MAX_DIRECTORY_DEPTH`]).
    pub max_depth: usize,
}

impl Default for UnpackLimits {
    fn default() -> Self {
        UnpackLimits {
            max_expanded_bytes: MAX_EXPANDED_BYTES,
            max_entries: MAX_ENTRIES,
            max_file_bytes: MAX_FILE_BYTES,
            max_depth: MAX_DIRECTORY_DEPTH,
        }
    }
}

/// One downloaded, digest-verified layer blob on disk.
#[derive(Clone, Debug)]
pub struct LayerFile {
    pub path: PathBuf,
    pub digest: String,
    pub media_type: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
    Zstd,
}

/// Media types we accept as layers.
pub(crate) fn layer_media_type_supported(media_type: &str) -> bool {
    matches!(
        media_type,
        "application/vnd.oci.image.layer.v1.tar"
            | "application/vnd.oci.image.layer.v1.tar+gzip"
            | "application/vnd.oci.image.layer.v1.tar+zstd"
            | "application/vnd.docker.image.rootfs.diff.tar"
            | "application/vnd.docker.image.rootfs.diff.tar.gzip"
            | "application/vnd.docker.image.rootfs.diff.tar.zstd"
    )
}

/// Split an archive path into normal components; `Err(reason)` for `..` or absolute.
pub(crate) fn normalize_entry_path(raw: &str) -> Result<Vec<String>, String> {
    if raw.starts_with('/') {
        return Err("absolute path".to_string());
    }
    let mut out = Vec::new();
    for c in raw.split('/') {
        match c {
            "" | "." => {}
            ".." => return Err("path contains \"..\"".to_string()),
            c if c.contains('\0') => return Err("path contains NUL".to_string()),
            c => out.push(c.to_string()),
        }
    }
    Ok(out)
}

/// Resolve a symlink `target` written at image path `link` (components) lexically.
/// Returns the image-root-relative components, or `Err` if it leaves the image.
pub(crate) fn resolve_symlink(link: &[String], target: &str) -> Result<Vec<String>, String> {
    if target.is_empty() {
        return Err("empty symlink target".to_string());
    }
    if target.starts_with('/') {
        return Err(format!("symlink target {target:?} is an absolute path"));
    }
    let mut cur: Vec<String> = link[..link.len().saturating_sub(1)].to_vec();
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if cur.pop().is_none() {
                    return Err(format!("symlink target {target:?} leaves the image"));
                }
            }
            c => cur.push(c.to_string()),
        }
    }
    Ok(cur)
}

/// Counts decompressed bytes and fails once the shared budget is exhausted.
struct Budget<R> {
    inner: R,
    used: Rc<Cell<u64>>,
    limit: u64,
    exceeded: Rc<Cell<bool>>,
}

impl<R: Read> Read for Budget<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let used = self.used.get().saturating_add(n as u64);
        self.used.set(used);
        if used > self.limit {
            self.exceeded.set(true);
            return Err(io::Error::other("expanded size limit exceeded"));
        }
        Ok(n)
    }
}

struct Ctx<'a> {
    image: &'a str,
    dest: &'a Path,
    subdir: &'a [String],
    limits: &'a UnpackLimits,
    entries: u64,
    used: Rc<Cell<u64>>,
    exceeded: Rc<Cell<bool>>,
    seen_subdir: bool,
    /// Paths (relative to `dest`) known to be real directories: created or checked by
    /// this unpack and not removed or replaced since. Only this unpack writes `dest`.
    dirs: PathTree,
}

/// Unpack `layers` (bottom first) into `dest` (must exist and be empty). With a
/// non-empty `subdir` (image path components) only that directory's content is
/// written, as the root of `dest`.
pub fn unpack_layers(
    image: &str,
    layers: &[LayerFile],
    dest: &Path,
    subdir: &[String],
    limits: &UnpackLimits,
) -> Result<(), ImageError> {
    let mut ctx = Ctx {
        image,
        dest,
        subdir,
        limits,
        entries: 0,
        used: Rc::new(Cell::new(0)),
        exceeded: Rc::new(Cell::new(false)),
        seen_subdir: subdir.is_empty(),
        dirs: PathTree::default(),
    };
    for layer in layers {
        unpack_one(&mut ctx, layer)?;
    }
    if !ctx.seen_subdir {
        return Err(ImageError::DirectoryMissing {
            image: image.to_string(),
            dir: format!("/{}", subdir.join("/")),
        });
    }
    verify_links(image, dest)?;
    Ok(())
}

/// Opens a layer blob, decompressed as its first bytes say, counted against the budget.
fn open_layer(
    ctx: &Ctx<'_>,
    layer: &LayerFile,
) -> Result<tar::Archive<Budget<Box<dyn Read>>>, ImageError> {
    let image = ctx.image;
    let file = fs::File::open(&layer.path).map_err(|e| ImageError::io(image, &layer.path, e))?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let compression = sniff(&mut reader).map_err(|e| ImageError::io(image, &layer.path, e))?;
    let decoded: Box<dyn Read> = match compression {
        Compression::None => Box::new(reader),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(reader)),
        Compression::Zstd => Box::new(
            zstd::stream::read::Decoder::with_buffer(reader)
                .map_err(|e| ImageError::io(image, &layer.path, e))?,
        ),
    };
    let budget = Budget {
        inner: decoded,
        used: ctx.used.clone(),
        limit: ctx.limits.max_expanded_bytes,
        exceeded: ctx.exceeded.clone(),
    };
    Ok(tar::Archive::new(budget))
}

/// Unpacks one layer over what the layers below left in `ctx.dest`.
fn unpack_one(ctx: &mut Ctx<'_>, layer: &LayerFile) -> Result<(), ImageError> {
    let mut archive = open_layer(ctx, layer)?;
    let mut current = PathTree::default();
    let entries = archive.entries().map_err(|e| read_err(ctx, layer, e))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| read_err(ctx, layer, e))?;
        ctx.entries += 1;
        if ctx.entries > ctx.limits.max_entries {
            return Err(limit(
                ctx,
                layer,
                "number of tar entries",
                ctx.limits.max_entries,
            ));
        }
        if let Some(rel) = unpack_entry(ctx, layer, &mut entry, &current)? {
            current.insert(&rel);
        }
    }
    Ok(())
}

/// One tar entry: a whiteout is applied, an entry outside the extracted directory is
/// skipped, anything else is written. The path written (relative to `dest`), if any.
fn unpack_entry<R: Read>(
    ctx: &mut Ctx<'_>,
    layer: &LayerFile,
    entry: &mut tar::Entry<'_, R>,
    current: &PathTree,
) -> Result<Option<Vec<String>>, ImageError> {
    let image = ctx.image;
    let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
    let unsafe_entry = |reason: String| ImageError::UnsafeEntry {
        image: image.to_string(),
        layer: layer.digest.clone(),
        entry: shorten(&raw),
        reason,
    };
    let kind = entry.header().entry_type();
    if matches!(
        kind,
        tar::EntryType::XGlobalHeader | tar::EntryType::XHeader
    ) {
        return Ok(None);
    }
    let comps = normalize_entry_path(&raw).map_err(&unsafe_entry)?;
    let Some((base, parent)) = comps.split_last() else {
        return Ok(None); // "./" itself
    };
    if parent.len() > ctx.limits.max_depth {
        return Err(unsafe_entry(format!(
            "nested deeper than {} directories ({} directories)",
            ctx.limits.max_depth,
            parent.len()
        )));
    }
    // Whiteouts.
    if let Some(name) = base.strip_prefix(".wh.") {
        if name == ".wh..opq" {
            remove_lower(ctx, parent, current, true)?;
        } else {
            let mut target = parent.to_vec();
            target.push(whiteout_target(name).map_err(&unsafe_entry)?.to_string());
            remove_lower(ctx, &target, current, false)?;
        }
        return Ok(None);
    }
    // Map into the extracted area.
    let rel: Vec<String> = if comps.starts_with(ctx.subdir) {
        comps[ctx.subdir.len()..].to_vec()
    } else {
        return Ok(None);
    };
    ctx.seen_subdir = true;
    if rel.is_empty() {
        if !kind.is_dir() {
            return Err(unsafe_entry(
                "the extracted directory is not a directory".into(),
            ));
        }
        return Ok(None);
    }
    let target = ctx.dest.join(rel.join("/"));
    prepare_parents(ctx, &rel).map_err(&unsafe_entry)?;
    let to = Target {
        rel: &rel,
        path: &target,
    };
    match kind {
        tar::EntryType::Directory => write_dir(ctx, to)?,
        tar::EntryType::Regular | tar::EntryType::Continuous => {
            write_file(ctx, layer, entry, to, &raw)?;
        }
        tar::EntryType::Symlink => write_symlink(ctx, entry, &comps, to, &unsafe_entry)?,
        tar::EntryType::Link => write_hard_link(ctx, entry, to, &unsafe_entry)?,
        tar::EntryType::Char | tar::EntryType::Block => {
            return Err(unsafe_entry("device files are not allowed".into()));
        }
        tar::EntryType::Fifo => {
            return Err(unsafe_entry("fifos are not allowed".into()));
        }
        tar::EntryType::GNUSparse => {
            return Err(unsafe_entry("sparse files are not supported".into()));
        }
        other => {
            return Err(unsafe_entry(format!(
                "unsupported tar entry type {other:?}"
            )));
        }
    }
    Ok(Some(rel))
}

/// Where an entry is written: its path relative to `dest`, and on disk.
#[derive(Clone, Copy)]
struct Target<'a> {
    rel: &'a [String],
    path: &'a Path,
}

/// The name a whiteout `.wh.<name>` removes: one plain file name. `.`, `..` and an
/// empty name would remove the whiteout's own directory or the one above it
/// (`unpack::tests::whiteouts_of_dot_dot_dot_and_empty_names_are_refused`).
fn whiteout_target(name: &str) -> Result<&str, String> {
    match name {
        "" => Err("whiteout without a name to remove".to_string()),
        "." | ".." => Err(format!(
            "whiteout of {name:?} would remove a directory, not an entry in it"
        )),
        n if n.contains('/') || n.contains('\0') => {
            Err("whiteout name contains a slash or NUL".to_string())
        }
        n => Ok(n),
    }
}

/// At most 256 bytes of `s` (on a character boundary) for messages: entry names and
/// link targets come from the image and may be kilobytes long.
fn shorten(s: &str) -> String {
    const MAX: usize = 256;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
}

fn sniff<R: io::BufRead>(r: &mut R) -> io::Result<Compression> {
    let head = r.fill_buf()?;
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else {
        Compression::None
    })
}

fn read_err(ctx: &Ctx<'_>, layer: &LayerFile, e: io::Error) -> ImageError {
    if ctx.exceeded.get() {
        return limit(ctx, layer, "expanded size", ctx.limits.max_expanded_bytes);
    }
    ImageError::CorruptLayer {
        image: ctx.image.to_string(),
        layer: layer.digest.clone(),
        detail: e.to_string(),
    }
}

fn limit(ctx: &Ctx<'_>, layer: &LayerFile, what: &str, limit: u64) -> ImageError {
    ImageError::LimitExceeded {
        image: ctx.image.to_string(),
        layer: layer.digest.clone(),
        what: what.to_string(),
        limit,
    }
}

#[cfg(test)]
mod tests;

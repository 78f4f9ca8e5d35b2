//! Safe, bounded unpacking of image layers (tar, tar+gzip, tar+zstd) into a fresh
//! directory: OCI whiteouts across layers, optional extraction of one sub-directory,
//! and refusal of anything that could write or point outside the destination
//! (`..`, absolute paths, links leaving the tree, paths through symlinks, device
//! files, fifos). Limits on expanded bytes, entry count and single-file size stop
//! decompression bombs early. Synchronous: run it on a blocking thread.

use std::cell::Cell;
use std::collections::HashSet;
use std::fs;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::error::ImageError;

/// Bounds applied while unpacking (over all layers of one image together).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnpackLimits {
    /// Total decompressed tar bytes read over all layers (default 1 GiB).
    pub max_expanded_bytes: u64,
    /// Total tar entries over all layers, extracted or not (default 100,000).
    pub max_entries: u64,
    /// Size of one regular file (default 512 MiB).
    pub max_file_bytes: u64,
}

impl Default for UnpackLimits {
    fn default() -> Self {
        UnpackLimits {
            max_expanded_bytes: 1 << 30,
            max_entries: 100_000,
            max_file_bytes: 512 << 20,
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
    let mut current: HashSet<Vec<String>> = HashSet::new();
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
            current.insert(rel);
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
    current: &HashSet<Vec<String>>,
) -> Result<Option<Vec<String>>, ImageError> {
    let image = ctx.image;
    let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
    let unsafe_entry = |reason: String| ImageError::UnsafeEntry {
        image: image.to_string(),
        layer: layer.digest.clone(),
        entry: raw.clone(),
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
    if comps.is_empty() {
        return Ok(None); // "./" itself
    }
    // Whiteouts.
    let base = comps[comps.len() - 1].as_str();
    if let Some(name) = base.strip_prefix(".wh.") {
        let parent = &comps[..comps.len() - 1];
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
    match kind {
        tar::EntryType::Directory => match fs::symlink_metadata(&target) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                remove_any(&target).map_err(|e| ImageError::io(image, &target, e))?;
                fs::create_dir(&target).map_err(|e| ImageError::io(image, &target, e))?;
            }
            Err(_) => {
                fs::create_dir(&target).map_err(|e| ImageError::io(image, &target, e))?;
            }
        },
        tar::EntryType::Regular | tar::EntryType::Continuous => {
            write_file(ctx, layer, entry, &target, &raw)?;
        }
        tar::EntryType::Symlink => write_symlink(ctx, entry, &comps, &target, &unsafe_entry)?,
        tar::EntryType::Link => write_hard_link(ctx, entry, &target, &unsafe_entry)?,
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

/// The name a whiteout `.wh.<name>` removes: one plain file name. `.`, `..` and an
/// empty name would remove the whiteout's own directory or the one above it
/// (`unpack_tests::whiteouts_of_dot_dot_dot_and_empty_names_are_refused`).
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

/// A regular file, within the per-file and expanded-size limits; mode 0755 or 0644.
fn write_file<R: Read>(
    ctx: &Ctx<'_>,
    layer: &LayerFile,
    entry: &mut tar::Entry<'_, R>,
    target: &Path,
    raw: &str,
) -> Result<(), ImageError> {
    let image = ctx.image;
    let size = entry.header().size().map_err(|e| read_err(ctx, layer, e))?;
    if size > ctx.limits.max_file_bytes {
        return Err(limit(
            ctx,
            layer,
            &format!("file {raw:?} ({size} bytes)"),
            ctx.limits.max_file_bytes,
        ));
    }
    remove_existing(target).map_err(|e| ImageError::io(image, target, e))?;
    let mut out = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(target)
        .map_err(|e| ImageError::io(image, target, e))?;
    let mut limited = (&mut *entry).take(ctx.limits.max_file_bytes + 1);
    io::copy(&mut limited, &mut out).map_err(|e| {
        if ctx.exceeded.get() {
            limit(ctx, layer, "expanded size", ctx.limits.max_expanded_bytes)
        } else {
            ImageError::io(image, target, e)
        }
    })?;
    let exec = entry
        .header()
        .mode()
        .map(|m| m & 0o111 != 0)
        .unwrap_or(false);
    set_mode(target, if exec { 0o755 } else { 0o644 }).map_err(|e| ImageError::io(image, target, e))
}

/// The link target of a symlink or hard link entry (empty if unreadable).
fn link_name<R: Read>(entry: &tar::Entry<'_, R>) -> String {
    entry
        .link_name_bytes()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// A symlink whose target stays inside the extracted directory.
fn write_symlink<R: Read>(
    ctx: &Ctx<'_>,
    entry: &tar::Entry<'_, R>,
    comps: &[String],
    target: &Path,
    unsafe_entry: &dyn Fn(String) -> ImageError,
) -> Result<(), ImageError> {
    let image = ctx.image;
    let link = link_name(entry);
    let resolved = resolve_symlink(comps, &link).map_err(unsafe_entry)?;
    if !resolved.starts_with(ctx.subdir) {
        return Err(unsafe_entry(format!(
            "symlink target {link:?} points outside the extracted directory"
        )));
    }
    remove_existing(target).map_err(|e| ImageError::io(image, target, e))?;
    std::os::unix::fs::symlink(&link, target).map_err(|e| ImageError::io(image, target, e))
}

/// A hard link to a regular file extracted earlier inside the extracted directory.
fn write_hard_link<R: Read>(
    ctx: &Ctx<'_>,
    entry: &tar::Entry<'_, R>,
    target: &Path,
    unsafe_entry: &dyn Fn(String) -> ImageError,
) -> Result<(), ImageError> {
    let image = ctx.image;
    let link = link_name(entry);
    let lcomps = normalize_entry_path(&link)
        .map_err(|r| unsafe_entry(format!("hard link target {link:?}: {r}")))?;
    if lcomps.is_empty() || !lcomps.starts_with(ctx.subdir) {
        return Err(unsafe_entry(format!(
            "hard link target {link:?} is outside the extracted directory"
        )));
    }
    let lrel = &lcomps[ctx.subdir.len()..];
    let src = ctx.dest.join(lrel.join("/"));
    match fs::symlink_metadata(&src) {
        Ok(m) if m.is_file() && !lrel.is_empty() && parents_are_dirs(ctx.dest, lrel) => {}
        _ => {
            return Err(unsafe_entry(format!(
                "hard link target {link:?} is not a regular file extracted earlier"
            )));
        }
    }
    remove_existing(target).map_err(|e| ImageError::io(image, target, e))?;
    fs::hard_link(&src, target).map_err(|e| ImageError::io(image, target, e))
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

/// Make sure every ancestor of `rel` inside `dest` is a real directory (creating
/// missing ones, replacing files); refuse to pass through a symlink.
fn prepare_parents(ctx: &Ctx<'_>, rel: &[String]) -> Result<(), String> {
    let mut p = ctx.dest.to_path_buf();
    for c in &rel[..rel.len().saturating_sub(1)] {
        p.push(c);
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => {}
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!("path goes through the symlink {c:?}"));
            }
            Ok(_) => {
                fs::remove_file(&p).map_err(|e| e.to_string())?;
                fs::create_dir(&p).map_err(|e| e.to_string())?;
            }
            Err(_) => fs::create_dir(&p).map_err(|e| e.to_string())?,
        }
    }
    Ok(())
}

/// Apply a whiteout at image path `target`: remove it (or, for an opaque marker,
/// its children) from lower layers, keeping what the current layer created.
fn remove_lower(
    ctx: &Ctx<'_>,
    target: &[String],
    current: &HashSet<Vec<String>>,
    children_only: bool,
) -> Result<(), ImageError> {
    let image = ctx.image;
    // Does the whiteout reach into the extracted area?
    let rel: Vec<String> = if target.starts_with(ctx.subdir) {
        target[ctx.subdir.len()..].to_vec()
    } else if ctx.subdir.starts_with(target) {
        // An ancestor of (or the) extracted directory is whited out / made opaque:
        // everything extracted so far from lower layers goes.
        Vec::new()
    } else {
        return Ok(());
    };
    let whole_root = rel.is_empty();
    if !whole_root && !children_only {
        if current.contains(&rel) {
            return Ok(());
        }
        let p = ctx.dest.join(rel.join("/"));
        if parents_are_dirs(ctx.dest, &rel) && fs::symlink_metadata(&p).is_ok() {
            remove_any(&p).map_err(|e| ImageError::io(image, &p, e))?;
        }
        return Ok(());
    }
    let dir = ctx.dest.join(rel.join("/"));
    if !parents_are_dirs(ctx.dest, &rel) {
        return Ok(());
    }
    match fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        _ => return Ok(()),
    }
    let rd = fs::read_dir(&dir).map_err(|e| ImageError::io(image, &dir, e))?;
    for child in rd {
        let child = child.map_err(|e| ImageError::io(image, &dir, e))?;
        let mut crel = rel.clone();
        crel.push(child.file_name().to_string_lossy().into_owned());
        if current.iter().any(|c| c.starts_with(&crel)) {
            continue; // created (or contains something created) by this layer
        }
        let p = child.path();
        remove_any(&p).map_err(|e| ImageError::io(image, &p, e))?;
    }
    Ok(())
}

/// True if `dest/rel[..n-1]` (and `rel` itself when it is a dir) are real directories.
fn parents_are_dirs(dest: &Path, rel: &[String]) -> bool {
    let mut p = dest.to_path_buf();
    for c in &rel[..rel.len().saturating_sub(1)] {
        p.push(c);
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => {}
            _ => return false,
        }
    }
    true
}

fn remove_any(p: &Path) -> io::Result<()> {
    let m = fs::symlink_metadata(p)?;
    if m.is_dir() {
        fs::remove_dir_all(p)
    } else {
        fs::remove_file(p)
    }
}

fn remove_existing(p: &Path) -> io::Result<()> {
    match fs::symlink_metadata(p) {
        Ok(_) => remove_any(p),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn set_mode(p: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(mode))
}

/// Final check: every symlink in the tree resolves (physically) inside `dest`.
fn verify_links(image: &str, dest: &Path) -> Result<(), ImageError> {
    let root = fs::canonicalize(dest).map_err(|e| ImageError::io(image, dest, e))?;
    let mut stack = vec![dest.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let rd = fs::read_dir(&dir).map_err(|e| ImageError::io(image, &dir, e))?;
        for child in rd {
            let child = child.map_err(|e| ImageError::io(image, &dir, e))?;
            let p = child.path();
            let ft = child
                .file_type()
                .map_err(|e| ImageError::io(image, &p, e))?;
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_symlink() {
                // Dangling links are harmless; links that resolve must stay inside.
                if let Ok(real) = fs::canonicalize(&p)
                    && !real.starts_with(&root)
                {
                    let entry = p.strip_prefix(dest).unwrap_or(&p).display().to_string();
                    return Err(ImageError::UnsafeEntry {
                        image: image.to_string(),
                        layer: "(all layers)".to_string(),
                        entry,
                        reason: "symlink resolves outside the extracted directory".to_string(),
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "unpack_tests.rs"]
mod tests;

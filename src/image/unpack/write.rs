//! Writing one tar entry into the destination: directories, regular files (within the
//! file and expanded-size limits), symbolic and hard links (refused when they leave
//! the tree), replacing or removing what a lower layer wrote, and the final check that
//! no link points outside ([`verify_links`]).

use std::fs;
use std::io::{self, Read};
use std::path::Path;

use super::path_tree::PathTree;
use super::{
    Ctx, ImageError, LayerFile, Target, limit, normalize_entry_path, read_err, resolve_symlink,
    shorten,
};

/// A directory entry: kept if it exists as a directory, else created (replacing
/// what is there).
pub(super) fn write_dir(ctx: &mut Ctx<'_>, to: Target<'_>) -> Result<(), ImageError> {
    let image = ctx.image;
    let io = |e| ImageError::io(image, to.path, e);
    match fs::symlink_metadata(to.path) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            forget_and_remove(ctx, to).map_err(io)?;
            fs::create_dir(to.path).map_err(io)?;
        }
        Err(_) => fs::create_dir(to.path).map_err(io)?,
    }
    ctx.dirs.insert(to.rel);
    Ok(())
}

/// A regular file, within the per-file and expanded-size limits; mode 0755 or 0644.
pub(super) fn write_file<R: Read>(
    ctx: &mut Ctx<'_>,
    layer: &LayerFile,
    entry: &mut tar::Entry<'_, R>,
    to: Target<'_>,
    raw: &str,
) -> Result<(), ImageError> {
    let image = ctx.image;
    let target = to.path;
    let size = entry.header().size().map_err(|e| read_err(ctx, layer, e))?;
    if size > ctx.limits.max_file_bytes {
        return Err(limit(
            ctx,
            layer,
            &format!("file {:?} ({size} bytes)", shorten(raw)),
            ctx.limits.max_file_bytes,
        ));
    }
    remove_existing(ctx, to).map_err(|e| ImageError::io(image, target, e))?;
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
pub(super) fn write_symlink<R: Read>(
    ctx: &mut Ctx<'_>,
    entry: &tar::Entry<'_, R>,
    comps: &[String],
    to: Target<'_>,
    unsafe_entry: &dyn Fn(String) -> ImageError,
) -> Result<(), ImageError> {
    let image = ctx.image;
    let target = to.path;
    let link = link_name(entry);
    let resolved = resolve_symlink(comps, &link).map_err(unsafe_entry)?;
    if !resolved.starts_with(ctx.subdir) {
        return Err(unsafe_entry(format!(
            "symlink target {:?} points outside the extracted directory",
            shorten(&link)
        )));
    }
    remove_existing(ctx, to).map_err(|e| ImageError::io(image, target, e))?;
    std::os::unix::fs::symlink(&link, target).map_err(|e| ImageError::io(image, target, e))
}

/// A hard link to a regular file extracted earlier inside the extracted directory.
pub(super) fn write_hard_link<R: Read>(
    ctx: &mut Ctx<'_>,
    entry: &tar::Entry<'_, R>,
    to: Target<'_>,
    unsafe_entry: &dyn Fn(String) -> ImageError,
) -> Result<(), ImageError> {
    let image = ctx.image;
    let target = to.path;
    let link = link_name(entry);
    let shown = shorten(&link);
    let lcomps = normalize_entry_path(&link)
        .map_err(|r| unsafe_entry(format!("hard link target {shown:?}: {r}")))?;
    if lcomps.is_empty() || !lcomps.starts_with(ctx.subdir) {
        return Err(unsafe_entry(format!(
            "hard link target {shown:?} is outside the extracted directory"
        )));
    }
    let lrel = &lcomps[ctx.subdir.len()..];
    let src = ctx.dest.join(lrel.join("/"));
    let regular = !lrel.is_empty()
        && parents_are_dirs(ctx, lrel)
        && fs::symlink_metadata(&src).is_ok_and(|m| m.is_file());
    if !regular {
        return Err(unsafe_entry(format!(
            "hard link target {shown:?} is not a regular file extracted earlier"
        )));
    }
    remove_existing(ctx, to).map_err(|e| ImageError::io(image, target, e))?;
    fs::hard_link(&src, target).map_err(|e| ImageError::io(image, target, e))
}

/// Make sure every ancestor of `rel` inside `dest` is a real directory (creating
/// missing ones, replacing files); refuse to pass through a symlink. Ancestors
/// already known as directories are not looked at again.
pub(super) fn prepare_parents(ctx: &mut Ctx<'_>, rel: &[String]) -> Result<(), String> {
    let parents = &rel[..rel.len().saturating_sub(1)];
    let known = ctx.dirs.member_prefix(parents);
    let mut p = ctx.dest.to_path_buf();
    p.extend(&parents[..known]);
    for (i, c) in parents.iter().enumerate().skip(known) {
        p.push(c);
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => {}
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!("path goes through the symlink {:?}", shorten(c)));
            }
            Ok(_) => {
                fs::remove_file(&p).map_err(|e| e.to_string())?;
                fs::create_dir(&p).map_err(|e| e.to_string())?;
            }
            Err(_) => fs::create_dir(&p).map_err(|e| e.to_string())?,
        }
        ctx.dirs.insert(&parents[..=i]);
    }
    Ok(())
}

/// Apply a whiteout at image path `target`: remove it (or, for an opaque marker,
/// its children) from lower layers, keeping what the current layer created.
pub(super) fn remove_lower(
    ctx: &mut Ctx<'_>,
    target: &[String],
    current: &PathTree,
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
        if parents_are_dirs(ctx, &rel) && fs::symlink_metadata(&p).is_ok() {
            let to = Target {
                rel: &rel,
                path: &p,
            };
            forget_and_remove(ctx, to).map_err(|e| ImageError::io(image, &p, e))?;
        }
        return Ok(());
    }
    let dir = ctx.dest.join(rel.join("/"));
    if !parents_are_dirs(ctx, &rel) {
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
        if current.covers(&crel) {
            continue; // created (or contains something created) by this layer
        }
        let p = child.path();
        let to = Target {
            rel: &crel,
            path: &p,
        };
        forget_and_remove(ctx, to).map_err(|e| ImageError::io(image, &p, e))?;
    }
    Ok(())
}

/// True if the ancestors of `rel` inside `dest` are real directories (remembering
/// those it checks).
fn parents_are_dirs(ctx: &mut Ctx<'_>, rel: &[String]) -> bool {
    let parents = &rel[..rel.len().saturating_sub(1)];
    let known = ctx.dirs.member_prefix(parents);
    let mut p = ctx.dest.to_path_buf();
    p.extend(&parents[..known]);
    for (i, c) in parents.iter().enumerate().skip(known) {
        p.push(c);
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => ctx.dirs.insert(&parents[..=i]),
            _ => return false,
        }
    }
    true
}

/// Removes what is at `to` (a whole directory tree, a file or a link) and forgets
/// the directories it held.
fn forget_and_remove(ctx: &mut Ctx<'_>, to: Target<'_>) -> io::Result<()> {
    ctx.dirs.remove(to.rel);
    let m = fs::symlink_metadata(to.path)?;
    if m.is_dir() {
        fs::remove_dir_all(to.path)
    } else {
        fs::remove_file(to.path)
    }
}

/// [`forget_and_remove`] if anything is at `to`.
fn remove_existing(ctx: &mut Ctx<'_>, to: Target<'_>) -> io::Result<()> {
    match fs::symlink_metadata(to.path) {
        Ok(_) => forget_and_remove(ctx, to),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            ctx.dirs.remove(to.rel);
            Ok(())
        }
        Err(e) => Err(e),
    }
}

fn set_mode(p: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(mode))
}

/// Final check: every symlink in the tree resolves (physically) inside `dest`.
pub(super) fn verify_links(image: &str, dest: &Path) -> Result<(), ImageError> {
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
